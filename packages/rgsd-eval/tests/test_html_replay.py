"""The HTML replay: its data round-trips, it needs nothing from the network, and a browser draws both bodies."""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import pytest

from rgsd_envs.motion.demo import demo_clips
from rgsd_eval.browser import color_fraction, find_chromium, hex_rgb, screenshot
from rgsd_eval.html_replay import (
    GHOST_ALPHA,
    POLICY_COLOR,
    POSITION_QUANTUM,
    REFERENCE_COLOR,
    ReplayTrack,
    body_positions,
    write_replay,
)

BACKGROUND = (0xF3, 0xF4, 0xF6)
"""The replay page's background colour."""


@pytest.fixture(scope="module")
def walk():
    return next(c for c in demo_clips() if c.category == "walk")


def _data(html: str) -> dict:
    return json.loads(re.search(r'<script id="replay-data" type="application/json">(.*?)</script>', html, re.S)[1])


def test_replay_holds_every_track_s_poses_to_the_quantum_and_loads_nothing(walk, tmp_path):
    beside = walk.body_pos + np.array([0.0, 0.8, 0.0])
    tracks = [ReplayTrack("policy", beside, POLICY_COLOR), ReplayTrack("ref", walk.body_pos, REFERENCE_COLOR, True)]
    path = write_replay(tracks, tmp_path / "walk.html", "walk", frame_step=2)
    html = path.read_text()
    data = _data(html)
    assert [t["label"] for t in data["tracks"]] == ["policy", "ref"] and data["tracks"][1]["ghost"]
    assert data["fps"] == 15.0 and data["tracks"][0]["frames"] == len(walk.body_pos[::2])
    raw = np.frombuffer(base64.b64decode(data["tracks"][0]["data"]), dtype="<i2").reshape(-1, 24, 3)
    assert np.abs(raw * POSITION_QUANTUM - beside[::2]).max() <= POSITION_QUANTUM / 2 + 1e-9
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", html)  # no script, style or font from elsewhere
    assert len(html) < 25_000 + 2 * raw.nbytes  # the player is ~10 kB; base64 data 4/3 of its bytes


def test_body_positions_match_the_clip_s_own_forward_kinematics(walk):
    pos = body_positions(walk.qpos[:10], walk.body_offsets)
    assert pos.shape == (10, 24, 3)
    assert np.abs(pos - walk.body_pos[:10]).max() < 1e-6


def test_a_bad_track_or_path_is_named(walk, tmp_path):
    with pytest.raises(ValueError, match="track 'x'"):
        write_replay([ReplayTrack("x", walk.body_pos[:, :5], POLICY_COLOR)], tmp_path / "a.html", "t")
    with pytest.raises(ValueError, match=r"\.html"):
        write_replay([ReplayTrack("x", walk.body_pos, POLICY_COLOR)], tmp_path / "a.htm", "t")


@pytest.mark.skipif(find_chromium() is None, reason="no Chromium (apt-get install chromium; .ci/run installs it)")
def test_a_browser_draws_the_policy_and_the_reference_ghost_from_a_file(walk, tmp_path):
    beside = walk.body_pos + np.array([0.0, 0.8, 0.0])
    tracks = [ReplayTrack("policy", beside, POLICY_COLOR), ReplayTrack("ref", walk.body_pos, REFERENCE_COLOR, True)]
    page = write_replay(tracks, tmp_path / "walk.html", "walk")
    shot = screenshot(page.resolve().as_uri() + "#t=1&paused", tmp_path / "shot.png", (640, 480))
    ghost = tuple(GHOST_ALPHA * r + (1 - GHOST_ALPHA) * b for r, b in zip(hex_rgb(REFERENCE_COLOR), BACKGROUND))
    assert color_fraction(shot, hex_rgb(POLICY_COLOR), 30) > 0.01  # the body covers >1% of the picture
    assert color_fraction(shot, ghost, 30) > 0.01
    assert color_fraction(shot, BACKGROUND, 10) > 0.5
