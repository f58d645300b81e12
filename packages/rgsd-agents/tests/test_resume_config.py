"""``rgsd train --resume`` continues with the settings its checkpoint trained with: config.yaml edited by hand is
refused by key, what resume may change still resumes, and a folder with nothing to resume says so."""

from __future__ import annotations

import shutil

import pytest
import torch
import yaml

from rgsd_agents.cli import main as rgsd
from rgsd_agents.rl.loop import CONFIG_CHANGES
from rgsd_agents.testing import tiny_encoder_file, tiny_train_config
from rgsd_agents.training.runner import Runner
from rgsd_envs.motion.demo import write_demo_clips
from rgsd_envs.utils.files import save_plain


@pytest.fixture()
def run(tmp_path):
    """A tiny run with its checkpoint after iteration 2."""
    enc = tiny_encoder_file(tmp_path / "encoder.pt")
    runner = Runner(tiny_train_config(str(enc), iterations=2), tmp_path / "run", progress=False)
    runner.learn()
    runner.close()
    return tmp_path / "run"


def _edit(run, change) -> None:
    """Change config.yaml as a user's editor would."""
    config = yaml.safe_load((run / "config.yaml").read_text())
    change(config)
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def _iteration(run) -> int:
    return torch.load(run / "checkpoints" / "latest.pt", weights_only=True)["iteration"]


