"""Checks of an imported clip that the numbers alone would not flag: a Y-up file, a turn undone by ``--cycles``,
hinge angles that jump in one frame. Each gives a line for the import report; none stops the import."""

from __future__ import annotations

import numpy as np
import torch

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.amass import AmassMotion, amass_rotations
from rgsd_envs.motion.clip import MotionClip
from rgsd_envs.motion.joint_fit import JOINT_NAMES
from rgsd_envs.utils import rotations as rot

MIN_HEAD_HEIGHT_M = 0.2
"""Mean height of the head above the pelvis below which a clip is probably lying down: a Y-up file read as Z-up
(an upright SMPL body has its head ~0.55 m above the pelvis)."""
CYCLE_TURN_WARN_DEG = 15.0
"""Root yaw change over a ``--cycles`` cycle above which closing the cycle visibly undoes a turn."""
JUMP_WARN_DEG = 90.0
"""One frame's change of a hinge angle above which the track is discontinuous (at 30 Hz, 2700 deg/s: no capture
moves a joint so fast; an out-of-range rotation switched from one end of a joint range to the other)."""


def y_up_warning(clip: MotionClip) -> str | None:
    """A line where the head is on average less than ``MIN_HEAD_HEIGHT_M`` above the pelvis, else None."""
    height = float(np.mean(clip.body_pos[:, sk.HEAD_ID, 2] - clip.root_pos[:, 2]))
    if height >= MIN_HEAD_HEIGHT_M:
        return None
    return (
        f"the head is on average {height:.2f} m above the pelvis (an upright body: ~0.55 m; warned below "
        f"{MIN_HEAD_HEIGHT_M:g} m): is this file Y-up? AMASS files are Z-up; a lying or upside-down capture is fine"
    )


def cycle_turn_warning(motion: AmassMotion, cycles: int) -> str | None:
    """With ``cycles`` > 1, a line where the cycle's root yaw (``motion``'s, one cycle) turns by more than
    ``CYCLE_TURN_WARN_DEG`` from its first to its last frame: closing the cycle blends that turn away."""
    if cycles <= 1:
        return None  # before the rotations: only a cycled import reads them
    root_rot = amass_rotations(motion)[1]
    yaw = np.rad2deg(rot.heading_angle(torch.as_tensor(np.asarray(root_rot, dtype=np.float64)[[0, -1]])).numpy())
    turn = float((yaw[1] - yaw[0] + 180.0) % 360.0 - 180.0)
    if abs(turn) <= CYCLE_TURN_WARN_DEG:
        return None
    return (
        f"the cycle turns {turn:+.0f} deg (root yaw, last frame against the first); --cycles closes each cycle "
        f"onto its first frame, which undoes the turn over the cycle's end: --cycles suits straight clips"
    )


def discontinuities(dof_pos: np.ndarray, min_deg: float = JUMP_WARN_DEG) -> dict[str, list[int]]:
    """Per joint (SMPL order), the frames where one of its hinge angles changed by more than ``min_deg`` since the
    frame before."""
    step = np.rad2deg(np.abs(np.diff(np.asarray(dof_pos), axis=0)))  # (T-1, 69), qpos order
    out: dict[str, list[int]] = {}
    for name in JOINT_NAMES:
        cols = [sk.DOF_NAMES.index(f"{name}_{a}") for a in "xyz"]
        frames = np.nonzero(step[:, cols].max(-1) > min_deg)[0] + 1
        if frames.size:
            out[name] = frames.tolist()
    return out


def discontinuity_warning(jumps: dict[str, list[int]], most: int = 3) -> str | None:
    """A line naming the joints whose hinge angles jump in one frame and the first frames where they do."""
    if not jumps:
        return None
    parts = []
    for joint, frames in jumps.items():
        shown = ", ".join(map(str, frames[:most])) + (f" and {len(frames) - most} more" if len(frames) > most else "")
        parts.append(f"{joint} at frame(s) {shown}")
    return (
        f"hinge angles jump by more than {JUMP_WARN_DEG:g} deg in one frame ({'; '.join(parts)}): the captured "
        "rotation is out of the joint's range and its nearest in-range angles switch between the range's ends"
    )


def import_warnings(motion: AmassMotion, clip: MotionClip, cycles: int) -> tuple[list[str], dict[str, list[int]]]:
    """The warning lines of an imported clip (``y_up_warning``, ``cycle_turn_warning``, ``discontinuity_warning``)
    and its discontinuities (``discontinuities``, clip frames)."""
    jumps = discontinuities(clip.dof_pos)
    lines = [
        y_up_warning(clip),
        cycle_turn_warning(motion, cycles),
        discontinuity_warning(jumps),
    ]
    return [line for line in lines if line], jumps
