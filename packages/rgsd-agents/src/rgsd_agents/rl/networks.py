"""Actor-critic networks of the skill-conditioned policy (docs/design.md, Learning).

The actor's mean network *is* an ``rgsd_envs.runs.policy.PolicyMLP`` (running
observation normaliser + MLP, optionally with ASE's and CALM's latent branch),
so exporting it as ``<run>/policy.pt`` needs no conversion and evaluation needs
only rgsd-envs. The Gaussian's log standard
deviation is a separate, state-independent parameter (fixed or learned). The
critic is a separate MLP on the same normalised observation; with value
normalisation it predicts standardised returns (``ValueNormalizer``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from rgsd_envs.envs.observations import POLICY_LAYOUT
from rgsd_envs.rewards.encoders import PAPER_HIDDEN
from rgsd_envs.runs.policy import DEFAULT_LOG_STD, LatentBranchMLP, Moments, PolicyMLP, fold_batch_stats, mlp

Tensor = torch.Tensor
LOG_2PI = math.log(2.0 * math.pi)


@dataclass
class NetworkConfig:
    """Actor and critic MLPs and the Gaussian policy's standard deviation."""

    actor_hidden: tuple[int, ...] = PAPER_HIDDEN
    """Hidden sizes of the actor (the exported ``PolicyMLP``); paper: 1024, 1024, 1024, 512."""
    critic_hidden: tuple[int, ...] = PAPER_HIDDEN
    """Hidden sizes of the critic (same input: normalised observation)."""
    activation: str = "tanh"
    """Hidden-layer activation of actor and critic (paper: tanh; ``rgsd_envs.runs.policy.mlp``)."""
    latent_branch: tuple[int, ...] = ()
    """Hidden sizes of the actor's latent branch: the observation's skill slice passes its own MLP with a tanh
    output of the skill's size before it joins the rest (``rgsd_envs.runs.policy.LatentBranchMLP``; ASE's and
    CALM's code: 512, 256). Empty: the skill is one more input (the RGSD paper's policy). The critic always
    takes the skill as one more input, as ASE's and CALM's critics do."""
    init_log_std: float = DEFAULT_LOG_STD
    """Initial log standard deviation of the (state-independent) Gaussian; ASE's fixed exp(-2.9) = 0.055."""
    learn_std: bool = False
    """Learn the log std (False: keep it at ``init_log_std``; the entropy bonus then has no effect)."""
    init_mean_action: str = "reference"
    """Initial mean action: "reference" (the action that holds the references' mean joint angles) or "zero"
    (PD targets at the middle of each joint's range, a crouch)."""

    def __post_init__(self) -> None:
        self.actor_hidden = tuple(int(h) for h in self.actor_hidden)
        self.critic_hidden = tuple(int(h) for h in self.critic_hidden)
        self.latent_branch = tuple(int(h) for h in self.latent_branch)
        if not self.actor_hidden or not self.critic_hidden or min(self.actor_hidden + self.critic_hidden) < 1:
            raise ValueError("actor_hidden and critic_hidden must be non-empty lists of positive sizes")
        if self.latent_branch and min(self.latent_branch) < 1:
            raise ValueError(
                f"networks.latent_branch must be positive sizes (or empty), got {list(self.latent_branch)}"
            )
        if self.init_mean_action not in ("reference", "zero"):
            raise ValueError(f"networks.init_mean_action must be 'reference' or 'zero', got {self.init_mean_action!r}")


