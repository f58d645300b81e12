"""Built-in demo motions: small synthetic clips made offline by code, no mocap needed.

Five clips, one per category of the paper (``walk``, ``run``, ``sidestep``,
``backward``, ``punch``), built procedurally for the neutral SMPL body:

- gaits: each foot follows a periodic track: planted during stance (rolling
  heel -> flat -> toe about fixed points of the sole), a lifted arc in swing.
  A reference zero-moment point rolls along the stance feet; the centre of
  mass follows the periodic linear-inverted-pendulum solution over it (so the
  pelvis sways and surges the way balance asks for); the pelvis is placed under
  that centre of mass and never turns. Analytic two-link IK gives hip and knee;
  the ankle sets the foot's pitch (level in stance, following the shank in the
  air). The arms hang and counter-swing, the chest counter-twists a little.
- punch: feet planted in a staggered stance, a guard, a left jab and a right
  cross, with the trunk twisting into each punch.

Every gait clip is a whole number of cycles (its last frame is its first
shifted along the direction of travel) and every clip is finished by
``clip_from_rotations`` (hinge angles, MuJoCo FK, grounding, velocities). See
``docs/demo_motions.md`` for what these clips are and are not.
"""

from __future__ import annotations

import copy
import functools
import os
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np
import torch

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.humanoid.mjcf import HEEL_BEHIND_ANKLE, SOLE_BELOW_TOE, rest_root_height
from rgsd_envs.motion.clip import CATEGORIES, CLIP_FPS, MotionClip
from rgsd_envs.motion.kinematics import KinematicModel, clip_from_rotations, dof_from_joint_rot
from rgsd_envs.utils import rotations as rot

DEMO_KINDS: tuple[str, ...] = CATEGORIES
"""The demo clips, one per category; clip ``demo_<kind>`` has category ``<kind>``."""


@dataclass(frozen=True)
class Gait:
    """A periodic gait: one cycle (``period`` s) holds one step of each foot."""

    velocity: tuple[float, float]
    """Pelvis velocity (x forward, y left), m/s; the body always faces +x."""
    period: float
    """Seconds per cycle; a whole number of 30 Hz frames."""
    cycles: int
    start: float
    """Cycle phase of the first frame (0 = left heel strike)."""
    duty: float
    """Fraction of a cycle that each foot is planted (< 0.5 gives flight phases)."""
    step_height: float
    """Highest lift of the ankle during swing, m."""
    heel_rise: float
    """Foot pitch at push-off (heel up, toes flat), rad."""
    heel_strike: float
    """Toes-up pitch of the foot at touch-down (landing on the heel), rad."""
    swing_toe_up: float
    """Extra toes-up ankle angle in mid-swing (toe clearance), rad."""
    swing_peak: float
    """Fraction of the swing at which the foot is highest (0.25 to 0.75)."""
    width: float
    """Lateral distance between the two ankles' tracks, m."""
    pelvis_height: float
    """Mean pelvis height, m (the rest pose stands at ``rest_root_height``)."""
    bob: float
    """Vertical pelvis amplitude, m: > 0 highest at mid-stance (walking), < 0 lowest (running)."""
    zmp_roll: float
    """How far the zero-moment point rolls from heel to toe along a stance foot, m."""
    pitch: float
    """Forward tilt of the pelvis, rad (negative: tilted back)."""
    chest_lean: float
    """Extra forward lean of the spine, rad (the head stays level)."""
    chest_twist: float
    """Chest counter-rotation amplitude about z, rad."""
    arm_swing: float
    """Shoulder swing amplitude, rad."""
    arm_out: float
    """Sideways angle of the hanging arms away from the body, rad."""
    elbow_flex: float
    """Mean elbow flexion, rad."""


