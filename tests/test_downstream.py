"""Downstream goal reaching end to end: rgsd downstream on a (short) demo low-level run, report, resume."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from rgsd_agents.cli import main as rgsd
from rgsd_agents.downstream.runner import DownstreamConfig, DownstreamRunner, GoalEvaluator
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


def test_the_high_level_policy_starts_at_the_commanded_style_on_request(demo_run, tmp_path):
    cfg = DownstreamConfig(
        low_level=str(demo_run),
        iterations=0,
        num_envs=2,
        init_skill="style",
        task=GoalReachingConfig(style="sidestep", episode_seconds=1.0),
    )
    runner = DownstreamRunner(cfg, tmp_path / "r", progress=False)
    with torch.no_grad():
        z = runner.ac.actor(torch.as_tensor(runner.obs))
    assert (style_cosine(z, runner.env.task.z_style) > 0.99).all()
    runner.close()


def _fake_low_level(tmp_path):
    from rgsd_eval.testing import make_fake_run

    return make_fake_run(tmp_path / "low")


def test_the_protocol_s_high_level_policy_starts_neutral(tmp_path):
    """By default no style latent is handed over: a zero output bias, so the initial mean skill is the fresh
    network's small output and the skills sampled around it point anywhere."""
    cfg = DownstreamConfig(low_level=str(_fake_low_level(tmp_path)), iterations=0, num_envs=8,
                           task=GoalReachingConfig(style="sidestep", episode_seconds=1.0))  # fmt: skip
    assert cfg.init_skill == "zero"
    runner = DownstreamRunner(cfg, tmp_path / "r", progress=False)
    try:
        assert torch.count_nonzero(runner.ac.actor.net[-1].bias) == 0
        with torch.no_grad():
            mean = runner.ac.actor(torch.as_tensor(runner.obs))
            sampled, _, _ = runner.ac.act(runner.ac.obs_normalizer(torch.as_tensor(runner.obs)))
        assert mean.norm(dim=-1).max() < 0.2  # far below the unit skills: the direction is the noise's
        cos = style_cosine(sampled, runner.env.task.z_style)
        assert cos.abs().max() < 0.9 and cos.std() > 0.05  # nowhere near the style clip, and not all alike
    finally:
        runner.close()


def test_a_mean_start_is_the_normalised_mean_of_all_clip_latents(tmp_path):
    cfg = DownstreamConfig(low_level=str(_fake_low_level(tmp_path)), iterations=0, num_envs=2, init_skill="mean",
                           task=GoalReachingConfig(style="backward", episode_seconds=1.0))  # fmt: skip
    runner = DownstreamRunner(cfg, tmp_path / "r", progress=False)
    try:
        centre = torch.nn.functional.normalize(runner.env.task.clip_latents.mean(0), dim=0)
        with torch.no_grad():
            z = runner.ac.actor(torch.as_tensor(runner.obs))
        assert (style_cosine(z, centre) > 0.99).all()
    finally:
        runner.close()
    with pytest.raises(ValueError, match="zero, mean, style"):
        DownstreamConfig(init_skill="random")


def _tiny_config(tmp_path: Path, iterations: int = 2, **changes) -> DownstreamConfig:
    """A few seconds of sidestep goal reaching over a fake low level: 4 worlds x 4 steps, 16-unit networks."""
    cfg = DownstreamConfig(low_level=str(_fake_low_level(tmp_path)), iterations=iterations, num_envs=4, horizon=4,
                           eval_episodes=2, task=GoalReachingConfig(style="sidestep", episode_seconds=1.0),
                           **changes)  # fmt: skip
    cfg.networks.actor_hidden = cfg.networks.critic_hidden = (16,)
    cfg.ppo.minibatch_size = 8
    return cfg


def test_each_evaluation_is_a_line_of_evaluations_jsonl_at_its_training_step(tmp_path):
    import json

    from rgsd_agents.downstream.report import read_evaluations

    cfg = _tiny_config(tmp_path, eval_every=1)
    runner = DownstreamRunner(cfg, tmp_path / "r", progress=False)
    try:
        runner.learn()
    finally:
        runner.close()
    lines = [json.loads(x) for x in (tmp_path / "r" / "evaluations.jsonl").read_text().splitlines()]
    assert [(r["iteration"], r["step"], r["control_steps"]) for r in lines] == [(0, 0, 0), (1, 16, 80), (2, 32, 160)]
    assert lines[-1]["eval/success_rate"] == runner.last_eval["eval/success_rate"]
    assert all("eval/style_fid" in r for r in lines)
    assert list(read_evaluations(tmp_path / "r")) == [0, 16, 32]


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


