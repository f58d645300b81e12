"""Evaluate one run on a motion set: latents, batched rollouts, and every number of the report.

For each clip m: the clip latent (z_m, the run's stored latent, or the best of N
sampled latents), ``imitation_rollouts`` rollouts with it from the clip's first
frame, and for each kappa of ``EvalConfig.kappa_plan`` (the sweep, the discovery
kappa, the top-view and video kappas) ``rollouts`` rollouts with z ~ vMF(latent,
kappa) on the clips that kappa is planned for. With per-step "tracking" latents
(Meta Motivo) the clip latent is the normalised mean of the clip's track, the
imitation rollouts follow the track step by step, and a vMF rollout follows the
track turned from the clip latent to its z (``rollouts.steer_tracks``). All of them run in one batched pass over the vector
environment, ``batch_size`` worlds at a time (``rollouts.run_rollouts``), so memory
grows with the batch, not with the rollout count: the paper protocol's 500 per clip
only adds rows to the per-rollout summaries (pelvis path, error, mean feature).
Numbers (``RunEvaluation.metrics``, JSON-ready) are per clip, per category (mean of
the category's clip ERRs; FID of the pooled windows) and over all clips, for the
imitation rollouts and for each kappa; the arrays behind the figures and videos are
kept beside them.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rgsd_envs.envs.torch_env import RGSDTorchEnv
from rgsd_envs.motion.clip import CATEGORIES
from rgsd_envs.motion.fid_window import min_fid_frames
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.rewards.encoders import embed, within_motion_alignment
from rgsd_envs.runs.run_dir import load_clip_latents, load_tracking_latents
from rgsd_envs.utils.listing import first_few
from rgsd_eval.batches import step_work, world_steps
from rgsd_eval.config import EvalConfig
from rgsd_eval.features import FEATURE_DIM, heading_directions, motion_features
from rgsd_eval.fid import GaussianStats, fid
from rgsd_eval.latents import search_candidates, select_best, vmf_samples
from rgsd_eval.metrics import (
    CM_PER_M,
    angles_deg,
    dispersion,
    global_mpjpe,
    path_dispersion,
    rate,
    sample_std,
    to_start_frame,
)
from rgsd_eval.protocol import POLICY_NOISE
from rgsd_eval.rollouts import RolloutJobs, Rollouts, SkillTracks, run_rollouts, track_centres
from rgsd_eval.runs import LoadedRun, representative_clips

log = logging.getLogger(__name__)

IMITATION_GROUP = 0
"""Job group of imitation rollouts; kappa i of ``EvalConfig.kappa_plan`` is group i + 1."""
FID_WINDOWS = "fid_windows"
"""The metrics.json key beside each FID: how many feature windows of the rollouts it was fitted to (why it matters:
``report.FID_WINDOWS_DEFINITION``)."""
SEARCH_NOISE_STREAM = 1
"""The action noise stream of a best-of-N search's rollouts (``batches.JobNoise``): not the evaluation's (0), so the
rollouts that re-evaluate the chosen latent are fresh ones, none a replay of the search's winning rollout."""
EVAL_WORLD_STEPS_PER_SECOND = 10035.0
"""Work units per second of a whole evaluation, rollouts and metrics (the cpu preset's 256x256 policy, 512 worlds
at a time), measured by ``benchmarks/clip_scaling.py`` (the quick protocol on 20 clips) on 2 otherwise idle CPU
cores: ``EvalPlan.step_work`` (the rollouts' own world steps plus each batch step's fixed work, in world steps)
over the time it took. It is the rate behind the estimate logged before an evaluation starts. Cores shared with
other jobs take longer (the progress bar shows the rate on the machine at hand)."""


VIDEO_SECONDS_PER_TILE_FRAME = 0.032
"""Seconds to render and encode one 480 x 360 shadow-free video tile (``videos.render_tiles``, 2 and 4 tiles of
the demo walk clip, setup included) with Mesa's software EGL on 2 shared CPU cores; smaller tiles cost in proportion
to their pixels. The videos dominate the quick protocol's time: the estimate logged before an evaluation counts
them."""


def video_tile_seconds(size: tuple[int, int]) -> float:
    """Estimated seconds per rendered tile of ``size`` (width, height) pixels."""
    return VIDEO_SECONDS_PER_TILE_FRAME * size[0] * size[1] / (480 * 360)