_DEG = np.pi / 180.0
GAITS: dict[str, Gait] = {
    "walk": Gait(
        velocity=(1.05, 0.0), period=1.0, cycles=3, start=0.8, duty=0.58, step_height=0.1, heel_rise=26 * _DEG,
        heel_strike=8 * _DEG, swing_toe_up=26 * _DEG, swing_peak=0.4, width=0.18, pelvis_height=0.875, bob=0.01,
        zmp_roll=0.1, pitch=-2 * _DEG, chest_lean=2 * _DEG, chest_twist=4 * _DEG, arm_swing=18 * _DEG,
        arm_out=12 * _DEG, elbow_flex=20 * _DEG,
    ),
    "run": Gait(
        velocity=(1.5, 0.0), period=0.7, cycles=4, start=0.7, duty=0.42, step_height=0.2, heel_rise=26 * _DEG,
        heel_strike=0.0, swing_toe_up=20 * _DEG, swing_peak=0.4, width=0.18, pelvis_height=0.85, bob=-0.025,
        zmp_roll=0.05, pitch=-2.5 * _DEG, chest_lean=3 * _DEG, chest_twist=6 * _DEG, arm_swing=26 * _DEG,
        arm_out=12 * _DEG, elbow_flex=70 * _DEG,
    ),
    "sidestep": Gait(
        velocity=(0.0, 0.36), period=1.0, cycles=3, start=0.0, duty=0.6, step_height=0.08, heel_rise=8 * _DEG,
        heel_strike=0.0, swing_toe_up=10 * _DEG, swing_peak=0.5, width=0.32, pelvis_height=0.89, bob=0.008,
        zmp_roll=0.02, pitch=2 * _DEG, chest_lean=0.0, chest_twist=0.0, arm_swing=4 * _DEG, arm_out=14 * _DEG,
        elbow_flex=20 * _DEG,
    ),
    "backward": Gait(
        velocity=(-0.7, 0.0), period=1.0, cycles=3, start=0.8, duty=0.66, step_height=0.07, heel_rise=11 * _DEG,
        heel_strike=0.0, swing_toe_up=20 * _DEG, swing_peak=0.5, width=0.2, pelvis_height=0.875, bob=0.01,
        zmp_roll=0.05, pitch=3.5 * _DEG, chest_lean=0.0, chest_twist=3 * _DEG, arm_swing=10 * _DEG, arm_out=12 * _DEG,
        elbow_flex=20 * _DEG,
    ),
}  # fmt: skip
"""The gait demos' parameters (the punch has its own script below)."""

_SIDES = ("L", "R")
_STRIKE_ROLL = 0.15
"""Share of the stance spent lowering the toes after a heel strike."""
_RISE_START = 0.55
"""Share of the stance after which the heel rises."""
FOOT_CENTRE_AHEAD = 0.06
"""The middle of the sole is this far ahead of the ankle joint (m): the ZMP rolls about it."""


def _body(name: str) -> int:
    return sk.body_id(name)


def _ankle_height(side: str) -> float:
    """Height of the ankle joint above the floor when its sole lies flat on it."""
    return SOLE_BELOW_TOE - sk.REST_OFFSETS[_body(f"{side}_Toe")][2]


def _minjerk(s: np.ndarray) -> np.ndarray:
    """Smooth 0 -> 1 ramp with zero velocity and acceleration at both ends."""
    s = np.clip(s, 0.0, 1.0)
    return s**3 * (10.0 - 15.0 * s + 6.0 * s**2)


def _lift(s: np.ndarray, peak: float) -> np.ndarray:
    """Swing height profile 0 -> 1 -> 0 over s in [0, 1], highest at s = peak, flat ends."""
    u = np.clip(s, 0.0, 1.0) ** (np.log(0.5) / np.log(peak))
    return np.sin(np.pi * u) ** 2


def _rot_x(a: np.ndarray) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    o, z = np.ones_like(a), np.zeros_like(a)
    return np.stack([o, z, z, z, c, -s, z, s, c], -1).reshape((*a.shape, 3, 3))


def _rot_y(a: np.ndarray) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    o, z = np.ones_like(a), np.zeros_like(a)
    return np.stack([c, z, s, z, o, z, -s, z, c], -1).reshape((*a.shape, 3, 3))


def _quat(m: np.ndarray) -> np.ndarray:
    return rot.matrix_to_quat(torch.as_tensor(m)).numpy()


def _euler_quat(angles: np.ndarray, body: str) -> np.ndarray:
    """Quaternions (T, 4) of a body's hinge angles (T, 3) given in its hinge order."""
    return rot.quat_from_euler(torch.as_tensor(angles, dtype=torch.float64), sk.hinge_order(body)).numpy()


def _mirror_quat(q: np.ndarray) -> np.ndarray:
    """The left/right mirror image (through the x-z plane) of rotations q."""
    return q * np.array([1.0, -1.0, 1.0, -1.0])


