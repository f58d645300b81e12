"""Deviation termination (rgsd_envs.envs.termination): mean or max body error, fixed or tightening thresholds."""

from __future__ import annotations

import math

import pytest
import torch

from rgsd_envs.envs.config import NO_DEVIATION, DeviationConfig, EnvConfig
from rgsd_envs.envs.core import RGSDCore
from rgsd_envs.envs.termination import ADAPTIVE_K, ERROR_MEMORY, DeviationRule, fall_flags
from rgsd_envs.humanoid import skeleton as sk


def _distances(n: int = 4, bodies: int = 24) -> torch.Tensor:
    """Every body 0.1 m off; in world 1 one body 0.6 m off (mean 0.12 m, max 0.6 m)."""
    d = torch.full((n, bodies), 0.1)
    d[1, 5] = 0.6
    return d


def test_max_metric_ends_on_one_far_body_where_the_mean_does_not():
    imitation = torch.ones(4, dtype=torch.bool)
    clip = torch.zeros(4, dtype=torch.long)
    mean_rule = DeviationRule(DeviationConfig(threshold=0.5), 1)
    max_rule = DeviationRule(DeviationConfig(threshold=0.5, metric="max"), 1)
    assert not mean_rule(_distances(), imitation, clip).any()
    assert max_rule(_distances(), imitation, clip).tolist() == [False, True, False, False]


def test_discovery_worlds_and_disabled_termination_never_deviate():
    cfg = DeviationConfig(threshold=0.05, metric="max")
    clip = torch.zeros(4, dtype=torch.long)
    task = torch.tensor([True, False, True, False])
    assert DeviationRule(cfg, 1)(_distances(), task, clip).tolist() == [True, False, True, False]
    far = torch.full((4, 24), 1e6)
    assert not DeviationRule(NO_DEVIATION, 1)(far, task, clip).any()
    assert EnvConfig().without_early_termination().deviation == NO_DEVIATION


def test_adaptive_threshold_tightens_for_the_clip_that_tracks_well_only():
    cfg = DeviationConfig(metric="max", threshold=0.5, adaptive=True, min=0.25)
    rule = DeviationRule(cfg, 2)
    torch.testing.assert_close(rule.thresholds(), torch.tensor([0.5, 0.5]))  # starts at the loose one
    imitation = torch.ones(4, dtype=torch.bool)
    clip = torch.tensor([0, 0, 1, 1])
    d = torch.full((4, 24), 0.14)  # clip 0 tracks within 0.14 m
    d[2:] = 0.4  # clip 1 is 0.4 m off: 2 x 0.4 = 0.8 is clamped to 0.5
    rule(d, imitation, clip)
    keep = (1 - 1 / ERROR_MEMORY) ** 2  # two samples per clip: the old value's weight
    e0 = keep * 0.5 / ADAPTIVE_K + (1 - keep) * 0.14  # the EMA starts where the threshold is the loose one
    assert rule.clip_error[0].item() == pytest.approx(e0)
    rule.clip_error[:] = torch.tensor([0.14, 0.4], dtype=torch.float64)  # as after many samples
    assert rule.thresholds()[0].item() == pytest.approx(ADAPTIVE_K * 0.14)
    assert rule.thresholds()[1].item() == pytest.approx(0.5)
    d[0] = 0.3  # a world of clip 0 now 0.3 m off: beyond its tightened threshold, within the loose one
    assert rule(d, imitation, clip).tolist() == [True, False, False, False]
    restored = DeviationRule(cfg, 2)
    restored.load_state_dict(rule.state_dict())
    torch.testing.assert_close(restored.thresholds(), rule.thresholds())


def test_adaptive_threshold_never_goes_below_its_minimum():
    cfg = DeviationConfig(metric="max", adaptive=True, min=0.25)
    rule = DeviationRule(cfg, 1)
    rule(torch.zeros(2, 24), torch.ones(2, dtype=torch.bool), torch.zeros(2, dtype=torch.long))
    assert rule.clip_error.item() < 0.5 / ADAPTIVE_K  # a perfect step lowers the EMA
    rule.clip_error[:] = 0.0  # as after many perfect steps
    assert rule.thresholds().item() == pytest.approx(0.25)


def test_env_terminates_on_max_error_and_keeps_reporting_the_mean():
    core = RGSDCore(2, EnvConfig(deviation=DeviationConfig(metric="max", threshold=0.5), p_imitation=1.0))
    core.reset_envs([0, 1], {"clip": 0, "task": "imitation"})
    core.frame += 20  # the worlds stand at frame 0 while the reference moved on: the max error exceeds the mean
    info = core.observe()
    d = (core.backend.state(None).body_pos.float() - info.ref_body_pos).norm(dim=-1)
    torch.testing.assert_close(info.cartesian_error, d.mean(-1))
    assert info.deviation.tolist() == (d.amax(-1) > 0.5).tolist()
    assert (d.amax(-1) > 0.5).any() or pytest.fail("frame 20 of the demo walk should be >0.5 m from frame 0")


