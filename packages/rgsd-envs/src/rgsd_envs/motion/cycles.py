"""One gait cycle repeated into several (DeepMimic's ``Loop: wrap``), for importing cyclic clips.

DeepMimic's walk, run and jog are single cycles (the run: 25 frames, 0.8 s) whose last frame stands for
the next cycle's first; DeepMimic loops them, moving each cycle on by the cycle's root displacement.
Imported as they are, an imitation episode ends with the one cycle, so no episode holds more than 0.8 s
of running. ``tile_cycles`` repeats the cycle the same way and first closes it: the mismatch between its
last and first frame (5-20 deg per joint in those clips; the run's last frame also sinks ~5 cm) is
blended away over the cycle's last quarter (a smoothstep from nothing to all of it: each joint's local
rotation, the root's rotation and height), so the seams are continuous and the first three quarters of
every cycle are the capture as it is.
"""

from __future__ import annotations

import numpy as np
import torch

from rgsd_envs.utils import rotations as rot

MIN_CYCLE_FRAMES = 3
"""Fewest frames of a cycle that can be repeated (its last frame is the next cycle's first)."""
BLEND_FRACTION = 0.25
"""Share of the cycle, at its end, over which the seam's mismatch is blended away."""


def _blend_weights(frames: int) -> torch.Tensor:
    """(frames,) 0 before the cycle's last ``BLEND_FRACTION``, then a smoothstep to 1 at its last frame."""
    t = torch.linspace(0.0, 1.0, frames, dtype=torch.float64)
    x = ((t - (1.0 - BLEND_FRACTION)) / BLEND_FRACTION).clamp(0.0, 1.0)
    return x * x * (3.0 - 2.0 * x)


def _spread(correction: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """(T, ..., 4) rotations from identity (weight 0) to ``correction`` (..., 4) (weight 1), ``weight`` (T,)."""
    shape = (weight.shape[0], *correction.shape)
    ident = torch.zeros(shape, dtype=correction.dtype)
    ident[..., 0] = 1.0
    w = weight.reshape(-1, *([1] * correction.dim()))
    return rot.quat_slerp(ident, correction.expand(shape), w.expand(*shape[:-1], 1))


def tile_cycles(
    root_pos: np.ndarray, root_rot: np.ndarray, joint_rot: np.ndarray, cycles: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Root positions (T, 3), root rotations (T, 4, wxyz) and local joint rotations (T, J, 4) of a one-cycle
    motion whose last frame is the next cycle's first, closed and repeated ``cycles`` times:
    ``cycles (T - 1) + 1`` frames (z up). ``cycles`` 1 returns the motion unchanged."""
    if not isinstance(cycles, int) or cycles < 1:
        raise ValueError(f"cycles must be a whole number >= 1, got {cycles!r}")
    if cycles == 1:
        return np.asarray(root_pos), np.asarray(root_rot), np.asarray(joint_rot)
    if len(root_pos) < MIN_CYCLE_FRAMES:
        raise ValueError(f"a cycle needs at least {MIN_CYCLE_FRAMES} frames, got {len(root_pos)}")
    p = torch.as_tensor(np.asarray(root_pos), dtype=torch.float64).clone()
    r = rot.quat_normalize(torch.as_tensor(np.asarray(root_rot), dtype=torch.float64))
    q = rot.quat_normalize(torch.as_tensor(np.asarray(joint_rot), dtype=torch.float64))
    w = _blend_weights(len(p))
    # q'_t = slerp(I, q_0 q_last^-1, w_t) q_t: q' is q until the blend starts and q_0 at the last frame
    q = rot.quat_mul(_spread(rot.quat_mul(q[0], rot.quat_conj(q[-1])), w), q)
    r = rot.quat_mul(_spread(rot.quat_mul(r[0], rot.quat_conj(r[-1])), w), r)
    p[:, 2] += (p[0, 2] - p[-1, 2]) * w  # the height at the seam is frame 0's
    step = p[-1] - p[0]  # the cycle's displacement (horizontal: the heights now match)
    out_p = [p + k * step for k in range(cycles)]
    return (
        torch.cat([out_p[0], *(c[1:] for c in out_p[1:])]).numpy(),
        torch.cat([r, *([r[1:]] * (cycles - 1))]).numpy(),
        torch.cat([q, *([q[1:]] * (cycles - 1))]).numpy(),
    )
