"""Velocities a clip is built with (rgsd_envs.motion.kinematics)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rgsd_envs.motion.kinematics import _root_ang_vel, resample
from rgsd_envs.utils.rotations import quat_from_axis_angle


def test_root_angular_velocity_of_a_steady_turn_is_its_rate_at_every_frame():
    dt, rate = 1.0 / 30.0, 1.3  # rad/s about the world's z, then about a tilted axis
    for axis in (np.array([0.0, 0.0, 1.0]), np.array([0.6, 0.0, 0.8])):
        t = np.arange(12)[:, None] * dt
        q = quat_from_axis_angle(torch.from_numpy(axis * rate * t)).numpy()
        np.testing.assert_allclose(_root_ang_vel(q, dt), np.tile(axis * rate, (12, 1)), atol=1e-9)


def _still(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    q = np.zeros((n, 4))
    q[:, 0] = 1.0
    return np.zeros((n, 3)), q, np.tile(q[:, None], (1, 23, 1))


def test_resample_keeps_two_frames_of_one_30_hz_step_and_refuses_less():
    assert resample(*_still(5), src_fps=120.0)[0].shape == (2, 3)  # 4/120 s: frames at 0 and 1/30 s
    with pytest.raises(ValueError, match=r"3 frames at 120 Hz lasts 0.01667 s, shorter than one 30 Hz step"):
        resample(*_still(3), src_fps=120.0)
