"""benchmarks/learning_curves.py: arm files, train commands, and a tiny sweep trained, evaluated and plotted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

TINY = {
    "iterations": 2, "num_envs": 16, "horizon": 8, "probe_every": 1,
    "pretrain.steps": 30, "pretrain.hidden": [32],
    "networks.actor_hidden": [32], "networks.critic_hidden": [32],
    "ppo.minibatch_size": 64, "method.options.minibatch_size": 64,
}  # fmt: skip
"""A few seconds of ``rgsd train --config demo`` (conftest's SHORT_DEMO, two iterations, a probe after each)."""


@pytest.fixture(scope="module")
def lc(load_benchmark):
    return load_benchmark("learning_curves")


def write_arm(folder: Path, name: str, arm: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(arm, sort_keys=False))
    return path


def test_the_methods_sweep_trains_each_paper_method_on_its_preset_with_one_budget(lc, tmp_path):
    from rgsd_agents.config import preset_names

    arms = lc.load_sweep("methods")
    assert set(arms) == {"rgsd", "diayn", "ase", "calm", "metra", "fb_cpr"}
    assert {name: arm.base for name, arm in arms.items()} == {
        "rgsd": "cpu", "diayn": "diayn", "ase": "ase", "calm": "calm", "metra": "metra", "fb_cpr": "fb_cpr",
    }  # fmt: skip
    assert {a.base for a in arms.values()} - {"fb_cpr"} <= set(preset_names())
    assert {a.minutes for a in arms.values()} == {60.0} and all(a.note for a in arms.values())
    cmd = lc.train_command(arms["metra"], tmp_path / "metra", [])
    assert cmd[cmd.index("--config") + 1] == "metra" and "max_minutes=60" in cmd
    assert list(lc.load_sweep("methods", ["diayn", "rgsd"])) == ["diayn", "rgsd"]
    with pytest.raises(SystemExit, match=r"methods: no arm 'dyain'; arms: ase, calm"):
        lc.load_sweep("methods", ["dyain"])


def test_train_commands_carry_the_arm_then_resume_from_its_checkpoint(lc, tmp_path):
    path = write_arm(tmp_path / "s", "lr", {"base": "demo", "set": {"ppo.actor_lr": 3e-5, "pretrain.hidden": [32]},
                                             "seed": 2, "minutes": 7.5})  # fmt: skip
    arm = lc.load_arm(path)
    run = tmp_path / "out" / "lr"
    cmd = lc.train_command(arm, run, ["num_envs=4"])
    assert cmd[cmd.index("--config") + 1] == "demo" and cmd[cmd.index("--out") + 1] == str(run)
    assert cmd[cmd.index("--seed") + 1] == "2" and "max_minutes=7.5" in cmd
    assert {"ppo.actor_lr=3e-05", "pretrain.hidden=[32]", "num_envs=4"} <= set(cmd)
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "iter_000010.pt").write_bytes(b"")
    cmd = lc.train_command(arm, run, ["num_envs=4"])
    assert cmd[cmd.index("--resume") + 1] == str(run) and "max_minutes=7.5" in cmd
    assert not {"--config", "--seed", "num_envs=4"} & set(cmd)  # a resumed run keeps its saved config
    beside = write_arm(tmp_path / "s", "own", {"base": "mine.yaml", "minutes": 1})
    (tmp_path / "s" / "mine.yaml").write_text("num_envs: 8\n")
    assert lc.load_arm(beside).base == str(tmp_path / "s" / "mine.yaml")  # a config file beside the arm file


@pytest.mark.parametrize(
    ("arm", "message"),
    [
        ({"base": "demo", "minute": 5}, r"unknown field 'minute'; an arm file has base, set, seed, minutes, note"),
        ({"minutes": 5}, r"field 'base' must name a preset"),
        ({"base": "demo", "minutes": -1}, r"field 'minutes' must be a number > 0, got -1"),
        ({"base": "demo", "minutes": 5, "set": ["ppo.epochs=2"]}, r"field 'set' must map config keys to values"),
        ({"base": "demo", "minutes": 5, "seed": 1.5}, r"field 'seed' must be an integer >= 0, got 1.5"),
    ],
)
def test_a_bad_arm_file_is_refused_naming_the_file_and_the_field(lc, tmp_path, arm, message):
    path = write_arm(tmp_path, "bad", arm)
    with pytest.raises(SystemExit, match=rf"^{tmp_path}/bad\.yaml: {message}"):
        lc.load_arm(path)


def test_a_tiny_sweep_trains_evaluates_and_plots_and_reports_the_arms_train_refuses(lc, tmp_path, capsys):
    sweep, out = tmp_path / "tiny_sweep", tmp_path / "out"
    write_arm(sweep, "tiny", {"base": "demo", "set": TINY, "minutes": 1, "note": "two iterations"})
    bad_key = write_arm(sweep, "bad_key", {"base": "demo", "set": {"ppo.bogus": 1}, "minutes": 1})
    no_preset = write_arm(sweep, "no_preset", {"base": "no_such_preset", "minutes": 1})
    eval_args = "--rollouts 1 --kappas 20 --no-video"
    assert lc.main([str(sweep), "--out", str(out), "--eval-args", eval_args]) == 1  # two arms failed
    printed = capsys.readouterr().out
    assert f"arm bad_key: failed: {bad_key}: " in printed and "--set ppo.bogus=1: unknown key 'bogus'" in printed
    assert f"arm no_preset: failed: {no_preset}: " in printed and "no_such_preset: no such config file" in printed
    assert "arm tiny: trained" in printed

    arms = json.loads((out / lc.JSON).read_text())["arms"]
    tiny = arms["tiny"]
    assert tiny["status"] == "trained" and tiny["note"] == "two iterations"
    assert tiny["samples"] == [0, 128, 256]  # a probe before training and after each 16 x 8-sample iteration
    assert set(tiny["clips_cm"]) == {"demo_walk", "demo_run", "demo_sidestep", "demo_backward", "demo_punch"}
    assert set(tiny["categories_cm"]) == {"walk", "run", "sidestep", "backward", "punch"}
    assert all(0 < v < 300 for v in tiny["overall_cm"]) and 0 < tiny["minutes"][-1] < 1
    assert "ppo.bogus" in arms["bad_key"]["status"] and "error" in arms["bad_key"]
    assert (out / lc.PNG).stat().st_size > 10_000
    metrics = json.loads((out / "eval" / "metrics.json").read_text())
    assert list(metrics["runs"]) == ["tiny"]  # only the trained arm is evaluated

    assert "--resume" in lc.train_command(lc.load_arm(sweep / "tiny.yaml"), out / "tiny", [])  # the next call's
    (out / lc.PNG).unlink()
    assert lc.main([str(sweep), "--out", str(out), "--plot-only"]) == 0
    arms = json.loads((out / lc.JSON).read_text())["arms"]
    assert arms["tiny"]["overall_cm"] == tiny["overall_cm"] and (out / lc.PNG).is_file()
    assert arms["no_preset"]["status"] == "not trained in this call"
