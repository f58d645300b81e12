"""The seam between a training loop and a skill-discovery method.

Every method (RGSD, DIAYN, ASE, CALM, METRA, Meta Motivo) is one ``SkillMethod``
subclass in this package, registered by name in ``rgsd_agents.methods.METHODS``;
the training command resolves it by ``method.name`` and the loop it names
(``LOOP``) and never branches on which method it runs (rsl_rl's runner resolving
its algorithm class is the shape). A method owns its networks and their
optimisers, the reward the policy is trained on, its update and how it chooses a
policy's latent z: per step while training (``choose_skills``) and per clip (or per step of a clip) at
evaluation (``LATENT_CHOICE``, written into the run folder so that rgsd-eval can
follow it without importing rgsd-agents). Class attributes say how the shared env
is set up for it: ``ENCODER`` (the frozen encoder the env is built with: a
pretrained one for RGSD, a random one elsewhere, where it only stacks the 5-frame
histories), ``IMITATION`` (whether imitation episodes are part of training;
otherwise ``env.p_imitation`` is 0) and ``ENV_REWARD`` (whether the env's encoder
reward is what the policy trains on).

The on-policy runner (``rgsd_agents.training.runner``) calls, per iteration::

    for each step:  skills = method.choose_skills(started, skills)   # None: keep the env's z
    after the last step, before bootstrapping and GAE:  method.relabel(storage)
    in every PPO minibatch step:  obs_n = method.policy_inputs(ac, idx, obs_n)
                                  loss += method.policy_loss(ac, obs_n)
                                  (PPO's backward and step)
                                  method.after_policy_step(idx)
    after PPO:      method.update(storage, generator)

``relabel`` writes ``storage.rewards`` from the stored transitions
(``storage.encoder_inputs`` holds s' with its history for discovery samples,
``storage.skills`` the z each transition was made with).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from rgsd_agents.methods.common import ReferenceData, unit_sphere
from rgsd_agents.rl.distributed import DataParallel
from rgsd_agents.rl.storage import RolloutStorage
from rgsd_envs.runs.run_dir import RunDir

Tensor = torch.Tensor

PROBE_CANDIDATES = 8
"""Latents per clip the training probe tries for a best-of-N method (rgsd eval: 64 by default, the paper 500)."""


@dataclass
class MethodContext:
    """What a method is built from: the reference frames, sizes, devices, seed, and the env and run folder."""

    reference: ReferenceData
    num_envs: int
    device: torch.device
    seed: int
    dp: DataParallel | None = None
    env: Any = None
    """The training env (``RGSDTorchEnv``): RGSD sets its discovery encoder on it."""
    run: RunDir | None = None
    """The run folder (reports written at the start of training)."""


class SkillMethod:
    """Base of a skill-discovery method on the shared runner (see the module docstring)."""

    NAME: ClassVar[str]
    CONFIG: ClassVar[type]
    """The method's config dataclass (the ``method.options`` section of the training config)."""
    LATENT_CHOICE: ClassVar[str] = "best_of_n"
    """How evaluation picks a clip's latent (``RunDir.LATENT_CHOICES``): "encoder" (a motion encoder's clip
    embedding, the file ``export`` names), "best_of_n" (the best of N sampled latents by Cartesian error),
    "clip_latents" (one stored per clip) or "tracking" (one stored per step of each clip)."""
    CLIP_LATENTS_RULE: ClassVar[str | None] = None
    """What the method's stored latent of a clip (``clip_latents.json``) is, in words: method.json's
    ``clip_latents_rule``, which the reports quote; None: it stores none."""
    LOOP: ClassVar[str] = "on_policy"
    """The training loop: "on_policy" (the shared PPO runner) or "off_policy" (a replay-buffer learner)."""
    ENCODER: ClassVar[str] = "random"
    """The env's frozen encoder: "pretrained" (pretrained on the motions, or the config's ``encoder`` file) or
    "random" (randomly initialised: it only stacks the env's histories, its reward is not used)."""
    IMITATION: ClassVar[bool] = False
    """Whether training has imitation episodes (``env.p_imitation`` as configured); False sets it to 0."""
    ENV_REWARD: ClassVar[bool] = False
    """Whether the policy trains on the env's encoder reward (False: ``relabel`` writes the method's own)."""

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

    def policy_inputs(self, ac: Any, idx: Tensor, obs_n: Tensor) -> Tensor:
        """The (normalised) policy inputs of PPO's minibatch ``idx`` (rows of the flat storage): a method may put
        latents with gradient into them (CALM re-encodes with its current encoder and normalises the latent with
        ``ac.obs_normalizer``, which normalises the skill slice as every other input). Default: unchanged."""
        return obs_n

    def policy_loss(self, ac: Any, obs_n: Tensor) -> tuple[Tensor | None, dict[str, Tensor]]:
        """An extra term of PPO's minibatch loss on the actor (ASE's diversity loss) and its statistics."""
        return None, {}

    def after_policy_step(self, idx: Tensor) -> dict[str, Tensor]:
        """Called after each PPO minibatch step (its backward done): the method's own steps on the same minibatch
        (ASE and CALM train their discriminator here, CALM steps its encoder on the policy loss's gradient)."""
        return {}

    def relabel(self, storage: RolloutStorage) -> dict[str, Tensor]:
        """Write the method's rewards into ``storage.rewards`` (before GAE); returns reward statistics (0-d
        tensors, read from the device once per iteration by the runner). Default: the env's reward stands."""
        return {}

    def update(self, storage: RolloutStorage, generator: torch.Generator) -> dict[str, Tensor]:
        """Train the method's networks on the rollout; returns loss statistics (0-d tensors)."""
        return {}

    @torch.no_grad()
    def probe_latents(self, clips: Sequence[int]) -> Tensor | None:
        """(len(clips), K, skill_dim) latents the imitation probe tries for each of the library's ``clips`` (the best
        counts): for best-of-N methods ``PROBE_CANDIDATES`` fixed draws (the same at every probe, so the curve compares
        like with like); None: the env's encoder embedding z_m of each clip."""
        g = torch.Generator().manual_seed(self.ctx.seed + 4242)
        dim = self.ctx.reference.layout.skill_dim
        return unit_sphere(len(clips) * PROBE_CANDIDATES, g, dim).view(len(clips), PROBE_CANDIDATES, dim)

    def probe_stats(self) -> dict[str, float]:
        """The method's own statistics logged with each training probe (``discovery/``)."""
        return {}

    def start_report(self, writer: Any) -> None:
        """Reports of a fresh run before its first iteration (rank 0; TensorBoard ``writer``)."""

    def after_load(self) -> None:
        """Called after the method's weights were loaded from a checkpoint or broadcast to every rank."""

    def extra_state(self) -> dict[str, Any]:
        """State besides networks, optimisers and the generator (e.g. latent schedules, dual variables)."""
        return {}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        """Restore ``extra_state``."""

    def export(self, run_path: Path, meta: dict[str, Any] | None = None) -> dict[str, Any]:
        """Write the files evaluation needs into the run folder (``meta``: the run's iteration and step, stored
        in them); returns the ``method.json`` entries."""
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