@dataclass(frozen=True)
class EvalPlan:
    """The rollouts one run's evaluation makes, the world steps they take and the work of their batch steps, and
    the video tiles it renders."""

    clips: int
    rollouts: int
    world_steps: int
    """The rollouts' own steps (``batches.world_steps``)."""
    step_work: float = 0.0
    """Their time in world steps, the batch steps' fixed work included (``batches.step_work``)."""
    video_tiles: int = 0
    """Tiles rendered over all the run's videos (a video frame of k side-by-side tiles counts k)."""
    video_seconds: float = 0.0
    """Their estimated rendering time (``video_tile_seconds``)."""

    @property
    def _work(self) -> float:
        return self.step_work or float(self.world_steps)  # a plan made by hand may give its world steps only

    def seconds(self, world_steps_per_second: float = EVAL_WORLD_STEPS_PER_SECOND) -> float:
        """Estimated wall time at a rate of world steps per second, videos included."""
        return self._work / world_steps_per_second + self.video_seconds

    def summary(self, protocol: str, world_steps_per_second: float = EVAL_WORLD_STEPS_PER_SECOND) -> str:
        """One line for the user before the evaluation starts."""
        seconds = self.seconds(world_steps_per_second)
        steps = f"{self.world_steps / 1e6:.2f} M" if self.world_steps >= 1e5 else f"{self.world_steps:,}"
        rate = f"{world_steps_per_second:.0f} world steps/s"
        if self.video_tiles:  # the total first, then its two parts: the rollouts' time at the rate, the videos'
            rollouts = self._work / world_steps_per_second
            timing = (
                f"about {_duration(seconds)} in all ({seconds / max(self.clips, 1):.1f} s per clip): "
                f"{_duration(rollouts)} of rollouts at {rate} and {_duration(self.video_seconds)} of videos "
                f"({self.video_tiles} tiles)"
            )
        else:
            timing = f"about {_duration(seconds)} ({seconds / max(self.clips, 1):.1f} s per clip) at {rate}"
        return (
            f"{protocol} protocol on {self.clips} clips: {self.rollouts} rollouts, {steps} world steps, {timing}, "
            "2 idle CPU cores' rate (longer on shared cores)"
        )


def _duration(seconds: float) -> str:
    """An estimated duration in whole minutes from a minute on, else in seconds (at least 1 s)."""
    return f"{seconds / 60.0:.0f} min" if seconds >= 60.0 else f"{max(seconds, 1.0):.0f} s"


def eval_plan(lib: MotionLib, cfg: EvalConfig, best_of: int = 0, render: bool = True) -> EvalPlan:
    """The rollouts and world steps of ``evaluate_run`` on ``lib`` (``best_of``: N of a best-of-N latent search, 0:
    none) and the video tiles it renders (``render``: False where rendering cannot start), from the settings
    alone."""
    m, nf = lib.num_clips, lib.num_frames.cpu().numpy()
    plan = cfg.kappa_plan(list(lib.categories), representative_clips(lib, cfg.video_clips) if cfg.video else [])
    search = np.repeat(np.arange(m), best_of)
    evals = np.concatenate(
        [np.repeat(np.arange(m), cfg.imitation_rollouts)]
        + [np.repeat(np.asarray(clips, dtype=np.int64), cfg.rollouts) for clips in plan.values()]
    )
    batch = min(cfg.batch_size, max(len(search), len(evals)))
    steps = world_steps(nf[search]) + world_steps(nf[evals])
    work = step_work(nf[search], batch) + step_work(nf[evals], batch)  # run_rollouts batches each call's jobs
    tiles = video_tiles(lib, cfg) if render else 0
    return EvalPlan(m, len(search) + len(evals), steps, work, tiles, tiles * video_tile_seconds(cfg.video_size))


