"""Factories behind the registered ids (``gymnasium.make`` / ``gymnasium.make_vec``)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium.vector import VectorEnv

from rgsd_envs.envs.smpl_v0 import RGSDEnv, RGSDVectorEnv
from rgsd_envs.rewards.encoder_reward import EncoderRewardVecWrapper, EncoderRewardWrapper

ENV_ID = "RGSD-SMPL-v0"
GOAL_ENV_ID = "RGSD-SMPL-GoalReaching-v0"


def make_env(
    encoder_reward: bool = True, reward_kappa: float | None = None, reward_constant: float | None = None, **kwargs: Any
) -> gym.Env:
    """One world with the encoder reward (``encoder_reward=False``: the bare env, reward 0)."""
    env = RGSDEnv(**kwargs)
    return EncoderRewardWrapper(env, reward_kappa, reward_constant) if encoder_reward else env


def make_vec_env(
    num_envs: int = 64,
    encoder_reward: bool = True,
    reward_kappa: float | None = None,
    reward_constant: float | None = None,
    **kwargs: Any,
) -> VectorEnv:
    """The native vector env with the encoder reward (``encoder_reward=False``: bare, reward 0)."""
    if kwargs.get("render_mode") is not None:
        raise ValueError(
            f"the native vector env of {ENV_ID} does not render (render_mode={kwargs['render_mode']!r}); for frames "
            f"use gymnasium.make_vec({ENV_ID!r}, num_envs=..., vectorization_mode='sync', render_mode='rgb_array')"
        )
    kwargs.pop("render_mode", None)
    env = RGSDVectorEnv(num_envs, **kwargs)
    return EncoderRewardVecWrapper(env, reward_kappa, reward_constant) if encoder_reward else env


def register_envs() -> None:
    """Register RGSD-SMPL-v0 and RGSD-SMPL-GoalReaching-v0 (idempotent)."""
    if GOAL_ENV_ID not in gym.registry:
        gym.register(
            id=GOAL_ENV_ID,
            entry_point="rgsd_envs.envs.goal_reaching_v0:GoalReachingEnv",
            vector_entry_point="rgsd_envs.envs.goal_reaching_v0:GoalReachingVectorEnv",
        )
    if ENV_ID not in gym.registry:
        gym.register(
            id=ENV_ID,
            entry_point="rgsd_envs.envs.registration:make_env",
            vector_entry_point="rgsd_envs.envs.registration:make_vec_env",
            disable_env_checker=False,
        )
