"""Offscreen rendering of humanoid trajectories: frames, mp4 videos, side-by-side tiles, contact sheets.

Everything renders from qpos (T, 76) (root position, root quaternion w-x-y-z, 69
hinge angles in ``skeleton.DOF_NAMES`` order) with one ``mujoco.Renderer`` (one
GL context) per call, reused for every frame and tile, and closed at the end.
Frames come from forward kinematics only (no physics step), so any qpos history
(a reference clip, a policy rollout) renders the same way.

The default camera, :class:`FollowCamera`, looks at the pelvis from the
character's front-right at a fixed world direction, so walking, running and
turning clips stay in view and turns show as turns. Any camera of the model
(``"track"``: a side view that follows the centre of mass) can be named instead.

Videos are H.264 mp4 (yuv420p, so width and height must be even); contact sheets
are PNG. All outputs are written atomically: an interrupted render leaves
neither a partial file nor a temporary one. Offscreen GL needs ``MUJOCO_GL=egl``
(libegl1) or ``MUJOCO_GL=osmesa`` (libosmesa6); ``rgsd_envs`` selects egl by
default before mujoco is imported, or ``disable`` where libEGL does not load
(``rgsd_envs.utils.gl``: rendering then raises ``RenderBackendError`` with advice).
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import math
import os
import sys
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.humanoid.mjcf import HumanoidConfig, load_model
from rgsd_envs.motion.clip import CLIP_FPS, MotionClip
from rgsd_envs.utils.files import atomic_path

CAPTION_HEIGHT = 18
"""Pixels of the caption strip under each contact-sheet frame (the frame time)."""
TITLE_HEIGHT = 24
"""Pixels of the title strip on top of a contact sheet (only when it has a title)."""
SHEET_COLUMNS = 4
"""Frames per row of a contact sheet (fewer if the sheet has fewer frames)."""
DEFAULT_TILE_SIZE = (480, 360)
"""Width and height of one tile of a side-by-side video (the evaluation report's videos use it too)."""
VIDEO_QUALITY = 7
"""imageio-ffmpeg quality (0-10, 10 best) of the H.264 videos."""


class RenderBackendError(RuntimeError):
    """Offscreen OpenGL could not be started; the message says what to install or set."""


@dataclass(frozen=True)
class FollowCamera:
    """A free camera aimed at the pelvis from a fixed world direction.

    The look-at point is the pelvis x, y at a fixed height, so the floor does not
    bob with the gait and a fallen character stays in frame.
    """

    distance: float = 3.2
    """Metres from the look-at point."""
    azimuth: float = 135.0
    """Degrees about +z of the viewing direction; 135 looks from the front-right
    of a character facing +x (90 is a pure side view from its right)."""
    elevation: float = -12.0
    """Degrees; negative looks down."""
    lookat_height: float = 0.85
    """Height (m) of the look-at point above the floor."""

    def eye_offset(self) -> np.ndarray:
        """The eye's position (3,) relative to the look-at point, as MuJoCo's free camera places it."""
        az, el = np.radians(self.azimuth), np.radians(self.elevation)
        return -self.distance * np.array([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)])


Camera = FollowCamera | str
"""A :class:`FollowCamera` or the name of a camera in the model (e.g. ``"track"``)."""


