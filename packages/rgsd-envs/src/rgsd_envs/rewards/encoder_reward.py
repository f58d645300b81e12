"""The encoder reward r = C + kappa * mu(s')^T z (SPEC §5), as Gymnasium wrappers.

The wrapper keeps each world's last 5 frames, so ``s' = (o_{t-3}, ..., o_{t+1})``,
and scores the skill ``z`` of the transition with the frozen encoder in
imitation episodes and the trainable one in discovery episodes. At an episode
start the history is filled from the reference clip before the start frame.
It exposes what a trainer of the discovery encoder needs
(``encoder_inputs``, ``next_encoder_inputs``, ``skills``, ``tasks``) and
``set_encoder`` replaces the trainable encoder at run time. With ``EnvConfig.reward = "tracking"`` imitation episodes are scored by the
DeepMimic-style tracking reward the core computes (``rewards.tracking``) instead
of the frozen encoder; discovery episodes keep the encoder. Because the reward
lives here, any RL library training on the wrapped env optimises RGSD's
objective.
"""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import VectorEnv, VectorWrapper

from rgsd_envs.envs.core import IMITATION, RGSDCore
from rgsd_envs.envs.observations import FRAME_DIM, HISTORY_LEN
from rgsd_envs.rewards.encoders import EncoderLike, check_encoder, load_encoder, trainable_copy
from rgsd_envs.utils.threads import env_side

Tensor = torch.Tensor


