"""Evaluation protocols: the paper's settings in one flag, flags over them, the sweep's motions, and the
top-view figure's kappa (never drawn empty), per-category FID under sampled latents."""

from __future__ import annotations

import argparse
import csv
import json
import tempfile

import pytest
import yaml

from rgsd_eval import cli
from rgsd_eval.config import EvalConfig
from rgsd_eval.testing import make_fake_run


def _parse(argv: list[str]) -> argparse.Namespace:
    return cli.build_parser().parse_args(["--run", "a", "--out", "o", *argv])


def test_the_paper_protocol_holds_the_paper_s_numbers():
    cfg = cli.config_from_args(_parse(["--protocol", "paper"]))
    assert cfg.protocol == "paper"
    assert cfg.rollouts == 500 and cfg.action_noise == "policy"  # each run's own policy std
    assert cfg.imitation_rollouts == 500  # stochastic rollouts, so all 500 count
    assert cfg.best_of == 500
    assert cfg.discovery_kappa == 50.0 and cfg.trajectory_kappa_value == 50.0
    assert cfg.trajectory_rollouts == 150
    assert cfg.kappas == (20.0, 100.0, 1000.0) and cfg.sweep_clips == 3 and not cfg.sweep_all_clips
    assert cfg.sweep_categories == ("run", "sidestep", "backward")


def test_the_quick_protocol_is_the_default_and_keeps_today_s_settings():
    cfg = cli.config_from_args(_parse([]))
    assert cfg.protocol == "quick" and cfg == EvalConfig()
    assert (cfg.rollouts, cfg.action_noise, cfg.imitation_rollouts, cfg.best_of) == (16, 0.0, 1, 64)
    assert cfg.discovery_kappa is None and cfg.sweep_all_clips and cfg.trajectory_kappa_value == 100.0
    assert EvalConfig.for_protocol("quick") == EvalConfig()


def test_flags_override_the_protocol_one_by_one(tmp_path):
    args = _parse(["--protocol", "paper", "--rollouts", "8", "--trajectory-kappa", "20", "--best-of", "9"])
    cfg = cli.config_from_args(args)
    assert (cfg.rollouts, cfg.best_of, cfg.trajectory_kappa) == (8, 9, 20.0)
    assert cfg.action_noise == "policy" and cfg.discovery_kappa == 50.0  # the rest stays the paper's
    assert cfg.overrides() == {"rollouts": 8, "best_of": 9, "trajectory_kappa": 20.0}
    # a --config file starts from its protocol; flags still win
    path = tmp_path / "eval.yaml"
    path.write_text(yaml.safe_dump({"protocol": "paper", "rollouts": 40}))
    cfg = cli.config_from_args(_parse(["--config", str(path), "--action-noise", "0.1"]))
    assert (cfg.protocol, cfg.rollouts, cfg.action_noise, cfg.best_of) == ("paper", 40, 0.1, 500)
    assert cfg.overrides()["action_noise"] == 0.1  # an explicit override, named in the report
    assert cli.config_from_args(_parse(["--action-noise", "policy"])).imitation_rollouts == 16
    with pytest.raises(SystemExit):
        _parse(["--action-noise", "-0.1"])


