"""EnvConfig's physics options reach the MuJoCo model: the timestep, and the hinge armature that scales with it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import rgsd_envs  # noqa: F401  (registers RGSD-SMPL-v0)
from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.humanoid.mjcf import HumanoidConfig


def test_timestep_sets_the_model_timestep_and_the_hinge_armature():
    env = gym.make_vec("RGSD-SMPL-v0", num_envs=1, config=EnvConfig(timestep=1 / 120))
    model = env.unwrapped.core.backend.model
    assert model.opt.timestep == pytest.approx(1 / 120)
    factor = HumanoidConfig().armature_factor
    np.testing.assert_allclose(model.dof_armature[6:], factor * sk.KP / 120**2, rtol=1e-5)  # the MJCF holds 6 digits
    env.close()
    with pytest.raises(ValueError, match="timestep"):
        EnvConfig(timestep=0.0)
