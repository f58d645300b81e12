"""Pieces the baseline methods share: transition features, reference samples, vMF maths, GAN losses, latents.

Transitions. The rollout storage keeps, for every discovery sample, the
encoder input of s' (5 stacked 359-D frames ``o_{t-3} .. o_{t+1}``, ``rgsd_envs.envs.observations``),
so the last ``k`` frames of it are the transition ``(o_{t+2-k} .. o_t, o_{t+1})``;
``k = 2`` is ``(s, s')``. The reference library gives the same layout for every
reference frame (``RGSDCore.ref_inputs``), so policy and reference transitions
come from one function. Another env (the toy envs of ``rgsd_envs.envs.toy``) describes its frames with an
``ObservationLayout``, which ``ReferenceData.layout`` carries to the methods. The phase column is dropped: it is a clock the policy
does not control (it runs in discovery episodes too), so a discriminator or
METRA's phi would only spend capacity on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from scipy import special
from torch import nn

from rgsd_envs.envs.observations import HUMANOID_LAYOUT, SKILL_DIM, ObservationLayout
from rgsd_envs.runs.policy import mlp

Tensor = torch.Tensor

FEATURE_DIM = HUMANOID_LAYOUT.feature_dim
"""358: a humanoid frame's features without the phase (another env's: ``ReferenceData.layout.feature_dim``)."""


def transition_features(encoder_inputs: Tensor, frames: int, layout: ObservationLayout = HUMANOID_LAYOUT) -> Tensor:
    """The last ``frames`` frames of encoder inputs (..., history_len * frame_dim; the humanoid's 5 x 359), phase
    dropped: (..., frames * layout.feature_dim)."""
    history, width, phase = layout.history_len, layout.frame_dim, layout.phase
    if not 1 <= frames <= history:
        raise ValueError(f"frames must be in 1..{history} (the encoder input's history), got {frames}")
    x = encoder_inputs.reshape(*encoder_inputs.shape[:-1], history, width)[..., -frames:, :]
    if phase is not None:  # slices, not a list of columns: a list indexes through a host tensor (a blocking upload)
        x = torch.cat((x[..., : phase.start], x[..., phase.stop :]), dim=-1)
    return x.flatten(-2)


@dataclass
class ReferenceData:
    """The motion library's reference frames as the methods read them (all on one device)."""

    inputs: Tensor
    """(F, 1795) encoder input of every reference frame (``RGSDCore.ref_inputs``)."""
    clip_of_frame: Tensor
    """(F,) long."""
    starts: Tensor
    """(clips,) first frame of each clip."""
    num_frames: Tensor
    """(clips,) frames of each clip."""
    layout: ObservationLayout = HUMANOID_LAYOUT
    """What the inputs' frames hold (the env's ``layout``): the methods size their networks by it."""

    @classmethod
    def from_core(cls, core, device: torch.device | str) -> ReferenceData:
        """From an ``RGSDCore`` or a toy env's core (``core.ref_inputs``, ``core.lib``, ``core.layout``)."""
        lib = core.lib
        return cls(
            core.ref_inputs.to(device, torch.float32),
            lib.clip_of_frame.to(device),
            lib.starts.to(device),
            lib.num_frames.to(device),
            getattr(core, "layout", HUMANOID_LAYOUT),
        )

    @property
    def num_total(self) -> int:
        """Total reference frames F."""
        return int(self.inputs.shape[0])

    def sample_frames(self, n: int, generator: torch.Generator, history: int = 1, clip_first: bool = True) -> Tensor:
        """(n,) reference frame indices, drawn on the generator's device.

        ``clip_first`` (as ASE's and CALM's motion libraries draw, by their dataset file's weights; rgsd's clips have
        none): a clip uniformly, then a frame uniformly among its frames that have ``history - 1`` frames of the
        clip before them (ASE's ``truncate_time``: a sample of ``history`` frames lies inside the clip; a clip too
        short keeps its last frame). Otherwise uniform over all frames, so that a long clip is drawn in proportion
        to its length."""
        g, dev = generator, self.inputs.device
        if not clip_first:
            return torch.randint(self.num_total, (n,), generator=g, device=g.device).to(dev)
        clip = torch.randint(self.starts.shape[0], (n,), generator=g, device=g.device).to(dev)
        skip = (self.num_frames[clip] - 1).clamp(max=history - 1)
        count = self.num_frames[clip] - skip
        u = torch.rand(n, generator=g, device=g.device).to(dev)
        return self.starts[clip] + skip + torch.minimum((u * count).long(), count - 1)

    def nearby_frames(self, frames: Tensor, max_offset: int, generator: torch.Generator) -> Tensor:
        """For each frame, a frame of the same clip at most ``max_offset`` frames away (clamped to the clip)."""
        off = torch.randint(-max_offset, max_offset + 1, frames.shape, generator=generator, device=generator.device)
        clip = self.clip_of_frame[frames]
        first = self.starts[clip]
        last = first + self.num_frames[clip] - 1
        return torch.minimum(torch.maximum(frames + off.to(frames.device), first), last)


NORM_CLIP = 5.0
"""Standardised inputs are clipped to +-5 (ASE/ProtoMotions' discriminator normaliser): a feature the references
hold nearly constant must not give a discriminator an unbounded input."""


class Standardize(nn.Module):
    """Fixed input standardisation (statistics of the reference samples, std floored at 1e-3), clipped."""

    def __init__(self, dim: int):
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("std", torch.ones(dim))

    @torch.no_grad()
    def fit(self, x: Tensor) -> None:
        """Take the statistics of ``x`` (B, dim)."""
        self.mean.copy_(x.mean(0))
        self.std.copy_(x.std(0).clamp_min(1e-3))

    def forward(self, x: Tensor) -> Tensor:
        """(x - mean) / std, clipped to +-``NORM_CLIP``."""
        return ((x - self.mean) / self.std).clamp(-NORM_CLIP, NORM_CLIP)


class MLPHead(nn.Module):
    """Standardised input -> ReLU MLP -> ``out_dim`` (a discriminator logit, an encoder direction, phi)."""

    def __init__(self, in_dim: int, hidden: tuple[int, ...], out_dim: int):
        super().__init__()
        self.norm = Standardize(in_dim)
        self.net = mlp(in_dim, hidden, out_dim, "relu")

    def forward(self, x: Tensor) -> Tensor:
        """(B, out_dim)."""
        return self.net(self.norm(x))

    def from_standardized(self, x_n: Tensor) -> Tensor:
        """(B, out_dim) of inputs already standardised (the gradient penalty is taken with respect to them)."""
        return self.net(x_n)

    def last_layer(self) -> nn.Linear:
        """The output layer (ASE's logit regulariser acts on its weights)."""
        return self.net[-1]


def to_floats(stats: dict[str, Tensor | float]) -> dict[str, float]:
    """0-d statistics tensors as floats, read from the device at once (numbers pass through)."""
    tensors = {k: v for k, v in stats.items() if isinstance(v, Tensor)}
    out = {k: float(v) for k, v in stats.items() if not isinstance(v, Tensor)}
    if tensors:
        values = torch.stack([v.detach().to(torch.float32).reshape(()) for v in tensors.values()]).tolist()
        out.update(zip(tensors, values))
    return {k: out[k] for k in stats}


# -- von Mises-Fisher ----------------------------------------------------------------
def vmf_log_normalizer(kappa: float, dim: int = SKILL_DIM) -> float:
    """log C_d(kappa) of vMF on the unit sphere in R^dim; kappa 0 is the uniform density 1 / area(S^{d-1})."""
    if kappa < 0:
        raise ValueError(f"kappa must be >= 0, got {kappa}")
    if kappa == 0:
        return math.lgamma(dim / 2) - math.log(2.0) - (dim / 2) * math.log(math.pi)
    v = dim / 2 - 1
    # log I_v(k) = log(ive(v, k)) + k (the exponentially scaled Bessel function does not overflow)
    return v * math.log(kappa) - (dim / 2) * math.log(2 * math.pi) - (math.log(special.ive(v, kappa)) + kappa)


def vmf_log_prob(mu: Tensor, z: Tensor, kappa: float) -> Tensor:
    """log vMF(z; mu, kappa) = log C_d(kappa) + kappa mu^T z for unit rows mu, z (B, d): (B,)."""
    return vmf_log_normalizer(kappa, mu.shape[-1]) + kappa * (mu * z).sum(-1)


def unit_sphere(n: int, generator: torch.Generator, dim: int = SKILL_DIM) -> Tensor:
    """(n, dim) directions uniform on the unit sphere (normalised Gaussians), on the generator's device."""
    return F.normalize(torch.randn(n, dim, generator=generator, device=generator.device), dim=-1)


# -- adversarial imitation (ASE, CALM) -------------------------------------------------
@dataclass
class AdversarialConfig:
    """What ASE and CALM share: the discriminator's input, its update and regularisers, the latent schedule.

    The discriminator trains in every PPO minibatch step (``SkillMethod.after_policy_step``), on the first
    ``disc_minibatch_size`` of that minibatch's policy transitions and as many reference transitions, as ASE's and
    CALM's code do: PPO's ``epochs`` and ``minibatch_size`` set how many steps it takes per rollout (their code: 6
    epochs of 8 minibatches of 16,384 samples, so 48 discriminator steps of 4,096)."""

    frames: int = 2
    """Frames of a transition the discriminator sees (2: (s, s'); at most 5)."""
    lr: float = 2e-5
    """Adam learning rate of the discriminator (ASE's and CALM's code: their one learning_rate, 2e-5)."""
    disc_minibatch_size: int | None = 4096
    """Policy samples per discriminator step: the first ones of the PPO minibatch (its rows are drawn at random),
    with as many reference samples (ASE's and CALM's code: amp_minibatch_size 4096); None: the whole minibatch."""
    grad_penalty: float = 5.0
    """Weight of the gradient penalty on the reference samples (ASE: 5)."""
    logit_reg: float = 0.01
    """Weight of the squared output-layer weights (ASE: 0.01)."""
    weight_decay: float = 1e-4
    """Weight of the discriminator's squared Linear weights (ASE: 1e-4; none on ASE's encoder head, as ASE's
    enc_weight_decay 0)."""
    disc_weight: float = 1.0
    """Weight of -log(1 - D) in the reward (ASE: disc_reward_w 0.5 x disc_reward_scale 2)."""
    resample: bool = False
    """One latent per episode (False), as the RGSD paper ran every method; True: a new one mid-episode after
    ``latent_steps_min`` .. ``latent_steps_max`` steps, as ASE's and CALM's code."""
    latent_steps_min: int = 1
    """With ``resample``: fewest steps a latent is held, the hold drawn uniformly up to ``latent_steps_max`` (ASE:
    1)."""
    latent_steps_max: int = 150
    """With ``resample``: most steps a latent is held (ASE and CALM: 150)."""
    max_grad_norm: float | None = None
    """Gradient-norm clip of each discriminator step (ASE: its network, the encoder head included; CALM: the motion
    encoder and the conditional discriminator together); None: no clipping. The policy's clip is
    ``ppo.max_grad_norm``."""

    def __post_init__(self) -> None:
        if self.disc_minibatch_size is not None and self.disc_minibatch_size < 1:
            raise ValueError(f"method.options.disc_minibatch_size must be >= 1 or null, got {self.disc_minibatch_size}")

    def disc_rows(self, idx: Tensor) -> Tensor:
        """The rows of PPO's minibatch ``idx`` the discriminator trains on: its first ``disc_minibatch_size``."""
        return idx if self.disc_minibatch_size is None else idx[: self.disc_minibatch_size]


class StepStats:
    """Sums of per-step statistics (0-d tensors, kept on the device) and their means when read out."""

    def __init__(self) -> None:
        self.sums: dict[str, Tensor] = {}
        self.steps = 0

    def add(self, stats: dict[str, Tensor]) -> None:
        """Add one step's statistics."""
        for k, v in stats.items():
            self.sums[k] = self.sums[k] + v if k in self.sums else v
        self.steps += 1

    def pop_means(self) -> dict[str, Tensor]:
        """The means since the last call (empty without steps), and start again."""
        out = {k: v / self.steps for k, v in self.sums.items()}
        self.sums, self.steps = {}, 0
        return out


def discriminator_regularizer(
    disc: nn.Module | tuple[nn.Module, ...], last_layer: nn.Linear, cfg: AdversarialConfig
) -> Tensor:
    """logit_reg * |W_out|^2 + weight_decay * sum |W|^2 over the Linear layers of ``disc`` (one module or the
    modules that make up the discriminator)."""
    decayed = disc if isinstance(disc, tuple) else (disc,)
    return cfg.logit_reg * last_layer.weight.square().sum() + cfg.weight_decay * weight_norm_sq(*decayed)


def discriminator_stats(gan: Tensor, gp: Tensor, ref_logits: Tensor, pol_logits: Tensor) -> dict[str, Tensor]:
    """The discriminator update's logged numbers: its GAN loss, gradient penalty and the share of reference
    (logit > 0) and policy (logit < 0) samples it classifies right."""
    with torch.no_grad():
        return {
            "disc_loss": gan.detach(),
            "grad_penalty": gp.detach(),
            "reference_accuracy": (ref_logits > 0).float().mean(),
            "policy_accuracy": (pol_logits < 0).float().mean(),
        }


def discriminator_reward(logits: Tensor) -> Tensor:
    """-log(1 - D) with D = sigmoid(logit), floored at 1 - D >= 1e-4 as in AMP/ASE: (B,)."""
    return -torch.log((1.0 - torch.sigmoid(logits)).clamp_min(1e-4))


def gan_loss(policy_logits: Tensor, reference_logits: Tensor) -> Tensor:
    """Binary cross-entropy of a discriminator: reference samples labelled 1, policy samples 0 (mean of both)."""
    ones, zeros = torch.ones_like(reference_logits), torch.zeros_like(policy_logits)
    return 0.5 * (
        F.binary_cross_entropy_with_logits(reference_logits, ones)
        + F.binary_cross_entropy_with_logits(policy_logits, zeros)
    )


def gradient_penalty(logits: Tensor, inputs: Tensor) -> Tensor:
    """mean ||d logit / d input||^2 over the batch (``inputs`` must require grad; in AMP/ASE the standardised
    reference samples)."""
    (grad,) = torch.autograd.grad(logits.sum(), inputs, create_graph=True)
    return grad.square().flatten(1).sum(-1).mean()


def weight_norm_sq(*modules: nn.Module) -> Tensor:
    """Sum of squared weights of the modules' Linear layers (biases excluded): ASE's weight decay and logit
    regulariser."""
    return sum(m.weight.square().sum() for module in modules for m in module.modules() if isinstance(m, nn.Linear))


# -- latents held for a random number of steps (ASE, CALM) -------------------------------
class LatentSchedule:
    """Per world: how many more steps the current latent is held; a new latent after 1..max steps.

    Sync-free: every step draws replacement candidates for all worlds and a mask
    of the worlds whose latent expires, so no per-world index crosses to the host.
    A world whose episode just started keeps the latent it started with (the
    env's or the method's) and draws a fresh hold.
    """

    def __init__(self, num_envs: int, steps_min: int, steps_max: int, generator: torch.Generator):
        if not 1 <= steps_min <= steps_max:
            raise ValueError(f"latent steps need 1 <= min <= max, got {steps_min}, {steps_max}")
        self.steps_min, self.steps_max = steps_min, steps_max
        self.generator = generator
        self.left = self._draw(num_envs)

    def _draw(self, n: int) -> Tensor:
        g = self.generator
        return torch.randint(self.steps_min, self.steps_max + 1, (n,), generator=g, device=g.device)

    def tick(self, started: Tensor) -> Tensor:
        """Advance one step; returns the (N,) bool mask of worlds that need a new latent now."""
        started = started.to(self.left.device)
        self.left -= 1
        expired = (self.left <= 0) & ~started
        fresh = self._draw(self.left.shape[0])
        self.left = torch.where(started | expired, fresh, self.left)
        return expired

    def state_dict(self) -> dict[str, Tensor]:
        """Steps left per world."""
        return {"left": self.left.clone()}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        """Restore the steps left."""
        self.left = state["left"].to(self.left.device).clone()
