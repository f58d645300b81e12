"""Imitation and diversity metrics on recorded body states (numpy, batched).

* Cartesian error (docs/evaluation.md): mean over frames and bodies of the L2 distance
  between simulated and reference body positions (m; reports show cm).
* Latent spread: mean angle between skills z and their centre (vMF samples).
* Dispersion: root-mean-square distance of points from their mean, used for the
  final root positions (in the clip's start-heading frame, m), for whole pelvis
  paths (averaged over frames, m; less sensitive than the end point to the
  chaos of falls) and for the per-rollout mean FID features (m, m/s, rad/s).
"""

from __future__ import annotations

import numpy as np

CM_PER_M = 100.0


def frame_errors(sim_body_pos: np.ndarray, ref_body_pos: np.ndarray) -> np.ndarray:
    """Per-frame Cartesian error (m): mean over bodies of |sim - ref|, (..., T, B, 3) -> (..., T)."""
    sim, ref = np.asarray(sim_body_pos, dtype=np.float64), np.asarray(ref_body_pos, dtype=np.float64)
    if sim.shape != ref.shape or sim.ndim < 3 or sim.shape[-1] != 3:
        raise ValueError(f"simulated {sim.shape} and reference {ref.shape} body positions must both be (..., T, B, 3)")
    return np.linalg.norm(sim - ref, axis=-1).mean(axis=-1)


def cartesian_error(sim_body_pos: np.ndarray, ref_body_pos: np.ndarray) -> np.ndarray:
    """Cartesian error (m): mean over frames and bodies of |sim - ref|, (..., T, B, 3) -> (...)."""
    return frame_errors(sim_body_pos, ref_body_pos).mean(axis=-1)


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