def test_each_run_acts_with_its_own_policy_std(tmp_path):
    import math

    from rgsd_envs.runs.policy import PolicyMLP
    from rgsd_eval.evaluate import action_noise
    from rgsd_eval.runs import load_run

    plain = load_run(make_fake_run(tmp_path / "plain"))  # no std recorded: the trainer's default
    assert plain.action_std == pytest.approx(math.exp(-2.9)) and "default" in plain.action_std_source
    ppo = make_fake_run(tmp_path / "ppo")
    PolicyMLP(375, 69, (32, 32)).save(ppo / "policy.pt", action_std=[0.1] * 69, global_step=1234)
    run = load_run(ppo)
    assert run.action_std == pytest.approx(0.1) and run.training_samples == 1234
    fb = make_fake_run(tmp_path / "fb", method={"name": "fb_cpr", "latent_choice": "encoder", "encoder": "b.pt"})
    raw = yaml.safe_load((fb / "config.yaml").read_text())
    (fb / "config.yaml").write_text(yaml.safe_dump({**raw, "networks": {"init_log_std": -1.0}}))
    fb_run = load_run(fb)
    assert fb_run.method == "fb_cpr" and fb_run.action_std == pytest.approx(0.2)  # Meta Motivo's, not the PPO std
    std, info = action_noise(run, EvalConfig.for_protocol("paper"))
    assert std == pytest.approx(0.1) and info["source"] == "policy.pt action_std"
    std, info = action_noise(run, EvalConfig.for_protocol("paper", action_noise=0.3))  # the override wins
    assert std == 0.3 and info["std"] == 0.3


def test_an_unknown_protocol_is_refused_naming_the_choices():
    with pytest.raises(SystemExit):
        _parse(["--protocol", "fast"])
    with pytest.raises(ValueError, match="quick, paper"):
        EvalConfig.for_protocol("fast")


def test_sweep_motions_are_chosen_by_category_then_filled():
    from rgsd_eval.protocol import PAPER, sweep_clip_ids

    demo = ["walk", "run", "sidestep", "backward", "punch"]
    assert sweep_clip_ids(demo, PAPER.sweep_clips, PAPER.sweep_categories) == [1, 2, 3]
    # no sidestep clip: the first clip of the next category stands in (in the library's order)
    cats = ["walk", "walk", "run", "run", "backward", "punch"]
    assert sweep_clip_ids(cats, 3, ("run", "sidestep", "backward")) == [2, 4, 0]
    assert sweep_clip_ids(cats, 5, ()) == [0, 2, 4, 5, 1]  # no preference: the first clip of each category


def test_a_trajectory_kappa_outside_the_sweep_is_refused_by_the_plot_with_the_values_available(tmp_path):
    """A figure of a kappa that was not rolled out would have no vMF paths: the plot refuses it."""
    import numpy as np

    from rgsd_eval.evaluate import RunEvaluation
    from rgsd_eval.plots import plot_trajectories

    ref = np.zeros((5, 3))
    ev = RunEvaluation("r", {}, ["a"], [ref], [ref[None]], {20.0: [ref[None]], 1000.0: [ref[None]]}, None)
    with pytest.raises(ValueError, match=r"--trajectory-kappa.*50.*20, 1000"):
        plot_trajectories(ev, 50.0, tmp_path / "t.png")


@pytest.fixture(scope="module")
def kappa_outside(tmp_path_factory):
    """A fake run evaluated with kappas 20, 1000 and trajectory_kappa 50; every top view drawn is recorded."""
    from rgsd_eval import plots
    from rgsd_eval.pipeline import run_evaluation

    root = tmp_path_factory.mktemp("traj")
    run = make_fake_run(root / "run")
    drawn: list[tuple[str, int]] = []
    original = plots.draw_top_view

    def spy(ax, ref, imitation, variants, title, max_variants=150):
        drawn.append((title, 0 if variants is None else len(variants)))
        original(ax, ref, imitation, variants, title, max_variants)

    mp = pytest.MonkeyPatch()
    mp.setattr(plots, "draw_top_view", spy)
    cfg = EvalConfig(rollouts=2, kappas=(20.0, 1000.0), trajectory_kappa=50.0, video=False, progress=False)
    try:
        paths = run_evaluation([run], "demo", root / "out", cfg)
    finally:
        mp.undo()
    return {
        "drawn": drawn,
        "json": json.loads(paths["json"].read_text()),
        "md": paths["report"].read_text(),
        "csv": list(csv.DictReader(paths["csv"].open())),
    }


