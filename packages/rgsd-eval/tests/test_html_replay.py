"""The HTML replay: its data round-trips however far a character travels, it needs nothing from the network, a
browser draws both bodies from where the videos' camera stands, and its keys and scrub bar do one thing each."""

from __future__ import annotations

import base64
import json
import re
import time
from pathlib import Path

import numpy as np
import pytest

from rgsd_envs.motion.demo import demo_clips
from rgsd_envs.render import FollowCamera
from rgsd_eval.browser import color_fraction, find_chromium, hex_rgb, open_page, screenshot
from rgsd_eval.config import EvalConfig
from rgsd_eval.html_replay import (
    GHOST_ALPHA,
    POLICY_COLOR,
    POSITION_QUANTUM,
    REFERENCE_COLOR,
    VARIANT_COLORS,
    ReplayTrack,
    body_positions,
    replay_html,
    write_replay,
)

BACKGROUND = (0xF3, 0xF4, 0xF6)
"""The replay page's background colour."""
DOCS = Path(__file__).resolve().parents[3] / "docs" / "viewer.md"
NO_CHROMIUM = "no Chromium (apt-get install chromium; .ci/run installs it)"
PAGE_READY = "typeof tracks !== 'undefined' && document.getElementById('time').textContent !== ''"
"""The player has decoded the tracks and drawn its first frame."""


@pytest.fixture(scope="module")
def walk():
    return next(c for c in demo_clips() if c.category == "walk")


def _data(html: str) -> dict:
    return json.loads(re.search(r'<script id="replay-data" type="application/json">(.*?)</script>', html, re.S)[1])


def _decoded(track: dict) -> np.ndarray:
    """(T, 24, 3) positions (m) of a stored track: each frame's pelvis x, y (int32) plus the bodies' offsets (int16)."""
    root = np.frombuffer(base64.b64decode(track["root"]), dtype="<i4").reshape(-1, 1, 2)
    pos = np.frombuffer(base64.b64decode(track["data"]), dtype="<i2").reshape(-1, 24, 3).astype(np.int64)
    pos[..., :2] += root
    return pos * POSITION_QUANTUM


def _far_walk(walk) -> np.ndarray:
    """The walk carried 80 m out and on along x, to 80 + 300 m at its end (a long run at 5 m/s)."""
    t = np.linspace(0.0, 1.0, len(walk.body_pos))[:, None, None]
    return walk.body_pos + np.array([80.0, -80.0, 0.0]) + t * np.array([300.0, 0.0, 0.0])


def test_a_track_far_from_the_origin_keeps_its_positions_to_the_quantum(walk, tmp_path):
    """A long clip travels hundreds of metres: each body is stored relative to its frame's pelvis, not clamped."""
    far = _far_walk(walk)
    data = _data(write_replay([ReplayTrack("far", far, POLICY_COLOR)], tmp_path / "far.html", "far").read_text())
    assert np.abs(_decoded(data["tracks"][0]) - far).max() <= POSITION_QUANTUM / 2 + 1e-9


def test_replay_holds_every_track_s_poses_to_the_quantum_and_loads_nothing(walk, tmp_path):
    beside = walk.body_pos + np.array([0.0, 0.8, 0.0])
    tracks = [ReplayTrack("policy", beside, POLICY_COLOR), ReplayTrack("ref", walk.body_pos, REFERENCE_COLOR, True)]
    path = write_replay(tracks, tmp_path / "walk.html", "walk", frame_step=2)
    html = path.read_text()
    data = _data(html)
    assert [t["label"] for t in data["tracks"]] == ["policy", "ref"] and data["tracks"][1]["ghost"]
    assert data["fps"] == 15.0 and data["tracks"][0]["frames"] == len(walk.body_pos[::2])
    raw = np.frombuffer(base64.b64decode(data["tracks"][0]["data"]), dtype="<i2").reshape(-1, 24, 3)
    assert np.abs(_decoded(data["tracks"][0]) - beside[::2]).max() <= POSITION_QUANTUM / 2 + 1e-9
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", html)  # no script, style or font from elsewhere
    assert len(html) < 25_000 + 2 * raw.nbytes  # the player is ~10 kB; base64 data 4/3 of its bytes