def validate_qpos(qpos: np.ndarray, what: str = "qpos") -> np.ndarray:
    """Return qpos as a float64 (T, 76) array, or raise ValueError saying what is wrong."""
    arr = np.asarray(qpos, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != sk.QPOS_DIM or arr.shape[0] < 1:
        raise ValueError(
            f"{what} must have shape (T, {sk.QPOS_DIM}) with T >= 1 (root position 3, root quaternion 4, "
            f"{sk.NUM_DOFS} hinge angles), got {arr.shape}; pass clip.qpos or a stacked history of data.qpos"
        )
    if not np.isfinite(arr).all():
        bad = int(np.argwhere(~np.isfinite(arr).all(axis=1))[0, 0])
        raise ValueError(f"{what} contains NaN or inf (first at frame {bad}); cannot render a diverged state")
    return arr


def _check_size(width: int, height: int, even: bool) -> None:
    if int(width) != width or int(height) != height or width < 1 or height < 1:
        raise ValueError(f"width and height must be positive integers, got {width}x{height}")
    if even and (width % 2 or height % 2):
        raise ValueError(
            f"H.264 video needs an even width and height, got {width}x{height}; use e.g. {width + width % 2}x{height + height % 2}"
        )


def _mujoco_gl_module():
    """The gl_context module that mujoco.Renderer takes its GLContext class from (None if unknown)."""
    renderer = getattr(mujoco, "Renderer", None)  # absent in some mujoco builds under MUJOCO_GL=disable
    return getattr(sys.modules.get(getattr(renderer, "__module__", ""), None), "gl_context", None)


def _gl_backend() -> str:
    """The MUJOCO_GL value mujoco chose its GL backend with (read when mujoco was first imported)."""
    return str(getattr(_mujoco_gl_module(), "_MUJOCO_GL", os.environ.get("MUJOCO_GL", "")))


def _headless_substitute() -> tuple[str, type] | None:
    """(name, GLContext class) to use instead of glfw when glfw was chosen on a Linux machine without a display.

    That happens when mujoco is imported before ``rgsd_envs`` set MUJOCO_GL; glfw
    then cannot open a context (and may abort the process on a second try).
    """
    has_display = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    if not sys.platform.startswith("linux") or _gl_backend() not in ("", "glfw") or has_display:
        return None
    if _mujoco_gl_module() is None:  # a mujoco layout we do not know: let its Renderer report the problem
        return None
    name = os.environ.get("MUJOCO_GL", "").lower()
    name = name if name in ("egl", "osmesa") else "egl"
    try:
        return name, importlib.import_module(f"mujoco.{name}").GLContext
    except Exception as err:
        raise RenderBackendError(
            f"mujoco chose the glfw GL backend (MUJOCO_GL was unset when mujoco was first imported) and there is "
            f"no display; the headless {name} backend does not load either: {type(err).__name__}: {err}. " + _GL_ADVICE
        ) from err


DISABLED_GL = ("disable", "disabled", "off", "false", "0")
"""The MUJOCO_GL values that turn MuJoCo's rendering off."""
_GL_ADVICE = (
    "Select a headless backend before mujoco is first imported: MUJOCO_GL=egl with libegl1 "
    "(apt-get install libegl1; GPU or Mesa), or MUJOCO_GL=osmesa with libosmesa6 "
    "(apt-get install libosmesa6; software, slower)."
)


def check_rendering() -> None:
    """RenderBackendError (saying how to get offscreen GL) when MuJoCo's rendering is turned off in this process:
    a command that renders can say so before it computes anything."""
    if _gl_backend().lower() in DISABLED_GL or not hasattr(mujoco, "Renderer"):
        raise RenderBackendError(
            f"MuJoCo's rendering is disabled (MUJOCO_GL={_gl_backend()!r} when mujoco was first imported; "
            "rgsd_envs selects 'disable' on a Linux machine without a display where libEGL.so.1 does not "
            "load). " + _GL_ADVICE
        )


def _open_gl_renderer(model: mujoco.MjModel, width: int, height: int) -> mujoco.Renderer:
    """A mujoco.Renderer, or RenderBackendError saying how to get offscreen GL."""
    check_rendering()
    substitute = _headless_substitute()
    used = _gl_backend() if substitute is None else substitute[0]
    try:
        if substitute is None:
            return mujoco.Renderer(model, height=height, width=width)
        # mujoco.Renderer reads its GLContext class from this module global; swap it for this one call only.
        module = _mujoco_gl_module()
        original = module.GLContext
        module.GLContext = substitute[1]
        try:
            return mujoco.Renderer(model, height=height, width=width)
        finally:
            module.GLContext = original
    except Exception as err:
        raise RenderBackendError(
            f"offscreen OpenGL is not available (MUJOCO_GL={used or '<unset: glfw, needs a display>'!r}): "
            f"{type(err).__name__}: {err}. " + _GL_ADVICE
        ) from err


def rendering_problem() -> str | None:
    """Why offscreen rendering cannot start in this process, without the install advice (None when a tiny
    renderer opens): a long job that ends in videos checks this before its work starts."""
    try:
        _open_gl_renderer(mujoco.MjModel.from_xml_string("<mujoco/>"), 16, 16).close()
    except RenderBackendError as err:
        return str(err).removesuffix(" " + _GL_ADVICE).rstrip(".")
    return None


class HumanoidRenderer:
    """Render humanoid poses offscreen; one GL context reused for many frames. Close it (or use ``with``)."""

    def __init__(
        self,
        width: int = 640,
        height: int = 480,
        model: mujoco.MjModel | None = None,
        camera: Camera = FollowCamera(),
        shadows: bool = True,
        reflections: bool = True,
    ) -> None:
        """Open a renderer of ``width`` x ``height`` pixels for ``model`` (default: the project's humanoid).

        The model's offscreen buffer is enlarged if the image is larger. Without shadows and
        reflections a software-GL (Mesa llvmpipe) frame takes about a third of the time.
        """
        self._gl: mujoco.Renderer | None = None
        _check_size(width, height, even=False)
        self.model = load_model(HumanoidConfig()) if model is None else model
        if self.model.nq != sk.QPOS_DIM:
            raise ValueError(f"model has nq={self.model.nq}, expected the SMPL humanoid's {sk.QPOS_DIM}")
        # The offscreen buffer bounds the image size; enlarging it only costs GPU memory.
        vis = self.model.vis.global_
        vis.offwidth, vis.offheight = max(vis.offwidth, width), max(vis.offheight, height)
        self.width, self.height = int(width), int(height)
        self.camera = camera
        self._camera_id = -1
        if isinstance(camera, str):
            self._camera_id = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
            if self._camera_id < 0:
                names = [self.model.camera(i).name for i in range(self.model.ncam)]
                raise ValueError(f"model has no camera named {camera!r}; cameras: {names} (or pass a FollowCamera)")
        elif not isinstance(camera, FollowCamera):
            raise TypeError(f"camera must be a FollowCamera or a camera name, got {type(camera).__name__}")
        self._data = mujoco.MjData(self.model)
        self._free_cam = mujoco.MjvCamera()
        self._free_cam.type = mujoco.mjtCamera.mjCAMERA_FREE
        self._gl = _open_gl_renderer(self.model, self.width, self.height)
        self._gl.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = shadows
        self._gl.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = reflections

    def render(self, qpos: np.ndarray) -> np.ndarray:
        """One (H, W, 3) uint8 image of the pose ``qpos`` (76,)."""
        if self._gl is None:
            raise RuntimeError("this HumanoidRenderer is closed; open a new one")
        q = np.asarray(qpos, dtype=np.float64)
        if q.shape != (sk.QPOS_DIM,):
            raise ValueError(f"a single pose must have shape ({sk.QPOS_DIM},), got {q.shape}")
        m, d = self.model, self._data
        d.qpos[:] = q
        # Kinematics, subtree centres of mass (for "trackcom" cameras) and cameras/lights: all a picture needs.
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        mujoco.mj_camlight(m, d)
        if isinstance(self.camera, FollowCamera):
            cam = self._free_cam
            cam.lookat[:] = (q[0], q[1], self.camera.lookat_height)
            cam.distance = self.camera.distance
            cam.azimuth = self.camera.azimuth
            cam.elevation = self.camera.elevation
            self._gl.update_scene(d, camera=cam)
        else:
            self._gl.update_scene(d, camera=self._camera_id)
        return self._gl.render()

    def iter_frames(self, qpos: np.ndarray) -> Iterator[np.ndarray]:
        """Yield one (H, W, 3) uint8 image per row of qpos (T, 76), without holding them all."""
        for q in validate_qpos(qpos):
            yield self.render(q)

    def frames(self, qpos: np.ndarray) -> np.ndarray:
        """All frames of qpos (T, 76) as a (T, H, W, 3) uint8 array."""
        return np.stack(list(self.iter_frames(qpos)))

    def close(self) -> None:
        """Free the GL context; safe to call twice."""
        if self._gl is not None:
            self._gl.close()
            self._gl = None

    def __enter__(self) -> HumanoidRenderer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # Best effort only (interpreter shutdown may have torn GL down): close() or `with` is the supported way.
        with contextlib.suppress(Exception):
            self.close()


def model_for_clip(clip: MotionClip) -> mujoco.MjModel:
    """The humanoid model of the body the clip was made for (its ``body_offsets``)."""
    off = np.asarray(clip.body_offsets, dtype=np.float64)
    if np.allclose(off, sk.REST_OFFSETS, atol=1e-9):
        return load_model(HumanoidConfig())
    return load_model(HumanoidConfig(offsets=tuple(map(tuple, off))))


def _check_suffix(path: Path, suffix: str, what: str) -> None:
    if path.suffix.lower() != suffix:
        raise ValueError(
            f"{what} is written as {suffix}, but the output path {str(path)!r} ends in {path.suffix!r}; use a {suffix} path"
        )


def check_video_output(out_path: str | os.PathLike, width: int, height: int) -> None:
    """The ValueError a video render would raise for this path and size (not .mp4, odd or non-positive size),
    raised before any frame is rendered."""
    _check_suffix(Path(out_path), ".mp4", "video")
    _check_size(width, height, even=True)


def check_sheet_output(out_png: str | os.PathLike, width: int, height: int, num_frames: int) -> None:
    """The ValueError a contact sheet would raise for this path, tile size and frame count, before any rendering."""
    _check_suffix(Path(out_png), ".png", "contact sheet")
    _check_size(width, height, even=False)
    if int(num_frames) != num_frames or num_frames < 1:
        raise ValueError(f"num_frames must be a positive integer, got {num_frames}")


def _open_video_writer(path: Path, size: tuple[int, int], fps: float) -> Generator[None, np.ndarray, None]:
    """A started imageio-ffmpeg generator writing H.264 mp4 to ``path`` (any file name; the container is forced)."""
    import imageio_ffmpeg

    gen = imageio_ffmpeg.write_frames(
        str(path),
        size=size,
        fps=float(fps),
        codec="libx264",
        pix_fmt_out="yuv420p",
        quality=VIDEO_QUALITY,
        macro_block_size=2,  # keep the requested size (16 would rescale e.g. 72 px to 80)
        ffmpeg_log_level="error",
        output_params=["-f", "mp4", "-movflags", "+faststart"],
    )
    gen.send(None)
    return gen


def write_video(frames: Iterable[np.ndarray], out_path: str | os.PathLike, fps: float = CLIP_FPS) -> Path:
    """Stream (H, W, 3) uint8 frames (H, W even) into an H.264 mp4 at ``out_path``, atomically; returns the path."""
    out_path = Path(out_path)
    _check_suffix(out_path, ".mp4", "video")
    if not fps > 0:
        raise ValueError(f"fps must be positive, got {fps}")
    it = iter(frames)
    first = next(it, None)
    if first is None:
        raise ValueError(f"no frames to write to {out_path}")
    expected = first.shape
    if first.ndim != 3 or expected[2] != 3:
        raise ValueError(f"frames must be (H, W, 3) RGB images, got shape {expected}")
    _check_size(expected[1], expected[0], even=True)
    with atomic_path(out_path) as tmp:
        writer = _open_video_writer(tmp, (expected[1], expected[0]), fps)
        try:
            for t, frame in enumerate(itertools.chain([first], it)):
                if frame.shape != expected or frame.dtype != np.uint8:
                    raise ValueError(
                        f"frame {t} is {frame.dtype} {frame.shape}, expected uint8 {expected} like frame 0"
                    )
                writer.send(np.ascontiguousarray(frame))
        finally:
            writer.close()  # waits for ffmpeg to finish, also when a frame failed
        if tmp.stat().st_size == 0:
            raise RuntimeError(f"ffmpeg wrote nothing for {out_path}; check that imageio-ffmpeg's ffmpeg runs")
    return out_path


def _font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has only the fixed bitmap font
        return ImageFont.load_default()


def _draw_centered(draw, text: str, box: tuple[int, int, int | None, int], font) -> None:
    """Draw black text centred in box (x, y, w, h); w None: left-aligned. Works with bitmap fonts too."""
    x, y, w, h = box
    x0, y0, x1, y1 = draw.textbbox((0, 0), text, font=font)
    left = x + 6 if w is None else x + (w - (x1 - x0)) // 2
    draw.text((left - x0, y + (h - (y1 - y0)) // 2 - y0), text, fill=(0, 0, 0), font=font)


def _label(image: np.ndarray, text: str) -> np.ndarray:
    """The image with ``text`` in white on a dark box in its top-left corner."""
    from PIL import Image, ImageDraw

    pil = Image.fromarray(image)
    draw = ImageDraw.Draw(pil, "RGBA")
    font = _font(max(10, image.shape[0] // 20))
    x0, y0, x1, y1 = draw.textbbox((6, 4), text, font=font)
    draw.rectangle((x0 - 4, y0 - 3, x1 + 4, y1 + 3), fill=(0, 0, 0, 150))
    draw.text((6, 4), text, fill=(255, 255, 255, 255), font=font)
    return np.asarray(pil)


def render_qpos(
    qpos: np.ndarray,
    out_path: str | os.PathLike,
    fps: float = CLIP_FPS,
    width: int = 640,
    height: int = 480,
    camera: Camera = FollowCamera(),
    model: mujoco.MjModel | None = None,
    label: str | None = None,
) -> Path:
    """Render qpos (T, 76) to an H.264 mp4 at ``out_path`` (atomic); returns the path."""
    out_path = Path(out_path)
    q = validate_qpos(qpos)
    check_video_output(out_path, width, height)
    with HumanoidRenderer(width, height, model=model, camera=camera) as r:
        frames = r.iter_frames(q)
        if label:
            frames = (_label(f, label) for f in frames)
        return write_video(frames, out_path, fps)


def render_clip(
    clip: MotionClip,
    out_path: str | os.PathLike,
    width: int = 640,
    height: int = 480,
    camera: Camera = FollowCamera(),
    label: str | None = None,
) -> Path:
    """Render a clip to an H.264 mp4 at its own frame rate and body shape; returns the path."""
    return render_qpos(
        clip.qpos,
        out_path,
        fps=clip.fps,
        width=width,
        height=height,
        camera=camera,
        model=model_for_clip(clip),
        label=label,
    )


def render_side_by_side(
    qpos_list: Sequence[np.ndarray],
    out_path: str | os.PathLike,
    labels: Sequence[str] | None = None,
    fps: float = CLIP_FPS,
    width: int = DEFAULT_TILE_SIZE[0],
    height: int = DEFAULT_TILE_SIZE[1],
    camera: Camera = FollowCamera(),
    model: mujoco.MjModel | None = None,
    frame_step: int = 1,
    shadows: bool = True,
    reflections: bool = True,
    on_frame: Callable[[int], None] | None = None,
) -> Path:
    """Render several qpos (T_i, 76) as tiles of ``width`` x ``height`` in one mp4, left to right.

    Each tile's camera follows its own character. Shorter trajectories hold their
    last frame until the longest ends. ``frame_step`` draws every k-th frame and
    plays at ``fps / k``, so motion stays in real time (shadows and reflections off
    render about 3x faster with software GL). ``on_frame(tiles)`` is called after
    each frame (a progress bar). Returns the path.
    """
    out_path = Path(out_path)
    if len(qpos_list) == 0:
        raise ValueError("render_side_by_side needs at least one trajectory, got none")
    qs = [validate_qpos(q, f"qpos_list[{i}]") for i, q in enumerate(qpos_list)]
    if labels is not None and len(labels) != len(qs):
        raise ValueError(
            f"got {len(labels)} label(s) for {len(qs)} trajectories; give one label per trajectory or none"
        )
    check_video_output(out_path, width, height)
    if frame_step < 1:
        raise ValueError(f"frame_step must be >= 1, got {frame_step}")
    num_frames = max(len(q) for q in qs)

    def tiled(r: HumanoidRenderer) -> Iterator[np.ndarray]:
        for t in range(0, num_frames, frame_step):
            tiles = [r.render(q[min(t, len(q) - 1)]) for q in qs]
            if labels is not None:
                tiles = [_label(tile, text) if text else tile for tile, text in zip(tiles, labels)]
            yield np.concatenate(tiles, axis=1)
            if on_frame is not None:
                on_frame(len(tiles))

    with HumanoidRenderer(width, height, model=model, camera=camera, shadows=shadows, reflections=reflections) as r:
        return write_video(tiled(r), out_path, fps / frame_step)


def write_contact_sheet(
    clip_or_qpos: MotionClip | np.ndarray,
    out_png: str | os.PathLike,
    num_frames: int = 8,
    width: int = 320,
    height: int = 240,
    title: str | None = None,
    fps: float = CLIP_FPS,
    camera: Camera = FollowCamera(),
    model: mujoco.MjModel | None = None,
) -> Path:
    """Write a PNG grid of ``num_frames`` evenly spaced frames (first to last), each with its time below.

    The grid has min(num_frames, SHEET_COLUMNS) columns of ``width`` px and rows of
    ``height + CAPTION_HEIGHT`` px, plus a TITLE_HEIGHT strip on top when there is a
    title (a clip's default title is its name). A clip's own fps and body are used.
    Returns the path.
    """
    from PIL import Image, ImageDraw

    out_png = Path(out_png)
    if isinstance(clip_or_qpos, MotionClip):
        clip = clip_or_qpos
        q, fps = validate_qpos(clip.qpos, f"clip {clip.name!r} qpos"), clip.fps
        model = model_for_clip(clip) if model is None else model
        if title is None:
            title = f"{clip.name} ({clip.category}, {clip.num_frames} frames, {clip.duration:.2f} s)"
    else:
        q = validate_qpos(clip_or_qpos)
    check_sheet_output(out_png, width, height, num_frames)
    if not fps > 0:
        raise ValueError(f"fps must be positive, got {fps}")
    n = min(int(num_frames), len(q))
    picks = np.unique(np.linspace(0, len(q) - 1, n).round().astype(int))
    cols = min(len(picks), SHEET_COLUMNS)
    rows = math.ceil(len(picks) / cols)
    top = TITLE_HEIGHT if title else 0
    sheet = Image.new("RGB", (cols * width, top + rows * (height + CAPTION_HEIGHT)), (255, 255, 255))
    draw = ImageDraw.Draw(sheet)
    font = _font(12)
    with HumanoidRenderer(width, height, model=model, camera=camera) as r:
        for k, t in enumerate(picks):
            x, y = (k % cols) * width, top + (k // cols) * (height + CAPTION_HEIGHT)
            sheet.paste(Image.fromarray(r.render(q[t])), (x, y))
            _draw_centered(draw, f"t = {t / fps:.2f} s  (#{t})", (x, y + height, width, CAPTION_HEIGHT), font)
    if title:
        _draw_centered(draw, title, (0, 0, None, TITLE_HEIGHT), _font(14))
    with atomic_path(out_png) as tmp:
        sheet.save(tmp, format="PNG")
    return out_png