def video_tiles(lib: MotionLib, cfg: EvalConfig) -> int:
    """Tiles the videos of ``videos.write_run_videos`` render: per video clip, every ``video_frame_step``-th frame
    of the imitation video (policy and reference) and of the variants video (reference and the variants)."""
    if not cfg.video:
        return 0
    per_frame = 2 + 1 + min(cfg.video_variants, cfg.rollouts)
    step = cfg.video_frame_step
    return sum(-(-int(lib.num_frames[c]) // step) * per_frame for c in representative_clips(lib, cfg.video_clips))


@dataclass
class ReferenceFeatures:
    """FID statistics of the reference clips' feature windows, per clip, and the clips too short for an FID."""

    per_clip: list[GaussianStats]
    short: list[int] = field(default_factory=list)
    """Clips with fewer frames than ``min_fid_frames`` of the window: their FID is not measured (None) and pooled
    FIDs (a category, all clips) leave them out, on the reference's side and the rollouts' alike."""

    @classmethod
    def of(cls, lib: MotionLib, window: int) -> ReferenceFeatures:
        """Feature statistics of every clip of a library."""
        per_clip = [GaussianStats.of(motion_features(c.body_pos, lib.fps, window)) for c in lib.clips]
        short = [i for i, c in enumerate(lib.clips) if c.num_frames < min_fid_frames(window)]
        return cls(per_clip, short)

    def scored(self, clips: list[int]) -> list[int]:
        """Those of ``clips`` whose FID is measured."""
        return [c for c in clips if c not in self.short]

    def pooled(self, clips: list[int]) -> GaussianStats:
        """Statistics of several clips' windows together (the clips long enough for an FID)."""
        return GaussianStats.pool([self.per_clip[c] for c in self.scored(clips)], FEATURE_DIM)


@dataclass
class EmbeddingData:
    """The run's frozen encoder on the reference states (for the embedding figure)."""

    states: np.ndarray
    """(F, 16) embeddings of every reference state."""
    clip_of_frame: np.ndarray
    clip_embeddings: np.ndarray
    """(M, 16) z_m."""
    latents: np.ndarray
    """(M, 16) the latents evaluated (z_m, or the best-of-N picks)."""
    alignment: float
    """Within-motion alignment: the mean over clips of the mean cosine of each state's embedding to the clip's
    z_m."""


@dataclass
class RunEvaluation:
    """All numbers of one run (``metrics``, JSON-ready) and the arrays behind its figures and videos."""

    label: str
    metrics: dict[str, Any]
    clip_names: list[str]
    ref_root: list[np.ndarray]
    """Per clip: (T, 3) reference pelvis positions."""
    imitation_root: list[np.ndarray]
    """Per clip: (K, T, 3) pelvis positions of the imitation rollouts."""
    kappa_root: dict[float, list[np.ndarray]]
    """Per kappa, per clip: (K, T, 3) pelvis positions of the vMF rollouts (K = 0 on clips the kappa was not
    rolled out on)."""
    embedding: EmbeddingData | None
    imitation_qpos: dict[int, np.ndarray] = field(default_factory=dict)
    """Clip -> (T, 76) qpos of its first imitation rollout (video clips only)."""
    variant_qpos: dict[int, list[np.ndarray]] = field(default_factory=dict)
    """Clip -> qpos of vMF variants at the video kappa (video clips only)."""


def category_order(lib: MotionLib) -> list[str]:
    """Categories of the library: the paper's five in its order, then any others as they appear."""
    present = list(dict.fromkeys(lib.categories))
    return [c for c in CATEGORIES if c in present] + [c for c in present if c not in CATEGORIES]


def action_noise(loaded: LoadedRun, cfg: EvalConfig) -> tuple[np.ndarray | float, dict[str, Any]]:
    """The std of the run's rollout action noise (``cfg.action_noise``: "policy", the run's own std, or one number
    for every run) and its summary for metrics.json (mean, min, max over action dimensions, and its source)."""
    if cfg.action_noise == POLICY_NOISE:
        std: np.ndarray | float = loaded.action_std
        source = loaded.action_std_source
    else:
        std = float(cfg.action_noise)
        source = "action_noise setting (the same for every run)"
    arr = np.asarray(std, dtype=np.float64)
    info = {"std": float(arr.mean()), "min": float(arr.min()), "max": float(arr.max()), "source": source}
    return std, info


def evaluate_run(loaded: LoadedRun, lib: MotionLib, ref: ReferenceFeatures, cfg: EvalConfig) -> RunEvaluation:
    """Roll out and score one run on every clip of ``lib`` (see the module docstring)."""
    start = time.perf_counter()
    m = lib.num_clips
    k_im, k = cfg.imitation_rollouts, cfg.rollouts
    plan = cfg.kappa_plan(list(lib.categories), representative_clips(lib, cfg.video_clips) if cfg.video else [])
    n_search = m * search_size(loaded)
    n_eval = m * k_im + k * sum(len(clips) for clips in plan.values())
    env = RGSDTorchEnv(
        min(cfg.batch_size, max(n_search, n_eval)),
        encoder_reward=False,
        config=loaded.env_config,
        motions=lib,
        encoder=None if loaded.encoder_path is None else str(loaded.encoder_path),
    )
    noise, noise_info = action_noise(loaded, cfg)
    common = {
        "action_noise": noise,
        "seed": cfg.seed,
        "fall_height": loaded.fall_height,
        "fid_window": cfg.fid_window,
        "progress": cfg.progress,
        "torch_threads": cfg.torch_threads,
    }
    try:
        core = env.unwrapped.core
        z_m = core.clip_embeddings.cpu().double().numpy()
        search: dict[str, Any] | None = None
        tracks: SkillTracks | None = None
        latents = z_m
        dim = loaded.env_config.skill_dim
        if loaded.latent.kind == "best-of":
            latents, search = _search(env, loaded, lib, cfg, common)
        elif loaded.latent.kind == "stored":
            latents = load_clip_latents(loaded.clip_latents, list(lib.names), skill_dim=dim).double().numpy()
        elif loaded.latent.kind == "tracking":
            per_step = load_tracking_latents(loaded.tracking_latents, list(lib.names), lib.num_frames.tolist(), dim)
            latents = track_centres(per_step)
            tracks = SkillTracks(per_step, latents)
        jobs = _eval_jobs(lib, latents, cfg, plan)
        res = run_rollouts(env, loaded.policy, jobs, desc=f"{loaded.label}: rollouts", skill_tracks=tracks, **common)
        embedding = _embedding(core, lib, latents) if loaded.encoder_path is not None else None
    finally:
        env.close()
    metrics = {
        "run_dir": str(loaded.run.path.resolve()),
        "method": loaded.method,
        "latent": str(loaded.latent),
        "clip_latents_rule": loaded.clip_latents_rule,
        "skill_dim": loaded.env_config.skill_dim,
        "within_motion_alignment": None if embedding is None else embedding.alignment,
        "action_noise": noise_info,
        "simulator": loaded.env_config.backend,
        "training_samples": loaded.training_samples,
        "policy_provenance": loaded.policy_provenance,
        "imitation": _imitation_metrics(res, lib, ref, cfg),
        "diversity": _diversity_metrics(res, lib, ref, latents, cfg, plan),
    }
    if search is not None:
        metrics["search"] = search
    metrics["clip_latents"] = {name: [float(x) for x in latents[c]] for c, name in enumerate(lib.names)}
    out = _plot_data(loaded.label, res, lib, plan, embedding, metrics)
    metrics["rollout_seconds"] = round(time.perf_counter() - start, 1)
    return out


def search_size(loaded: LoadedRun) -> int:
    """Candidate latents per clip of the run's best-of-N search (0: its latents need no search)."""
    return loaded.latent.n if loaded.latent.kind == "best-of" else 0


def _search(
    env: Any, loaded: LoadedRun, lib: MotionLib, cfg: EvalConfig, common: dict[str, Any]
) -> tuple[np.ndarray, dict[str, Any]]:
    """Best-of-N latents per clip by Cartesian error."""
    m, n = lib.num_clips, loaded.latent.n
    cand = search_candidates(m, n, cfg.seed, loaded.env_config.skill_dim)
    jobs = RolloutJobs(np.repeat(np.arange(m), n), cand.reshape(m * n, -1), 0, False)
    desc = f"{loaded.label}: best-of-{n}"
    res = run_rollouts(env, loaded.policy, jobs, features=False, desc=desc, noise_stream=SEARCH_NOISE_STREAM, **common)
    err = res.error.reshape(m, n)
    best, idx = select_best(cand, err)
    info = {
        lib.names[c]: {
            "candidates": n,
            "best_index": int(idx[c]),
            "best_err_cm": _num(err[c, idx[c]] * CM_PER_M),
            "median_err_cm": _num(np.nanmedian(err[c]) * CM_PER_M),
        }
        for c in range(m)
    }
    return best, info


def _eval_jobs(lib: MotionLib, latents: np.ndarray, cfg: EvalConfig, plan: dict[float, list[int]]) -> RolloutJobs:
    """Imitation jobs (group 0) then vMF jobs per planned kappa (group i + 1); qpos kept for the videos."""
    m = lib.num_clips
    video = set(representative_clips(lib, cfg.video_clips)) if cfg.video else set()
    parts = []
    for c in range(m):
        keep = np.zeros(cfg.imitation_rollouts, dtype=bool)
        keep[0] = c in video
        parts.append(
            RolloutJobs(
                np.full(cfg.imitation_rollouts, c),
                np.repeat(latents[c : c + 1], cfg.imitation_rollouts, 0),
                IMITATION_GROUP,
                keep,
            )
        )
    for i, (kappa, clips) in enumerate(plan.items()):
        for c in clips:
            z = vmf_samples(latents[c], kappa, cfg.rollouts, cfg.seed, c)
            keep = np.zeros(cfg.rollouts, dtype=bool)
            if c in video and kappa == cfg.video_kappa_value:
                keep[: cfg.video_variants] = True
            parts.append(RolloutJobs(np.full(cfg.rollouts, c), z, i + 1, keep))
    return RolloutJobs.concat(parts)


def _num(x: Any) -> float | None:
    """A JSON number: a float, or None for NaN."""
    x = float(x)
    return None if not np.isfinite(x) else x


def _fid(reference: GaussianStats, generated: GaussianStats, eps: float, what: str) -> dict[str, Any]:
    """The FID (a JSON number) and the rollouts' feature windows behind it (``FID_WINDOWS``); the FID None, with a
    warning naming ``what`` it scores, where a rollout's features were not finite (its statistics then are not, and
    no Frechet distance can be taken)."""
    if not generated.finite:
        log.warning("the FID of %s is left empty: a rollout's motion features there are NaN or infinite", what)
        value = None
    else:
        value = _num(fid(reference, generated, eps))
    return {"fid": value, FID_WINDOWS: generated.count}


def _mean_of_numbers(values: list[float | None]) -> float | None:
    """The mean of the values that are numbers; None when none is (a spread of one rollout per clip)."""
    numbers = [v for v in values if v is not None]
    return _num(np.mean(numbers)) if numbers else None


def _group_summary(res: Rollouts, rows: np.ndarray) -> dict[str, Any]:
    """The tracking metrics (``metrics.DEFINITIONS``) over some rollouts, pooled."""
    some = len(rows) > 0
    return {
        "rollouts": len(rows),
        "err_cm": _num(np.nanmean(res.error[rows]) * CM_PER_M) if some else None,
        "err_until_fall_cm": _num(np.nanmean(res.error_until_fall[rows]) * CM_PER_M) if some else None,
        "played_before_fall": _num(np.nanmean(res.played_before_fall[rows])) if some else None,
        "err_until_deviation_cm": _num(np.nanmean(res.error_until_deviation[rows]) * CM_PER_M) if some else None,
        "mpjpe_cm": _num(np.nanmean(res.mpjpe[rows]) * CM_PER_M) if some else None,
        "global_mpjpe_succ_cm": _num(global_mpjpe(res.error[rows], res.success[rows]) * CM_PER_M) if some else None,
        "success_rate": _num(rate(res.success[rows])) if some else None,
        "fall_rate": _num(rate(res.fell[rows])) if some else None,
        "unstable": int(res.unstable[rows].sum()),
    }


def _gen_stats(res: Rollouts, group: int, clips: list[int]) -> GaussianStats:
    return GaussianStats.pool(
        [res.feature_stats.get((group, c), GaussianStats.empty(FEATURE_DIM)) for c in clips], FEATURE_DIM
    )


def _pooled(
    res: Rollouts,
    lib: MotionLib,
    ref: ReferenceFeatures,
    cfg: EvalConfig,
    group: int,
    clips: dict[str, Any],
    members: list[int],
) -> dict[str, Any]:
    """One group's numbers over several clips: ERR, ERR to fall, its share played, ERR to deviation and MPJPE the
    mean of the clips' values, FID of their pooled windows against the pooled reference windows of the same clips;
    success and fall rates, global MPJPE (over the successful ones) and counts over their rollouts pooled."""

    def clip_mean(key: str) -> float | None:
        vals = [v for c in members if (v := clips[lib.names[c]][key]) is not None]
        return _num(np.mean(vals)) if vals else None

    rows = np.flatnonzero((res.jobs.group == group) & np.isin(res.jobs.clip, members))
    rollouts = "imitation" if group == IMITATION_GROUP else "sampled-latent"
    what = f"the {rollouts} rollouts of {first_few([lib.names[c] for c in members], 3)} pooled"
    return {
        "clips": len(members),
        **_group_summary(res, rows),
        "err_cm": clip_mean("err_cm"),
        "err_until_fall_cm": clip_mean("err_until_fall_cm"),
        "played_before_fall": clip_mean("played_before_fall"),
        "err_until_deviation_cm": clip_mean("err_until_deviation_cm"),
        "mpjpe_cm": clip_mean("mpjpe_cm"),
        **_fid(ref.pooled(members), _gen_stats(res, group, ref.scored(members)), cfg.fid_eps, what),
    }


def _by_category(
    res: Rollouts,
    lib: MotionLib,
    ref: ReferenceFeatures,
    cfg: EvalConfig,
    group: int,
    clips: dict[str, Any],
    members: list[int],
) -> dict[str, Any]:
    """``_pooled`` per category of ``members`` (in the report's category order)."""
    present = [lib.categories[c] for c in members]
    return {
        cat: _pooled(res, lib, ref, cfg, group, clips, [c for c in members if lib.categories[c] == cat])
        for cat in category_order(lib)
        if cat in present
    }


def _imitation_metrics(res: Rollouts, lib: MotionLib, ref: ReferenceFeatures, cfg: EvalConfig) -> dict[str, Any]:
    """Per clip, per category and over all clips: the tracking metrics (``metrics.DEFINITIONS``), FID and rollout
    counts."""
    jobs = res.jobs
    clips: dict[str, Any] = {}
    for c in range(lib.num_clips):
        rows = np.flatnonzero((jobs.group == IMITATION_GROUP) & (jobs.clip == c))
        s = _group_summary(res, rows)
        s["err_cm_std"] = _num(sample_std(res.error[rows]) * CM_PER_M)  # None: fewer than 2 rollouts
        s.update(
            _fid(
                ref.per_clip[c],
                _gen_stats(res, IMITATION_GROUP, [c]),
                cfg.fid_eps,
                f"{lib.names[c]}'s imitation rollouts",
            )
        )
        s.update(_travel(res, rows, lib.clips[c].body_pos[:, 0, :2]))
        clips[lib.names[c]] = {"category": lib.categories[c], "frames": int(lib.num_frames[c]), **s}
    every = list(range(lib.num_clips))
    return {
        "clips": clips,
        "categories": _by_category(res, lib, ref, cfg, IMITATION_GROUP, clips, every),
        "all": _pooled(res, lib, ref, cfg, IMITATION_GROUP, clips, every),
    }


def _travel(res: Rollouts, rows: np.ndarray, ref_xy: np.ndarray) -> dict[str, float | None]:
    """How far the pelvis travels (start to end, on the ground) in the rollouts and in the reference (m)."""
    ref = float(np.linalg.norm(ref_xy[-1] - ref_xy[0]))
    if not len(rows):
        return {"travel_m": None, "ref_travel_m": ref, "travel_ratio": None}
    moved = float(np.linalg.norm(_final_xy(res, rows) - res.root_pos.at(rows, 0)[:, :2], axis=-1).mean())
    return {"travel_m": moved, "ref_travel_m": ref, "travel_ratio": _num(moved / ref) if ref > 1e-6 else None}


def _final_xy(res: Rollouts, rows: np.ndarray) -> np.ndarray:
    return res.root_pos.at(rows, res.length[rows] - 1)[:, :2].astype(np.float64)


def _diversity_metrics(
    res: Rollouts,
    lib: MotionLib,
    ref: ReferenceFeatures,
    latents: np.ndarray,
    cfg: EvalConfig,
    plan: dict[float, list[int]],
) -> dict[str, Any]:
    """Per planned kappa: per clip the latent angle, final-root and pose spreads, ERR and FID of the vMF rollouts;
    per category ERR and FID (pooled windows) under those latents; means over the kappa's clips."""
    jobs = res.jobs
    out: dict[str, Any] = {}
    for i, (kappa, members) in enumerate(plan.items()):
        g = i + 1
        clips: dict[str, Any] = {}
        for c in members:
            rows = np.flatnonzero((jobs.group == g) & (jobs.clip == c))
            body0 = lib.clips[c].body_pos[0]
            start_fwd = heading_directions(body0[None])[0]
            final = to_start_frame(_final_xy(res, rows), body0[0, :2], start_fwd)
            clips[lib.names[c]] = {
                "category": lib.categories[c],
                **_group_summary(res, rows),
                "latent_angle_deg": _num(angles_deg(jobs.skill[rows], latents[c]).mean()),
                "root_spread_m": _num(dispersion(final)),
                "path_spread_m": _num(path_dispersion(res.root_pos.padded(rows, int(lib.num_frames[c]))[..., :2])),
                "pose_spread": _num(dispersion(res.mean_feature[rows])),
                **_fid(
                    ref.per_clip[c],
                    _gen_stats(res, g, [c]),
                    cfg.fid_eps,
                    f"{lib.names[c]}'s rollouts at kappa {kappa:g}",
                ),
            }
        rows = np.flatnonzero(jobs.group == g)
        mean = {
            key: _mean_of_numbers([v[key] for v in clips.values()])
            for key in ("latent_angle_deg", "root_spread_m", "path_spread_m", "pose_spread", "err_cm", "mpjpe_cm")
        }
        mean.update(
            {
                "clips": len(members),
                "rollouts": len(rows),
                "success_rate": _num(rate(res.success[rows])),
                "fall_rate": _num(rate(res.fell[rows])),
                "unstable": int(res.unstable[rows].sum()),
                **_fid(
                    ref.pooled(members),
                    _gen_stats(res, g, ref.scored(members)),
                    cfg.fid_eps,
                    f"the rollouts at kappa {kappa:g} pooled",
                ),
            }
        )
        roles = [
            role
            for role, on in (
                ("sweep", kappa in cfg.kappas),
                ("discovery", kappa == cfg.discovery_kappa),
                ("trajectories", kappa == cfg.trajectory_kappa_value),
                ("video", cfg.video and kappa == cfg.video_kappa_value),
            )
            if on
        ]
        out[_kappa_key(kappa)] = {
            "kappa": kappa,
            "roles": roles,
            "clips": clips,
            "categories": _by_category(res, lib, ref, cfg, g, clips, members),
            "mean": mean,
        }
    return out


def _kappa_key(kappa: float) -> str:
    """ "20" for 20.0, "2.5" for 2.5: the JSON key of a kappa."""
    return f"{kappa:g}"


def _embedding(core: Any, lib: MotionLib, latents: np.ndarray) -> EmbeddingData:
    enc = core.frozen_encoder
    states = embed(enc, core.ref_inputs).cpu().double().numpy()
    align = within_motion_alignment(enc, core.ref_inputs, lib.clip_of_frame, lib.num_clips)
    return EmbeddingData(
        states, lib.clip_of_frame.cpu().numpy(), core.clip_embeddings.cpu().double().numpy(), latents, float(align)
    )


def _plot_data(
    label: str,
    res: Rollouts,
    lib: MotionLib,
    plan: dict[float, list[int]],
    embedding: EmbeddingData | None,
    metrics: dict[str, Any],
) -> RunEvaluation:
    """Arrays behind the figures and videos, cut to each clip's length."""
    jobs = res.jobs
    nf = lib.num_frames.cpu().numpy()

    def roots(g: int, c: int) -> np.ndarray:
        return res.root_pos.padded(np.flatnonzero((jobs.group == g) & (jobs.clip == c)), int(nf[c])).astype(np.float64)

    ev = RunEvaluation(
        label=label,
        metrics=metrics,
        clip_names=list(lib.names),
        ref_root=[c.body_pos[:, 0].astype(np.float64) for c in lib.clips],
        imitation_root=[roots(IMITATION_GROUP, c) for c in range(lib.num_clips)],
        kappa_root={kappa: [roots(i + 1, c) for c in range(lib.num_clips)] for i, kappa in enumerate(plan)},
        embedding=embedding,
    )
    for j, q in sorted(res.qpos.items()):
        c = int(jobs.clip[j])
        if jobs.group[j] == IMITATION_GROUP:
            ev.imitation_qpos[c] = q
        else:
            ev.variant_qpos.setdefault(c, []).append(q)
    return ev
