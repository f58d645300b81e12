"""PPO's update rule (clipped surrogate), separate from the loop and the storage.

Per minibatch: ``loss = policy + critic_coef * value - entropy_coef * entropy + BOUNDS_COEF * bounds``
with

* policy: ``-min(ratio * A, clip(ratio, 1 +- clip) * A)``, advantages standardised
  over the rollout;
* value: ``(V_n(s) - R_n)^2`` on standardised returns R_n (``ValueNormalizer``);
  ``critic_coef`` 0.5 by default (ASE's and CALM's code: 5);
* bounds: squared excess of the action means beyond ``+-bound`` (ASE's bounds loss:
  the env clips actions to [-1, 1], so means drifting outside get no policy
  gradient back).

A skill method may take part in every minibatch step (``MinibatchHooks``, the
methods' seam in ``rgsd_agents.methods.base``): it may replace the policy's
inputs (CALM puts its re-encoded latents, with gradient, into them), add a term
to the loss (ASE's diversity loss) and take its own step after PPO's backward
(ASE's and CALM's discriminators train in every PPO minibatch).

In a data-parallel run (``rgsd_agents.rl.distributed``) the gradients are averaged
over the ranks before the clipping; advantages are standardised per rank.

Actor and critic have disjoint parameters and their own learning rates (one
Adam, two parameter groups); gradient norms are clipped per network so the
critic's larger gradients cannot shrink the actor's step.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import torch
from torch import nn

from rgsd_agents.config import PPOConfig
from rgsd_agents.rl.distributed import DataParallel
from rgsd_agents.rl.networks import ActorCritic
from rgsd_agents.rl.precision import resolve_bf16
from rgsd_agents.rl.storage import RolloutStorage

Tensor = torch.Tensor


class MinibatchHooks(Protocol):
    """What a skill method does in each PPO minibatch step (``SkillMethod`` implements it)."""

    def policy_inputs(self, ac: Any, idx: Tensor, obs_n: Tensor) -> Tensor: ...

    def policy_loss(self, ac: Any, obs_n: Tensor) -> tuple[Tensor | None, dict[str, Tensor]]: ...

    def after_policy_step(self, idx: Tensor) -> dict[str, Tensor]: ...


BOUNDS_COEF = 10.0
"""Weight of the bounds loss (ASE's and CALM's code: bounds_loss_coef 10)."""


class PPO:
    """Clipped-surrogate PPO over an ``ActorCritic`` (see the module docstring)."""

    def __init__(self, actor_critic: ActorCritic, cfg: PPOConfig, dp: DataParallel | None = None):
        self.ac = actor_critic
        self.cfg = cfg
        self.dp = dp
        """Data-parallel rank: gradients averaged over the ranks, value statistics merged (None: one process)."""
        self.actor_params = actor_critic.actor_parameters()
        self.bf16 = resolve_bf16(cfg.bf16, self.actor_params[0].device)
        """Whether the update's hidden layers run under bf16 autocast (``ppo.bf16`` resolved for this device)."""
        self.critic_params = list(actor_critic.critic.parameters())
        # fused: one kernel per step, and the step counts stay with the parameters (the default keeps them on
        # the host and reads them with .item() every step)
        self.optimizer = torch.optim.Adam(
            [{"params": self.actor_params, "lr": cfg.actor_lr}, {"params": self.critic_params, "lr": cfg.critic_lr}],
            fused=True,
        )

    def update(
        self, storage: RolloutStorage, generator: torch.Generator, hooks: MinibatchHooks | None = None
    ) -> dict[str, float]:
        """``epochs`` passes of minibatch steps over one rollout (``hooks``: a method's part in each step);
        returns mean losses and diagnostics, and ``approx_kl_last_minibatch``, the approximate KL at the last step
        (about the KL the update reached; the mean over the steps, whose first is about 0, understates it)."""
        cfg, ac = self.cfg, self.ac
        ac.value_normalizer.update(storage.returns, None if self.dp is None else self.dp.batch_moments)
        obs, actions = storage.flat("obs"), storage.flat("actions")
        old_log_probs, advantages = storage.flat("log_probs"), storage.flat("advantages")
        returns_n = ac.value_normalizer.normalize(storage.flat("returns"))
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        sums: dict[str, Tensor] = {}
        steps = 0
        for _ in range(cfg.epochs):
            for idx in storage.minibatch_indices(cfg.minibatch_size, generator):
                mb_obs = obs[idx] if hooks is None else hooks.policy_inputs(self.ac, idx, obs[idx])
                stats = self._step(
                    mb_obs,
                    actions[idx],
                    old_log_probs[idx],
                    advantages[idx],
                    returns_n[idx],
                    hooks=hooks,
                )
                if hooks is not None:
                    stats.update(hooks.after_policy_step(idx))
                for k, v in stats.items():
                    sums[k] = sums[k] + v if k in sums else v
                steps += 1
        values, returns = storage.flat("values"), storage.flat("returns")
        sums["explained_variance"] = steps * (1.0 - (returns - values).var() / returns.var().clamp_min(1e-8))
        sums["action_std"] = steps * ac.log_std.detach().exp().mean()
        # float64 before the scaling, so the division below gives the step's value back exactly
        sums["approx_kl_last_minibatch"] = steps * stats["approx_kl"].to(torch.float64)
        # one read of the device for all statistics of the update
        totals = torch.stack([v.detach().to(torch.float64) for v in sums.values()]).tolist()
        return {k: v / steps for k, v in zip(sums, totals)}

    def _step(
        self,
        obs: Tensor,
        actions: Tensor,
        old_log_probs: Tensor,
        adv: Tensor,
        returns_n: Tensor,
        hooks: MinibatchHooks | None = None,
    ) -> dict[str, Tensor]:
        """One gradient step on one minibatch; returns detached loss terms."""
        cfg = self.cfg
        log_probs, entropy, values_n, means = self.ac.evaluate(obs, actions, self.bf16)
        log_ratio = log_probs - old_log_probs
        ratio = log_ratio.exp()
        lr64 = log_ratio.detach().double()  # tiny steps: (ratio - 1) - log ratio cancels to 0 in float32
        approx_kl = (torch.expm1(lr64) - lr64).mean().float()
        policy_loss = -torch.min(ratio * adv, ratio.clamp(1.0 - cfg.clip, 1.0 + cfg.clip) * adv).mean()
        value_loss = (values_n - returns_n).square().mean()
        excess = (means.abs() - cfg.bound).clamp_min(0)
        bounds_loss = excess.square().sum(-1).mean()
        loss = policy_loss + cfg.critic_coef * value_loss - cfg.entropy_coef * entropy + BOUNDS_COEF * bounds_loss
        extra: dict[str, Tensor] = {}
        if hooks is not None:
            term, extra = hooks.policy_loss(self.ac, obs)
            if term is not None:
                loss = loss + term
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.dp is not None:
            self.dp.average_gradients(self.actor_params + self.critic_params)
        clip = math.inf if cfg.max_grad_norm is None else cfg.max_grad_norm  # inf: measure the norms, clip nothing
        actor_norm = nn.utils.clip_grad_norm_(self.actor_params, clip)
        critic_norm = nn.utils.clip_grad_norm_(self.critic_params, clip)
        self.optimizer.step()
        with torch.no_grad():
            return {
                "policy_loss": policy_loss.detach(),
                "value_loss": value_loss.detach(),
                "entropy": entropy.detach(),
                "bounds_loss": bounds_loss.detach(),
                "approx_kl": approx_kl,
                "clip_fraction": ((ratio - 1.0).abs() > cfg.clip).float().mean(),
                "actor_grad_norm": actor_norm.detach(),
                "critic_grad_norm": critic_norm.detach(),
                **extra,
            }

    def state_dict(self) -> dict:
        """Optimiser state (the networks are saved by their owner)."""
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore the optimiser state."""
        self.optimizer.load_state_dict(state["optimizer"])
