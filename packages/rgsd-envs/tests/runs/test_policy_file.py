"""The exported policy file and the run folder's stored clip latents, as evaluation and downstream tasks read them."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import yaml

from rgsd_envs.envs.goal_reaching_v0 import GoalReachingConfig, GoalReachingCore
from rgsd_envs.envs.observations import POLICY_OBS_DIM
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.runs.policy import PolicyMLP, load_policy
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.files import InputFileError


def test_a_tanh_policy_round_trips_and_squashes_its_mean_action(tmp_path):
    torch.manual_seed(0)
    pol = PolicyMLP(POLICY_OBS_DIM, 69, (8,), "relu", output="tanh")
    with torch.no_grad():
        pol.net[-1].bias.fill_(5.0)  # a raw output far outside [-1, 1]
    pol.save(tmp_path / "policy.pt")
    back = load_policy(tmp_path / "policy.pt")
    obs = torch.randn(4, POLICY_OBS_DIM)
    out = back(obs)
    assert back.output == "tanh" and out.abs().max() < 1.0
    torch.testing.assert_close(out, torch.tanh(back.net(back.normalizer(obs))))
    torch.testing.assert_close(out, pol(obs))
    assert load_policy(_saved(PolicyMLP(POLICY_OBS_DIM, 69, (8,)), tmp_path / "linear.pt")).output == "linear"
    with pytest.raises(ValueError, match="output must be one of"):
        PolicyMLP(POLICY_OBS_DIM, 69, (8,), output="sigmoid")


def _saved(pol: PolicyMLP, path):
    pol.save(path)
    return path


def test_a_run_s_stored_clip_latents_are_checked_and_used_by_goal_reaching(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    PolicyMLP(POLICY_OBS_DIM, 69, hidden=(8,), output="tanh").save(run / "policy.pt")
    (run / "config.yaml").write_text(yaml.safe_dump({"env": {"motions": "demo", "p_imitation": 0.0}}))
    method = {"name": "fb_cpr", "latent_choice": "clip_latents", "clip_latents": "clip_latents.json"}
    (run / "method.json").write_text(json.dumps(method))
    with pytest.raises(InputFileError, match="clip_latents"):
        RunDir(run).method()  # the file it names is missing
    names = list(MotionLib("demo").names)
    rng = np.random.default_rng(0)
    stored = {n: rng.standard_normal(16).tolist() for n in names}
    (run / "clip_latents.json").write_text(json.dumps(stored))
    assert RunDir(run).clip_latents_path() == run / "clip_latents.json"
    core = GoalReachingCore(1, run, GoalReachingConfig(num_threads=1))
    expected = torch.nn.functional.normalize(torch.tensor([stored[n] for n in names], dtype=torch.float32), dim=-1)
    torch.testing.assert_close(core.clip_latents.cpu(), expected)
    core.core.close()
