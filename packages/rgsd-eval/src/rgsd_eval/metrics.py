"""Imitation and diversity metrics on recorded body states (numpy, batched).

Tracking metrics of one rollout, frames t = 1..T-1 (frame 0 is the reference state itself), B = 24 bodies,
p the simulated and q the reference body positions in the world frame (m; reports show cm):

* ERR, world frame (the paper's "Cartesian error"; docs/evaluation.md): (1/(T-1)) sum_t (1/B) sum_b |p_tb - q_tb|.
* ERR to fall: the same mean over frames 1..f only, f the first frame flagged fallen (all frames if none): the
  error an episode terminated at a fall would score (``until_first_fall``); beside it the share of the frames it
  averages (played before a fall), without which an early fall would read as good tracking.
* ERR to deviation: the same mean over frames 1..d only, d the first frame whose error exceeds the deviation
  threshold that ends training's imitation episodes (``DEVIATION_THRESHOLD_M``; all frames if none does): the error
  an episode terminated on deviation, as the paper's Section 4.2 describes, would score.
* MPJPE, root-relative: the same after subtracting each frame's pelvis (body 0) from p and from q,
  (1/(T-1)) sum_t (1/B) sum_b |(p_tb - p_t0) - (q_tb - q_t0)|; the pelvis term is 0 and stays in the mean,
  as in PHC's ``compute_metrics_lite`` (``mpjpe_l``).
* Success: the rollout reaches the clip's end and max_t (1/B) sum_b |p_tb - q_tb| <= 0.5 m (PHC's
  termination distance; ProtoMotions' ``max(gt_err) > 0.5`` failure; HumEnv's ``success_phc_mean``).
* Global MPJPE (successful): ERR averaged over the successful rollouts only (see ``global_mpjpe``).
* Fall rate: the share of rollouts flagged as fallen (``rollouts.Rollouts.fell``).

Diversity:

* Latent spread: mean angle between skills z and their centre (vMF samples).
* Dispersion: root-mean-square distance of points from their mean, used for the
  final root positions (in the clip's start-heading frame, m), for whole pelvis
  paths (averaged over frames, m; less sensitive than the end point to the
  chaos of falls) and for the per-rollout mean FID features (m, m/s, rad/s).
"""

from __future__ import annotations

import numpy as np

from rgsd_envs.envs.config import DeviationConfig
from rgsd_envs.humanoid import skeleton as sk

CM_PER_M = 100.0
# The trackers' conventions these metrics follow, read in their code:
# - ZhengyiLuo/PHC phc/learning/im_amp_players.py: `_termination_distances[:] = 0.5` ends a rollout whose mean body
#   distance exceeds 0.5 m (a failure); errors are printed over all motions and over the successful ones ("Succ").
# - ZhengyiLuo/SMPLSim smpl_sim/smpllib/smpl_eval.py `compute_metrics_lite`: mpjpe_g = |gt - pred| per body (world),
#   mpjpe_l the same after subtracting the root body (index 0) from each, in mm.
# - NVlabs/ProtoMotions protomotions/envs/mimic/env.py: gt_err = the mean over bodies of |ref - sim| (world, m);
#   agents/evaluators/mimic_evaluator.py: a motion fails when its largest gt_err over frames exceeds 0.5.
# - facebookresearch/humenv humenv/bench/utils/metrics.py `phc_metrics`: success_phc_mean, the same 0.5 m test.
SUCCESS_THRESHOLD_M = 0.5
"""A rollout fails once its mean body distance exceeds this at any frame (PHC, ProtoMotions, HumEnv)."""
DEVIATION_THRESHOLD_M: float = DeviationConfig.threshold
"""The per-frame Cartesian error (m) past which ERR to deviation stops: the default that ends training's imitation
episodes (``DeviationConfig.threshold``)."""
ROOT_BODY = 0
"""The pelvis: the body MPJPE subtracts."""

