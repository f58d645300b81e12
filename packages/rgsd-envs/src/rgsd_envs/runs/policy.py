"""Exported skill-conditioned policies: one file any rgsd package can load and run.

A trained controller is saved as ``policy.pt`` (format ``rgsd-policy``): running
observation statistics and the actor MLP that maps a normalised observation to
the mean action (ASE's and CALM's actors pass the latent through a branch of its
own first: ``LatentBranchMLP``). It loads without the trainer's code, so evaluation
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

from rgsd_envs.envs.observations import FRAME_DIM, ObservationLayout
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.utils.files import InputFileError, PickledObjectsError, load_plain, save_plain

Tensor = torch.Tensor
POLICY_FILE_FORMAT = "rgsd-policy"
POLICY_FILE_VERSION = 1
DEFAULT_LOG_STD = -2.9
"""The trainers' default ``networks.init_log_std`` (ASE's fixed std exp(-2.9) = 0.055); what a run that records no
std was trained with."""
FB_CPR_ACTOR_STD = 0.2
"""Meta Motivo's (FB-CPR's) fixed exploration std (``method.options.actor_std``'s default)."""
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


class LatentBranchMLP(nn.Module):
    """An MLP whose input's latent slice first passes its own branch: ``trunk([rest, tanh(branch(latent))])``.

    ASE's and CALM's actors (their ``AMPStyleCatNet1``): the latent goes through a small MLP with a tanh output of
    the latent's size (the "style"), which is joined to the rest of the observation before the main layers."""

    def __init__(
        self, in_dim: int, hidden: Sequence[int], out_dim: int, activation: str, latent: slice, branch: Sequence[int]
    ):
        super().__init__()
        if not 0 <= latent.start < latent.stop <= in_dim or not branch:
            raise ValueError(
                f"a latent branch needs a latent slice inside the input (0..{in_dim}) and hidden sizes, got "
                f"{latent.start}..{latent.stop} and {list(branch)}"
            )
        self.latent = slice(int(latent.start), int(latent.stop))
        width = self.latent.stop - self.latent.start
        self.branch = mlp(width, branch, width, activation)
        self.trunk = mlp(in_dim, hidden, out_dim, activation)

    def join(self, x: Tensor) -> Tensor:
        """The trunk's input (B, in_dim): the input with its latent slice replaced by the branch's output."""
        style = torch.tanh(self.branch(x[..., self.latent]))
        return torch.cat((x[..., : self.latent.start], style, x[..., self.latent.stop :]), dim=-1)

    def forward(self, x: Tensor) -> Tensor:
        """(B, out_dim)."""
        return self.trunk(self.join(x))


class PolicyMLP(nn.Module):
    """Deterministic part of the actor: normalise, MLP (optionally with a latent branch), mean action (B, act_dim)."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden: Sequence[int] = (1024, 1024, 1024, 512),
        activation: str = "tanh",
        output: str = "linear",
        latent: slice | None = None,
        latent_branch: Sequence[int] = (),
    ):
        super().__init__()
        if output not in OUTPUTS:
            raise ValueError(f"output must be one of {', '.join(OUTPUTS)}, got {output!r}")
        self.obs_dim, self.act_dim = int(obs_dim), int(act_dim)
        self.hidden, self.activation, self.output = tuple(int(h) for h in hidden), activation, output
        self.latent_branch = tuple(int(h) for h in latent_branch)
        """Hidden sizes of the latent's own branch (``LatentBranchMLP``); empty: the latent is one more input."""
        self.latent = latent if self.latent_branch else None
        self.normalizer = ObsNormalizer(obs_dim)
        self.net: nn.Module
        if self.latent_branch:
            if latent is None:
                raise ValueError("a policy with a latent branch needs the latent's slice of the observation")
            self.net = LatentBranchMLP(obs_dim, self.hidden, act_dim, activation, latent, self.latent_branch)
        else:
            self.net = mlp(obs_dim, self.hidden, act_dim, activation)

    def output_layer(self) -> nn.Linear:
        """The mean network's last layer (its bias is the initial mean action)."""
        net = self.net.trunk if isinstance(self.net, LatentBranchMLP) else self.net
        return net[-1]

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
            **(
                {"latent": [self.latent.start, self.latent.stop], "latent_branch": list(self.latent_branch)}
                if self.latent_branch
                else {}
            ),
            "clip": self.normalizer.clip,
            "state_dict": {k: v.detach().cpu() for k, v in self.state_dict().items()},
            "meta": meta,
        }
        return save_plain(payload, path)


def load_policy(path: str | os.PathLike) -> PolicyMLP:
    """Load a policy saved by ``PolicyMLP.save`` (eval mode, CPU); metadata in ``.meta``."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "no such policy file (a training run writes <run>/policy.pt)")
    try:
        payload = load_plain(path)
    except PickledObjectsError:
        raise
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
    branch = payload.get("latent_branch", [])  # files without a latent branch have neither key
    latent = slice(*payload["latent"]) if branch else None
    pol = PolicyMLP(
        payload["obs_dim"], payload["act_dim"], payload["hidden"], payload["activation"], output, latent, branch
    )
    pol.normalizer.clip = float(payload.get("clip", 5.0))
    try:
        pol.load_state_dict(payload["state_dict"])
    except RuntimeError as err:
        raise InputFileError(path, f"weights do not match the stored architecture: {err}", "state_dict") from None
    pol.meta = dict(payload.get("meta", {}))
    return pol.eval()


def policy_skill_dim(policy: PolicyMLP) -> int:
    """The skill dimension a humanoid policy states (``meta["skill_dim"]``; files written before the setting: its
    observation size less a frame)."""
    return int(getattr(policy, "meta", {}).get("skill_dim", policy.obs_dim - FRAME_DIM))


def check_policy_fits(policy: PolicyMLP, path: str | os.PathLike, layout: ObservationLayout) -> None:
    """One clear error, naming the policy file and field, unless the policy reads this env's ``[o_t, z]``
    observation (skill of ``layout.skill_dim``) and writes its 69 actions."""
    stated = policy_skill_dim(policy)
    if "skill_dim" in getattr(policy, "meta", {}) and stated != layout.skill_dim:
        raise InputFileError(
            path,
            f"the policy was trained with a {stated}-D skill, the environment has skill_dim {layout.skill_dim}; "
            f"make the env with skill_dim {stated} (a run's config.yaml: env.skill_dim) or use a policy trained "
            f"with {layout.skill_dim}",
            "meta.skill_dim",
        )
    if policy.obs_dim != layout.policy_obs_dim or policy.act_dim != sk.NUM_DOFS:
        field = "obs_dim" if policy.obs_dim != layout.policy_obs_dim else "act_dim"
        raise InputFileError(
            path,
            f"policy maps {policy.obs_dim} -> {policy.act_dim}; RGSD-SMPL-v0 with skill_dim {layout.skill_dim} "
            f"needs {layout.policy_obs_dim} -> {sk.NUM_DOFS}",
            field,
        )
