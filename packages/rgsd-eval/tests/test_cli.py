"""The ``eval`` subcommand: registration with the rgsd CLI, flags over --config, a run end to end."""

from __future__ import annotations

import argparse
import json

import pytest
import yaml

from rgsd_envs.runs.run_dir import load_clip_latents
from rgsd_envs.utils.files import InputFileError
from rgsd_eval import cli
from rgsd_eval.config import PAPER_KAPPAS
from rgsd_eval.testing import make_fake_run


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="rgsd")
    sub = parser.add_subparsers(dest="command", required=True)
    cli.register(sub)
    return parser.parse_args(["eval", *argv])


def test_register_adds_eval_with_a_handler():
    args = _parse(["--run", "a", "--run", "b", "--out", "o"])
    assert args.func is cli.run_command
    assert args.run == ["a", "b"] and args.motions is None
    cfg = cli.config_from_args(args)
    assert cfg.kappas == PAPER_KAPPAS and cfg.latent == "auto" and cfg.video


def test_motions_takes_several_sources_as_pretrain_does():
    args = _parse(["--run", "a", "--motions", "m/two", "demo", "--out", "o"])
    assert args.motions == ["m/two", "demo"] and args.out == "o"


def test_flags_override_the_config_file(tmp_path):
    path = tmp_path / "eval.yaml"
    path.write_text(yaml.safe_dump({"rollouts": 7, "seed": 3, "video_frame_step": 3}))
    args = _parse(["--run", "a", "--out", "o", "--config", str(path), "--rollouts", "2", "--kappas", "5", "50",
                   "--latent", "BEST-OF-12", "--no-video", "--no-progress"])  # fmt: skip
    cfg = cli.config_from_args(args)
    assert (cfg.rollouts, cfg.seed, cfg.video_frame_step) == (2, 3, 3)
    assert cfg.kappas == (5.0, 50.0) and cfg.latent == "best-of-12"
    assert not cfg.video and not cfg.progress


def test_rgsd_eval_runs_end_to_end(tmp_path, capsys):
    run = make_fake_run(tmp_path / "myrun")
    out = tmp_path / "out"
    code = cli.main(["--run", str(run), "--motions", "demo", "--out", str(out), "--rollouts", "2",
                     "--kappas", "20", "1000", "--no-video", "--no-progress"])  # fmt: skip
    assert code == 0
    assert f"report: {out / 'report.md'}" in capsys.readouterr().out
    doc = json.loads((out / "metrics.json").read_text())
    assert list(doc["runs"]) == ["myrun"] and doc["config"]["rollouts"] == 2
    assert not (out / "myrun" / "videos").exists()
    assert doc["config"]["max_clips"] is None and len(doc["clips"]) == 5  # no max_clips: every clip
    assert doc["clips_selected"] == {"clips": 5, "of": 5, "rule": "every clip"}
    assert "This evaluation covers" not in (out / "report.md").read_text()


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_rgsd_eval_stopped_mid_evaluation_says_so_in_one_line_exits_130_and_leaves_no_folder(
    signum, tmp_path, monkeypatch, capsys
):
    import signal

    from rgsd_envs.testing import raise_stop_signal, stop_signals_as_in_a_terminal
    from rgsd_eval import pipeline

    def evaluate_then_stop(*args, **kwargs):
        raise_stop_signal(getattr(signal, signum))
        raise AssertionError("the evaluation went on after the signal")

    monkeypatch.setattr(pipeline, "evaluate_run", evaluate_then_stop)
    run = make_fake_run(tmp_path / "myrun")
    out = tmp_path / "out"
    before = signal.getsignal(signal.SIGTERM)
    try:
        with stop_signals_as_in_a_terminal():
            code = cli.main(["--run", str(run), "--motions", "demo", "--out", str(out), "--no-video", "--no-progress"])
    except KeyboardInterrupt:  # a failure of this test, not a stop of the test run
        pytest.fail("the stop escaped the command: a traceback, not one line")
    err = capsys.readouterr().err
    assert (code, err) == (130, "interrupted\n")  # one line, no traceback
    assert sorted(p.name for p in tmp_path.iterdir()) == ["myrun"]  # no report folder, no .out.*.partial stage
    assert signal.getsignal(signal.SIGTERM) == before  # its handler put back


def test_rgsd_eval_names_a_missing_warp_in_one_line(tmp_path, monkeypatch, capsys):
    from rgsd_envs.sim import WarpUnavailableError
    from rgsd_eval import pipeline

    def load_run(*args, **kwargs):
        raise WarpUnavailableError('backend "warp" needs MuJoCo Warp: pip install "rgsd-envs[warp]"')

    monkeypatch.setattr(pipeline, "load_run", load_run)
    run = make_fake_run(tmp_path / "myrun")
    code = cli.main(["--run", str(run), "--motions", "demo", "--out", str(tmp_path / "out"), "--no-progress"])
    assert (code, capsys.readouterr().err) == (
        2, 'error: backend "warp" needs MuJoCo Warp: pip install "rgsd-envs[warp]"\n'
    )  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["myrun"]


