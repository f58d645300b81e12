"""Training of the discovery encoder q_phi'(z|s) (SPEC §5, paper "Discovery of new skills").

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

import torch
from torch import nn

from rgsd_agents.config import DiscoveryConfig
from rgsd_agents.distributed import DataParallel
from rgsd_agents.storage import RolloutStorage
from rgsd_envs.envs.skills import vmf_kl_same_kappa
from rgsd_envs.rewards.encoders import MLPEncoder, embed, within_motion_alignment

Tensor = torch.Tensor


def discovery_loss(
    trainable: nn.Module, frozen: nn.Module, inputs: Tensor, skills: Tensor, tasks: Tensor, kappa: float, alpha: float
) -> tuple[Tensor, dict[str, Tensor]]:
    """Mean loss over a batch and its parts; ``inputs`` hold s' for discovery rows and s for imitation rows."""
    imit = tasks > 0.5
    disc = ~imit
    n = max(tasks.shape[0], 1)
    zero = inputs.new_zeros(())
    nll_sum, kl_sum = zero, zero
    stats: dict[str, Tensor] = {}
    if disc.any():
        mu = trainable(inputs[disc])
        cos_z = (mu * skills[disc]).sum(-1)
        nll_sum = -kappa * cos_z.sum()
        stats["skill_cos"] = cos_z.detach().mean()
    if imit.any():
        x = inputs[imit]
        with torch.no_grad():
            target = frozen(x)
        kl = vmf_kl_same_kappa(trainable(x), target, kappa)
        kl_sum = kl.sum()
        stats["kl_to_frozen"] = kl.detach().mean()
    loss = (nll_sum + alpha * kl_sum) / n
    stats["loss"] = loss.detach()
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
        self.optimizer = torch.optim.Adam(trainable.parameters(), lr=cfg.lr)

    def update(self, storage: RolloutStorage, generator: torch.Generator) -> dict[str, float]:
        """``epochs`` passes over the rollout; mean loss terms (NaN-free: missing terms are left out)."""
        inputs, skills, tasks = storage.flat("encoder_inputs"), storage.flat("skills"), storage.flat("tasks")
        sums: dict[str, Tensor] = {}
        counts: dict[str, int] = {}
        self.encoder.train()
        for _ in range(self.cfg.epochs):
            for idx in storage.minibatch_indices(self.cfg.minibatch_size, generator):
                loss, stats = discovery_loss(
                    self.encoder, self.frozen, inputs[idx], skills[idx], tasks[idx], self.kappa, self.cfg.alpha
                )
                self.optimizer.zero_grad(set_to_none=True)
                if loss.requires_grad:
                    loss.backward()
                if self.dp is not None:  # every rank steps, with the ranks' mean gradient
                    self.dp.average_gradients(self.encoder.parameters())
                if loss.requires_grad or self.dp is not None:
                    if self.cfg.max_grad_norm is not None:
                        nn.utils.clip_grad_norm_(self.encoder.parameters(), self.cfg.max_grad_norm)
                    self.optimizer.step()
                for k, v in stats.items():
                    sums[k] = sums[k] + v if k in sums else v
                    counts[k] = counts.get(k, 0) + 1
        self.encoder.eval()
        return {k: float(v) / counts[k] for k, v in sums.items()}

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
