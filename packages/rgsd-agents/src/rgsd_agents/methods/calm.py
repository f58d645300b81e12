"""CALM: Conditional Adversarial Latent Models (Tessler et al. 2023) on the shared PPO runner.

* Motion encoder E: a window of a reference clip -> a latent on the unit
  sphere. Here the window is the env's 5-frame encoder input s_t (1795-D) and E
  is an ``rgsd_envs`` ``MLPEncoder``, so it is saved as ``<run>/calm_encoder.pt``
  and rgsd-eval embeds clips with it exactly as it does RGSD's encoder (CALM's
  own window is longer; ours is the one the env already stacks).
* Conditional discriminator D(s, s' | z): input ``[transition features, z]``.
  Reference samples are a reference transition with z = E(window ending at the
  same frame) (the transition is the window's last frames, as CALM conditions
  its demo observations on the encoding of their own motion); policy samples
  are the policy's transitions with the z they were made with. Loss: binary
  cross-entropy, gradient penalty on the reference inputs, logit regulariser,
  weight decay (as ASE). The encoder is trained through the discriminator's
  reference term plus
* alignment (windows of one clip at most ``align_max_offset`` frames apart map
  close: mean ||E(w) - E(w')||^2) and uniformity (latents spread over the
  sphere: log mean exp(-2 ||E(w_i) - E(w_j)||^2)), Wang & Isola (2020) as CALM.
* Reward -log(1 - D(s, s' | z)).
* The policy's latent: E of a random reference window (the encodings of every
  reference frame are refreshed after each update), drawn at the start of an
  episode and again after a random hold of ``latent_steps_min`` ..
  ``latent_steps_max`` steps, like ASE's schedule (``resample: false``: one per
  episode, as the RGSD paper ran every baseline). The RGSD paper encoded whole
  clips (2-5 s, zero-padded) for CALM; here the window is the 5-frame s_t, and a
  clip's latent at evaluation is the normalised mean of its windows' encodings
  (the same rule as RGSD's z_m).

Evaluation picks a clip's latent with the motion encoder (``calm_encoder.pt``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from rgsd_agents.methods.base import MethodContext, SkillMethod
from rgsd_agents.methods.common import (
    FEATURE_DIM,
    AdversarialConfig,
    LatentSchedule,
    MLPHead,
    discriminator_regularizer,
    discriminator_reward,
    gan_loss,
    gradient_penalty,
    transition_features,
)
from rgsd_agents.storage import RolloutStorage
from rgsd_envs.envs.observations import SKILL_DIM
from rgsd_envs.rewards.encoders import MLPEncoder, clip_embeddings, embed

Tensor = torch.Tensor
CALM_ENCODER = "calm_encoder.pt"


@dataclass
class CALMConfig(AdversarialConfig):
    """CALM's motion encoder, conditional discriminator, reward and latent schedule."""

    encoder_hidden: tuple[int, ...] = (1024, 512)
    disc_hidden: tuple[int, ...] = (1024, 1024, 512)
    alignment_coef: float = 1.0
    uniformity_coef: float = 1.0
    align_max_offset: int = 10
    """Frames apart (within one clip) of the windows the alignment term pulls together."""

    def __post_init__(self) -> None:
        self.encoder_hidden = tuple(int(h) for h in self.encoder_hidden)
        self.disc_hidden = tuple(int(h) for h in self.disc_hidden)


def conditional_inputs(x: Tensor, z: Tensor) -> Tensor:
    """The conditional discriminator's input: transition features then the latent, (B, dim + 16)."""
    return torch.cat([x, z], dim=-1)


def alignment_loss(a: Tensor, b: Tensor) -> Tensor:
    """mean ||a_i - b_i||^2 of positive pairs (unit rows)."""
    return (a - b).square().sum(-1).mean()


def uniformity_loss(z: Tensor, t: float = 2.0) -> Tensor:
    """log mean_{i<j} exp(-t ||z_i - z_j||^2) (Wang & Isola 2020)."""
    return torch.pdist(z, p=2).square().mul(-t).exp().mean().log()