def test_without_offscreen_gl_eval_warns_before_the_rollouts_and_writes_the_report(tmp_path, monkeypatch, caplog):
    import mujoco

    def no_gl(*args, **kwargs):
        raise mujoco.FatalError("an OpenGL platform library has not been loaded into this process")

    monkeypatch.setattr(mujoco, "Renderer", no_gl)
    run, out = make_fake_run(tmp_path / "myrun"), tmp_path / "out"
    code = cli.main(["--run", str(run), "--motions", "demo", "--out", str(out), "--rollouts", "2", "--kappas", "20",
                     "--set", "video_clips=1", "--set", "video_size=[16,16]", "--no-progress"])  # fmt: skip
    assert code == 0
    warning = next(r for r in caplog.records if r.levelname == "WARNING").getMessage()
    assert warning.startswith("videos skipped: offscreen OpenGL is not available") and "\n" not in warning
    assert "libegl1" in warning and "libosmesa6" in warning and "--no-video" in warning
    assert "Not rendered: offscreen OpenGL" in (out / "report.md").read_text()
    assert json.loads((out / "metrics.json").read_text())["videos_skipped"].startswith("offscreen OpenGL")
    assert [p.suffix for p in (out / "myrun" / "videos").iterdir()] == [".html"]  # the replay, no mp4


def test_report_links_to_a_run_folder_with_a_space_stay_links(tmp_path):
    run, out = make_fake_run(tmp_path / "my run"), tmp_path / "my report"
    code = cli.main(["--run", str(run), "--motions", "demo", "--out", str(out), "--rollouts", "2", "--kappas", "20",
                     "--no-video", "--no-progress"])  # fmt: skip
    assert code == 0
    md = (out / "report.md").read_text()
    assert "![my run kappa sweep](<my run/kappa_sweep.png>)" in md and "](my run/" not in md


def test_a_run_trained_on_several_sources_is_evaluated_on_all_and_a_short_clip_gets_no_fid(tmp_path, caplog):
    from rgsd_envs.motion.library import MotionLib
    from rgsd_envs.testing import first_frames

    walk = MotionLib("demo").clips[0]
    short = first_frames(walk, 10, "hop").save(tmp_path / "clips" / "hop.npz")
    run = make_fake_run(tmp_path / "two", motions=[str(tmp_path / "clips"), "demo"])
    out = tmp_path / "e1"
    code = cli.main(["--run", str(run), "--out", str(out), "--rollouts", "2", "--kappas", "20", "--no-video",
                     "--no-progress"])  # fmt: skip
    assert code == 0
    doc = json.loads((out / "metrics.json").read_text())
    assert doc["motions"] == [str(tmp_path / "clips"), "demo"] and len(doc["clips"]) == 6
    assert doc["fid_feature"]["unscored_clips"] == [{"name": "hop", "frames": 10, "file": str(short)}]
    im = doc["runs"]["two"]["imitation"]
    assert im["clips"]["hop"]["fid"] is None and im["clips"]["hop"]["err_cm"] > 0  # its ERR is still measured
    assert im["clips"][walk.name]["fid"] > 0 and im["categories"]["walk"]["fid"] > 0 and im["all"]["fid"] > 0
    warning = next(r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    assert warning.startswith("FID not measured on 1 clip(s) shorter than 16 frames") and str(short) in warning
    assert "--set fid_window=N" in warning
    md = (out / "report.md").read_text()
    assert f"hop (10 frames, {short})" in md and "fid_window = 15" in md
    assert f"Motions: `{tmp_path / 'clips'}`, `demo` (6 clips" in md


def test_max_clips_evaluates_a_subset_spread_over_the_categories_and_says_so(tmp_path, caplog):
    from rgsd_envs.motion.library import MotionLib
    from rgsd_envs.motion.selection import SPREAD_RULE
    from rgsd_envs.testing import first_frames

    walk = MotionLib("demo").clips[0]
    for name in ("walk_b", "walk_c"):  # two more walks first: the first 3 clips of the set would all be walks
        first_frames(walk, 40, name).save(tmp_path / "clips" / f"{name}.npz")
    run = make_fake_run(tmp_path / "r", motions=[str(tmp_path / "clips"), "demo"])
    out = tmp_path / "e"
    caplog.set_level("INFO")
    code = cli.main(["--run", str(run), "--out", str(out), "--rollouts", "2", "--kappas", "20", "--no-video",
                     "--no-progress", "--set", "max_clips=3"])  # fmt: skip
    assert code == 0
    doc = json.loads((out / "metrics.json").read_text())
    chosen = ["walk_b", "demo_run", "demo_sidestep"]  # the first clip of each of the first 3 categories
    assert [c["name"] for c in doc["clips"]] == chosen
    assert list(doc["runs"]["r"]["imitation"]["clips"]) == chosen
    assert doc["clips_selected"] == {"clips": 3, "of": 7, "rule": SPREAD_RULE}
    md = (out / "report.md").read_text()
    assert "This evaluation covers 3 of the motion set's 7 clips (max_clips = 3: round-robin" in md
    assert f"| clips | 3 of 7 clips from `{tmp_path / 'clips'}`, `demo`: walk 1, run 1, sidestep 1 |" in md
    logged = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("evaluating r (") and m.endswith("on 3 of 7 clips") for m in logged)
    assert any("quick protocol on 3 clips:" in m for m in logged)  # the estimate counts the evaluated clips
    assert cli.config_from_args(_parse(["--run", "a", "--out", "o", "--max-clips", "4"])).max_clips == 4
    # its clip_latents.json holds those 3 clips: a later --latents over the run's 7 says why, and what to run
    every_clip = [c.name for c in MotionLib([str(tmp_path / "clips"), "demo"]).clips]
    with pytest.raises(InputFileError, match=r"\(4 of the 7 clips .*; it was written by an evaluation of 3 of 7 clips "
                       r"\(--max-clips\); evaluate every clip"):  # fmt: skip
        load_clip_latents(out / "r" / "clip_latents.json", every_clip)
    assert load_clip_latents(out / "r" / "clip_latents.json", chosen).shape == (3, 16)