def _report_replay_kb(walk, seconds: int) -> float:
    """kB of the replay a report writes for a ``seconds`` clip: policy, three variants and the reference ghost."""
    n = seconds * 30 + 1
    pos = np.concatenate([walk.body_pos + np.array([3.0 * i, 0.0, 0.0]) for i in range(n // len(walk.body_pos) + 1)])
    tracks = [ReplayTrack("policy (encoder z_m)", pos[:n], POLICY_COLOR)]
    tracks += [ReplayTrack(f"z~vMF k=20 #{i + 1}", pos[:n] + 0.1 * i, VARIANT_COLORS[i]) for i in range(3)]
    tracks.append(ReplayTrack("reference", pos[:n], REFERENCE_COLOR, ghost=True))
    return len(replay_html(tracks, "walk", frame_step=EvalConfig().video_frame_step).encode()) / 1000


@pytest.mark.skipif(not DOCS.is_file(), reason="docs/viewer.md is not beside this checkout")
def test_the_documented_replay_size_is_what_a_report_writes(walk):
    said = re.search(r"about (\d+) kB per second of\s+clip, plus (\d+) kB for the player", DOCS.read_text())
    assert said, f"{DOCS} no longer states the replays' size as this test reads it"
    short, long = _report_replay_kb(walk, 4), _report_replay_kb(walk, 60)
    rate = (long - short) / 56
    assert abs(rate - int(said[1])) < 1 and abs(short - 4 * rate - int(said[2])) < 2


def test_body_positions_match_the_clip_s_own_forward_kinematics(walk):
    pos = body_positions(walk.qpos[:10], walk.body_offsets)
    assert pos.shape == (10, 24, 3)
    assert np.abs(pos - walk.body_pos[:10]).max() < 1e-6


def test_a_bad_track_or_path_is_named(walk, tmp_path):
    with pytest.raises(ValueError, match="track 'x'"):
        write_replay([ReplayTrack("x", walk.body_pos[:, :5], POLICY_COLOR)], tmp_path / "a.html", "t")
    with pytest.raises(ValueError, match=r"\.html"):
        write_replay([ReplayTrack("x", walk.body_pos, POLICY_COLOR)], tmp_path / "a.htm", "t")
    apart = walk.body_pos.copy()
    apart[7, 15, 0] += 100.0  # the head 100 m from its pelvis: not a body (values an int16 cannot hold)
    with pytest.raises(ValueError, match=r"track 'y': body Head is 10\d m from its pelvis or the floor at frame 7"):
        write_replay([ReplayTrack("y", apart, POLICY_COLOR)], tmp_path / "a.html", "t")


@pytest.mark.skipif(find_chromium() is None, reason=NO_CHROMIUM)
def test_a_browser_draws_the_policy_and_the_reference_ghost_from_a_file(walk, tmp_path):
    beside = walk.body_pos + np.array([0.0, 0.8, 0.0])
    tracks = [ReplayTrack("policy", beside, POLICY_COLOR), ReplayTrack("ref", walk.body_pos, REFERENCE_COLOR, True)]
    page = write_replay(tracks, tmp_path / "walk.html", "walk")
    shot = screenshot(page.resolve().as_uri() + "#t=1&paused", tmp_path / "shot.png", (640, 480))
    ghost = tuple(GHOST_ALPHA * r + (1 - GHOST_ALPHA) * b for r, b in zip(hex_rgb(REFERENCE_COLOR), BACKGROUND))
    assert color_fraction(shot, hex_rgb(POLICY_COLOR), 30) > 0.01  # the body covers >1% of the picture
    assert color_fraction(shot, ghost, 30) > 0.01
    assert color_fraction(shot, BACKGROUND, 10) > 0.5


@pytest.mark.skipif(find_chromium() is None, reason=NO_CHROMIUM)
def test_the_browser_decodes_a_far_track_and_looks_from_where_the_videos_do(walk, tmp_path):
    far = _far_walk(walk)
    page = write_replay([ReplayTrack("far", far, POLICY_COLOR)], tmp_path / "far.html", "far")
    with open_page(page.resolve().as_uri() + "#t=2&paused") as p:
        p.wait_until(PAGE_READY, 60)
        shown = np.array(p.evaluate("[0, 60, tracks[0].n - 1].map(f => [0, 15, 10].map(b => at(tracks[0], f, b)))"))
        eye, target = (np.array(v) for v in p.evaluate("[view().eye, cam.target]"))
    assert np.abs(shown - far[[0, 60, -1]][:, [0, 15, 10]]).max() <= POSITION_QUANTUM / 2 + 1e-9
    camera = FollowCamera()
    np.testing.assert_allclose(target, [far[60, 0, 0], far[60, 0, 1], camera.lookat_height], atol=1e-3)
    np.testing.assert_allclose(eye, target + camera.eye_offset(), atol=1e-5)  # MuJoCo's eye (test_render.py)
    assert eye[0] > target[0] + 1.0 and eye[1] < target[1] - 1.0  # front-right of a character walking along +x


@pytest.mark.skipif(find_chromium() is None, reason=NO_CHROMIUM)
def test_space_toggles_play_once_and_leaves_a_focused_control_to_itself(walk, tmp_path):
    page = write_replay([ReplayTrack("walk", walk.body_pos, POLICY_COLOR)], tmp_path / "walk.html", "walk")
    with open_page(page.resolve().as_uri()) as p:
        p.wait_until(PAGE_READY, 60)
        p.evaluate("document.getElementById('play').focus()")  # a click on the button leaves it focused
        p.key("Space", " ", 32)
        assert p.evaluate("[playing, document.getElementById('play').textContent]") == [False, "play"]
        p.evaluate("document.activeElement.blur()")  # nothing focused: Space is the page's play key
        p.key("Space", " ", 32)
        assert p.evaluate("playing") is True
        p.evaluate("document.getElementById('follow').focus()")  # Space ticks the focused box, and only that
        p.key("Space", " ", 32)
        assert p.evaluate("[playing, follow]") == [True, False]


@pytest.mark.skipif(find_chromium() is None, reason=NO_CHROMIUM)
def test_the_scrub_bar_holds_the_frame_the_user_drags_to(walk, tmp_path):
    page = write_replay([ReplayTrack("walk", walk.body_pos, POLICY_COLOR)], tmp_path / "walk.html", "walk")
    with open_page(page.resolve().as_uri()) as p:
        p.wait_until(PAGE_READY, 60)
        r = p.evaluate("(b => [b.left, b.top, b.width, b.height])(scrub.getBoundingClientRect())")
        x, y = r[0] + 0.5 * r[2], r[1] + 0.5 * r[3]
        p.call("Input.dispatchMouseEvent", type="mousePressed", x=x, y=y, button="left", clickCount=1)
        p.call("Input.dispatchMouseEvent", type="mouseMoved", x=x + 5, y=y, button="left", buttons=1)
        held = p.evaluate("[frame, +scrub.value]")
        time.sleep(1.0)  # 30 frames of playback, were it not held
        assert p.evaluate("[frame, +scrub.value]") == held and held[0] == held[1] > 0
        p.call("Input.dispatchMouseEvent", type="mouseReleased", x=x + 5, y=y, button="left", clickCount=1)
        time.sleep(1.0)
        assert p.evaluate("frame") != held[0]  # let go: it plays on from there
