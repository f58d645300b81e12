"""The viewer's goal-reaching session over fabricated runs: the high level's action is the low-level run's skill,
whatever its size."""

from __future__ import annotations

import pytest
import yaml

from rgsd_agents.viewer.goal import GoalSession
from rgsd_envs.envs.goal_reaching_v0 import GOAL_OBS_DIM
from rgsd_envs.runs.policy import PolicyMLP
from rgsd_envs.utils.files import InputFileError
from rgsd_eval.testing import make_fake_run


def _downstream(tmp_path, skill_dim: int, act_dim: int, env: dict | None = None):
    """A downstream run folder (config.yaml naming a fabricated low level with ``skill_dim`` and ``env`` settings, a
    random policy.pt mapping the goal observation to ``act_dim``)."""
    low = make_fake_run(tmp_path / f"low{skill_dim}", skill_dim=skill_dim, hidden=(16,), encoder_hidden=(16,), env=env)
    ds = tmp_path / f"ds{skill_dim}_{act_dim}"
    ds.mkdir()
    (ds / "config.yaml").write_text(yaml.safe_dump({"low_level": str(low), "task": {"style": "freestyle"}}))
    PolicyMLP(GOAL_OBS_DIM, act_dim, (16,)).save(ds / "policy.pt", fabricated=True)
    return ds


def test_a_high_level_over_a_32_d_low_level_plays(tmp_path):
    session = GoalSession(_downstream(tmp_path, 32, 32))
    try:
        assert session.task.core.skill_dim == 32
        session.step()
        assert session.frame == 1 and session.body_positions().shape == (1, 24, 3)
    finally:
        session.close()


def test_a_low_level_trained_on_warp_plays_on_native_mujoco_on_the_cpu(tmp_path):
    """A GPU low level's config names MuJoCo Warp; the viewer needs neither Warp nor a GPU to show it."""
    session = GoalSession(_downstream(tmp_path, 16, 16, env={"backend": "warp"}))
    try:
        cfg = session.task.core.cfg
        assert (cfg.backend, cfg.device) == ("mujoco", "cpu")
        session.step()
        assert session.frame == 1
    finally:
        session.close()


def test_a_high_level_of_the_wrong_skill_size_is_refused_naming_the_action_size(tmp_path):
    ds = _downstream(tmp_path, 32, 16)
    with pytest.raises(InputFileError, match=r"field 'act_dim'.*364 -> 16.*env.skill_dim 32\) maps 364 -> 32"):
        GoalSession(ds)


def test_the_viewer_plays_the_unclamped_mean_skill(tmp_path):
    """As evaluation does and training's samples are: the env normalises the skill, so no component is clamped."""
    import torch

    ds = _downstream(tmp_path, 16, 16)
    policy = PolicyMLP(GOAL_OBS_DIM, 16, (16,))
    mean = torch.zeros(16)
    mean[0], mean[1] = 3.0, 0.5
    with torch.no_grad():
        policy.net[-1].weight.zero_()
        policy.net[-1].bias.copy_(mean)
    policy.save(ds / "policy.pt", fabricated=True)
    session = GoalSession(ds)
    sent = []
    step = session.task.step
    session.task.step = lambda z: (sent.append(z.clone()), step(z))[1]
    try:
        session.step()
    finally:
        session.close()
    torch.testing.assert_close(torch.nn.functional.normalize(sent[0], dim=-1)[0], mean / mean.norm())


def test_a_low_level_policy_other_than_the_recorded_one_is_played_with_a_warning(tmp_path, caplog):
    import logging

    from rgsd_envs.utils.files import file_sha256

    ds = _downstream(tmp_path, 16, 16)
    config = ds / "config.yaml"
    doc = yaml.safe_load(config.read_text())
    low_policy = tmp_path / "low16" / "policy.pt"
    for recorded, warned in ((file_sha256(low_policy), False), ("0" * 64, True)):
        config.write_text(yaml.safe_dump({**doc, "low_level_sha256": recorded}))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="rgsd_agents.downstream.low_level"):
            GoalSession(ds).close()
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == int(warned), lines
    assert lines[0].startswith(f"{low_policy} (sha256 {file_sha256(low_policy)[:12]}...) is not the low-level policy")
    assert f"({config} records low_level_sha256 000000000000...)" in lines[0]