DEFINITIONS = {
    "err_cm": f"ERR, world frame (cm): mean over frames 1..T-1 and the {sk.NUM_BODIES} bodies of |p_tb - q_tb| "
    "(simulated p, reference q), averaged over rollouts; a category's is the mean of its clips'. No termination: a rollout that "
    "falls keeps accruing error.",
    "err_cm_std": "ERR spread of a clip (cm): the sample standard deviation (n - 1) of its rollouts' ERR; empty "
    "with fewer than 2 rollouts.",
    "err_until_fall_cm": "ERR to fall (cm): each rollout's ERR over its frames up to its first fall, that frame "
    "included (a rollout that never falls: its whole-clip ERR), averaged and aggregated as ERR is: the error of "
    "episodes that terminate at a fall, as the paper's training did. A rollout that falls early averages few "
    "frames, so read it with the share played before a fall.",
    "err_until_deviation_cm": "ERR to deviation (cm): each rollout's ERR over its frames up to the first whose "
    f"Cartesian error exceeds {DEVIATION_THRESHOLD_M:g} m (training's deviation threshold), that frame included (a "
    "rollout that never exceeds it: its whole-clip ERR), averaged and aggregated as ERR is: the error of episodes "
    "that terminate on deviation, as the paper's Section 4.2 describes.",
    "played_before_fall": "Played before a fall: the share of a rollout's frames 1..T-1 that ERR to fall averages "
    "(1: it never fell), averaged and aggregated as ERR is.",
    "mpjpe_cm": "MPJPE, root-relative (cm): the same mean of |(p_tb - p_t0) - (q_tb - q_t0)|, each frame's pelvis "
    "(body 0) subtracted from simulated and reference positions (PHC's mpjpe_l).",
    "global_mpjpe_succ_cm": "Global MPJPE (cm): ERR averaged over the successful rollouts only (PHC's reported "
    "mpjpe_g, in cm; PHC prints mm); a category pools its clips' successful rollouts; empty where none succeeded.",
    "success_rate": "Success rate: share of rollouts that reach the clip's end with the mean body distance "
    f"(1/{sk.NUM_BODIES}) sum_b |p_tb - q_tb| at most {SUCCESS_THRESHOLD_M:g} m on every frame (PHC's termination "
    "distance).",
    "fall_rate": "Fall rate: share of rollouts whose pelvis went below the run's fall height or with a body other "
    "than the feet on the floor at any frame.",
}
"""Each tracking metric of ``metrics.json`` (its field name) in words; docs/evaluation.md gives the formulas."""


def frame_errors(sim_body_pos: np.ndarray, ref_body_pos: np.ndarray) -> np.ndarray:
    """Per-frame Cartesian error (m): mean over bodies of |sim - ref|, (..., T, B, 3) -> (..., T)."""
    sim, ref = np.asarray(sim_body_pos, dtype=np.float64), np.asarray(ref_body_pos, dtype=np.float64)
    if sim.shape != ref.shape or sim.ndim < 3 or sim.shape[-1] != 3:
        raise ValueError(f"simulated {sim.shape} and reference {ref.shape} body positions must both be (..., T, B, 3)")
    return np.linalg.norm(sim - ref, axis=-1).mean(axis=-1)


def until_first_fall(scored: np.ndarray, fell: np.ndarray) -> np.ndarray:
    """(T, J) the frames ERR to fall averages: each rollout's ``scored`` frames up to its first scored frame with
    ``fell``, that frame included (an episode terminated at a fall ends on it); all of them if it never falls.
    ERR to deviation passes "error above the threshold" as ``fell`` (``until_first_deviation``)."""
    scored, fell = np.asarray(scored, dtype=bool), np.asarray(fell, dtype=bool)
    fallen = fell & scored
    first = np.where(fallen.any(axis=0), fallen.argmax(axis=0), scored.shape[0])
    return scored & (np.arange(scored.shape[0])[:, None] <= first[None, :])


def until_first_deviation(
    scored: np.ndarray, frame_error: np.ndarray, threshold: float = DEVIATION_THRESHOLD_M
) -> np.ndarray:
    """(T, J) the frames ERR to deviation averages: each rollout's ``scored`` frames up to its first scored frame
    whose ``frame_error`` (T, J; m) exceeds ``threshold``, that frame included; all of them if none does."""
    with np.errstate(invalid="ignore"):
        return until_first_fall(scored, np.asarray(frame_error, dtype=np.float64) > threshold)


def cartesian_error(sim_body_pos: np.ndarray, ref_body_pos: np.ndarray) -> np.ndarray:
    """Cartesian error (m): mean over frames and bodies of |sim - ref|, (..., T, B, 3) -> (...)."""
    return frame_errors(sim_body_pos, ref_body_pos).mean(axis=-1)


def root_relative_frame_errors(sim_body_pos: np.ndarray, ref_body_pos: np.ndarray, root: int = ROOT_BODY) -> np.ndarray:
    """Per-frame root-relative error (m): ``frame_errors`` after subtracting each frame's root body position from
    the simulated and the reference positions, (..., T, B, 3) -> (..., T)."""
    sim, ref = np.asarray(sim_body_pos, dtype=np.float64), np.asarray(ref_body_pos, dtype=np.float64)
    if sim.shape != ref.shape or sim.ndim < 3 or sim.shape[-1] != 3:
        raise ValueError(f"simulated {sim.shape} and reference {ref.shape} body positions must both be (..., T, B, 3)")
    return frame_errors(sim - sim[..., root : root + 1, :], ref - ref[..., root : root + 1, :])


def mpjpe(sim_body_pos: np.ndarray, ref_body_pos: np.ndarray, root: int = ROOT_BODY) -> np.ndarray:
    """Root-relative mean per-joint position error (m): mean over frames of ``root_relative_frame_errors``."""
    return root_relative_frame_errors(sim_body_pos, ref_body_pos, root).mean(axis=-1)


