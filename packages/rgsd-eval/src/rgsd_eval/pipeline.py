"""``rgsd eval`` end to end: check inputs, evaluate each run, draw figures and videos, write the report.

Output folder::

    <out>/report.md  metrics.json  metrics.csv  eval_config.yaml  spread.png  [comparison.png]
    <out>/<run label>/trajectories.png  kappa_sweep.png  embedding.png  embeddings_cosine.png  videos/*.mp4  videos/*_replay.html
    <out>/<run label>/clip_latents.json  top_views.npz (the top views' pelvis paths as data: rgsd_eval.topviews)

The folder is written beside ``<out>`` and then renamed onto it: an earlier report there is replaced whole (``rgsd_eval.output``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rgsd_envs.motion.clip import MotionClip
from rgsd_envs.motion.library import MotionLib, MotionSource
from rgsd_envs.render import rendering_problem
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.config import save_yaml
from rgsd_envs.utils.files import staged_folder
from rgsd_eval.config import EvalConfig
from rgsd_eval.evaluate import (
    ReferenceFeatures,
    RunEvaluation,
    category_order,
    eval_plan,
    evaluate_run,
    search_size,
)
from rgsd_eval.output import check_output
from rgsd_eval.plots import (
    figure_or_warning,
    plot_embedding,
    plot_embedding_cosine,
    plot_kappa_sweep,
    plot_spread,
    plot_trajectories,
    plot_trajectory_comparison,
    top_view_variants,
)
from rgsd_eval.report import (
    VIDEO_ADVICE,
    ReportInputs,
    RunArtifacts,
    clips_selection,
    unscored_fid_text,
    write_report,
)
from rgsd_eval.runs import LoadedRun, load_run, representative_clips, unique_labels
from rgsd_eval.topviews import TOP_VIEWS, save_top_views
from rgsd_eval.videos import write_run_replays, write_run_videos

log = logging.getLogger(__name__)


def run_evaluation(
    runs: Sequence[str | os.PathLike],
    motions: MotionSource | None,
    out: str | os.PathLike,
    cfg: EvalConfig | None = None,
) -> dict[str, Path]:
    """Evaluate runs on a motion set (default: the first run's training motions, every source of them) and write the
    report into out, replacing an earlier report there whole (``rgsd_eval.output``)."""
    cfg = cfg or EvalConfig()
    if not runs:
        raise ValueError("give at least one run folder (--run <dir>)")
    out = Path(out)
    for r in runs:  # a downstream run is named as such, with its skill-policy run
        RunDir(r).check_kind(RunDir.SKILL_RUN, "rgsd eval --run")
    earlier = check_output(out, runs)
    labels = unique_labels([Path(r).resolve().name for r in runs])
    loaded = [
        load_run(r, cfg.latent, cfg.best_of, label, device=cfg.device, per_step=cfg.per_step_latents)
        for r, label in zip(runs, labels)
    ]  # all checked before any work
    spec = _one_or_several(motions if motions is not None else loaded[0].run.training_motions())
    motions_lib = MotionLib(spec)
    cfg.check_sweep_categories(motions_lib.categories)
    lib, selected = _evaluated_clips(motions_lib, cfg)
    ref = ReferenceFeatures.of(lib, cfg.fid_window)
    unscored = [{"name": lib.names[c], "frames": int(lib.num_frames[c]), "file": lib.origins[c]} for c in ref.short]
    if unscored:
        log.warning("%s", unscored_fid_text(unscored, cfg.fid_window))
    if earlier:
        log.info("%s holds the report of %s: it is replaced when this one is written", out, ", ".join(earlier))
    videos_skipped = _video_problem(cfg)
    with staged_folder(out) as stage:
        paths = _evaluate_into(stage, loaded, lib, ref, cfg, spec, unscored, videos_skipped, selected)
    return {kind: out / path.relative_to(stage) for kind, path in paths.items()}


def _evaluate_into(
    out: Path,
    loaded: list[LoadedRun],
    lib: MotionLib,
    ref: ReferenceFeatures,
    cfg: EvalConfig,
    spec: MotionSource,
    unscored: list[dict[str, Any]],
    videos_skipped: str,
    selected: dict[str, Any],
) -> dict[str, Path]:
    """Evaluate each run, draw its figures and videos, and write the report, all into ``out`` (``selected``: the
    clips evaluated of the motion set's, ``report.clips_selection``)."""
    evaluations: list[RunEvaluation] = []
    artifacts: dict[str, RunArtifacts] = {}
    for run in loaded:
        log.info("evaluating %s (%s latents) on %s clips", run.label, run.latent, _of(selected))
        log.info("%s: %s", run.label, eval_plan(lib, cfg, search_size(run), not videos_skipped).summary(cfg.protocol))
        ev = evaluate_run(run, lib, ref, cfg)
        evaluations.append(ev)
        artifacts[run.label] = _run_artifacts(ev, lib, out, cfg, render=not videos_skipped)
    figures: dict[str, str] = {}
    _figure(figures, "spread", lambda p: plot_spread(evaluations, p), out)
    if len(evaluations) > 1:
        clips = representative_clips(lib, 5)
        kappa, k = cfg.trajectory_kappa_value, cfg.trajectory_rollouts
        _figure(figures, "comparison", lambda p: plot_trajectory_comparison(evaluations, clips, kappa, p, k), out)
    inputs = ReportInputs(
        motions=_motions_label(spec),
        clips=[
            {"name": n, "category": c, "frames": int(f)}
            for n, c, f in zip(lib.names, lib.categories, lib.num_frames.tolist())
        ],
        categories=category_order(lib),
        config=cfg,
        runs=evaluations,
        artifacts=artifacts,
        figures=figures,
        videos_skipped=videos_skipped,
        unscored_fid=unscored,
        clips_selected=selected,
    )
    paths = write_report(inputs, out)
    paths["config"] = save_yaml(cfg, out / "eval_config.yaml")
    return paths


def _evaluated_clips(lib: MotionLib, cfg: EvalConfig) -> tuple[MotionLib, dict[str, Any]]:
    """The library of the clips evaluated (``cfg.max_clips`` of them where the set has more) and
    ``report.clips_selection`` of them."""
    ids = cfg.evaluated_clip_ids(lib.categories)
    selected = clips_selection(len(ids), lib.num_clips)
    if len(ids) == lib.num_clips:
        return lib, selected
    log.info("max_clips = %d: evaluating %s clips (%s)", cfg.max_clips, _of(selected), selected["rule"])
    return lib.subset(ids), selected


def _of(selected: dict[str, Any]) -> str:
    """ "N of M" where only some clips are evaluated, else "M"."""
    n, m = selected["clips"], selected["of"]
    return f"{n} of {m}" if n < m else str(m)


def _video_problem(cfg: EvalConfig) -> str:
    """Why the videos asked for cannot render here ("" if they can or none are asked for), warned in one line
    before any rollout: the metrics, figures, HTML replays and report do not need OpenGL."""
    if not (cfg.video and cfg.video_clips):
        return ""
    problem = rendering_problem()
    if problem is None:
        return ""
    log.warning("videos skipped: %s. %s", problem, VIDEO_ADVICE)
    return problem


def _one_or_several(motions: MotionSource) -> MotionSource:
    """The motions as given: one source as itself (a str), several as a list (``--motions a b``, or a run's
    ``env.motions`` list)."""
    if isinstance(motions, (list, tuple)):
        items = [str(m) if isinstance(m, os.PathLike) else m for m in motions]
        return items[0] if len(items) == 1 else items
    return str(motions) if isinstance(motions, os.PathLike) else motions


def _motions_label(spec: MotionSource) -> str | list[str]:
    """The motions for the report: a source's path or "demo", a clip object by its name; a list for several."""
    items = spec if isinstance(spec, (list, tuple)) else [spec]
    names = [f"clip {m.name}" if isinstance(m, MotionClip) else str(m) for m in items]
    return names[0] if len(names) == 1 else names


def _rel(path: Path | None, root: Path) -> str:
    return "" if path is None else path.relative_to(root).as_posix()


FIGURE_FILES = {
    "spread": "spread.png",
    "comparison": "comparison.png",
    "trajectories": "trajectories.png",
    "kappa_sweep": "kappa_sweep.png",
    "embedding": "embedding.png",
    "embedding_cosine": "embeddings_cosine.png",
}
"""File name of each figure (in the output folder, or in a run's folder under it)."""


def _figure(
    figures: dict[str, str], key: str, draw: Callable[[Path], Path | None], folder: Path, root: Path | None = None
) -> None:
    """``figures[key]``: the figure ``draw(path)`` writes to ``folder/FIGURE_FILES[key]``, relative to ``root``
    (default ``folder``); left out where there is no figure or drawing it failed (``figure_or_warning`` warns)."""
    path = folder / FIGURE_FILES[key]
    written = figure_or_warning(lambda: draw(path), path)
    if written is not None:
        figures[key] = _rel(written, root or folder)


def _run_artifacts(ev: RunEvaluation, lib, out: Path, cfg: EvalConfig, render: bool = True) -> RunArtifacts:
    """Figures and videos of one run under out/<label>/."""
    d = out / ev.label
    art = RunArtifacts()
    kappa, k = cfg.trajectory_kappa_value, cfg.trajectory_rollouts
    _figure(art.figures, "trajectories", lambda p: plot_trajectories(ev, kappa, p, k), d, out)
    save_top_views(
        d / TOP_VIEWS, ev.clip_names, list(lib.categories), kappa, ev.ref_root, ev.imitation_root,
        top_view_variants(ev, kappa, range(len(ev.clip_names))), cfg.trajectory_rollouts,
    )  # fmt: skip
    sweep = cfg.sweep_clip_ids(list(lib.categories))
    _figure(art.figures, "kappa_sweep", lambda p: plot_kappa_sweep(ev, sweep, p, k, cfg.kappas), d, out)
    categories = list(lib.categories)
    _figure(art.figures, "embedding", lambda p: plot_embedding(ev, p, categories), d, out)
    _figure(art.figures, "embedding_cosine", lambda p: plot_embedding_cosine(ev, p, categories), d, out)
    if cfg.video:
        # the replays first: they need no OpenGL, so they are there even when a video cannot render
        art.replays = [(cap, _rel(p, out)) for cap, p in write_run_replays(ev, lib, d / "videos", cfg)]
        if render:
            art.videos = [(cap, _rel(p, out)) for cap, p in write_run_videos(ev, lib, d / "videos", cfg)]
    return art
