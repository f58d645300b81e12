"""On-policy rollout storage (T steps x N worlds) with GAE(lambda).

Truncation is handled the way rsl_rl handles ``time_outs``: when an episode is
cut at the clip's end (not a failure), the value of the state it reached,
V(final_obs), is folded into that step's reward as ``gamma * V(final_obs)``
and the step is then treated as the episode's end. A termination (fall,
deviation) gets no bootstrap. GAE then never looks across an episode boundary.

Besides PPO's tensors it keeps what the discovery encoder is trained on: the
skill z and task c of each transition, and one encoder input per sample:
s' for discovery samples (the -log q(z|s') term) and s for imitation samples
(the KL term), which halves the memory of keeping both.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import torch

Tensor = torch.Tensor


def minibatch_count(samples: int, minibatch_size: int) -> int:
    """Minibatches a rollout of ``samples`` is split into (``RolloutStorage.minibatch_indices``): at least one."""
    return max(1, samples // max(1, minibatch_size))


class RolloutStorage:
    """Fixed-size buffer of one rollout; tensors are (T, N, ...)."""

    def __init__(
        self,
        horizon: int,
        num_envs: int,
        obs_dim: int,
        act_dim: int,
        skill_dim: int,
        encoder_dim: int,
        device: str | torch.device = "cpu",
    ):
        t, n = horizon, num_envs
        self.horizon, self.num_envs = t, n
        self.device = torch.device(device)
        zeros = functools.partial(torch.zeros, device=self.device)
        self.obs = zeros(t, n, obs_dim)
        """Normalised observations (the statistics are frozen during a rollout)."""
        self.actions = zeros(t, n, act_dim)
        self.log_probs = zeros(t, n)
        self.values = zeros(t, n)
        self.rewards = zeros(t, n)
        self.dones = zeros(t, n)
        """1 where the episode ended at this step (terminated or truncated)."""
        self.tasks = zeros(t, n)
        """Task indicator c of the transition (1 imitation, 0 discovery)."""
        self.skills = zeros(t, n, skill_dim)
        self.encoder_inputs = zeros(t, n, encoder_dim)
        """s' (discovery samples) or s (imitation samples), 5 stacked frames."""
        self.advantages = zeros(t, n)
        self.returns = zeros(t, n)
        self.step = 0

    def add(
        self,
        obs_n: Tensor,
        actions: Tensor,
        log_probs: Tensor,
        values: Tensor,
        rewards: Tensor,
        dones: Tensor,
        tasks: Tensor | None = None,
        skills: Tensor | None = None,
        encoder_inputs: Tensor | None = None,
        next_encoder_inputs: Tensor | None = None,
    ) -> None:
        """Store one step of all worlds (s for imitation rows, s' for discovery rows of the encoder inputs).

        The task, skill and encoder fields are RGSD's; a storage built with
        ``skill_dim = encoder_dim = 0`` (other trainers) leaves them out.
        """
        if self.step >= self.horizon:
            raise RuntimeError(f"rollout storage is full ({self.horizon} steps); call clear() first")
        t = self.step
        self.obs[t].copy_(obs_n)
        self.actions[t].copy_(actions)
        self.log_probs[t].copy_(log_probs)
        self.values[t].copy_(values)
        self.rewards[t].copy_(rewards)
        self.dones[t].copy_(dones)
        if tasks is not None:
            self.tasks[t].copy_(tasks)
            self.skills[t].copy_(skills)
            # pick s or s' where the env's tensors live, so only one (N, 1795) block crosses to the device
            imitation = tasks.to(encoder_inputs.device).unsqueeze(-1) > 0.5
            if encoder_inputs.device == self.device:
                torch.where(imitation, encoder_inputs, next_encoder_inputs, out=self.encoder_inputs[t])
            else:
                self.encoder_inputs[t].copy_(torch.where(imitation, encoder_inputs, next_encoder_inputs))
        self.step += 1

    def add_bootstrap(self, steps: Tensor, env_ids: Tensor, final_values: Tensor, gamma: float) -> None:
        """Fold gamma * V(final_obs) into the rewards of truncated (step, world) pairs."""
        idx = (steps.to(self.device), env_ids.to(self.device))
        self.rewards.index_put_(idx, gamma * final_values.to(self.device), accumulate=True)

    def clear(self) -> None:
        """Start a new rollout (tensors are overwritten, not freed)."""
        self.step = 0

    @torch.no_grad()
    def compute_returns(self, last_values: Tensor, gamma: float, lam: float) -> None:
        """GAE(lambda) advantages and returns (advantage + value), not crossing episode ends."""
        if self.step != self.horizon:
            raise RuntimeError(f"rollout holds {self.step} of {self.horizon} steps; compute returns on a full rollout")
        gae = torch.zeros_like(last_values)
        next_values = last_values
        for t in reversed(range(self.horizon)):
            not_done = 1.0 - self.dones[t]
            delta = self.rewards[t] + gamma * next_values * not_done - self.values[t]
            gae = delta + gamma * lam * not_done * gae
            self.advantages[t] = gae
            next_values = self.values[t]
        self.returns.copy_(self.advantages + self.values)

    def flat(self, name: str) -> Tensor:
        """A stored tensor with time and worlds merged: (T * N, ...)."""
        x = getattr(self, name)
        return x.reshape(-1, *x.shape[2:])

    def minibatch_indices(self, minibatch_size: int, generator: torch.Generator) -> Iterator[Tensor]:
        """Random disjoint index sets covering the rollout, each of about ``minibatch_size`` samples.

        The permutation is drawn on the generator's device (the CPU for the trainers: the same minibatches on
        every device) and moved to the storage's device."""
        n = self.horizon * self.num_envs
        count = minibatch_count(n, minibatch_size)
        perm = torch.randperm(n, generator=generator, device=generator.device).to(self.device)
        yield from perm.chunk(count)