def test_a_best_of_n_run_takes_its_style_latent_from_an_eval_clip_latents_file(tmp_path, caplog):
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
    with caplog.at_level(logging.WARNING, logger="rgsd_envs.envs.goal_reaching_v0"):
        for _ in range(2):  # a downstream run builds a training and an evaluation env: one warning
            GoalReachingCore(2, run, GoalReachingConfig(style="backward"))
    assert sum("picks clip latents as the best of N" in r.getMessage() for r in caplog.records) == 1
    del latents["demo_punch"]
    path.write_text(json.dumps(latents))
    with pytest.raises(Exception, match="demo_punch"):
        GoalReachingCore(2, run, GoalReachingConfig(style="backward", clip_latents=str(path)))


def test_a_warp_low_level_s_worlds_follow_the_learner_onto_its_gpu(tmp_path):
    """The goal-reaching task's device follows training's and evaluation's rule (``env_device``): a warp low level
    (whose config names the CPU) runs its worlds on the learner's GPU; a MuJoCo one stays where the task says."""
    import yaml

    from rgsd_agents.downstream.runner import task_config

    low = _fake_low_level(tmp_path)
    cfg = DownstreamConfig(low_level=str(low))
    assert task_config(cfg, torch.device("cuda", 1)).device == "cpu"  # mujoco worlds on the host
    doc = yaml.safe_load((low / "config.yaml").read_text())
    doc.setdefault("env", {})["backend"] = "warp"
    (low / "config.yaml").write_text(yaml.safe_dump(doc))
    assert task_config(cfg, torch.device("cuda", 1)).device == "cuda:1"
    assert task_config(cfg, torch.device("cpu")).device == "cpu"
    assert cfg.task.device == "cpu", "the saved config keeps the spec; the device is chosen when the run starts"


@pytest.mark.parametrize(("style", "fid"), [("freestyle", False), ("sidestep", True)])
def test_the_report_names_style_fid_only_for_a_style_that_has_one(tmp_path, style, fid):
    from types import SimpleNamespace

    from rgsd_agents.downstream.report import write_downstream_report

    cfg = SimpleNamespace(task=GoalReachingConfig(style=style), low_level="runs/x", num_envs=4, horizon=4,
                          eval_episodes=4)  # fmt: skip
    final = {"eval/success_rate": 0.5, **({"eval/style_fid": 3.0} if fid else {})}
    text = write_downstream_report(tmp_path, cfg, [], {}, final, []).read_text()
    assert ("Style FID:" in text) == fid and ("style FID" in text) == fid
    assert ("those after the goal is reached included" in text) == fid  # episodes do not stop at the goal


def _rows(run) -> list[dict]:
    import json

    return [json.loads(x) for x in (run / "evaluations.jsonl").read_text().splitlines()]


def test_the_report_s_trained_column_is_policy_pt_s_evaluation_also_between_evaluations(tmp_path, capsys):
    """1 iteration with eval_every 10: the last scheduled evaluation is the untrained one, so the end evaluates
    policy.pt once more; report.md, the terminal summary and the rows name its iteration."""
    low = _fake_low_level(tmp_path)
    out = tmp_path / "d"
    sets = [a for kv in [*TINY, "iterations=1", "eval_every=10", "eval_episodes=2"] for a in ("--set", kv)]
    assert rgsd(["downstream", "--low-level", str(low), "--style", "sidestep", "--out", str(out), "--no-progress",
                 *sets]) == 0  # fmt: skip
    rows = _rows(out)
    assert [r["iteration"] for r in rows] == [0, 1]
    final = rows[-1]
    report = (out / "report.md").read_text()
    assert "| | untrained (iteration 0) | trained (iteration 1) |" in report
    assert (
        f"| final distance to goal (m) | {rows[0]['eval/final_distance']:.2f} | {final['eval/final_distance']:.2f} |"
        in report
    )
    assert "trained with PPO for 1 iteration of 4 worlds x 4 high-level steps." in report
    start = rows[0]["eval/start_distance"]
    assert final["eval/start_distance"] == start  # the same episodes evaluated
    assert f"| start distance to goal (m; staying at the start ends here) | {start:.2f} | {start:.2f} |" in report
    stdout = capsys.readouterr().out
    assert "evaluation: untrained (iteration 0) -> policy.pt (iteration 1)" in stdout
    assert f"final distance (m): {rows[0]['eval/final_distance']:.3f} -> {final['eval/final_distance']:.3f}" in stdout
    assert f"start distance (m; staying at the start ends here): {start:.3f}" in stdout


