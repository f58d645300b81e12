"""Which run folder a command takes: a skill-policy run (rgsd train) or a downstream run (rgsd downstream), an
encoder's folder (rgsd pretrain) that is no run: one line naming what the folder holds and the command to use,
before anything is written."""

from __future__ import annotations

import pytest
import yaml

from rgsd_agents.cli import main as rgsd
from rgsd_agents.testing import tiny_encoder_file
from rgsd_envs.runs.run_dir import RunDir


@pytest.fixture()
def runs(tmp_path):
    """A fake skill-policy run and a fake downstream run over it (config.yaml, policy.pt, a checkpoint)."""
    from rgsd_eval.testing import make_fake_run

    skill = make_fake_run(tmp_path / "skill")
    goal = tmp_path / "goal"
    (goal / "checkpoints").mkdir(parents=True)
    (goal / "config.yaml").write_text(yaml.safe_dump({"low_level": str(skill), "num_envs": 4}))
    (goal / "policy.pt").write_bytes((skill / "policy.pt").read_bytes())
    (goal / "checkpoints" / "latest.pt").write_bytes(b"ckpt")
    return skill, goal


def files(folder):
    """Every file under ``folder`` with its contents (what a refused command must leave as it was)."""
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_the_kind_of_a_run_folder_is_told_by_its_config(runs, tmp_path):
    skill, goal = runs
    assert RunDir(skill).kind() == RunDir.SKILL_RUN and RunDir(goal).kind() == RunDir.DOWNSTREAM_RUN
    assert RunDir(tmp_path / "nothing").kind() is None
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.yaml").write_text("[unclosed\n")
    assert RunDir(tmp_path / "bad").kind() is None  # the loaders report the broken file


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["eval", "--run", "{goal}", "--out", "{out}", "--no-video"],
            "{goal}: a downstream run (rgsd downstream), but rgsd eval --run takes a skill-policy run (rgsd train, "
            "rgsd demo); its skill policy is the run {skill}: rgsd eval --run {skill}",
        ),
        (
            ["export", "{goal}", "--no-check"],
            "{goal}: a downstream run (rgsd downstream), but rgsd export takes a skill-policy run (rgsd train, rgsd "
            "demo); its skill policy is the run {skill}: rgsd export {skill}",
        ),
        (
            ["play", "{goal}", "--out", "{out}/play.mp4"],
            "{goal}: a downstream run (rgsd downstream), but rgsd play takes a skill-policy run (rgsd train, rgsd "
            "demo); its skill policy is the run {skill}: rgsd play {skill}",
        ),
        (
            ["train", "--resume", "{goal}", "--no-progress"],
            "{goal}: a downstream run (rgsd downstream), but rgsd train --resume takes a skill-policy run (rgsd "
            "train, rgsd demo); continue it with rgsd downstream --resume {goal}",
        ),
        (
            ["downstream", "--low-level", "{goal}", "--out", "{out}", "--no-progress"],
            "{goal}: a downstream run (rgsd downstream), but rgsd downstream --low-level takes a skill-policy run "
            "(rgsd train, rgsd demo); its skill policy is the run {skill}: rgsd downstream --low-level {skill}",
        ),
        (
            ["downstream", "--resume", "{skill}", "--no-progress"],
            "{skill}: a skill-policy run (rgsd train, rgsd demo), but rgsd downstream --resume takes a downstream "
            "run (rgsd downstream); continue it with rgsd train --resume {skill}, or train a downstream policy over "
            "it with rgsd downstream --low-level {skill}",
        ),
    ],
    ids=["eval", "export", "play", "train-resume", "downstream-low-level", "downstream-resume"],
)
def test_a_run_of_the_other_kind_is_named_with_the_command_that_takes_it(argv, message, runs, tmp_path, capsys):
    skill, goal = runs
    before = {run: files(run) for run in runs}
    out = tmp_path / "out"
    names = {"goal": goal, "skill": skill, "out": out}
    assert rgsd([a.format(**names) for a in argv]) == 2
    assert capsys.readouterr().err == f"error: {message.format(**names)}\n"
    assert not out.exists()
    assert {run: files(run) for run in runs} == before


