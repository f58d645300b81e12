"""``rgsd reproduce``: the paper's whole experiment (its Section 5; docs/reproduce.md) from one command.

- ``scale``: what a scale file (``presets/reproduce/*.yaml``) fixes: budgets, evaluation settings, seeds,
  device, and the stated time of every step;
- ``plan``: the steps (pretrain, train, eval, downstream, seed aggregation, report), their dependencies, the
  commands they run and the expected time of the whole plan;
- ``steps``: running a plan: each step's state in ``<out>/steps.json``, finished steps skipped, interrupted
  ones resumed, failures reported while the rest go on, one progress bar with an ETA;
- ``report``: ``<out>/report.md`` with the paper's tables and figures beside its quoted numbers.
"""