def _leg_ik(d: np.ndarray, side: str) -> tuple[np.ndarray, np.ndarray]:
    """Hip (y, x) angles and knee flexion (T,) that put the ankle at d (T, 3), pelvis frame, from the hip.

    Analytic two-link IK on the rest offsets (thigh a, shank b): the knee bends
    about its y axis until the leg is as long as ``d``, then the hip pitches (y)
    and rolls (x) the leg onto it, with no hip twist so the knee points forward.
    """
    a = sk.REST_OFFSETS[_body(f"{side}_Knee")]
    b = sk.REST_OFFSETS[_body(f"{side}_Ankle")]
    # |a + Ry(k) b|^2 = |d|^2  <=>  A cos k + B sin k = K
    big_a, big_b = a[0] * b[0] + a[2] * b[2], a[0] * b[2] - a[2] * b[0]
    k_target = 0.5 * ((d**2).sum(-1) - a @ a - b @ b) - a[1] * b[1]
    r = np.hypot(big_a, big_b)
    ratio = k_target / r
    if np.any(ratio > 1.0 - 1e-4) or np.any(ratio < -1.0):
        worst = float(np.sqrt((d**2).sum(-1)).max())
        raise ValueError(f"{side} leg IK: ankle target {worst:.3f} m from the hip is out of reach; lower the pelvis")
    knee = np.arctan2(big_b, big_a) + np.arccos(ratio)
    v = a + np.einsum("tij,j->ti", _rot_y(knee), b)
    # roll about x: (Rx(x) v)_y = d_y
    rr = np.hypot(v[:, 1], v[:, 2])
    psi = np.arctan2(v[:, 2], v[:, 1])
    acos = np.arccos(np.clip(d[:, 1] / rr, -1.0, 1.0))
    x_a, x_b = acos - psi, -acos - psi
    x_a, x_b = np.angle(np.exp(1j * x_a)), np.angle(np.exp(1j * x_b))
    hip_x = np.where(np.abs(x_a) < np.abs(x_b), x_a, x_b)
    w = np.einsum("tij,tj->ti", _rot_x(hip_x), v)
    hip_y = np.angle(np.exp(1j * (np.arctan2(d[:, 0], d[:, 2]) - np.arctan2(w[:, 0], w[:, 2]))))
    return np.stack([hip_y, hip_x], -1), knee


def _swing_ankles(ankle: np.ndarray, stance: np.ndarray, cycle: int, toe_up: float) -> np.ndarray:
    """Ankle rotations (n, 4) whose swing frames blend smoothly from lift-off to touch-down.

    In the air the foot follows the shank: the ankle joint eases from its push-off
    angle to its landing angle instead of holding the foot level, which would
    whip the ankle (and kick the whole body) while the knee folds; in the last
    part of the swing it returns to the planned, level foot for the landing. The motion is
    periodic with ``cycle`` frames, so a swing cut by the clip's ends uses the
    neighbouring cycle's stance frames. Mid-swing the toes lift by ``toe_up`` (rad)
    so that they clear the floor.
    """
    planted = ~np.isnan(stance[:cycle])
    if planted.all():
        return ankle
    idx = np.arange(cycle)
    stance_idx = idx[planted]
    # previous and next planted frame of each frame, cyclically (as offsets)
    before = idx - stance_idx[np.searchsorted(stance_idx, idx, side="right") - 1]
    before = np.where(before < 0, before + cycle, before)
    after = stance_idx[np.searchsorted(stance_idx, idx, side="left") % len(stance_idx)] - idx
    after = np.where(after < 0, after + cycle, after)
    s = before / np.maximum(before + after, 1)  # swing progress
    q0 = torch.as_tensor(ankle[(idx - before) % cycle])
    q1 = torch.as_tensor(ankle[(idx + after) % cycle])
    blended = rot.quat_slerp(q0, q1, torch.as_tensor(_smooth(s))[:, None])
    lift = torch.as_tensor(_quat(_rot_y(-toe_up * np.sin(np.pi * s) ** 2)))
    blended = rot.quat_mul(blended, lift)
    # before landing, the foot turns back to its planned (level) pose so that no toe digs in
    landing = torch.as_tensor(_smooth((s - 0.6) / 0.4))[:, None]
    blended = rot.quat_slerp(blended, torch.as_tensor(ankle[:cycle]), landing).numpy()
    one_cycle = np.where(planted[:, None], ankle[:cycle], blended)
    return one_cycle[np.arange(len(ankle)) % cycle]


