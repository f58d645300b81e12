"""Replay checks for clips: kinematic sanity and how long open-loop PD replay stays up.

- ``kinematic_report``: MuJoCo FK of a clip's ``qpos``, frame by frame: where the
  feet and every body are against the floor, head above pelvis, foot sliding.
- ``pd_replay``: physics on, start from the clip's frame-0 state, each 30 Hz
  control step set the PD targets to that frame's hinge angles and step; measure
  how long the humanoid stays upright (pelvis above 0.4 m, head above pelvis,
  no simulator instability). There is no balance controller: this measures how
  gentle a clip is, not whether a policy can track it.
- ``pd_standing``: the rest pose held by PD from the rest state.

Plain ``mujoco.MjData`` loops: an offline tool, not the training hot path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator

import mujoco
import numpy as np

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.humanoid.mjcf import CONTROL_HZ, HumanoidConfig, load_model, physics_substeps
from rgsd_envs.motion.clip import MotionClip
from rgsd_envs.motion.kinematics import KinematicModel

UPRIGHT_PELVIS_Z = 0.4
"""Below this pelvis height (m) the humanoid counts as fallen."""
CONTACT_HEIGHT = 0.01
"""A foot body whose lowest point is within this height (m) counts as on the floor."""
TRACKING_WINDOW = 0.5
"""Seconds at the start of a replay over which the tracking error is averaged."""


@dataclasses.dataclass
class KinematicReport:
    """Per-frame kinematic facts of one clip (FK of its ``qpos`` on the clip's body)."""

    name: str
    lowest_foot: float
    """Lowest foot point over the whole clip, m (0 for a grounded clip)."""
    foot_lowest: np.ndarray
    """(T,) lowest point of the feet (ankles and toes) per frame, m."""
    body_lowest: np.ndarray
    """(T,) lowest point of any body per frame, m."""
    head_above_pelvis: np.ndarray
    """(T,) head height minus pelvis height per frame, m."""
    stance_foot_speed: np.ndarray
    """Horizontal speeds (m/s) of planted foot geoms, one per (frame pair, foot geom)
    in which some corner of the geom's box stays within ``CONTACT_HEIGHT`` of the
    floor: the speed of the slowest such corner. A foot that rolls about its heel
    or toe scores 0; one that slides scores its sliding speed."""

    @property
    def skating(self) -> float:
        """Mean horizontal speed of planted feet, m/s (0 when nothing is planted)."""
        return float(self.stance_foot_speed.mean()) if self.stance_foot_speed.size else 0.0


_CORNER_SIGNS = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=float)


def _foot_geoms(model: mujoco.MjModel) -> np.ndarray:
    """Geom ids of the feet (ankle and toe bodies); they must be boxes."""
    foot_bodies = sk.MJ_BODY_IDS[list(sk.FOOT_BODY_IDS)]
    geoms = np.flatnonzero(np.isin(model.geom_bodyid, foot_bodies))
    if not geoms.size or (model.geom_type[geoms] != mujoco.mjtGeom.mjGEOM_BOX).any():
        raise ValueError("foot sliding is measured on box-shaped foot geoms; this model's feet are not boxes")
    return geoms