def calm_losses(
    disc: MLPHead,
    encoder: MLPEncoder,
    policy_x: Tensor,
    policy_z: Tensor,
    ref_windows: Tensor,
    near_windows: Tensor,
    cfg: CALMConfig,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Discriminator + encoder loss of one minibatch; ``ref_windows``/``near_windows`` are (B, 1795) reference
    encoder inputs of frames and of nearby frames of the same clips."""
    z_ref = encoder(ref_windows)
    ref_in = conditional_inputs(transition_features(ref_windows, cfg.frames), z_ref)
    ref_in_n = disc.norm(ref_in).detach().requires_grad_(True)  # the penalty on standardised inputs, as ASE
    gp = gradient_penalty(disc.from_standardized(ref_in_n).squeeze(-1), ref_in_n)
    ref_logits = disc(ref_in).squeeze(-1)  # the encoder learns through this term
    pol_logits = disc(conditional_inputs(policy_x, policy_z)).squeeze(-1)
    gan = gan_loss(pol_logits, ref_logits)
    align = alignment_loss(z_ref, encoder(near_windows))
    uniform = uniformity_loss(z_ref)
    reg = discriminator_regularizer(disc, disc.last_layer(), cfg)
    loss = gan + cfg.grad_penalty * gp + reg + cfg.alignment_coef * align + cfg.uniformity_coef * uniform
    with torch.no_grad():
        stats = {
            "disc_loss": gan.detach(),
            "grad_penalty": gp.detach(),
            "alignment": align.detach(),
            "uniformity": uniform.detach(),
            "reference_accuracy": (ref_logits > 0).float().mean(),
            "policy_accuracy": (pol_logits < 0).float().mean(),
        }
    return loss, stats


class CALM(SkillMethod):
    """CALM on the shared runner (see the module docstring)."""

    NAME = "calm"
    CONFIG = CALMConfig
    LATENT_CHOICE = "encoder"

    def __init__(self, cfg: CALMConfig, ctx: MethodContext):
        super().__init__(cfg, ctx)
        ref = ctx.reference
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(ctx.seed + 202)
            self.encoder = MLPEncoder(cfg.encoder_hidden, ref.inputs.shape[1], SKILL_DIM)
            self.disc = MLPHead(cfg.frames * FEATURE_DIM + SKILL_DIM, cfg.disc_hidden, 1)
        inputs = ref.inputs.cpu()
        self.encoder.set_input_stats(inputs.mean(0), inputs.std(0))
        self._fit_disc_norm(inputs)
        self.encoder.to(self.device)
        self.disc.to(self.device)
        self.optimizer = torch.optim.Adam(
            [*self.encoder.parameters(), *self.disc.parameters()], lr=cfg.lr, fused=True
        )  # see ppo.PPO: no host read per step
        self.schedule = LatentSchedule(ctx.num_envs, cfg.latent_steps_min, cfg.latent_steps_max, self.generator)
        self.reference_latents = self._encode_references()
        """(F, 16) E of every reference window, refreshed after each update (the latents the policy draws)."""

    def _fit_disc_norm(self, inputs: Tensor) -> None:
        """Standardise the transition part by the references' statistics; the unit latent part is left as is."""
        x = transition_features(inputs, self.cfg.frames)
        mean = torch.cat([x.mean(0), torch.zeros(SKILL_DIM)])
        std = torch.cat([x.std(0).clamp_min(1e-3), torch.ones(SKILL_DIM)])
        self.disc.norm.mean.copy_(mean)
        self.disc.norm.std.copy_(std)

    @torch.no_grad()
    def _encode_references(self) -> Tensor:
        return embed(self.encoder, self.ctx.reference.inputs)

    def modules(self) -> dict[str, nn.Module]:
        return {"encoder": self.encoder, "disc": self.disc}

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"optimizer": self.optimizer}

    def draw_latents(self, n: int) -> Tensor:
        """(n, 16) encodings of uniformly drawn reference windows."""
        return self.reference_latents[self.ctx.reference.sample_frames(n, self.generator)]

    def choose_skills(self, started: Tensor, skills: Tensor) -> Tensor | None:
        expired = self.schedule.tick(started) if self.cfg.resample else torch.zeros_like(started)
        new = (started.to(expired.device) | expired).to(skills.device).unsqueeze(-1)
        return torch.where(new, self.draw_latents(skills.shape[0]).to(skills.device), skills)

    @torch.no_grad()
    def relabel(self, storage: RolloutStorage) -> dict[str, Tensor]:
        x = transition_features(storage.flat("encoder_inputs"), self.cfg.frames)
        logits = self.disc(conditional_inputs(x, storage.flat("skills"))).squeeze(-1)
        disc = discriminator_reward(logits)
        reward = self.cfg.disc_weight * disc
        storage.rewards.copy_(reward.view_as(storage.rewards))
        return {"disc_reward": disc.mean(), "reward": reward.mean()}

    def update(self, storage: RolloutStorage, generator: torch.Generator) -> dict[str, Tensor]:
        cfg, ref = self.cfg, self.ctx.reference
        x_all = transition_features(storage.flat("encoder_inputs"), cfg.frames)
        z_all = storage.flat("skills")
        params = [*self.encoder.parameters(), *self.disc.parameters()]

        def step(idx: Tensor) -> dict[str, Tensor]:
            frames = ref.sample_frames(idx.shape[0], self.generator)
            near = ref.nearby_frames(frames, cfg.align_max_offset, self.generator)
            windows, near_windows = ref.inputs[frames], ref.inputs[near]
            loss, stats = calm_losses(self.disc, self.encoder, x_all[idx], z_all[idx], windows, near_windows, cfg)
            self.step_optimizer(self.optimizer, loss, params)
            return stats

        self.encoder.train()
        stats = self.over_minibatches(storage, generator, step)
        self.encoder.eval()
        self.reference_latents = self._encode_references()
        return stats

    @torch.no_grad()
    def probe_latents(self, num_clips: int) -> Tensor:
        """(clips, 1, 16): each clip's latent as evaluation takes it (normalised mean of its windows' encodings)."""
        ref = self.ctx.reference
        z = clip_embeddings(self.encoder, ref.inputs, ref.clip_of_frame, int(ref.starts.shape[0]))
        return z[:num_clips].unsqueeze(1)

    def extra_state(self) -> dict:
        return {"schedule": self.schedule.state_dict()}

    def load_extra_state(self, state: dict) -> None:
        self.schedule.load_state_dict(state["schedule"])
        self.reference_latents = self._encode_references()

    def export(self, run_path: Path, meta: dict | None = None) -> dict:
        self.encoder.save(Path(run_path) / CALM_ENCODER, method="calm")
        return {"name": self.NAME, "latent_choice": "encoder", "encoder": CALM_ENCODER}
