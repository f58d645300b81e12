"""Import AMASS motions (SMPL+H ``*_poses.npz`` and SMPL-X ``*_stageii.npz``; docs/motions.md, AMASS import).

Joint j (0..21) is the local axis-angle ``poses[:, 3j:3j+3]`` in SMPL order; the
hands (22, 23) are identity. SMPL's rest pose is y-up facing +z and
``root_orient`` carries it into AMASS's z-up world; the pelvis sits at
``trans + J0``. Rotations are moved into our axes (x forward, y left, z up),
resampled to 30 Hz and the clip is put on the ground.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.clip import CLIP_FPS, MotionClip
from rgsd_envs.motion.cycles import MIN_CYCLE_FRAMES, tile_cycles
from rgsd_envs.motion.joint_fit import JointFit
from rgsd_envs.motion.kinematics import KinematicModel, clip_and_fit_from_rotations
from rgsd_envs.utils import rotations as rot
from rgsd_envs.utils.files import InputFileError, npz_text, read_npz

POSE_WIDTHS = {156: "SMPL+H", 165: "SMPL-X"}
"""Accepted ``poses`` widths and the model each means."""
FRAME_RATE_KEYS = ("mocap_framerate", "mocap_frame_rate")
"""SMPL+H files spell it ``mocap_framerate``, SMPL-X ``mocap_frame_rate``."""
NUM_BODY_POSE_JOINTS = 22
AMASS_KEYS = ("poses", "trans", *FRAME_RATE_KEYS, "betas", "gender")
"""The only keys rgsd reads from an AMASS file; any others (``dmpls``, SMPL-X markers,
a pickled ``markers_latent_vids``) are left unread."""
AMASS_FILE_SUFFIXES = ("_poses.npz", "_stageii.npz")
"""How AMASS names its motion files: SMPL+H ``*_poses.npz``, SMPL-X ``*_stageii.npz``."""
DEFAULT_CATEGORY = "unlabelled"
"""The category of an imported file given none (``--category``)."""
SHAPE_FILE_SUFFIXES = ("_stagei.npz",)
SHAPE_FILE_NAMES = ("shape.npz",)


class ShapeFileError(InputFileError):
    """An AMASS per-subject body-shape file (``shape.npz``, SMPL-X ``*_stagei.npz``): not a motion."""


def is_shape_file_name(path: str | os.PathLike) -> bool:
    """Whether a file name is one AMASS uses for per-subject shape files."""
    name = Path(path).name.lower()
    return name in SHAPE_FILE_NAMES or name.endswith(SHAPE_FILE_SUFFIXES)


@dataclass
class AmassMotion:
    """The parts of an AMASS file that rgsd uses."""

    path: Path
    model: str
    poses: np.ndarray
    """(N, 66): root then 21 body joints, axis-angle, SMPL order."""
    trans: np.ndarray
    fps: float
    betas: np.ndarray
    gender: str


def read_amass(path: str | os.PathLike) -> AmassMotion:
    """Load and check an AMASS file; errors name the file and the field."""
    path = Path(path)
    members = read_npz(path, ()).files  # checks the archive before anything is read
    if is_shape_file_name(path) or ("poses" not in members and "trans" not in members and "betas" in members):
        raise ShapeFileError(path, "a body-shape file (betas, no motion); skipped, it holds no frames to import")
    raw = read_npz(path, AMASS_KEYS)
    if _clip_members(members):
        raise InputFileError(path, "this is already an rgsd clip, not an AMASS file; load it with load_clip", "poses")
    for key in ("poses", "trans"):
        if key not in raw:
            raise InputFileError(path, "missing; AMASS files carry 'poses' (N, 156 or 165) and 'trans' (N, 3)", key)
    rate_key = next((k for k in FRAME_RATE_KEYS if k in raw), None)
    if rate_key is None:
        raise InputFileError(
            path,
            "missing frame rate: expected 'mocap_framerate' (SMPL+H) or 'mocap_frame_rate' (SMPL-X)",
            FRAME_RATE_KEYS[0],
        )
    try:
        fps = float(raw[rate_key])
    except (TypeError, ValueError):
        raise InputFileError(path, f"must be a number, got {raw[rate_key]!r}", rate_key) from None
    if not (np.isfinite(fps) and fps > 0):
        raise InputFileError(path, f"must be a positive frame rate, got {fps}", rate_key)
    poses = _floats(path, raw["poses"], "poses")
    trans = _floats(path, raw["trans"], "trans")
    if poses.ndim != 2 or poses.shape[1] not in POSE_WIDTHS:
        widths = " or ".join(f"{w} ({m})" for w, m in POSE_WIDTHS.items())
        raise InputFileError(path, f"expected shape (N, {widths}), got {poses.shape}", "poses")
    if poses.shape[0] == 0:
        raise InputFileError(path, "has zero frames", "poses")
    if poses.shape[0] < 2:
        raise InputFileError(path, "has a single frame; a motion needs at least 2", "poses")
    if trans.shape != (poses.shape[0], 3):
        raise InputFileError(path, f"expected shape ({poses.shape[0]}, 3) to match 'poses', got {trans.shape}", "trans")
    for key, arr in (("poses", poses), ("trans", trans)):
        if not np.isfinite(arr).all():
            frame = int(np.argwhere(~np.isfinite(arr).reshape(arr.shape[0], -1).all(axis=1))[0, 0])
            raise InputFileError(path, f"contains NaN or inf (first at frame {frame})", key)
    betas = _floats(path, raw["betas"], "betas").reshape(-1) if "betas" in raw else np.zeros(10)
    gender = npz_text(raw["gender"]) if "gender" in raw else "neutral"
    return AmassMotion(
        path, POSE_WIDTHS[poses.shape[1]], poses[:, : 3 * NUM_BODY_POSE_JOINTS], trans, fps, betas, gender
    )


def _floats(path: Path, value: np.ndarray, key: str) -> np.ndarray:
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputFileError(path, f"expected numbers, got an array of {value.dtype}", key) from None


_Q_WORLD_FROM_SMPL = rot.matrix_to_quat(torch.as_tensor(sk.WORLD_FROM_SMPL))


def amass_to_clip(
    motion: AmassMotion,
    name: str | None = None,
    category: str = DEFAULT_CATEGORY,
    offsets: np.ndarray | None = None,
    pelvis_rest: np.ndarray | None = None,
    kinematics: KinematicModel | None = None,
) -> MotionClip:
    """Convert a loaded AMASS motion into a 30 Hz, grounded rgsd clip.

    ``offsets`` and ``pelvis_rest`` (J0, SMPL frame) default to the neutral body;
    pass those of the subject's body (``body_shape``) to keep its proportions.
    """
    return amass_to_clip_and_fit(motion, name, category, offsets, pelvis_rest, kinematics)[0]


def amass_to_clip_and_fit(
    motion: AmassMotion,
    name: str | None = None,
    category: str = DEFAULT_CATEGORY,
    offsets: np.ndarray | None = None,
    pelvis_rest: np.ndarray | None = None,
    kinematics: KinematicModel | None = None,
    cycles: int = 1,
) -> tuple[MotionClip, JointFit]:
    """``amass_to_clip``, and how closely the hinge angles kept reproduce each joint's rotations; ``cycles`` > 1
    repeats a one-cycle motion (``rgsd_envs.motion.cycles``)."""
    check_duration(motion)
    if cycles > 1 and len(motion.poses) < MIN_CYCLE_FRAMES:
        raise InputFileError(
            motion.path,
            f"--cycles {cycles} needs a cycle of at least {MIN_CYCLE_FRAMES} frames, got {len(motion.poses)}",
            "poses",
        )
    root_pos, root_rot, local = tile_cycles(*amass_rotations(motion, pelvis_rest), cycles)
    return clip_and_fit_from_rotations(
        name=name or clip_name_from_path(motion.path),
        category=category,
        root_pos=root_pos,
        root_rot=root_rot,
        joint_rot=local,
        fps=motion.fps,
        source=str(motion.path),
        offsets=offsets,
        kinematics=kinematics,
    )


def check_duration(motion: AmassMotion) -> None:
    """An InputFileError where the motion lasts less than one clip frame step: resampled to ``CLIP_FPS`` it would
    keep a single frame."""
    seconds = (len(motion.poses) - 1) / motion.fps
    if seconds * CLIP_FPS + 1e-6 < 1.0:
        raise InputFileError(
            motion.path,
            f"lasts {seconds:.4g} s ({len(motion.poses)} frames at {motion.fps:g} Hz), shorter than one "
            f"{CLIP_FPS:g} Hz step; needs at least 1/{CLIP_FPS:g} s",
            "poses",
        )


def amass_rotations(
    motion: AmassMotion, pelvis_rest: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Root position (N, 3), root rotation (N, 4) and local joint rotations (N, 23, 4, SMPL order) of an AMASS
    motion in our axes, at the file's frame rate."""
    n = motion.poses.shape[0]
    aa = torch.zeros(n, sk.NUM_BODIES, 3, dtype=torch.float64)
    aa[:, :NUM_BODY_POSE_JOINTS] = torch.as_tensor(motion.poses).reshape(n, NUM_BODY_POSE_JOINTS, 3)
    q = rot.quat_from_axis_angle(aa)
    qc = _Q_WORLD_FROM_SMPL.to(q.dtype)
    # local rotations: change of axes C R C^T; root: world-from-SMPL-body R then C^T
    local = rot.quat_mul(rot.quat_mul(qc, q[:, 1:]), rot.quat_conj(qc))
    root_rot = rot.quat_mul(q[:, 0], rot.quat_conj(qc))
    j0 = sk.SMPL_NEUTRAL_PELVIS_REST if pelvis_rest is None else np.asarray(pelvis_rest, dtype=float)
    return motion.trans + j0, root_rot.numpy(), local.numpy()


