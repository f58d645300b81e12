"""Motion features for the FID: window statistics of body positions in the heading frame.

The one place the FID feature is defined (the README repeats it). Everything is
computed from body positions (T, 24, 3) alone, so reference clips, simulated
rollouts and any other source of body positions are featurised the same way.

Per frame t:

* heading: the forward direction ``f_t`` in the ground plane, perpendicular to the
  hip axis ``l = p[L_Hip] - p[R_Hip]`` (x, y parts): ``f = (l_y, -l_x) / |l_xy|``;
  the heading frame has axes ``f``, ``(-f_y, f_x)`` (left) and world z;
* ``h_t``: root (pelvis) height, m;
* ``r_t``: positions of the 9 ``FEATURE_BODIES`` relative to the root, in the
  heading frame, m (27);
* ``v_t``: root velocity in the heading frame, m/s (3), and ``u_t`` velocities of
  the feature bodies in the heading frame, m/s (27); central differences at the
  clip rate;
* ``w_t``: yaw rate of the heading, rad/s.

Per window of ``WINDOW`` = 15 frames (0.5 s at 30 Hz), sliding by ``stride``:
``[mean h (1), mean r (27), std r (27), mean v (3), std u (27), mean w (1)]``
= ``FEATURE_DIM`` = 86 numbers. Rotating a whole motion about the vertical axis or
translating it on the ground leaves every number unchanged.
"""

from __future__ import annotations

import numpy as np

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.clip import CLIP_FPS
from rgsd_envs.motion.fid_window import FID_WINDOW

FEATURE_BODIES: tuple[str, ...] = (
    "Head", "L_Elbow", "R_Elbow", "L_Wrist", "R_Wrist", "L_Knee", "R_Knee", "L_Ankle", "R_Ankle",
)  # fmt: skip
"""Bodies whose root-relative positions and velocities enter the feature."""
WINDOW = FID_WINDOW
"""Frames per feature window (0.5 s at 30 Hz; ``rgsd_envs.motion.fid_window``, where the clip tools read it too)."""
_IDS = np.array([sk.body_id(n) for n in FEATURE_BODIES])
_L_HIP, _R_HIP = sk.body_id("L_Hip"), sk.body_id("R_Hip")
_K = len(FEATURE_BODIES)
FEATURE_DIM = 1 + 3 * _K + 3 * _K + 3 + 3 * _K + 1
"""86 numbers per window."""


def feature_names() -> list[str]:
    """Names of the FEATURE_DIM window features, in order."""
    xyz = [f"{b}.{a}" for b in FEATURE_BODIES for a in "xyz"]
    return (
        ["mean root_height"]
        + [f"mean pos {n}" for n in xyz]
        + [f"std pos {n}" for n in xyz]
        + [f"mean root_vel.{a}" for a in "xyz"]
        + [f"std vel {n}" for n in xyz]
        + ["mean yaw_rate"]
    )


def heading_directions(body_pos: np.ndarray) -> np.ndarray:
    """Unit forward directions (..., T, 2) in the ground plane from the hip axis."""
    left = body_pos[..., _L_HIP, :2] - body_pos[..., _R_HIP, :2]
    fwd = np.stack((left[..., 1], -left[..., 0]), axis=-1)
    return fwd / np.maximum(np.linalg.norm(fwd, axis=-1, keepdims=True), 1e-9)


def to_heading_frame(vec: np.ndarray, forward: np.ndarray) -> np.ndarray:
    """World vectors (..., 3) in the heading frame given forward directions (..., 2) broadcastable to them."""
    fx, fy = forward[..., 0], forward[..., 1]
    x = vec[..., 0] * fx + vec[..., 1] * fy
    y = -vec[..., 0] * fy + vec[..., 1] * fx
    return np.stack((x, y, vec[..., 2]), axis=-1)


def frame_quantities(body_pos: np.ndarray, fps: float = CLIP_FPS) -> dict[str, np.ndarray]:
    """Per-frame h (..., T, 1), r (..., T, 27), v (..., T, 3), u (..., T, 27) and w (..., T, 1)."""
    p = np.asarray(body_pos, dtype=np.float64)
    if p.ndim < 3 or p.shape[-2:] != (sk.NUM_BODIES, 3):
        raise ValueError(f"body positions must have shape (..., T, {sk.NUM_BODIES}, 3), got {p.shape}")
    if p.shape[-3] < 2:
        raise ValueError(f"need at least 2 frames to take velocities, got {p.shape[-3]}")
    fwd = heading_directions(p)  # (..., T, 2)
    f_b = fwd[..., None, :]
    root = p[..., :1, :]
    rel = to_heading_frame(p[..., _IDS, :] - root, f_b)
    vel = np.gradient(p, 1.0 / fps, axis=-3)
    v_root = to_heading_frame(vel[..., 0, :], fwd)
    u = to_heading_frame(vel[..., _IDS, :], f_b)
    yaw = np.unwrap(np.arctan2(fwd[..., 1], fwd[..., 0]), axis=-1)
    w = np.gradient(yaw, 1.0 / fps, axis=-1)
    flat = p.shape[:-2]
    return {
        "h": p[..., 0, 2:3],
        "r": rel.reshape(*flat, 3 * _K),
        "v": v_root,
        "u": u.reshape(*flat, 3 * _K),
        "w": w[..., None],
    }


def window_mean_std(x: np.ndarray, window: int, stride: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std over sliding windows along axis -2: (..., T, d) -> two (..., n_windows, d) arrays."""
    t = x.shape[-2]
    starts = np.arange(0, t - window + 1, stride)
    centre = x.mean(axis=-2, keepdims=True)  # cumulative sums of centred values keep the variance accurate
    xc = x - centre
    pad = np.zeros((*x.shape[:-2], 1, x.shape[-1]))
    c1 = np.concatenate((pad, np.cumsum(xc, axis=-2)), axis=-2)
    c2 = np.concatenate((pad, np.cumsum(xc * xc, axis=-2)), axis=-2)
    m = (c1[..., starts + window, :] - c1[..., starts, :]) / window
    var = (c2[..., starts + window, :] - c2[..., starts, :]) / window - m * m
    return m + centre, np.sqrt(np.maximum(var, 0.0))


def num_windows(num_frames: int, window: int = WINDOW, stride: int = 1) -> int:
    """Feature windows in a motion of num_frames frames."""
    return max(0, (num_frames - window) // stride + 1)


def motion_features(body_pos: np.ndarray, fps: float = CLIP_FPS, window: int = WINDOW, stride: int = 1) -> np.ndarray:
    """Window features (..., n_windows, FEATURE_DIM) of body positions (..., T, 24, 3); see the module docstring."""
    if window < 2 or stride < 1:
        raise ValueError(f"window must be >= 2 and stride >= 1, got window={window}, stride={stride}")
    q = frame_quantities(body_pos, fps)
    t = q["h"].shape[-2]
    if t < window:
        return np.zeros((*q["h"].shape[:-2], 0, FEATURE_DIM))
    mh, _ = window_mean_std(q["h"], window, stride)
    mr, sr = window_mean_std(q["r"], window, stride)
    mv, _ = window_mean_std(q["v"], window, stride)
    _, su = window_mean_std(q["u"], window, stride)
    mw, _ = window_mean_std(q["w"], window, stride)
    return np.concatenate((mh, mr, sr, mv, su, mw), axis=-1)
