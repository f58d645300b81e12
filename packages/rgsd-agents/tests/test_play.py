"""``rgsd play``: a trained policy's rollout of a clip's skill as an mp4, clear errors, watchable default sizes."""

from __future__ import annotations

import imageio
import numpy as np
import pytest

from rgsd_agents.cli import main as rgsd
from rgsd_agents.play import play_rollout

pytestmark = pytest.mark.slow


def _read_video(path) -> tuple[np.ndarray, dict]:
    reader = imageio.get_reader(path, format="FFMPEG")
    try:
        return np.stack(list(reader.iter_data())), reader.get_meta_data()
    finally:
        reader.close()


def test_play_writes_an_mp4_with_the_requested_frames_and_size(demo_run, tmp_path, capsys):
    out = tmp_path / "walk.mp4"
    args = ["play", str(demo_run), "--clip", "demo_run", "--kappa", "20", "--frames", "12", "--size", "96", "72"]
    assert rgsd([*args, "--out", str(out)]) == 0
    frames, meta = _read_video(out)
    assert frames.shape == (12, 72, 96, 3)
    assert meta["fps"] == pytest.approx(30.0)
    assert frames.std() > 5  # a picture, not a blank frame
    stdout = capsys.readouterr().out
    assert "demo_run: z ~ vMF(z_m, 20): 12 frames" in stdout and f"video: {out}" in stdout
    assert not list(tmp_path.glob(".*.tmp"))


def test_play_with_reference_puts_two_tiles_side_by_side_with_progress_lines(demo_run, tmp_path, capsys):
    out = tmp_path / "ref.mp4"
    assert rgsd(["play", str(demo_run), "--frames", "3", "--size", "64", "48", "--reference", "--out", str(out)]) == 0
    frames, _ = _read_video(out)
    assert frames.shape == (3, 48, 128, 3)
    lines = capsys.readouterr().err.splitlines()  # not a terminal: whole lines with the time left
    assert any(line.startswith("rollout: 100%") and " left" in line for line in lines), lines
    assert any(line.startswith("video: 100%") and "6/6 tile" in line for line in lines), lines


def test_play_skill_is_z_m_or_a_vmf_sample_around_it(demo_run):
    exact = play_rollout(demo_run, "demo_walk", frames=2)
    varied = play_rollout(demo_run, "demo_walk", kappa=20.0, frames=2, seed=1)
    close = play_rollout(demo_run, "demo_walk", kappa=1e5, frames=2, seed=1)
    for p in (exact, varied, close):
        assert np.linalg.norm(p.skill) == pytest.approx(1.0)
        assert p.qpos.shape == (2, 76) and p.reference_qpos.shape == (2, 76)
    assert 0.0 < varied.skill @ exact.skill < 0.99
    assert close.skill @ exact.skill > 0.999
    np.testing.assert_allclose(exact.qpos[0], exact.reference_qpos[0], atol=1e-5)  # starts in the clip's first frame


def test_play_unknown_clip_lists_the_clip_names(demo_run, capsys):
    assert rgsd(["play", str(demo_run), "--clip", "demo_swim"]) == 2
    err = capsys.readouterr().err
    assert "no clip named 'demo_swim'" in err
    assert "demo_walk, demo_run, demo_sidestep, demo_backward, demo_punch" in err


