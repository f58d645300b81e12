"""The env as a method sees it: latents chosen by the method after every step (``SkillMethod.choose_skills``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rgsd_agents.methods.base import SkillMethod
from rgsd_envs.envs.observations import HUMANOID_LAYOUT

Tensor = torch.Tensor


class SkillChoosingEnv:
    """Wraps an ``RGSDTorchEnv`` (or a toy env of ``rgsd_envs.envs.toy``): after each step (and a reset) the method may replace every world's z through
    ``env.set_skills``; the observations returned then hold the new z. Everything else is the env's."""

    def __init__(self, env: Any, method: SkillMethod):
        self.env = env
        self.method = method
        self._all = np.arange(env.num_envs)
        self._skill = getattr(env, "layout", HUMANOID_LAYOUT).skill

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def _choose(self, obs: Tensor, started: Tensor) -> Tensor:
        skills = self.method.choose_skills(started, obs[:, self._skill])
        if skills is None:
            return obs
        self.env.set_skills(self._all, skills)  # every world: no per-world index crosses to the host
        return self.env.observations()

    def reset(self, seed: Any = None, options: dict[str, Any] | None = None) -> tuple[Tensor, Any]:
        """The env's reset; every world starts an episode, so the method chooses every z."""
        obs, info = self.env.reset(seed=seed, options=options)
        started = torch.ones(self.env.num_envs, dtype=torch.bool, device=obs.device)
        return self._choose(obs, started), info

    def step(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Any]:
        """The env's step; the method then chooses the z each world continues with."""
        obs, reward, term, trunc, extras = self.env.step(actions)
        return self._choose(obs, extras.started), reward, term, trunc, extras
