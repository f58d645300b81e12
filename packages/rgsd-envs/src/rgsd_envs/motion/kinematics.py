"""Turn a root trajectory and local joint rotations into a complete MotionClip.

Shared by the AMASS importer and the built-in demo motions: resampling to
30 Hz, hinge angles from rotations, MuJoCo forward kinematics, grounding and
velocities all happen here, once.
"""

from __future__ import annotations

import logging

import mujoco
import numpy as np
import torch

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.humanoid.mjcf import HumanoidConfig, load_model
from rgsd_envs.motion.clip import CLIP_FPS, MotionClip
from rgsd_envs.motion.joint_fit import DOF_COLS_BY_ORDER, JOINTS_BY_ORDER, ORDERS, JointFit, fit_hinge_angles
from rgsd_envs.utils import rotations as rot

log = logging.getLogger(__name__)


def _t(x: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x, dtype=np.float64))


def dof_from_joint_rot(joint_rot: np.ndarray) -> np.ndarray:
    """Hinge angles (..., 69) in qpos order from local rotations (..., 23, 4) in SMPL order, frame by
    frame with no ranges (``joint_fit.fit_hinge_angles`` fits whole tracks within the ranges)."""
    q = _t(joint_rot)
    out = torch.zeros(q.shape[:-2] + (sk.NUM_DOFS,), dtype=q.dtype)
    for order in ORDERS:
        e = rot.euler_from_quat(q[..., JOINTS_BY_ORDER[order], :], order)
        out[..., DOF_COLS_BY_ORDER[order]] = e.reshape(e.shape[:-2] + (-1,))
    return out.numpy()


def joint_rot_from_dof(dof_pos: np.ndarray) -> np.ndarray:
    """Local rotations (..., 23, 4) in SMPL order from hinge angles (..., 69)."""
    d = _t(dof_pos)
    out = torch.zeros(d.shape[:-1] + (sk.NUM_JOINTS, 4), dtype=d.dtype)
    for order in ORDERS:
        js = JOINTS_BY_ORDER[order]
        e = d[..., DOF_COLS_BY_ORDER[order]].reshape(d.shape[:-1] + (len(js), 3))
        out[..., js, :] = rot.quat_normalize(rot.quat_from_euler(e, order))
    return out.numpy()


