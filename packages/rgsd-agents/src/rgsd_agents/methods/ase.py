"""ASE: Adversarial Skill Embeddings (Peng et al. 2022) on the shared PPO runner.

* Latent z uniform on the unit sphere (16-D here: the env's skill slot; ASE uses
  64-D), one per episode by default (the RGSD paper's appendix says it ran every
  method that way, and left out ASE's fallen-state starts); ``resample: true``
  holds it for a random number of steps (uniform in ``latent_steps_min`` ..
  ``latent_steps_max``, ASE: 1..150) and then draws a new one, also mid-episode,
  as ASE's code.
* Discriminator D(s, s') on transitions of the 358-D frame features (ASE's own
  discriminator sees 10 frames of its AMP features; here ``frames`` of ours,
  default 2 = (s, s')); reference transitions are drawn clip first, as ASE's
  motion library draws them: a clip uniformly, then a time within it with the
  transition inside the clip. Loss: binary cross-entropy (reference 1, policy 0), a
  gradient penalty on the reference samples (ASE: 5), a logit regulariser on the
  output layer's weights (ASE: 0.01) and weight decay on the trunk and the logit
  head (ASE: 1e-4; none on the encoder head, as ASE's enc_weight_decay 0).
* Encoder q(z | s, s') = vMF(mu(s, s'), kappa) as a second head on the
  discriminator's trunk (as in ASE); trained by maximising log q(z | s, s') of
  the policy's own transitions, i.e. minimising -kappa mu^T z.
* Schedule as ASE's code: discriminator and encoder take one Adam step (``lr``,
  ASE's 2e-5) in every PPO minibatch step (``after_policy_step``), on the first
  ``disc_minibatch_size`` of the minibatch's rollout rows (ASE: 4096) and as many
  reference transitions, so PPO's ``epochs`` x minibatches steps per rollout
  (ASE: 6 mini-epochs of 8 minibatches). The transition features they need are
  cut once per rollout, in ``relabel``.
* PPO and the policy are the shared runner's; the ``ase_paper`` preset sets them
  as ASE's code has them (ReLU 1024, 1024, 512 with a latent branch of 512, 256,
  6 epochs of 16,384, critic coefficient 5, one learning rate 2e-5, no gradient
  clipping, bounds at 1.0).
* Reward ``disc_weight * -log(1 - D(s, s')) + beta * max(kappa mu^T z, 0)``:
  beta log q(z | s, s') without the vMF normaliser log C_d(kappa) (a constant
  that would only shift every reward, and negative rewards would pay the policy
  to fall), clamped at 0 as in ASE's code. The defaults are ASE's weights
  (0.5 x disc_reward_scale 2 = 1.0 for the discriminator, 0.5 for the encoder,
  kappa 1).
* ASE's diversity loss (its policy regulariser, added to PPO's loss through
  ``policy_loss``) is an option, default OFF: the RGSD paper reports ASE
  without its diversity term (``diversity_coef``; ASE's own value is 0.01 with
  target 1.0; see ``diversity_loss``).

Not carried over from ASE's code: its replay buffer of older policy samples for
the discriminator (here the current rollout's transitions only), its
fallen-state starts (the RGSD paper left those out for every method) and its
worlds that act with the mean action (``enable_eps_greedy``; every world samples
here, and every sample is in PPO's loss).

Evaluation picks a clip's latent as the best of N sampled latents by Cartesian
error (ASE has no motion encoder for whole clips).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from rgsd_agents.methods.base import MethodContext, SkillMethod
from rgsd_agents.methods.common import (
    AdversarialConfig,
    LatentSchedule,
    MLPHead,
    StepStats,
    discriminator_regularizer,
    discriminator_reward,
    discriminator_stats,
    gan_loss,
    gradient_penalty,
    transition_features,
    unit_sphere,
)
from rgsd_agents.rl.networks import ActorCritic
from rgsd_agents.rl.storage import RolloutStorage
from rgsd_envs.envs.observations import SKILL_DIM

Tensor = torch.Tensor


@dataclass
class ASEConfig(AdversarialConfig):
    """ASE's discriminator, encoder, reward and latent schedule (defaults: the ASE paper's values)."""

    hidden: tuple[int, ...] = (1024, 1024, 512)
    """Discriminator/encoder trunk (ASE: 1024, 1024, 512)."""
    encoder_coef: float = 1.0
    """Weight of the encoder loss beside the discriminator loss (ASE: enc_coef 5 = disc_coef 5)."""
    kappa: float = 1.0
    """vMF concentration of q(z | s, s')."""
    beta: float = 0.5
    """Weight of the encoder reward (ASE: enc_reward_w 0.5)."""
    diversity_coef: float = 0.0
    """ASE's diversity loss weight; 0 (off) as in the RGSD paper's ASE baseline (ASE's own: 0.01)."""
    diversity_target: float = 1.0
    """Target of the diversity loss: the mean squared action change per unit of latent distance (1 - z^T z') / 2
    that it asks for (ASE: 1.0); no effect while ``diversity_coef`` is 0."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.hidden = tuple(int(h) for h in self.hidden)
        if self.diversity_coef < 0:
            raise ValueError(f"method.options.diversity_coef must be >= 0, got {self.diversity_coef}")


class ASENetwork(nn.Module):
    """Shared trunk with a discriminator logit head and a vMF encoder head mu(s, s')."""

    def __init__(self, in_dim: int, hidden: tuple[int, ...], skill_dim: int = SKILL_DIM):
        super().__init__()
        self.trunk = MLPHead(in_dim, hidden[:-1], hidden[-1])
        self.disc = nn.Linear(hidden[-1], 1)
        self.enc = nn.Linear(hidden[-1], skill_dim)

    def features(self, x: Tensor) -> Tensor:
        """Trunk activations (B, hidden[-1])."""
        return torch.relu(self.trunk(x))

    def logits(self, x: Tensor) -> Tensor:
        """Discriminator logits (B,)."""
        return self.disc(self.features(x)).squeeze(-1)

    def logits_standardized(self, x_n: Tensor) -> Tensor:
        """Discriminator logits (B,) of inputs already standardised by ``trunk.norm``."""
        return self.disc(torch.relu(self.trunk.from_standardized(x_n))).squeeze(-1)

    def mu(self, x: Tensor) -> Tensor:
        """Encoder mean directions (B, skill_dim), unit length."""
        return F.normalize(self.enc(self.features(x)), dim=-1)


def ase_discriminator_loss(
    net: ASENetwork, policy_x: Tensor, reference_x: Tensor, cfg: ASEConfig
) -> tuple[Tensor, dict[str, Tensor]]:
    """GAN loss + gradient penalty on the (standardised) reference samples + logit regulariser + weight decay."""
    reference_n = net.trunk.norm(reference_x).detach().requires_grad_(True)
    ref_logits = net.logits_standardized(reference_n)
    pol_logits = net.logits(policy_x)
    gan = gan_loss(pol_logits, ref_logits)
    gp = gradient_penalty(ref_logits, reference_n)
    # weight decay on the trunk and the logit head, not the encoder head (ASE's code: enc_weight_decay 0)
    loss = gan + cfg.grad_penalty * gp + discriminator_regularizer((net.trunk, net.disc), net.disc, cfg)
    return loss, discriminator_stats(gan, gp, ref_logits, pol_logits)


def ase_encoder_loss(net: ASENetwork, policy_x: Tensor, skills: Tensor, kappa: float) -> Tensor:
    """-mean log q(z | s, s') up to the vMF normaliser: -kappa mean mu^T z over the policy's transitions."""
    return -kappa * (net.mu(policy_x) * skills).sum(-1).mean()


@torch.no_grad()
def ase_reward(net: ASENetwork, x: Tensor, skills: Tensor, cfg: ASEConfig) -> tuple[Tensor, Tensor, Tensor]:
    """(reward, discriminator part, encoder part), each (B,): see the module docstring."""
    feats = net.features(x)
    disc = discriminator_reward(net.disc(feats).squeeze(-1))
    mu = F.normalize(net.enc(feats), dim=-1)
    enc = (cfg.kappa * (mu * skills).sum(-1)).clamp_min(0.0)
    return cfg.disc_weight * disc + cfg.beta * enc, disc, enc


def diversity_loss(
    actor: nn.Module, obs_n: Tensor, other_obs_n: Tensor, z: Tensor, z_other: Tensor, target: float
) -> Tensor:
    """ASE's diversity loss: (target - mean_j (a(s, z') - a(s, z))_j^2 / ((1 - z^T z') / 2))^2, averaged.

    ``obs_n`` / ``other_obs_n`` are the actor's (normalised) inputs holding z / z'; ``z``, ``z_other`` the unit
    latents themselves (their distance is measured on the sphere, before the observation normaliser)."""
    a_diff = (actor(other_obs_n) - actor(obs_n)).square().mean(-1)
    z_diff = 0.5 - 0.5 * (z * z_other).sum(-1)
    return (target - a_diff / (z_diff + 1e-5)).square().mean()


class ASE(SkillMethod):
    """ASE on the shared runner (see the module docstring)."""

    NAME = "ase"
    CONFIG = ASEConfig
    LATENT_CHOICE = "best_of_n"

    def __init__(self, cfg: ASEConfig, ctx: MethodContext):
        super().__init__(cfg, ctx)
        self.layout = ctx.reference.layout
        in_dim = cfg.frames * self.layout.feature_dim
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(ctx.seed + 101)
            self.net = ASENetwork(in_dim, cfg.hidden, self.layout.skill_dim)
        self.net.trunk.norm.fit(transition_features(ctx.reference.inputs, cfg.frames, self.layout).cpu())
        self.net.to(self.device)
        self.optimizer = torch.optim.Adam(
            self.net.parameters(), lr=cfg.lr, fused=True
        )  # see ppo.PPO: no host read per step
        self.params = list(self.net.parameters())
        self.schedule = LatentSchedule(ctx.num_envs, cfg.latent_steps_min, cfg.latent_steps_max, self.generator)
        self._rollout: tuple[Tensor, Tensor] | None = None
        """(transition features, skills) of the rollout's rows, cut in ``relabel`` for PPO's minibatch steps."""
        self.step_stats = StepStats()

    def modules(self) -> dict[str, nn.Module]:
        return {"net": self.net}

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"optimizer": self.optimizer}

    def choose_skills(self, started: Tensor, skills: Tensor) -> Tensor | None:
        if not self.cfg.resample:
            return None  # the env's uniform z, drawn at each episode start
        expired = self.schedule.tick(started)
        fresh = unit_sphere(skills.shape[0], self.generator, self.layout.skill_dim).to(skills.device)
        return torch.where(expired.to(skills.device).unsqueeze(-1), fresh, skills)

    def policy_loss(self, ac: ActorCritic, obs_n: Tensor) -> tuple[Tensor | None, dict[str, Tensor]]:
        """ASE's diversity loss on PPO's minibatches (None when ``diversity_coef`` is 0, the default): the actor
        at each sample's z and at a fresh uniform z' (both put through the observation normaliser)."""
        cfg = self.cfg
        if cfg.diversity_coef == 0.0:
            return None, {}
        norm, skill = ac.obs_normalizer, self.layout.skill
        mean = norm.mean[skill].to(obs_n.dtype)
        std = (norm.var[skill] + norm.eps).sqrt().to(obs_n.dtype)
        z = F.normalize(obs_n[:, skill] * std + mean, dim=-1)
        z_other = unit_sphere(obs_n.shape[0], self.generator, self.layout.skill_dim).to(obs_n.device)
        other = obs_n.clone()
        other[:, skill] = ((z_other - mean) / std).clamp(-norm.clip, norm.clip)
        loss = diversity_loss(ac.actor.net, obs_n, other, z, z_other, cfg.diversity_target)
        return cfg.diversity_coef * loss, {"diversity_loss": loss.detach()}

    @torch.no_grad()
    def relabel(self, storage: RolloutStorage) -> dict[str, Tensor]:
        x = transition_features(storage.flat("encoder_inputs"), self.cfg.frames, self.layout)
        z = storage.flat("skills")
        reward, disc, enc = ase_reward(self.net, x, z, self.cfg)
        storage.rewards.copy_(reward.view_as(storage.rewards))
        self._rollout = (x, z)  # what every PPO minibatch step trains on (the rows PPO draws)
        return {"disc_reward": disc.mean(), "encoder_reward": enc.mean(), "reward": reward.mean()}

    def after_policy_step(self, idx: Tensor) -> dict[str, Tensor]:
        """One discriminator/encoder step on the minibatch's first ``disc_minibatch_size`` rollout rows and as many
        reference transitions, drawn clip first."""
        cfg, ref = self.cfg, self.ctx.reference
        x_all, z_all = self._rollout
        idx = cfg.disc_rows(idx)
        ref_x = transition_features(
            ref.inputs[ref.sample_frames(idx.shape[0], self.generator, cfg.frames)], cfg.frames, self.layout
        )
        loss, stats = ase_discriminator_loss(self.net, x_all[idx], ref_x, cfg)
        enc_loss = ase_encoder_loss(self.net, x_all[idx], z_all[idx], cfg.kappa)
        self.step_optimizer(self.optimizer, loss + cfg.encoder_coef * enc_loss, self.params)
        self.step_stats.add({**stats, "encoder_loss": enc_loss.detach()})
        return {}

    def update(self, storage: RolloutStorage, generator: torch.Generator) -> dict[str, Tensor]:
        """The means of this rollout's discriminator/encoder steps (taken in ``after_policy_step``)."""
        self._rollout = None
        return self.step_stats.pop_means()

    def extra_state(self) -> dict:
        return {"schedule": self.schedule.state_dict()}

    def load_extra_state(self, state: dict) -> None:
        self.schedule.load_state_dict(state["schedule"])


__all__ = [
    "ASE",
    "ASEConfig",
    "ASENetwork",
    "ase_discriminator_loss",
    "ase_encoder_loss",
    "ase_reward",
    "diversity_loss",
]