def test_an_evaluation_of_the_final_iteration_is_not_repeated_at_the_end(tmp_path):
    cfg = _tiny_config(tmp_path, eval_every=2)
    runner = DownstreamRunner(cfg, tmp_path / "r", progress=False)
    try:
        runner.learn()
        scheduled = dict(runner.last_eval)
        runner.write_report()
        assert runner.last_eval == scheduled and runner.last_eval_iteration == 2
        runner.evaluate()  # the same policy evaluated again: its row is replaced, not repeated
    finally:
        runner.close()
    assert [r["iteration"] for r in _rows(tmp_path / "r")] == [0, 2]


def test_a_resumed_run_s_report_gives_the_run_s_iterations_and_evaluates_its_final_policy_once(tmp_path):
    def cfg(iterations):
        return _tiny_config(tmp_path, iterations, eval_every=10, checkpoint_every=10)

    run = tmp_path / "r"
    first = DownstreamRunner(cfg(2), run, progress=False)
    try:
        first.learn()
        first.write_report()
    finally:
        first.close()
    assert [r["iteration"] for r in _rows(run)] == [0, 2]
    resumed = DownstreamRunner.resume(run, {"iterations": 4}, progress=False)
    try:
        resumed.learn()
        report = resumed.write_report().read_text()
    finally:
        resumed.close()
    assert [r["iteration"] for r in _rows(run)] == [0, 2, 4]
    assert (
        "trained with PPO for 4 iterations of 4 worlds x 4 high-level steps (2 in this session, resumed after 2)."
        in report
    )
    assert "| | untrained (iteration 0) | trained (iteration 4) |" in report
    assert f"| success rate | {_rows(run)[0]['eval/success_rate']:.2f} |" in report  # the untrained run's, kept


