"""The reference clips of a pretraining and their encoder inputs."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from rgsd_agents.pretraining.config import PretrainConfig
from rgsd_envs.envs.config import MOTIONS_HINT, missing_motion
from rgsd_envs.envs.observations import reference_encoder_inputs
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.utils.config import UNNAMED
from rgsd_envs.utils.device import resolve_device
from rgsd_envs.utils.files import InputFileError

Tensor = torch.Tensor


def resolve_motions(motions: str | list[str]) -> str | list[str]:
    """``motions`` with absolute paths ("demo" kept); a clear error naming the field for a missing path."""
    single = isinstance(motions, (str, os.PathLike))
    items = [motions] if single else list(motions)
    if not items:
        raise InputFileError(UNNAMED, "no reference motions given", "motions")
    missing = missing_motion(items)
    if missing is not None:
        raise InputFileError(missing, f"no such motion file or folder; {MOTIONS_HINT}", "motions")
    resolved = ["demo" if str(item) == "demo" else str(Path(item).resolve()) for item in items]
    return resolved[0] if single else resolved


def load_reference(cfg: PretrainConfig) -> tuple[MotionLib, Tensor]:
    """The MotionLib of ``cfg.motions`` and its encoder inputs (F, 1795)."""
    lib = MotionLib(resolve_motions(cfg.motions), device=resolve_device(cfg.device))
    if lib.num_clips < 2:
        raise ValueError(
            f"pretraining needs at least 2 reference clips (negatives come from other clips); "
            f"motions={cfg.motions!r} has {lib.num_clips}"
        )
    return lib, reference_encoder_inputs(lib)
