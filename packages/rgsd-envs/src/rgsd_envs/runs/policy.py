"""Exported skill-conditioned policies: one file any rgsd package can load and run.

A trained controller is saved as ``policy.pt`` (format ``rgsd-policy``): running
observation statistics and the actor MLP that maps a normalised observation to
the mean action. It loads without the trainer's code, so evaluation
(``rgsd-eval``) and downstream tasks depend only on ``rgsd-envs``. The trainer
(``rgsd-agents``) builds its actor from these same classes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rgsd_envs.utils.files import InputFileError, atomic_path

Tensor = torch.Tensor
POLICY_FILE_FORMAT = "rgsd-policy"
POLICY_FILE_VERSION = 1
OUTPUTS = ("linear", "tanh")
"""The mean action's last step: the MLP's output as is (PPO actors), or squashed by tanh into [-1, 1]
(off-policy actors such as FB-CPR's, whose critics are trained on actions inside the box)."""
ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU}


def mlp(in_dim: int, hidden: Sequence[int], out_dim: int, activation: str = "tanh") -> nn.Sequential:
    """Linear layers with ``activation`` between them (none after the last)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {activation!r}")
    layers: list[nn.Module] = []
    width = in_dim
    for h in hidden:
        layers += [nn.Linear(width, int(h)), ACTIVATIONS[activation]()]
        width = int(h)
    layers.append(nn.Linear(width, out_dim))
    return nn.Sequential(*layers)


Moments = Callable[[Tensor], tuple[int, Tensor, Tensor]]
"""x (B, ...) -> (count, mean, population variance) of a batch, e.g. over every rank of a data-parallel run."""


@torch.no_grad()
def fold_batch_stats(mean: Tensor, var: Tensor, count: Tensor, x: Tensor, moments: Moments | None = None) -> None:
    """Fold a batch x (B, ...) into running mean/var/count in place (parallel Welford, population variance);
    ``moments`` replaces the batch's own count, mean and variance (None: x's)."""
    if moments is None:
        n = x.shape[0]
        if n == 0:
            return
        b_mean, b_var = x.mean(0), x.var(0, unbiased=False)
    else:
        n, b_mean, b_var = moments(x)
        if n == 0:
            return
    total = count + n
    delta = b_mean - mean
    mean += delta * n / total
    var.copy_((var * count + b_var * n + delta.square() * count * n / total) / total)
    count.copy_(total)


class ObsNormalizer(nn.Module):
    """Running mean/variance of observations; normalises and clips to +-clip."""

    def __init__(self, dim: int, clip: float = 5.0, eps: float = 1e-8):
        super().__init__()
        self.clip = float(clip)
        self.eps = eps
        self.register_buffer("mean", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("var", torch.ones(dim, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(eps, dtype=torch.float64))

    def update(self, x: Tensor, moments: Moments | None = None) -> None:
        """Fold a batch (B, dim) into the running statistics (parallel Welford; ``moments``: see fold_batch_stats)."""
        x = x.reshape(-1, self.mean.shape[0]).to(torch.float64)
        fold_batch_stats(self.mean, self.var, self.count, x, moments)

    def forward(self, x: Tensor) -> Tensor:
        """Normalised, clipped observations (same dtype as x)."""
        mean, std = self.mean.to(x.dtype), (self.var + self.eps).sqrt().to(x.dtype)
        return ((x - mean) / std).clamp(-self.clip, self.clip)


class PolicyMLP(nn.Module):
    """Deterministic part of the actor: normalise, MLP, mean action (B, act_dim)."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden: Sequence[int] = (1024, 1024, 1024, 512),
        activation: str = "tanh",
        output: str = "linear",
    ):
        super().__init__()
        if output not in OUTPUTS:
            raise ValueError(f"output must be one of {', '.join(OUTPUTS)}, got {output!r}")
        self.obs_dim, self.act_dim = int(obs_dim), int(act_dim)
        self.hidden, self.activation, self.output = tuple(int(h) for h in hidden), activation, output
        self.normalizer = ObsNormalizer(obs_dim)
        self.net = mlp(obs_dim, self.hidden, act_dim, activation)

    def forward(self, obs: Tensor) -> Tensor:
        """Mean action for raw observations (B, obs_dim)."""
        out = self.net(self.normalizer(obs))
        return torch.tanh(out) if self.output == "tanh" else out

    @torch.no_grad()
    def act(self, obs: Any) -> Tensor:
        """Deterministic action for numpy or torch observations (no gradients), on the policy's device."""
        x = torch.as_tensor(obs, dtype=torch.float32, device=self.normalizer.mean.device)
        squeeze = x.dim() == 1
        out = self(x.unsqueeze(0) if squeeze else x)
        return out[0] if squeeze else out

    def save(self, path: str | os.PathLike, **meta: Any) -> Path:
        """Write the policy (and metadata such as the env id or training step) atomically."""
        payload = {
            "format": POLICY_FILE_FORMAT,
            "version": POLICY_FILE_VERSION,
            "obs_dim": self.obs_dim,
            "act_dim": self.act_dim,
            "hidden": list(self.hidden),
            "activation": self.activation,
            "output": self.output,
            "clip": self.normalizer.clip,
            "state_dict": {k: v.detach().cpu() for k, v in self.state_dict().items()},
            "meta": meta,
        }
        with atomic_path(path) as tmp:
            torch.save(payload, tmp)
        return Path(path)


def load_policy(path: str | os.PathLike) -> PolicyMLP:
    """Load a policy saved by ``PolicyMLP.save`` (eval mode, CPU); metadata in ``.meta``."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "no such policy file (a training run writes <run>/policy.pt)")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        raise InputFileError(path, f"not a readable policy file (truncated or corrupt?): {err}") from None
    if not isinstance(payload, dict) or payload.get("format") != POLICY_FILE_FORMAT:
        raise InputFileError(path, f"not an rgsd policy file (expected format '{POLICY_FILE_FORMAT}')", "format")
    for key in ("obs_dim", "act_dim", "hidden", "activation", "state_dict"):
        if key not in payload:
            raise InputFileError(path, "missing", key)
    output = payload.get("output", "linear")  # files written before OUTPUTS existed: linear
    if output not in OUTPUTS:
        raise InputFileError(path, f"unknown output {output!r} (this rgsd reads {', '.join(OUTPUTS)})", "output")
    pol = PolicyMLP(payload["obs_dim"], payload["act_dim"], payload["hidden"], payload["activation"], output)
    pol.normalizer.clip = float(payload.get("clip", 5.0))
    try:
        pol.load_state_dict(payload["state_dict"])
    except RuntimeError as err:
        raise InputFileError(path, f"weights do not match the stored architecture: {err}", "state_dict") from None
    pol.meta = dict(payload.get("meta", {}))
    return pol.eval()
