"""``rgsd view`` as a person uses it: the page draws the humanoid and its reference, kappa spreads the variants,
and bad input gets one line."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("viser", reason="rgsd view needs viser: pip install 'rgsd-agents[viewer]'")

from rgsd_agents.cli import main
from rgsd_agents.pretrained import pretrained_run
from rgsd_agents.viewer.app import ServeConfig, open_viewer, ssh_forward_line
from rgsd_agents.viewer.session import SessionConfig
from rgsd_eval.browser import find_chromium, live_screenshot

SCREENSHOT = Path(__file__).resolve().parents[3] / "docs" / "images" / "rgsd_view.png"
"""Where RGSD_DOCS_SCREENSHOT=1 copies the browser's shot for the docs page."""
PAGE_READY = "document.querySelector('canvas') && document.body.innerText.includes('error to the reference')"
"""The page is connected and has the session's readout (the 3D view is drawn within the next frames)."""
NO_CHROMIUM = "no Chromium (apt-get install chromium; .ci/run installs it)"


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


@pytest.mark.skipif(find_chromium() is None, reason=NO_CHROMIUM)
def test_the_page_draws_the_humanoid_and_its_reference_ghost(viewer, tmp_path):
    viewer.start()
    shot = live_screenshot(viewer.url, tmp_path / "view.png", (1000, 640), wait_s=3.0, ready=PAGE_READY)
    blue, orange = _hue_shares(shot)
    if os.environ.get("RGSD_DOCS_SCREENSHOT"):
        shutil.copy(shot, SCREENSHOT)
    assert blue > 0.002, f"the policy (blue) covers {blue:.2%} of the 3D view"
    assert orange > 0.002, f"the reference ghost (orange) covers {orange:.2%} of the 3D view"
    assert viewer.session.frame > 0 or viewer.session.num_frames <= 1  # the simulation ran while the page was open


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


def test_bad_input_gets_one_line(tmp_path, capsys):
    assert main(["view", str(tmp_path), "--port", str(_free_port())]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(tmp_path) in err and "config.yaml" in err
    assert main(["view", "--pretrained", "--clip", "nope", "--port", str(_free_port())]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "no clip named 'nope'" in err and "walk" in err


def test_the_command_prints_the_url_and_the_ssh_forwarding_line():
    port = _free_port()
    out = subprocess.run(
        [sys.executable, "-m", "rgsd_agents.cli", "view", "--pretrained", "--port", str(port), "--seconds", "1"],
        capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    assert f"http://localhost:{port}" in out
    assert ssh_forward_line(port) in out and f"ssh -L {port}:localhost:{port} " in out
