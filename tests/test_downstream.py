"""Downstream goal reaching end to end: rgsd downstream on a (short) demo low-level run, report, resume."""

from __future__ import annotations

import pytest
import torch

from rgsd_agents.cli import main as rgsd
from rgsd_agents.downstream import DownstreamConfig, DownstreamRunner
from rgsd_envs.envs.goal_reaching_v0 import GOAL_OBS_DIM, GoalReachingConfig, style_cosine
from rgsd_envs.runs.policy import load_policy

pytestmark = pytest.mark.slow

TINY = [
    "num_envs=4", "horizon=4", "eval_episodes=4", "eval_every=2", "checkpoint_every=2",
    "task.episode_seconds=1.0", "networks.actor_hidden=[16]", "networks.critic_hidden=[16]", "ppo.minibatch_size=8",
]  # fmt: skip


def test_rgsd_downstream_trains_and_writes_its_report(demo_run, tmp_path):
    out = tmp_path / "goal"
    sets = [a for kv in [*TINY, "iterations=3"] for a in ("--set", kv)]
    code = rgsd(
        ["downstream", "--low-level", str(demo_run), "--style", "sidestep", "--out", str(out), "--no-progress", *sets]
    )
    assert code == 0
    for name in ("config.yaml", "policy.pt", "report.md", "trajectories.png", "curves.png", "checkpoints/latest.pt"):
        assert (out / name).is_file(), name
    assert list((out / "tb").glob("events.out.tfevents.*"))
    policy = load_policy(out / "policy.pt")
    assert (policy.obs_dim, policy.act_dim) == (GOAL_OBS_DIM, 16)
    assert policy.meta["style"] == "sidestep"
    report = (out / "report.md").read_text()
    assert "success rate" in report and "style FID" in report


def test_downstream_resume_continues_exactly(demo_run, tmp_path):
    def cfg(iterations):
        return DownstreamConfig(
            low_level=str(demo_run), iterations=iterations, num_envs=4, horizon=4, eval_every=100, checkpoint_every=2,
            task=GoalReachingConfig(style="backward", episode_seconds=1.0),
        )  # fmt: skip

    def small(c):
        c.networks.actor_hidden = c.networks.critic_hidden = (16,)
        c.ppo.minibatch_size = 8
        return c

    straight = DownstreamRunner(small(cfg(4)), tmp_path / "a", progress=False)
    straight.learn()
    first = DownstreamRunner(small(cfg(2)), tmp_path / "b", progress=False)
    first.learn()
    first.close()
    resumed = DownstreamRunner.resume(tmp_path / "b", {"iterations": 4}, progress=False)
    resumed.learn()
    for a, b in zip(straight.ac.state_dict().values(), resumed.ac.state_dict().values()):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    assert straight.history[-1]["losses/policy_loss"] == resumed.history[-1]["losses/policy_loss"]
    straight.close()
    resumed.close()


def test_downstream_needs_a_trained_low_level_run(tmp_path, capsys):
    code = rgsd(["downstream", "--low-level", str(tmp_path / "missing"), "--out", str(tmp_path / "x")])
    assert code == 2
    assert "low-level run folder not found" in capsys.readouterr().err


def test_the_high_level_policy_starts_at_the_commanded_style(demo_run, tmp_path):
    cfg = DownstreamConfig(
        low_level=str(demo_run),
        iterations=0,
        num_envs=2,
        task=GoalReachingConfig(style="sidestep", episode_seconds=1.0),
    )
    runner = DownstreamRunner(cfg, tmp_path / "r", progress=False)
    with torch.no_grad():
        z = runner.ac.actor(torch.as_tensor(runner.obs))
    assert (style_cosine(z, runner.env.task.z_style) > 0.99).all()
    runner.close()


def test_a_calm_low_level_run_gives_its_style_latent_from_its_motion_encoder(tmp_path):
    from rgsd_envs.envs.goal_reaching_v0 import GoalReachingCore
    from rgsd_envs.rewards.encoders import clip_embeddings, load_encoder
    from rgsd_eval.testing import make_fake_run

    method = {"name": "calm", "latent_choice": "encoder", "encoder": "calm_encoder.pt"}
    run = make_fake_run(tmp_path / "calm", p_imitation=0.0, method=method)
    core = GoalReachingCore(2, run, GoalReachingConfig(style="backward")).core
    lib = core.lib
    calm = clip_embeddings(load_encoder(run / "calm_encoder.pt"), core.ref_inputs, lib.clip_of_frame, lib.num_clips)
    frozen = clip_embeddings(load_encoder(run / "encoder.pt"), core.ref_inputs, lib.clip_of_frame, lib.num_clips)
    torch.testing.assert_close(core.clip_embeddings.cpu(), calm)
    assert not torch.allclose(core.clip_embeddings.cpu(), frozen)


def test_a_best_of_n_run_takes_its_style_latent_from_an_eval_clip_latents_file(tmp_path):
    import json

    from rgsd_envs.envs.goal_reaching_v0 import GoalReachingCore
    from rgsd_eval.testing import make_fake_run

    run = make_fake_run(tmp_path / "ase", p_imitation=0.0, method={"name": "ase", "latent_choice": "best_of_n"})
    names = ["demo_walk", "demo_run", "demo_sidestep", "demo_backward", "demo_punch"]
    latents = {n: [float(i == k) for i in range(16)] for k, n in enumerate(names)}
    path = tmp_path / "clip_latents.json"
    path.write_text(json.dumps(latents))
    task = GoalReachingCore(2, run, GoalReachingConfig(style="backward", clip_latents=str(path)))
    torch.testing.assert_close(task.z_style.cpu(), torch.eye(16)[3:4])  # the one backward clip
    del latents["demo_punch"]
    path.write_text(json.dumps(latents))
    with pytest.raises(Exception, match="demo_punch"):
        GoalReachingCore(2, run, GoalReachingConfig(style="backward", clip_latents=str(path)))
