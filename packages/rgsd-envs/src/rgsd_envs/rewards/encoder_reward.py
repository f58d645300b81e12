"""The encoder reward r = C + kappa * mu(s')^T z (docs/environments.md): its batched core and the Gymnasium wrappers.

``EncoderRewardCore`` is the reward of ``RGSDTorchEnv`` (``encoder_reward=True``); the
wrappers switch it on in a Gymnasium env's torch env and add it to the bare reward. It keeps each world's last 5 frames, so ``s' = (o_{t-3}, ..., o_{t+1})``,
and scores the skill ``z`` of the transition with the frozen encoder in
imitation episodes and the trainable one in discovery episodes. At an episode
start the history is filled from the reference clip before the start frame.
It exposes what a trainer of the discovery encoder needs
(``encoder_inputs``, ``next_encoder_inputs``, ``skills``, ``tasks``) and
``set_encoder`` replaces the trainable encoder at run time. Because the reward
lives here, any RL library training on the wrapped env optimises RGSD's
objective.
"""

from __future__ import annotations

import math
import numbers
import os
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import VectorEnv, VectorWrapper

from rgsd_envs.envs.core import IMITATION, RGSDCore, as_host_ids
from rgsd_envs.envs.observations import HUMANOID_LAYOUT
from rgsd_envs.rewards.encoders import EncoderLike, encoder_on, trainable_copy
from rgsd_envs.utils.threads import env_side

Tensor = torch.Tensor


