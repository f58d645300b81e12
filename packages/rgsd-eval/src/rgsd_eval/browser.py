"""Headless Chromium screenshots, to check pages (HTML replays, the live viewer) as a person would see them.

Chromium draws WebGL with SwiftShader, its software GL, so a page with a 3D scene renders on a machine with no
GPU and no display. ``--virtual-time-budget`` lets the page run its timers and animation frames for that many
virtual milliseconds before the shot; open network requests (a viewer's websocket) hold virtual time back, so
a live page (a viewer fed over a websocket) is shot by ``live_screenshot`` instead: Chromium's DevTools
protocol, after ``wait_s`` real seconds. ``open_page`` drives a page over the same protocol (evaluate JavaScript,
press keys, move the mouse), to check what a page's controls do.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
"""Executables tried in order (Debian's package installs ``chromium``)."""


def find_chromium() -> str | None:
    """The path of a Chromium or Chrome executable on PATH (``RGSD_CHROMIUM`` first), or None."""
    named = os.environ.get("RGSD_CHROMIUM")
    if named:
        return shutil.which(named)
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


def chromium_command(profile: str, size: tuple[int, int], *args: str) -> list[str]:
    """Headless Chromium with a throwaway ``profile`` folder, SwiftShader WebGL and a ``size`` window, then ``args``."""
    exe = find_chromium()
    if exe is None:
        raise FileNotFoundError(
            "no Chromium to take a screenshot with; install Debian's package (apt-get install chromium) or set "
            "RGSD_CHROMIUM to a Chrome executable"
        )
    return [
        exe, "--headless", "--no-sandbox", "--hide-scrollbars", "--no-first-run", "--mute-audio",
        "--use-angle=swiftshader", "--enable-unsafe-swiftshader", f"--user-data-dir={profile}",
        f"--window-size={size[0]},{size[1]}", *args,
    ]  # fmt: skip


def screenshot(
    url: str,
    out_png: str | os.PathLike,
    size: tuple[int, int] = (800, 600),
    virtual_ms: int = 2000,
    timeout_s: float = 60.0,
) -> Path:
    """Open ``url`` in headless Chromium at ``size`` and write what it shows to ``out_png``; returns the path."""
    out_png = Path(out_png).resolve()
    with _profile() as profile:
        cmd = chromium_command(
            profile, size, f"--virtual-time-budget={int(virtual_ms)}", f"--screenshot={out_png}", url
        )
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if not out_png.is_file():
        raise RuntimeError(f"Chromium wrote no screenshot of {url} (exit {done.returncode}): {done.stderr[-2000:]}")
    return out_png


def _profile() -> tempfile.TemporaryDirectory:
    """A throw-away Chromium profile folder; a helper process still writing into it as it goes does not fail the
    caller (the folder is then left in the system's temporary folder)."""
    return tempfile.TemporaryDirectory(prefix="rgsd-chromium-", ignore_cleanup_errors=True)


def _end_group(proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    """Terminate Chromium and its helper processes (its process group) and wait until all are gone, killing them
    after ``timeout_s``."""
    deadline, sig = time.monotonic() + timeout_s, signal.SIGTERM
    while True:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:  # every process of the group has ended
            break
        proc.poll()  # reap Chromium itself, or the group never empties
        if time.monotonic() > deadline + timeout_s:  # zombies nobody reaps: the profile's cleanup tolerates them
            break
        if time.monotonic() > deadline:
            sig = signal.SIGKILL
        time.sleep(0.05)
    proc.wait()


class DevToolsPage:
    """A page open in headless Chromium, driven over the DevTools protocol (``open_page``)."""

    def __init__(self, ws: Any, timeout_s: float) -> None:
        self._ws, self._timeout_s, self._ids = ws, timeout_s, iter(range(1, 1_000_000))

    def call(self, method: str, **params: object) -> dict:
        """Send one DevTools command and return its result (an error answer raises RuntimeError)."""
        i = next(self._ids)
        self._ws.send(json.dumps({"id": i, "method": method, "params": params}))
        while True:  # events arrive between answers; skip them
            msg = json.loads(self._ws.recv(timeout=self._timeout_s))
            if msg.get("id") == i:
                if "error" in msg:
                    raise RuntimeError(f"Chromium {method}: {msg['error']}")
                return msg["result"]

    def evaluate(self, expression: str) -> Any:
        """The value of the JavaScript ``expression`` on the page (JSON-able values; a thrown error raises)."""
        out = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in out:
            raise RuntimeError(f"{expression!r} threw on the page: {out['exceptionDetails'].get('exception', out)}")
        return out["result"].get("value")

    def wait_until(self, expression: str, timeout_s: float) -> None:
        """Poll until the JavaScript ``expression`` is true on the page; TimeoutError after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while not self.evaluate(f"Boolean({expression})"):
            if time.monotonic() > deadline:  # a loaded machine parses a big page slowly: poll, do not guess
                raise TimeoutError(f"the page was not ready ({expression}) within {timeout_s:g} s")
            time.sleep(0.25)

    def key(self, code: str, key: str, key_code: int) -> None:
        """Press and release one key (``code`` "Space", ``key`` " ", ``key_code`` 32) on the focused element."""
        for kind in ("keyDown", "keyUp"):
            text = {"text": key} if kind == "keyDown" and len(key) == 1 else {}
            self.call("Input.dispatchKeyEvent", type=kind, code=code, key=key, windowsVirtualKeyCode=key_code, **text)


@contextlib.contextmanager
def open_page(url: str, size: tuple[int, int] = (800, 600), timeout_s: float = 90.0) -> Iterator[DevToolsPage]:
    """``url`` open in headless Chromium at ``size`` for the block; Chromium and its helpers end after it."""
    from urllib.request import Request, urlopen

    from websockets.sync.client import connect

    with _profile() as profile:
        cmd = chromium_command(profile, size, "--remote-debugging-port=0", "about:blank")
        # its own process group, so that its helper processes end with it and stop writing into the profile
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        try:
            deadline = time.monotonic() + timeout_s
            port_file = Path(profile) / "DevToolsActivePort"  # Chromium writes its debugging port here
            while not port_file.is_file() or len(port_file.read_text().split()) < 2:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"Chromium did not start its DevTools endpoint (exit {proc.poll()})")
                time.sleep(0.1)
            port = port_file.read_text().split()[0]
            with urlopen(Request(f"http://127.0.0.1:{port}/json/list"), timeout=10) as r:
                target = next(t for t in json.loads(r.read()) if t["type"] == "page")
            with connect(target["webSocketDebuggerUrl"], max_size=None, open_timeout=10) as ws:
                page = DevToolsPage(ws, timeout_s)
                page.call("Page.navigate", url=url)
                yield page
        finally:
            _end_group(proc)


def live_screenshot(
    url: str,
    out_png: str | os.PathLike,
    size: tuple[int, int] = (800, 600),
    wait_s: float = 3.0,
    timeout_s: float = 90.0,
    ready: str = "true",
) -> Path:
    """Open ``url`` in headless Chromium, wait until the JavaScript expression ``ready`` is true on the page and then
    ``wait_s`` real seconds more, and write what it shows to ``out_png``."""
    import base64

    out_png = Path(out_png).resolve()
    with open_page(url, size, timeout_s) as page:
        page.wait_until(ready, timeout_s)
        time.sleep(wait_s)
        shot = page.call("Page.captureScreenshot", format="png")
    out_png.write_bytes(base64.b64decode(shot["data"]))
    if out_png.read_bytes()[:4] != b"\x89PNG":
        raise RuntimeError(f"Chromium's screenshot of {url} is not a PNG")
    return out_png


def color_fraction(png: str | os.PathLike, rgb: tuple[int, int, int], tolerance: float = 40.0) -> float:
    """Share of the image's pixels within ``tolerance`` (Euclidean, 0-255 scale) of the colour ``rgb``."""
    from PIL import Image

    img = np.asarray(Image.open(png).convert("RGB"), dtype=np.float64)
    dist = np.linalg.norm(img - np.asarray(rgb, dtype=np.float64), axis=-1)
    return float((dist <= tolerance).mean())


def hex_rgb(color: str) -> tuple[int, int, int]:
    """(r, g, b) of a "#rrggbb" colour."""
    c = color.lstrip("#")
    return int(c[0:2], 16), int(c[2:4], 16), int(c[4:6], 16)
