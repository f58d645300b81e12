"""stable-baselines3 adapter: RGSD-SMPL-v0's native vector env as an SB3 ``VecEnv``.

    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor
    from rgsd_envs.compat.sb3 import make_sb3_vec_env

    venv = VecMonitor(make_sb3_vec_env(num_envs=16))   # encoder reward included; VecMonitor: episode statistics
    PPO("MlpPolicy", venv).learn(100_000)

SB3's contract is a list of per-world info dicts; this adapter builds them
(``terminal_observation`` and ``TimeLimit.truncated`` for finished episodes, so
SB3 bootstraps the value on truncation) and otherwise passes the batched arrays
through. Skill sampling and the encoder reward stay in the environment.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

try:
    from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError('rgsd_envs.compat.sb3 needs stable-baselines3: pip install "rgsd-envs[sb3]"') from err

import rgsd_envs  # noqa: F401  (registers the ids)

INFO_KEYS = ("task", "clip_id", "cartesian_error", "encoder_reward")
"""Per-world scalars copied into SB3's info dicts."""


class RGSDSb3VecEnv(VecEnv):
    """An SB3 VecEnv over a Gymnasium ``VectorEnv`` in SameStep autoreset mode."""

    def __init__(self, env: VectorEnv):
        if env.metadata.get("autoreset_mode") != AutoresetMode.SAME_STEP:
            raise ValueError("the SB3 adapter needs a vector env with autoreset_mode SameStep (the default)")
        self.env = env
        self._actions: np.ndarray | None = None
        super().__init__(env.num_envs, env.single_observation_space, env.single_action_space)

    def reset(self) -> Any:
        """Reset every world (using seeds given to ``seed``); returns the observations."""
        seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
        obs, info = self.env.reset(seed=seeds)
        self._reset_seeds()
        self.reset_infos = [_row(info, i) for i in range(self.num_envs)]
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        """Remember the actions for step_wait."""
        self._actions = np.asarray(actions, dtype=np.float32)

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Step all worlds; finished ones restart at once (SameStep)."""
        obs, reward, term, trunc, info = self.env.step(self._actions)
        done = term | trunc
        infos = [_row(info, i) for i in range(self.num_envs)]
        final_obs = info.get("final_obs")
        for i in np.flatnonzero(done):
            infos[i]["terminal_observation"] = final_obs[i]
            infos[i]["TimeLimit.truncated"] = bool(trunc[i] and not term[i])
        return obs, reward.astype(np.float32), done, infos

    def close(self) -> None:
        """Close the vector env."""
        self.env.close()

    def _target(self) -> Any:
        return self.env.unwrapped

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """An attribute of the (shared) environment, once per selected world."""
        value = getattr(self.env, attr_name) if hasattr(self.env, attr_name) else getattr(self._target(), attr_name)
        return [value for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set an attribute of the environment (shared by all worlds)."""
        setattr(self._target(), attr_name, value)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        """Call a method of the environment once; its result is repeated per selected world."""
        target = self.env if hasattr(self.env, method_name) else self._target()
        result = getattr(target, method_name)(*method_args, **method_kwargs)
        return [result for _ in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        """Worlds are not individual gym.Env objects, so none is wrapped."""
        return [False for _ in self._get_indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        """Rendering per world is not supported by the batched env."""
        return [None for _ in range(self.num_envs)]


def _row(info: dict[str, Any], i: int) -> dict[str, Any]:
    return {k: info[k][i].item() for k in INFO_KEYS if k in info and info.get(f"_{k}", np.ones(1, bool)).all()}


def make_sb3_vec_env(num_envs: int = 16, **kwargs: Any) -> RGSDSb3VecEnv:
    """``gym.make_vec("RGSD-SMPL-v0", num_envs, **kwargs)`` wrapped for stable-baselines3."""
    return RGSDSb3VecEnv(gym.make_vec("RGSD-SMPL-v0", num_envs=num_envs, **kwargs))
