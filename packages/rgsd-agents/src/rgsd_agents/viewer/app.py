"""The viewer page: a viser server showing a ``ViewerSession`` live, its controls, and a small API for tests.

A background thread steps the session at real time (one control step per 1/30 s, times the speed) and moves
the drawings; GUI callbacks and API calls take the same lock, so a click never lands mid-step. "Camera follows"
draws the world relative to the policy's pelvis (the floor grid shifted by the same amount) instead of moving
every browser's camera, so the user's orbit is never fought and the view does not lag behind.
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from rgsd_agents.viewer.bodies import BodyDrawing
from rgsd_agents.viewer.session import SessionConfig, ViewerSession
from rgsd_envs.motion.clip import CLIP_FPS
from rgsd_eval.browser import hex_rgb
from rgsd_eval.html_replay import GHOST_ALPHA, POLICY_COLOR, REFERENCE_COLOR, VARIANT_COLORS

CAMERA_OFFSET = np.array([1.6, -1.9, 0.55])
"""Initial camera position relative to the look-at point: front-right of a character walking along +x."""
LOOKAT_HEIGHT = 0.85


@dataclass
class ServeConfig:
    """Where the page is served and how fast the simulation runs."""

    host: str = "127.0.0.1"
    """Interface to listen on; the default keeps the page private (reach it over SSH forwarding)."""
    port: int = 8080
    speed: float = 1.0
    """Simulated seconds per wall-clock second."""


def ssh_forward_line(port: int, host: str | None = None) -> str:
    """The command that forwards the viewer's port from ``host`` (default: this machine's name) to a laptop."""
    return f"ssh -L {port}:localhost:{port} {host or socket.gethostname()}"


class ViewerApp:
    """The live page of a session; ``start`` serves it, the methods below drive it as the controls do."""

    def __init__(self, session: ViewerSession, cfg: ServeConfig) -> None:
        """Serve ``session`` on ``cfg.host:cfg.port`` (a busy port is an error naming it)."""
        import viser

        self.session, self.cfg = session, cfg
        self.lock = threading.RLock()
        self.paused = False
        self.follow = True
        self.speed = float(cfg.speed)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.server = viser.ViserServer(host=cfg.host, port=cfg.port, verbose=False)
        self.port = int(self.server.get_port())
        self.server.scene.set_up_direction("+z")
        # no HDRI: viser would fetch it from a CDN, which a machine without internet cannot reach (a washed-out scene)
        self.server.scene.configure_environment_map(hdri=None)
        self.server.scene.add_light_hemisphere("sky", intensity=2.5)
        self.origin = np.zeros(3)
        """World point drawn at the scene's origin: the policy's pelvis (on the floor) while following."""
        self.grid = self.server.scene.add_grid(
            "floor", width=40.0, height=40.0, plane="xy", cell_size=0.5, section_size=1.0
        )
        scene = self.server.scene
        self.reference = BodyDrawing(scene, "reference", hex_rgb(REFERENCE_COLOR), GHOST_ALPHA)
        self.policy = BodyDrawing(scene, "policy", hex_rgb(POLICY_COLOR))
        self.variants = [
            BodyDrawing(scene, f"variant_{i}", hex_rgb(VARIANT_COLORS[i % len(VARIANT_COLORS)]))
            for i in range(session.num_worlds - 1)
        ]
        self._build_gui()
        self._place_camera()
        self.draw()

    # -- the API the controls (and tests) use ------------------------------------------------
    @property
    def url(self) -> str:
        """The page's address on this machine."""
        host = "localhost" if self.cfg.host in ("127.0.0.1", "0.0.0.0", "::") else self.cfg.host
        return f"http://{host}:{self.port}"

    def set_kappa(self, kappa: float) -> None:
        """New variant concentration (redraws the variants and restarts the clip)."""
        with self.lock:
            self.session.set_kappa(kappa)
            self._set_quietly(self.gui_kappa, math.log10(kappa))
            self.draw()

    def new_variants(self) -> None:
        """Draw new variants z ~ vMF(z_m, kappa) and restart the clip."""
        with self.lock:
            self.session.new_variants()
            self.draw()

    def select_clip(self, name: str) -> None:
        """Play the clip ``name`` (an unknown name raises ValueError listing the clips)."""
        with self.lock:
            self.session.reset(name)
            self._set_quietly(self.gui_clip, name)
            self.draw()

    def reset(self) -> None:
        """Every world back to the clip's first frame."""
        with self.lock:
            self.session.reset()
            self.draw()

    def step(self, steps: int = 1) -> None:
        """Advance ``steps`` control steps now (whether paused or not)."""
        with self.lock:
            for _ in range(steps):
                self.session.step()
            self.draw()

    def set_paused(self, paused: bool) -> None:
        """Pause or resume the live simulation."""
        self.paused = bool(paused)
        self._set_quietly(self.gui_paused, self.paused)

    def pelvis_positions(self) -> np.ndarray:
        """(1 + K, 3) pelvis positions of the policy and its variants (m)."""
        with self.lock:
            return self.session.pelvis_positions()

    # -- serving ---------------------------------------------------------------------------
    def start(self) -> ViewerApp:
        """Run the simulation loop in a background thread; returns self."""
        self._thread = threading.Thread(target=self._loop, name="rgsd-view", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop the loop, the server and the session."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.server.stop()
        self.session.close()

    def _loop(self) -> None:
        dt = 1.0 / CLIP_FPS
        next_t = time.perf_counter()
        while not self._stop.is_set():
            if not self.paused:
                with self.lock:
                    self.session.step()
                    self.draw()
            next_t += dt / max(self.speed, 1e-3)
            now = time.perf_counter()
            if next_t < now - 0.5:  # fell behind (a slow machine): drop the backlog instead of racing
                next_t = now
            self._stop.wait(max(0.0, next_t - now))

    # -- drawing ---------------------------------------------------------------------------
    def draw(self) -> None:
        """Move every drawing to the session's state and refresh the readout."""
        s = self.session
        pos = s.body_positions()
        if self.follow:
            self.origin = np.array([pos[0, 0, 0], pos[0, 0, 1], 0.0])
        with self.server.atomic():
            self.policy.update(pos[0] - self.origin)
            for d, p in zip(self.variants, pos[1:]):
                d.update(p - self.origin)
            self.reference.update(s.reference_positions() - self.origin)
            self.grid.position = tuple(
                np.round(self.origin) - self.origin
            )  # 1 m sections: shifts by whole metres vanish
        if s.frame % 5 == 0:  # text at 6 Hz is readable; every step would flood the socket
            err = s.errors_cm()
            variants = ", ".join(f"{e:.0f}" for e in err[1:])
            self.gui_status.content = (
                f"**{s.clip_name}** frame {s.frame}/{s.num_frames - 1}  \n"
                f"error to the reference: policy **{err[0]:.1f} cm**" + (f"; variants {variants} cm" if variants else "")
                + f"  \nlatents: {s.latents.source}; kappa {s.kappa:g}"
            )  # fmt: skip

    def _place_camera(self) -> None:
        """Where a new page's camera starts: front-right of the policy's pelvis."""
        target = np.array([0.0, 0.0, LOOKAT_HEIGHT])
        self.server.initial_camera.look_at = tuple(target)
        self.server.initial_camera.position = tuple(target + CAMERA_OFFSET)

    # -- controls --------------------------------------------------------------------------
    def _set_quietly(self, handle: Any, value: Any) -> None:
        self._quiet = True
        try:
            handle.value = value
        finally:
            self._quiet = False

    def _build_gui(self) -> None:
        gui, s = self.server.gui, self.session
        self._quiet = False
        gui.add_markdown(
            "**rgsd view**: blue the policy (z = the clip's latent), orange the reference, others "
            "z ~ vMF(z_m, kappa). Drag to orbit."
        )
        self.gui_status = gui.add_markdown("")
        self.gui_clip = gui.add_dropdown("clip", list(s.lib.names), initial_value=s.clip_name)
        self.gui_kappa = gui.add_slider(
            "log10 kappa", 0.0, 3.0, 0.05, math.log10(s.kappa), marks=((0, "1"), (1, "10"), (2, "100"), (3, "1000"))
        )
        new = gui.add_button("new variants")
        self.gui_paused = gui.add_checkbox("pause", False)
        step = gui.add_button("step")
        reset = gui.add_button("reset to the first frame")
        speed = gui.add_slider("speed", 0.1, 2.0, 0.05, self.speed)
        follow = gui.add_checkbox("camera follows", True)
        ghost = gui.add_checkbox("reference ghost", True)

        def unless_quiet(func: Any) -> Any:
            def handler(_: Any) -> None:
                if not self._quiet:
                    func()

            return handler

        self.gui_clip.on_update(unless_quiet(lambda: self.select_clip(self.gui_clip.value)))
        self.gui_kappa.on_update(unless_quiet(lambda: self.set_kappa(10.0 ** float(self.gui_kappa.value))))
        self.gui_paused.on_update(unless_quiet(lambda: self.set_paused(self.gui_paused.value)))
        new.on_click(lambda _: self.new_variants())
        step.on_click(lambda _: self.step())
        reset.on_click(lambda _: self.reset())
        speed.on_update(lambda _: setattr(self, "speed", float(speed.value)))
        follow.on_update(lambda _: setattr(self, "follow", bool(follow.value)))

        def show_ghost(_: Any) -> None:
            self.reference.visible = bool(ghost.value)

        ghost.on_update(show_ghost)


def open_viewer(
    run: str | os.PathLike,
    *,
    clip: str | None = None,
    motions: str | None = None,
    latents: str | os.PathLike | None = None,
    session: SessionConfig | None = None,
    serve: ServeConfig | None = None,
) -> ViewerApp:
    """Load ``run``, start its session on ``clip`` (default: the first) and serve the page (not yet stepping:
    call ``start``). Bad input raises InputFileError or ValueError naming the file, field or clip."""
    from rgsd_envs.motion.library import MotionLib
    from rgsd_eval.runs import load_run

    loaded = load_run(run, latent="auto", device="cpu")
    lib = MotionLib(motions or loaded.env_config.motions)
    sim = ViewerSession(loaded, lib, session or SessionConfig(), latents)
    try:
        if clip is not None:
            sim.reset(clip)
        return ViewerApp(sim, serve or ServeConfig())
    except BaseException:
        sim.close()
        raise
