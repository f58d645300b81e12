"""The viewer pages: a viser server showing a session live, its controls, and a small API for tests.

``ViewerApp`` shows a skill run's ``ViewerSession`` (clip, blend, kappa, variants); ``GoalViewerApp`` a downstream
run's ``GoalSession``, whose goal a click on the floor moves. Both are ``LivePage``s.

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
from typing import Any, Protocol

import numpy as np

from rgsd_agents.viewer.bodies import BodyDrawing
from rgsd_agents.viewer.goal import GoalSession, floor_point, is_downstream_run
from rgsd_agents.viewer.limits import KAPPA_RANGE, SPEED_RANGE, SPEED_STEP
from rgsd_agents.viewer.server import start_server
from rgsd_agents.viewer.session import SessionConfig, ViewerSession
from rgsd_envs.motion.clip import CLIP_FPS
from rgsd_envs.render import FollowCamera
from rgsd_eval.browser import hex_rgb
from rgsd_eval.html_replay import GHOST_ALPHA, POLICY_COLOR, REFERENCE_COLOR, VARIANT_COLOR_NAMES, VARIANT_COLORS

START_CAMERA = FollowCamera(distance=2.5)
"""Where a new page's camera starts: the videos' angles (front-right of a character walking along +x), closer."""
GOAL_COLOR = (40, 170, 80)
NO_BLEND = "(none)"
"""The "blend with" dropdown's entry for no blend (parentheses: no clip is named so)."""
BLEND_STEP = 0.01


@dataclass
class ServeConfig:
    """Where the page is served and how fast the simulation runs."""

    host: str = "127.0.0.1"
    """Interface to listen on; the default keeps the page private (reach it over SSH forwarding)."""
    port: int = 8080
    speed: float = 1.0
    """Simulated seconds per wall-clock second."""


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
"""Interfaces only this machine reaches: another machine forwards the port over SSH."""
ALL_INTERFACES = ("0.0.0.0", "::", "")
"""Interfaces that mean every address of this machine."""


def ssh_forward_line(port: int, host: str | None = None) -> str:
    """The command that forwards the viewer's port from ``host`` (default: this machine's name) to a laptop."""
    return f"ssh -L {port}:localhost:{port} {host or socket.gethostname()}"


def network_address() -> str | None:
    """This machine's IPv4 address on the interface of its default route (None: no route, or only loopback)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # a documentation address: a UDP connect sends nothing, it picks the route
            address = str(s.getsockname()[0])
    except OSError:
        return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def http_url(host: str, port: int) -> str:
    """The page's address on ``host:port``; an IPv6 address goes in brackets (``http://[::1]:8080``)."""
    return f"http://[{host}]:{port}" if ":" in host and not host.startswith("[") else f"http://{host}:{port}"


def remote_access_line(host: str, port: int) -> str:
    """How to open the page served on ``host:port`` from another machine: forward the port over SSH (a loopback
    host), or the address to open (a host on the network; every interface: this machine's name and address)."""
    if host in LOOPBACK_HOSTS:
        return f"{ssh_forward_line(port)}   then open {http_url('localhost', port)}"
    if host not in ALL_INTERFACES:
        return f"open {http_url(host, port)}"
    urls = [http_url(name, port) for name in dict.fromkeys([socket.gethostname(), network_address()]) if name]
    return f"open {' or '.join(urls)} (served on every interface of this machine)"


def variant_color_name(i: int) -> str:
    """The colour the ``i``-th variant is drawn in, in words (``VARIANT_COLORS`` repeat past their number)."""
    return VARIANT_COLOR_NAMES[i % len(VARIANT_COLOR_NAMES)]


class LiveSession(Protocol):
    """What a page needs of a session: stepping, restarting, the drawn bodies and freeing the simulator."""

    frame: int

    def step(self) -> None: ...
    def reset(self) -> None: ...
    def body_positions(self) -> np.ndarray: ...
    def pelvis_positions(self) -> np.ndarray: ...
    def close(self) -> None: ...


