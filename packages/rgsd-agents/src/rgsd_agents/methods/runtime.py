"""What a training loop does with a method: build it from the env, and write ``<run>/method.json`` for evaluation."""

from __future__ import annotations

import json
from typing import Any

import torch

from rgsd_agents.methods import build_method
from rgsd_agents.methods.base import MethodContext, SkillMethod
from rgsd_agents.methods.common import ReferenceData
from rgsd_agents.rl.distributed import DataParallel
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.files import atomic_path


def build_runner_method(
    cfg: Any, env: Any, device: torch.device, run: RunDir | None = None, dp: DataParallel | None = None
) -> SkillMethod:
    """The method of a training config on the learner's device, built on the training env.

    Networks are seeded by ``cfg.seed`` alone (the same on every rank); the method's random numbers by rank."""
    reference = ReferenceData.from_core(env.core, device)
    ctx = MethodContext(reference, cfg.num_envs, device, cfg.seed, dp, env=env, run=run)
    return build_method(cfg.method.name, cfg.method.options, ctx)


def write_method_file(run: RunDir, entries: dict[str, Any]) -> None:
    """Write ``<run>/method.json`` atomically."""
    with atomic_path(run.file(RunDir.METHOD)) as tmp:
        tmp.write_text(json.dumps(entries, indent=2) + "\n")