def test_a_setting_edited_in_config_yaml_is_refused_naming_the_key_both_values_and_the_file(run, capsys):
    _edit(run, lambda c: c["ppo"].update(actor_lr=5e-4))
    before = {p.name: p.stat().st_mtime_ns for p in (run / "checkpoints").iterdir()}
    assert rgsd(["train", "--resume", str(run), "--set", "iterations=3", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"error: {run / 'config.yaml'}: field 'ppo.actor_lr': 0.0005 here, but checkpoints/latest.pt trained with "
        "0.001: a resumed run keeps the settings it trained with (--resume --set may change iterations, "
    )
    assert f"put back 0.001, or train with the new value as a new run: rgsd train --config {run / 'config.yaml'}" in err
    assert err.count("\n") == 1
    assert {p.name: p.stat().st_mtime_ns for p in (run / "checkpoints").iterdir()} == before
    _edit(run, lambda c: c["ppo"].update(actor_lr=1e-3) or c.update(seed=7))
    assert rgsd(["train", "--resume", str(run), "--no-progress"]) == 2
    assert "field 'seed': 7 here, but checkpoints/latest.pt trained with 0" in capsys.readouterr().err


def test_what_resume_may_change_still_resumes_by_set_or_in_config_yaml(run):
    assert rgsd(["train", "--resume", str(run), "--set", "iterations=3", "--no-progress"]) == 0
    assert _iteration(run) == 3
    _edit(run, lambda c: c.update(iterations=4, log_every=2))
    assert rgsd(["train", "--resume", str(run), "--no-progress"]) == 0
    assert _iteration(run) == 4


def test_a_curriculum_step_of_a_session_stopped_before_its_checkpoint_resumes_and_one_added_by_hand_is_refused(
    run, capsys
):
    # a session that took a step and ended before its next checkpoint: config.yaml and config_changes.yaml have it
    Runner.resume(run, {"iterations": 3, "env.deviation.heading_deg": 10.0}).close()
    assert len(yaml.safe_load((run / CONFIG_CHANGES).read_text())) == 1 and _iteration(run) == 2
    assert rgsd(["train", "--resume", str(run), "--no-progress"]) == 0
    assert _iteration(run) == 3
    step = {"at_samples": 0.0, "set": {"env.deviation.adaptive": True}}  # in force from the start, never recorded
    _edit(run, lambda c: c["curriculum"].insert(0, step))
    assert rgsd(["train", "--resume", str(run), "--set", "iterations=4", "--no-progress"]) == 2
    assert f"error: {run / 'config.yaml'}: field 'curriculum': " in capsys.readouterr().err
    _edit(run, lambda c: c["curriculum"].append({**step, "at_samples": 1e9}))  # not reached yet: recorded when it is
    _edit(run, lambda c: c["curriculum"].pop(0))
    assert rgsd(["train", "--resume", str(run), "--set", "iterations=4", "--no-progress"]) == 0


def test_a_checkpoint_of_an_earlier_version_without_its_config_resumes(run):
    state = torch.load(run / "checkpoints" / "latest.pt", weights_only=True)
    del state["config"]
    save_plain(state, run / "checkpoints" / "latest.pt")
    _edit(run, lambda c: c["ppo"].update(actor_lr=5e-4))  # nothing to compare it with
    assert rgsd(["train", "--resume", str(run), "--set", "iterations=3", "--no-progress"]) == 0
    assert _iteration(run) == 3


def test_a_folder_with_a_policy_but_no_checkpoints_says_there_is_nothing_to_resume(run, tmp_path, capsys):
    shipped = tmp_path / "shipped"
    shutil.copytree(run, shipped, ignore=shutil.ignore_patterns("checkpoints"))
    _edit(shipped, lambda c: c["env"].update(motions="clips"))  # as a shipped folder names its clips; none here
    assert rgsd(["train", "--resume", str(shipped), "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        f"error: {shipped}: nothing to resume: it holds a trained policy (policy.pt) but no checkpoints (a shipped "
        "or exported run keeps none); train a new run into another folder\n"
    )


def test_a_run_that_carries_its_clips_resumes_from_any_working_folder(tmp_path, monkeypatch):
    from rgsd_envs.envs.config import EnvConfig

    clips = tmp_path / "run" / "clips"
    write_demo_clips(clips)
    enc = tiny_encoder_file(tmp_path / "encoder.pt")
    cfg = tiny_train_config(str(enc), iterations=2, env=EnvConfig(motions=str(clips)))
    run = tmp_path / "run"
    runner = Runner(cfg, run, progress=False)
    runner.learn()
    runner.close()
    _edit(run, lambda c: c["env"].update(motions="clips"))  # relative to the run folder, not to the working one
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert rgsd(["train", "--resume", str(run), "--set", "iterations=3", "--no-progress"]) == 0
    assert _iteration(run) == 3


def test_a_run_that_carries_its_clips_still_names_them_in_its_folder_after_resume_set_and_can_move(tmp_path):
    """``--resume --set`` rewrites config.yaml (a budget, and a curriculum step): the clips it names relative to the
    run folder stay named so, not by the absolute path they were read from, so the folder still moves."""
    import json

    from rgsd_envs.envs.config import EnvConfig

    run = tmp_path / "run"
    write_demo_clips(run / "clips")
    enc = tiny_encoder_file(tmp_path / "encoder.pt")
    cfg = tiny_train_config(str(enc), iterations=2, env=EnvConfig(motions=str(run / "clips")))
    runner = Runner(cfg, run, progress=False)
    runner.learn()
    runner.close()
    _edit(run, lambda c: c["env"].update(motions="clips"))  # as a folder that carries its clips names them
    resume = ["--set", "iterations=3", "--set", "env.deviation.heading_deg=10", "--no-progress"]
    assert rgsd(["train", "--resume", str(run), *resume]) == 0
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["env"]["motions"] == "clips"
    assert saved["iterations"] == 3 and saved["curriculum"][-1]["set"] == {"env.deviation.heading_deg": 10.0}
    moved = tmp_path / "elsewhere" / "moved"
    moved.parent.mkdir()
    shutil.move(run, moved)
    assert rgsd(["train", "--resume", str(moved), "--set", "iterations=4", "--no-progress"]) == 0
    assert _iteration(moved) == 4
    assert yaml.safe_load((moved / "config.yaml").read_text())["env"]["motions"] == "clips"
    report = tmp_path / "report"
    evaluate = ["eval", "--run", str(moved), "--out", str(report), "--no-video", "--rollouts", "1", "--no-progress"]
    assert rgsd(evaluate) == 0
    clips = json.loads((report / "metrics.json").read_text())["runs"]["moved"]["imitation"]["clips"]
    assert sorted(clips) == sorted(p.stem for p in (moved / "clips").glob("*.npz"))  # the clips it carries
