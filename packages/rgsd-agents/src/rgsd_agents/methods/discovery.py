"""Training of the discovery encoder q_phi'(z|s) (paper "Discovery of new skills"; docs/design.md, Learning).

q_phi' starts as a copy of the frozen pretrained encoder and scores the
discovery worlds' rewards (the env holds the same module, updated in place).
Per sample, with c the task indicator (1 imitation):

    L = (1 - c) * (-log q_phi'(z | s'))  +  alpha * c * KL(q_phi'(.|s) || q_frozen(.|s))

``-log q(z|s') = const - kappa mu'(s')^T z`` (the constant is dropped) and the
KL of two vMF with the same kappa is ``kappa A_d(kappa) (1 - mu'^T mu)``. The
loss is averaged over all samples of a minibatch, so p_imitation sets the
balance of the two terms as in the paper.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from rgsd_agents.rl.distributed import DataParallel
from rgsd_agents.rl.storage import RolloutStorage
from rgsd_envs.envs.skills import vmf_kl_same_kappa
from rgsd_envs.rewards.encoders import MLPEncoder, embed, within_motion_alignment

Tensor = torch.Tensor


@dataclass
class DiscoveryConfig:
    """Training of the discovery encoder q_phi' (paper: initialised from the frozen encoder); the ``method.options``
    of RGSD and DIAYN."""

    lr: float = 1e-4
    """Learning rate of the discovery encoder's own Adam optimiser (PPO's actor and critic have theirs,
    ``ppo.actor_lr`` and ``ppo.critic_lr``)."""
    alpha: float = 0.5
    """Weight of KL(q_phi'(.|s) || q_frozen(.|s)) on imitation samples."""
    epochs: int = 1
    """Passes over each rollout."""
    minibatch_size: int = 32768
    """Samples per gradient step of the discovery encoder: each pass splits the rollout (num_envs x horizon) into
    rollout // minibatch_size random parts, as ``ppo.minibatch_size`` does for PPO."""
    max_grad_norm: float | None = None
    """Gradient-norm clip of the discovery encoder's steps (None: no clipping); ``ppo.max_grad_norm`` clips the
    actor and the critic only, each on its own (default 1.0)."""
    update_every: int = 1
    """Update the encoder after every k-th iteration only (on that iteration's rollout): 1/k of the cost."""

    def __post_init__(self) -> None:
        if not (self.lr > 0 and self.alpha >= 0 and self.epochs >= 1 and self.minibatch_size >= 1):
            raise ValueError("lr > 0, alpha >= 0, epochs >= 1 and minibatch_size >= 1 are required")
        if self.update_every < 1:
            raise ValueError(f"update_every must be >= 1, got {self.update_every}")


def discovery_loss(
    trainable: nn.Module, frozen: nn.Module, inputs: Tensor, skills: Tensor, tasks: Tensor, kappa: float, alpha: float
) -> tuple[Tensor, dict[str, Tensor]]:
    """Mean loss over a batch and its parts; ``inputs`` hold s' for discovery rows and s for imitation rows.

    Fixed-shape: both terms are computed on every row and masked by the task, so the loss never reads the
    device to decide which rows exist. Stats come as (sum, count) pairs: ``skill_cos`` over discovery rows,
    ``kl_to_frozen`` over imitation rows (a term with no rows has count 0)."""
    imit = (tasks > 0.5).to(inputs.dtype)
    disc = 1.0 - imit
    n = max(tasks.shape[0], 1)
    mu = trainable(inputs)
    cos_z = (mu * skills).sum(-1)
    with torch.no_grad():
        target = frozen(inputs)
    kl = vmf_kl_same_kappa(mu, target, kappa)
    nll_sum = -kappa * (cos_z * disc).sum()
    kl_sum = (kl * imit).sum()
    loss = (nll_sum + alpha * kl_sum) / n
    stats = {
        "skill_cos": torch.stack(((cos_z.detach() * disc).sum(), disc.sum())),
        "kl_to_frozen": torch.stack(((kl.detach() * imit).sum(), imit.sum())),
        "loss": torch.stack((loss.detach(), loss.new_ones(()))),
    }
    return loss, stats


class DiscoveryTrainer:
    """Adam on the trainable encoder with the loss of ``discovery_loss``."""

    def __init__(
        self,
        trainable: MLPEncoder,
        frozen: nn.Module,
        kappa: float,
        cfg: DiscoveryConfig,
        dp: DataParallel | None = None,
    ):
        self.encoder = trainable
        self.dp = dp
        """Data-parallel rank: gradients averaged over the ranks (None: one process)."""
        self.frozen = frozen
        self.kappa = float(kappa)
        self.cfg = cfg
        self.optimizer = torch.optim.Adam(trainable.parameters(), lr=cfg.lr, fused=True)  # see ppo.PPO

    def update(self, storage: RolloutStorage, generator: torch.Generator) -> dict[str, float]:
        """``epochs`` passes over the rollout; mean loss terms (NaN-free: missing terms are left out)."""
        inputs, skills, tasks = storage.flat("encoder_inputs"), storage.flat("skills"), storage.flat("tasks")
        sums: dict[str, Tensor] = {}
        self.encoder.train()
        for _ in range(self.cfg.epochs):
            for idx in storage.minibatch_indices(self.cfg.minibatch_size, generator):
                loss, stats = discovery_loss(
                    self.encoder, self.frozen, inputs[idx], skills[idx], tasks[idx], self.kappa, self.cfg.alpha
                )
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if self.dp is not None:  # every rank steps, with the ranks' mean gradient
                    self.dp.average_gradients(self.encoder.parameters())
                if self.cfg.max_grad_norm is not None:
                    nn.utils.clip_grad_norm_(self.encoder.parameters(), self.cfg.max_grad_norm)
                self.optimizer.step()
                for k, v in stats.items():
                    sums[k] = sums[k] + v if k in sums else v
        self.encoder.eval()
        totals = dict(zip(sums, torch.stack(list(sums.values())).tolist()))  # one read per update
        # per-minibatch means of the loss; term means over the rows that had the term (left out without rows)
        return {k: s / c for k, (s, c) in totals.items() if c > 0}

    @torch.no_grad()
    def reference_stats(self, reference_inputs: Tensor, clip_of_frame: Tensor, num_clips: int) -> dict[str, float]:
        """Within-motion alignment of the trainable encoder and its mean cosine to the frozen one on the references."""
        reference_inputs = reference_inputs.to(next(self.encoder.parameters()).device)
        mine = embed(self.encoder, reference_inputs)
        theirs = embed(self.frozen, reference_inputs)
        return {
            "ref_alignment": within_motion_alignment(self.encoder, reference_inputs, clip_of_frame, num_clips),
            "ref_cos_to_frozen": float((mine * theirs).sum(-1).mean()),
        }

    def state_dict(self) -> dict:
        """Encoder weights and optimiser state."""
        return {"encoder": self.encoder.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore encoder weights and optimiser state."""
        self.encoder.load_state_dict(state["encoder"])
        self.optimizer.load_state_dict(state["optimizer"])
