"""EnvConfig's physics options reach the MuJoCo model: timestep and hinge armature."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import rgsd_envs  # noqa: F401  (registers RGSD-SMPL-v0)
from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.humanoid import skeleton as sk


def test_timestep_and_armature_factor_set_the_hinge_armature():
    env = gym.make_vec("RGSD-SMPL-v0", num_envs=1, config=EnvConfig(timestep=1 / 120, armature_factor=1.0))
    model = env.unwrapped.core.backend.model
    assert model.opt.timestep == pytest.approx(1 / 120)
    np.testing.assert_allclose(model.dof_armature[6:], 1.0 * sk.KP / 120**2, rtol=1e-5)  # the MJCF holds 6 digits
    env.close()
    with pytest.raises(ValueError, match="armature_factor"):
        EnvConfig(armature_factor=-1.0)
