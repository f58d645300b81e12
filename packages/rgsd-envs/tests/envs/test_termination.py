"""Deviation termination (rgsd_envs.envs.termination): mean or max body error, fixed or tightening thresholds."""

from __future__ import annotations

import math

import pytest
import torch

from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.core import RGSDCore
from rgsd_envs.envs.termination import DeviationRule


def _distances(n: int = 4, bodies: int = 24) -> torch.Tensor:
    """Every body 0.1 m off; in world 1 one body 0.6 m off (mean 0.12 m, max 0.6 m)."""
    d = torch.full((n, bodies), 0.1)
    d[1, 5] = 0.6
    return d


def test_max_metric_ends_on_one_far_body_where_the_mean_does_not():
    imitation = torch.ones(4, dtype=torch.bool)
    clip = torch.zeros(4, dtype=torch.long)
    mean_rule = DeviationRule(EnvConfig(deviation_threshold=0.5), 1)
    max_rule = DeviationRule(EnvConfig(deviation_threshold=0.5, deviation_metric="max"), 1)
    assert not mean_rule(_distances(), imitation, clip).any()
    assert max_rule(_distances(), imitation, clip).tolist() == [False, True, False, False]


def test_discovery_worlds_and_disabled_termination_never_deviate():
    cfg = EnvConfig(deviation_threshold=0.05, deviation_metric="max")
    clip = torch.zeros(4, dtype=torch.long)
    task = torch.tensor([True, False, True, False])
    assert DeviationRule(cfg, 1)(_distances(), task, clip).tolist() == [True, False, True, False]
    off = EnvConfig(deviation_threshold=0.05, deviation_termination=False)
    assert not DeviationRule(off, 1)(_distances(), task, clip).any()


def test_adaptive_threshold_tightens_for_the_clip_that_tracks_well_only():
    cfg = EnvConfig(
        deviation_metric="max",
        deviation_threshold=0.5,
        deviation_adaptive=True,
        deviation_adaptive_k=2.0,
        deviation_min=0.25,
        deviation_error_memory=4.0,
    )
    rule = DeviationRule(cfg, 2)
    torch.testing.assert_close(rule.thresholds(), torch.tensor([0.5, 0.5]))  # starts at the loose one
    imitation = torch.ones(4, dtype=torch.bool)
    clip = torch.tensor([0, 0, 1, 1])
    d = torch.full((4, 24), 0.14)  # clip 0 tracks within 0.14 m
    d[2:] = 0.4  # clip 1 is 0.4 m off: 2 x 0.4 = 0.8 is clamped to 0.5
    rule(d, imitation, clip)
    # two samples per clip, memory 4: old weight (3/4)^2 on the start 0.25
    e0 = 0.75**2 * 0.25 + (1 - 0.75**2) * 0.14
    assert rule.clip_error[0].item() == pytest.approx(e0)
    for _ in range(50):
        rule(d, imitation, clip)
    assert rule.thresholds()[0].item() == pytest.approx(0.28, abs=1e-3)  # 2 x 0.14
    assert rule.thresholds()[1].item() == pytest.approx(0.5)
    d[0] = 0.3  # a world of clip 0 now 0.3 m off: beyond its tightened threshold, within the loose one
    assert rule(d, imitation, clip).tolist() == [True, False, False, False]
    restored = DeviationRule(cfg, 2)
    restored.load_state_dict(rule.state_dict())
    torch.testing.assert_close(restored.thresholds(), rule.thresholds())


def test_adaptive_threshold_never_goes_below_its_minimum():
    cfg = EnvConfig(deviation_metric="max", deviation_adaptive=True, deviation_min=0.25, deviation_error_memory=1.0)
    rule = DeviationRule(cfg, 1)
    rule(torch.zeros(2, 24), torch.ones(2, dtype=torch.bool), torch.zeros(2, dtype=torch.long))
    assert rule.thresholds().item() == pytest.approx(0.25)


def test_env_terminates_on_max_error_and_keeps_reporting_the_mean():
    core = RGSDCore(2, EnvConfig(deviation_metric="max", deviation_threshold=0.5, p_imitation=1.0))
    core.reset_envs([0, 1], {"clip": 0, "task": "imitation"})
    core.frame += 20  # the worlds stand at frame 0 while the reference moved on: the max error exceeds the mean
    info = core.observe()
    d = (core.backend.state(None).body_pos.float() - info.ref_body_pos).norm(dim=-1)
    torch.testing.assert_close(info.cartesian_error, d.mean(-1))
    assert info.deviation.tolist() == (d.amax(-1) > 0.5).tolist()
    assert (d.amax(-1) > 0.5).any() or pytest.fail("frame 20 of the demo walk should be >0.5 m from frame 0")


def test_env_state_carries_the_clip_errors():
    cfg = EnvConfig(deviation_adaptive=True)
    core = RGSDCore(2, cfg)
    core.deviation_rule.clip_error[:] = 0.1
    restored = RGSDCore(2, cfg)
    restored.load_state_dict(core.state_dict())
    torch.testing.assert_close(restored.deviation_rule.clip_error, core.deviation_rule.clip_error)


def test_bad_deviation_options_are_clear_errors():
    with pytest.raises(ValueError, match="deviation_metric"):
        EnvConfig(deviation_metric="median")
    with pytest.raises(ValueError, match="deviation_min"):
        EnvConfig(deviation_adaptive=True, deviation_min=0.8, deviation_threshold=0.5)


def _yaw(deg: float) -> torch.Tensor:
    half = math.radians(deg) / 2
    return torch.tensor([[math.cos(half), 0.0, 0.0, math.sin(half)]])


def test_heading_rule_ends_imitation_worlds_that_turned_away():
    from rgsd_envs.envs.termination import heading_error

    assert heading_error(_yaw(170), _yaw(-170)).item() == pytest.approx(math.radians(20), abs=1e-5)  # wraps
    cfg = EnvConfig(deviation_heading_deg=15.0)
    rule = DeviationRule(cfg, 1)
    near = torch.zeros(3, 24)  # bodies on the reference: only the heading can end an episode
    root = torch.cat((_yaw(10), _yaw(20), _yaw(20)))
    ref = torch.cat((_yaw(0), _yaw(0), _yaw(0)))
    task = torch.tensor([True, True, False])
    clip = torch.zeros(3, dtype=torch.long)
    assert rule(near, task, clip, root, ref).tolist() == [False, True, False]
    assert not DeviationRule(EnvConfig(), 1)(near, task, clip, root, ref).any()  # off by default


def test_env_heading_rule_sees_a_turned_pelvis():
    from rgsd_envs.utils.rotations import quat_mul

    core = RGSDCore(2, EnvConfig(deviation_heading_deg=10.0, p_imitation=1.0))
    core.reset_envs([0, 1], {"clip": 0, "task": "imitation", "start_frame": 0})
    assert not core.observe().deviation.any()  # at the reference frame
    s = core.backend.state(None)
    qpos, qvel = s.qpos.clone().double(), s.qvel.clone().double()
    qpos[1, 3:7] = quat_mul(_yaw(20).double()[0], qpos[1, 3:7])  # world 1 turned by 20 deg about the vertical
    core.backend.set_state(torch.tensor([1]), qpos[1:], qvel[1:])
    assert core.observe().deviation.tolist() == [False, True]
    core.cfg.deviation_heading_deg = None  # the same state under the body-error rule alone: no deviation
    assert not core.observe().deviation.any()
