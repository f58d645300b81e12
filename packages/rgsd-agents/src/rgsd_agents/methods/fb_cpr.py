"""Meta Motivo: forward-backward representations with conditional policy regularisation (FB-CPR).

Tirinzoni et al. 2025, "Zero-shot whole-body humanoid control via behavioral
foundation models" (facebookresearch/metamotivo). An off-policy method: it
trains on a replay buffer (``rgsd_agents.rl.replay``) filled by the batched worlds
and is run by ``rgsd_agents.training.offpolicy.OffPolicyRunner``, not the PPO runner.

Networks (s is the 359-D frame features o_t, z a latent of norm sqrt(d)):

- forward map F(s, a, z) -> R^d, an ensemble of 2 (two embeddings, of (s, z) and
  of (s, a), each Linear -> LayerNorm -> tanh -> Linear -> ReLU to h/2; then
  ``f_layers`` x (Linear h, ReLU) and a linear output);
- backward map B(s) = Linear 256 -> LayerNorm -> tanh -> Linear d, scaled to norm sqrt(d);
- actor pi(s, z): mean action in [-1, 1] (tanh), fixed std 0.2 (noise clipped to
  0.3 in the updates);
- discriminator D(s, z) (Linear -> LayerNorm -> tanh -> ReLU layers -> logit);
- critic Q(s, a, z), an ensemble of 2 with F's architecture and one output.

One update (``FBCPRAgent.update``): the discriminator's BCE (expert windows of 8
reference frames with z = mean of B over the window's next frames, against
replay samples with the z they were collected with) plus a WGAN gradient penalty
(10) on interpolates; a z mix for the batch (20 % B of a replay state, 60 %
expert-window z, the rest uniform on the sphere of radius sqrt(d)); 80 % of the
batch relabelled with it; the FB temporal-difference loss plus the
orthonormality of B (100) and the FB Q loss (0.1), both on targets combined with
the FB pessimism penalty (0); the critic's TD loss on the discriminator's
log-ratio reward; the actor loss -Q_D * reg * |Q_fb| - Q_fb (reg 0.01, ensembles
combined pessimistically, penalty 0.5); soft target updates.

Evaluation tracks a clip with Meta Motivo's tracking inference
(``tracking_inference``, metamotivo ``FBModel.tracking_inference``): one latent
per step, z_t = the projection of the mean of B over the next ``seq_length`` (8)
reference states o_{t+1} .. o_{t+8} (fewer at the clip's end). The run stores them
in ``tracking_latents.npz`` (method.json's ``latent_choice: tracking``) and rgsd
eval, rgsd play and the training probe change the world's skill every step.
``clip_latents.json`` keeps one latent per clip, B averaged over the whole clip:
downstream's style latents and ``rgsd eval --latent stored`` (an occupancy match,
not tracking: the comparison in docs/results.md).

Where this departs from the paper and its code:

- z_dim: ``env.skill_dim``, which ``method.options.z_dim`` must equal. ``fb_cpr_paper``
  sets both to its code's 256; the 2-core ``fb_cpr`` keeps the env's default 16 (a
  smaller successor measure, M = F B^T of rank at most 16, for 2-core networks).
  The skill slot holds the unit direction z / sqrt(d); the actor's observation
  normaliser scales it back, so every network sees z of norm sqrt(d) as in the paper.
- The actor is rgsd's ``PolicyMLP`` on ``[o_t, z / sqrt(d)]`` (one MLP of
  ``networks.actor_hidden`` with a tanh output) instead of the paper's two
  embeddings, so ``policy.pt`` loads in rgsd eval and play unchanged.
- Observations are standardised by running statistics over every state the worlds
  visited (Welford, clipped to +-5; the actor's normaliser) instead of BatchNorm
  statistics with momentum 0.01 over the update batches.
- The state is o_t (``rgsd_envs.envs.observations``) including its phase; episodes start by reference
  state initialisation only (no fallen starts, the paper's 20 %).
- Rollout latents come from a buffer of recent update latents (the paper's
  ``use_mix_rollout``); expert windows are drawn uniformly over clips, then over
  start frames, and may end on a clip's last frame.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from rgsd_agents.methods.base import MethodContext, SkillMethod
from rgsd_agents.training.offpolicy_config import OffPolicyConfig
from rgsd_envs.envs.observations import FRAME_DIM, SKILL_DIM
from rgsd_envs.runs.policy import FB_CPR_ACTOR_STD, PolicyMLP, fold_batch_stats

Tensor = torch.Tensor

NAME = "fb_cpr"
"""``method.name`` of the method."""
LOOP = "off_policy"
"""The training loop the method runs in (``rgsd_agents.training.offpolicy.OffPolicyRunner``)."""
LATENT_CHOICE = "tracking"
"""How evaluation picks a clip's latents: one per step, the tracking inference the run writes
(``RunDir.TRACKING_LATENTS``)."""
CLIP_LATENTS_RULE = "B averaged over the clip"
"""What a clip's latent in ``RunDir.CLIP_LATENTS`` is (method.json's ``clip_latents_rule``)."""
Z_SOURCES = ("goal", "expert", "uniform")
"""The z mix's sources, in the order of ``FBCPRConfig.z_mix``."""