@pytest.mark.parametrize(
    ("command", "folder", "message"),
    [
        (["train", "--config", "demo"], "goal", "{out} holds a downstream run (rgsd downstream); choose another --out"),
        (
            ["downstream", "--low-level", "{skill}"],
            "skill",
            "{out} holds a skill-policy run (rgsd train, rgsd demo); choose another --out",
        ),
    ],
)
def test_a_new_run_into_a_run_of_the_other_kind_is_refused(command, folder, message, runs, capsys):
    skill, goal = runs
    out = {"skill": skill, "goal": goal}[folder]
    before = files(out)
    assert rgsd([*(a.format(skill=skill) for a in command), "--out", str(out), "--no-progress"]) == 2
    assert capsys.readouterr().err == f"error: {message.format(out=out)}\n"
    assert files(out) == before


def test_training_into_rgsd_pretrain_s_folder_is_refused_and_says_how_to_use_its_encoder(tmp_path, capsys):
    """The pretraining's encoder.pt, plots and curves stay as they are; the line gives the command that trains with
    the encoder into a folder of its own."""
    enc = tmp_path / "enc"
    tiny_encoder_file(enc / "encoder.pt")
    (enc / "pretrain.yaml").write_text("steps: 5\n")
    before = files(enc)
    assert rgsd(["train", "--config", "demo", "--out", str(enc), "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        f"error: {enc} holds an encoder (encoder.pt) but no training run; to train with it, into a new folder: "
        f"rgsd train --config demo --set encoder={enc / 'encoder.pt'} --out NEW_FOLDER\n"
    )
    assert files(enc) == before


def test_a_run_stopped_before_its_first_checkpoint_is_named_so_where_its_policy_is_needed(runs, tmp_path, capsys):
    from rgsd_envs.utils.files import InputFileError

    skill, _ = runs
    (skill / "policy.pt").unlink()  # config.yaml and encoder.pt: its set-up, and no checkpoint came
    with pytest.raises(InputFileError) as err:
        RunDir(skill).check()
    assert str(err.value) == (
        f"{skill}: field 'policy.pt': not a complete run folder: missing policy.pt: the run never reached its first "
        f"checkpoint; start it again with: rgsd train --config {skill / 'config.yaml'} --out {skill}"
    )
    (tmp_path / "shipped").mkdir()  # a policy shipped without checkpoints is no run stopped early
    (tmp_path / "shipped" / "config.yaml").write_text((skill / "config.yaml").read_text())
    (tmp_path / "shipped" / "policy.pt").write_bytes(b"policy")
    with pytest.raises(InputFileError, match=r"missing encoder\.pt$"):
        RunDir(tmp_path / "shipped").check(RunDir.ENCODER)


def test_training_into_a_folder_with_a_policy_and_no_checkpoint_is_refused(runs, capsys):
    """A run copied without its checkpoints (a shipped policy): nothing to continue, and nothing to write over."""
    skill, _ = runs
    before = files(skill)
    assert rgsd(["train", "--config", "demo", "--out", str(skill), "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        f"error: {skill} holds a trained policy (policy.pt) but no checkpoint to continue; train into another --out\n"
    )
    assert files(skill) == before


def test_downstream_takes_its_low_level_from_a_config_file_that_names_it(tmp_path, capsys):
    """A downstream run's own config.yaml starts it again (``RunDir.restart_command``): no --low-level needed."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"low_level": str(tmp_path / "gone"), "num_envs": 4}))
    out = tmp_path / "goal"
    assert rgsd(["downstream", "--config", str(config), "--out", str(out), "--no-progress"]) == 2
    assert capsys.readouterr().err.startswith(f"error: {tmp_path / 'gone'}: low-level run folder not found")
    assert not out.exists()
    assert rgsd(["downstream", "--out", str(out), "--no-progress"]) == 2  # the default config names none
    assert capsys.readouterr().err == "error: give --low-level RUN (a trained skill policy) or --resume RUN\n"
