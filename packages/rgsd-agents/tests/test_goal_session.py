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


def _downstream(tmp_path, skill_dim: int, act_dim: int):
    """A downstream run folder (config.yaml naming a fabricated low level with ``skill_dim``, a random policy.pt
    mapping the goal observation to ``act_dim``)."""
    low = make_fake_run(tmp_path / f"low{skill_dim}", skill_dim=skill_dim, hidden=(16,), encoder_hidden=(16,))
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


def test_a_high_level_of_the_wrong_skill_size_is_refused_naming_the_action_size(tmp_path):
    ds = _downstream(tmp_path, 32, 16)
    with pytest.raises(InputFileError, match=r"field 'act_dim'.*364 -> 16.*env.skill_dim 32\) maps 364 -> 32"):
        GoalSession(ds)