@dataclass
class FBCPRConfig:
    """FB-CPR's settings (``method.options``); defaults are the paper's code (metamotivo's humenv script)."""

    z_dim: int = SKILL_DIM
    """Latent dimension d; the env's skill slot fixes it: it must equal ``env.skill_dim`` (16 by default; its code:
    256; module docstring)."""
    discount: float = 0.98
    """Discount per control step (1/30 s) of the FB, FB Q and critic targets; 0 after a terminated step (its code:
    0.98)."""
    batch_size: int = 1024
    """Replay samples per update (also the frames of expert windows per update); a multiple of ``seq_length``."""
    seq_length: int = 8
    """Frames of an expert window (its z is the mean of B over them), also the window of the tracking inference."""
    lr_f: float = 1e-4
    """Adam learning rate of the forward map F (its code: 1e-4)."""
    lr_b: float = 1e-5
    """Adam learning rate of the backward map B (its code: 1e-5)."""
    lr_actor: float = 1e-4
    """Adam learning rate of the actor (its code: 1e-4)."""
    lr_critic: float = 1e-4
    """Adam learning rate of the discriminator's critic Q (its code: 1e-4)."""
    lr_discriminator: float = 1e-5
    """Adam learning rate of the discriminator D(s, z) (its code: 1e-5)."""
    ortho_coef: float = 100.0
    """Weight of B's orthonormality loss in the FB loss."""
    q_loss_coef: float = 0.1
    """Weight of the FB Q loss (F^T z regressed on B's implicit reward; metamotivo's script: 0.1, "or 0")."""
    fb_target_tau: float = 0.01
    """Soft-update rate of the target F and B after every update: target += tau (online - target) (its code:
    0.01)."""
    critic_target_tau: float = 0.005
    """Soft-update rate of the target critic after every update (its code: 0.005)."""
    fb_pessimism: float = 0.0
    """Penalty on the ensemble spread of the FB targets: the target M of the FB loss and next Q of the FB Q loss."""
    actor_pessimism: float = 0.5
    """Penalty on the ensemble spread of Q_fb and Q_D in the actor loss: mean - penalty x spread (0.5 with 2
    members: the smaller of the two; its code: 0.5)."""
    critic_pessimism: float = 0.5
    """The same penalty on the target critic's next Q in the critic's TD target (its code: 0.5)."""
    reg_coeff: float = 0.01
    """Weight of the discriminator critic's Q in the actor loss (scaled by |Q_fb| with ``scale_reg``)."""
    scale_reg: bool = True
    """Scale the discriminator critic's term in the actor loss by the batch's mean |Q_fb| (no gradient through the
    scale), so ``reg_coeff`` is relative to the FB value; False: ``reg_coeff`` alone (its code: True)."""
    actor_std: float = FB_CPR_ACTOR_STD
    """Fixed std of the actor's Gaussian action noise, in the worlds and in the updates (there clipped to
    ``stddev_clip``); also the run's noise in ``rgsd eval`` under ``action_noise: policy`` (its code: 0.2)."""
    stddev_clip: float = 0.3
    """Clip of the actor's noise in the updates."""
    grad_penalty: float = 10.0
    """Weight of the discriminator's WGAN gradient penalty on expert/replay interpolates."""
    z_mix: tuple[float, float, float] = (0.2, 0.6, 0.2)
    """Shares of the latents of an update: B of a replay state, expert-window z, uniform on the sphere."""
    relabel_ratio: float = 0.8
    """Share of a replay batch whose z is replaced by the mix."""
    z_buffer_size: int = 10000
    """Recent update latents kept for the rollouts."""
    update_z_every: int = 150
    """Env steps a world keeps its latent (also drawn at every episode start)."""
    ensemble: int = 2
    """Members of the F and critic ensembles."""
    f_hidden: int = 1024
    """Width h of F: its (s, z) and (s, a) embeddings end in h/2 units each, its trunk layers have h (its code:
    1024)."""
    f_layers: int = 2
    """Hidden layers of F's trunk after the two embeddings (its code: 2)."""
    critic_hidden: int = 1024
    """Width of the critic Q(s, a, z), built as F with one output (its code: 1024)."""
    critic_layers: int = 2
    """Hidden layers of the critic's trunk after its embeddings (its code: 2)."""
    b_hidden: int = 256
    """Width of B's hidden layers (its code: 256)."""
    b_layers: int = 1
    """Hidden layers of B: the first Linear -> LayerNorm -> tanh, the others Linear -> ReLU (its code: 1)."""
    disc_hidden: int = 1024
    """Width of the discriminator's hidden layers (its code: 1024)."""
    disc_layers: int = 3
    """Hidden layers of the discriminator: the first Linear -> LayerNorm -> tanh, the others Linear -> ReLU (its
    code: 3)."""
    loop: OffPolicyConfig = field(default_factory=OffPolicyConfig)
    """The off-policy loop: steps and updates per iteration, random steps, replay (``OffPolicyConfig``)."""

    def __post_init__(self) -> None:
        self.z_mix = tuple(float(x) for x in self.z_mix)
        if self.z_dim < 2:
            raise ValueError(f"z_dim must be >= 2 (and equal env.skill_dim, the env's skill slot), got {self.z_dim}")
        if self.batch_size % self.seq_length or self.batch_size < 1:
            raise ValueError(
                f"batch_size ({self.batch_size}) must be a positive multiple of seq_length ({self.seq_length})"
            )
        if len(self.z_mix) != 3 or min(self.z_mix) < 0 or abs(sum(self.z_mix) - 1.0) > 1e-6:
            raise ValueError(
                f"z_mix must be 3 non-negative shares ({', '.join(Z_SOURCES)}) summing to 1, got {self.z_mix}"
            )
        if not 0.0 <= self.relabel_ratio <= 1.0 or not 0.0 <= self.discount <= 1.0:
            raise ValueError(f"relabel_ratio and discount must be in [0, 1], got {self.relabel_ratio}, {self.discount}")
        small = {k: getattr(self, k) for k in ("ensemble", "f_layers", "critic_layers", "b_layers", "disc_layers")}
        bad = [k for k, v in small.items() if v < 1]
        if bad or self.update_z_every < 1 or self.z_buffer_size < 1:
            raise ValueError(f"{(bad or ['update_z_every/z_buffer_size'])[0]} must be >= 1")