def test_a_run_whose_low_level_moved_resumes_with_low_level_only_over_the_same_policy(tmp_path, capsys):
    import shutil

    import yaml

    from rgsd_envs.utils.files import file_sha256
    from rgsd_eval.testing import make_fake_run

    run = tmp_path / "r"
    first = DownstreamRunner(_tiny_config(tmp_path, 1, eval_every=10, checkpoint_every=10), run, progress=False)
    try:
        first.learn()
    finally:
        first.close()
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["low_level_sha256"] == file_sha256(tmp_path / "low" / "policy.pt")
    moved = tmp_path / "elsewhere" / "low"
    moved.parent.mkdir()
    shutil.move(tmp_path / "low", moved)
    sets = ["--set", "iterations=2", "--no-progress"]
    assert rgsd(["downstream", "--resume", str(run), *sets]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err == (
        f"error: {run / 'config.yaml'}: field 'low_level': low-level run folder not found: {tmp_path / 'low'}; if it "
        f"moved, continue with: rgsd downstream --resume {run} --low-level NEW_FOLDER\n"
    )
    other = make_fake_run(tmp_path / "other", seed=1)  # another policy: not the one the run trained over
    assert rgsd(["downstream", "--resume", str(run), "--low-level", str(other), *sets]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        f"error: {other / 'policy.pt'}: not the low-level policy this downstream run trained over"
    ), err
    assert rgsd(["downstream", "--resume", str(run), "--low-level", str(moved), *sets]) == 0
    capsys.readouterr()
    assert yaml.safe_load((run / "config.yaml").read_text())["low_level"] == str(moved.resolve())
    assert load_policy(run / "policy.pt").meta["iteration"] == 2
    # a run that records no sha256 cannot show the moved folder is its own: it is started again instead
    (run / "config.yaml").write_text(yaml.safe_dump({**saved, "low_level_sha256": None}))
    assert rgsd(["downstream", "--resume", str(run), "--low-level", str(other), *sets]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "records no sha256 of its low-level policy.pt" in err
    assert f"rgsd downstream --config {run / 'config.yaml'} --low-level {other} --out NEW_RUN" in err


def _evaluator(tmp_path: Path, seed: int = 0, eval_episodes: int = 4, episode_seconds: float = 1.0) -> GoalEvaluator:
    cfg = DownstreamConfig(low_level=str(tmp_path / "low"), seed=seed, eval_episodes=eval_episodes,
                           task=GoalReachingConfig(style="sidestep", episode_seconds=episode_seconds))  # fmt: skip
    return GoalEvaluator(cfg, torch.device("cpu"))


def _constant_actor(skill: torch.Tensor) -> torch.nn.Module:
    """A high-level actor whose mean skill is ``skill`` for every observation."""
    from rgsd_envs.runs.policy import PolicyMLP

    actor = PolicyMLP(GOAL_OBS_DIM, skill.numel(), (8,))
    with torch.no_grad():
        actor.net[-1].weight.zero_()
        actor.net[-1].bias.copy_(skill)
    return actor


def test_two_seeds_share_no_evaluation_goal_and_no_training_world(tmp_path):
    """World i of an int-seeded env is seeded seed + i, so seed 1's worlds would be seed 0's shifted by one."""
    _fake_low_level(tmp_path)
    actor = _constant_actor(torch.ones(16))
    goals = {}
    for seed in (0, 1):
        ev = _evaluator(tmp_path, seed)
        try:
            ev.run(actor)
            first = np.array([t["goal"] for t in ev.trajectories])
            ev.run(actor)  # every evaluation of a run plays the same episodes
            np.testing.assert_array_equal(first, [t["goal"] for t in ev.trajectories])
        finally:
            ev.close()
        goals[seed] = first
    assert not np.isclose(goals[0][:, None], goals[1][None]).all(-1).any(), "a goal of seed 0 is one of seed 1's"
    starts = []
    for seed in (0, 1):
        runner = DownstreamRunner(_tiny_config(tmp_path, 0, seed=seed), tmp_path / f"r{seed}", progress=False)
        starts.append(runner.env.task.goal.cpu().numpy())
        runner.close()
    assert not np.isclose(starts[0][:, None], starts[1][None]).all(-1).any()
    assert not np.isclose(starts[0][:, None], goals[0][None]).all(-1).any(), "training replays an evaluation goal"


def test_an_episode_s_path_ends_where_it_ended_and_the_start_distance_is_recorded(tmp_path):
    """A world that falls restarts at the centre within the step that ends it: its path must end at the fall, where
    the final distance was measured; the start distance is what staying at the start scores."""
    _fake_low_level(tmp_path)
    ev = _evaluator(tmp_path, eval_episodes=6, episode_seconds=4.0)
    try:
        out = ev.run(_constant_actor(torch.ones(16)))
    finally:
        ev.close()
    paths = ev.trajectories
    assert out["eval/fall_rate"] > 0
    ends = [np.linalg.norm(t["root"][-1] - t["goal"]) for t in paths]
    assert out["eval/final_distance"] == pytest.approx(np.mean(ends), abs=1e-5)
    assert all(np.linalg.norm(t["root"][-1]) > 0.05 for t in paths), "a path jumps back to the centre"
    assert min(len(t["root"]) for t in paths) < max(len(t["root"]) for t in paths), "no episode ended before others"
    starts = [np.linalg.norm(t["root"][0] - t["goal"]) for t in paths]
    assert out["eval/start_distance"] == pytest.approx(np.mean(starts), abs=1e-5)
    assert out["eval/start_distance"] == pytest.approx(np.mean([np.linalg.norm(t["goal"]) for t in paths]), abs=0.05)


def test_evaluation_sends_the_unclamped_mean_skill_as_training_sends_its_samples(tmp_path):
    """The env normalises the skill: clamping a component above 1 first would turn the direction evaluated."""
    _fake_low_level(tmp_path)
    mean = torch.zeros(16)
    mean[0], mean[1] = 3.0, 0.5
    ev = _evaluator(tmp_path, eval_episodes=2)
    sent = []
    step = ev.env.step
    ev.env.step = lambda z: (sent.append(z.clone()), step(z))[1]
    try:
        ev.run(_constant_actor(mean))
    finally:
        ev.close()
    direction = torch.nn.functional.normalize(mean, dim=0)
    for z in sent:
        torch.testing.assert_close(torch.nn.functional.normalize(z, dim=-1), direction.expand_as(z))