def kinematic_report(clip: MotionClip, kinematics: KinematicModel | None = None) -> KinematicReport:
    """Replay a clip kinematically and report floor contact, penetration, posture and foot sliding."""
    km = kinematics or KinematicModel(clip.body_offsets)
    if not np.allclose(km.offsets, clip.body_offsets):
        raise ValueError(f"clip {clip.name}: the kinematic model is for another body (body_offsets differ)")
    m, d = km.model, km.data
    geoms = _foot_geoms(m)
    local = _CORNER_SIGNS[None] * m.geom_size[geoms][:, None]  # (G, 8, 3)
    n = clip.num_frames
    pos = np.zeros((n, sk.NUM_BODIES, 3))
    lowest = np.zeros((n, sk.NUM_BODIES))
    corners = np.zeros((n, len(geoms), 8, 3))
    for i, qpos in enumerate(clip.qpos):
        d.qpos[:] = qpos
        mujoco.mj_kinematics(m, d)
        pos[i] = d.xpos[sk.MJ_BODY_IDS]
        lowest[i] = km.lowest_per_body()
        rot = d.geom_xmat[geoms].reshape(-1, 3, 3)
        corners[i] = d.geom_xpos[geoms][:, None] + np.einsum("gij,gkj->gki", rot, local)
    down = corners[..., 2] < CONTACT_HEIGHT
    planted = down[1:] & down[:-1]  # (T-1, G, 8)
    speed = np.linalg.norm(np.diff(corners[..., :2], axis=0), axis=-1) * clip.fps
    slowest = np.where(planted, speed, np.inf).min(axis=-1)  # (T-1, G)
    foot_low = lowest[:, list(sk.FOOT_BODY_IDS)]
    return KinematicReport(
        name=clip.name,
        lowest_foot=float(foot_low.min()),
        foot_lowest=foot_low.min(axis=1),
        body_lowest=lowest.min(axis=1),
        head_above_pelvis=pos[:, sk.HEAD_ID, 2] - pos[:, sk.ROOT_ID, 2],
        stance_foot_speed=slowest[np.isfinite(slowest)],
    )


@dataclasses.dataclass
class ReplayResult:
    """Outcome of one PD replay (or PD standing) run."""

    seconds: float
    """Simulated time the humanoid stayed upright, s."""
    completed: bool
    """True if it stayed upright for the whole requested time."""
    unstable: bool
    """True if the simulator reported an instability (bad qacc/qpos/qvel) or state went non-finite."""
    warnings: int
    """Number of MuJoCo warnings raised during the run."""
    tracking_error: float
    """Mean body-position error to the reference (m) over the first ``TRACKING_WINDOW``
    seconds while upright (NaN without a reference or before the first control step)."""
    root_drift: float
    """Horizontal distance of the pelvis from its reference at the end (m)."""
    us_per_control_step: float
    """Wall time per 30 Hz control step, microseconds (physics only)."""


@contextlib.contextmanager
def capture_mujoco_warnings() -> Iterator[list[str]]:
    """Collect MuJoCo's warning texts instead of printing them (and writing MUJOCO_LOG.TXT)."""
    texts: list[str] = []
    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(texts.append)
    try:
        yield texts
    finally:
        mujoco.set_mju_user_warning(previous)


UNSTABLE_WARNINGS = (
    mujoco.mjtWarning.mjWARN_BADQACC,
    mujoco.mjtWarning.mjWARN_BADQPOS,
    mujoco.mjtWarning.mjWARN_BADQVEL,
)
"""MuJoCo warnings that mean the simulation blew up (and MuJoCo reset the state)."""