def clip_name_from_path(path: str | os.PathLike) -> str:
    """A clip name from an AMASS file name: suffix dropped, non-alphanumerics to '_'."""
    stem = Path(path).name
    for suffix in (*AMASS_FILE_SUFFIXES, ".npz"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    return safe_name(stem)


def safe_name(text: str) -> str:
    """``text`` as a clip name: lower case, runs of non-alphanumerics to one '_'."""
    return re.sub(r"[^0-9A-Za-z]+", "_", text).strip("_").lower()


def is_rgsd_clip(path: str | os.PathLike) -> bool:
    """Whether a file is an rgsd clip (``root_pos``, no ``poses``); False for anything unreadable."""
    try:
        return _clip_members(read_npz(path, ()).files)
    except InputFileError:
        return False


def _clip_members(members: list[str]) -> bool:
    """Whether an archive's member names are an rgsd clip's (``root_pos``, no ``poses``)."""
    return "root_pos" in members and "poses" not in members


def find_amass_files(paths: list[str | os.PathLike]) -> list[Path]:
    """AMASS files among the given files and folders (folders searched recursively)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(f for f in p.rglob("*.npz") if f.is_file() and not f.name.startswith("."))
        elif p.exists():
            out.append(p)
        else:
            raise InputFileError(p, "no such file or folder")
    return out
