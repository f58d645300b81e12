"""The rgsd motion clip: one reference motion at 30 Hz, stored as ``.npz``.

Format (``format_version`` 1). T frames at ``fps`` = 30; world frame z up, x
forward, metres, radians; quaternions (w, x, y, z); bodies in SMPL order
(``skeleton.BODY_NAMES``); hinges in qpos order (``skeleton.DOF_NAMES``).

=============== ============ ==================================================
key             shape        meaning
=============== ============ ==================================================
format_version  ()           1
name            ()           clip name (str; no '/', '\\', '..' or control characters)
category        ()           walk, run, sidestep, backward, punch, or any label
fps             ()           30.0
source_fps      ()           frame rate of the source before resampling
source          ()           where it came from (file path, "demo:walk", ...)
root_pos        (T, 3)       pelvis position, world
root_rot        (T, 4)       pelvis orientation, world
joint_rot       (T, 23, 4)   local rotation of bodies 1..23 (parent frame)
dof_pos         (T, 69)      hinge angles (what the PD targets track)
root_lin_vel    (T, 3)       pelvis linear velocity, world
root_ang_vel    (T, 3)       pelvis angular velocity, world
dof_vel         (T, 69)      hinge velocities
body_pos        (T, 24, 3)   body origins from MuJoCo forward kinematics, world
body_rot        (T, 24, 4)   body orientations from MuJoCo FK, world
body_lin_vel    (T, 24, 3)   body-origin linear velocities (MuJoCo), world
body_ang_vel    (T, 24, 3)   body angular velocities (MuJoCo), world
body_offsets    (24, 3)      parent-relative offsets of the body the clip is for
=============== ============ ==================================================

``qpos`` (T, 76) and ``qvel`` (T, 75) are MuJoCo's state vectors for the clip
(``qvel`` holds the root angular velocity in the pelvis frame, as MuJoCo does).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.humanoid.mjcf import CONTROL_HZ
from rgsd_envs.utils.files import InputFileError, atomic_path, read_npz

FORMAT_VERSION = 1
CLIP_FPS = float(CONTROL_HZ)
"""Every stored clip is at the policy rate (``CONTROL_HZ``, 30 Hz)."""
CATEGORIES = ("walk", "run", "sidestep", "backward", "punch")
"""The paper's categories; clips may carry any other label too."""

_ARRAYS: dict[str, tuple] = {
    "root_pos": (3,),
    "root_rot": (4,),
    "joint_rot": (sk.NUM_JOINTS, 4),
    "dof_pos": (sk.NUM_DOFS,),
    "root_lin_vel": (3,),
    "root_ang_vel": (3,),
    "dof_vel": (sk.NUM_DOFS,),
    "body_pos": (sk.NUM_BODIES, 3),
    "body_rot": (sk.NUM_BODIES, 4),
    "body_lin_vel": (sk.NUM_BODIES, 3),
    "body_ang_vel": (sk.NUM_BODIES, 3),
}
"""Per-frame arrays and their trailing shapes."""
_META = ("format_version", "name", "category", "fps", "source_fps", "source")
_UNSAFE_NAME = re.compile(r"[/\\\x00-\x1f\x7f]|\.\.")
"""What a clip name may not hold: path separators, '..', NUL and other control characters (names become file
names of videos and replays)."""
_FILE_CHARS = re.compile(r"[^0-9A-Za-z._-]+")
"""Characters a file name built from a clip name keeps; runs of any other become '_'."""