class LivePage:
    """A session served live: the server, floor, camera, simulation loop and playback controls every page has.

    Subclasses add their drawings (``_add_scene``), their controls (``_build_gui``, calling
    ``_add_playback_controls``), move the drawings (``_draw``) and write the readout (``status``)."""

    INTRO = ""
    """Markdown at the top of the control panel."""
    RESET_LABEL = "reset"

    def __init__(self, session: LiveSession, cfg: ServeConfig) -> None:
        """Serve ``session`` on ``cfg.host:cfg.port``; viser moves a taken port to the next free one (``self.port``)."""
        self.session, self.cfg = session, cfg
        self.lock = threading.RLock()
        self.paused = False
        self.follow = True
        self.speed = float(cfg.speed)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._quiet = False
        self.server = start_server(cfg.host, cfg.port)
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
        self._add_scene()
        self.server.gui.add_markdown(self.INTRO)
        self.gui_status = self.server.gui.add_markdown("")
        self._build_gui()
        self._place_camera()
        self.draw()

    # -- the API the controls (and tests) use ------------------------------------------------
    @property
    def url(self) -> str:
        """The page's address on this machine."""
        host = "localhost" if self.cfg.host in LOOPBACK_HOSTS + ALL_INTERFACES else self.cfg.host
        return http_url(host, self.port)

    @property
    def summary(self) -> str:
        """What is shown, in a few words (the command's first line)."""
        return ""

    def reset(self) -> None:
        """Restart the session (the reset button)."""
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
        """(worlds, 3) the drawn pelvis positions (m), the policy's first."""
        with self.lock:
            return self.session.pelvis_positions()

    # -- serving ---------------------------------------------------------------------------
    def start(self) -> LivePage:
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
                    # text at 6 Hz is readable; every step would flood the socket
                    self.draw(readout=self.session.frame % 5 == 0)
            next_t += dt / max(self.speed, 1e-3)
            now = time.perf_counter()
            if next_t < now - 0.5:  # fell behind (a slow machine): drop the backlog instead of racing
                next_t = now
            self._stop.wait(max(0.0, next_t - now))

    # -- drawing ---------------------------------------------------------------------------
    def draw(self, readout: bool = True) -> None:
        """Move every drawing to the session's state and, with ``readout``, refresh the readout."""
        pelvis = self.session.pelvis_positions()[0]
        if self.follow:
            self.origin = np.array([pelvis[0], pelvis[1], 0.0])
        with self.server.atomic():
            self._draw()
            self.grid.position = tuple(
                np.round(self.origin) - self.origin
            )  # 1 m sections: shifts by whole metres vanish
        if readout:
            self.gui_status.content = self.status()

    def status(self) -> str:
        """The readout's markdown."""
        return ""

    def _add_scene(self) -> None:
        """Add the page's drawings to ``self.server.scene``."""

    def _draw(self) -> None:
        """Move the page's drawings (world positions minus ``self.origin``)."""

    def _place_camera(self) -> None:
        """Where a new page's camera starts: front-right of the policy's pelvis."""
        target = np.array([0.0, 0.0, START_CAMERA.lookat_height])
        self.server.initial_camera.look_at = tuple(target)
        self.server.initial_camera.position = tuple(target + START_CAMERA.eye_offset())

    # -- controls --------------------------------------------------------------------------
    def _set_quietly(self, handle: Any, value: Any) -> None:
        self._quiet = True
        try:
            handle.value = value
        finally:
            self._quiet = False

    def _unless_quiet(self, func: Any) -> Any:
        """A GUI handler calling ``func`` unless the value was set from the API (which has done the work)."""

        def handler(_: Any) -> None:
            if not self._quiet:
                func()

        return handler

    def _build_gui(self) -> None:
        """Add the page's controls (its own, then ``_add_playback_controls``)."""
        self._add_playback_controls()

    def _add_playback_controls(self) -> None:
        """Pause, step, reset, speed and camera follow."""
        gui = self.server.gui
        self.gui_paused = gui.add_checkbox("pause", False)
        step = gui.add_button("step")
        reset = gui.add_button(self.RESET_LABEL)
        speed = gui.add_slider("speed", *SPEED_RANGE, SPEED_STEP, self.speed)
        follow = gui.add_checkbox("camera follows", True)
        self.gui_paused.on_update(self._unless_quiet(lambda: self.set_paused(self.gui_paused.value)))
        step.on_click(lambda _: self.step())
        reset.on_click(lambda _: self.reset())
        speed.on_update(lambda _: setattr(self, "speed", float(speed.value)))
        follow.on_update(lambda _: setattr(self, "follow", bool(follow.value)))


