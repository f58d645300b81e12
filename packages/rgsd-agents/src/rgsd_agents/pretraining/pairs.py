"""(anchor, positive) pairs of reference states: each pair from one clip, the clip uniform over clips."""

from __future__ import annotations

import torch

from rgsd_envs.motion.library import MotionLib

Tensor = torch.Tensor


def sample_pairs(lib: MotionLib, batch_size: int, generator: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
    """Clip ids (B,) uniform over clips, and anchor and positive frame indices (B,) inside each clip."""
    clips = torch.randint(lib.num_clips, (batch_size,), generator=generator, device=lib.device)
    n = lib.num_frames[clips]
    u = torch.rand(2, batch_size, generator=generator, device=lib.device)
    frames = lib.starts[clips] + (u * n).long().clamp_max(n - 1)
    return clips, frames[0], frames[1]
