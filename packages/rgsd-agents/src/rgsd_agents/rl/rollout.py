"""Collecting one PPO rollout from rgsd's torch env (``RGSDTorchEnv``, SameStep autoreset), for any trainer.

Observations are normalised with statistics frozen for the rollout (PPO's first
ratio is then exactly 1 in float32; with ``ppo.bf16`` the update's forward pass
runs in bf16 against the float32 one that sampled the actions, so it is 1 within
bf16 rounding) and the raw observations update them afterwards. A
truncated episode is bootstrapped with V(final_obs) folded into its last
reward; a terminated one is not. A trainer adds its own bookkeeping through
``after_step``, which may also return extra per-step tensors for the storage
(the RGSD trainer stores tasks, skills and encoder inputs), and may relabel the
stored rewards through ``relabel`` once the last step is in (a method whose
reward is computed from the stored transitions), before bootstrapping and GAE.

Everything stays on the devices: the env hands out tensors, and the one host
read per step is the env's (``StepExtras.done_host``), which also tells which
worlds to bootstrap. When the networks live on another device than the env
(a CPU simulator with a GPU learner) tensors cross through ``HostBridge``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rgsd_agents.rl.networks import ActorCritic
from rgsd_agents.rl.storage import RolloutStorage
from rgsd_envs.envs.torch_env import StepExtras
from rgsd_envs.runs.policy import Moments
from rgsd_envs.utils.device import HostBridge

Tensor = torch.Tensor
StepCallback = Callable[[int, Tensor, Tensor, Tensor, StepExtras], dict[str, Tensor] | None]
"""after_step(t, reward, terminated, truncated, extras) -> extra storage fields or None (all tensors)."""
Relabel = Callable[[RolloutStorage], None]
"""relabel(storage): rewrite ``storage.rewards`` from the stored transitions (before bootstrap and GAE)."""


@dataclass
class RolloutTimes:
    """Wall time of a rollout, split into the env and the rest (policy, storage, bookkeeping)."""

    env_seconds: float
    policy_seconds: float


def host_index(ids: np.ndarray, device: torch.device) -> Tensor:
    """Host indices as an index tensor on ``device`` (an upload: never waits for the device)."""
    return torch.from_numpy(np.ascontiguousarray(ids, dtype=np.int64)).to(device, non_blocking=True)


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
    relabel: Relabel | None = None,
) -> tuple[Tensor, RolloutTimes]:
    """Fill ``storage`` with ``storage.horizon`` steps of ``env`` (an ``RGSDTorchEnv``) from ``obs`` (on the
    networks' device); returns the next observation and timings. ``generator`` draws the action noise on that
    device; ``moments`` merges the observation statistics of all ranks of a data-parallel run."""
    norm = ac.obs_normalizer
    device = norm.mean.device
    bridge = bridge or HostBridge(device)
    mean = norm.mean.to(torch.float32)
    inv_std = (norm.var + norm.eps).rsqrt().to(torch.float32)
    clip = norm.clip

    def normalize(x: Tensor) -> Tensor:
        return ((x - mean) * inv_std).clamp_(-clip, clip)

    storage.clear()
    boot_steps: list[np.ndarray] = []
    boot_ids: list[np.ndarray] = []
    boot_obs: list[Tensor] = []
    raw_obs: list[Tensor] = []
    t_env = t_policy = 0.0
    for t in range(storage.horizon):
        t0 = time.perf_counter()
        obs_n = normalize(obs)
        actions, log_probs, values = ac.act(obs_n, generator)
        t1 = time.perf_counter()
        next_obs, reward, term, trunc, extras = env.step(actions.to(env.device))
        t2 = time.perf_counter()
        extra_fields = after_step(t, reward, term, trunc, extras) if after_step is not None else None
        storage.add(
            obs_n,
            actions,
            log_probs,
            values,
            bridge.to_device(reward, "reward"),
            bridge.to_device(extras.done, "done"),
            **(extra_fields or {}),
        )
        ids = np.flatnonzero(extras.time_outs_host)
        if ids.size:
            boot_steps.append(np.full(ids.shape, t))
            boot_ids.append(ids)
            boot_obs.append(
                bridge.to_device(extras.final_obs.index_select(0, host_index(ids, env.device)), "final_obs")
            )
        raw_obs.append(obs)
        obs = bridge.to_device(next_obs)
        t_policy += t1 - t0 + time.perf_counter() - t2
        t_env += t2 - t1
    t0 = time.perf_counter()
    if relabel is not None:
        relabel(storage)
    norm.update(torch.cat(raw_obs), moments)  # takes effect at the next rollout
    with torch.no_grad():
        last_values = ac.value(normalize(obs))
        if boot_obs:
            final_values = ac.value(normalize(torch.cat(boot_obs)))
            storage.add_bootstrap(
                host_index(np.concatenate(boot_steps), storage.device),
                host_index(np.concatenate(boot_ids), storage.device),
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

    def collect(
        self, gamma: float, gae_lambda: float, after_step: StepCallback, relabel: Relabel | None = None
    ) -> RolloutTimes:
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
            relabel,
        )
        return times
