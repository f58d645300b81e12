"""Bad input to the ``rgsd`` commands: one line naming the file, flag or field, exit 2, nothing half-written."""

from __future__ import annotations

import shutil

import pytest

from rgsd_agents.cli import main as rgsd
from rgsd_agents.testing import tiny_encoder_file


def test_pretraining_into_a_trained_run_is_refused_and_its_encoder_kept(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "latest.pt").write_bytes(b"ckpt")
    encoder = tiny_encoder_file(run / "encoder.pt").read_bytes()
    assert rgsd(["pretrain", "--motions", "demo", "--out", str(run), "--steps", "2", "--no-progress"]) == 2
    assert capsys.readouterr().err == f"error: {run} holds a trained run; pretrain into another --out\n"
    assert (run / "encoder.pt").read_bytes() == encoder
    assert sorted(p.name for p in run.iterdir()) == ["checkpoints", "encoder.pt"]


def test_a_training_that_fails_during_set_up_leaves_no_run_folder(tmp_path, capsys):
    encoder = tiny_encoder_file(tmp_path / "encoder.pt")
    (tmp_path / "empty").mkdir()
    out = tmp_path / "run"
    sets = ["--set", f"encoder={encoder}", "--set", f"env.motions={tmp_path / 'empty'}"]
    assert rgsd(["train", "--config", "demo", "--out", str(out), "--no-progress", *sets]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'empty'}: folder holds no .npz motion clips\n"
    assert not out.exists()  # its config.yaml and encoder.pt were written, then removed with the folder


def test_a_garbage_encoder_file_is_called_corrupt_without_torch_s_unsafe_advice(tmp_path, capsys):
    garbage = tmp_path / "encoder.pt"
    garbage.write_text("garbage\n")
    out = tmp_path / "run"
    assert rgsd(["train", "--config", "demo", "--out", str(out), "--set", f"encoder={garbage}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {garbage}: not a readable encoder file (truncated or corrupt?): ")
    assert "weights_only" not in err and err.count("\n") == 1, err
    assert not out.exists()


@pytest.mark.parametrize("minutes", ["0", "-1"])
def test_the_demo_refuses_a_budget_that_is_not_positive(minutes, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        rgsd(["demo", "--out", str(tmp_path / "demo"), "--minutes", minutes])
    assert exit_.value.code == 2
    assert "argument --minutes: expected a positive number of minutes" in capsys.readouterr().err
    assert not (tmp_path / "demo").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--out", "play.gif"], "video is written as .mp4, but the output path 'play.gif' ends in '.gif'"),
        (["--size", "63", "64"], "H.264 video needs an even width and height, got 63x64"),
    ],
)
def test_play_refuses_a_bad_video_before_it_runs_the_policy(args, message, tmp_path, monkeypatch, capsys):
    import rgsd_agents.play

    def no_rollout(*_, **__):
        raise AssertionError("the rollout ran before the video settings were checked")

    monkeypatch.setattr(rgsd_agents.play, "play_rollout", no_rollout)
    monkeypatch.chdir(tmp_path)
    assert rgsd(["play", str(tmp_path / "run"), *args]) == 2
    assert capsys.readouterr().err.startswith(f"error: {message}")
    assert list(tmp_path.iterdir()) == []


def test_an_existing_file_as_the_output_folder_is_named_in_one_line(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("hi")
    encoder = tiny_encoder_file(tmp_path / "encoder.pt")
    assert rgsd(["train", "--config", "demo", "--out", str(afile), "--set", f"encoder={encoder}"]) == 2
    assert capsys.readouterr().err == f"error: {afile}: output path exists and is not a folder\n"
    assert rgsd(["pretrain", "--motions", "demo", "--out", str(afile / "enc"), "--steps", "2"]) == 2
    assert capsys.readouterr().err.startswith(f"error: {afile / 'enc'}: cannot create this folder: ")
    assert afile.read_text() == "hi" and sorted(p.name for p in tmp_path.iterdir()) == ["afile", "encoder.pt"]


def test_eval_checks_every_run_s_encoder_before_it_evaluates_any(demo_run, tmp_path, capsys):
    import torch

    from rgsd_agents.pretraining.config import PretrainConfig
    from rgsd_agents.pretraining.encoder import build_encoder

    other = tmp_path / "other"
    shutil.copytree(demo_run, other, ignore=shutil.ignore_patterns("checkpoints", "tb", "report", "pretrain"))
    cfg = PretrainConfig(hidden=(32,), device="cpu", skill_dim=8)
    build_encoder(cfg, torch.zeros(4, 1795)).save(other / "encoder.pt")  # a run of another skill space
    out = tmp_path / "eval"
    args = ["eval", "--run", str(demo_run), "--run", str(other), "--out", str(out), "--no-video", "--rollouts", "1"]
    assert rgsd(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {other / 'encoder.pt'}: field 'out_dim': encoder maps states to 8-D skills"), err
    assert not out.exists()  # the first run was not evaluated either