class ViewerApp(LivePage):
    """The live page of a skill run's session; ``start`` serves it, the methods below drive it as the controls do."""

    INTRO = (
        "**rgsd view**: blue the policy (z = the clip's latent, or its blend with another clip's), orange the "
        "reference, others z' ~ vMF(z, kappa). Drag to orbit."
    )
    RESET_LABEL = "reset to the first frame"
    session: ViewerSession

    @property
    def summary(self) -> str:
        """Where the clip latents come from."""
        return self.session.latents.source

    def set_kappa(self, kappa: float) -> None:
        """New variant concentration (redraws the variants and restarts the clip)."""
        with self.lock:
            self.session.set_kappa(kappa)
            self._set_quietly(self.gui_kappa, math.log10(kappa))
            self.draw()

    def new_variants(self) -> None:
        """Draw new variants z' ~ vMF(z, kappa) around the policy's skill z and restart the clip."""
        with self.lock:
            self.session.new_variants()
            self.draw()

    def select_clip(self, name: str) -> None:
        """Play the clip ``name`` (an unknown name raises ValueError listing the clips); a blend stays, blending
        from the new clip."""
        with self.lock:
            self.session.reset(name)
            self._set_quietly(self.gui_clip, name)
            self.draw()

    def set_blend(self, clip: str | None, t: float) -> None:
        """Make the skill slerp(z_m of the clip, z_m of ``clip``, ``t``), ``t`` in [0, 1] (None: no blend), as the
        "blend with" dropdown and the blend slider do: live, no restart."""
        with self.lock:
            self.session.set_blend(clip, t)
            self._set_quietly(self.gui_blend_clip, NO_BLEND if clip is None else clip)
            self._set_quietly(self.gui_blend, float(t))
            self.gui_blend.disabled = clip is None
            self.draw()

    def set_skill(self, z: np.ndarray | list[float]) -> None:
        """Make the skill the unit vector along ``z`` (the run's skill size, finite, not all zeros; a ValueError
        naming the size otherwise), live, no restart; choosing a clip or a blend goes back to the clips' latents."""
        with self.lock:
            self.session.set_skill(z)
            self.draw()

    def status(self) -> str:
        """Clip, frame, each humanoid's error to the reference, the skill, kappa and the latents' source."""
        s = self.session
        err = s.errors_cm()
        variants = ", ".join(f"{variant_color_name(i)} {e:.0f}" for i, e in enumerate(err[1:]))
        return (
            f"**{s.clip_name}** frame {s.frame}/{s.num_frames - 1}  \n"
            f"error to the reference: policy **{err[0]:.1f} cm**" + (f"; variants {variants} cm" if variants else "")
            + f"  \nskill {s.skill_label()}; kappa {s.kappa:g}"
            + f"  \nlatents: {s.latents.source}"
        )  # fmt: skip

    def _add_scene(self) -> None:
        scene = self.server.scene
        self.reference = BodyDrawing(scene, "reference", hex_rgb(REFERENCE_COLOR), GHOST_ALPHA)
        self.policy = BodyDrawing(scene, "policy", hex_rgb(POLICY_COLOR))
        self.variants = [
            BodyDrawing(scene, f"variant_{i}", hex_rgb(VARIANT_COLORS[i % len(VARIANT_COLORS)]))
            for i in range(self.session.num_worlds - 1)
        ]

    def _draw(self) -> None:
        s = self.session
        pos = s.body_positions()
        self.policy.update(pos[0] - self.origin)
        for d, p in zip(self.variants, pos[1:]):
            d.update(p - self.origin)
        self.reference.update(s.reference_positions() - self.origin)

    def _build_gui(self) -> None:
        gui, s = self.server.gui, self.session
        self.gui_clip = gui.add_dropdown("clip", list(s.lib.names), initial_value=s.clip_name)
        self.gui_blend_clip = gui.add_dropdown(
            "blend with", [NO_BLEND, *s.lib.names], initial_value=NO_BLEND, hint="a second clip to blend toward"
        )
        self.gui_blend = gui.add_slider(
            "blend", 0.0, 1.0, BLEND_STEP, s.blend_t, disabled=True, hint="z = slerp(clip's z_m, blend clip's z_m, t)"
        )
        low, high = (math.log10(k) for k in KAPPA_RANGE)
        marks = tuple((e, f"{10**e:g}") for e in range(math.ceil(low), math.floor(high) + 1))
        self.gui_kappa = gui.add_slider("log10 kappa", low, high, 0.05, math.log10(s.kappa), marks=marks)
        new = gui.add_button("new variants")
        self._add_playback_controls()
        ghost = gui.add_checkbox("reference ghost", True)
        self.gui_clip.on_update(self._unless_quiet(lambda: self.select_clip(self.gui_clip.value)))
        self.gui_kappa.on_update(self._unless_quiet(lambda: self.set_kappa(10.0 ** float(self.gui_kappa.value))))
        blend = self._unless_quiet(lambda: self.set_blend(self._blend_choice(), float(self.gui_blend.value)))
        self.gui_blend_clip.on_update(blend)
        self.gui_blend.on_update(blend)
        new.on_click(lambda _: self.new_variants())

        def show_ghost(_: Any) -> None:
            self.reference.visible = bool(ghost.value)

        ghost.on_update(show_ghost)

    def _blend_choice(self) -> str | None:
        """The "blend with" dropdown's clip (None: no blend)."""
        value = str(self.gui_blend_clip.value)
        return None if value == NO_BLEND else value