CONFIG = FBCPRConfig
"""The method's config dataclass (``method.options``)."""


# -- networks -------------------------------------------------------------------------
class ParallelLinear(nn.Module):
    """``n`` independent linear layers applied to (n, B, in) at once (an ensemble's layer)."""

    def __init__(self, n: int, in_dim: int, out_dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n, in_dim, out_dim))
        self.bias = nn.Parameter(torch.zeros(n, 1, out_dim))
        for w in self.weight:  # metamotivo: orthogonal per member, ReLU gain
            nn.init.orthogonal_(w, math.sqrt(2.0))

    def forward(self, x: Tensor) -> Tensor:
        """(n, B, out)."""
        return torch.baddbmm(self.bias, x, self.weight)


class ParallelLayerNorm(nn.Module):
    """LayerNorm with one affine transform per ensemble member, on (n, B, dim)."""

    def __init__(self, n: int, dim: int):
        super().__init__()
        self.dim = dim
        self.weight = nn.Parameter(torch.ones(n, 1, dim))
        self.bias = nn.Parameter(torch.zeros(n, 1, dim))

    def forward(self, x: Tensor) -> Tensor:
        """(n, B, dim)."""
        return F.layer_norm(x, (self.dim,)) * self.weight + self.bias


def _embedding(n: int, in_dim: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(
        ParallelLinear(n, in_dim, hidden),
        ParallelLayerNorm(n, hidden),
        nn.Tanh(),
        ParallelLinear(n, hidden, hidden // 2),
        nn.ReLU(),
    )


class ForwardMap(nn.Module):
    """F(s, a, z) (out_dim d) or the critic Q(s, a, z) (out_dim 1): an ensemble, (n, B, out_dim)."""

    def __init__(self, state_dim: int, z_dim: int, act_dim: int, hidden: int, layers: int, out_dim: int, n: int):
        super().__init__()
        if hidden < 2:
            raise ValueError(f"forward map hidden size must be >= 2, got {hidden}")
        self.n = n
        self.embed_z = _embedding(n, state_dim + z_dim, hidden)
        self.embed_sa = _embedding(n, state_dim + act_dim, hidden)
        width = 2 * (hidden // 2)
        trunk: list[nn.Module] = []
        for _ in range(layers):
            trunk += [ParallelLinear(n, width, hidden), nn.ReLU()]
            width = hidden
        trunk.append(ParallelLinear(n, width, out_dim))
        self.trunk = nn.Sequential(*trunk)

    def forward(self, s: Tensor, z: Tensor, a: Tensor) -> Tensor:
        """(n, B, out_dim) for normalised states (B, S), latents (B, d) and actions (B, A)."""
        sz = torch.cat([s, z], -1).expand(self.n, -1, -1)
        sa = torch.cat([s, a], -1).expand(self.n, -1, -1)
        return self.trunk(torch.cat([self.embed_sa(sa), self.embed_z(sz)], -1))


def _orthogonal_init(module: nn.Module) -> nn.Module:
    """metamotivo's init of plain linear layers: orthogonal weights (gain 1), zero biases."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.orthogonal_(m.weight)
            nn.init.zeros_(m.bias)
    return module


def project_z(z: Tensor) -> Tensor:
    """z scaled to norm sqrt(d) (the sphere FB-CPR's latents live on)."""
    return math.sqrt(z.shape[-1]) * F.normalize(z, dim=-1)


class BackwardMap(nn.Module):
    """B(s) = Linear -> LayerNorm -> tanh -> (Linear, ReLU) x (layers - 1) -> Linear d, norm sqrt(d)."""

    def __init__(self, state_dim: int, z_dim: int, hidden: int, layers: int):
        super().__init__()
        seq: list[nn.Module] = [nn.Linear(state_dim, hidden), nn.LayerNorm(hidden), nn.Tanh()]
        for _ in range(layers - 1):
            seq += [nn.Linear(hidden, hidden), nn.ReLU()]
        seq.append(nn.Linear(hidden, z_dim))
        self.net = _orthogonal_init(nn.Sequential(*seq))

    def forward(self, s: Tensor) -> Tensor:
        """(B, d) of norm sqrt(d) for normalised states (B, S)."""
        return project_z(self.net(s))


class Discriminator(nn.Module):
    """D(s, z): logit that (s, z) comes from an expert window rather than the replay buffer."""

    def __init__(self, state_dim: int, z_dim: int, hidden: int, layers: int):
        super().__init__()
        seq: list[nn.Module] = [nn.Linear(z_dim + state_dim, hidden), nn.LayerNorm(hidden), nn.Tanh()]
        for _ in range(layers - 1):
            seq += [nn.Linear(hidden, hidden), nn.ReLU()]
        seq.append(nn.Linear(hidden, 1))
        self.net = _orthogonal_init(nn.Sequential(*seq))

    def forward(self, s: Tensor, z: Tensor) -> Tensor:
        """(B, 1) logits for normalised states (B, S) and latents (B, d)."""
        return self.net(torch.cat([z, s], -1))


# -- the losses (pure functions) ---------------------------------------------------------
def ensemble_pessimism(preds: Tensor, penalty: float) -> tuple[Tensor, Tensor, Tensor]:
    """Mean over an ensemble's first dim, its spread (mean |p_i - p_j| over pairs i != j) and mean - penalty *
    spread (for 2 members and penalty 0.5: the minimum; one member has spread 0)."""
    n = preds.shape[0]
    mean = preds.mean(0)
    spread = (preds.unsqueeze(0) - preds.unsqueeze(1)).abs().sum((0, 1)) / max(n * n - n, 1)
    return mean, spread, mean - penalty * spread


def _off_diagonal(n: int, device: torch.device) -> Tensor:
    return 1.0 - torch.eye(n, device=device)


def fb_td_loss(Fs: Tensor, B: Tensor, target_M: Tensor, discount: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """The FB temporal-difference loss of M = F B^T: for each member, 0.5 * mean over i != j of
    (M_ij - discount_i target_M_ij)^2 minus the mean of the diagonal (the measure of s' itself), summed over the
    ensemble. Fs (n, B, d), B (B, d), target_M (B, B), discount (B, 1)."""
    Ms = Fs @ B.T
    diff = Ms - discount * target_M
    off = _off_diagonal(B.shape[0], B.device)
    offdiag = 0.5 * (diff * off).square().sum() / off.sum()
    diag = -torch.diagonal(diff, dim1=1, dim2=2).mean() * Ms.shape[0]
    return offdiag + diag, {"fb_offdiag": offdiag.detach(), "fb_diag": diag.detach(), "M": Ms.mean().detach()}


def orthonormality_loss(B: Tensor) -> Tensor:
    """B's orthonormality loss: 0.5 * mean over i != j of (B_i . B_j)^2 minus the mean of |B_i|^2."""
    cov = B @ B.T
    off = _off_diagonal(B.shape[0], B.device)
    return 0.5 * (cov * off).square().sum() / off.sum() - cov.diagonal().mean()


def fb_q_loss(Fs: Tensor, target_Fs: Tensor, B: Tensor, z: Tensor, discount: Tensor, pessimism: float = 0.0) -> Tensor:
    """0.5 * n * MSE of F^T z against B's implicit reward B cov(B)^-1 z plus discount * next Q, next Q the target
    ensemble's F^T z combined with ``pessimism`` (``ensemble_pessimism``; targets without gradient). Fs, target_Fs
    (n, B, d), B (B, d), z (B, d), discount (B, 1)."""
    with torch.no_grad():
        _, _, next_Q = ensemble_pessimism((target_Fs * z).sum(-1), pessimism)
        cov = B.T @ B / B.shape[0]
        reward = (B @ torch.linalg.inv(cov) * z).sum(-1)
        target = reward + discount.squeeze(-1) * next_Q
    Qs = (Fs * z).sum(-1)
    return 0.5 * Fs.shape[0] * F.mse_loss(Qs, target.expand_as(Qs))


def discriminator_loss(expert_logits: Tensor, replay_logits: Tensor) -> Tensor:
    """Binary cross-entropy: expert samples labelled 1, replay samples 0 (mean of the summed terms)."""
    return (-F.logsigmoid(expert_logits) + F.softplus(replay_logits)).mean()


def wgan_gradient_penalty(
    disc: Callable[[Tensor, Tensor], Tensor],
    expert: tuple[Tensor, Tensor],
    replay: tuple[Tensor, Tensor],
    alpha: Tensor,
) -> Tensor:
    """mean (||d D / d x|| - 1)^2 at x = alpha * expert + (1 - alpha) * replay, x = (s, z) per row; alpha (B, 1)."""
    s = (alpha * expert[0] + (1 - alpha) * replay[0]).requires_grad_(True)
    z = (alpha * expert[1] + (1 - alpha) * replay[1]).requires_grad_(True)
    logits = disc(s, z)
    gs, gz = torch.autograd.grad(logits.sum(), (s, z), create_graph=True)
    return (torch.cat([gs, gz], -1).norm(dim=-1) - 1.0).square().mean()


def discriminator_reward(logits: Tensor, eps: float = 1e-7) -> Tensor:
    """log D - log(1 - D) with D = sigmoid(logit) clamped to [eps, 1 - eps]: the log density ratio."""
    d = torch.sigmoid(logits).clamp(eps, 1 - eps)
    return d.log() - (1 - d).log()


def critic_td_loss(Qs: Tensor, target: Tensor) -> Tensor:
    """0.5 * n * MSE of the ensemble's Q (n, B, 1) against the target (B, 1)."""
    return 0.5 * Qs.shape[0] * F.mse_loss(Qs, target.expand_as(Qs))


def actor_loss(
    Qs_disc: Tensor, Qs_fb: Tensor, reg_coeff: float, pessimism: float, scale_reg: bool = True
) -> tuple[Tensor, dict[str, Tensor]]:
    """-mean(Q_D) * reg * mean|Q_fb| - mean(Q_fb), each ensemble combined pessimistically (``ensemble_pessimism``);
    the |Q_fb| scale carries no gradient. Qs_disc (n, B, 1), Qs_fb (n, B)."""
    _, _, q_disc = ensemble_pessimism(Qs_disc, pessimism)
    _, _, q_fb = ensemble_pessimism(Qs_fb, pessimism)
    weight = q_fb.abs().mean().detach() if scale_reg else 1.0
    loss = -q_disc.mean() * reg_coeff * weight - q_fb.mean()
    return loss, {"Q_discriminator": q_disc.mean().detach(), "Q_fb": q_fb.mean().detach()}


def noisy_action(mean: Tensor, std: float, clip: float | None, generator: torch.Generator | None) -> Tensor:
    """mean + N(0, std) noise (clipped to +-clip), clamped into (-1, 1) with the gradient passed straight through."""
    eps = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype) * std
    if clip is not None:
        eps = eps.clamp(-clip, clip)
    x = mean + eps
    return x - x.detach() + x.detach().clamp(-1 + 1e-6, 1 - 1e-6)


def uniform_z(n: int, dim: int, generator: torch.Generator) -> Tensor:
    """(n, dim) uniform on the sphere of radius sqrt(dim), on the generator's device."""
    return project_z(torch.randn(n, dim, generator=generator, device=generator.device))


def mix_z(
    goal: Tensor, expert: Tensor, uniform: Tensor, shares: tuple[float, ...], generator: torch.Generator
) -> Tensor:
    """Per row, the row of ``goal``, ``expert`` or ``uniform`` (all (B, d)), drawn with ``shares``."""
    probs = torch.tensor(shares, dtype=torch.float32, device=generator.device)
    which = torch.multinomial(probs, goal.shape[0], replacement=True, generator=generator).to(goal.device)
    which = which.unsqueeze(-1)
    return torch.where(which == 0, goal, torch.where(which == 1, expert, uniform))


def relabel(z: Tensor, mixed: Tensor, ratio: float, generator: torch.Generator) -> Tensor:
    """Each row of ``z`` replaced by the row of ``mixed`` with probability ``ratio``."""
    mask = torch.rand(z.shape[0], 1, generator=generator, device=generator.device).to(z.device) < ratio
    return torch.where(mask, mixed, z)


def window_latents(B_next: Tensor, seq_length: int) -> Tensor:
    """Each expert frame's z: the projected mean of B over its window's frames (B_next (W * L, d), windows
    contiguous), repeated per frame: (W * L, d)."""
    z = project_z(B_next.view(-1, seq_length, B_next.shape[-1]).mean(1))
    return z.repeat_interleave(seq_length, 0)


def tracking_inference(B_next: Tensor, seq_length: int) -> Tensor:
    """Meta Motivo's tracking inference: row t of (T, d) is the projection of the mean of ``B_next`` rows
    t .. t + seq_length - 1 (fewer at the end). With ``B_next`` = B(o_1 .. o_T) of a reference, row t is the latent
    of the step from o_t."""
    T = B_next.shape[0]
    csum = torch.cat([B_next.new_zeros(1, B_next.shape[-1]), B_next.cumsum(0)])
    start = torch.arange(T, device=B_next.device)
    end = (start + seq_length).clamp(max=T)
    return project_z((csum[end] - csum[start]) / (end - start).unsqueeze(-1).to(B_next.dtype))


# -- expert windows ----------------------------------------------------------------------------
class ExpertWindows:
    """Windows of ``seq_length`` consecutive reference frames: a clip uniformly, then a start uniformly."""

    def __init__(self, features: Tensor, starts: Tensor, num_frames: Tensor, seq_length: int):
        short = (num_frames < seq_length + 1).nonzero()
        if short.numel():
            raise ValueError(f"clip {int(short[0])} has fewer than seq_length + 1 = {seq_length + 1} frames")
        self.features, self.starts, self.num_frames, self.seq_length = features, starts, num_frames, seq_length

    def sample(self, frames: int, generator: torch.Generator) -> dict[str, Tensor]:
        """``frames // seq_length`` windows: ``obs`` (o_t) and ``next_obs`` (o_{t+1}), (frames, 359) each."""
        L, dev = self.seq_length, generator.device
        n = frames // L
        clip = torch.randint(self.starts.shape[0], (n,), generator=generator, device=dev).to(self.starts.device)
        room = (self.num_frames[clip] - L).to(dev)  # starts 0 .. num_frames - L - 1: next frames stay in the clip
        start = (torch.rand(n, generator=generator, device=dev) * room).long().to(self.starts.device)
        first = (self.starts[clip] + start).unsqueeze(-1) + torch.arange(L, device=self.starts.device)
        first = first.reshape(-1)
        return {"obs": self.features[first], "next_obs": self.features[first + 1]}


# -- the agent -----------------------------------------------------------------------------------
class FBCPRAgent:
    """FB-CPR's networks, optimisers and update (see the module docstring)."""

    NAME: ClassVar[str] = NAME
    CONFIG: ClassVar[type] = FBCPRConfig
    LOOP: ClassVar[str] = LOOP
    LATENT_CHOICE: ClassVar[str] = LATENT_CHOICE

    def __init__(
        self,
        cfg: FBCPRConfig,
        act_dim: int,
        actor_hidden: tuple[int, ...],
        actor_activation: str,
        device: torch.device | str,
        seed: int,
        state_dim: int = FRAME_DIM,
    ):
        self.cfg = cfg
        self.device = torch.device(device)
        self.state_dim, self.act_dim, d = state_dim, act_dim, cfg.z_dim
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.actor = _orthogonal_init(PolicyMLP(state_dim + d, act_dim, actor_hidden, actor_activation, "tanh"))
            self.forward_map = ForwardMap(state_dim, d, act_dim, cfg.f_hidden, cfg.f_layers, d, cfg.ensemble)
            self.backward_map = BackwardMap(state_dim, d, cfg.b_hidden, cfg.b_layers)
            self.critic = ForwardMap(state_dim, d, act_dim, cfg.critic_hidden, cfg.critic_layers, 1, cfg.ensemble)
            self.discriminator = Discriminator(state_dim, d, cfg.disc_hidden, cfg.disc_layers)
        norm = self.actor.normalizer
        norm.var[state_dim:] = 1.0 / d - norm.eps  # the unit skill slot, scaled back to norm sqrt(d)
        self.target_forward_map = copy.deepcopy(self.forward_map).requires_grad_(False)
        self.target_backward_map = copy.deepcopy(self.backward_map).requires_grad_(False)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        for m in self.modules().values():
            m.to(self.device)
        adam = torch.optim.Adam
        self.optimizers = {
            "forward_map": adam(self.forward_map.parameters(), lr=cfg.lr_f),
            "backward_map": adam(self.backward_map.parameters(), lr=cfg.lr_b),
            "actor": adam(self.actor.net.parameters(), lr=cfg.lr_actor),
            "critic": adam(self.critic.parameters(), lr=cfg.lr_critic),
            "discriminator": adam(self.discriminator.parameters(), lr=cfg.lr_discriminator),
        }
        self.z_buffer = torch.zeros(cfg.z_buffer_size, d, device=self.device)
        """Recent update latents (a ring); rollouts draw from it once it holds any."""
        self.z_count = 0
        """Latents ever added to ``z_buffer``."""

    def modules(self) -> dict[str, nn.Module]:
        """The networks by name (targets included)."""
        return {
            "actor": self.actor,
            "forward_map": self.forward_map,
            "backward_map": self.backward_map,
            "critic": self.critic,
            "discriminator": self.discriminator,
            "target_forward_map": self.target_forward_map,
            "target_backward_map": self.target_backward_map,
            "target_critic": self.target_critic,
        }

    # -- observations ------------------------------------------------------------------------
    def normalize(self, s: Tensor) -> Tensor:
        """Standardised states (B, 359): the actor normaliser's state part."""
        norm = self.actor.normalizer
        S = self.state_dim
        mean = norm.mean[:S].to(s.dtype)
        std = (norm.var[:S] + norm.eps).sqrt().to(s.dtype)
        return ((s - mean) / std).clamp(-norm.clip, norm.clip)

    @torch.no_grad()
    def observe(self, states: Tensor) -> None:
        """Fold visited states (B, 359) into the running statistics (used from the next update on)."""
        norm = self.actor.normalizer
        S = self.state_dim
        fold_batch_stats(norm.mean[:S], norm.var[:S], norm.count, states.reshape(-1, S).to(torch.float64))

    def policy_input(self, s: Tensor, z: Tensor) -> Tensor:
        """The policy observation ``[o_t, z / sqrt(d)]`` (B, 375) of raw states and latents of norm sqrt(d)."""
        return torch.cat([s, z / math.sqrt(z.shape[-1])], -1)

    def mean_action(self, s: Tensor, z: Tensor) -> Tensor:
        """The actor's mean action (B, A) for raw states (B, 359) and latents (B, d)."""
        return self.actor(self.policy_input(s, z))

    @torch.no_grad()
    def act(self, obs: Tensor, z: Tensor, mean: bool, generator: torch.Generator | None = None) -> Tensor:
        """Actions (B, A) for raw states (B, 359) and latents of norm sqrt(d): the mean, or with the fixed noise."""
        mu = self.mean_action(obs, z)
        return mu if mean else noisy_action(mu, self.cfg.actor_std, None, generator)

    # -- latents ------------------------------------------------------------------------------
    @torch.no_grad()
    def rollout_latents(self, n: int, generator: torch.Generator) -> Tensor:
        """(n, d) latents for the worlds: from the recent update latents, or uniform before the first update."""
        if self.z_count == 0:
            return uniform_z(n, self.cfg.z_dim, generator).to(self.device)
        held = min(self.z_count, self.cfg.z_buffer_size)
        idx = torch.randint(held, (n,), generator=generator, device=generator.device).to(self.device)
        return self.z_buffer[idx].clone()

    def _remember(self, z: Tensor) -> None:
        size = self.cfg.z_buffer_size
        z = z[-size:]
        idx = (self.z_count + torch.arange(z.shape[0], device=self.device)) % size
        self.z_buffer[idx] = z
        self.z_count += int(z.shape[0])

    @torch.no_grad()
    def clip_latent(self, frames: Tensor) -> Tensor:
        """A clip's latent of norm sqrt(d) from its raw frame features (T, 359): B averaged over the frames."""
        return project_z(self.backward_map(self.normalize(frames)).mean(0))

    @torch.no_grad()
    def tracking_latents(self, frames: Tensor) -> Tensor:
        """(T - 1, d) latents of norm sqrt(d), one per step of a clip from its raw frame features (T, 359): the
        tracking inference on B of frames 1 .. T - 1 (row t tracks from frame t)."""
        return tracking_inference(self.backward_map(self.normalize(frames[1:])), self.cfg.seq_length)

    # -- the update ---------------------------------------------------------------------------
    def update(
        self, batch: dict[str, Tensor], expert_batch: dict[str, Tensor], generator: torch.Generator
    ) -> dict[str, Tensor]:
        """One gradient step of every network on a replay batch (``obs``, ``action``, ``next_obs``, ``z``,
        ``terminated``) and expert windows (``obs``, ``next_obs``); returns statistics (0-d tensors)."""
        cfg, g = self.cfg, generator
        obs, next_obs = self.normalize(batch["obs"]), self.normalize(batch["next_obs"])
        expert_obs, expert_next = self.normalize(expert_batch["obs"]), self.normalize(expert_batch["next_obs"])
        action, replay_z = batch["action"], batch["z"]
        discount = cfg.discount * (~batch["terminated"].bool()).to(obs.dtype).reshape(-1, 1)
        n = obs.shape[0]
        with torch.no_grad():
            expert_z = window_latents(self.backward_map(expert_next), cfg.seq_length)
        stats = self.update_discriminator(expert_obs, expert_z, obs, replay_z, g)
        with torch.no_grad():
            goal = self.backward_map(next_obs[torch.randperm(n, generator=g, device=g.device).to(obs.device)])
            expert = expert_z[torch.randperm(n, generator=g, device=g.device).to(obs.device)]
            mixed = mix_z(goal, expert, uniform_z(n, cfg.z_dim, g).to(obs.device), cfg.z_mix, g)
            self._remember(mixed)
            z = relabel(replay_z, mixed, cfg.relabel_ratio, g)
        stats.update(self.update_fb(obs, action, discount, next_obs, z, g))
        stats.update(self.update_critic(obs, action, discount, next_obs, z, g))
        stats.update(self.update_actor(obs, z, g))
        with torch.no_grad():
            for net, target, tau in (
                (self.forward_map, self.target_forward_map, cfg.fb_target_tau),
                (self.backward_map, self.target_backward_map, cfg.fb_target_tau),
                (self.critic, self.target_critic, cfg.critic_target_tau),
            ):
                torch._foreach_lerp_(list(target.parameters()), list(net.parameters()), tau)
        return stats

    def _step(self, loss: Tensor, *names: str) -> None:
        """Backward ``loss`` and step the optimisers ``names``."""
        for name in names:
            self.optimizers[name].zero_grad(set_to_none=True)
        loss.backward()
        for name in names:
            self.optimizers[name].step()

    def update_discriminator(
        self, expert_obs: Tensor, expert_z: Tensor, obs: Tensor, z: Tensor, g: torch.Generator
    ) -> dict[str, Tensor]:
        """BCE of expert windows against replay samples plus the WGAN gradient penalty."""
        bce = discriminator_loss(self.discriminator(expert_obs, expert_z), self.discriminator(obs, z))
        alpha = torch.rand(obs.shape[0], 1, generator=g, device=g.device).to(obs.device)
        gp = wgan_gradient_penalty(self.discriminator, (expert_obs, expert_z), (obs, z), alpha)
        self._step(bce + self.cfg.grad_penalty * gp, "discriminator")
        return {"disc_loss": bce.detach(), "disc_grad_penalty": gp.detach()}

    def update_fb(
        self, obs: Tensor, action: Tensor, discount: Tensor, next_obs: Tensor, z: Tensor, g: torch.Generator
    ) -> dict[str, Tensor]:
        """The FB loss with B's orthonormality and the FB Q loss; one step of F and B."""
        cfg = self.cfg
        with torch.no_grad():
            next_action = noisy_action(self.mean_action_n(next_obs, z), cfg.actor_std, cfg.stddev_clip, g)
            target_Fs = self.target_forward_map(next_obs, z, next_action)
            target_B = self.target_backward_map(next_obs)
            _, _, target_M = ensemble_pessimism(target_Fs @ target_B.T, cfg.fb_pessimism)
        Fs = self.forward_map(obs, z, action)
        B = self.backward_map(next_obs)
        fb, stats = fb_td_loss(Fs, B, target_M, discount)
        ortho = orthonormality_loss(B)
        loss = fb + cfg.ortho_coef * ortho
        if cfg.q_loss_coef > 0:
            q = fb_q_loss(Fs, target_Fs, B, z, discount, cfg.fb_pessimism)
            loss = loss + cfg.q_loss_coef * q
            stats["fb_q_loss"] = q.detach()
        self._step(loss, "forward_map", "backward_map")
        return {**stats, "fb_loss": fb.detach(), "orth_loss": ortho.detach()}

    def update_critic(
        self, obs: Tensor, action: Tensor, discount: Tensor, next_obs: Tensor, z: Tensor, g: torch.Generator
    ) -> dict[str, Tensor]:
        """TD of the critic ensemble on the discriminator's reward, pessimistic targets."""
        cfg = self.cfg
        with torch.no_grad():
            reward = discriminator_reward(self.discriminator(obs, z))
            next_action = noisy_action(self.mean_action_n(next_obs, z), cfg.actor_std, cfg.stddev_clip, g)
            _, _, next_v = ensemble_pessimism(self.target_critic(next_obs, z, next_action), cfg.critic_pessimism)
            target = reward + discount * next_v
        loss = critic_td_loss(self.critic(obs, z, action), target)
        self._step(loss, "critic")
        return {"critic_loss": loss.detach(), "disc_reward": reward.mean()}

    def update_actor(self, obs: Tensor, z: Tensor, g: torch.Generator) -> dict[str, Tensor]:
        """The actor's step on -Q_D * reg * |Q_fb| - Q_fb."""
        cfg = self.cfg
        action = noisy_action(self.mean_action_n(obs, z), cfg.actor_std, cfg.stddev_clip, g)
        Qs_fb = (self.forward_map(obs, z, action) * z).sum(-1)
        loss, stats = actor_loss(self.critic(obs, z, action), Qs_fb, cfg.reg_coeff, cfg.actor_pessimism, cfg.scale_reg)
        self._step(loss, "actor")  # F's and the critic's gradients from it are cleared by their next step
        return {**stats, "actor_loss": loss.detach()}

    def mean_action_n(self, s_n: Tensor, z: Tensor) -> Tensor:
        """The actor's mean action for already standardised states (the update's inputs); the latent clipped as the
        actor's normaliser clips it in ``mean_action`` (a component beyond +-5 needs z_dim > 25)."""
        clip = self.actor.normalizer.clip
        return torch.tanh(self.actor.net(torch.cat([s_n, z.clamp(-clip, clip)], -1)))

    # -- checkpoints -----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Networks, targets, optimisers and the rollout latents' buffer."""
        return {
            "modules": {k: m.state_dict() for k, m in self.modules().items()},
            "optimizers": {k: o.state_dict() for k, o in self.optimizers.items()},
            "z_buffer": self.z_buffer.cpu().clone(),
            "z_count": self.z_count,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict``."""
        for k, m in self.modules().items():
            m.load_state_dict(state["modules"][k])
        for k, o in self.optimizers.items():
            o.load_state_dict(state["optimizers"][k])
        self.z_buffer.copy_(state["z_buffer"].to(self.device))
        self.z_count = int(state["z_count"])


class FBCPR(SkillMethod):
    """Meta Motivo's entry in the method registry. Its loop is the off-policy runner
    (``rgsd_agents.training.offpolicy.OffPolicyRunner``), which builds ``FBCPRAgent``; the PPO runner's hooks are
    unused."""

    NAME = NAME
    CONFIG = FBCPRConfig
    LOOP = LOOP
    LATENT_CHOICE = LATENT_CHOICE
    CLIP_LATENTS_RULE = CLIP_LATENTS_RULE
    ENCODER = "random"
    IMITATION = False

    def __init__(self, cfg: FBCPRConfig, ctx: MethodContext):
        raise TypeError(f"{NAME} trains in the off-policy loop (rgsd_agents.training.offpolicy), not on the PPO runner")
