"""``rgsd view`` as a person uses it: the page draws the humanoid and its reference, kappa spreads the variants,
the blend slider moves the skill between two clips' latents, a downstream run's goal moves where the floor is
clicked, and bad input gets one line."""

from __future__ import annotations

import argparse
import math
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

pytest.importorskip("viser", reason="rgsd view needs viser: pip install 'rgsd-agents[viewer]'")

from rgsd_agents.cli import main
from rgsd_agents.pretrained import pretrained_run
from rgsd_agents.viewer.app import (
    GoalViewerApp,
    ServeConfig,
    http_url,
    network_address,
    open_viewer,
    remote_access_line,
    ssh_forward_line,
)
from rgsd_agents.viewer.limits import KAPPA_RANGE, PORT_RANGE, SPEED_RANGE
from rgsd_agents.viewer.server import ServerStartError, start_server
from rgsd_agents.viewer.session import SessionConfig, ViewerSession
from rgsd_envs.envs.goal_reaching_v0 import GOAL_OBS_LAYOUT, goal_in_heading_frame
from rgsd_eval.browser import find_chromium, live_screenshot

SCREENSHOT = Path(__file__).resolve().parents[3] / "docs" / "images" / "rgsd_view.png"
"""Where RGSD_DOCS_SCREENSHOT=1 copies the browser's shot for the docs page."""
PAGE_READY = (
    "document.querySelector('canvas') && document.body.innerText.includes('error to the reference')"
    " && document.body.innerText.includes('blend with')"
)
"""The page is connected, with the session's readout and controls (the 3D view is drawn within the next frames)."""
NO_CHROMIUM = "no Chromium (apt-get install chromium; .ci/run installs it)"
TINY_DOWNSTREAM = [
    "iterations=1", "num_envs=2", "horizon=2", "eval_episodes=1", "eval_every=100", "task.episode_seconds=0.5",
    "ppo.minibatch_size=4", "networks.actor_hidden=[16]", "networks.critic_hidden=[16]",
]  # fmt: skip
"""One iteration of ``rgsd downstream --config demo`` on two worlds: a real run folder, in seconds."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _hue_shares(png) -> tuple[float, float]:
    """Shares of clearly blue (the policy) and clearly orange (the reference ghost) pixels."""
    from PIL import Image

    img = np.asarray(Image.open(png).convert("RGB"), dtype=np.int32)
    h, w = img.shape[:2]
    img = img[int(0.3 * h) :, : int(0.6 * w)]  # the 3D view only: left of the control panel, below any notice
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    blue = (b - r > 40) & (b - g > 15)
    orange = (r - b > 40) & (r - g > 15)
    return float(blue.mean()), float(orange.mean())


def _spread(app, kappa: float, steps: int) -> float:
    """Mean horizontal distance of the variants' pelvis from the policy's after ``steps`` steps at ``kappa``."""
    app.set_kappa(kappa)
    app.step(steps)
    p = app.pelvis_positions()
    return float(np.linalg.norm(p[1:, :2] - p[0, :2], axis=-1).mean())


@pytest.fixture(scope="module")
def viewer():
    app = open_viewer(
        pretrained_run(),
        clip="walk",
        session=SessionConfig(variants=2, kappa=20.0),
        serve=ServeConfig(port=_free_port()),
    )
    yield app
    app.close()


@pytest.fixture(scope="module")
def downstream_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("downstream") / "goal"
    sets = [a for kv in TINY_DOWNSTREAM for a in ("--set", kv)]
    low = str(pretrained_run())
    assert main(["downstream", "--low-level", low, "--config", "demo", "--out", str(out), "--no-progress", *sets]) == 0
    return out


@pytest.fixture(scope="module")
def goal_viewer(downstream_run):
    app = open_viewer(downstream_run, serve=ServeConfig(port=_free_port()))
    app.set_paused(True)
    yield app
    app.close()


def _simulated_goal_obs(app) -> tuple[np.ndarray, np.ndarray]:
    """The observation's goal part, and the goal in the simulated pelvis's heading frame."""
    task = app.session.task
    st = task.core.backend.state()
    expected = goal_in_heading_frame(st.body_pos[:, 0], st.body_rot[:, 0], task.goal)[0].double().numpy()
    return app.session.observation()[GOAL_OBS_LAYOUT["goal"]], expected


@pytest.mark.skipif(find_chromium() is None, reason=NO_CHROMIUM)
def test_the_page_draws_the_humanoid_and_its_reference_ghost(viewer, tmp_path):
    viewer.start()
    deadline = time.monotonic() + 10.0
    while viewer.session.frame == 0 and viewer.session.num_frames > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert viewer.session.frame > 0 or viewer.session.num_frames <= 1  # the simulation runs on its own
    # a fixed frame for the picture: where a live run happens to be when the page loads varies with the machine's load
    viewer.set_paused(True)
    viewer.reset()
    viewer.step(15)
    shot = live_screenshot(viewer.url, tmp_path / "view.png", (1000, 640), wait_s=3.0, ready=PAGE_READY)
    blue, orange = _hue_shares(shot)
    if os.environ.get("RGSD_DOCS_SCREENSHOT"):
        shutil.copy(shot, SCREENSHOT)
    assert blue > 0.002, f"the policy (blue) covers {blue:.2%} of the 3D view"
    assert orange > 0.002, f"the reference ghost (orange) covers {orange:.2%} of the 3D view"


def test_smaller_kappa_spreads_the_variants_further(viewer):
    viewer.set_paused(True)
    viewer.select_clip("walk")
    viewer.session.rng = np.random.default_rng(1)
    close = np.mean([_spread(viewer, 1000.0, 45) for _ in range(3)])
    wide = np.mean([_spread(viewer, 2.0, 45) for _ in range(3)])
    assert wide > 2.0 * close, (close, wide)
    assert viewer.session.kappa == 2.0 and viewer.gui_kappa.value == pytest.approx(np.log10(2.0))


def test_new_variants_change_the_variants_skills_not_the_policy_s(viewer):
    before = viewer.session.skills.copy()
    viewer.new_variants()
    after = viewer.session.skills
    assert np.array_equal(before[0], after[0]) and not np.allclose(before[1:], after[1:])
    assert np.allclose(np.linalg.norm(after, axis=-1), 1.0)


def test_the_error_readout_is_zero_at_the_first_frame_and_grows(viewer):
    viewer.reset()
    assert viewer.session.frame == 0 and viewer.session.errors_cm().max() < 1e-3
    viewer.step(20)
    assert viewer.session.errors_cm()[0] > 0.1


def test_the_readout_names_each_variant_by_the_colour_it_is_drawn_in(viewer):
    """The variants are drawn in VARIANT_COLORS order: green, then purple."""
    err = viewer.session.errors_cm()
    assert f"; variants green {err[1]:.0f}, purple {err[2]:.0f} cm" in viewer.status()


def test_a_downstream_run_opens_the_goal_page_with_the_distance_readout(goal_viewer):
    assert isinstance(goal_viewer, GoalViewerApp) and "click the floor" in goal_viewer.summary
    goal_viewer.reset()
    pelvis = goal_viewer.pelvis_positions()[0]
    goal_viewer.set_goal(pelvis[0] + 3.0, pelvis[1] + 4.0)
    assert goal_viewer.distance() == pytest.approx(5.0, abs=0.01)
    assert "distance to the goal **5.00 m**" in goal_viewer.gui_status.content
    goal_viewer.step(12)  # the policy decides and the humanoid moves, the goal stays
    assert goal_viewer.session.frame == 12 and not np.allclose(goal_viewer.pelvis_positions()[0], pelvis)
    np.testing.assert_allclose(goal_viewer.goal(), pelvis[:2] + (3.0, 4.0), atol=0.01)


def test_set_goal_moves_the_task_goal_and_the_observation_s_goal(goal_viewer):
    goal_viewer.step(7)
    before, _ = _simulated_goal_obs(goal_viewer)
    goal_viewer.set_goal(2.5, -1.5)
    np.testing.assert_allclose(goal_viewer.session.task.goal[0].numpy(), [2.5, -1.5], atol=0.01)
    np.testing.assert_allclose(goal_viewer.goal(), [2.5, -1.5], atol=0.01)
    after, expected = _simulated_goal_obs(goal_viewer)
    np.testing.assert_allclose(after, expected, atol=1e-4)
    assert np.linalg.norm(after - before) > 0.5


def test_a_click_on_the_floor_moves_the_goal_to_the_clicked_point(goal_viewer):
    goal_viewer.follow = True
    goal_viewer.step(4)  # the scene is now drawn relative to a pelvis away from the world's origin
    target = np.array([-1.25, 2.75])
    scene_target = np.array([*target, 0.0]) - goal_viewer.origin
    camera = scene_target + (2.0, -3.0, 2.5)  # a camera above the floor, looking down at the point clicked
    ray = scene_target - camera
    event = SimpleNamespace(ray_origin=tuple(camera), ray_direction=tuple(ray / np.linalg.norm(ray)))
    hit = goal_viewer.on_floor_click(event)
    np.testing.assert_allclose(hit, target, atol=0.01)
    np.testing.assert_allclose(goal_viewer.session.task.goal[0].numpy(), target, atol=0.01)
    got, expected = _simulated_goal_obs(goal_viewer)
    np.testing.assert_allclose(got, expected, atol=1e-4)
    # a click on the sky misses the floor: the goal stays
    assert (
        goal_viewer.on_floor_click(SimpleNamespace(ray_origin=(0.0, 0.0, 1.0), ray_direction=(0.0, 0.6, 0.8))) is None
    )
    np.testing.assert_allclose(goal_viewer.goal(), target, atol=0.01)


def test_restarting_the_episode_keeps_the_goal(goal_viewer):
    goal_viewer.set_goal(1.0, 1.0)
    goal_viewer.step(6)
    goal_viewer.reset()  # the button; a fall restarts the same way
    assert goal_viewer.session.frame == 0
    np.testing.assert_allclose(goal_viewer.pelvis_positions()[0, :2], 0.0, atol=1e-6)  # back at the centre
    np.testing.assert_allclose(goal_viewer.goal(), (1.0, 1.0), atol=1e-6)


def test_a_run_trained_on_warp_plays_live_on_native_mujoco_on_the_cpu(tmp_path):
    """A GPU run's config names MuJoCo Warp; the page needs neither Warp nor a GPU to show it."""
    from rgsd_eval.testing import make_fake_run

    run = make_fake_run(tmp_path / "warp", env={"backend": "warp"})
    app = open_viewer(run, session=SessionConfig(variants=1), serve=ServeConfig(port=_free_port()))
    try:
        cfg = app.session.env.core.cfg
        assert (cfg.backend, cfg.device) == ("mujoco", "cpu")
        app.step(2)
        assert app.session.frame == 2
    finally:
        app.close()


