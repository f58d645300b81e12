"""What a training's iterations amount to, in its own loop's terms: transitions collected and gradient steps taken.

An iteration means different things in the two loops (``rgsd_agents.training.trainers.LOOPS``):

- on-policy (PPO): ``horizon`` steps of all ``num_envs`` worlds, then ``ppo.epochs`` passes of minibatches of
  ``ppo.minibatch_size`` over that rollout;
- off-policy (``rgsd_agents.training.offpolicy``): ``loop.steps_per_iteration`` steps of all worlds into the replay
  buffer, then ``loop.updates_per_iteration`` gradient steps of ``batch_size`` samples, none until
  ``loop.random_steps`` transitions are collected and the buffer holds a batch.

``rgsd reproduce`` states every training's budget with ``training_budget`` (its plan and report's step table).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rgsd_agents.config import TrainConfig
from rgsd_agents.methods import method_class, method_config
from rgsd_agents.rl.storage import minibatch_count


@dataclass(frozen=True)
class TrainingBudget:
    """One training's budget: its iterations and what they collect and update."""

    iterations: int
    max_minutes: float | None
    """Limit on the iterations' own time (``TrainConfig.max_minutes``; None: the iterations end the run); with one,
    the counts below are upper bounds."""
    worlds: int
    steps_per_iteration: int
    """Steps of every world per iteration (PPO: ``horizon``; off-policy: ``loop.steps_per_iteration``)."""
    gradient_steps_per_iteration: int
    """The policy's gradient steps per iteration once updates run."""
    transitions: int
    """Env transitions of all worlds over all iterations."""
    gradient_steps: int
    """The policy's gradient steps over all iterations (PPO's minibatch steps, or the off-policy learner's updates)."""
    gradient_batch: int
    """Samples per gradient step."""

    def describe(self) -> str:
        """The budget in words, e.g. "20000 it, 4096 worlds x 1 step: 81.9 M transitions, 8.00 M gradient steps of
        1024" ("at most" where ``max_minutes`` may end the run first)."""
        text = f"{self.iterations} it" + (f" or {self.max_minutes:g} min" if self.max_minutes is not None else "")
        steps = "step" if self.steps_per_iteration == 1 else "steps"
        text += f", {self.worlds} worlds x {self.steps_per_iteration} {steps}: "
        text += "at most " if self.max_minutes is not None else ""
        return text + (
            f"{format_count(self.transitions)} transitions, {format_count(self.gradient_steps)} gradient steps of "
            f"{self.gradient_batch}"
        )


def format_count(n: int) -> str:
    """A count to three significant digits with k, M or B: 81920000 -> "81.9 M", 400000 -> "400 k"."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:#.3g}".rstrip(".") + f" {unit}"
    return str(n)


def on_policy_budget(cfg: TrainConfig) -> TrainingBudget:
    """The PPO runner's budget: every iteration a rollout of ``num_envs x horizon`` and ``epochs`` passes over it."""
    rollout = cfg.num_envs * cfg.horizon
    minibatches = minibatch_count(rollout, cfg.ppo.minibatch_size)
    per_iteration = cfg.ppo.epochs * minibatches
    return TrainingBudget(
        iterations=cfg.iterations,
        max_minutes=cfg.max_minutes,
        worlds=cfg.num_envs,
        steps_per_iteration=cfg.horizon,
        gradient_steps_per_iteration=per_iteration,
        transitions=cfg.iterations * rollout,
        gradient_steps=cfg.iterations * per_iteration,
        gradient_batch=rollout // minibatches,
    )


def off_policy_budget(cfg: TrainConfig) -> TrainingBudget:
    """The off-policy runner's budget, from the method's ``loop`` (``OffPolicyConfig``) and ``batch_size``."""
    options = method_config(cfg.method.name, cfg.method.options)
    loop, batch = options.loop, options.batch_size
    return TrainingBudget(
        iterations=cfg.iterations,
        max_minutes=cfg.max_minutes,
        worlds=cfg.num_envs,
        steps_per_iteration=loop.steps_per_iteration,
        gradient_steps_per_iteration=loop.updates_per_iteration,
        transitions=cfg.iterations * loop.steps_per_iteration * cfg.num_envs,
        gradient_steps=loop.gradient_steps(cfg.iterations, cfg.num_envs, batch),
        gradient_batch=batch,
    )


BUDGETS: dict[str, Callable[[TrainConfig], TrainingBudget]] = {
    "on_policy": on_policy_budget,
    "off_policy": off_policy_budget,
}
"""Each ``SkillMethod.LOOP`` and how its budget is counted."""


def training_budget(cfg: TrainConfig) -> TrainingBudget:
    """The budget of training ``cfg`` in the terms of its method's loop."""
    return BUDGETS[method_class(cfg.method.name).LOOP](cfg)
