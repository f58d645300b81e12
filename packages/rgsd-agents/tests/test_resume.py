"""``rgsd train --resume`` takes the newest readable checkpoint when the newest files are truncated."""

from __future__ import annotations

import logging

import pytest
import torch

from rgsd_agents.cli import main as rgsd
from rgsd_agents.testing import tiny_encoder_file, tiny_train_config
from rgsd_agents.training.runner import Runner
from rgsd_envs.runs.run_dir import RunDir


@pytest.fixture()
def run_with_three_checkpoints(tmp_path):
    """A tiny run that saved after iterations 1, 2 and 3 (latest.pt = iteration 3)."""
    enc = tiny_encoder_file(tmp_path / "encoder.pt")
    cfg = tiny_train_config(str(enc), iterations=3, checkpoint_every=1, keep_checkpoints=5)
    runner = Runner(cfg, tmp_path / "run", progress=False)
    runner.learn()
    runner.close()
    return tmp_path / "run"


def truncate(path, size: int = 1000) -> None:
    """Cut a file as a crash while copying or a full disk leaves it."""
    path.write_bytes(path.read_bytes()[:size])


def test_resume_falls_back_to_the_newest_readable_checkpoint_and_says_why(run_with_three_checkpoints, caplog):
    ckpts = run_with_three_checkpoints / "checkpoints"
    truncate(ckpts / "latest.pt")
    truncate(ckpts / "iter_000003.pt")
    with caplog.at_level(logging.WARNING):
        code = rgsd(["train", "--resume", str(run_with_three_checkpoints), "--set", "iterations=4", "--no-progress"])
    assert code == 0
    lines = [r.getMessage() for r in caplog.records if "resuming from" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert f"resuming from {ckpts / 'iter_000002.pt'} (iteration 2)" in lines[0]
    assert "latest.pt is not a readable checkpoint (truncated or corrupt?)" in lines[0]
    assert "iter_000003.pt is not a readable checkpoint (truncated or corrupt?)" in lines[0]
    # it went on from iteration 2: iteration 3 was trained again and written whole, then 4
    assert torch.load(ckpts / "iter_000003.pt", weights_only=True)["iteration"] == 3
    assert torch.load(ckpts / "latest.pt", weights_only=True)["iteration"] == 4


def test_resume_with_no_readable_checkpoint_names_every_file(run_with_three_checkpoints, capsys):
    ckpts = run_with_three_checkpoints / "checkpoints"
    for path in ckpts.glob("*.pt"):
        truncate(path)
    assert rgsd(["train", "--resume", str(run_with_three_checkpoints), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "no readable checkpoint to resume from" in err
    assert all(name in err for name in ("latest.pt", "iter_000001.pt", "iter_000002.pt", "iter_000003.pt"))


def test_every_checkpoint_holds_plain_data_only(run_with_three_checkpoints):
    from rgsd_envs.utils.files import non_plain_entries

    for path in sorted((run_with_three_checkpoints / "checkpoints").glob("*.pt")):
        state = torch.load(path, map_location="cpu", weights_only=True)
        assert non_plain_entries(state) == [], path.name
        assert state["env"]["core"]["random"]["keys"].dtype == torch.int64  # the uint64 keys' bits


def test_resume_refuses_a_checkpoint_carrying_pickled_objects_and_runs_none_of_it(run_with_three_checkpoints, capsys):
    """A run folder from elsewhere whose latest.pt holds objects: refused by name, no fallback, nothing executed."""
    import os

    import numpy as np

    class RunsCode:
        def __reduce__(self):
            return (os.mkdir, (str(marker),))

    marker = run_with_three_checkpoints / "code_ran"
    ckpts = run_with_three_checkpoints / "checkpoints"
    state = torch.load(ckpts / "latest.pt", weights_only=True)
    state["env"]["core"]["random"]["keys"] = np.zeros(4, dtype=np.uint64)  # as older rgsd versions wrote
    state["tracker"]["hook"] = RunsCode()
    torch.save(state, ckpts / "latest.pt")
    before = {p.name: p.read_bytes() for p in ckpts.glob("*.pt")}
    assert rgsd(["train", "--resume", str(run_with_three_checkpoints), "--set", "iterations=4", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{ckpts / 'latest.pt'}: holds objects that are not plain data" in err
    assert "will not unpickle them" in err and "resuming from" not in err
    assert not marker.exists()
    assert {p.name: p.read_bytes() for p in ckpts.glob("*.pt")} == before  # nothing trained or written over


def test_a_checkpoint_of_other_networks_ends_the_resume_in_one_line_naming_it(run_with_three_checkpoints, capsys):
    """Not skipped for an older one as an unreadable file is: loading it may have changed part of the trainer."""
    ckpts = run_with_three_checkpoints / "checkpoints"
    state = torch.load(ckpts / "latest.pt", weights_only=True)
    name = next(k for k, v in state["actor_critic"].items() if v.ndim == 2)
    state["actor_critic"][name] = state["actor_critic"][name][:, :3]  # a layer of another width
    torch.save(state, ckpts / "latest.pt")
    before = {p.name: p.stat().st_mtime_ns for p in ckpts.iterdir()}
    assert rgsd(["train", "--resume", str(run_with_three_checkpoints), "--set", "iterations=4", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {ckpts / 'latest.pt'}: does not fit this run's networks and state (another config")
    assert "size mismatch" in err and err.count("\n") == 1, err
    assert {p.name: p.stat().st_mtime_ns for p in ckpts.iterdir()} == before  # nothing trained, nothing written


def test_a_bad_set_on_resume_is_named_by_the_set(run_with_three_checkpoints, capsys):
    assert rgsd(["train", "--resume", str(run_with_three_checkpoints), "--set", "max_minutes=0"]) == 2
    assert capsys.readouterr().err == "error: --set max_minutes=0: max_minutes must be > 0 or null (no budget), got 0\n"


def test_resume_with_a_setting_that_may_not_change_is_refused_in_one_line(run_with_three_checkpoints, capsys):
    before = sorted(p.name for p in (run_with_three_checkpoints / "checkpoints").iterdir())
    assert rgsd(["train", "--resume", str(run_with_three_checkpoints), "--seed", "3", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --resume {run_with_three_checkpoints}: continues the saved config; only ")
    assert "may change, not seed (" in err and err.count("\n") == 1, err
    assert sorted(p.name for p in (run_with_three_checkpoints / "checkpoints").iterdir()) == before


def test_resume_accepts_a_setting_that_may_not_change_when_it_repeats_the_saved_value(run_with_three_checkpoints):
    """A command run again with its own settings continues its run: the saved seed repeated changes nothing."""
    saved = RunDir(run_with_three_checkpoints).config()
    args = ["--seed", str(saved["seed"]), "--set", f"horizon={saved['horizon']}", "--set", "iterations=4"]
    assert rgsd(["train", "--resume", str(run_with_three_checkpoints), *args, "--no-progress"]) == 0
    assert torch.load(run_with_three_checkpoints / "checkpoints" / "latest.pt", weights_only=True)["iteration"] == 4


def test_resume_says_where_it_continues_in_one_line(run_with_three_checkpoints, caplog):
    with caplog.at_level(logging.INFO):
        assert (
            rgsd(["train", "--resume", str(run_with_three_checkpoints), "--set", "iterations=4", "--no-progress"]) == 0
        )
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("resuming ")]
    assert said == [f"resuming {run_with_three_checkpoints} at iteration 3 from checkpoints/latest.pt"]


def _never_checkpointed(tmp_path, name: str, encoder: bool):
    """A run folder ``rgsd train`` left before its first checkpoint: its config.yaml, an earlier attempt's curves,
    and the encoder if its set-up got that far (stopped during the pretraining: pretrain/ without it)."""
    from rgsd_agents.config import resolve
    from rgsd_envs.utils.config import save_yaml

    run = tmp_path / name
    enc = tiny_encoder_file(tmp_path / f"{name}_encoder.pt")
    save_yaml(resolve(tiny_train_config(str(enc), iterations=1)), run / "config.yaml")
    (run / "tb").mkdir()
    (run / "tb" / "events.out.tfevents.1.earlier").write_bytes(b"")
    if encoder:
        (run / "encoder.pt").write_bytes(enc.read_bytes())
    else:
        (run / "pretrain" / "tb").mkdir(parents=True)
    return run


@pytest.mark.parametrize("encoder", [True, False], ids=["after-set-up", "during-pretraining"])
def test_a_run_that_never_reached_a_checkpoint_says_so_and_gives_the_command_that_starts_it_again(
    encoder, tmp_path, capsys
):
    run = _never_checkpointed(tmp_path, "run", encoder)
    assert rgsd(["train", "--resume", str(run), "--no-progress"]) == 2
    restart = f"rgsd train --config {run / 'config.yaml'} --out {run}"
    assert capsys.readouterr().err == (
        f"error: {run}: nothing to resume: the run never reached its first checkpoint; start it again with: {restart}\n"
    )
    assert not (run / "checkpoints").exists()


def test_the_command_that_starts_such_a_run_again_trains_it_without_the_earlier_attempt_s_curves(tmp_path):
    run = _never_checkpointed(tmp_path, "run", encoder=True)
    restart = RunDir(run).restart_command()
    assert restart == f"rgsd train --config {run / 'config.yaml'} --out {run}"
    assert rgsd([*restart.split()[1:], "--no-progress"]) == 0
    assert torch.load(run / "checkpoints" / "latest.pt", weights_only=True)["iteration"] == 1
    events = [p.name for p in (run / "tb").iterdir()]
    assert len(events) == 1 and "earlier" not in events[0]  # TensorBoard would draw both attempts' curves


def test_a_stop_during_the_pretraining_of_rgsd_train_says_there_is_nothing_to_resume(tmp_path, monkeypatch, capsys):
    import rgsd_agents.pretraining.loop

    def pretrain_until_ctrl_c(cfg, out, **_):
        (out / "tb").mkdir(parents=True)
        raise KeyboardInterrupt

    monkeypatch.setattr(rgsd_agents.pretraining.loop, "pretrain", pretrain_until_ctrl_c)
    run = tmp_path / "run"
    assert rgsd(["train", "--config", "demo", "--out", str(run), "--no-progress"]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == (
        "interrupted before the run's first checkpoint: nothing to resume; run the same command again to start it anew"
    )
    assert sorted(p.name for p in run.iterdir()) == [".lock", "config.yaml", "pretrain"]
    assert rgsd(["train", "--resume", str(run)]) == 2
    assert "the run never reached its first checkpoint; start it again with: rgsd train --config" in (
        capsys.readouterr().err
    )


def _stop_during_set_up(monkeypatch) -> None:
    """Every Runner gets a SIGTERM during ``on_start`` (its initial probe and reward report), before the loop."""
    import signal

    monkeypatch.setattr(Runner, "on_start", lambda self, writer: signal.raise_signal(signal.SIGTERM))


def test_a_stop_during_the_set_up_of_a_run_says_nothing_was_trained_and_how_to_start_it_again(
    tmp_path, monkeypatch, capsys
):
    run = _never_checkpointed(tmp_path, "run", encoder=True)
    _stop_during_set_up(monkeypatch)
    assert rgsd(["train", "--config", str(run / "config.yaml"), "--out", str(run), "--no-progress"]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == (
        "interrupted during the run's set-up, before its first iteration: nothing was trained; "
        f"{RunDir(run).not_started()}"
    )
    assert (
        RunDir(run)
        .not_started()
        .endswith(f"start it again with: rgsd train --config {run / 'config.yaml'} --out {run}")
    )
    assert not (run / "checkpoints").exists()


def test_a_stop_during_the_set_up_of_a_resumed_session_gives_the_command_that_continues_it(
    run_with_three_checkpoints, monkeypatch, capsys
):
    run = run_with_three_checkpoints
    _stop_during_set_up(monkeypatch)
    assert rgsd(["train", "--resume", str(run), "--set", "iterations=5", "--no-progress"]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == (
        "interrupted during this session's set-up, before its first iteration: nothing was trained; checkpoint "
        f"{run / 'checkpoints' / 'latest.pt'}; continue with: rgsd train --resume {run}"
    )
    assert torch.load(run / "checkpoints" / "latest.pt", weights_only=True)["iteration"] == 3
