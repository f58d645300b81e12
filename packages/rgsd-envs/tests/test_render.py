"""Offscreen rendering: videos, side-by-side tiles, contact sheets, errors and atomic writes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import imageio.v2 as iio
import mujoco
import numpy as np
import pytest

from rgsd_envs import render
from rgsd_envs.motion.cli import main as motions_main

W, H = 96, 72
"""Tiny renders keep this file fast on a software-GL machine."""


@pytest.fixture(scope="module")
def short_clip(real_clips):
    """The shortest real clip (a few dozen frames)."""
    return min(real_clips, key=lambda c: c.num_frames)


def _read_video(path: Path) -> tuple[np.ndarray, dict]:
    reader = iio.get_reader(path, format="FFMPEG")
    try:
        # not list(reader): its length is inf for ffmpeg, which list() takes as a size hint
        return np.stack([frame for frame in reader.iter_data()]), reader.get_meta_data()
    finally:
        reader.close()


def _ffmpeg_children() -> list[int]:
    """Process ids of ffmpeg processes started by this test process (Linux /proc)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            name = stat.read_text().split("(", 1)[1].rsplit(")", 1)[0]
        except (OSError, IndexError):
            continue
        if int(fields[1]) == os.getpid() and "ffmpeg" in name:
            pids.append(int(stat.parent.name))
    return pids


def _mean_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())


