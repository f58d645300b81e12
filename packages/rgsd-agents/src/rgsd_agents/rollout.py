"""Collecting one PPO rollout from a Gymnasium vector env (SameStep autoreset), for any trainer.

Observations are normalised with statistics frozen for the rollout (PPO's first
ratio is then exactly 1) and the raw observations update them afterwards. A
truncated episode is bootstrapped with V(final_obs) folded into its last
reward; a terminated one is not. A trainer adds its own bookkeeping through
``after_step``, which may also return extra per-step tensors for the storage
(the RGSD trainer stores tasks, skills and encoder inputs).

The networks and the storage may live on a GPU while the env returns numpy
(the mujoco backend): observations, rewards and done flags cross to the
networks' device and actions back through ``HostBridge`` (pinned buffers on a
GPU, no copies on the CPU).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rgsd_agents.networks import ActorCritic
from rgsd_agents.storage import RolloutStorage
from rgsd_envs.runs.policy import Moments
from rgsd_envs.utils.device import HostBridge

Tensor = torch.Tensor
StepCallback = Callable[[int, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]], dict[str, Tensor] | None]
"""after_step(t, reward, terminated, truncated, info) -> extra storage fields or None."""


@dataclass
class RolloutTimes:
    """Wall time of a rollout, split into the env and the rest (policy, storage, bookkeeping)."""

    env_seconds: float
    policy_seconds: float


def collect_rollout(
    env: Any,
    ac: ActorCritic,
    storage: RolloutStorage,
    obs: Tensor,
    generator: torch.Generator,
    gamma: float,
    gae_lambda: float,
    after_step: StepCallback | None = None,
    bridge: HostBridge | None = None,
    moments: Moments | None = None,
) -> tuple[Tensor, RolloutTimes]:
    """Fill ``storage`` with ``storage.horizon`` steps from ``obs`` (on the networks' device); returns the next
    observation and timings. ``generator`` draws the action noise on that device; ``moments`` merges the
    observation statistics of all ranks of a data-parallel run."""
    norm = ac.obs_normalizer
    bridge = bridge or HostBridge(norm.mean.device)
    mean = norm.mean.to(torch.float32)
    inv_std = (norm.var + norm.eps).rsqrt().to(torch.float32)
    clip = norm.clip

    def normalize(x: Tensor) -> Tensor:
        return ((x - mean) * inv_std).clamp_(-clip, clip)

    storage.clear()
    boot_steps: list[np.ndarray] = []
    boot_ids: list[np.ndarray] = []
    boot_obs: list[np.ndarray] = []
    raw_obs: list[Tensor] = []
    t_env = t_policy = 0.0
    for t in range(storage.horizon):
        t0 = time.perf_counter()
        obs_n = normalize(obs)
        actions, log_probs, values = ac.act(obs_n, generator)
        t1 = time.perf_counter()
        next_obs, reward, term, trunc, info = env.step(bridge.to_host(actions))
        t2 = time.perf_counter()
        done = term | trunc
        extras = after_step(t, reward, term, trunc, info) if after_step is not None else None
        storage.add(
            obs_n,
            actions,
            log_probs,
            values,
            bridge.to_device(reward, "reward"),
            bridge.to_device(done, "done"),
            **(extras or {}),
        )
        if trunc.any():
            ids = np.flatnonzero(trunc)
            boot_steps.append(np.full(ids.shape, t))
            boot_ids.append(ids)
            boot_obs.append(np.stack(info["final_obs"][ids]))
        raw_obs.append(obs)
        obs = bridge.to_device(next_obs)
        t_policy += t1 - t0 + time.perf_counter() - t2
        t_env += t2 - t1
    t0 = time.perf_counter()
    norm.update(torch.cat(raw_obs), moments)  # takes effect at the next rollout
    with torch.no_grad():
        last_values = ac.value(normalize(obs))
        if boot_obs:
            final_values = ac.value(normalize(bridge.to_device(np.concatenate(boot_obs), "final_obs")))
            storage.add_bootstrap(
                torch.from_numpy(np.concatenate(boot_steps)),
                torch.from_numpy(np.concatenate(boot_ids)),
                final_values,
                gamma,
            )
    storage.compute_returns(last_values, gamma, gae_lambda)
    t_policy += time.perf_counter() - t0
    return obs.clone(), RolloutTimes(t_env, t_policy)


class RolloutCollector:
    """Mixin of a PPO trainer holding what ``collect_rollout`` reads; ``collect`` runs it from ``self.obs``."""

    env: Any
    ac: ActorCritic
    storage: RolloutStorage
    obs: Tensor
    sample_gen: torch.Generator
    """Draws the action noise (on the networks' device)."""
    bridge: HostBridge
    moments: Moments | None = None
    """Merges observation statistics over the ranks of a data-parallel run (None: a single process)."""

    def collect(self, gamma: float, gae_lambda: float, after_step: StepCallback) -> RolloutTimes:
        """One rollout into ``self.storage`` with GAE(gamma, lambda); advances ``self.obs``, returns the timings."""
        self.obs, times = collect_rollout(
            self.env,
            self.ac,
            self.storage,
            self.obs,
            self.sample_gen,
            gamma,
            gae_lambda,
            after_step,
            self.bridge,
            self.moments,
        )
        return times