class EncoderRewardCore:
    """Batched history and reward over N worlds (shared by both wrappers)."""

    def __init__(
        self,
        core: RGSDCore,
        kappa: float | None = None,
        constant: float | None = None,
        trainable: EncoderLike | None = None,
    ):
        self.core = core
        self.frozen = core.frozen_encoder
        self.trainable = trainable if trainable is not None else trainable_copy(self.frozen)
        self.kappa = float(core.kappa if kappa is None else kappa)
        self.constant = float(self.kappa if constant is None else constant)
        n = core.num_envs
        self.history = torch.zeros(n, HISTORY_LEN, FRAME_DIM, device=core.device)
        self.skills = torch.zeros(n, core.skill.shape[1], device=core.device)
        """(N, 16) skill of each world's current episode."""
        self.tasks = torch.zeros(n, dtype=torch.long, device=core.device)
        """(N,) task indicator of each world's current episode (1 imitation)."""
        self.encoder_inputs = self.history.flatten(1)
        """(N, 1795) s of the last transition (the history before the step)."""
        self.next_encoder_inputs = self.history.flatten(1)
        """(N, 1795) s' of the last transition (before any reset)."""
        self.last_skills = self.skills.clone()
        self.last_tasks = self.tasks.clone()

    def start(self, env_ids: Tensor) -> None:
        """Fill the history of worlds that began an episode: reference frames, then o_0."""
        if env_ids.numel() == 0:
            return
        ref = self.core.reference_history(env_ids)
        self.history[env_ids] = torch.cat((ref, self.core.features[env_ids].unsqueeze(1)), dim=1)
        self.skills[env_ids] = self.core.skill[env_ids]
        self.tasks[env_ids] = self.core.task[env_ids]

    @torch.no_grad()
    def transition(self, next_features: Tensor, stepped: Tensor) -> Tensor:
        """Reward (N,) of the transition into ``next_features`` for worlds that stepped."""
        self.encoder_inputs = self.history.flatten(1).clone()
        nxt = torch.cat((self.history[:, 1:], next_features.unsqueeze(1)), dim=1)
        self.next_encoder_inputs = nxt.flatten(1)
        self.last_skills, self.last_tasks = self.skills.clone(), self.tasks.clone()
        reward = torch.zeros(nxt.shape[0], device=nxt.device)
        imit = stepped & (self.tasks == IMITATION)
        disc = stepped & ~(self.tasks == IMITATION)
        if self.core.cfg.reward == "tracking":  # control arm: imitation tracks the clip (rewards.tracking)
            reward[imit] = self.core.tracking_reward[imit]
            imit = torch.zeros_like(imit)
        for mask, encoder in ((imit, self.frozen), (disc, self.trainable)):
            if mask.any():
                mu = encoder(self.next_encoder_inputs[mask])
                reward[mask] = self.constant + self.kappa * (mu * self.skills[mask]).sum(-1)
        self.history = torch.where(stepped.view(-1, 1, 1), nxt, self.history)
        return reward

    def state_dict(self) -> dict[str, Any]:
        """Histories and current skills/tasks (the encoders belong to their owners)."""
        names = ("history", "skills", "tasks", "encoder_inputs", "next_encoder_inputs", "last_skills", "last_tasks")
        return {k: getattr(self, k).cpu().clone() for k in names}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue exactly from ``state_dict``."""
        for k, v in state.items():
            setattr(self, k, torch.as_tensor(v).to(self.core.device).clone())

    def set_encoder(self, encoder: EncoderLike | str | os.PathLike) -> None:
        """Replace the trainable (discovery) encoder: an encoder object or file."""
        enc = load_encoder(encoder) if isinstance(encoder, (str, os.PathLike)) else encoder
        check_encoder(enc, "set_encoder's encoder")
        self.trainable = enc


class _EncoderAccess:
    """What both wrappers offer a trainer: the trainable encoder and its replacement."""

    reward_core: EncoderRewardCore

    @property
    def encoder(self) -> EncoderLike:
        """The trainable (discovery) encoder."""
        return self.reward_core.trainable

    def set_encoder(self, encoder: EncoderLike | str | os.PathLike) -> None:
        """Replace the trainable (discovery) encoder: an encoder object or file."""
        self.reward_core.set_encoder(encoder)


class EncoderRewardVecWrapper(_EncoderAccess, VectorWrapper):
    """Adds the encoder reward to the native ``RGSDVectorEnv`` (see module docstring)."""

    def __init__(self, env: VectorEnv, kappa: float | None = None, constant: float | None = None):
        super().__init__(env)
        base = env.unwrapped
        if not hasattr(base, "core") or not hasattr(base, "last_transition_features"):
            raise TypeError(
                "EncoderRewardVecWrapper wraps rgsd's native RGSDVectorEnv (gymnasium.make_vec('RGSD-SMPL-v0'))"
            )
        self.reward_core = EncoderRewardCore(base.core, kappa, constant)

    @env_side
    def state_dict(self) -> dict[str, Any]:
        """The wrapped env's state and the reward histories (for exact resumption)."""
        return {"env": self.env.unwrapped.state_dict(), "reward": self.reward_core.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue exactly from ``state_dict``."""
        self.env.unwrapped.load_state_dict(state["env"])
        self.reward_core.load_state_dict(state["reward"])

    @env_side
    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset and fill the histories of the reset worlds from the reference."""
        obs, info = self.env.reset(seed=seed, options=options)
        base = self.env.unwrapped
        self.reward_core.start(torch.nonzero(base.last_started.to(base.core.device)).flatten())
        return obs, info

    @env_side
    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step and add r = C + kappa mu(s')^T z."""
        obs, reward, term, trunc, info = self.env.step(actions)
        base = self.env.unwrapped
        dev = base.core.device
        r = self.reward_core.transition(base.last_transition_features, base.last_stepped.to(dev))
        self.reward_core.start(torch.nonzero(base.last_started.to(dev)).flatten())
        info["encoder_reward"] = r.cpu().numpy()
        return obs, reward + info["encoder_reward"].astype(np.float64), term, trunc, info


class EncoderRewardWrapper(_EncoderAccess, gym.Wrapper):
    """Adds the encoder reward to a single ``RGSDEnv`` (see module docstring)."""

    def __init__(self, env: gym.Env, kappa: float | None = None, constant: float | None = None):
        super().__init__(env)
        base = env.unwrapped
        if not hasattr(base, "core"):
            raise TypeError("EncoderRewardWrapper wraps rgsd's RGSDEnv (gymnasium.make('RGSD-SMPL-v0'))")
        self.reward_core = EncoderRewardCore(base.core, kappa, constant)
        self._all = torch.ones(1, dtype=torch.bool, device=base.core.device)

    @env_side
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset and fill the history from the reference."""
        obs, info = self.env.reset(seed=seed, options=options)
        self.reward_core.start(torch.zeros(1, dtype=torch.long, device=self._all.device))
        return obs, info

    @env_side
    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step and add r = C + kappa mu(s')^T z."""
        obs, reward, term, trunc, info = self.env.step(action)
        core = self.env.unwrapped.core
        r = float(self.reward_core.transition(core.features, self._all)[0])
        info["encoder_reward"] = r
        return obs, float(reward) + r, term, trunc, info