def tracking_success(
    frame_error: np.ndarray,
    completed: np.ndarray | bool = True,
    threshold: float = SUCCESS_THRESHOLD_M,
    scored: np.ndarray | None = None,
) -> np.ndarray:
    """Whether each rollout tracked its clip, (..., T) -> (...): it ``completed`` (reached the clip's end) and its
    per-frame world error (``frame_errors``) never exceeds ``threshold`` (m) on the ``scored`` frames (..., T),
    where a non-finite error fails too; without ``scored``, the frames with a NaN error (not recorded) are left
    out."""
    err = np.asarray(frame_error, dtype=np.float64)
    scored = ~np.isnan(err) if scored is None else np.asarray(scored, dtype=bool)
    with np.errstate(invalid="ignore"):
        within = np.where(scored, np.isfinite(err) & (err <= threshold), True).all(axis=-1)
    return within & np.asarray(completed, dtype=bool)


def rate(flags: np.ndarray) -> float:
    """The share of true flags (success rate, fall rate); NaN for no rollouts."""
    f = np.asarray(flags, dtype=bool).reshape(-1)
    return float(f.mean()) if f.size else float("nan")


def global_mpjpe(errors: np.ndarray, success: np.ndarray) -> float:
    """Global MPJPE as PHC reports it (m): the world-frame per-rollout error (ERR) averaged over the successful
    rollouts only; NaN if none succeeded.

    ERR over every rollout is ProtoMotions' ``gt_err`` and PHC's "All" ``mpjpe_g`` by formula; PHC's evaluation
    (``phc/learning/im_amp_players.py``) also prints them over the successful motions ("Succ"), the figure its
    tables compare. Failed rollouts, which rgsd keeps simulating after a fall, do not enter it, so it does not
    depend on what happens after a failure."""
    e = np.asarray(errors, dtype=np.float64).reshape(-1)
    ok = np.asarray(success, dtype=bool).reshape(-1) & np.isfinite(e)
    return float(e[ok].mean()) if ok.any() else float("nan")


def sample_std(values: np.ndarray) -> float:
    """The sample standard deviation (n - 1 in the denominator) of the finite values; NaN if fewer than 2 are."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    v = v[np.isfinite(v)]
    return float(np.std(v, ddof=1)) if v.size >= 2 else float("nan")


def masked_mean(values: np.ndarray, mask: np.ndarray, axis: int = 0) -> np.ndarray:
    """Mean of values where mask is true along axis (NaN where nothing is)."""
    m = np.asarray(mask, dtype=np.float64)
    num = np.where(mask, values, 0.0).sum(axis=axis)
    den = m.sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.maximum(den, 1), np.nan)


def angles_deg(z: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """Angles (degrees) between unit vectors z (..., d) and a centre (d,)."""
    z = np.asarray(z, dtype=np.float64)
    c = np.asarray(centre, dtype=np.float64)
    cos = (z / np.linalg.norm(z, axis=-1, keepdims=True)) @ (c / np.linalg.norm(c))
    return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def latent_spread(z: np.ndarray, centre: np.ndarray) -> float:
    """Mean angle (degrees) of skills z (K, d) from their centre."""
    return float(angles_deg(z, centre).mean())


def dispersion(points: np.ndarray) -> float:
    """Root-mean-square distance of points (K, d) from their mean (NaN rows ignored; NaN if < 2 rows)."""
    p = np.asarray(points, dtype=np.float64)
    p = p[np.isfinite(p).all(axis=-1)]
    if p.shape[0] < 2:
        return float("nan")
    return float(np.sqrt(((p - p.mean(axis=0)) ** 2).sum(axis=-1).mean()))


def path_dispersion(paths: np.ndarray) -> float:
    """Mean over frames of the dispersion of paths (K, T, d) at each frame (frames where < 2 paths are finite skipped)."""
    p = np.asarray(paths, dtype=np.float64)
    per_frame = [dispersion(p[:, t]) for t in range(p.shape[1])]
    vals = [v for v in per_frame if np.isfinite(v)]
    return float(np.mean(vals)) if vals else float("nan")


def to_start_frame(xy: np.ndarray, start_xy: np.ndarray, start_forward: np.ndarray) -> np.ndarray:
    """Ground-plane points (..., 2) relative to a start position, in its heading frame (x forward, y left)."""
    f = np.asarray(start_forward, dtype=np.float64)
    f = f / np.linalg.norm(f)
    d = np.asarray(xy, dtype=np.float64) - np.asarray(start_xy, dtype=np.float64)
    return np.stack((d[..., 0] * f[0] + d[..., 1] * f[1], -d[..., 0] * f[1] + d[..., 1] * f[0]), axis=-1)
