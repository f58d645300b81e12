"""Which training loop trains a method: the PPO runner or the off-policy runner, by the method's ``LOOP``."""

from __future__ import annotations

import importlib
from pathlib import Path

from rgsd_agents.methods import method_class
from rgsd_agents.rl.loop import TrainingLoop
from rgsd_envs.runs.run_dir import RunDir

LOOPS = {
    "on_policy": "rgsd_agents.training.runner:Runner",
    "off_policy": "rgsd_agents.training.offpolicy:OffPolicyRunner",
}
"""Each ``SkillMethod.LOOP`` and the trainer class that runs it."""


def trainer_class(method_name: str) -> type[TrainingLoop]:
    """The trainer class of method ``method_name`` (a clear error for an unknown method)."""
    module, name = LOOPS[method_class(method_name).LOOP].split(":")
    return getattr(importlib.import_module(module), name)


def saved_method(run_dir: str | Path) -> str:
    """The method a run folder was trained with (its config.yaml; "rgsd" where the file has no method)."""
    run = RunDir(run_dir)
    run.check(RunDir.CONFIG)
    method = run.config().get("method") or {}
    return method.get("name", "rgsd") if isinstance(method, dict) else "rgsd"