def _legs(
    root_pos: np.ndarray, root_mat: np.ndarray, feet: dict[str, _FootTrack], cycle: int, toe_up: float = 0.0
) -> dict[str, np.ndarray]:
    """Hip, knee, ankle and toe rotations (n, 4) that put each ankle on its track.

    In stance the foot takes its planned pitch and faces +x; in swing the ankle
    blends (``_swing_ankles``). The toes stay flat on the floor while the heel is up.
    """
    out = {}
    n = root_pos.shape[0]
    zeros = np.zeros(n)
    for side in _SIDES:
        foot = feet[side]
        hip = root_pos + np.einsum("tij,j->ti", root_mat, sk.REST_OFFSETS[_body(f"{side}_Hip")])
        d = np.einsum("tji,tj->ti", root_mat, foot.ankle - hip)
        (hip_yx, knee) = _leg_ik(d, side)
        hip_angles = np.stack([hip_yx[:, 0], hip_yx[:, 1], zeros], -1)
        knee_angles = np.stack([knee, zeros, zeros], -1)
        shank = root_mat @ _rot_y(hip_yx[:, 0]) @ _rot_x(hip_yx[:, 1]) @ _rot_y(knee)
        out[f"{side}_Hip"] = _euler_quat(hip_angles, f"{side}_Hip")
        out[f"{side}_Knee"] = _euler_quat(knee_angles, f"{side}_Knee")
        ankle = _quat(np.swapaxes(shank, -1, -2) @ _rot_y(foot.pitch))
        out[f"{side}_Ankle"] = _swing_ankles(ankle, foot.stance, cycle, toe_up)
        out[f"{side}_Toe"] = _quat(_rot_y(-np.maximum(foot.pitch, 0.0)))
    return out


