"""stable-baselines3 adapter: RGSD-SMPL-v0's native vector env as an SB3 ``VecEnv``.

    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor
    from rgsd_envs.compat.sb3 import make_sb3_vec_env

    venv = VecMonitor(make_sb3_vec_env(num_envs=16))   # encoder reward included; VecMonitor: episode statistics
    PPO("MlpPolicy", venv).learn(100_000)

SB3's contract is a list of per-world info dicts; this adapter builds them
(``terminal_observation`` and ``TimeLimit.truncated`` for finished episodes, so
SB3 bootstraps the value on truncation; a finished world's info is its ended
episode's, the new one's in ``reset_infos``) and otherwise passes the batched
arrays through. ``seed`` and ``set_options`` reach the next ``reset`` as in SB3's
own vector envs. Skill sampling and the encoder reward stay in the environment.
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
        """Reset every world with the seeds given to ``seed`` and the options given to ``set_options`` (both used
        once, as SB3's own vector envs use them); returns the observations."""
        obs = None
        self.reset_infos = [{} for _ in range(self.num_envs)]
        for ids, seed, options in reset_calls(self._seeds, self._options, self.num_envs):
            obs, info = self.env.reset(seed=seed, options=options)
            for i in ids:
                self.reset_infos[i] = _row(info, i)
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        """Remember the actions for step_wait."""
        self._actions = np.asarray(actions, dtype=np.float32)

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Step all worlds; finished ones restart at once (SameStep)."""
        obs, reward, term, trunc, info = self.env.step(self._actions)
        done = term | trunc
        infos = [_row(info, i) for i in range(self.num_envs)]
        for i in np.flatnonzero(done):  # SB3: a finished world's info is its last step's, its reset's apart
            self.reset_infos[i] = infos[i]
            infos[i] = _row(info["final_info"], i)
            infos[i]["terminal_observation"] = info["final_obs"][i]
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
    """World i's ``INFO_KEYS`` that its vector info holds (per the ``_key`` masks)."""
    return {k: info[k][i].item() for k in INFO_KEYS if k in info and info[f"_{k}"][i]}


def reset_calls(
    seeds: Sequence[int | None], options: Sequence[dict[str, Any]], n: int
) -> list[tuple[np.ndarray, list[int | None] | None, dict[str, Any] | None]]:
    """The native env's resets that give world i seed ``seeds[i]`` and options ``options[i]`` (SB3's per-world
    lists): one call (its worlds, seed list, options) per group of worlds seeded alike (None: not re-seeded, so
    never passed) with the same option keys; an option whose value differs between a group's worlds becomes a
    per-world list, as the native env takes it."""
    groups: dict[tuple[bool, tuple[str, ...]], list[int]] = {}
    for i in range(n):
        groups.setdefault((seeds[i] is not None, tuple(sorted(options[i]))), []).append(i)
    calls = []
    for (seeded, keys), ids in groups.items():
        merged: dict[str, Any] = {}
        for k in keys:
            values = [options[i][k] for i in ids]
            merged[k] = values[0] if all(_same(v, values[0]) for v in values) else values
        if len(groups) > 1:
            merged["reset_mask"] = np.isin(np.arange(n), ids)
        seed = [seeds[i] if seeds[i] is not None else 0 for i in range(n)] if seeded else None
        calls.append((np.asarray(ids), seed, merged or None))
    return calls


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return np.shape(a) == np.shape(b) and bool(np.all(np.asarray(a) == np.asarray(b)))


def make_sb3_vec_env(num_envs: int = 16, **kwargs: Any) -> RGSDSb3VecEnv:
    """``gym.make_vec("RGSD-SMPL-v0", num_envs, **kwargs)`` wrapped for stable-baselines3."""
    return RGSDSb3VecEnv(gym.make_vec("RGSD-SMPL-v0", num_envs=num_envs, **kwargs))