def test_bad_input_gets_one_line(tmp_path, capsys):
    assert main(["view", str(tmp_path), "--port", str(_free_port())]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(tmp_path) in err and "config.yaml" in err
    assert main(["view", "--pretrained", "--clip", "nope", "--port", str(_free_port())]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "no clip named 'nope'" in err and "walk" in err


def test_a_downstream_run_s_bad_input_gets_one_line(downstream_run, tmp_path, capsys):
    assert main(["view", str(downstream_run), "--clip", "walk", "--port", str(_free_port())]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "downstream run" in err and "--clip" in err
    moved = tmp_path / "moved"  # a downstream run whose low-level run is gone
    moved.mkdir()
    (moved / "policy.pt").write_bytes((downstream_run / "policy.pt").read_bytes())
    cfg = yaml.safe_load((downstream_run / "config.yaml").read_text())
    (moved / "config.yaml").write_text(yaml.safe_dump({**cfg, "low_level": str(tmp_path / "gone")}))
    assert main(["view", str(moved), "--port", str(_free_port())]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(tmp_path / "gone") in err and "not found" in err


def test_the_command_prints_the_url_and_the_ssh_forwarding_line():
    port = _free_port()
    out = subprocess.run(
        [sys.executable, "-m", "rgsd_agents.cli", "view", "--pretrained", "--port", str(port), "--seconds", "1"],
        capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    assert f"http://localhost:{port}" in out
    assert ssh_forward_line(port) in out and f"ssh -L {port}:localhost:{port} " in out


def test_the_page_opens_on_walk_where_the_run_has_it_else_on_the_first_clip(tmp_path):
    """The shipped policy's clips start with demo_backward (a clip it falls on): the page opens on walk, the clip
    the README plays; a run without one opens on its first clip; rgsd play's default is the same rule."""
    from rgsd_agents.run_skills import default_clip

    app = open_viewer(pretrained_run(), session=SessionConfig(variants=0), serve=ServeConfig(port=_free_port()))
    try:
        names = list(app.session.lib.names)
        assert names[0] != "walk" and app.session.clip_name == "walk"
        assert app.gui_clip.value == "walk"
    finally:
        app.close()
    assert default_clip(["a", "walk", "b"]) == 1 and default_clip(["demo_run", "demo_walk"]) == 0


def test_a_page_served_on_every_interface_prints_the_address_to_open_from_another_machine(capsys):
    port = _free_port()
    assert main(["view", "--pretrained", "--host", "0.0.0.0", "--port", str(port), "--seconds", "0"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("from another machine:"))
    assert f"open http://{socket.gethostname()}:{port}" in line and "ssh -L" not in line
    address = network_address()
    assert address is None or f"http://{address}:{port}" in line


@pytest.mark.parametrize(("signum", "code"), [("SIGINT", 0), ("SIGTERM", 130), ("SIGHUP", 130)])
def test_ctrl_c_ends_a_viewing_session_and_sigterm_or_sighup_stops_it(signum, code, monkeypatch, capsys):
    """Ctrl-C is how a session ends (exit status 0); SIGTERM and SIGHUP stop it as any command (one line, 130)."""
    import signal
    import threading

    from rgsd_agents.viewer import app as app_module
    from rgsd_envs.testing import raise_stop_signal, stop_signals_as_in_a_terminal

    opened = app_module.open_viewer

    def open_then_signal_once_served(*args, **kwargs):
        app = opened(*args, **kwargs)
        start = app.start

        def start_then_signal():
            start()  # the signal comes while the command waits (--seconds 60)
            threading.Timer(0.5, raise_stop_signal, (getattr(signal, signum),)).start()

        app.start = start_then_signal
        return app

    monkeypatch.setattr(app_module, "open_viewer", open_then_signal_once_served)
    began = time.monotonic()
    with stop_signals_as_in_a_terminal():
        assert main(["view", "--pretrained", "--port", str(_free_port()), "--seconds", "60"]) == code
    assert time.monotonic() - began < 50  # stopped by the signal, not at the end of its --seconds
    err = capsys.readouterr().err
    assert err == ("" if code == 0 else f"stopped by {signum}\n"), err


def test_an_ipv6_host_is_written_in_brackets_in_the_printed_address():
    assert remote_access_line("fd00::5", 8080) == "open http://[fd00::5]:8080"
    assert remote_access_line("10.0.0.5", 8080) == "open http://10.0.0.5:8080"
    assert http_url("[fd00::5]", 8080) == "http://[fd00::5]:8080"  # given in brackets already: kept


@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [
        ("--port", "99999", f"a port {PORT_RANGE[0]}-{PORT_RANGE[1]} (0: any free port), got 99999"),
        ("--speed", "0", f"a speed {SPEED_RANGE[0]:g}-{SPEED_RANGE[1]:g}, got 0.0"),
        ("--kappa", "5000", f"a concentration {KAPPA_RANGE[0]:g}-{KAPPA_RANGE[1]:g}, got 5000.0"),
        ("--kappa", "0.5", f"a concentration {KAPPA_RANGE[0]:g}-{KAPPA_RANGE[1]:g}, got 0.5"),
        ("--seconds", "-1", "a number of seconds >= 0, got -1.0"),
    ],
)
def test_a_flag_outside_its_range_is_refused_before_anything_starts(tmp_path, capsys, flag, value, expected):
    """The ranges are the controls' own (a speed the slider cannot show would fail once the page is up)."""
    with pytest.raises(SystemExit) as stop:
        main(["view", str(tmp_path), flag, value])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: expected {expected}" in err and "Traceback" not in err


def test_the_range_ends_are_accepted_and_the_sliders_span_them(viewer):
    from rgsd_agents.commands.view import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["view", "r", "--speed", str(SPEED_RANGE[0]), "--kappa", str(KAPPA_RANGE[1])])
    assert (args.speed, args.kappa) == (SPEED_RANGE[0], KAPPA_RANGE[1])
    assert (viewer.gui_kappa.min, viewer.gui_kappa.max) == (0.0, 3.0) == tuple(math.log10(k) for k in KAPPA_RANGE)


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def _env_skills(session) -> np.ndarray:
    """(worlds, 16) the skills the simulated worlds' observations carry now."""
    return session.env.core.skill.double().numpy()


def test_the_blend_slider_moves_the_policy_s_skill_from_walk_to_run_live_and_the_variants_with_it(viewer):
    viewer.set_paused(True)
    viewer.select_clip("walk")
    names = list(viewer.session.lib.names)
    assert viewer.gui_blend_clip.options == ("(none)", *names) and viewer.gui_blend_clip.value == "(none)"
    assert (viewer.gui_blend.min, viewer.gui_blend.max, viewer.gui_blend.disabled) == (0.0, 1.0, True)
    walk, run = (_unit(viewer.session.latents.centres[names.index(n)]) for n in ("walk", "run"))
    assert walk @ run < 0.99  # two skills apart: the blend has somewhere to go
    viewer.step(10)
    reference = viewer.session.reference_positions()
    variants_cosine = _env_skills(viewer.session)[1:] @ walk
    for t, expected in ((0.0, walk), (1.0, run), (0.5, _unit(walk + run))):
        viewer.set_blend("run", t)
        np.testing.assert_allclose(_env_skills(viewer.session)[0], expected, atol=1e-6)
        # the variants turn with the policy's skill: each keeps its angle to it
        np.testing.assert_allclose(_env_skills(viewer.session)[1:] @ expected, variants_cosine, atol=1e-5)
    assert viewer.session.frame == 10  # no restart: the humanoids carry on with the new skill
    np.testing.assert_array_equal(viewer.session.reference_positions(), reference)  # the ghost stays on walk
    assert (viewer.gui_blend_clip.value, viewer.gui_blend.value, viewer.gui_blend.disabled) == ("run", 0.5, False)
    assert "skill walk -> run 0.50;" in viewer.gui_status.content
    viewer.set_blend(None, 0.5)
    np.testing.assert_allclose(_env_skills(viewer.session)[0], walk, atol=1e-6)
    assert viewer.gui_blend.disabled and "skill walk;" in viewer.gui_status.content


def test_set_skill_plays_any_direction_of_the_run_s_size_and_refuses_others(viewer):
    viewer.set_paused(True)
    viewer.select_clip("walk")
    viewer.step(3)
    z = np.arange(16.0) - 7.5
    viewer.set_skill(3.0 * z)
    np.testing.assert_allclose(_env_skills(viewer.session)[0], _unit(z), atol=1e-6)
    assert viewer.session.frame == 3 and "skill given (set_skill), cosine" in viewer.gui_status.content
    for bad, message in (
        ([1.0, 0.0, 0.0], "a skill is 16 numbers (the run's env.skill_dim), got 3"),
        (np.ones((1, 16)), "a skill is 16 numbers (the run's env.skill_dim), got shape (1, 16)"),
        ([*np.ones(15), np.nan], "a skill must be finite, got nan at index 15"),
        (np.zeros(16), "a skill must not be all zeros"),
    ):
        with pytest.raises(ValueError) as err:
            viewer.set_skill(bad)
        assert message in str(err.value)
    np.testing.assert_allclose(_env_skills(viewer.session)[0], _unit(z), atol=1e-6)  # a refused skill changes nothing
    viewer.select_clip("run")  # another clip: its own latent again
    run = viewer.session.latents.centres[list(viewer.session.lib.names).index("run")]
    np.testing.assert_allclose(_env_skills(viewer.session)[0], _unit(run), atol=1e-6)


def test_a_tracking_run_blends_the_two_clips_per_step_latents_step_by_step(tmp_path):
    """Meta Motivo commands a latent per step: blended, step f plays slerp(walk's row f, run's row f, t)."""
    from rgsd_envs.envs.skills import slerp
    from rgsd_envs.motion.library import MotionLib
    from rgsd_eval.runs import load_run, on_cpu_mujoco
    from rgsd_eval.testing import make_fake_tracking_run

    run, per_step = make_fake_tracking_run(tmp_path / "fb")
    lib = MotionLib("demo")
    loaded = on_cpu_mujoco(load_run(run, latent="auto", device="cpu"))
    session = ViewerSession(loaded, lib, SessionConfig(variants=0))
    try:
        a, b = (per_step[n].double().numpy() for n in ("demo_walk", "demo_run"))
        session.reset("demo_walk")
        session.step()
        session.step()
        session.set_blend("demo_run", 0.3)  # live: the step from frame 2 plays the blend of the rows for it
        np.testing.assert_allclose(_env_skills(session)[0], slerp(a[2], b[2], 0.3), atol=1e-6)
        session.step()
        session.step()  # the step from frame 3
        np.testing.assert_allclose(_env_skills(session)[0], slerp(a[3], b[3], 0.3), atol=1e-6)
        assert session.frame == 4 and session.skill_label() == "demo_walk -> demo_run 0.30"
    finally:
        session.close()


@pytest.mark.parametrize(
    ("host", "port", "expected"),
    [
        ("127.0.0.1", 99999, "port must be 0-65535"),  # the server thread's own error
        ("192.0.2.1", None, "assign"),  # an address of no interface here: viser gives up silently
        ("nosuch.invalid", None, "not known"),
    ],
)
def test_a_server_that_cannot_start_raises_one_error_instead_of_waiting_forever(capfd, host, port, expected):
    start = time.monotonic()
    with pytest.raises(ServerStartError) as err:
        start_server(host, port or _free_port(), timeout_s=30)
    assert time.monotonic() - start < 25  # well before the timeout: the failure itself ends the wait
    assert f"cannot serve on {host}:" in str(err.value) and expected in str(err.value).lower()
    assert "Traceback" not in capfd.readouterr().err


def test_the_command_ends_with_one_line_when_the_server_cannot_start(capsys):
    assert main(["view", "--pretrained", "--host", "192.0.2.1", "--port", str(_free_port()), "--seconds", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: cannot serve on 192.0.2.1:")
