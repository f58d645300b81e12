"""benchmarks/learning_curves.py: arms, resume commands, and curves read from a small TensorBoard log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml


@pytest.fixture(scope="module")
def lc(load_benchmark):
    return load_benchmark("learning_curves")


def fake_run(path: Path, walk_cm: list[float], punch_cm: list[float], batch: int = 100) -> Path:
    """A run folder whose tb/ holds probe scalars at steps 0, 200, 400 and iteration times of 2 s."""
    from torch.utils.tensorboard import SummaryWriter

    from rgsd_envs.rewards.encoders import MLPEncoder

    path.mkdir(parents=True)
    (path / "config.yaml").write_text(yaml.safe_dump({"env": {"motions": "demo"}}))
    MLPEncoder((4,)).save(
        path / "encoder.pt", clip_names=["demo_walk", "demo_punch"], clip_categories=["walk", "punch"]
    )
    w = SummaryWriter(str(path / "tb"))
    for step in range(batch, 5 * batch, batch):
        w.add_scalar("perf/iteration_seconds", 2.0, step)
    for k, step in enumerate((0, 2 * batch, 4 * batch)):
        w.add_scalar("probe_clips/demo_walk_cm", walk_cm[k], step)
        w.add_scalar("probe_clips/demo_punch_cm", punch_cm[k], step)
        w.add_scalar("probe/cartesian_error_cm", (walk_cm[k] + punch_cm[k]) / 2, step)
    w.close()
    return path


def test_curves_json_and_plot_from_tensorboard_logs(lc, tmp_path):
    a = fake_run(tmp_path / "a", [60.0, 40.0, 20.0], [10.0, 9.0, 8.0])
    b = fake_run(tmp_path / "b", [60.0, 55.0, 50.0], [10.0, 10.0, 10.0])
    out = tmp_path / "out"
    assert lc.main(["--out", str(out), "--arms-file", str(_arms_file(tmp_path)), "--plot-only",
                    "--include", f"sharp={a}", "--include", f"plain={b}"]) == 0  # fmt: skip
    data = json.loads((out / lc.JSON).read_text())
    sharp = data["arms"]["sharp"]
    assert sharp["samples"] == [0, 200, 400]
    assert sharp["minutes"] == pytest.approx([0.0, 4.0 / 60, 8.0 / 60])  # 2 s per 100-sample iteration
    assert sharp["categories_cm"] == {"punch": [10.0, 9.0, 8.0], "walk": [60.0, 40.0, 20.0]}
    assert sharp["final_cm"] == {"demo_punch": 8.0, "demo_walk": 20.0}
    assert data["arms"]["plain"]["clips_cm"]["demo_walk"] == [60.0, 55.0, 50.0]
    assert data["arms"]["tracking"]["status"] == "not started" and "error" in data["arms"]["tracking"]
    assert (out / lc.PNG).stat().st_size > 10_000
    # --plot-only with runs to include and no arms named: those runs alone, no built-in arm "not started"
    only = tmp_path / "only"
    assert lc.main(["--out", str(only), "--plot-only", "--include", f"sharp={a}"]) == 0
    assert list(json.loads((only / lc.JSON).read_text())["arms"]) == ["sharp"]


def _arms_file(tmp_path: Path) -> Path:
    path = tmp_path / "arms.yaml"
    path.write_text("arms:\n  tracking: {config: demo, minutes: 5, set: [env.reward=tracking]}\n")
    return path


def test_arms_file_fields_and_train_commands_start_then_resume(lc, tmp_path):
    arms = lc.load_arms(_arms_file(tmp_path))
    arm = arms["tracking"]
    assert (arm.config, arm.minutes, arm.set) == ("demo", 5.0, ["env.reward=tracking"])
    run = tmp_path / "tracking"
    cmd = lc.train_command(arm, run, ["num_envs=4"], progress=False)
    assert cmd[cmd.index("--config") + 1] == "demo" and cmd[cmd.index("--out") + 1] == str(run)
    assert "max_minutes=5.0" in cmd and "env.reward=tracking" in cmd and "num_envs=4" in cmd
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "latest.pt").write_bytes(b"")
    cmd = lc.train_command(arm, run, ["num_envs=4"], progress=False)
    assert cmd[cmd.index("--resume") + 1] == str(run) and "--config" not in cmd and "num_envs=4" not in cmd
    bad = tmp_path / "bad.yaml"
    bad.write_text("arms:\n  x: {minute: 5}\n")
    with pytest.raises(SystemExit, match=r"arms\.x\.minute"):
        lc.load_arms(bad)
    assert set(lc.DEFAULT_ARMS) == {"encoder", "hard_negatives", "tracking", "failure_weighted", "dt120"}


def test_the_methods_arm_set_trains_each_paper_method_on_its_preset_with_one_budget(lc, tmp_path):
    from rgsd_agents.config import preset_names

    arms = lc.ARM_SETS["methods"]
    assert list(arms) == ["rgsd", "diayn", "ase", "calm", "metra"]
    assert {a.config for a in arms.values()} <= set(preset_names())
    assert {a.minutes for a in arms.values()} == {60.0}
    cmd = lc.train_command(arms["metra"], tmp_path / "metra", [], progress=False)
    assert cmd[cmd.index("--config") + 1] == "metra" and "max_minutes=60.0" in cmd


def test_issue20_arms_are_valid_demo_configs_that_differ_from_the_demo(lc):
    from rgsd_agents.config import load_config, parse_set
    from rgsd_envs.utils.config import to_dict

    old_base = to_dict(load_config("demo", parse_set(lc.DEMO_UNTIL_DE606CD)))
    base = to_dict(load_config("demo"))
    assert set(lc.ISSUE20_ARMS) <= set(lc.BUILTIN_ARMS) and set(lc.DEFAULT_ARMS) <= set(lc.BUILTIN_ARMS)
    assert lc.ARM_SETS["issue20"] is lc.ISSUE20_ARMS
    for name, arm in lc.ISSUE20_ARMS.items():
        assert (arm.config, arm.minutes) == ("demo", 15.0), name
        cfg = to_dict(load_config(arm.config, parse_set(arm.set)))
        # each arm changes something; the baselines (the preset until de606cd, the preset now) nothing
        assert (cfg == old_base) == (name == "demo") and (cfg == base) == (name == "demo_max050_tight"), name
    assert old_base != base and old_base["ppo"]["actor_lr"] == 3e-5 and base["ppo"]["actor_lr"] == 6e-5
    # today's preset is the session-5 arm demo_fast_hard_lr6e5 plus the maximum-error rule and its tightening
    measured = lc.DEMO_UNTIL_DE606CD + lc.DEMO_LR6E5 + lc.MAX050 + lc.TIGHTEN_AT_2P5M + ["ppo.bf16=auto"]
    assert to_dict(load_config("demo", parse_set(measured))) == base
    adaptive = load_config("demo", parse_set(lc.ISSUE20_ARMS["kl_adaptive"].set))
    assert adaptive.ppo.lr_schedule == "adaptive" and adaptive.ppo.desired_kl == 0.01
    tight = load_config("demo", parse_set(lc.ISSUE20_ARMS["deviation_tightening"].set))
    assert tight.env.deviation_metric == "max" and tight.env.deviation_adaptive


def test_seeds_repeat_each_arm_with_its_own_folder_and_seed(lc, tmp_path):
    from rgsd_agents.config import load_config, parse_set

    arms = lc.with_seeds({"deviation_heading": lc.ISSUE20_ARMS["deviation_heading"]}, [0, 2])
    assert list(arms) == ["deviation_heading", "deviation_heading_s2"]
    assert arms["deviation_heading"] is lc.ISSUE20_ARMS["deviation_heading"]  # seed 0 is the arm itself
    s2 = arms["deviation_heading_s2"]
    cfg = load_config(s2.config, parse_set(s2.set))
    assert cfg.seed == 2 and cfg.env.deviation_heading_deg == 15.0 and s2.minutes == 15.0
    cmd = lc.train_command(s2, tmp_path / s2.name, [], progress=False)
    assert cmd[cmd.index("--out") + 1] == str(tmp_path / "deviation_heading_s2") and "seed=2" in cmd
    assert "seed=2" not in lc.ISSUE20_ARMS["deviation_heading"].set  # the built-in arm is not changed
    with pytest.raises(SystemExit, match="--seeds"):
        lc.with_seeds(arms, [-1])