def resample(
    root_pos: np.ndarray, root_rot: np.ndarray, joint_rot: np.ndarray, src_fps: float, dst_fps: float = CLIP_FPS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Resample a trajectory to dst_fps: positions lerp, rotations slerp; a ValueError where it lasts less than one
    dst_fps step (it would keep a single frame, which has no velocities)."""
    n = root_pos.shape[0]
    duration = (n - 1) / src_fps
    m = int(np.floor(duration * dst_fps + 1e-6)) + 1
    if m < 2:
        raise ValueError(
            f"a motion of {n} frames at {src_fps:g} Hz lasts {duration:.4g} s, shorter than one {dst_fps:g} Hz step; "
            f"resampling keeps fewer than 2 frames"
        )
    t = np.arange(m) / dst_fps * src_fps
    i0 = np.minimum(np.floor(t).astype(int), n - 1)
    i1 = np.minimum(i0 + 1, n - 1)
    a = (t - i0)[:, None]
    pos = (1 - a) * root_pos[i0] + a * root_pos[i1]
    a_t = _t(a)
    rr = rot.quat_slerp(_t(root_rot[i0]), _t(root_rot[i1]), a_t).numpy()
    jr = rot.quat_slerp(_t(joint_rot[i0]), _t(joint_rot[i1]), a_t[:, None]).numpy()
    return pos, rr, jr


class KinematicModel:
    """The humanoid's MjModel for kinematics only: FK, body velocities, lowest points."""

    def __init__(self, offsets: np.ndarray | None = None):
        off = sk.REST_OFFSETS if offsets is None else np.asarray(offsets, dtype=float)
        self.offsets = off
        self.model = load_model(HumanoidConfig(offsets=None if offsets is None else tuple(map(tuple, off))))
        self.data = mujoco.MjData(self.model)
        m = self.model
        # SMPL index of each geom's body (-1 for world geoms)
        self._geom_smpl = np.array([sk.MJ_BODY_ORDER[b - 1] if b > 0 else -1 for b in m.geom_bodyid])

    def forward(self, qpos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Body positions (T,24,3), rotations (T,24,4) in SMPL order and lowest geom z per body (T,24)."""
        m, d = self.model, self.data
        n = qpos.shape[0]
        pos = np.zeros((n, sk.NUM_BODIES, 3))
        quat = np.zeros((n, sk.NUM_BODIES, 4))
        low = np.zeros((n, sk.NUM_BODIES))
        for i in range(n):
            d.qpos[:] = qpos[i]
            mujoco.mj_kinematics(m, d)
            pos[i] = d.xpos[sk.MJ_BODY_IDS]
            quat[i] = d.xquat[sk.MJ_BODY_IDS]
            low[i] = self.lowest_per_body()
        return pos, quat, low

    def lowest_per_body(self) -> np.ndarray:
        """Lowest z of each body's geoms (24,) at the data's current kinematics."""
        m, d = self.model, self.data
        z = geom_lowest_z(m, d.geom_xpos, d.geom_xmat)
        out = np.full(sk.NUM_BODIES, np.inf)
        body_geoms = self._geom_smpl >= 0
        np.minimum.at(out, self._geom_smpl[body_geoms], z[body_geoms])
        return out

    def body_velocities(self, qpos: np.ndarray, qvel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World linear and angular velocities of the body origins (T,24,3) each, SMPL order.

        ``mjOBJ_XBODY``: the velocity of the body frame origin (``mjOBJ_BODY`` would give
        its centre of mass), matching ``body_pos`` and the simulator backends.
        """
        m, d = self.model, self.data
        n = qpos.shape[0]
        lin = np.zeros((n, sk.NUM_BODIES, 3))
        ang = np.zeros((n, sk.NUM_BODIES, 3))
        res = np.zeros(6)
        for i in range(n):
            d.qpos[:] = qpos[i]
            d.qvel[:] = qvel[i]
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            mujoco.mj_comVel(m, d)
            for b in range(sk.NUM_BODIES):
                mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_XBODY, int(sk.MJ_BODY_IDS[b]), res, 0)
                ang[i, b] = res[:3]
                lin[i, b] = res[3:]
        return lin, ang


def geom_lowest_z(model: mujoco.MjModel, geom_xpos: np.ndarray, geom_xmat: np.ndarray) -> np.ndarray:
    """Lowest world z of each geom (boxes, spheres, capsules; planes give +inf)."""
    size = model.geom_size
    gtype = model.geom_type
    zc = geom_xpos[..., 2]
    rz = np.asarray(geom_xmat).reshape(geom_xmat.shape[:-1] + (3, 3))[..., 2, :]  # z row: world z of local axes
    box = zc - (np.abs(rz) * size).sum(-1)
    sphere = zc - size[:, 0]
    capsule = zc - np.abs(rz[..., 2]) * size[:, 1] - size[:, 0]
    out = np.full(zc.shape, np.inf)
    out = np.where(gtype == mujoco.mjtGeom.mjGEOM_BOX, box, out)
    out = np.where(gtype == mujoco.mjtGeom.mjGEOM_SPHERE, sphere, out)
    out = np.where(gtype == mujoco.mjtGeom.mjGEOM_CAPSULE, capsule, out)
    return out


def _gradient(x: np.ndarray, dt: float) -> np.ndarray:
    return np.gradient(x, dt, axis=0, edge_order=1)


def _root_ang_vel(root_rot: np.ndarray, dt: float) -> np.ndarray:
    q = _t(root_rot)
    w = torch.zeros(q.shape[0], 3, dtype=q.dtype)
    w[1:-1] = rot.angular_velocity(q[:-2], q[2:], 2 * dt)
    w[0] = rot.angular_velocity(q[0], q[1], dt)
    w[-1] = rot.angular_velocity(q[-2], q[-1], dt)
    return w.numpy()


RESIDUAL_LOG_DEG = 0.01
"""Joint residuals above this (degrees) are logged while a clip is built; smaller ones are rounding."""


def clip_from_rotations(
    name: str,
    category: str,
    root_pos: np.ndarray,
    root_rot: np.ndarray,
    joint_rot: np.ndarray,
    fps: float,
    source: str,
    offsets: np.ndarray | None = None,
    ground: bool = True,
    kinematics: KinematicModel | None = None,
) -> MotionClip:
    """Build a complete 30 Hz MotionClip from root pose and local joint rotations (see
    ``clip_and_fit_from_rotations``, which also gives the residual of each joint)."""
    return clip_and_fit_from_rotations(
        name, category, root_pos, root_rot, joint_rot, fps, source, offsets, ground, kinematics
    )[0]


def clip_and_fit_from_rotations(
    name: str,
    category: str,
    root_pos: np.ndarray,
    root_rot: np.ndarray,
    joint_rot: np.ndarray,
    fps: float,
    source: str,
    offsets: np.ndarray | None = None,
    ground: bool = True,
    kinematics: KinematicModel | None = None,
) -> tuple[MotionClip, JointFit]:
    """Build a complete 30 Hz MotionClip from root pose and local joint rotations.

    ``joint_rot`` is (T, 23, 4), bodies 1..23 in SMPL order, in our z-up frame.
    Hinge angles are fitted within the joint ranges (``joint_fit.fit_hinge_angles``:
    exact where the ranges allow, continuous from frame to frame, else the in-range
    rotation nearest the source); residuals over ``RESIDUAL_LOG_DEG`` are logged with the
    clip and joint, and all are returned as a JointFit. With ``ground``, the clip is
    shifted so that its lowest foot point over the whole clip touches the floor.
    """
    km = kinematics or KinematicModel(offsets)
    root_pos = np.asarray(root_pos, dtype=np.float64)
    root_rot = rot.quat_normalize(_t(root_rot)).numpy()
    joint_rot = rot.quat_normalize(_t(joint_rot)).numpy()
    if not np.isclose(fps, CLIP_FPS):
        root_pos, root_rot, joint_rot = resample(root_pos, root_rot, joint_rot, fps)
    dof, fit = fit_hinge_angles(joint_rot)
    if fit.worst_deg > RESIDUAL_LOG_DEG:
        log.warning(
            "clip %s: no hinge angles within the joint ranges reproduce these rotations; residual %s",
            name,
            fit.describe(RESIDUAL_LOG_DEG),
        )
    joint_rot = joint_rot_from_dof(dof)
    qpos = np.concatenate([root_pos, root_rot, dof], axis=1)
    body_pos, body_rot, lowest = km.forward(qpos)
    if ground:
        feet = lowest[:, list(sk.FOOT_BODY_IDS)].min()
        qpos[:, 2] -= feet
        body_pos[..., 2] -= feet
    dt = 1.0 / CLIP_FPS
    root_lin_vel = _gradient(qpos[:, :3], dt)
    root_ang_vel = _root_ang_vel(qpos[:, 3:7], dt)
    dof_vel = _gradient(dof, dt)
    local_w = torch.as_tensor(root_ang_vel)
    local_w = rot.quat_rotate_inv(_t(qpos[:, 3:7]), local_w).numpy()
    qvel = np.concatenate([root_lin_vel, local_w, dof_vel], axis=1)
    body_lin_vel, body_ang_vel = km.body_velocities(qpos, qvel)
    return MotionClip(
        name=name,
        category=category,
        source_fps=float(fps),
        source=source,
        root_pos=qpos[:, :3].copy(),
        root_rot=qpos[:, 3:7].copy(),
        joint_rot=joint_rot,
        dof_pos=dof,
        root_lin_vel=root_lin_vel,
        root_ang_vel=root_ang_vel,
        dof_vel=dof_vel,
        body_pos=body_pos,
        body_rot=body_rot,
        body_lin_vel=body_lin_vel,
        body_ang_vel=body_ang_vel,
        body_offsets=km.offsets.copy(),
    ), fit