def test_env_state_carries_the_clip_errors():
    cfg = EnvConfig(deviation=DeviationConfig(adaptive=True))
    core = RGSDCore(2, cfg)
    core.deviation_rule.clip_error[:] = 0.1
    restored = RGSDCore(2, cfg)
    restored.load_state_dict(core.state_dict())
    torch.testing.assert_close(restored.deviation_rule.clip_error, core.deviation_rule.clip_error)


def test_bad_deviation_options_are_clear_errors():
    with pytest.raises(ValueError, match=r"deviation\.metric"):
        DeviationConfig(metric="median")
    with pytest.raises(ValueError, match=r"deviation\.min"):
        DeviationConfig(adaptive=True, min=0.8, threshold=0.5)
    with pytest.raises(ValueError, match=r"deviation\.heading_deg"):
        DeviationConfig(heading_deg=200.0)


def _yaw(deg: float) -> torch.Tensor:
    half = math.radians(deg) / 2
    return torch.tensor([[math.cos(half), 0.0, 0.0, math.sin(half)]])


def test_heading_rule_ends_imitation_worlds_that_turned_away():
    from rgsd_envs.envs.termination import heading_error

    assert heading_error(_yaw(170), _yaw(-170)).item() == pytest.approx(math.radians(20), abs=1e-5)  # wraps
    cfg = DeviationConfig(heading_deg=15.0)
    rule = DeviationRule(cfg, 1)
    near = torch.zeros(3, 24)  # bodies on the reference: only the heading can end an episode
    root = torch.cat((_yaw(10), _yaw(20), _yaw(20)))
    ref = torch.cat((_yaw(0), _yaw(0), _yaw(0)))
    task = torch.tensor([True, True, False])
    clip = torch.zeros(3, dtype=torch.long)
    assert rule(near, task, clip, root, ref).tolist() == [False, True, False]
    assert not DeviationRule(DeviationConfig(), 1)(near, task, clip, root, ref).any()  # off by default


def test_env_heading_rule_sees_a_turned_pelvis():
    from rgsd_envs.utils.rotations import quat_mul

    core = RGSDCore(2, EnvConfig(deviation=DeviationConfig(heading_deg=10.0), p_imitation=1.0))
    core.reset_envs([0, 1], {"clip": 0, "task": "imitation", "start_frame": 0})
    assert not core.observe().deviation.any()  # at the reference frame
    s = core.backend.state(None)
    qpos, qvel = s.qpos.clone().double(), s.qvel.clone().double()
    qpos[1, 3:7] = quat_mul(_yaw(20).double()[0], qpos[1, 3:7])  # world 1 turned by 20 deg about the vertical
    core.backend.set_state(torch.tensor([1]), qpos[1:], qvel[1:])
    assert core.observe().deviation.tolist() == [False, True]
    before = core.set_deviation_rule(heading_deg=None)  # the same state under the body-error rule alone
    assert before == {"heading_deg": 10.0}
    assert not core.observe().deviation.any()
    with pytest.raises(ValueError, match="only the deviation rule"):
        core.set_deviation_rule(fall_height=0.2)


def test_discovery_episodes_run_to_discovery_end_frame_and_imitation_episodes_to_the_clip_end():
    import numpy as np

    from rgsd_envs.envs.torch_env import RGSDTorchEnv

    cfg = EnvConfig(discovery_end_frame=100).without_early_termination()
    env = RGSDTorchEnv(3, config=cfg)
    last = int(env.core.lib.num_frames[0]) - 1  # the demo walk: frame 90
    options = {"clip": [0, 0, 0], "start_frame": [last - 5] * 3, "task": ["imitation", "discovery", "discovery"]}
    try:
        env.reset(seed=0, options=options)
        ended = np.full(3, -1)
        for t in range(1, 30):
            tr = env.transition(torch.zeros(3, env.act_dim))
            assert tr.truncated.cpu().numpy().tolist() == tr.truncated_host.tolist()  # the host twin agrees
            done = tr.done_host
            ended = np.where((ended < 0) & done, t, ended)
            if done.any():
                env.restart(np.flatnonzero(done), {"clip": 0, "start_frame": 0, "task": "imitation"})
    finally:
        env.close()
    assert ended.tolist() == [5, 100 - last + 5, 100 - last + 5]  # imitation at the clip's end, discovery later
    with pytest.raises(ValueError, match="discovery_end_frame"):
        EnvConfig(discovery_end_frame=0)


