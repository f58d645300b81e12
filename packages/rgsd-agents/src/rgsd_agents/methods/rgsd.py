"""RGSD (the paper's method) and DIAYN (RGSD without reference grounding) on the shared PPO runner.

RGSD's reward is the env's own encoder reward ``r = C + kappa mu(s')^T z``:
the frozen pretrained encoder scores imitation worlds (z = z_m of the clip) and
the trainable discovery encoder q_phi' (a copy of the frozen one) scores
discovery worlds. After PPO, ``discovery.DiscoveryTrainer`` updates q_phi' on
the rollout (every ``update_every`` iterations); when the env lives on another
device than the learner, the env scores with its own copy, refreshed after each
update. Evaluation conditions on the frozen encoder's clip embedding z_m.

DIAYN (the paper's ablation, docs/methods.md) is the same code with a randomly initialised encoder and no
imitation episodes (``IMITATION = False``: the runner sets ``env.p_imitation``
to 0); evaluation picks the best of N sampled latents, as for the baselines
without a motion encoder.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rgsd_agents.methods.base import MethodContext, SkillMethod
from rgsd_agents.methods.discovery import DiscoveryConfig, DiscoveryTrainer
from rgsd_agents.rl.storage import RolloutStorage
from rgsd_envs.rewards.encoders import MLPEncoder, trainable_copy
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.files import InputFileError

Tensor = torch.Tensor


class RGSD(SkillMethod):
    """Reference-grounded skill discovery: the env's encoder reward and the discovery encoder's update."""

    NAME = "rgsd"
    CONFIG = DiscoveryConfig
    LATENT_CHOICE = "encoder"
    ENCODER = "pretrained"
    IMITATION = True
    ENV_REWARD = True

    def __init__(self, cfg: DiscoveryConfig, ctx: MethodContext):
        super().__init__(cfg, ctx)
        env = ctx.env
        frozen = env.core.frozen_encoder
        if not isinstance(frozen, MLPEncoder):
            where = ctx.run.encoder_path if ctx.run is not None else "the env's encoder"
            raise InputFileError(where, "training needs an MLP encoder file (rgsd pretrain)")
        frozen.requires_grad_(False)
        self.frozen = frozen
        same_device = env.core.device == ctx.device
        learner_frozen = frozen if same_device else copy.deepcopy(frozen).to(ctx.device)
        self.trainable: MLPEncoder = trainable_copy(learner_frozen).requires_grad_(True)
        """The discovery encoder q_phi' the learner trains."""
        self.env_encoder: MLPEncoder = self.trainable if same_device else trainable_copy(frozen)
        """The discovery encoder the env scores with: the learner's own, or a copy on the env's device."""
        env.set_encoder(self.env_encoder)
        self.kappa = float(env.reward_core.kappa)
        self.trainer = DiscoveryTrainer(self.trainable, learner_frozen, self.kappa, cfg, ctx.dp)
        self.iteration = 0
        """Updates asked for so far (``update_every`` counts them)."""

    def modules(self) -> dict[str, nn.Module]:
        return {"discovery_encoder": self.trainable}

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"discovery": self.trainer.optimizer}

    def after_load(self) -> None:
        """Refresh the env's copy of the discovery encoder from the loaded (or broadcast) weights."""
        self.sync_env_encoder()

    def update(self, storage: RolloutStorage, generator: torch.Generator) -> dict[str, Any]:
        """The discovery encoder's update on every ``update_every``-th rollout."""
        due = self.iteration % self.cfg.update_every == 0
        self.iteration += 1
        stats: dict[str, Any] = {"encoder_lr": self.trainer.optimizer.param_groups[0]["lr"]}
        if due:
            stats.update(self.trainer.update(storage, generator))
            self.sync_env_encoder()
        return stats

    @torch.no_grad()
    def sync_env_encoder(self) -> None:
        """Copy the learner's discovery encoder into the env's (when they live on different devices)."""
        if self.env_encoder is not self.trainable:
            for dst, src in zip(self.env_encoder.state_dict().values(), self.trainable.state_dict().values()):
                dst.copy_(src)

    def probe_latents(self, clips: Sequence[int]) -> Tensor | None:
        """None: the probe conditions each clip on the frozen encoder's z_m."""
        return None

    def probe_stats(self) -> dict[str, float]:
        """The discovery encoder's within-motion alignment and its cosine to the frozen encoder on the references."""
        core = self.ctx.env.core
        return self.trainer.reference_stats(core.ref_inputs, core.lib.clip_of_frame, core.lib.num_clips)

    def start_report(self, writer: Any) -> None:
        """How the frozen encoder's imitation reward falls off the reference (``<run>/reward_sharpness.json``)."""
        from rgsd_agents.pretraining.reward_sharpness import (
            SHARPNESS_FILE,
            reward_sharpness,
            tensorboard_scalars,
            write_report,
        )

        env, run = self.ctx.env, self.ctx.run
        rc = env.reward_core
        report = reward_sharpness(self.frozen, env.core.lib, rc.kappa, rc.constant, env_cfg=env.core.cfg)
        write_report(report, run.file(SHARPNESS_FILE))
        for k, v in tensorboard_scalars(report).items():
            writer.add_scalar(k, v, 0)

    def extra_state(self) -> dict[str, Any]:
        return {"iteration": self.iteration}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.iteration = int(state["iteration"])

    def export(self, run_path: Path, meta: dict[str, Any] | None = None) -> dict[str, Any]:
        """``discovery_encoder.pt``; evaluation embeds clips with the frozen ``encoder.pt``."""
        run = RunDir(run_path)
        self.trainable.save(run.discovery_encoder_path, **(meta or {}))
        return {"name": self.NAME, "latent_choice": self.LATENT_CHOICE, "encoder": RunDir.ENCODER}


class DIAYN(RGSD):
    """RGSD without reference grounding: a random encoder, discovery episodes only, best-of-N latents."""

    NAME = "diayn"
    LATENT_CHOICE = "best_of_n"
    ENCODER = "random"
    IMITATION = False

    def probe_latents(self, clips: Sequence[int]) -> Tensor:
        """Best-of-N draws, as evaluation picks DIAYN's latents."""
        return SkillMethod.probe_latents(self, clips)

    def export(self, run_path: Path, meta: dict[str, Any] | None = None) -> dict[str, Any]:
        """``discovery_encoder.pt``; evaluation picks the best of N sampled latents."""
        super().export(run_path, meta)
        return {"name": self.NAME, "latent_choice": self.LATENT_CHOICE}


__all__ = ["DIAYN", "RGSD"]