def test_render_clip_writes_mp4_with_every_frame_at_the_requested_size(short_clip, tmp_path):
    out = render.render_clip(short_clip, tmp_path / "clip.mp4", width=W, height=H)

    assert out == tmp_path / "clip.mp4" and out.is_file()
    frames, meta = _read_video(out)
    assert frames.shape == (short_clip.num_frames, H, W, 3)
    assert meta["codec"] == "h264"
    assert meta["fps"] == pytest.approx(short_clip.fps)
    assert min(f.std() for f in frames) > 10.0, "a frame is blank"
    # the pose changes over the clip while the camera follows: first and middle frames differ
    assert _mean_abs_diff(frames[0], frames[len(frames) // 2]) > 2.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.mp4"], "a temporary file was left behind"


def test_humanoid_is_visible_and_framed_in_the_middle(short_clip):
    pose = short_clip.qpos[0]
    buried = pose.copy()
    buried[2] -= 50.0  # same x, y: the follow camera stays put, the body disappears under the floor
    with render.HumanoidRenderer(W, H) as r:
        with_body, without_body = r.render(pose), r.render(buried)

    body = np.abs(with_body.astype(np.int16) - without_body.astype(np.int16)).max(axis=2) > 40
    assert 0.015 < body.mean() < 0.5, f"humanoid (with its shadow) covers {body.mean():.1%} of the image"
    rows, cols = np.nonzero(body)
    assert abs(cols.mean() / W - 0.5) < 0.15 and abs(rows.mean() / H - 0.5) < 0.2, "humanoid is not centred"
    assert rows.min() > 2, "the head is cut off at the top"


def test_renderer_is_reusable_and_closes(short_clip):
    r = render.HumanoidRenderer(W, H, camera="track")
    frames = r.frames(short_clip.qpos[:3])
    assert frames.shape == (3, H, W, 3) and frames.dtype == np.uint8
    assert frames[0].std() > 10.0
    r.close()
    r.close()  # twice is fine
    with pytest.raises(RuntimeError, match="closed"):
        r.render(short_clip.qpos[0])


def test_unknown_camera_name_lists_the_model_cameras():
    with pytest.raises(ValueError, match=r"no camera named 'side'.*'track'"):
        render.HumanoidRenderer(W, H, camera="side")


def test_contact_sheet_has_the_expected_grid(short_clip, tmp_path):
    out = render.write_contact_sheet(short_clip, tmp_path / "sheet.png", num_frames=5, width=W, height=H)

    img = iio.imread(out)
    cols, rows = 4, 2
    assert img.shape[:2] == (render.TITLE_HEIGHT + rows * (H + render.CAPTION_HEIGHT), cols * W)
    first_tile = img[render.TITLE_HEIGHT : render.TITLE_HEIGHT + H, :W]
    assert first_tile.std() > 10.0
    caption = img[render.TITLE_HEIGHT + H : render.TITLE_HEIGHT + H + render.CAPTION_HEIGHT, :W]
    assert (caption < 100).any() and (caption > 200).mean() > 0.5, "caption strip should be dark text on white"
    # the fifth frame is alone on row 2; the rest of that row stays white
    assert (img[-(H + render.CAPTION_HEIGHT) :, W:] == 255).all()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sheet.png"]


def test_contact_sheet_of_raw_qpos_has_no_title_strip(short_clip, tmp_path):
    out = render.write_contact_sheet(short_clip.qpos[:2], tmp_path / "q.png", num_frames=8, width=W, height=H)
    assert iio.imread(out).shape[:2] == (H + render.CAPTION_HEIGHT, 2 * W)  # only 2 frames exist


def test_side_by_side_tiles_follow_their_own_character_and_carry_labels(short_clip, tmp_path):
    qa = short_clip.qpos[:4]
    qb = qa[:2].copy()
    qb[:, 0] += 6.0  # far away in x (whole floor-checker periods of 2 m): its own camera must follow it
    out = render.render_side_by_side([qa, qb], tmp_path / "sbs.mp4", labels=["reference", "shifted"], width=W, height=H)

    frames, _ = _read_video(out)
    assert frames.shape == (4, H, 2 * W, 3)
    below_labels = slice(H // 4, H)
    left, right = frames[0, below_labels, :W], frames[0, below_labels, W:]
    assert _mean_abs_diff(left, right) < 4.0, "the shifted character is not framed like the original"
    with render.HumanoidRenderer(W, H) as r:
        plain = r.render(qa[0])
    corner = (slice(0, 10), slice(2, 30))
    assert _mean_abs_diff(frames[0][corner], plain[corner]) > 30.0, "no label drawn in the tile's corner"
    assert _mean_abs_diff(frames[0][below_labels, :W], plain[below_labels]) < 4.0


def test_side_by_side_needs_one_label_per_trajectory(short_clip, tmp_path):
    with pytest.raises(ValueError, match="2 label"):
        render.render_side_by_side([short_clip.qpos[:2]], tmp_path / "x.mp4", labels=["a", "b"])
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    "bad, pattern",
    [
        (np.zeros((10, 75)), r"shape \(T, 76\).*got \(10, 75\)"),
        (np.zeros(76), r"shape \(T, 76\).*got \(76,\)"),
        (np.full((3, 76), np.nan), "NaN or inf .*frame 0"),
    ],
)
def test_bad_qpos_is_rejected_with_its_shape(bad, pattern, tmp_path):
    with pytest.raises(ValueError, match=pattern):
        render.render_qpos(bad, tmp_path / "x.mp4", width=W, height=H)
    with pytest.raises(ValueError, match=pattern):
        render.write_contact_sheet(bad, tmp_path / "x.png", width=W, height=H)
    assert not any(tmp_path.iterdir())


def test_bad_video_size_and_suffix_are_rejected(short_clip, tmp_path):
    with pytest.raises(ValueError, match="even width and height, got 95x72"):
        render.render_qpos(short_clip.qpos[:2], tmp_path / "x.mp4", width=95, height=72)
    with pytest.raises(ValueError, match=r"ends in '\.gif'"):
        render.render_qpos(short_clip.qpos[:2], tmp_path / "x.gif", width=W, height=H)
    with pytest.raises(ValueError, match=r"frame 1 .*expected uint8 \(72, 96, 3\)"):
        render.write_video([np.zeros((H, W, 3), np.uint8), np.zeros((H, W + 2, 3), np.uint8)], tmp_path / "x.mp4")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_interrupted_video_leaves_no_partial_or_temporary_file(short_clip, tmp_path, monkeypatch, error):
    real_render = render.HumanoidRenderer.render
    calls = []

    def failing_render(self, qpos):
        calls.append(1)
        if len(calls) == 4:  # three frames already went to ffmpeg
            raise error("interrupted")
        return real_render(self, qpos)

    monkeypatch.setattr(render.HumanoidRenderer, "render", failing_render)
    with pytest.raises(error) as raised:  # keeping the traceback keeps the writer alive: only close() ends ffmpeg
        render.render_qpos(short_clip.qpos[:8], tmp_path / "x.mp4", width=W, height=H)
    assert len(calls) == 4 and "interrupted" in str(raised.value)
    assert not any(tmp_path.iterdir()), f"left behind: {list(tmp_path.iterdir())}"
    if Path("/proc/self/stat").exists():
        assert _ffmpeg_children() == [], "the ffmpeg encoder was not closed"


def test_interrupted_video_keeps_an_existing_output(short_clip, tmp_path, monkeypatch):
    out = tmp_path / "x.mp4"
    out.write_bytes(b"previous video")

    def failing_render(self, qpos):
        raise RuntimeError("interrupted")

    monkeypatch.setattr(render.HumanoidRenderer, "render", failing_render)
    with pytest.raises(RuntimeError):
        render.render_qpos(short_clip.qpos[:3], out, width=W, height=H)
    assert out.read_bytes() == b"previous video"
    assert [p.name for p in tmp_path.iterdir()] == ["x.mp4"]


def test_missing_offscreen_gl_gives_an_actionable_error(monkeypatch):
    def no_gl(*args, **kwargs):
        raise mujoco.FatalError("an OpenGL platform library has not been loaded into this process")

    monkeypatch.setattr(mujoco, "Renderer", no_gl)
    with pytest.raises(render.RenderBackendError) as info:
        render.HumanoidRenderer(W, H)
    message = str(info.value)
    assert "MUJOCO_GL=" in message and "platform library" in message
    assert "MUJOCO_GL=egl with libegl1" in message and "MUJOCO_GL=osmesa with libosmesa6" in message


def test_cli_play_writes_video_and_contact_sheet(short_clip, tmp_path, capsys):
    clip_file = short_clip.save(tmp_path / "x.npz")
    args = ["play", str(clip_file), "--out", str(tmp_path / "x.mp4"), "--sheet", "--sheet-frames", "3"]

    assert motions_main([*args, "--width", str(W), "--height", str(H)]) == 0

    frames, _ = _read_video(tmp_path / "x.mp4")
    assert frames.shape == (short_clip.num_frames, H, W, 3)
    sheet = iio.imread(tmp_path / "x.png")
    assert sheet.shape[:2] == (render.TITLE_HEIGHT + H + render.CAPTION_HEIGHT, 3 * W)
    assert "x.mp4" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.mp4", "x.npz", "x.png"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--width", "63", "--height", "64"], "H.264 video needs an even width and height, got 63x64"),
        (["--width", "-64"], "width and height must be positive integers, got -64x480"),
        (["--sheet", "--sheet-frames", "0"], "num_frames must be a positive integer, got 0"),
        (["--out", "x.txt"], "video is written as .mp4, but the output path 'x.txt' ends in '.txt'"),
        (["--sheet", "--width", "63"], "H.264 video needs an even width and height, got 63x480"),  # and no sheet
    ],
)
def test_cli_play_refuses_a_bad_size_count_or_suffix_in_one_line(args, message, short_clip, tmp_path, capsys):
    clip_file = short_clip.save(tmp_path / "x.npz")
    assert motions_main(["play", str(clip_file), "--out", str(tmp_path / "x.mp4"), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npz"]


def _rendering_disabled(monkeypatch) -> str:
    monkeypatch.setattr(render, "_gl_backend", lambda: "disable")  # as MUJOCO_GL=disable
    return "MuJoCo's rendering is disabled"


def _no_offscreen_gl(monkeypatch) -> str:
    def no_gl(*args, **kwargs):
        raise mujoco.FatalError("an OpenGL platform library has not been loaded into this process")

    monkeypatch.setattr(render, "_gl_backend", lambda: "egl")  # selected, but its library does not load
    monkeypatch.setattr(mujoco, "Renderer", no_gl)
    return "offscreen OpenGL is not available (MUJOCO_GL='egl'): FatalError: an OpenGL platform library"


@pytest.mark.parametrize("without", [_rendering_disabled, _no_offscreen_gl], ids=["disabled", "no-gl"])
def test_cli_play_without_rendering_is_refused_in_one_error_line(without, short_clip, tmp_path, monkeypatch, capsys):
    clip_file = short_clip.save(tmp_path / "x.npz")
    why = without(monkeypatch)
    assert motions_main(["play", str(clip_file), "--out", str(tmp_path / "x.mp4"), "--sheet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {why}") and err.count("\n") == 1, err
    assert "MUJOCO_GL=egl with libegl1" in err  # what to install
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npz"]  # no sheet, no video


def test_side_by_side_frame_step_draws_every_kth_frame_in_real_time(short_clip, tmp_path):
    q = short_clip.qpos[:6]
    out = render.render_side_by_side([q, q], tmp_path / "fast.mp4", width=W, height=H, frame_step=2, shadows=False)
    frames, meta = _read_video(out)
    assert frames.shape[0] == 3
    assert meta["fps"] == pytest.approx(15.0)
    with pytest.raises(ValueError, match="frame_step must be >= 1"):
        render.render_side_by_side([q], tmp_path / "bad.mp4", width=W, height=H, frame_step=0)


def _loads(name: str) -> object:
    return object()


def _missing(name: str) -> object:
    raise OSError(f"{name}: cannot open shared object file")


def test_default_gl_is_egl_where_libegl_loads_and_disable_on_a_headless_linux_without_it():
    from rgsd_envs.utils.gl import EGL_LIBRARY, default_mujoco_gl

    asked = []
    assert default_mujoco_gl("linux", {}, lambda name: asked.append(name)) == "egl" and asked == [EGL_LIBRARY]
    assert default_mujoco_gl("linux", {}, _missing) == "disable"  # `import mujoco` would fail under egl
    assert default_mujoco_gl("linux", {"DISPLAY": ":0"}, _missing) is None  # a desktop: MuJoCo's own glfw
    assert default_mujoco_gl("darwin", {}, _loads) is None and default_mujoco_gl("win32", {}, _missing) is None


def test_rendering_under_mujoco_gl_disable_says_what_to_install_and_the_rest_works(tmp_path):
    """A fresh process as on a GPU node without libEGL: import, env step and motion tools work; a video fails
    with one clear RenderBackendError naming MUJOCO_GL and the packages to install."""
    code = (
        "import numpy as np, rgsd_envs, gymnasium as gym\n"
        "from rgsd_envs import render\n"
        "env = gym.make('RGSD-SMPL-v0'); env.reset(seed=0); env.step(env.action_space.sample())\n"
        "try:\n"
        "    render.HumanoidRenderer(64, 48)\n"
        "except render.RenderBackendError as err:\n"
        "    print('ERROR', err)\n"
    )
    env = {**os.environ, "MUJOCO_GL": "disable"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    message = proc.stdout.split("ERROR ", 1)[1]
    assert "rendering is disabled (MUJOCO_GL='disable'" in message
    assert "MUJOCO_GL=egl with libegl1" in message and "MUJOCO_GL=osmesa with libosmesa6" in message


@pytest.mark.parametrize(("azimuth", "elevation"), [(135.0, -12.0), (90.0, -30.0), (-20.0, 10.0)])
def test_the_follow_camera_s_eye_is_where_mujoco_puts_its_free_camera(azimuth, elevation):
    """The HTML replays and rgsd view place their cameras by ``eye_offset``, so they look as the videos do."""
    camera = render.FollowCamera(distance=2.5, azimuth=azimuth, elevation=elevation)
    lookat = np.array([3.0, -1.0, camera.lookat_height])
    model = mujoco.MjModel.from_xml_string("<mujoco/>")
    cam = mujoco.MjvCamera()
    cam.type = mujoco.mjtCamera.mjCAMERA_FREE
    cam.lookat[:], cam.distance, cam.azimuth, cam.elevation = lookat, camera.distance, azimuth, elevation
    scene = mujoco.MjvScene(model, maxgeom=10)
    mujoco.mjv_updateScene(
        model, mujoco.MjData(model), mujoco.MjvOption(), mujoco.MjvPerturb(), cam, mujoco.mjtCatBit.mjCAT_ALL, scene
    )
    eye = np.mean([scene.camera[i].pos for i in range(2)], axis=0)  # the two eyes straddle the head
    np.testing.assert_allclose(lookat + camera.eye_offset(), eye, atol=1e-5)  # MuJoCo: float32
