"""The shipped policy: ``rgsd play --pretrained`` with no training, a card that states what the policy does, and
the builder's relocatable, all-or-nothing run folder."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from rgsd_agents.cli import main as rgsd
from rgsd_agents.play import play_rollout
from rgsd_agents.pretrained import CARD, CARD_FORMAT, build_pretrained, pretrained_card, pretrained_run
from rgsd_envs.motion.demo import write_demo_clips
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.runs.policy import load_policy
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.files import InputFileError

pytestmark = pytest.mark.slow


def test_play_pretrained_renders_a_clip_into_the_working_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert rgsd(["play", "--pretrained", "--clip", "walk", "--frames", "4", "--size", "64", "48"]) == 0
    out = capsys.readouterr().out
    assert f"pretrained policy: {pretrained_run()}" in out and "video: play_walk.mp4" in out
    assert (tmp_path / "play_walk.mp4").stat().st_size > 0


def test_play_takes_a_run_folder_or_pretrained_not_both(demo_run, capsys):
    assert rgsd(["play"]) == 2
    assert rgsd(["play", str(demo_run), "--pretrained"]) == 2
    assert capsys.readouterr().err.count("give a RUN folder or --pretrained") == 2


def test_the_card_states_the_shipped_policy_s_error_on_every_clip():
    run = pretrained_run()
    card = pretrained_card()
    names = list(MotionLib(str(run / "clips")).names)
    assert sorted(card["clips"]) == sorted(names) and len(names) == 13
    errors = [c["error_cm"] for c in card["clips"].values()]
    assert card["mean_error_cm"] == pytest.approx(sum(errors) / len(errors), abs=0.01)
    for clip in ("walk", "demo_run", "punch"):  # a rollout now gives the card's figure
        played = play_rollout(run, clip)
        assert played.error_cm == pytest.approx(card["clips"][clip]["error_cm"], abs=0.5), clip
        assert played.fell == card["clips"][clip]["fell"]


def test_build_makes_a_run_folder_that_works_from_anywhere(demo_run, tmp_path):
    clips = tmp_path / "clips"
    write_demo_clips(clips)
    card = build_pretrained(demo_run, clips, tmp_path / "built" / "p", {"trained": "a test"})
    assert (tmp_path / "built" / "p").stat().st_mode & 0o777 == 0o755  # readable by every user once installed
    moved = tmp_path / "elsewhere"
    shutil.move(tmp_path / "built" / "p", moved)
    shutil.rmtree(clips)  # the folder carries its clips
    assert yaml.safe_load((moved / "config.yaml").read_text())["env"]["motions"] == "clips"
    assert RunDir(moved).env_config().motions == str((moved / "clips").resolve())
    assert card["trained"] == "a test" and json.loads((moved / CARD).read_text()) == card
    meta = load_policy(moved / "policy.pt").meta  # the card states how much training the policy had
    assert card["samples"] == meta["global_step"] > 0 and card["iterations"] == meta["iteration"] > 0
    assert sorted(card["clips"]) == sorted(MotionLib("demo").names)
    played = play_rollout(moved, "demo_walk")
    assert played.error_cm == pytest.approx(card["clips"]["demo_walk"]["error_cm"], abs=0.01)


def test_a_run_trained_on_warp_worlds_ships_to_play_on_native_mujoco(demo_run, tmp_path):
    run = tmp_path / "warp_run"
    shutil.copytree(demo_run, run)
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["env"]["backend"] = "warp"  # as a GPU run's config reads: its env followed the learner to the GPU
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    clips = tmp_path / "clips"
    write_demo_clips(clips)
    build_pretrained(run, clips, tmp_path / "p")
    shipped = RunDir(tmp_path / "p").env_config()
    assert shipped.backend == "mujoco" and shipped.device == "cpu"


def test_a_failed_build_leaves_the_previous_folder_and_no_partial_one(demo_run, tmp_path):
    out = tmp_path / "p"
    out.mkdir()
    (out / CARD).write_text(json.dumps({"format": CARD_FORMAT}))  # an earlier build, which a build may replace
    (out / "keep").write_text("the previous build")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputFileError, match="no clip files"):
        build_pretrained(demo_run, empty, out)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "walk.npz").write_bytes(b"not a clip")
    with pytest.raises(InputFileError, match=r"walk.npz: not an \.npz archive"):
        build_pretrained(demo_run, bad, out)
    assert (out / "keep").read_text() == "the previous build"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "empty", "p"]  # no temporary folder left


def test_a_build_refuses_an_out_holding_other_files_or_the_run_it_copies_and_writes_nothing(tmp_path, capsys):
    from rgsd_agents.pretrained.__main__ import main as build
    from rgsd_eval.testing import make_fake_run

    runs = tmp_path / "runs"
    run = make_fake_run(runs / "run", hidden=(16,))
    clips = _one_clip(tmp_path)
    notes = tmp_path / "notes"
    (notes / "checkpoints").mkdir(parents=True)
    (notes / "notes.txt").write_text("mine")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert build([str(run), "--motions", str(clips), "--out", str(notes)]) == 2
    assert capsys.readouterr().err == (
        f"error: --out {notes}: holds checkpoints/, notes.txt but no card.json of a folder this command built, and "
        "would be replaced whole; give a new or empty folder\n"
    )
    for out, what in ((run, "is"), (runs, "holds"), (tmp_path, "holds")):
        assert build([str(run), "--motions", str(clips), "--out", str(out)]) == 2
        assert capsys.readouterr().err.startswith(f"error: --out {out}: {what} the run it copies ({run}), ")
    assert build([str(run), "--motions", str(clips), "--out", str(run / "shipped")]) == 2
    assert capsys.readouterr().err.startswith(f"error: --out {run / 'shipped'}: lies inside the run it copies")
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing written or removed
    assert (notes / "notes.txt").read_text() == "mine"


def _one_clip(tmp_path):
    """A clip folder of one demo clip (demo_run)."""
    from rgsd_envs.motion.demo import demo_clips

    clips = tmp_path / "clips"
    clips.mkdir()
    next(c for c in demo_clips() if c.name == "demo_run").save(clips / "demo_run.npz")
    return clips


def _latents(seed: int) -> dict[str, list[float]]:
    import numpy as np

    return {n: np.eye(16)[(i + seed) % 16].tolist() for i, n in enumerate(MotionLib("demo").names)}


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_build_stopped_while_it_plays_says_so_in_one_line_exits_130_and_keeps_the_previous_folder(
    signum, tmp_path, monkeypatch, capsys
):
    import signal

    from rgsd_agents import play
    from rgsd_agents.pretrained.__main__ import main as build_main
    from rgsd_envs.testing import raise_stop_signal, stop_signals_as_in_a_terminal
    from rgsd_eval.testing import make_fake_run

    def play_then_stop(*args, **kwargs):
        raise_stop_signal(getattr(signal, signum))
        raise AssertionError("the build went on after the signal")

    monkeypatch.setattr(play, "play_rollout", play_then_stop)
    clips = _one_clip(tmp_path)
    run = make_fake_run(tmp_path / "run", hidden=(16,))
    out = tmp_path / "p"
    out.mkdir()
    (out / CARD).write_text(json.dumps({"format": CARD_FORMAT}))  # an earlier build, which a build may replace
    (out / "keep").write_text("the previous build")
    try:
        with stop_signals_as_in_a_terminal():
            code = build_main([str(run), "--motions", str(clips), "--out", str(out)])
    except KeyboardInterrupt:  # a failure of this test, not a stop of the test run
        pytest.fail("the stop escaped the command: a traceback, not one line")
    assert code == 130
    assert capsys.readouterr().err == "interrupted\n"  # one line, no traceback
    assert (out / "keep").read_text() == "the previous build"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clips", "p", "run"]  # no .p.*.partial stage left


def test_a_build_that_needs_warp_where_it_is_missing_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    from rgsd_agents import play
    from rgsd_agents.pretrained.__main__ import main as build_main
    from rgsd_envs.sim import WarpUnavailableError
    from rgsd_eval.testing import make_fake_run

    def play_rollout(*args, **kwargs):
        raise WarpUnavailableError('backend "warp" needs MuJoCo Warp: pip install "rgsd-envs[warp]"')

    monkeypatch.setattr(play, "play_rollout", play_rollout)
    clips = _one_clip(tmp_path)
    run = make_fake_run(tmp_path / "run", hidden=(16,))
    assert build_main([str(run), "--motions", str(clips), "--out", str(tmp_path / "p")]) == 2
    assert capsys.readouterr().err == 'error: backend "warp" needs MuJoCo Warp: pip install "rgsd-envs[warp]"\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clips", "run"]


def test_a_calm_or_meta_motivo_run_builds_with_every_file_its_method_names(tmp_path):
    import numpy as np
    import torch

    from rgsd_envs.runs.run_dir import save_tracking_latents
    from rgsd_eval.testing import make_fake_run

    clips = _one_clip(tmp_path)
    calm = {"name": "calm", "latent_choice": "clip_latents", "clip_latents": "clip_latents.json"}
    run = make_fake_run(tmp_path / "calm", method=calm, hidden=(16,))
    (run / "clip_latents.json").write_text(json.dumps(_latents(3)))
    card = build_pretrained(run, clips, tmp_path / "p_calm")
    assert card["method"] == "calm" and sorted(card["clips"]) == ["demo_run"]
    assert json.loads((tmp_path / "p_calm" / "clip_latents.json").read_text()) == _latents(3)
    played = play_rollout(tmp_path / "p_calm", "demo_run", frames=1)
    np.testing.assert_allclose(played.skill, _latents(3)["demo_run"], atol=1e-9)  # the run's stored latent

    fb = {"name": "fb_cpr", "latent_choice": "tracking", "tracking_latents": "tracking.npz",
          "clip_latents": "clip_latents.json"}  # fmt: skip
    run = make_fake_run(tmp_path / "fb", method=fb, hidden=(16,), encoder_hidden=None)  # no encoder.pt
    (run / "clip_latents.json").write_text(json.dumps(_latents(1)))
    lib = MotionLib("demo")
    torch.manual_seed(0)
    per_step = {n: torch.nn.functional.normalize(torch.randn(int(f) - 1, 16), dim=-1)
                for n, f in zip(lib.names, lib.num_frames)}  # fmt: skip
    save_tracking_latents(run / "tracking.npz", per_step)
    card = build_pretrained(run, clips, tmp_path / "p_fb")
    assert card["method"] == "fb_cpr"
    assert sorted(p.name for p in (tmp_path / "p_fb").iterdir()) == [
        "card.json", "clip_latents.json", "clips", "config.yaml", "method.json", "policy.pt", "tracking.npz"
    ]  # fmt: skip


def test_a_best_of_n_run_builds_with_the_latents_rgsd_eval_chose_and_says_so_up_front_without(tmp_path):
    import numpy as np

    from rgsd_agents.pretrained.__main__ import main as build_main
    from rgsd_eval.testing import make_fake_run

    clips = _one_clip(tmp_path)
    run = make_fake_run(tmp_path / "diayn", method={"name": "diayn", "latent_choice": "best_of_n"}, hidden=(16,))
    with pytest.raises(InputFileError, match=r"best of N.*--latents <report>/<run>/clip_latents\.json") as err:
        build_pretrained(run, clips, tmp_path / "p")
    assert err.value.path == str(run / "method.json") and ".partial" not in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clips", "diayn"]  # nothing written
    bad = tmp_path / "few.json"
    bad.write_text(json.dumps({"walk": [1.0] + [0.0] * 15}))
    with pytest.raises(InputFileError, match="no latent for clip 'demo_run'") as err:
        build_pretrained(run, clips, tmp_path / "p", latents=bad)
    assert err.value.path == str(bad)
    given = tmp_path / "clip_latents.json"
    given.write_text(json.dumps(_latents(4)))
    out = tmp_path / "p"
    for about in ("[1]", "{trained"):  # a list, not JSON: refused before anything is read or written
        with pytest.raises(SystemExit) as stop:
            build_main([str(run), "--motions", str(clips), "--out", str(out), "--about", about])
        assert stop.value.code == 2 and not out.exists()
    about = '{"trained": "rgsd train --config cpu, 1 minute"}'
    argv = [str(run), "--motions", str(clips), "--out", str(out), "--latents", str(given), "--about", about]
    assert build_main(argv) == 0
    card = pretrained_card(out)
    assert card["method"] == "diayn" and card["clip_latents"] == "clip_latents.json"
    assert card["trained"] == "rgsd train --config cpu, 1 minute"
    assert json.loads((out / "clip_latents.json").read_text()) == _latents(4)
    played = play_rollout(out, "demo_run", latents=out / "clip_latents.json")
    np.testing.assert_allclose(played.skill, _latents(4)["demo_run"], atol=1e-9)
    assert played.error_cm == pytest.approx(card["clips"]["demo_run"]["error_cm"], abs=0.01)
