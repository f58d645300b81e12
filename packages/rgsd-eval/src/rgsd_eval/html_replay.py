"""Self-contained HTML replays: recorded body poses of several characters, played in any browser from disk.

One file holds the player (``replay_player.html``: a small canvas renderer drawing each body as capsules from
its joint to its parent's, with play/pause, a scrub bar, speed, camera follow, drag to orbit, wheel to zoom) and
the data inline, so it opens with no server and no network. Body positions come from forward kinematics of the
recorded qpos (``rgsd_envs.motion.kinematics.KinematicModel``, the body the clip was made for), every
``frame_step``-th frame, quantised to ``POSITION_QUANTUM`` metres as base64 int16: a 5 s clip with five
characters is about 100 kB.

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
"""Metres per int16 step: +-65 m of travel at 2 mm resolution."""
GHOST_ALPHA = 0.45
"""Opacity of ghost tracks (the reference)."""
POLICY_COLOR = "#1f6fd1"
REFERENCE_COLOR = "#f08a24"
VARIANT_COLORS = ("#2ca02c", "#9467bd", "#17becf", "#d62728", "#8c564b", "#e377c2")
"""Colours of the vMF variants, in order (repeated past six)."""
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
        q = np.clip(np.round(pos[::frame_step] / POSITION_QUANTUM), -32767, 32767).astype("<i2")
        encoded.append(
            {"label": t.label, "color": t.color, "ghost": t.ghost, "frames": len(q),
             "data": base64.b64encode(q.tobytes()).decode("ascii")}
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
