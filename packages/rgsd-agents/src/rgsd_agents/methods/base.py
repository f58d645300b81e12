"""The seam between the shared PPO runner and a skill-discovery method.

A method owns its networks and their optimisers, the reward the policy is
trained on, its update from the shared rollout storage and how it chooses a
policy's latent z: per step while training (``choose_skills``) and per clip at
evaluation (``LATENT_CHOICE``, written into the run folder so that rgsd-eval can
follow it without importing rgsd-agents). The runner calls, per iteration::

    for each step:  skills = method.choose_skills(started, skills)   # None: keep the env's z
    after the last step, before bootstrapping and GAE:  method.relabel(storage)
    after PPO:      method.update(storage, generator)

``relabel`` writes ``storage.rewards`` from the stored transitions
(``storage.encoder_inputs`` holds s' with its history for discovery samples,
``storage.skills`` the z each transition was made with). A sixth method is one
more module in this package with a ``SkillMethod`` subclass and a line in
``rgsd_agents.methods.METHODS``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from rgsd_agents.distributed import DataParallel
from rgsd_agents.methods.common import ReferenceData, unit_sphere
from rgsd_agents.storage import RolloutStorage

Tensor = torch.Tensor

PROBE_CANDIDATES = 8
"""Latents per clip the training probe tries for a best-of-N method (rgsd eval: 64 by default, the paper 500)."""


@dataclass
class MethodContext:
    """What a method is built from: the reference frames, sizes, devices and seed."""

    reference: ReferenceData
    num_envs: int
    device: torch.device
    seed: int
    dp: DataParallel | None = None


class SkillMethod:
    """Base of a skill-discovery method on the shared runner (see the module docstring)."""

    NAME: ClassVar[str]
    CONFIG: ClassVar[type]
    """The method's config dataclass (the ``method.options`` section of the training config)."""
    LATENT_CHOICE: ClassVar[str] = "best_of_n"
    """How evaluation picks a clip's latent (``RunDir.LATENT_CHOICES``): "encoder" (a motion encoder's clip
    embedding, the file ``export`` names) or "best_of_n" (the best of N sampled latents by Cartesian error)."""

    def __init__(self, cfg: Any, ctx: MethodContext):
        self.cfg = cfg
        self.ctx = ctx
        self.device = ctx.device
        self.generator = torch.Generator(ctx.device).manual_seed(ctx.seed + 7919 + (ctx.dp.rank if ctx.dp else 0))
        """The method's own random numbers (reference minibatches, latents), saved in checkpoints."""

    def modules(self) -> dict[str, nn.Module]:
        """The method's networks by name (checkpointed, broadcast in a data-parallel run)."""
        return {}

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """The method's optimisers by name (checkpointed)."""
        return {}

    def choose_skills(self, started: Tensor, skills: Tensor) -> Tensor | None:
        """Called after every env step: the z (N, 16) every world should continue with, or None to keep the
        env's. ``started`` (N,) marks worlds whose new episode began in this step; ``skills`` is their current z."""
        return None

    def policy_regularizer(self, ac: Any) -> Callable[[Tensor], tuple[Tensor, dict[str, Tensor]]] | None:
        """An extra term of PPO's loss on the actor (``ppo.PolicyRegularizer``), or None."""
        return None

    def relabel(self, storage: RolloutStorage) -> dict[str, Tensor]:
        """Write the method's rewards into ``storage.rewards`` (before GAE); returns reward statistics (0-d
        tensors, read from the device once per iteration by the runner)."""
        raise NotImplementedError

    def update(self, storage: RolloutStorage, generator: torch.Generator) -> dict[str, Tensor]:
        """Train the method's networks on the rollout; returns loss statistics (0-d tensors)."""
        return {}

    @torch.no_grad()
    def probe_latents(self, num_clips: int) -> Tensor:
        """(clips, K, 16) latents the imitation probe tries per clip (the best counts): for best-of-N methods
        ``PROBE_CANDIDATES`` fixed draws (the same at every probe, so the curve compares like with like)."""
        g = torch.Generator().manual_seed(self.ctx.seed + 4242)
        return unit_sphere(num_clips * PROBE_CANDIDATES, g).view(num_clips, PROBE_CANDIDATES, -1)

    def extra_state(self) -> dict[str, Any]:
        """State besides networks, optimisers and the generator (e.g. latent schedules, dual variables)."""
        return {}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        """Restore ``extra_state``."""

    def export(self, run_path: Path) -> dict[str, Any]:
        """Write the files evaluation needs into the run folder; returns the ``method.json`` entries."""
        return {"name": self.NAME, "latent_choice": self.LATENT_CHOICE}

    # -- checkpoints -----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything the next iteration depends on."""
        return {
            "modules": {k: m.state_dict() for k, m in self.modules().items()},
            "optimizers": {k: o.state_dict() for k, o in self.optimizers().items()},
            "generator": self.generator.get_state(),
            "extra": self.extra_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict``."""
        for k, m in self.modules().items():
            m.load_state_dict(state["modules"][k])
        for k, o in self.optimizers().items():
            o.load_state_dict(state["optimizers"][k])
        self.generator.set_state(state["generator"])
        self.load_extra_state(state["extra"])

    # -- helpers for subclasses ------------------------------------------------------------
    def over_minibatches(
        self, storage: RolloutStorage, generator: torch.Generator, step: Callable[[Tensor], dict[str, Tensor]]
    ) -> dict[str, Tensor]:
        """``cfg.epochs`` passes of ``step(indices)`` over the rollout's minibatches (``cfg.minibatch_size``);
        the mean of the statistics it returns, as 0-d tensors (the runner reads them at once)."""
        sums: dict[str, Tensor] = {}
        steps = 0
        for _ in range(self.cfg.epochs):
            for idx in storage.minibatch_indices(self.cfg.minibatch_size, generator):
                for k, v in step(idx).items():
                    sums[k] = sums[k] + v if k in sums else v
                steps += 1
        return {k: v / steps for k, v in sums.items()}

    def step_optimizer(self, optimizer: torch.optim.Optimizer, loss: Tensor, params: list[nn.Parameter]) -> None:
        """Backward, average gradients over ranks, optional clipping, step."""
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.ctx.dp is not None:
            self.ctx.dp.average_gradients(params)
        clip = getattr(self.cfg, "max_grad_norm", None)
        if clip is not None:
            nn.utils.clip_grad_norm_(params, clip)
        optimizer.step()
