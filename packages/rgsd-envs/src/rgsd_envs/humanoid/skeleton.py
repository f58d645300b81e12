"""The SMPL humanoid's joint table: the one place these facts live.

Everything that needs body names, parents, rest offsets, DoF order, PD gains,
torque limits or joint ranges imports them from here. World frame: z up, metres,
x forward, y left. Each non-root body has three hinges about its parent-aligned
local x, y and z axes, composed in that order (MuJoCo composes the hinges of one
body as intrinsic X-Y-Z Euler angles).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BODY_NAMES: tuple[str, ...] = (
    "Pelvis", "L_Hip", "R_Hip", "Torso", "L_Knee", "R_Knee", "Spine", "L_Ankle",
    "R_Ankle", "Chest", "L_Toe", "R_Toe", "Neck", "L_Thorax", "R_Thorax", "Head",
    "L_Shoulder", "R_Shoulder", "L_Elbow", "R_Elbow", "L_Wrist", "R_Wrist", "L_Hand",
    "R_Hand",
)  # fmt: skip
"""Body names in SMPL joint order (index = SMPL joint index)."""

PARENTS: tuple[int, ...] = (
    -1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 12, 13, 14, 16, 17, 18, 19, 20, 21,
)  # fmt: skip
"""Parent index of each body; -1 for the root."""

NUM_BODIES = len(BODY_NAMES)
NUM_JOINTS = NUM_BODIES - 1
"""Actuated bodies (all but the root), each with three hinges."""
NUM_DOFS = 3 * NUM_JOINTS
"""69 actuated degrees of freedom."""
AXES = ("x", "y", "z")

REST_OFFSETS = np.array(
    [
        (0.0, 0.0, 0.0),
        (-0.0068, 0.0695, -0.0914),
        (-0.0043, -0.0677, -0.0905),
        (-0.0267, -0.0025, 0.1090),
        (-0.0045, 0.0343, -0.3752),
        (-0.0089, -0.0383, -0.3826),
        (0.0011, 0.0055, 0.1352),
        (-0.0437, -0.0136, -0.3980),
        (-0.0423, 0.0158, -0.3984),
        (0.0254, 0.0015, 0.0529),
        (0.1193, 0.0264, -0.0558),
        (0.1233, -0.0254, -0.0481),
        (-0.0429, -0.0028, 0.2139),
        (-0.0341, 0.0788, 0.1217),
        (-0.0386, -0.0818, 0.1188),
        (0.0513, 0.0052, 0.0650),
        (-0.0089, 0.0910, 0.0305),
        (-0.0091, -0.0960, 0.0326),
        (-0.0275, 0.2596, -0.0128),
        (-0.0214, -0.2537, -0.0133),
        (-0.0012, 0.2492, 0.0090),
        (-0.0056, -0.2553, 0.0078),
        (-0.0149, 0.0840, -0.0082),
        (-0.0103, -0.0846, -0.0061),
    ]
)
"""Neutral-shape parent-relative offsets (24, 3), metres, z up, x forward, y left."""

SMPL_NEUTRAL_PELVIS_REST = np.array([-0.0018, -0.2233, 0.0282])
"""Rest pelvis joint J0 of the SMPL neutral body in SMPL's own y-up frame (AMASS
places the pelvis at ``trans + J0``)."""

WORLD_FROM_SMPL = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
"""Axis change from SMPL's body frame (x left, y up, z forward) to ours (x forward,
y left, z up): ``v_ours = WORLD_FROM_SMPL @ v_smpl``."""

LEG_BODIES: frozenset[str] = frozenset({"L_Hip", "R_Hip", "L_Knee", "R_Knee", "L_Ankle", "R_Ankle", "L_Toe", "R_Toe"})


def hinge_order(body: str) -> str:
    """Order of a body's three hinges, outermost first ("yxz" or "xyz").

    The middle hinge is the one whose +-90 degrees is a gimbal lock, so it must be
    the axis that moves least: legs flex about y past 90 degrees (kicks, deep knee
    bends), so they use y-x-z; the spine, neck and arms use x-y-z. Measured on the
    real clips, this keeps frame-to-frame hinge changes below 40 degrees where
    x-y-z everywhere gave 170-degree flips at the knees.
    """
    return "yxz" if body in LEG_BODIES else "xyz"


def _depth_first(b: int = 0) -> list[int]:
    order = [b]
    for c in range(NUM_BODIES):
        if PARENTS[c] == b:
            order += _depth_first(c)
    return order


MJ_BODY_ORDER: tuple[int, ...] = tuple(_depth_first())
"""SMPL indices in MuJoCo's body order (depth first; children in SMPL order)."""
MJ_BODY_IDS: np.ndarray = np.array([1 + MJ_BODY_ORDER.index(b) for b in range(NUM_BODIES)])
"""MjModel body id of each SMPL body (id 0 is the world): ``xpos[MJ_BODY_IDS]`` is in
SMPL order."""
DOF_BODIES: tuple[int, ...] = tuple(b for b in MJ_BODY_ORDER[1:] for _ in AXES)
"""SMPL body index of each of the 69 DoFs, in qpos/actuator/action order."""

