"""What the runner does with a method: build it from the env, and write ``<run>/method.json`` for evaluation."""

from __future__ import annotations

import json
from typing import Any

import torch

from rgsd_agents.distributed import DataParallel
from rgsd_agents.methods import BUILTIN, build_method
from rgsd_agents.methods.base import MethodContext, SkillMethod
from rgsd_agents.methods.common import ReferenceData
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.files import atomic_path


def build_runner_method(
    cfg: Any, core: Any, device: torch.device, dp: DataParallel | None = None
) -> SkillMethod | None:
    """The plug-in method of a training config (None for the runner's own RGSD/DIAYN), on the learner's device.

    Networks are seeded by ``cfg.seed`` alone (the same on every rank); the method's random numbers by rank."""
    if cfg.method.name == BUILTIN:
        return None
    ctx = MethodContext(ReferenceData.from_core(core, device), cfg.num_envs, device, cfg.seed, dp)
    return build_method(cfg.method.name, cfg.method.options, ctx)


def builtin_entries(cfg: Any) -> dict[str, Any]:
    """method.json of an RGSD run (its frozen encoder's z_m) or a DIAYN run (random encoder: best of N)."""
    if cfg.encoder_init == "random":
        return {"name": "diayn", "latent_choice": "best_of_n"}
    return {"name": "rgsd", "latent_choice": "encoder", "encoder": RunDir.ENCODER}


def write_method_file(run: RunDir, entries: dict[str, Any]) -> None:
    """Write ``<run>/method.json`` atomically."""
    with atomic_path(run.file(RunDir.METHOD)) as tmp:
        tmp.write_text(json.dumps(entries, indent=2) + "\n")