def _run_pd(
    model: mujoco.MjModel,
    qpos0: np.ndarray,
    qvel0: np.ndarray,
    targets: np.ndarray,
    ref_body_pos: np.ndarray,
) -> ReplayResult:
    """Step the PD-controlled humanoid: ``targets[k]`` is held during control step k.

    ``ref_body_pos[k]`` (SMPL order) is the reference after control step k.
    """
    data = mujoco.MjData(model)
    data.qpos[:] = qpos0
    data.qvel[:] = qvel0
    mujoco.mj_forward(model, data)
    n_sub = physics_substeps(float(model.opt.timestep))
    dt = 1.0 / CONTROL_HZ
    window = round(TRACKING_WINDOW * CONTROL_HZ)
    errors: list[float] = []
    upright_steps, unstable, elapsed = 0, False, 0.0
    with capture_mujoco_warnings():
        for k in range(len(targets)):
            data.ctrl[:] = targets[k]
            start = time.perf_counter()
            for _ in range(n_sub):
                mujoco.mj_step(model, data)
            elapsed += time.perf_counter() - start
            unstable = any(data.warning[w].number for w in UNSTABLE_WARNINGS) or not np.isfinite(data.qpos).all()
            pelvis_z, head_z = data.xpos[sk.MJ_BODY_IDS[sk.ROOT_ID], 2], data.xpos[sk.MJ_BODY_IDS[sk.HEAD_ID], 2]
            if unstable or pelvis_z <= UPRIGHT_PELVIS_Z or head_z <= pelvis_z:
                break
            upright_steps = k + 1
            if k < window:
                err = np.linalg.norm(data.xpos[sk.MJ_BODY_IDS] - ref_body_pos[k], axis=-1)
                errors.append(float(err.mean()))
        warnings = int(sum(data.warning[w].number for w in range(len(data.warning))))
        drift = float(np.linalg.norm(data.qpos[:2] - ref_body_pos[min(k, len(ref_body_pos) - 1), sk.ROOT_ID, :2]))
    steps_run = max(k + 1, 1)
    return ReplayResult(
        seconds=upright_steps * dt,
        completed=upright_steps == len(targets),
        unstable=bool(unstable),
        warnings=warnings,
        tracking_error=float(np.mean(errors)) if errors else float("nan"),
        root_drift=drift if np.isfinite(drift) else float("inf"),
        us_per_control_step=1e6 * elapsed / steps_run,
    )


def pd_replay(clip: MotionClip, cfg: HumanoidConfig | None = None, max_seconds: float | None = None) -> ReplayResult:
    """Open-loop PD replay of a clip from its frame-0 state; see the module docstring.

    Control step k holds ``clip.dof_pos[k]`` as the PD target. It runs for the
    clip's duration, or ``max_seconds`` (beyond the clip's end the last frame's
    targets are held). ``cfg`` defaults to the project's model (``HumanoidConfig()``),
    on the clip's body.
    """
    cfg = cfg or HumanoidConfig()
    if cfg.offsets is None and not np.allclose(clip.body_offsets, sk.REST_OFFSETS):
        cfg = dataclasses.replace(cfg, offsets=tuple(map(tuple, clip.body_offsets)))
    steps = clip.num_frames - 1 if max_seconds is None else round(max_seconds * CONTROL_HZ)
    if steps < 1:
        raise ValueError(f"clip {clip.name}: nothing to replay ({clip.num_frames} frames, max_seconds={max_seconds})")
    last = clip.num_frames - 1
    targets = clip.dof_pos[np.minimum(np.arange(steps), last)]
    ref = clip.body_pos[np.minimum(np.arange(1, steps + 1), last)]
    return _run_pd(load_model(cfg), clip.qpos[0], clip.qvel[0], targets, ref)


def pd_replay_seconds(clip: MotionClip, cfg: HumanoidConfig | None = None, max_seconds: float | None = None) -> float:
    """Seconds the humanoid stays upright under open-loop PD replay of the clip."""
    return pd_replay(clip, cfg, max_seconds).seconds


def pd_standing(seconds: float = 10.0, cfg: HumanoidConfig | None = None) -> ReplayResult:
    """Hold the rest pose (all hinge targets zero) by PD from the rest state for ``seconds``."""
    model = load_model(cfg or HumanoidConfig())
    steps = round(seconds * CONTROL_HZ)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    rest_body_pos = np.broadcast_to(data.xpos[sk.MJ_BODY_IDS], (steps, sk.NUM_BODIES, 3))
    return _run_pd(model, model.qpos0.copy(), np.zeros(model.nv), np.zeros((steps, model.nu)), rest_body_pos)


def pd_standing_seconds(seconds: float = 10.0, cfg: HumanoidConfig | None = None) -> float:
    """Seconds the PD-held rest pose stays upright (at most ``seconds``)."""
    return pd_standing(seconds, cfg).seconds