def _arm(direction: np.ndarray, pole: np.ndarray, flex: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Left shoulder and elbow rotations (T, 4) for an upper-arm direction in the chest frame.

    The upper arm (rest: +y) points along ``direction``; the elbow bends by
    ``flex`` towards ``pole`` (projected perpendicular to the arm). Mirror for
    the right arm.
    """
    y = direction / np.linalg.norm(direction, axis=-1, keepdims=True)
    x = pole - (pole * y).sum(-1, keepdims=True) * y
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    z = np.cross(x, y)
    shoulder = _quat(np.stack([x, y, z], -1))
    zeros = np.zeros_like(flex)
    elbow = _euler_quat(np.stack([zeros, zeros, -flex], -1), "L_Elbow")
    return shoulder, elbow


def _trunk(n: int, lean: np.ndarray, twist: np.ndarray, head_pitch: np.ndarray) -> dict[str, np.ndarray]:
    """Torso, spine and chest share a lean and twist; neck and head undo them to keep the gaze level."""
    zeros = np.zeros(n)
    out = {}
    for body in ("Torso", "Spine", "Chest"):
        out[body] = _euler_quat(np.stack([zeros, lean / 3, twist / 3], -1), body)
    for body in ("Neck", "Head"):
        out[body] = _euler_quat(np.stack([zeros, -head_pitch / 2, -0.4 * twist], -1), body)
    return out


def _assemble(name: str, kind: str, root_pos: np.ndarray, root_mat: np.ndarray, parts: dict[str, np.ndarray],
              kinematics: KinematicModel, source: str | None = None) -> MotionClip:  # fmt: skip
    joint_rot = _joint_rot(parts, root_pos.shape[0])
    return clip_from_rotations(
        name,
        kind,
        root_pos,
        _quat(root_mat),
        joint_rot,
        CLIP_FPS,
        source=source or f"demo:{kind}",
        kinematics=kinematics,
    )


@dataclass
class _FootTrack:
    """One foot over a clip: ankle position (n, 3), foot pitch (n,) and stance progress (n,)."""

    ankle: np.ndarray
    pitch: np.ndarray
    """Rotation of the foot about its y axis, rad: > 0 heel up (push-off), < 0 toes up (heel strike)."""
    stance: np.ndarray
    """Progress through the stance in [0, 1), NaN while the foot swings."""


def _smooth(s: np.ndarray) -> np.ndarray:
    """Smoothstep 0 -> 1 over s in [0, 1] (zero slope at both ends)."""
    s = np.clip(s, 0.0, 1.0)
    return s * s * (3.0 - 2.0 * s)


def _foot_points(side: str) -> tuple[np.ndarray, np.ndarray]:
    """The toe joint and the back edge of the sole, in the ankle frame: the foot's two pivots."""
    toe = sk.REST_OFFSETS[_body(f"{side}_Toe")]
    heel = np.array([-HEEL_BEHIND_ANKLE, 0.0, toe[2] - SOLE_BELOW_TOE])
    return toe.copy(), heel


def _pivot(pivot: np.ndarray, local: np.ndarray, pitch: np.ndarray) -> np.ndarray:
    """Ankle positions (n, 3) that keep the foot point ``local`` (ankle frame) at ``pivot`` (n, 3) while pitched."""
    return pivot - np.einsum("tij,j->ti", _rot_y(pitch), local)


def _foot_tracks(t: np.ndarray, g: Gait) -> dict[str, _FootTrack]:
    """Both feet: planted in stance (rolling heel -> flat -> toe), a lifted arc in swing.

    The footprints sit under the hip's track at mid-stance: the left foot's
    stance starts at cycle phase 0, the right foot's half a cycle later. The
    foot turns about a fixed point of its sole at each roll (the heel's back
    edge after touch-down, the toe joint at push-off), so no point in contact slides.
    """
    v = np.array([g.velocity[0], g.velocity[1], 0.0])
    out = {}
    for side, phase0 in zip(_SIDES, (0.0, 0.5)):
        toe, heel = _foot_points(side)
        lateral = (g.width / 2) * (1.0 if side == "L" else -1.0)
        flat = np.array([sk.REST_OFFSETS[_body(f"{side}_Hip")][0], lateral, _ankle_height(side)])
        phase = t / g.period + phase0
        c = np.floor(phase)
        f = phase - c
        here = np.outer((c + g.duty / 2 - phase0) * g.period, v) + flat  # this cycle's flat footprint
        nxt = here + v * g.period
        sigma = f / g.duty
        # stance: heel-strike roll about the heel, flat, then heel rise about the toe joint
        strike = -g.heel_strike * (1.0 - _smooth(sigma / _STRIKE_ROLL))
        rise = g.heel_rise * _smooth((sigma - _RISE_START) / (1.0 - _RISE_START))
        stance_pitch = np.where(sigma < _STRIKE_ROLL, strike, rise)
        stance_ankle = np.where(
            (sigma < _STRIKE_ROLL)[:, None], _pivot(here + heel, heel, strike), _pivot(here + toe, toe, rise)
        )
        # swing: from the push-off pose to the heel-strike pose of the next footprint
        s = np.clip((f - g.duty) / (1.0 - g.duty), 0.0, 1.0)
        start = _pivot(here + toe, toe, np.full(len(t), g.heel_rise))
        end = _pivot(nxt + heel, heel, np.full(len(t), -g.heel_strike))
        # the foot lifts before it travels and has arrived before it lands
        travel = _smooth((s - 0.06) / 0.84)[:, None]
        swing_ankle = start + travel * (end - start)
        swing_ankle[:, 2] = (
            start[:, 2] + _smooth(s) * (end[:, 2] - start[:, 2]) + g.step_height * _lift(s, g.swing_peak)
        )
        swing_pitch = g.heel_rise * (1.0 - _smooth(s / 0.45)) - g.heel_strike * _smooth((s - 0.55) / 0.45)
        in_stance = f < g.duty
        out[side] = _FootTrack(
            ankle=np.where(in_stance[:, None], stance_ankle, swing_ankle),
            pitch=np.where(in_stance, stance_pitch, swing_pitch),
            stance=np.where(in_stance, sigma, np.nan),
        )
    return out


def _zmp(t: np.ndarray, g: Gait, feet: dict[str, _FootTrack]) -> np.ndarray:
    """Reference zero-moment point (n, 2): rolls along each stance foot, handed over in double support.

    In flight (no foot down) it moves linearly from one footprint to the next.
    """
    double = max(g.duty - 0.5, 0.02) / g.duty  # share of a stance spent in double support
    total_w, total_p = np.zeros(t.shape), np.zeros((*t.shape, 2))
    for side, foot in feet.items():
        # the middle of the sole of the flat footprint
        flat = foot.ankle[:, :2] + np.einsum("tij,j->ti", _rot_y(foot.pitch), _foot_points(side)[0])[:, :2]
        toe = sk.REST_OFFSETS[_body(f"{side}_Toe")]
        centre = flat + np.array([FOOT_CENTRE_AHEAD - toe[0], toe[1] / 2])
        sigma = np.nan_to_num(foot.stance, nan=-1.0)
        w = np.clip(sigma / double, 0.0, 1.0) * np.clip((1.0 - sigma) / double, 0.0, 1.0) * (sigma >= 0)
        p = centre + g.zmp_roll * (np.clip(sigma, 0.0, 1.0) - 0.5)[:, None] * [1.0, 0.0]
        total_w += w
        total_p += w[:, None] * p
    down = total_w > 1e-9
    zmp = total_p[down] / total_w[down, None]
    return np.stack([np.interp(t, t[down], zmp[:, i]) for i in range(2)], -1)


def _lipm_com(t: np.ndarray, zmp: np.ndarray, velocity: np.ndarray, height: float, duration: float) -> np.ndarray:
    """Periodic linear-inverted-pendulum centre of mass (n, 2) over a ZMP track that drifts at ``velocity``.

    ``com'' = (g / height) (com - zmp)`` has one periodic solution around the
    drift: each Fourier harmonic k of the ZMP is scaled by w^2 / (w^2 + (2 pi k / duration)^2).
    ``t`` must cover [0, duration) evenly.
    """
    w2 = 9.81 / height
    drift = np.outer(t, velocity)
    spec = np.fft.rfft(zmp - drift, axis=0)
    omega = 2 * np.pi * np.fft.rfftfreq(len(t), d=duration / len(t))
    com = np.fft.irfft(spec * (w2 / (w2 + omega**2))[:, None], n=len(t), axis=0)
    return com + drift


def _com(km: KinematicModel, root_pos: np.ndarray, root_quat: np.ndarray, joint_rot: np.ndarray) -> np.ndarray:
    """Whole-body centre of mass (n, 3) of a pose sequence."""
    dof = dof_from_joint_rot(joint_rot)
    m, d = km.model, km.data
    out = np.zeros_like(root_pos)
    for i in range(len(root_pos)):
        d.qpos[:] = np.concatenate([root_pos[i], root_quat[i], dof[i]])
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        out[i] = d.subtree_com[1]
    return out


def _joint_rot(parts: dict[str, np.ndarray], n: int) -> np.ndarray:
    """Local rotations (n, 23, 4) from the parts set so far; identity elsewhere."""
    joint_rot = np.zeros((n, sk.NUM_JOINTS, 4))
    joint_rot[..., 0] = 1.0
    for body, q in parts.items():
        joint_rot[:, _body(body) - 1] = q
    return joint_rot


def _gait_clip(
    kind: str, g: Gait, km: KinematicModel, name: str | None = None, source: str | None = None
) -> MotionClip:
    """One gait clip: ``g.cycles`` whole cycles starting at phase ``g.start``, from the origin (default name
    ``demo_<kind>``)."""
    duration = g.cycles * g.period
    n = round(duration * CLIP_FPS) + 1
    t = np.arange(n) / CLIP_FPS + g.start * g.period
    cyc = t / g.period
    cycle = round(g.period * CLIP_FPS)
    if not np.isclose(cycle, g.period * CLIP_FPS):
        raise ValueError(f"{kind}: the gait period {g.period} s must be a whole number of {CLIP_FPS:g} Hz frames")
    # upper body: arms hang and counter-swing (left arm forward while the right leg is)
    parts: dict[str, np.ndarray] = {}
    swing_l = -g.arm_swing * np.cos(2 * np.pi * cyc)
    flex_wobble = 0.25 * g.elbow_flex * np.sin(2 * np.pi * cyc)
    hang = _euler_quat(np.tile([-(np.pi / 2 - g.arm_out), 0.0, 0.0], (n, 1)), "L_Shoulder")
    for side, swing, flex in (("L", swing_l, g.elbow_flex - flex_wobble), ("R", -swing_l, g.elbow_flex + flex_wobble)):
        shoulder = rot.quat_mul(torch.as_tensor(_quat(_rot_y(-swing))), torch.as_tensor(hang)).numpy()
        elbow = _euler_quat(np.stack([0 * flex, 0 * flex, -flex], -1), "L_Elbow")
        mirror = _mirror_quat if side == "R" else (lambda q: q)
        parts[f"{side}_Shoulder"] = mirror(shoulder)
        parts[f"{side}_Elbow"] = mirror(elbow)
    # the chest turns with the arms: left shoulder forward = a clockwise (negative z) twist
    twist = g.chest_twist * np.cos(2 * np.pi * cyc)
    parts.update(_trunk(n, np.full(n, g.chest_lean), twist, np.full(n, g.pitch + g.chest_lean)))
    # feet, then the centre of mass that balances over them (LIPM), then the pelvis under it
    feet = _foot_tracks(t, g)
    fine = t[:-1]  # one period of the periodic part, frames only
    zmp = _zmp(fine, g, _foot_tracks(fine, g))
    root_mat = _rot_y(np.full(n, g.pitch))
    root_quat = _quat(root_mat)
    root_pos = np.outer(t, [g.velocity[0], g.velocity[1], 0.0])
    root_pos[:, 2] = g.pelvis_height + g.bob * np.cos(4 * np.pi * (cyc - g.duty / 2))
    for _ in range(3):  # the COM offset depends (a little) on the legs' pose
        parts.update(_legs(root_pos, root_mat, feet, cycle, g.swing_toe_up))
        com = _com(km, root_pos, root_quat, _joint_rot(parts, n))
        target = _lipm_com(fine, zmp, np.array(g.velocity), float(com[:, 2].mean()), duration)
        target = np.concatenate([target, target[:1] + np.array(g.velocity) * duration])
        root_pos[:, :2] += target - com[:, :2]
    parts.update(_legs(root_pos, root_mat, feet, cycle, g.swing_toe_up))
    root_pos[:, :2] -= root_pos[0, :2]  # start at the origin
    return _assemble(name or f"demo_{kind}", kind, root_pos, root_mat, parts, km, source)


def _keyframes(t: np.ndarray, keys: list[tuple[float, float, np.ndarray]]) -> np.ndarray:
    """Hold a value, then move to the next with a min-jerk ramp: keys are (start, end, value)."""
    out = np.broadcast_to(keys[0][2], t.shape + np.shape(keys[0][2])).astype(float).copy()
    prev = np.asarray(keys[0][2], dtype=float)
    for start, end, value in keys[1:]:
        value = np.asarray(value, dtype=float)
        w = _minjerk((t - start) / (end - start))
        out += np.multiply.outer(w, value - prev)
        prev = value
    return out


PUNCH_ARMS: dict[str, tuple[float, ...] | float] = {
    "guard_dir": (0.4, 0.2, -0.9),
    "guard_flex": 120 * _DEG,
    "pole": (0.0, -0.2, 1.0),
    "jab_dir": (1.0, -0.14, 0.08),
    "cross_dir": (1.0, 0.08, 0.1),
    "hit_flex": 8 * _DEG,
}
"""The punch's arm key poses, left-arm convention in the chest frame (+y = outwards):
upper-arm directions, elbow flexion (rad) and the direction the elbow bends towards."""


PUNCH_STANCE: dict[str, float | tuple[float, float]] = {
    "lead_foot": (0.1, 0.12),
    "rear_foot": (-0.1, -0.12),
    "com_ahead": 0.04,
    "com_shift": 0.0,
}
"""The punch's stance: ankle positions (x, y) of the lead (left) and rear foot, and
where the centre of mass stays: ``com_ahead`` m in front of the middle of the
ankles (PD replay holds the guard for 6 s there, and topples within 2.5 s with
it 4 cm further back or forward), moving ``com_shift`` of the way towards the
lead foot during the cross."""


@dataclass(frozen=True)
class Punch:
    """A punching clip: guard, left jab, guard, right cross, guard, feet planted (``PUNCH`` is the demo's)."""

    arms: dict[str, tuple[float, ...] | float]
    """Arm key poses, as ``PUNCH_ARMS``."""
    stance: dict[str, float | tuple[float, float]]
    """Feet and centre of mass, as ``PUNCH_STANCE``."""
    duration: float = 3.0
    """Seconds; a whole number of 30 Hz frames."""
    jab: tuple[float, float, float, float] = (0.55, 0.8, 0.85, 1.15)
    """Times (s) the jab starts and ends going out, then starts and ends coming back."""
    cross: tuple[float, float, float, float] = (1.55, 1.85, 1.9, 2.3)
    """The same four times for the cross."""
    sink: tuple[float, float, float] = (0.06, 0.065, 0.075)
    """How far the pelvis is below its standing height (m) on guard, at the jab and at the cross."""
    pitch: float = 3 * _DEG
    """Forward tilt of the pelvis, rad."""
    twist: tuple[float, float] = (-10 * _DEG, 24 * _DEG)
    """Trunk twist about z at the jab and at the cross, rad."""
    lean: tuple[float, float, float] = (2 * _DEG, 3 * _DEG, 6 * _DEG)
    """Forward lean of the spine on guard, at the jab and at the cross, rad."""


PUNCH = Punch(arms=PUNCH_ARMS, stance=PUNCH_STANCE)
"""The demo punch's parameters."""


def _punch_clip(kinematics: KinematicModel, p: Punch = PUNCH, name: str = "demo_punch",
                source: str | None = None) -> MotionClip:  # fmt: skip
    """Guard, left jab, guard, right cross, guard; feet planted in a staggered stance."""
    n = round(p.duration * CLIP_FPS) + 1
    if not np.isclose(n - 1, p.duration * CLIP_FPS):
        raise ValueError(f"{name}: the duration {p.duration} s must be a whole number of {CLIP_FPS:g} Hz frames")
    t = np.arange(n) / CLIP_FPS
    jab, cross = p.jab, p.cross  # out start, out end, back start, back end
    arms, stance = p.arms, p.stance

    def punch_keys(times: tuple[float, ...], guard, hit) -> list:
        return [(0.0, 0.0, guard), (times[0], times[1], hit), (times[2], times[3], guard)]

    def two_punches(guard, jab_value, cross_value) -> np.ndarray:
        return _keyframes(t, [*punch_keys(jab, guard, jab_value), *punch_keys(cross, guard, cross_value)[1:]])

    # feet never move; the pelvis sinks a little into each punch
    flat, planted = np.zeros(n), np.linspace(0.0, 1.0, n)
    lead_foot, rear_foot = np.array(stance["lead_foot"]), np.array(stance["rear_foot"])
    feet = {
        "L": _FootTrack(np.append(lead_foot, _ankle_height("L")) + np.zeros((n, 3)), flat, planted),
        "R": _FootTrack(np.append(rear_foot, _ankle_height("R")) + np.zeros((n, 3)), flat, planted),
    }
    root_pos = np.zeros((n, 3))
    stand = rest_root_height(sk.REST_OFFSETS)
    root_pos[:, 2] = two_punches(stand - p.sink[0], stand - p.sink[1], stand - p.sink[2])
    root_mat = _rot_y(np.full(n, p.pitch))
    # arms (left convention, chest frame): guard = elbows low and out, fists up in front
    parts: dict[str, np.ndarray] = {}
    guard, guard_flex = np.array(arms["guard_dir"]), arms["guard_flex"]
    lead = np.stack([two_punches(g, h, g) for g, h in zip(guard, arms["jab_dir"])], -1)
    lead_flex = two_punches(guard_flex, arms["hit_flex"], guard_flex)
    rear = np.stack([two_punches(g, g, h) for g, h in zip(guard, arms["cross_dir"])], -1)
    rear_flex = two_punches(guard_flex, guard_flex, arms["hit_flex"])
    pole = np.array(arms["pole"])
    for side, direction, flex in (("L", lead, lead_flex), ("R", rear, rear_flex)):
        shoulder, elbow = _arm(direction, pole, flex)
        mirror = _mirror_quat if side == "R" else (lambda q: q)
        parts[f"{side}_Shoulder"] = mirror(shoulder)
        parts[f"{side}_Elbow"] = mirror(elbow)
    twist = two_punches(0.0, *p.twist)
    lean = two_punches(*p.lean)
    parts.update(_trunk(n, lean, twist, p.pitch + lean))
    # balance: the centre of mass stays over the middle of the stance, shifting a
    # little towards the lead foot into the cross; the pelvis goes where that needs it
    middle = 0.5 * (lead_foot + rear_foot) + [stance["com_ahead"], 0.0]
    target = middle + np.outer(two_punches(0.0, 0.4, 1.0), lead_foot - rear_foot) * stance["com_shift"]
    root_quat = _quat(root_mat)
    for _ in range(3):
        parts.update(_legs(root_pos, root_mat, feet, n))
        com = _com(kinematics, root_pos, root_quat, _joint_rot(parts, n))
        root_pos[:, :2] += target - com[:, :2]
    parts.update(_legs(root_pos, root_mat, feet, n))
    return _assemble(name, "punch", root_pos, root_mat, parts, kinematics, source)


def make_demo_clip(kind: str, kinematics: KinematicModel | None = None) -> MotionClip:
    """Build the demo clip of one kind (``DEMO_KINDS``): deterministic, 30 Hz, grounded."""
    if kind not in DEMO_KINDS:
        raise ValueError(f"unknown demo motion {kind!r}; choose one of {', '.join(DEMO_KINDS)}")
    km = kinematics or KinematicModel()
    return _punch_clip(km) if kind == "punch" else _gait_clip(kind, GAITS[kind], km)


@functools.lru_cache(maxsize=1)
def _cached_demo_clips() -> tuple[MotionClip, ...]:
    km = KinematicModel()
    return tuple(make_demo_clip(kind, km) for kind in DEMO_KINDS)


def demo_clips() -> list[MotionClip]:
    """All demo clips in ``DEMO_KINDS`` order (built once, then copies of the cached set)."""
    return copy.deepcopy(list(_cached_demo_clips()))


def write_demo_clips(out_dir: str | os.PathLike) -> list[Path]:
    """Save every demo clip as ``<out_dir>/demo_<kind>.npz`` (atomic writes); returns the paths."""
    out = Path(out_dir)
    return [clip.save(out / f"{clip.name}.npz") for clip in demo_clips()]
