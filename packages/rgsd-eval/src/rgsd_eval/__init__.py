"""rgsd-eval: evaluation of trained RGSD runs (``rgsd eval``).

Modules, one job each: ``features`` (the FID feature), ``fid`` (Frechet distance,
streamed Gaussian statistics), ``metrics`` (Cartesian error, spreads),
``latents`` (z_m or best-of-N, vMF samples), ``rollouts`` (batched evaluation
rollouts over the vector env), ``runs`` (checked inputs), ``evaluate`` (all
numbers of one run), ``plots`` and ``videos`` (figures, mp4), ``report``
(report.md, metrics.json, metrics.csv), ``pipeline`` (end to end), ``cli``; ``curves`` (training
curves read from a run's TensorBoard log, plotted for several runs).
"""