def reward_number(name: str, value: Any, positive: bool = False) -> float:
    """``value`` of the reward's setting ``name`` as a float, or a ValueError naming it unless it is a finite number
    (> 0 with ``positive``, the rule of ``TrainConfig.reward_kappa`` too): a negative kappa inverts the reward, a
    zero one makes it constant, a NaN or inf one makes every reward NaN."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be > 0 (the reward's scale), got {value!r}")
    return float(value)


class EncoderRewardCore:
    """Batched history and reward over N worlds (the torch env's reward; both wrappers read it).

    Which worlds are imitation worlds is known on the host (the host drew the tasks), so the two encoders
    score their worlds through index tensors built on the host: no device read, no boolean-mask gather.
    """

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
        kappa_name = "reward_kappa" if kappa is not None else "the encoder's kappa (reward_kappa's default)"
        self.kappa = reward_number(kappa_name, core.kappa if kappa is None else kappa, positive=True)
        self.constant = reward_number("reward_constant", self.kappa if constant is None else constant)
        n = core.num_envs
        self.layout = getattr(core, "layout", HUMANOID_LAYOUT)
        """The env's observation layout (the history's frames and their size)."""
        self.history = torch.zeros(n, self.layout.history_len, self.layout.frame_dim, device=core.device)
        self.skills = torch.zeros(n, core.skill.shape[1], device=core.device)
        """(N, 16) skill of each world's current episode."""
        self.tasks = torch.zeros(n, dtype=torch.long, device=core.device)
        """(N,) task indicator of each world's current episode (1 imitation)."""
        self.tasks_host = np.zeros(n, dtype=np.int64)
        """(N,) host copy of ``tasks``."""
        self.encoder_inputs = self.history.flatten(1)
        """(N, 1795) s of the last transition (the history before the step)."""
        self.next_encoder_inputs = self.history.flatten(1)
        """(N, 1795) s' of the last transition (before any reset)."""
        self.last_skills = self.skills.clone()
        self.last_tasks = self.tasks.clone()

    def start(self, env_ids: Any) -> None:
        """Fill the history of worlds that began an episode (host indices or a tensor): reference frames, then o_0."""
        ids = as_host_ids(env_ids)
        if ids.size == 0:
            return
        idx = self.core.device_ids(ids)
        ref = self.core.reference_history(idx)
        self.history[idx] = torch.cat((ref, self.core.features[idx].unsqueeze(1)), dim=1)
        self.skills[idx] = self.core.skill[idx]
        self.tasks[idx] = self.core.task[idx]
        self.tasks_host[ids] = self.core.task_host[ids]

    def start_masked(self, done: Tensor) -> None:
        """``start`` for the worlds flagged in ``done`` (N,) bool, by masked ops on the device (no host indices:
        ``RGSDCore.restart_masked``); ``finish_masked_start`` brings the host copy of their tasks along."""
        fresh = torch.cat((self.core.reference_history(), self.core.features.unsqueeze(1)), dim=1)
        self.history = torch.where(done[:, None, None], fresh, self.history)
        self.skills = torch.where(done[:, None], self.core.skill, self.skills)
        self.tasks = torch.where(done, self.core.task, self.tasks)

    def finish_masked_start(self, ids: np.ndarray) -> None:
        """Host side of ``start_masked`` for the worlds ``ids`` that started an episode."""
        self.tasks_host[ids] = self.core.task_host[ids]

    def set_skills(self, env_ids: np.ndarray, skills: Tensor) -> None:
        """Score the running episodes of worlds ``env_ids`` (host indices) with new skills from now on."""
        self.skills[self.core.device_ids(env_ids)] = skills

    @torch.no_grad()
    def transition(self, next_features: Tensor, stepped: np.ndarray | None = None) -> Tensor:
        """Reward (N,) of the transition into ``next_features`` for the worlds that stepped (host mask; None:
        all)."""
        self.encoder_inputs = self.history.flatten(1).clone()
        nxt = torch.cat((self.history[:, 1:], next_features.unsqueeze(1)), dim=1)
        self.next_encoder_inputs = nxt.flatten(1)
        self.last_skills, self.last_tasks = self.skills.clone(), self.tasks.clone()
        reward = torch.zeros(nxt.shape[0], device=nxt.device)
        moved = np.ones(nxt.shape[0], dtype=bool) if stepped is None else stepped
        imit = moved & (self.tasks_host == IMITATION)
        disc = moved & (self.tasks_host != IMITATION)
        for mask, encoder in ((imit, self.frozen), (disc, self.trainable)):
            ids = np.flatnonzero(mask)
            if ids.size:
                idx = self.core.device_ids(ids)
                mu = encoder(self.next_encoder_inputs[idx])
                reward[idx] = self.constant + self.kappa * (mu * self.skills[idx]).sum(-1)
        if stepped is None:
            self.history = nxt.clone()  # next_encoder_inputs must not see the restarts' in-place writes
        else:
            keep = self.core.device_ids(np.flatnonzero(stepped))
            self.history = self.history.clone()
            self.history[keep] = nxt[keep]
        return reward

    def state_dict(self) -> dict[str, Any]:
        """Histories and current skills/tasks (the encoders belong to their owners)."""
        names = ("history", "skills", "tasks", "encoder_inputs", "next_encoder_inputs", "last_skills", "last_tasks")
        return {k: getattr(self, k).cpu().clone() for k in names}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue exactly from ``state_dict``."""
        for k, v in state.items():
            setattr(self, k, torch.as_tensor(v).to(self.core.device).clone())
        self.tasks_host = self.tasks.cpu().numpy().astype(np.int64).copy()

    def set_encoder(self, encoder: EncoderLike | str | os.PathLike) -> None:
        """Replace the trainable (discovery) encoder: an encoder object or file (a module is moved to the env's
        device)."""
        self.trainable = encoder_on(
            encoder, self.core.device, "set_encoder's encoder", self.layout.encoder_input_dim, self.layout.skill_dim
        )


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
    """Adds the encoder reward to the native ``RGSDVectorEnv`` (see module docstring).

    The reward is computed by the env's ``RGSDTorchEnv`` (``info["encoder_reward"]``); the wrapper adds
    it to the bare env's reward of 0.
    """

    def __init__(self, env: VectorEnv, kappa: float | None = None, constant: float | None = None):
        super().__init__(env)
        base = env.unwrapped
        if not hasattr(base, "torch_env"):
            raise TypeError(
                "EncoderRewardVecWrapper wraps rgsd's native RGSDVectorEnv (gymnasium.make_vec('RGSD-SMPL-v0'))"
            )
        self.reward_core = base.torch_env.enable_encoder_reward(kappa, constant)

    @env_side
    def state_dict(self) -> dict[str, Any]:
        """The wrapped env's state and the reward histories (for exact resumption)."""
        return {"env": self.env.unwrapped.state_dict(), "reward": self.reward_core.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue exactly from ``state_dict``."""
        self.env.unwrapped.load_state_dict(state["env"])
        self.reward_core.load_state_dict(state["reward"])

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step and add r = C + kappa mu(s')^T z."""
        obs, reward, term, trunc, info = self.env.step(actions)
        return obs, reward + step_encoder_reward(info), term, trunc, info


def step_encoder_reward(info: dict[str, Any]) -> np.ndarray:
    """(N,) float64 encoder reward of a vector step from its info: a restarted world reports its reset's info (no
    reward) and its step's in ``final_info``; a world that made no transition (NextStep's reset step) gets 0."""
    reward = np.where(info["_encoder_reward"], info["encoder_reward"], 0.0)
    final = info.get("final_info", {})
    if "encoder_reward" in final:
        reward = np.where(final["_encoder_reward"], final["encoder_reward"], reward)
    return reward.astype(np.float64)


class EncoderRewardWrapper(_EncoderAccess, gym.Wrapper):
    """Adds the encoder reward to a single ``RGSDEnv`` (see module docstring)."""

    def __init__(self, env: gym.Env, kappa: float | None = None, constant: float | None = None):
        super().__init__(env)
        base = env.unwrapped
        if not hasattr(base, "torch_env"):
            raise TypeError("EncoderRewardWrapper wraps rgsd's RGSDEnv (gymnasium.make('RGSD-SMPL-v0'))")
        self.reward_core = base.torch_env.enable_encoder_reward(kappa, constant)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step and add r = C + kappa mu(s')^T z."""
        obs, reward, term, trunc, info = self.env.step(action)
        return obs, float(reward) + float(info["encoder_reward"]), term, trunc, info