def test_a_trajectory_kappa_outside_the_sweep_is_rolled_out_for_the_figure(kappa_outside):
    div = kappa_outside["json"]["runs"]["run"]["diversity"]
    assert set(div) == {"20", "1000", "50"}
    assert div["50"]["mean"]["rollouts"] == 5 * 2 and len(div["50"]["clips"]) == 5
    clip_panels = [n for t, n in kappa_outside["drawn"] if t.startswith("demo_")]  # trajectories.png: one per clip
    assert len(clip_panels) == 5 and all(n == 2 for n in clip_panels)
    assert "z ~ vMF(z_m, 50) red" in kappa_outside["md"]


def test_fid_under_sampled_latents_is_reported_per_category(kappa_outside):
    run = kappa_outside["json"]["runs"]["run"]
    for key in ("20", "1000", "50"):
        d = run["diversity"][key]
        assert list(d["categories"]) == ["walk", "run", "sidestep", "backward", "punch"]
        for cat, v in d["categories"].items():
            assert v["clips"] == 1 and v["rollouts"] == 2
            (clip,) = [c for c in d["clips"].values() if c["category"] == cat]
            # one clip per demo category: the category's pooled windows are that clip's
            assert v["fid"] == pytest.approx(clip["fid"], rel=1e-9) and v["fid"] > 0
            assert v["err_cm"] == pytest.approx(clip["err_cm"])
    rows = {
        (r["kappa"], r["name"], r["metric"]): r["value"]
        for r in kappa_outside["csv"]
        if r["section"] == "diversity" and r["scope"] == "category"
    }
    assert float(rows[("50", "walk", "fid")]) == pytest.approx(run["diversity"]["50"]["categories"]["walk"]["fid"])
    md = kappa_outside["md"]
    section = md[md.index("FID per category under sampled latents") :]
    header = next(line for line in section.splitlines() if line.startswith("| Run | κ |"))
    assert "Walk FID" in header and "Punch FID" in header
    assert f"| run | 50 | {run['diversity']['50']['categories']['walk']['fid']:.2f} |" in section


def test_each_fid_has_the_number_of_rollout_windows_behind_it(kappa_outside):
    """Every clip's rollouts run its whole length: a clip's FID is fitted to rollouts x its windows, a pooled FID
    to the sum over its clips."""
    from rgsd_eval.features import num_windows

    doc = kappa_outside["json"]
    run = doc["runs"]["run"]
    im = run["imitation"]
    definition = doc["metric_definitions"]["fid_windows"]
    assert "overlap" in definition and "do not compare" in definition
    windows = {name: num_windows(c["frames"]) for name, c in im["clips"].items()}
    for name, c in im["clips"].items():
        assert c["fid_windows"] == c["rollouts"] * windows[name] == windows[name]  # one imitation rollout: no noise
        assert im["categories"][c["category"]]["fid_windows"] == windows[name]  # one clip per demo category
    assert im["all"]["fid_windows"] == sum(windows.values())
    d = run["diversity"]["50"]
    assert all(v["fid_windows"] == 2 * windows[name] for name, v in d["clips"].items())
    assert d["mean"]["fid_windows"] == 2 * sum(windows.values())
    rows = [r for r in kappa_outside["csv"] if r["metric"] == "fid_windows" and r["scope"] == "all"]
    assert [int(r["value"]) for r in rows] == [sum(windows.values())]


def test_the_kappa_plan_rolls_the_sweep_out_on_three_motions_and_discovery_on_every_clip():
    demo = ["walk", "run", "sidestep", "backward", "punch"]
    paper = EvalConfig.for_protocol("paper")
    assert paper.kappa_plan(demo, [0, 1]) == {
        20.0: [1, 2, 3],
        100.0: [1, 2, 3],
        1000.0: [1, 2, 3],
        50.0: [0, 1, 2, 3, 4],
    }
    quick = EvalConfig()  # today's plan: every kappa on every clip, nothing more
    assert quick.kappa_plan(demo, [0]) == {k: [0, 1, 2, 3, 4] for k in (20.0, 100.0, 1000.0)}
    # a video kappa outside the plan is rolled out on the video clips only
    assert EvalConfig(video_kappa=5.0).kappa_plan(demo, [0, 3])[5.0] == [0, 3]


