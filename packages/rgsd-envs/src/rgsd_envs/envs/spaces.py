"""Gymnasium spaces of one RGSD-SMPL-v0 world: the Gymnasium adapters' spaces and the torch env's."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from rgsd_envs.envs.observations import FRAME_DIM, SKILL_DIM
from rgsd_envs.humanoid import skeleton as sk


def single_spaces(obs_mode: str, skill_dim: int = SKILL_DIM) -> tuple[spaces.Space, spaces.Box]:
    """Observation and action space of one world (``obs_mode`` "flat" or "dict"; ``skill_dim``: the config's)."""
    if obs_mode == "dict":
        obs: spaces.Space = spaces.Dict(
            {
                "proprio": spaces.Box(-np.inf, np.inf, (FRAME_DIM,), np.float32),
                "skill": spaces.Box(-1.0, 1.0, (skill_dim,), np.float32),
            }
        )
    else:
        obs = spaces.Box(-np.inf, np.inf, (FRAME_DIM + skill_dim,), np.float32)
    return obs, spaces.Box(-1.0, 1.0, (sk.NUM_DOFS,), np.float32)