def test_a_step_reports_as_time_outs_the_truncated_worlds_and_not_the_fallen():
    from rgsd_envs.envs.torch_env import RGSDTorchEnv

    env = RGSDTorchEnv(2, encoder_reward=False)
    last = int(env.core.lib.num_frames[0]) - 1
    try:
        env.reset(seed=0, options={"clip": [0, 0], "start_frame": [0, last - 1], "task": ["imitation", "imitation"]})
        qpos = env.core.lib.frame_state(torch.tensor([0]), torch.tensor([0])).qpos.clone()
        qpos[0, 2] = 0.15  # world 0's pelvis near the floor: lying down, it falls at this step
        env.core.backend.set_state(torch.tensor([0]), qpos.double(), torch.zeros(1, 75, dtype=torch.float64))
        _, _, term, trunc, extras = env.step(torch.zeros(2, env.act_dim))  # world 1 reaches its clip's last frame
    finally:
        env.close()
    assert term.tolist() == [True, False] and trunc.tolist() == [False, True]
    assert extras.done_host.tolist() == [True, True] and extras.done.tolist() == [True, True]
    assert extras.time_outs_host.tolist() == [False, True] and extras.time_outs.tolist() == [False, True]


def test_an_exploding_world_terminates_even_where_nothing_else_ends_an_episode():
    from rgsd_envs.envs.torch_env import RGSDTorchEnv

    env = RGSDTorchEnv(2, config=EnvConfig().without_early_termination(), encoder_reward=False)
    try:
        env.reset(seed=0, options={"clip": [0, 0], "start_frame": [0, 0], "task": ["imitation", "imitation"]})
        env.core.backend._qvel[1] = 1e12  # blow world 1 up
        _, _, term, trunc, extras = env.step(torch.zeros(2, env.act_dim))
    finally:
        env.close()
    assert extras.unstable.tolist() == [False, True] and not extras.fall.any() and not extras.deviation.any()
    assert term.tolist() == [False, True] and not trunc.any()


def test_worlds_outside_counted_leave_the_clip_errors_alone():
    rule = DeviationRule(DeviationConfig(adaptive=True), 2)
    imitation = torch.ones(4, dtype=torch.bool)
    clip = torch.tensor([0, 0, 1, 1])
    start = rule.clip_error.clone()
    rule(_distances(), imitation, clip, counted=torch.tensor([True, True, False, False]))
    assert rule.clip_error[0] < start[0]  # clip 0's worlds were counted: its EMA moved towards 0.1 m
    assert rule.clip_error[1] == start[1]


def test_next_step_reset_step_adds_no_deviation_sample(real_clip_dir):
    import gymnasium as gym
    import numpy as np

    env = gym.make_vec(
        "RGSD-SMPL-v0",
        num_envs=1,
        motions=real_clip_dir,
        autoreset_mode="NextStep",
        deviation={"adaptive": True},
        p_imitation=1.0,
    )
    env.reset(seed=0)
    rule = env.unwrapped.core.deviation_rule
    rng = np.random.default_rng(0)
    for _ in range(300):
        before = rule.clip_error.clone()
        _, _, term, trunc, _ = env.step(rng.uniform(-1, 1, (1, 69)).astype(np.float32))
        assert (rule.clip_error != before).any()  # a transition of an imitation world is a sample
        if term[0] or trunc[0]:
            break
    assert term[0] or trunc[0]
    before = rule.clip_error.clone()
    env.step(np.zeros((1, 69), np.float32))  # the reset step: the world restarts, no transition
    assert torch.equal(rule.clip_error, before)
    env.close()


def test_a_fall_is_the_pelvis_below_the_height_or_with_contact_a_non_foot_body_on_the_ground():
    """One world per case: pelvis at the height, just below it, a foot on the ground, a hand on the ground."""
    pos = torch.zeros(4, sk.NUM_BODIES, 3)
    pos[:, sk.ROOT_ID, 2] = torch.tensor([0.35, 0.3499, 0.9, 0.9])
    contact = torch.zeros(4, sk.NUM_BODIES, dtype=torch.bool)
    contact[2, sk.FOOT_BODY_IDS[0]] = True
    contact[3, sk.BODY_NAMES.index("L_Hand")] = True
    with_contact = fall_flags(pos, contact, 0.35, use_contact=True)
    assert with_contact.dtype == torch.bool and with_contact.device == pos.device
    assert with_contact.tolist() == [False, True, False, True]
    assert fall_flags(pos, contact, 0.35, use_contact=False).tolist() == [False, True, False, False]