def test_a_paper_protocol_report_names_its_protocol_and_what_was_changed(tmp_path):
    from rgsd_eval.pipeline import run_evaluation

    run = make_fake_run(tmp_path / "run", p_imitation=0.0, encoder_init="random")  # a best-of-N run
    cfg = EvalConfig.for_protocol("paper", rollouts=2, best_of=3, video=False, progress=False, batch_size=7)
    paths = run_evaluation([run], "demo", tmp_path / "out", cfg)
    doc = json.loads(paths["json"].read_text())
    m = doc["runs"]["run"]
    assert doc["protocol"] == {"name": "paper", "changed": {"rollouts": 2, "best_of": 3}}
    assert m["latent"] == "best-of-3"
    assert all(v["rollouts"] == 2 for v in m["imitation"]["clips"].values())  # stochastic: every rollout counts
    div = m["diversity"]
    assert set(div) == {"20", "100", "1000", "50"}
    for key in ("20", "100", "1000"):
        assert list(div[key]["clips"]) == ["demo_run", "demo_sidestep", "demo_backward"]
        assert list(div[key]["categories"]) == ["run", "sidestep", "backward"] and div[key]["roles"] == ["sweep"]
    assert div["50"]["roles"] == ["discovery", "trajectories"] and len(div["50"]["categories"]) == 5
    md = paths["report"].read_text()
    assert "Protocol: **paper**; changed: rollouts = 2, best_of = 3." in md
    assert "2 stochastic imitation rollouts per clip (action noise: each run's policy std)" in md
    assert m["action_noise"]["std"] == pytest.approx(0.055, abs=1e-3) and "run records no std" in md
    table = md[md.index("FID per category under sampled latents") :].splitlines()
    row = next(line for line in table if line.startswith("| run | 20 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == "-" and cells[6] == "-"  # walk and punch were not rolled out at a sweep kappa
    assert all(float(c) > 0 for c in cells[3:6] + cells[7:])


def test_rollouts_beyond_the_batch_run_in_chunks_of_worlds_with_the_same_results():
    """The paper's 500 rollouts per clip are stepped batch_size worlds at a time: chunking changes nothing."""
    import numpy as np

    from rgsd_envs.envs.torch_env import RGSDTorchEnv
    from rgsd_envs.motion.library import MotionLib
    from rgsd_eval.latents import vmf_samples
    from rgsd_eval.rollouts import RolloutJobs, run_rollouts
    from rgsd_eval.runs import load_run

    lib = MotionLib("demo")
    with tempfile.TemporaryDirectory() as d:
        loaded = load_run(make_fake_run(d + "/r"))
    z = vmf_samples(np.eye(16)[0], 20.0, 11, 0, 0)
    jobs = RolloutJobs(np.arange(11) % lib.num_clips, z, 1, False)
    results = []
    for worlds in (4, 11):
        env = RGSDTorchEnv(worlds, encoder_reward=False, config=loaded.env_config, motions=lib)
        assert env.unwrapped.num_envs == worlds
        try:
            results.append(run_rollouts(env, loaded.policy, jobs, fall_height=loaded.fall_height))
        finally:
            env.close()
    chunked, whole = results
    np.testing.assert_allclose(chunked.error, whole.error, rtol=1e-5)
    np.testing.assert_allclose(chunked.root_pos.data, whole.root_pos.data, rtol=1e-5, atol=1e-6)
    assert np.isfinite(chunked.error).all()


def test_eval_plan_counts_the_rollouts_and_world_steps_of_each_protocol():
    import math

    from rgsd_envs.motion.library import MotionLib
    from rgsd_eval.batches import BATCH_STEP_WORK, WORLD_WORK
    from rgsd_eval.evaluate import eval_plan

    lib = MotionLib("demo")
    m, steps = lib.num_clips, lib.num_frames.numpy() - 1
    quick = eval_plan(lib, EvalConfig(video=False))
    # one deterministic imitation rollout per clip, 16 vMF rollouts per clip at each of the 3 sweep kappas
    assert quick.rollouts == m * (1 + 3 * 16) == 245
    assert quick.world_steps == 49 * int(steps.sum())  # each rollout's own steps
    # one batch of 245 worlds runs to the longest clip, each of its steps with its fixed work
    assert quick.step_work == quick.world_steps + int(steps.max()) * (BATCH_STEP_WORK + 245 * WORLD_WORK)
    paper = eval_plan(lib, EvalConfig.for_protocol("paper", video=False))
    # 500 imitation + 500 at kappa 50 on every clip, 500 at each sweep kappa on the three sweep clips
    assert paper.rollouts == m * 1000 + 3 * 3 * 500 == 9500
    assert paper.rollouts * steps.min() <= paper.world_steps <= paper.rollouts * steps.max()
    assert (
        paper.world_steps
        < paper.step_work
        < paper.world_steps + math.ceil(9500 / 512) * steps.max() * (BATCH_STEP_WORK + 512 * WORLD_WORK)
    )
    searched = eval_plan(lib, EvalConfig.for_protocol("paper", video=False), best_of=500)
    assert searched.rollouts == paper.rollouts + m * 500
    line = paper.summary("paper", world_steps_per_second=1000.0)
    assert line.startswith("paper protocol on 5 clips: 9500 rollouts")
    assert f"about {paper.step_work / 1000.0 / 60.0:.0f} min" in line and "at 1000 world steps/s" in line
    small = quick.summary("quick", world_steps_per_second=1e6)  # a few thousand world steps: counted, not 0.00 M
    assert f"{quick.world_steps:,} world steps, about 1 s" in small


def test_eval_plan_counts_the_video_tiles_in_its_estimate_unless_rendering_is_off():
    from rgsd_envs.motion.library import MotionLib
    from rgsd_eval.evaluate import eval_plan, video_tile_seconds
    from rgsd_eval.runs import representative_clips

    lib = MotionLib("demo")
    cfg = EvalConfig(video_clips=1, rollouts=2)
    c = representative_clips(lib, 1)[0]
    plan = eval_plan(lib, cfg)
    # policy and reference, then the reference and 2 variants (only 2 rollouts), every 2nd frame
    assert plan.video_tiles == -(-int(lib.num_frames[c]) // 2) * 5
    assert plan.video_seconds == plan.video_tiles * video_tile_seconds(cfg.video_size) > 0
    rate = plan.step_work / 5.0  # 5 s of rollouts
    line = plan.summary("quick", world_steps_per_second=rate)
    # the total comes once, with the videos in it; its parts are named as parts
    total = 5.0 + plan.video_seconds
    assert f"about {total:.0f} s in all ({total / lib.num_clips:.1f} s per clip): " in line
    assert f": 5 s of rollouts at {rate:.0f} world steps/s and {plan.video_seconds:.0f} s of videos" in line
    assert f"({plan.video_tiles} tiles)" in line and "+" not in line
    assert eval_plan(lib, cfg, render=False).video_tiles == 0


def test_one_rollout_per_kappa_leaves_the_spreads_empty_without_a_numpy_warning(tmp_path):
    """A spread needs two rollouts: with one per clip and kappa, every clip's is None and so is their mean, and the
    evaluation's output has no 'Mean of empty slice' warning."""
    import warnings

    from rgsd_eval.pipeline import run_evaluation

    run = make_fake_run(tmp_path / "run")
    cfg = EvalConfig.for_protocol("quick", rollouts=1, kappas=(100.0,), video=False, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        paths = run_evaluation([run], "demo", tmp_path / "out", cfg)
    div = json.loads(paths["json"].read_text())["runs"]["run"]["diversity"]["100"]
    assert div["mean"]["root_spread_m"] is None and div["mean"]["err_cm"] is not None