@dataclass
class MotionClip:
    """One reference motion at 30 Hz; see the module docstring for the format."""

    name: str
    category: str
    source_fps: float
    source: str
    root_pos: np.ndarray
    root_rot: np.ndarray
    joint_rot: np.ndarray
    dof_pos: np.ndarray
    root_lin_vel: np.ndarray
    root_ang_vel: np.ndarray
    dof_vel: np.ndarray
    body_pos: np.ndarray
    body_rot: np.ndarray
    body_lin_vel: np.ndarray
    body_ang_vel: np.ndarray
    body_offsets: np.ndarray
    fps: float = CLIP_FPS

    @property
    def num_frames(self) -> int:
        """Number of frames T."""
        return int(self.root_pos.shape[0])

    @property
    def duration(self) -> float:
        """Seconds from the first to the last frame."""
        return (self.num_frames - 1) / self.fps

    @property
    def qpos(self) -> np.ndarray:
        """MuJoCo generalized positions (T, 76)."""
        return np.concatenate([self.root_pos, self.root_rot, self.dof_pos], axis=1)

    @property
    def qvel(self) -> np.ndarray:
        """MuJoCo generalized velocities (T, 75); root angular velocity in the pelvis frame."""
        local_w = _rotate_inv(self.root_rot, self.root_ang_vel)
        return np.concatenate([self.root_lin_vel, local_w, self.dof_vel], axis=1)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the clip to ``path`` (.npz) atomically; returns the path."""
        path = Path(path)
        validate_clip(self, path)
        arrays = {k: np.asarray(getattr(self, k)) for k in _ARRAYS}
        meta = {k: np.asarray(getattr(self, k) if k != "format_version" else FORMAT_VERSION) for k in _META}
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.savez_compressed(f, body_offsets=self.body_offsets, **arrays, **meta)
        return path


def _rotate_inv(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate v by the inverse of unit quaternions q (numpy, batched)."""
    w, u = q[..., :1], -q[..., 1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def validate_clip(clip: MotionClip, path: str | os.PathLike = "<memory>") -> None:
    """Raise InputFileError naming the field if the clip breaks the format."""
    if not isinstance(clip.name, str) or not clip.name:
        raise InputFileError(path, "must be a non-empty string", "name")
    if _UNSAFE_NAME.search(clip.name):
        raise InputFileError(
            path,
            f"{clip.name!r} holds a path separator, '..' or a control character; clip names become file names: "
            "name the clip with letters, digits, '_' and '-'",
            "name",
        )
    if not isinstance(clip.category, str) or not clip.category:
        raise InputFileError(path, "must be a non-empty string", "category")
    if not np.isclose(float(clip.fps), CLIP_FPS):
        raise InputFileError(path, f"clips are stored at {CLIP_FPS:g} Hz, got {clip.fps}", "fps")
    if not (np.isfinite(clip.source_fps) and clip.source_fps > 0):
        raise InputFileError(path, f"must be a positive frame rate, got {clip.source_fps}", "source_fps")
    n = np.asarray(clip.root_pos).shape[0] if np.ndim(clip.root_pos) else 0
    if n < 2:
        raise InputFileError(path, f"a clip needs at least 2 frames, got {n}", "root_pos")
    for key, tail in _ARRAYS.items():
        arr = np.asarray(getattr(clip, key))
        if arr.shape != (n, *tail):
            raise InputFileError(path, f"expected shape {(n, *tail)}, got {arr.shape}", key)
        if not np.isfinite(arr).all():
            bad = int(np.argwhere(~np.isfinite(arr).reshape(n, -1).all(axis=1))[0, 0])
            raise InputFileError(path, f"contains NaN or inf (first at frame {bad})", key)
    for key in ("root_rot", "joint_rot", "body_rot"):
        norm = np.linalg.norm(np.asarray(getattr(clip, key)), axis=-1)
        if np.abs(norm - 1.0).max() > 1e-3:
            raise InputFileError(
                path, f"quaternions must have unit norm (worst {norm.flat[np.abs(norm - 1).argmax()]:.4f})", key
            )
    off = np.asarray(clip.body_offsets)
    if off.shape != (sk.NUM_BODIES, 3) or not np.isfinite(off).all():
        raise InputFileError(path, f"expected a finite ({sk.NUM_BODIES}, 3) array, got {off.shape}", "body_offsets")


def clip_file_stem(name: str) -> str:
    """A file-name stem for clip ``name`` that stays in its folder: letters, digits, '.', '_' and '-' kept, other
    runs to '_', no leading dot; a changed name gets a short hash of the name, so two names never share a file."""
    stem = _FILE_CHARS.sub("_", name).lstrip(".")
    if stem == name:
        return stem
    return f"{stem or 'clip'}_{hashlib.sha1(name.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def _number(path: Path, raw, key: str) -> float:
    """The number stored under ``key``; an InputFileError naming the file and key where it is not one."""
    try:
        value = float(raw[key])
    except (TypeError, ValueError):
        raise InputFileError(
            path, f"must be a single number, got {raw[key]!r}; re-import or rewrite the clip", key
        ) from None
    return value


def load_clip(path: str | os.PathLike) -> MotionClip:
    """Read and validate an rgsd clip file; errors name the file and the field."""
    path = Path(path)
    raw = read_npz(path, ("format_version", *(f.name for f in fields(MotionClip))))
    if "poses" in raw.files and "root_pos" not in raw.files:
        raise InputFileError(
            path, "this is an AMASS file, not an rgsd clip; convert it with `rgsd-motions import`", "poses"
        )
    missing = [k for k in (*_META, *_ARRAYS, "body_offsets") if k not in raw]
    if missing:
        raise InputFileError(path, f"missing required key(s): {', '.join(missing)}", missing[0])
    version = _number(path, raw, "format_version")
    if version != FORMAT_VERSION:
        raise InputFileError(
            path, f"unsupported format version {version:g} (this rgsd reads {FORMAT_VERSION})", "format_version"
        )
    kwargs = {f.name: raw[f.name] for f in fields(MotionClip) if f.name in raw}
    for key in ("name", "category", "source"):
        kwargs[key] = str(kwargs[key])
    for key in ("fps", "source_fps"):
        kwargs[key] = _number(path, raw, key)
    for key in (*_ARRAYS, "body_offsets"):
        kwargs[key] = np.asarray(kwargs[key], dtype=np.float64)
    clip = MotionClip(**kwargs)
    validate_clip(clip, path)
    return clip