DOF_NAMES: tuple[str, ...] = tuple(
    f"{BODY_NAMES[b]}_{a}" for b in MJ_BODY_ORDER[1:] for a in hinge_order(BODY_NAMES[b])
)
"""69 hinge names in qpos/actuator/action order: MuJoCo's depth-first body order,
then each body's hinge order. ``qpos[7:]``, ``ctrl`` and the action share it."""


@dataclass(frozen=True)
class JointGroup:
    """PD gains, torque limit and hinge ranges (degrees, by axis x, y, z) of a body."""

    kp: float
    kd: float
    torque_limit: float
    range_deg: tuple[tuple[float, float], tuple[float, float], tuple[float, float]]


# Ranges are generous anatomical limits for each axis (x, y, z), read in the
# body's hinge order. They are the joints' limits and bound the PD targets
# (offset = middle, scale = half width). The table, what the real clips reach and
# the sources are in the rgsd-envs README ("Joint ranges"); reproduce the measured
# figures with benchmarks/joint_ranges.py. Left/right mirror: y is the left axis, so
# x and z ranges flip sign and y keeps it: the same forearm twist has the same y
# angle on both sides. Forearm twist (pronation/supination) is the elbow and wrist y
# hinge; from SMPL's palms-down rest pose (the forearm's neutral with the arm
# abducted), negative y turns the palm up (supination) and positive y turns it
# further down (pronation). Humans pronate and supinate about 80 degrees each from
# neutral (AAOS), and SMPL fits split the twist between elbow and wrist in any
# proportion, so each of the two may carry most of it: elbow y -80..50 (real
# running arms reach +49), wrist y -70..80 (a real uppercut +78). Wrist x is
# flexion (palm side, negative on the left) 80 and extension 70 (AAOS).
_HIP_L = ((-60.0, 90.0), (-150.0, 60.0), (-70.0, 70.0))
_KNEE_L = ((-30.0, 30.0), (-20.0, 175.0), (-30.0, 30.0))
_ANKLE_L = ((-50.0, 50.0), (-60.0, 80.0), (-50.0, 50.0))
_TOE = ((-30.0, 30.0), (-60.0, 60.0), (-30.0, 30.0))
_SPINE = ((-45.0, 45.0), (-45.0, 60.0), (-45.0, 45.0))
_NECK = ((-60.0, 60.0), (-60.0, 60.0), (-70.0, 70.0))
_THORAX_L = ((-40.0, 40.0), (-40.0, 40.0), (-40.0, 40.0))
_SHOULDER_L = ((-120.0, 120.0), (-90.0, 90.0), (-140.0, 90.0))
_ELBOW_L = ((-45.0, 45.0), (-80.0, 50.0), (-160.0, 10.0))
_WRIST_L = ((-80.0, 70.0), (-70.0, 80.0), (-60.0, 60.0))
_HAND = ((-60.0, 60.0), (-60.0, 60.0), (-60.0, 60.0))


def _mirror(r: tuple[tuple[float, float], ...]) -> tuple[tuple[float, float], ...]:
    """Right-side ranges from left-side ones: x and z flip sign, y keeps it."""
    (x0, x1), (y0, y1), (z0, z1) = r
    return ((-x1, -x0), (y0, y1), (-z1, -z0))


def _group(kp: float, kd: float, tau: float, rng: tuple) -> JointGroup:
    return JointGroup(kp, kd, tau, rng)


