"""One gait cycle repeated into several (DeepMimic's ``Loop: wrap``), for importing cyclic clips.

DeepMimic's walk, run and jog are single cycles (the run: 25 frames, 0.8 s) whose last frame stands for
the next cycle's first; DeepMimic loops them, each cycle turned by the cycle's heading change and moved
by its displacement. Imported as they are, an imitation episode ends with the one cycle, so no episode
holds more than 0.8 s of running. ``tile_cycles`` closes the cycle exactly (the mismatch between its
last and first pose, 5-20 deg per joint in those clips, is spread linearly over the cycle: each joint's
local rotation, the root's tilt and its height) and repeats it ``cycles`` times, so the seams are
continuous and the first cycle keeps its first frame.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from rgsd_envs.utils import rotations as rot


def _spread(correction: torch.Tensor, frac: torch.Tensor) -> torch.Tensor:
    """(T, ..., 4) rotations from identity (frac 0) to ``correction`` (..., 4) (frac 1), ``frac`` (T,)."""
    shape = (frac.shape[0], *correction.shape)
    ident = torch.zeros(shape, dtype=correction.dtype)
    ident[..., 0] = 1.0
    t = frac.reshape(-1, *([1] * correction.dim()))
    return rot.quat_slerp(ident, correction.expand(shape), t.expand(*shape[:-1], 1))


def tile_cycles(
    root_pos: np.ndarray, root_rot: np.ndarray, joint_rot: np.ndarray, cycles: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Root positions (T, 3), root rotations (T, 4, wxyz) and local joint rotations (T, J, 4) of a one-cycle
    motion whose last frame is the next cycle's first, repeated ``cycles`` times: ``cycles (T - 1) + 1`` frames
    (z up). ``cycles`` 1 returns the motion unchanged."""
    if not isinstance(cycles, int) or cycles < 1:
        raise ValueError(f"cycles must be a whole number >= 1, got {cycles!r}")
    if len(root_pos) < 3:
        raise ValueError(f"a cycle needs at least 3 frames, got {len(root_pos)}")
    if cycles == 1:
        return np.asarray(root_pos), np.asarray(root_rot), np.asarray(joint_rot)
    p = torch.as_tensor(np.asarray(root_pos), dtype=torch.float64)
    r = rot.quat_normalize(torch.as_tensor(np.asarray(root_rot), dtype=torch.float64))
    q = rot.quat_normalize(torch.as_tensor(np.asarray(joint_rot), dtype=torch.float64))
    frac = torch.linspace(0.0, 1.0, len(p), dtype=torch.float64)
    # joints: q'_t = slerp(I, q_0 q_last^-1, t) q_t, so q'_last = q_0
    q = rot.quat_mul(_spread(rot.quat_mul(q[0], rot.quat_conj(q[-1])), frac), q)
    # root: the cycle turns by psi; its tilt mismatch D = r_last^-1 Rz(psi) r_0 is spread on the right
    psi = (rot.heading_angle(r[-1]) - rot.heading_angle(r[0]) + math.pi) % (2 * math.pi) - math.pi
    turn = rot.yaw_quat(psi)
    r = rot.quat_mul(r, _spread(rot.quat_mul(rot.quat_conj(r[-1]), rot.quat_mul(turn, r[0])), frac))
    p = p.clone()
    p[:, 2] += (p[0, 2] - p[-1, 2]) * frac  # the height at the seam is frame 0's
    rel = p - p[0]
    rel[:, 2] = 0.0
    out_p, out_r, out_q = [p], [r], [q]
    for k in range(1, cycles):
        yaw = rot.yaw_quat(psi * k).expand(len(p), 4)
        start = out_p[-1][-1].clone()
        start[2] = 0.0
        pk = rot.quat_rotate(yaw, rel) + start
        pk[:, 2] = p[:, 2]
        out_p.append(pk[1:])
        out_r.append(rot.quat_mul(yaw, r)[1:])
        out_q.append(q[1:])
    return torch.cat(out_p).numpy(), torch.cat(out_r).numpy(), torch.cat(out_q).numpy()
