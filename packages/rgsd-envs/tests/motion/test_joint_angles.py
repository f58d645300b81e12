"""Hinge angles keep their representative nearest the previous frame and inside the range."""

from __future__ import annotations

import numpy as np
import pytest

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.clip import MotionClip
from rgsd_envs.motion.kinematics import (
    RangeFit,
    clip_and_fit_from_rotations,
    fit_to_ranges,
    joint_rot_from_dof,
    nearest_representatives,
)


def wrap(a: np.ndarray) -> np.ndarray:
    """Angles into (-pi, pi], as Euler angles come out of a rotation."""
    return np.angle(np.exp(1j * a))


def clip_moving_one_hinge(i: int, track: np.ndarray) -> tuple[MotionClip, RangeFit]:
    """A 30 Hz clip, root still, in which only hinge ``i`` moves along ``track`` (radians), and its fit."""
    dof = np.zeros((len(track), sk.NUM_DOFS))
    dof[:, i] = track
    root_rot = np.tile([1.0, 0.0, 0.0, 0.0], (len(track), 1))
    root_pos = np.tile([0.0, 0.0, 1.0], (len(track), 1))
    return clip_and_fit_from_rotations("hinge", "test", root_pos, root_rot, joint_rot_from_dof(dof), 30.0, "t")


def test_track_through_pi_has_no_2pi_jump_and_stays_in_a_range_around_pi():
    true = np.deg2rad(np.linspace(100.0, 260.0, 33))[:, None]  # crosses +-180
    lo, hi = np.deg2rad([[90.0]]), np.deg2rad([[270.0]])
    out = nearest_representatives(wrap(true), lo[0], hi[0])
    np.testing.assert_allclose(out, true, atol=1e-12)
    assert np.abs(np.diff(out[:, 0])).max() < np.deg2rad(5.1)


def test_track_through_minus_pi_is_shifted_whole_into_the_range():
    true = np.deg2rad(np.linspace(-100.0, -260.0, 33))[:, None]  # = 260..100 one turn up
    out = nearest_representatives(wrap(true), np.deg2rad([90.0]), np.deg2rad([270.0]))
    np.testing.assert_allclose(out, true + 2 * np.pi, atol=1e-12)


def test_after_a_full_turn_the_angle_comes_back_into_range_instead_of_staying_2pi_off():
    # 5 -> 365 deg about a +-120 deg hinge: outside the range the angle follows the
    # previous frame (no flip between the limits), until it re-enters at 245 (= -115)
    true = np.deg2rad(np.linspace(5.0, 365.0, 37))[:, None]
    lo, hi = np.deg2rad([-120.0]), np.deg2rad([120.0])
    out = nearest_representatives(wrap(true), lo, hi)
    np.testing.assert_allclose(out[:24], true[:24], atol=1e-12)  # 5..235 continuous
    np.testing.assert_allclose(out[24:], true[24:] - 2 * np.pi, atol=1e-12)  # back in range
    excess = np.maximum(out - hi, lo - out).max()
    assert np.rad2deg(excess) == pytest.approx(115.0)  # at 235 deg; a plain unwrap left 245 deg


def test_a_track_already_in_range_is_unchanged():
    rng = np.random.default_rng(0)
    lo, hi = sk.DOF_RANGES[:, 0], sk.DOF_RANGES[:, 1]
    dof = lo + (hi - lo) * rng.uniform(0.05, 0.95, size=(20, sk.NUM_DOFS))
    fitted, fit = fit_to_ranges(dof)
    np.testing.assert_array_equal(fitted, dof)
    assert fit.max_deg == 0.0 and fit.worst_dof is None


def test_a_clip_rotated_through_pi_gets_no_spurious_clamp(monkeypatch):
    name = "L_Shoulder_x"
    i = sk.DOF_NAMES.index(name)
    ranges = sk.DOF_RANGES.copy()
    ranges[i] = np.deg2rad([60.0, 300.0])  # a range that holds +-180 deg
    monkeypatch.setattr(sk, "DOF_RANGES", ranges)
    track = np.deg2rad(np.linspace(120.0, 240.0, 31))
    clip, fit = clip_moving_one_hinge(i, track)
    assert fit.max_deg == pytest.approx(0.0, abs=1e-6), fit.describe()
    np.testing.assert_allclose(clip.dof_pos[:, i], track, atol=1e-9)
    assert np.abs(np.diff(clip.dof_pos[:, i])).max() < np.deg2rad(4.1)


def test_a_2pi_excursion_is_reported_as_its_true_overshoot():
    name = "L_Shoulder_x"  # +-120 deg
    i = sk.DOF_NAMES.index(name)
    clip, fit = clip_moving_one_hinge(i, np.deg2rad(np.linspace(5.0, 365.0, 37)))
    assert (fit.worst_dof, round(fit.max_deg, 6)) == (name, 115.0)  # at 235 deg, then in range again
    assert np.rad2deg(clip.dof_pos[-1, i]) == pytest.approx(5.0)


def test_forearm_twist_ranges_allow_supination_and_mirror():
    for side in ("L", "R"):
        for body, want in (("Elbow", (-80.0, 10.0)), ("Wrist", (-70.0, 40.0))):
            i = sk.DOF_NAMES.index(f"{side}_{body}_y")
            np.testing.assert_allclose(np.rad2deg(sk.DOF_RANGES[i]), want)
