"""Demo variants (``rgsd-motions demo --variants N``): any number of distinct, named, sensible clips, seeded."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.cli import main as rgsd_motions
from rgsd_envs.motion.clip import load_clip
from rgsd_envs.motion.demo import DEMO_KINDS
from rgsd_envs.motion.replay import kinematic_report, pd_replay
from rgsd_envs.motion.variants import demo_variants, make_variant, variant_name

ARM_BODIES = [sk.body_id(f"{side}_{part}") for side in "LR" for part in ("Elbow", "Hand")]
HANDS = [sk.body_id("L_Hand"), sk.body_id("R_Hand")]


@pytest.fixture(scope="module")
def hundred():
    return demo_variants(100)


def _velocity(clip) -> np.ndarray:
    return (clip.root_pos[-1, :2] - clip.root_pos[0, :2]) / clip.duration


def _arm_pose(clip) -> np.ndarray:
    """Elbows and hands relative to the pelvis (m): their mean, lowest and highest coordinates over the clip."""
    rel = clip.body_pos[:, ARM_BODIES] - clip.body_pos[:, :1]
    return np.concatenate([rel.mean(0).ravel(), rel.min(0).ravel(), rel.max(0).ravel()])


def _punch_times(clip) -> np.ndarray:
    """When each hand reaches furthest forward of the pelvis (s)."""
    reach = clip.body_pos[:, HANDS, 0] - clip.body_pos[:, :1, 0]
    return reach.argmax(0) / clip.fps


def test_names_and_categories_take_the_kinds_in_turn(hundred):
    assert len(hundred) == 100 and len({c.name for c in hundred}) == 100
    for i, clip in enumerate(hundred):
        kind = DEMO_KINDS[i % 5]
        assert clip.category == kind and clip.name == f"{kind}_v{i // 5:02d}"
        assert clip.source.startswith(f"demo:{kind} variant {i // 5} ")
    assert variant_name("walk", 7, per_kind=250) == "walk_v007"


def test_every_pair_is_told_apart_by_its_pelvis_velocity_arm_pose_or_punch_timing(hundred):
    features = [(_velocity(c), _arm_pose(c), _punch_times(c)) for c in hundred]
    for (a, fa), (b, fb) in itertools.combinations(zip(hundred, features), 2):
        velocity = np.linalg.norm(fa[0] - fb[0])
        arms = np.abs(fa[1] - fb[1]).max()
        timing = np.abs(fa[2] - fb[2]).max() if a.category == b.category == "punch" else 0.0
        assert velocity > 0.04 or arms > 0.03 or timing > 0.06, (a.name, b.name, velocity, arms, timing)


def test_speeds_and_directions_stay_in_each_kind_s_range(hundred):
    for clip in hundred:
        vx, vy = _velocity(clip)
        if clip.category == "walk":
            assert 0.75 <= vx <= 1.5 and abs(vy) < 0.02, clip.name
        elif clip.category == "run":
            assert 1.45 <= vx <= 2.25 and abs(vy) < 0.02, clip.name
        elif clip.category == "backward":
            assert -1.0 <= vx <= -0.45 and abs(vy) < 0.02, clip.name
        elif clip.category == "sidestep":
            assert 0.2 <= abs(vy) <= 0.55 and abs(vx) < 0.02, clip.name
        else:
            assert np.linalg.norm(clip.root_pos[:, :2] - clip.root_pos[0, :2], axis=-1).max() < 0.1, clip.name
    sides = {np.sign(_velocity(c)[1]) for c in hundred if c.category == "sidestep"}
    assert sides == {-1.0, 1.0}


def test_every_variant_is_grounded_upright_and_its_planted_feet_do_not_slide(hundred):
    for clip in hundred:
        rep = kinematic_report(clip)
        assert abs(rep.lowest_foot) < 0.03 and rep.body_lowest.min() > -0.02, clip.name
        assert rep.head_above_pelvis.min() > 0.3, clip.name
        assert rep.skating < 0.03 and np.quantile(rep.stance_foot_speed, 0.95) < 0.12, clip.name
        if clip.category != "run":  # runs have flight phases
            assert rep.foot_lowest.max() < 0.03, clip.name
        if clip.category != "punch":  # whole cycles
            np.testing.assert_allclose(clip.dof_pos[-1], clip.dof_pos[0], atol=1e-6, err_msg=clip.name)


def test_open_loop_pd_replay_keeps_variants_upright_about_as_long_as_the_demos(hundred):
    """Open loop, PD targets = the clip (the demos stay up 1.5-3 s): no variant falls at once."""
    seconds = []
    for clip in hundred[:10]:
        result = pd_replay(clip)
        assert not result.unstable and result.seconds >= 0.75, (clip.name, result.seconds)
        seconds.append(result.seconds)
    assert np.median(seconds) >= 1.2


def test_the_same_seed_gives_the_same_clips_and_another_seed_others(hundred):
    again = make_variant("punch", 3)
    np.testing.assert_array_equal(again.qpos, hundred[19].qpos)
    other = make_variant("punch", 3, seed=1)
    assert other.qpos.shape != again.qpos.shape or not np.allclose(other.qpos, again.qpos)


def test_a_larger_set_starts_with_a_smaller_one_s_clips(hundred):
    for small, large in zip(demo_variants(7), hundred):
        assert small.name == large.name
        np.testing.assert_array_equal(small.qpos, large.qpos)


def test_cli_writes_n_variants_and_the_five_demo_clips_without(tmp_path, capsys):
    assert rgsd_motions(["demo", "--variants", "6", "--seed", "2", "--out", str(tmp_path / "v")]) == 0
    names = sorted(p.stem for p in (tmp_path / "v").glob("*.npz"))
    assert names == sorted(["walk_v00", "run_v00", "sidestep_v00", "backward_v00", "punch_v00", "walk_v01"])
    assert load_clip(tmp_path / "v" / "walk_v01.npz").source.endswith("seed 2")
    assert rgsd_motions(["demo", "--out", str(tmp_path / "d")]) == 0
    assert sorted(p.stem for p in (tmp_path / "d").glob("*.npz")) == sorted(f"demo_{k}" for k in DEMO_KINDS)
    assert rgsd_motions(["demo", "--variants", "0", "--out", str(tmp_path / "z")]) == 2
    assert rgsd_motions(["demo", "--seed", "1", "--out", str(tmp_path / "z")]) == 2
    assert "--variants" in capsys.readouterr().err
