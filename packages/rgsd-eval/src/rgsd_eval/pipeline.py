"""``rgsd eval`` end to end: check inputs, evaluate each run, draw figures and videos, write the report.

Output folder::

    <out>/report.md  metrics.json  metrics.csv  eval_config.yaml  spread.png  [comparison.png]
    <out>/<run label>/trajectories.png  kappa_sweep.png  embedding.png  embeddings_cosine.png  videos/*.mp4  videos/*_replay.html
    <out>/<run label>/clip_latents.json  top_views.npz (the top views' pelvis paths as data: rgsd_eval.topviews)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from rgsd_envs.motion.library import MotionLib
from rgsd_envs.render import rendering_problem
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.config import save_yaml
from rgsd_envs.utils.files import InputFileError
from rgsd_eval.config import EvalConfig
from rgsd_eval.evaluate import (
    ReferenceFeatures,
    RunEvaluation,
    category_order,
    eval_plan,
    evaluate_run,
    search_size,
)
from rgsd_eval.plots import (
    plot_embedding,
    plot_embedding_cosine,
    plot_kappa_sweep,
    plot_spread,
    plot_trajectories,
    plot_trajectory_comparison,
    top_view_variants,
)
from rgsd_eval.report import VIDEO_ADVICE, ReportInputs, RunArtifacts, write_report
from rgsd_eval.runs import load_run, representative_clips, unique_labels
from rgsd_eval.topviews import TOP_VIEWS, save_top_views
from rgsd_eval.videos import write_run_replays, write_run_videos

log = logging.getLogger(__name__)


def run_evaluation(
    runs: Sequence[str | os.PathLike],
    motions: str | os.PathLike | None,
    out: str | os.PathLike,
    cfg: EvalConfig | None = None,
) -> dict[str, Path]:
    """Evaluate runs on a motion set (default: the first run's training motions) and write the report into out."""
    cfg = cfg or EvalConfig()
    if not runs:
        raise ValueError("give at least one run folder (--run <dir>)")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputFileError(out, "output path exists and is not a folder")
    for r in runs:  # a downstream run is named as such, with its skill-policy run
        RunDir(r).check_kind(RunDir.SKILL_RUN, "rgsd eval --run")
    labels = unique_labels([Path(r).resolve().name for r in runs])
    loaded = [
        load_run(r, cfg.latent, cfg.best_of, label, device=cfg.device) for r, label in zip(runs, labels)
    ]  # all checked before any work
    spec = motions if motions is not None else _training_motions(loaded[0].run.training_motions())
    lib = MotionLib(spec)
    ref = ReferenceFeatures.of(lib, cfg.fid_window)
    videos_skipped = _video_problem(cfg)
    evaluations: list[RunEvaluation] = []
    artifacts: dict[str, RunArtifacts] = {}
    for run in loaded:
        log.info("evaluating %s (%s latents) on %d clips", run.label, run.latent, lib.num_clips)
        log.info("%s: %s", run.label, eval_plan(lib, cfg, search_size(run), not videos_skipped).summary(cfg.protocol))
        ev = evaluate_run(run, lib, ref, cfg)
        evaluations.append(ev)
        artifacts[run.label] = _run_artifacts(ev, lib, out, cfg, render=not videos_skipped)
    figures = {"spread": _rel(plot_spread(evaluations, out / "spread.png"), out)}
    if len(evaluations) > 1:
        clips = representative_clips(lib, 5)
        figures["comparison"] = _rel(
            plot_trajectory_comparison(
                evaluations, clips, cfg.trajectory_kappa_value, out / "comparison.png", cfg.trajectory_rollouts
            ),
            out,
        )
    inputs = ReportInputs(
        motions=str(spec),
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
    )
    paths = write_report(inputs, out)
    paths["config"] = save_yaml(cfg, out / "eval_config.yaml")
    return paths


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


def _training_motions(motions: str | list[str]) -> str:
    if isinstance(motions, list):
        if len(motions) != 1:
            raise ValueError("the run trained on several motion sources; choose one with --motions")
        return motions[0]
    return motions


def _rel(path: Path | None, root: Path) -> str:
    return "" if path is None else path.relative_to(root).as_posix()


def _run_artifacts(ev: RunEvaluation, lib, out: Path, cfg: EvalConfig, render: bool = True) -> RunArtifacts:
    """Figures and videos of one run under out/<label>/."""
    d = out / ev.label
    art = RunArtifacts()
    art.figures["trajectories"] = _rel(
        plot_trajectories(ev, cfg.trajectory_kappa_value, d / "trajectories.png", cfg.trajectory_rollouts), out
    )
    kappa = cfg.trajectory_kappa_value
    save_top_views(
        d / TOP_VIEWS, ev.clip_names, list(lib.categories), kappa, ev.ref_root, ev.imitation_root,
        top_view_variants(ev, kappa, range(len(ev.clip_names))), cfg.trajectory_rollouts,
    )  # fmt: skip
    sweep = cfg.sweep_clip_ids(list(lib.categories))
    art.figures["kappa_sweep"] = _rel(
        plot_kappa_sweep(ev, sweep, d / "kappa_sweep.png", cfg.trajectory_rollouts, cfg.kappas), out
    )
    emb = plot_embedding(ev, d / "embedding.png")
    if emb is not None:
        art.figures["embedding"] = _rel(emb, out)
    cosine = plot_embedding_cosine(ev, d / "embeddings_cosine.png")
    if cosine is not None:
        art.figures["embedding_cosine"] = _rel(cosine, out)
    if cfg.video:
        # the replays first: they need no OpenGL, so they are there even when a video cannot render
        art.replays = [(cap, _rel(p, out)) for cap, p in write_run_replays(ev, lib, d / "videos", cfg)]
        if render:
            art.videos = [(cap, _rel(p, out)) for cap, p in write_run_videos(ev, lib, d / "videos", cfg)]
    return art