class GoalViewerApp(LivePage):
    """The live page of a downstream run: the humanoid, the goal, the distance; a click on the floor moves the goal."""

    INTRO = (
        "**rgsd view** (goal reaching): blue the humanoid, green the goal and its success radius. "
        "Click the floor to move the goal; drag to orbit."
    )
    RESET_LABEL = "restart the episode"
    session: GoalSession

    @property
    def summary(self) -> str:
        """The run's style, and what a click does."""
        return f"goal reaching, style {self.session.style}; click the floor to move the goal"

    def set_goal(self, x: float, y: float) -> None:
        """Move the goal to the world floor point (x, y) (m), as a click there does."""
        with self.lock:
            self.session.set_goal(x, y)
            self.draw()

    def goal(self) -> np.ndarray:
        """(2,) the goal's world position (m)."""
        with self.lock:
            return self.session.goal()

    def distance(self) -> float:
        """Horizontal distance (m) from the drawn pelvis to the goal."""
        with self.lock:
            return self.session.distance()

    def on_floor_click(self, event: Any) -> np.ndarray | None:
        """The scene's click handler: the goal moves to where the click's ray (``event.ray_origin``,
        ``event.ray_direction``, scene coordinates) meets the floor; returns that world (x, y), or None for a ray
        that misses the floor."""
        with self.lock:
            hit = floor_point(np.asarray(event.ray_origin), np.asarray(event.ray_direction))
            if hit is None:
                return None
            world = hit + self.origin  # the scene is drawn relative to the origin while the camera follows
            self.set_goal(float(world[0]), float(world[1]))
            return world[:2]

    def status(self) -> str:
        """Distance to the goal, whether it is reached, the time and the style."""
        s = self.session
        d = s.distance()
        reached = " (reached)" if d < s.success_radius else ""
        cosine = f"; style cosine {s.style_cosine:.2f}" if s.style != "freestyle" else ""
        gx, gy = s.goal()
        return (
            f"distance to the goal **{d:.2f} m**{reached}  \n"
            f"goal ({gx:.2f}, {gy:.2f}) m; {s.frame / CLIP_FPS:.1f} s into the episode  \n"
            f"style: {s.style}{cosine}"
        )

    def _add_scene(self) -> None:
        import trimesh

        scene = self.server.scene
        self.policy = BodyDrawing(scene, "policy", hex_rgb(POLICY_COLOR))
        self.goal_marker = scene.add_frame("goal", show_axes=False)
        disc = trimesh.creation.cylinder(radius=self.session.success_radius, height=0.01, sections=48)
        pole = trimesh.creation.cylinder(radius=0.025, height=1.2, sections=12)
        ball = trimesh.creation.icosphere(subdivisions=2, radius=0.08)
        scene.add_mesh_simple(
            "goal/radius", disc.vertices, disc.faces, color=GOAL_COLOR, opacity=0.35, position=(0, 0, 0.005)
        )
        scene.add_mesh_simple("goal/pole", pole.vertices, pole.faces, color=GOAL_COLOR, position=(0, 0, 0.6))
        scene.add_mesh_simple("goal/ball", ball.vertices, ball.faces, color=GOAL_COLOR, position=(0, 0, 1.2))
        scene.on_click()(self.on_floor_click)

    def _draw(self) -> None:
        self.policy.update(self.session.body_positions()[0] - self.origin)
        gx, gy = self.session.goal()
        self.goal_marker.position = (gx - self.origin[0], gy - self.origin[1], 0.0)


