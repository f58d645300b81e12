"""Replay checks: kinematic facts of clips and open-loop PD replay / standing."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.humanoid.mjcf import HumanoidConfig
from rgsd_envs.motion.replay import (
    kinematic_report,
    pd_replay,
    pd_replay_seconds,
    pd_standing,
    pd_standing_seconds,
)


@pytest.fixture(scope="module")
def punch(demo_clips):
    return next(c for c in demo_clips if c.category == "punch")


def test_real_clips_replay_grounded_upright_and_above_the_floor(real_clips):
    for clip in real_clips:
        rep = kinematic_report(clip)
        assert rep.foot_lowest.shape == rep.body_lowest.shape == (clip.num_frames,)
        assert abs(rep.lowest_foot) < 0.03, clip.name
        assert rep.body_lowest.min() > -0.02, (clip.name, rep.body_lowest.min())
        assert rep.head_above_pelvis.min() > 0.0, clip.name


def test_report_sees_a_floating_clip(punch):
    lifted = copy.deepcopy(punch)
    lifted.root_pos[:, 2] += 0.1
    rep = kinematic_report(lifted)
    assert rep.lowest_foot == pytest.approx(0.1, abs=1e-6)
    assert rep.foot_lowest.min() == pytest.approx(0.1, abs=1e-6)
    assert rep.stance_foot_speed.size == 0 and rep.skating == 0.0


def test_report_sees_a_body_under_the_floor_and_upside_down(punch):
    sunk = copy.deepcopy(punch)
    sunk.root_pos[:, 2] -= 0.05
    assert kinematic_report(sunk).body_lowest.max() == pytest.approx(-0.05, abs=1e-6)
    flipped = copy.deepcopy(punch)
    flipped.root_rot[:] = [0.0, 1.0, 0.0, 0.0]  # 180 degrees about x: head below pelvis
    assert (kinematic_report(flipped).head_above_pelvis < 0).all()


def test_report_measures_foot_sliding(punch):
    assert kinematic_report(punch).skating == pytest.approx(0.0, abs=1e-9)
    sliding = copy.deepcopy(punch)
    sliding.root_pos[:, 0] += 0.3 * np.arange(punch.num_frames) / punch.fps  # feet glide at 0.3 m/s
    rep = kinematic_report(sliding)
    assert rep.skating == pytest.approx(0.3, rel=0.02)


def test_report_rejects_a_model_of_another_body(punch):
    from rgsd_envs.motion.kinematics import KinematicModel

    other = sk.REST_OFFSETS * 1.1
    with pytest.raises(ValueError, match="body_offsets differ"):
        kinematic_report(punch, KinematicModel(other))


def test_pd_held_standing_pose_stays_up_ten_seconds():
    result = pd_standing(10.0)
    assert result.completed and result.seconds == pytest.approx(10.0)
    assert not result.unstable and result.warnings == 0
    assert result.root_drift < 0.1
    assert pd_standing_seconds(1.0) == pytest.approx(1.0)


def test_standing_without_rotor_inertia_falls():
    """The armature is what keeps PD standing up: without it the light bodies jitter it over."""
    assert pd_standing_seconds(10.0, HumanoidConfig(armature_factor=0.0)) < 10.0


def test_pd_replay_runs_the_clip_length_and_no_more(punch):
    result = pd_replay(punch)
    assert result.completed and result.seconds == pytest.approx(punch.duration)
    assert pd_replay_seconds(punch, max_seconds=0.5) == pytest.approx(0.5)
    held = pd_replay(punch, max_seconds=punch.duration + 1.0)  # then holds the last frame's targets
    assert held.completed and held.seconds == pytest.approx(punch.duration + 1.0)
    assert 0.0 < result.tracking_error < 0.03
    assert result.us_per_control_step > 0


def test_pd_replay_reports_a_fall(punch):
    falling = copy.deepcopy(punch)
    falling.root_lin_vel[0] = [0.0, 4.0, 0.0]  # a hard shove sideways
    result = pd_replay(falling)
    assert not result.completed and result.seconds < punch.duration
    assert not result.unstable


def test_pd_replay_reports_simulator_instability_without_log_files(punch, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exploding = copy.deepcopy(punch)
    exploding.dof_vel[0] = 1e12
    result = pd_replay(exploding)
    assert result.unstable and result.warnings >= 1 and result.seconds == 0.0
    assert not list(tmp_path.iterdir()), "MuJoCo warnings must not be written to MUJOCO_LOG.TXT"


def test_pd_replay_rejects_an_empty_run(punch):
    with pytest.raises(ValueError, match="nothing to replay"):
        pd_replay(punch, max_seconds=0.0)


def test_real_clips_pd_replay_reports_plausible_times(real_clips):
    for clip in real_clips:
        result = pd_replay(clip)
        assert 0.0 < result.seconds <= clip.duration + 1e-9, clip.name
        assert not result.unstable, clip.name