class ValueNormalizer(nn.Module):
    """Running mean/variance of value targets; the critic regresses standardised returns."""

    def __init__(self, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.register_buffer("mean", torch.zeros((), dtype=torch.float64))
        self.register_buffer("var", torch.ones((), dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    def update(self, x: Tensor, moments: Moments | None = None) -> None:
        """Fold a batch of returns into the statistics (parallel Welford; ``moments``: see fold_batch_stats)."""
        fold_batch_stats(self.mean, self.var, self.count, x.reshape(-1).to(torch.float64), moments)

    def normalize(self, x: Tensor) -> Tensor:
        """Standardised values."""
        return (x - self.mean.to(x.dtype)) / (self.var + self.eps).sqrt().to(x.dtype)

    def denormalize(self, x: Tensor) -> Tensor:
        """Values in return units."""
        return x * (self.var + self.eps).sqrt().to(x.dtype) + self.mean.to(x.dtype)


def _init_linear(net: nn.Module, last_gain: float) -> None:
    """Orthogonal weights (gain sqrt 2 hidden, ``last_gain`` output), zero biases (CleanRL); a latent branch's
    output layer uniform in +-1, as ASE's and CALM's style layer."""
    if isinstance(net, LatentBranchMLP):
        _init_linear(net.branch, math.sqrt(2.0))
        nn.init.uniform_(net.branch[-1].weight, -1.0, 1.0)
        net = net.trunk
    linears = [m for m in net if isinstance(m, nn.Linear)]
    for i, layer in enumerate(linears):
        nn.init.orthogonal_(layer.weight, last_gain if i == len(linears) - 1 else math.sqrt(2.0))
        nn.init.zeros_(layer.bias)


def forward_mixed(net: nn.Module, x: Tensor, bf16: bool = False) -> Tensor:
    """``net(x)``; with ``bf16`` the hidden layers run under bf16 autocast and the output layer in float32.

    The output layer stays in float32 because the policy's log-probabilities divide
    the mean's error by a std of 0.055: bf16's 3 significant digits on the mean would
    put noise of the size of a PPO step into the probability ratio.
    """
    if not bf16:
        return net(x)
    with torch.autocast(x.device.type, dtype=torch.bfloat16):
        if isinstance(net, LatentBranchMLP):
            x, net = net.join(x), net.trunk
        h = net[:-1](x)
    return net[-1](h.float())


class ActorCritic(nn.Module):
    """Gaussian actor (``PolicyMLP`` mean, state-independent log std) and a critic MLP; ``latent`` is the
    observation's skill slice, which the actor's latent branch takes (``NetworkConfig.latent_branch``)."""

    def __init__(self, obs_dim: int, act_dim: int, cfg: NetworkConfig, latent: slice = POLICY_LAYOUT["skill"]):
        super().__init__()
        self.actor = PolicyMLP(
            obs_dim, act_dim, cfg.actor_hidden, cfg.activation, latent=latent, latent_branch=cfg.latent_branch
        )
        self.critic = mlp(obs_dim, cfg.critic_hidden, 1, cfg.activation)
        _init_linear(self.actor.net, 0.01)
        _init_linear(self.critic, 1.0)
        self.log_std = nn.Parameter(torch.full((act_dim,), float(cfg.init_log_std)), requires_grad=cfg.learn_std)
        self.value_normalizer = ValueNormalizer()

    @torch.no_grad()
    def set_mean_action(self, action: Tensor) -> None:
        """Make ``action`` (A,) the initial mean action (the bias of the actor's output layer)."""
        self.actor.output_layer().bias.copy_(action)

    @property
    def obs_normalizer(self) -> nn.Module:
        """The actor's running observation normaliser (shared with the critic)."""
        return self.actor.normalizer

    def actor_parameters(self) -> list[nn.Parameter]:
        """Trainable parameters of the policy (mean network and, if learned, log std)."""
        return [*self.actor.net.parameters(), *([self.log_std] if self.log_std.requires_grad else [])]

    def value(self, obs_n: Tensor) -> Tensor:
        """V(s) in return units (B,) for normalised observations."""
        return self.value_normalizer.denormalize(self.critic(obs_n).squeeze(-1))

    @torch.no_grad()
    def act(self, obs_n: Tensor, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Sampled actions (B, A), their log-probabilities (B,) and values V(s) (B,)."""
        mean = self.actor.net(obs_n)
        eps = torch.randn(mean.shape, generator=generator, dtype=mean.dtype, device=mean.device)
        std = self.log_std.exp()
        actions = mean + std * eps
        log_prob = -0.5 * eps.square().sum(-1) - self.log_std.sum() - 0.5 * LOG_2PI * mean.shape[-1]
        return actions, log_prob, self.value(obs_n)

    def evaluate(self, obs_n: Tensor, actions: Tensor, bf16: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """(log-probabilities (B,), entropy (), standardised values (B,), means (B, A)) for PPO's loss
        (``bf16``: hidden layers under bf16 autocast, ``forward_mixed``)."""
        mean = forward_mixed(self.actor.net, obs_n, bf16)
        z = (actions - mean) * torch.exp(-self.log_std)
        log_prob = -0.5 * z.square().sum(-1) - self.log_std.sum() - 0.5 * LOG_2PI * mean.shape[-1]
        entropy = self.log_std.sum() + 0.5 * (1.0 + LOG_2PI) * mean.shape[-1]
        return log_prob, entropy, forward_mixed(self.critic, obs_n, bf16).squeeze(-1), mean