def test_play_viewer_without_a_display_says_what_to_do(demo_run, capsys, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setattr("sys.platform", "linux")
    assert rgsd(["play", str(demo_run), "--viewer"]) == 2
    err = capsys.readouterr().err
    assert "--viewer needs a display" in err and "--out play.mp4" in err


def test_report_videos_and_tiles_are_at_least_480_by_360_by_default():
    import inspect

    from rgsd_envs.render import render_side_by_side
    from rgsd_eval.config import EvalConfig
    from rgsd_eval.videos import render_tiles

    assert EvalConfig().video_size[0] >= 480 and EvalConfig().video_size[1] >= 360
    assert inspect.signature(render_tiles).parameters["size"].default == EvalConfig().video_size
    params = inspect.signature(render_side_by_side).parameters
    assert params["width"].default >= 480 and params["height"].default >= 360


def test_play_rolls_out_the_clip_latent_a_run_stored(tmp_path):
    """An FB-CPR run (no encoder.pt; method.json names its clip_latents.json) plays its stored latent."""
    import json

    from rgsd_envs.motion.library import MotionLib
    from rgsd_eval.testing import make_fake_run

    method = {"name": "fb_cpr", "latent_choice": "clip_latents", "clip_latents": "clip_latents.json"}
    run = make_fake_run(tmp_path / "fb", p_imitation=0.0, encoder_hidden=None, method=method)
    names = MotionLib("demo").names
    latents = {n: np.eye(16)[i % 16].tolist() for i, n in enumerate(names)}
    (run / "clip_latents.json").write_text(json.dumps(latents))
    played = play_rollout(run, clip=names[1], frames=3)
    np.testing.assert_allclose(played.skill, latents[names[1]])
    assert played.qpos.shape[0] == 3


def test_play_follows_the_per_step_latents_of_a_tracking_run(tmp_path):
    """A Meta Motivo run (method.json latent_choice "tracking") plays its clip's latent of each step."""
    from rgsd_envs.motion.library import MotionLib
    from rgsd_eval.rollouts import track_centres
    from rgsd_eval.testing import make_fake_tracking_run

    run, per_step = make_fake_tracking_run(tmp_path / "fb")
    lib = MotionLib("demo")
    played = play_rollout(run, clip=lib.names[2], frames=3)
    centre = track_centres([per_step[lib.names[2]].double().numpy()])[0]
    np.testing.assert_allclose(played.skill, centre, atol=1e-6)  # the track's mean: the track itself is played
    assert played.qpos.shape[0] == 3


def test_play_of_a_best_of_n_run_asks_for_the_latents_rgsd_eval_chose_and_plays_them(tmp_path, capsys):
    """A DIAYN run has no latent of its own for a clip: rgsd play says to pass rgsd eval's clip_latents.json
    (before any rollout), and plays the given latent."""
    import json

    from rgsd_envs.motion.library import MotionLib
    from rgsd_eval.testing import make_fake_run

    method = {"name": "diayn", "latent_choice": "best_of_n"}
    run = make_fake_run(tmp_path / "diayn", p_imitation=0.0, encoder_init="random", method=method)
    assert rgsd(["play", str(run), "--frames", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
    assert "best-of-N" in err and "--latents <report>/diayn/clip_latents.json" in err
    assert "its folder is diayn-2, diayn-3, ... in a report that evaluated it after runs of the same name" in err
    names = MotionLib("demo").names
    latents = {n: np.eye(16)[(i + 3) % 16].tolist() for i, n in enumerate(names)}
    (tmp_path / "clip_latents.json").write_text(json.dumps(latents))
    played = play_rollout(run, clip=names[1], frames=3, latents=tmp_path / "clip_latents.json")
    np.testing.assert_allclose(played.skill, latents[names[1]])


def test_play_s_default_video_is_named_by_the_clip_s_file_stem_inside_the_run(tmp_path):
    import dataclasses

    from rgsd_envs.motion.clip import clip_file_stem
    from rgsd_envs.motion.demo import demo_clips
    from rgsd_eval.testing import make_fake_run

    name = "wälk 2"
    dataclasses.replace(demo_clips()[0], name=name).save(tmp_path / "clips" / "w.npz")
    run = make_fake_run(tmp_path / "run", motions=str(tmp_path / "clips"))
    assert rgsd(["play", str(run), "--clip", name, "--frames", "2", "--size", "64", "48"]) == 0
    assert [p.name for p in run.glob("play_*")] == [f"play_{clip_file_stem(name)}.mp4"]
    assert clip_file_stem(name) != name


def test_play_runs_a_run_trained_on_warp_on_native_mujoco_on_the_cpu(tmp_path, monkeypatch):
    """A GPU run's config names MuJoCo Warp; rgsd play needs neither Warp nor a GPU to show it."""
    import rgsd_agents.play as play
    from rgsd_eval.testing import make_fake_run

    run = make_fake_run(tmp_path / "warp", env={"backend": "warp"})
    made, env = [], play.RGSDTorchEnv
    monkeypatch.setattr(play, "RGSDTorchEnv", lambda *a, **kw: (made.append(kw["config"]), env(*a, **kw))[1])
    assert play_rollout(run, frames=3).qpos.shape[0] == 3
    assert [(c.backend, c.device) for c in made] == [("mujoco", "cpu")]