JOINT_GROUPS: dict[str, JointGroup] = {
    "L_Hip": _group(800, 80, 500, _HIP_L),
    "R_Hip": _group(800, 80, 500, _mirror(_HIP_L)),
    "L_Knee": _group(800, 80, 500, _KNEE_L),
    "R_Knee": _group(800, 80, 500, _mirror(_KNEE_L)),
    "L_Ankle": _group(800, 80, 500, _ANKLE_L),
    "R_Ankle": _group(800, 80, 500, _mirror(_ANKLE_L)),
    "L_Toe": _group(500, 50, 500, _TOE),
    "R_Toe": _group(500, 50, 500, _TOE),
    "Torso": _group(1000, 100, 500, _SPINE),
    "Spine": _group(1000, 100, 500, _SPINE),
    "Chest": _group(1000, 100, 500, _SPINE),
    "Neck": _group(500, 50, 250, _NECK),
    "Head": _group(500, 50, 250, _NECK),
    "L_Thorax": _group(500, 50, 150, _THORAX_L),
    "R_Thorax": _group(500, 50, 150, _mirror(_THORAX_L)),
    "L_Shoulder": _group(500, 50, 150, _SHOULDER_L),
    "R_Shoulder": _group(500, 50, 150, _mirror(_SHOULDER_L)),
    "L_Elbow": _group(500, 50, 150, _ELBOW_L),
    "R_Elbow": _group(500, 50, 150, _mirror(_ELBOW_L)),
    "L_Wrist": _group(300, 30, 150, _WRIST_L),
    "R_Wrist": _group(300, 30, 150, _mirror(_WRIST_L)),
    "L_Hand": _group(300, 30, 150, _HAND),
    "R_Hand": _group(300, 30, 150, _HAND),
}
"""Per-body PD gains (kp N·m/rad, kd N·m·s/rad), torque limit (N·m) and ranges."""


def _per_dof(field: str) -> np.ndarray:
    return np.array([getattr(JOINT_GROUPS[BODY_NAMES[b]], field) for b in DOF_BODIES], dtype=float)


KP: np.ndarray = _per_dof("kp")
"""(69,) proportional gains."""
KD: np.ndarray = _per_dof("kd")
"""(69,) derivative gains."""
TORQUE_LIMITS: np.ndarray = _per_dof("torque_limit")
"""(69,) torque limits, N·m."""
DOF_RANGES: np.ndarray = np.deg2rad(
    np.array([JOINT_GROUPS[name.rsplit("_", 1)[0]].range_deg[AXES.index(name[-1])] for name in DOF_NAMES])
)
"""(69, 2) hinge ranges in radians, qpos order."""
ACTION_OFFSET: np.ndarray = DOF_RANGES.mean(axis=1)
"""(69,) PD target for action 0: the middle of each range."""
ACTION_SCALE: np.ndarray = 0.5 * (DOF_RANGES[:, 1] - DOF_RANGES[:, 0])
"""(69,) PD target change per unit action: half of each range, so [-1, 1] spans it."""

FOOT_BODIES: tuple[str, ...] = ("L_Ankle", "R_Ankle", "L_Toe", "R_Toe")
"""Bodies allowed to touch the ground without ending an episode."""
FOOT_BODY_IDS: tuple[int, ...] = tuple(BODY_NAMES.index(n) for n in FOOT_BODIES)
NON_FOOT: np.ndarray = np.isin(np.arange(len(BODY_NAMES)), FOOT_BODY_IDS, invert=True)
"""(24,) bool: the bodies whose contact with the ground is a fall (all but ``FOOT_BODIES``)."""
LEG_BODY_IDS: tuple[int, ...] = tuple(sorted(BODY_NAMES.index(n) for n in LEG_BODIES))
"""Ids of the hips, knees, ankles and toes, ascending."""
HEAD_ID = BODY_NAMES.index("Head")
ROOT_ID = 0

QPOS_DIM = 7 + NUM_DOFS
"""76: free joint (position 3, quaternion wxyz 4) then the 69 hinges."""
QVEL_DIM = 6 + NUM_DOFS
"""75: free joint (world linear 3, local angular 3) then the 69 hinges."""


def body_id(name: str) -> int:
    """Index of a body by name, with a clear error for unknown names."""
    try:
        return BODY_NAMES.index(name)
    except ValueError:
        raise KeyError(f"unknown body {name!r}; bodies are {', '.join(BODY_NAMES)}") from None
