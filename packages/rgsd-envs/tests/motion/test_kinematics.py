"""Velocities a clip is built with (rgsd_envs.motion.kinematics)."""

from __future__ import annotations

import numpy as np
import torch

from rgsd_envs.motion.kinematics import _root_ang_vel
from rgsd_envs.utils.rotations import quat_from_axis_angle


def test_root_angular_velocity_of_a_steady_turn_is_its_rate_at_every_frame():
    dt, rate = 1.0 / 30.0, 1.3  # rad/s about the world's z, then about a tilted axis
    for axis in (np.array([0.0, 0.0, 1.0]), np.array([0.6, 0.0, 0.8])):
        t = np.arange(12)[:, None] * dt
        q = quat_from_axis_angle(torch.from_numpy(axis * rate * t)).numpy()
        np.testing.assert_allclose(_root_ang_vel(q, dt), np.tile(axis * rate, (12, 1)), atol=1e-9)
