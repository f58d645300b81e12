"""The built-in demo clips: deterministic, well-formed, plausible, and gentle enough for PD replay."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.clip import CATEGORIES, load_clip
from rgsd_envs.motion.demo import DEMO_KINDS, demo_clips, make_demo_clip, write_demo_clips
from rgsd_envs.motion.kinematics import KinematicModel
from rgsd_envs.motion.replay import kinematic_report, pd_replay
from rgsd_envs.utils import rotations as rot

GROUNDED_KINDS = ("walk", "sidestep", "backward", "punch")
"""Kinds with a foot on the floor on every frame (the run has flight phases)."""


@pytest.fixture(scope="module")
def clips(demo_clips) -> dict:
    return {c.category: c for c in demo_clips}


@pytest.fixture(scope="module")
def reports(clips) -> dict:
    return {kind: kinematic_report(c) for kind, c in clips.items()}


def _velocity(clip) -> np.ndarray:
    """Mean pelvis velocity over the clip (m/s)."""
    return (clip.root_pos[-1] - clip.root_pos[0]) / clip.duration


def test_one_clip_per_paper_category_with_demo_names(clips):
    assert DEMO_KINDS == CATEGORIES
    assert sorted(clips) == sorted(CATEGORIES)
    for kind, clip in clips.items():
        assert clip.name == f"demo_{kind}"
        assert clip.source == f"demo:{kind}"


def test_clips_last_two_to_four_seconds_at_30_hz(clips):
    for clip in clips.values():
        assert clip.fps == 30.0
        assert 2.0 <= clip.duration <= 4.0, (clip.name, clip.duration)


def test_demo_clips_are_the_same_on_every_call_and_rebuild():
    first, second = demo_clips(), demo_clips()
    rebuilt = make_demo_clip("walk")
    assert [c.name for c in first] == [c.name for c in second]
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a.qpos, b.qpos)
        np.testing.assert_array_equal(a.body_pos, b.body_pos)
    np.testing.assert_array_equal(rebuilt.qpos, first[0].qpos)


def test_callers_cannot_corrupt_the_cached_clips():
    first = demo_clips()
    first[0].root_pos[:] = 99.0
    assert demo_clips()[0].root_pos.max() < 10.0


def test_unknown_kind_is_rejected_with_the_choices():
    with pytest.raises(ValueError, match="walk, run, sidestep, backward, punch"):
        make_demo_clip("moonwalk")


def test_building_fits_every_joint_within_its_ranges_exactly(caplog):
    with caplog.at_level(logging.WARNING, logger="rgsd_envs"):
        for kind in ("run", "punch"):
            make_demo_clip(kind)
    assert not [r for r in caplog.records if "residual" in r.getMessage()]


def test_speeds_and_directions_are_plausible(clips):
    walk, run = _velocity(clips["walk"]), _velocity(clips["run"])
    assert 1.0 <= walk[0] <= 1.5 and abs(walk[1]) < 0.05
    assert run[0] >= 1.4 and run[0] > walk[0] + 0.3 and abs(run[1]) < 0.05
    back = _velocity(clips["backward"])
    assert -1.2 <= back[0] <= -0.4 and abs(back[1]) < 0.05
    side = _velocity(clips["sidestep"])
    assert 0.2 <= abs(side[1]) <= 1.0 and abs(side[0]) < 0.05
    punch = clips["punch"]
    assert np.linalg.norm(punch.root_pos[:, :2] - punch.root_pos[0, :2], axis=-1).max() < 0.08


def test_the_body_always_faces_forward(clips):
    for clip in clips.values():
        heading = rot.heading_angle(torch.as_tensor(clip.root_rot)).numpy()
        assert np.abs(np.rad2deg(heading)).max() < 1.0, clip.name


def test_gait_clips_loop_whole_cycles(clips):
    for kind in ("walk", "run", "sidestep", "backward"):
        clip = clips[kind]
        np.testing.assert_allclose(clip.dof_pos[-1], clip.dof_pos[0], atol=1e-6, err_msg=kind)
        np.testing.assert_allclose(clip.root_pos[-1, 2], clip.root_pos[0, 2], atol=1e-6)


def test_arms_hang_down_not_in_t_pose(clips):
    for kind in ("walk", "run", "sidestep", "backward"):
        pos = clips[kind].body_pos
        for side in ("L", "R"):
            drop = pos[:, sk.body_id(f"{side}_Shoulder"), 2] - pos[:, sk.body_id(f"{side}_Elbow"), 2]
            assert drop.min() > 0.2, (kind, side, drop.min())


def test_punches_reach_forward_from_a_guard(clips):
    clip = clips["punch"]
    reach = clip.body_pos[:, [sk.body_id("L_Hand"), sk.body_id("R_Hand")], 0] - clip.body_pos[:, :1, 0]
    assert reach[0].max() < 0.35  # guard: fists near the body
    assert reach[:, 0].max() > 0.5 and reach[:, 1].max() > 0.5  # a left and a right punch
    assert reach[-1].max() < 0.35


def test_kinematic_replay_grounded_upright_and_above_the_floor(reports):
    for kind, rep in reports.items():
        assert abs(rep.lowest_foot) < 0.03, kind
        assert rep.body_lowest.min() > -0.02, kind
        assert rep.head_above_pelvis.min() > 0.3, kind


def test_some_foot_is_on_the_floor_on_every_frame(reports):
    for kind in GROUNDED_KINDS:
        assert reports[kind].foot_lowest.max() < 0.03, kind


def test_planted_feet_do_not_slide(reports):
    for kind, rep in reports.items():
        assert rep.stance_foot_speed.size > 20, kind
        assert rep.skating < 0.03, (kind, rep.skating)
        assert np.quantile(rep.stance_foot_speed, 0.95) < 0.12, kind


def test_swinging_feet_clear_the_floor(clips):
    """While a foot travels fast (mid-swing), its lowest point is at least 2 cm up: no scuffing."""
    km = KinematicModel()
    for kind in ("walk", "run", "sidestep", "backward"):
        clip = clips[kind]
        _, _, lowest = km.forward(clip.qpos)
        speed = np.linalg.norm(clip.body_lin_vel[..., :2], axis=-1)
        for side in ("L", "R"):
            ankle, toe = sk.body_id(f"{side}_Ankle"), sk.body_id(f"{side}_Toe")
            fast = speed[:, ankle] > 1.5 * np.linalg.norm(_velocity(clip))
            assert fast.sum() >= 3, (kind, side)
            clearance = lowest[fast][:, [ankle, toe]].min()
            assert clearance > 0.02, (kind, side, clearance)


def test_pd_replay_keeps_every_demo_upright_for_a_second(clips):
    for kind, clip in clips.items():
        result = pd_replay(clip)
        assert not result.unstable and result.warnings == 0, kind
        assert result.seconds >= 1.0, (kind, result.seconds)
        assert result.tracking_error < 0.15, (kind, result.tracking_error)


def test_punch_replays_to_the_end_with_small_error(clips):
    result = pd_replay(clips["punch"])
    assert result.completed
    assert result.tracking_error < 0.03


def test_write_demo_clips_saves_loadable_files(tmp_path, clips):
    paths = write_demo_clips(tmp_path / "demo")
    assert sorted(p.name for p in paths) == sorted(f"demo_{k}.npz" for k in DEMO_KINDS)
    for path in paths:
        loaded = load_clip(path)
        np.testing.assert_allclose(loaded.qpos, clips[loaded.category].qpos)
    assert not list((tmp_path / "demo").glob("*.tmp"))
