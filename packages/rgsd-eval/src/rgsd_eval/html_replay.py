"""Self-contained HTML replays: recorded body poses of several characters, played in any browser from disk.

One file holds the player (``replay_player.html``: a small canvas renderer drawing each body as capsules from
its joint to its parent's, with play/pause, a scrub bar, speed, camera follow, drag to orbit, wheel to zoom) and
the data inline, so it opens with no server and no network. Body positions come from forward kinematics of the
recorded qpos (``rgsd_envs.motion.kinematics.KinematicModel``, the body the clip was made for), every
``frame_step``-th frame, quantised to ``POSITION_QUANTUM`` metres: each frame's pelvis x, y as base64 int32 and
every body relative to it (x, y) or to the floor (z) as base64 int16, so a character stays exact however far it
travels. docs/viewer.md (HTML replays) states the size of a report's replays.

A ghost track (the reference) is drawn as one translucent layer behind the others.
"""

from __future__ import annotations

import base64
import html
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.clip import CLIP_FPS
from rgsd_envs.motion.kinematics import KinematicModel
from rgsd_envs.render import FollowCamera, validate_qpos
from rgsd_envs.utils.files import atomic_path

POSITION_QUANTUM = 0.002
"""Metres per step of the stored integers (2 mm): a body within 65 m of its pelvis (x, y) and of the floor (z)."""
GHOST_ALPHA = 0.45
"""Opacity of ghost tracks (the reference)."""
POLICY_COLOR = "#1f6fd1"
REFERENCE_COLOR = "#f08a24"
VARIANT_PALETTE = (
    ("green", "#2ca02c"), ("purple", "#9467bd"), ("cyan", "#17becf"), ("red", "#d62728"), ("brown", "#8c564b"),
    ("pink", "#e377c2"),
)  # fmt: skip
"""The vMF variants' colours in order (repeated past six), each with the name a person calls it (the live viewer's
readout names the variants by it)."""
VARIANT_COLORS = tuple(color for _, color in VARIANT_PALETTE)
VARIANT_COLOR_NAMES = tuple(name for name, _ in VARIANT_PALETTE)
_TORSO = {"Pelvis", "Torso", "Spine", "Chest", "L_Hip", "R_Hip", "L_Thorax", "R_Thorax"}
BODY_RADIUS = tuple(
    0.1 if n == "Head" else 0.075 if n in _TORSO else 0.04 if n in ("L_Hand", "R_Hand", "L_Toe", "R_Toe") else 0.05
    for n in sk.BODY_NAMES
)
"""Capsule radius (m) of the segment from each body to its parent (the pelvis and head: a sphere)."""
PLAYER = Path(__file__).with_name("replay_player.html")


@dataclass
class ReplayTrack:
    """One character of a replay: a label, its body positions and how it is drawn."""

    label: str
    body_pos: np.ndarray
    """(T, 24, 3) world positions (m) in SMPL body order."""
    color: str
    ghost: bool = False
    """Drawn translucent, behind the others (the reference)."""


def body_positions(qpos: np.ndarray, offsets: np.ndarray | None = None) -> np.ndarray:
    """(T, 24, 3) body positions of qpos (T, 76) by forward kinematics of the body with ``offsets`` (default rest)."""
    return KinematicModel(offsets).forward(validate_qpos(qpos))[0]


def replay_html(
    tracks: list[ReplayTrack],
    title: str,
    fps: float = CLIP_FPS,
    frame_step: int = 1,
    camera: FollowCamera | None = None,
) -> str:
    """The replay page of ``tracks`` (the first one is followed by the camera) as one HTML string."""
    camera = camera or FollowCamera()
    if not tracks:
        raise ValueError("a replay needs at least one track, got none")
    if frame_step < 1:
        raise ValueError(f"frame_step must be >= 1, got {frame_step}")
    encoded = []
    for t in tracks:
        pos = np.asarray(t.body_pos, dtype=np.float64)
        if pos.ndim != 3 or pos.shape[1:] != (sk.NUM_BODIES, 3) or not np.isfinite(pos).all():
            raise ValueError(f"track {t.label!r}: body_pos must be finite (T, {sk.NUM_BODIES}, 3), got {pos.shape}")
        root, rel = _quantised(pos[::frame_step], t.label)
        encoded.append(
            {"label": t.label, "color": t.color, "ghost": t.ghost, "frames": len(rel),
             "root": _b64(root.astype("<i4")), "data": _b64(rel.astype("<i2"))}
        )  # fmt: skip
    data = {
        "title": title,
        "fps": fps / frame_step,
        "scale": POSITION_QUANTUM,
        "parents": list(sk.PARENTS),
        "radius": list(BODY_RADIUS),
        "ghost_alpha": GHOST_ALPHA,
        "camera": {"azimuth": camera.azimuth, "elevation": camera.elevation, "distance": camera.distance},
        "tracks": encoded,
    }
    # "</" cannot appear inside the inline JSON, or the browser would end the script element there.
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    page = PLAYER.read_text(encoding="utf-8")
    return page.replace("__TITLE__", html.escape(title)).replace("__DATA__", payload)


def _quantised(pos: np.ndarray, label: str) -> tuple[np.ndarray, np.ndarray]:
    """(T, 2) each frame's pelvis x, y and (T, 24, 3) the bodies relative to it (x, y; z as is), in quanta."""
    root = np.round(pos[:, 0, :2] / POSITION_QUANTUM)
    rel = np.round(pos / POSITION_QUANTUM)
    rel[..., :2] -= root[:, None]
    if np.abs(root).max() > np.iinfo(np.int32).max:
        f = int(np.argwhere(np.abs(root) > np.iinfo(np.int32).max)[0, 0])
        raise ValueError(f"track {label!r}: the pelvis is {np.abs(pos[f, 0, :2]).max():.3g} m from the origin at "
                         f"frame {f}: the positions are not a body's")  # fmt: skip
    far = np.abs(rel) > np.iinfo(np.int16).max
    if far.any():
        f, b, _ = np.argwhere(far)[0]
        raise ValueError(
            f"track {label!r}: body {sk.BODY_NAMES[b]} is {np.abs(rel[f, b]).max() * POSITION_QUANTUM:.0f} m from its "
            f"pelvis or the floor at frame {f} (at most {np.iinfo(np.int16).max * POSITION_QUANTUM:.0f} m can be "
            "stored): the positions are not a body's"
        )
    return root, rel


def _b64(a: np.ndarray) -> str:
    """The bytes of ``a`` as base64 text."""
    return base64.b64encode(a.tobytes()).decode("ascii")


def write_replay(
    tracks: list[ReplayTrack], out_path: str | os.PathLike, title: str, fps: float = CLIP_FPS, frame_step: int = 1
) -> Path:
    """Write the replay page of ``tracks`` to ``out_path`` (.html) atomically; returns the path."""
    out_path = Path(out_path)
    if out_path.suffix.lower() != ".html":
        raise ValueError(
            f"a replay is written as .html, but the output path {str(out_path)!r} is not; use a .html path"
        )
    text = replay_html(tracks, title, fps, frame_step)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out_path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return out_path
