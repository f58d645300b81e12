"""Statistics of an encoder's embeddings (alignment within a clip, separation between clips) and of its
inputs (the standardisation of the reference states)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rgsd_envs.envs.observations import FRAME_DIM, FRAME_LAYOUT, HISTORY_LEN

Tensor = torch.Tensor

STD_FLOOR = 0.5
"""Input standardisation: each dim's std is floored at this fraction of its feature group's median std."""


def separation_stats(z: Tensor) -> tuple[float, float]:
    """(max, mean over clips of the nearest other clip's) cosine between clip embeddings (M, d)."""
    if z.shape[0] < 2:
        return float("nan"), float("nan")
    cos = z @ z.T
    cos.fill_diagonal_(float("-inf"))
    nearest = cos.max(dim=1).values
    return float(nearest.max()), float(nearest.mean())


def alignment_from_embeddings(e: Tensor, clip_of_frame: Tensor, num_clips: int) -> tuple[float, Tensor]:
    """(within-motion alignment, z_m (M, d)) from state embeddings (F, d)."""
    z = F.normalize(torch.zeros(num_clips, e.shape[1], dtype=e.dtype).index_add_(0, clip_of_frame, e), dim=-1)
    cos = (e * z[clip_of_frame]).sum(-1)
    per_clip = torch.zeros(num_clips, dtype=cos.dtype).index_add_(0, clip_of_frame, cos)
    counts = torch.bincount(clip_of_frame, minlength=num_clips).to(cos.dtype)
    return float((per_clip / counts).mean()), z


def input_stats(inputs: Tensor, std_floor: float = STD_FLOOR) -> tuple[Tensor, Tensor]:
    """Mean and std (1795,) of encoder inputs; each std floored at ``std_floor`` x its feature group's median.

    Reference clips can hold dims that barely vary (a joint a clip set never
    moves, a structural zero): a plain std would scale the simulator's jitter in
    them by up to 1000 and make the reward of near-reference states arbitrary.
    """
    mean, std = inputs.mean(0), inputs.std(0)
    frames = std.reshape(HISTORY_LEN, FRAME_DIM)
    floor = torch.empty(FRAME_DIM, dtype=std.dtype, device=std.device)
    for sl in FRAME_LAYOUT.values():
        floor[sl] = std_floor * frames[:, sl].median()
    return mean, torch.maximum(std, floor.repeat(HISTORY_LEN))