def open_viewer(
    run: str | os.PathLike,
    *,
    clip: str | None = None,
    motions: str | None = None,
    latents: str | os.PathLike | None = None,
    session: SessionConfig | None = None,
    serve: ServeConfig | None = None,
) -> ViewerApp | GoalViewerApp:
    """Load ``run``, start its session on ``clip`` (default: ``run_skills.default_clip``) and serve the page (not
    yet stepping: call ``start``); a downstream run gets the goal page. Bad input raises InputFileError or
    ValueError naming the file, field or clip."""
    if is_downstream_run(run):
        given = [name for name, value in (("--clip", clip), ("--motions", motions), ("--latents", latents)) if value]
        if given:
            raise ValueError(f"{run} is a downstream run (goal reaching): {', '.join(given)} apply to skill runs only")
        goal = GoalSession(run, seed=(session or SessionConfig()).seed)
        return _serve(goal, GoalViewerApp, serve)

    from rgsd_envs.motion.library import MotionLib
    from rgsd_eval.runs import load_run, on_cpu_mujoco

    loaded = on_cpu_mujoco(load_run(run, latent="auto", device="cpu"))
    lib = MotionLib(motions or loaded.run.training_motions())
    sim = ViewerSession(loaded, lib, session or SessionConfig(), latents)
    try:
        if clip is not None:
            sim.reset(clip)
    except BaseException:
        sim.close()
        raise
    return _serve(sim, ViewerApp, serve)


def _serve(session: Any, page: type[LivePage], serve: ServeConfig | None) -> Any:
    """``page`` serving ``session``; the session is freed if the page cannot start."""
    try:
        return page(session, serve or ServeConfig())
    except BaseException:
        session.close()
        raise
