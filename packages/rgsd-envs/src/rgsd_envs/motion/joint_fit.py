"""Hinge angles by best fit: the in-range angles whose rotation is nearest each joint rotation.

Each SMPL joint rotation is reproduced by the body's three hinges in its hinge order
(``skeleton.hinge_order``). Every rotation has two Euler solutions (``a, b, c`` and
``a + pi, pi - b, c + pi``) and each angle any multiple of 2 pi; a track takes, frame
by frame, the exact solution inside the joint ranges that is nearest the previous
frame, so there are no 2 pi jumps and no jumps between the twins when the middle
hinge passes +-90 degrees. Where no exact solution lies inside the ranges, the
angles are refined within the ranges to the rotation nearest the target (geodesic
angle), and that residual is reported per frame and joint.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.utils import rotations as rot

ORDERS = ("xyz", "yxz")
JOINTS_BY_ORDER = {o: [b - 1 for b in sk.MJ_BODY_ORDER[1:] if sk.hinge_order(sk.BODY_NAMES[b]) == o] for o in ORDERS}
"""Joints (0..22 = bodies 1..23) grouped by hinge order."""
DOF_COLS_BY_ORDER = {
    o: [sk.DOF_NAMES.index(f"{sk.BODY_NAMES[j + 1]}_{a}") for j in js for a in o] for o, js in JOINTS_BY_ORDER.items()
}
"""qpos hinge columns of those joints, (joint, hinge) in hinge order."""
JOINT_NAMES: tuple[str, ...] = sk.BODY_NAMES[1:]
"""The 23 fitted joints in SMPL order (the body each joint moves)."""

SINGULAR_COS = 1e-3
"""|cos(middle angle)| below this is gimbal lock: the exact solutions differ only in how they split one
angle between the outer hinges, so the outer angle is interpolated between the determinate frames."""
JUMP_TOLERANCE_DEG = 1.0
"""A track jumps to the other Euler solution (a 180-degree flip of two hinges) only where staying on the
continuous one would leave a residual above this."""
REFINE_SWEEPS = 60
"""Most sweeps of per-hinge exact maximisation in the in-range refinement (it stops once nothing moves)."""
_AXIS = {"x": 0, "y": 1, "z": 2}
_TWO_PI = 2.0 * np.pi


@dataclass(frozen=True)
class JointFit:
    """How well the hinge angles kept reproduce a clip's joint rotations."""

    residual: np.ndarray
    """(T, 23) geodesic angle between each kept joint rotation and the source, radians, SMPL joint order."""

    @property
    def max_deg(self) -> np.ndarray:
        """(23,) largest residual of each joint over the clip, degrees."""
        return np.rad2deg(self.residual.max(0, initial=0.0))

    @property
    def mean_deg(self) -> np.ndarray:
        """(23,) mean residual of each joint over the clip, degrees."""
        return np.rad2deg(self.residual.mean(0)) if len(self.residual) else np.zeros(sk.NUM_JOINTS)

    @property
    def worst_joint(self) -> str:
        """Name of the joint with the largest residual."""
        return JOINT_NAMES[int(self.max_deg.argmax())]

    @property
    def worst_deg(self) -> float:
        """The largest residual of any joint, degrees."""
        return float(self.max_deg.max(initial=0.0))

    def per_joint(self, decimals: int = 3) -> dict[str, dict[str, float]]:
        """``{joint: {"max": deg, "mean": deg}}`` for the 23 joints (for import_report.json)."""
        mx, mean = np.round(self.max_deg, decimals), np.round(self.mean_deg, decimals)
        return {n: {"max": float(mx[j]), "mean": float(mean[j])} for j, n in enumerate(JOINT_NAMES)}

    def describe(self, min_deg: float = 0.0, top: int = 3) -> str:
        """The joints with the largest residuals above ``min_deg``, e.g. ``"R_Wrist 12.3 deg, ..."``."""
        mx = self.max_deg
        order = [j for j in np.argsort(-mx)[:top] if mx[j] > min_deg]
        return ", ".join(f"{JOINT_NAMES[j]} {mx[j]:.1f} deg" for j in order)


def fit_hinge_angles(joint_rot: np.ndarray, ranges: np.ndarray | None = None) -> tuple[np.ndarray, JointFit]:
    """Hinge angles (T, 69) in qpos order for local rotations (T, 23, 4), SMPL order, within ``ranges``.

    ``ranges`` (69, 2), radians, defaults to ``skeleton.DOF_RANGES``. Returns the angles and the
    residual of each frame and joint.
    """
    ranges = sk.DOF_RANGES if ranges is None else np.asarray(ranges, dtype=np.float64)
    q = torch.as_tensor(np.asarray(joint_rot, dtype=np.float64))
    dof = np.zeros((q.shape[0], sk.NUM_DOFS))
    residual = np.zeros((q.shape[0], sk.NUM_JOINTS))
    for order in ORDERS:
        js, cols = JOINTS_BY_ORDER[order], DOF_COLS_BY_ORDER[order]
        target = q[:, js]
        s1, s2 = (s.numpy() for s in rot.euler_branches(target, order))
        lo, hi = (ranges[cols, k].reshape(len(js), 3) for k in (0, 1))
        mats = rot.quat_to_matrix(target).numpy()
        angles = fit_tracks(s1, s2, mats, order, lo, hi)
        dof[:, cols] = angles.reshape(len(angles), -1)
        residual[:, js] = geodesic_error(angles, target.numpy(), order)
    return dof, JointFit(residual)


def fit_tracks(
    s1: np.ndarray, s2: np.ndarray, target: np.ndarray, order: str, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """Angles (T, J, 3) within [lo, hi] (J, 3) from both Euler solutions (T, J, 3) of rotations ``target``
    (T, J, 3, 3): the exact in-range solution nearest the previous frame, else the in-range best fit."""
    track, feasible = _select(s1, s2, target, order, lo, hi)
    locked = np.abs(np.cos(track[..., 1])) < SINGULAR_COS
    if locked.any():
        track = _interpolate_locked(track, locked, target, order)
        feasible &= ~locked | ((track >= lo) & (track <= hi)).all(-1)
    out = track.copy()
    bad = ~feasible
    if bad.any():
        j_idx = np.nonzero(bad)[1]
        out[bad] = refine_in_range(track[bad], _twin(track[bad]), target[bad], order, lo[j_idx], hi[j_idx])
    return out


def _twin(e: np.ndarray) -> np.ndarray:
    """The other Euler solution of the same rotations."""
    return np.stack((e[..., 0] + np.pi, np.pi - e[..., 1], e[..., 2] + np.pi), -1)


def _near(x: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The representative x + 2 pi k nearest ``target``."""
    return x + _TWO_PI * np.round((target - x) / _TWO_PI)


def _select(
    s1: np.ndarray, s2: np.ndarray, target: np.ndarray, order: str, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The exact-solution track (T, J, 3) and whether each frame's solution lies in range (T, J).

    A Python loop over frames (batched over joints and both solutions): each frame's choice
    depends on the previous frame's. The track follows the solution nearest its previous frame
    (the continuous one), taking its in-range 2 pi multiple where there is one. It jumps to the
    other solution only where that one is in range and staying would leave a residual over
    ``JUMP_TOLERANCE_DEG`` (the ranges then force the jump); otherwise it stays, and out of
    range the refinement later moves it to the nearest in-range rotation.
    """
    n, nj = s1.shape[:2]
    centre = 0.5 * (lo + hi)
    track = np.empty_like(s1)
    feasible = np.zeros((n, nj), dtype=bool)
    prev = centre
    singular = np.abs(np.cos(s1[..., 1])) < SINGULAR_COS
    joints = np.arange(nj)
    tol = np.deg2rad(JUMP_TOLERANCE_DEG)
    for t in range(n):
        cands = np.stack((s1[t], s2[t]))  # (2, J, 3)
        if t > 0 and singular[t].any():
            cands[:, singular[t]] = _hold_outer(cands[:, singular[t]], prev[singular[t]], target[t, singular[t]], order)
        by_prev = _near(cands, prev)
        rep = np.where((by_prev >= lo) & (by_prev <= hi), by_prev, _near(cands, centre))
        ok = ((rep >= lo) & (rep <= hi)).all(-1)  # (2, J): an in-range 2 pi multiple exists
        stay = np.abs(by_prev - prev).sum(-1).argmin(0) if t > 0 else np.where(ok[0] | ~ok[1], 0, 1)
        other = 1 - stay
        stay_ok, other_ok = ok[stay, joints], ok[other, joints]
        jump = ~stay_ok & other_ok
        if jump.any():  # is staying (clipped into the ranges) still within the tolerance?
            kept = np.clip(by_prev[stay, joints][jump], lo[jump], hi[jump])
            jump[jump] = _matrix_angle(_euler_matrix(kept, order), target[t, jump]) > tol
        pick = np.where(jump, other, stay)
        feasible[t] = ok[pick, joints]
        track[t] = np.where(feasible[t][:, None], rep[pick, joints], by_prev[pick, joints])
        prev = track[t]
    return track, feasible


def _hold_outer(cands: np.ndarray, prev: np.ndarray, target: np.ndarray, order: str) -> np.ndarray:
    """At gimbal lock: the exact solutions (2, K, 3) re-split with the outer angle held at ``prev``."""
    out = np.empty_like(cands)
    for k in range(2):
        e = cands[k].copy()
        e[:, 0] = prev[:, 0]
        out[k] = _solve_inner(e, target, order)
    return out


def _solve_inner(e: np.ndarray, target: np.ndarray, order: str) -> np.ndarray:
    """The middle and inner angles (K, 3) that best reproduce ``target`` given the outer one (exact at
    gimbal lock up to ~cos(middle) times the shift of the outer angle)."""
    e = e.copy()
    for _ in range(3):
        for i in (1, 2):
            e[:, i] = _best_hinge(e, target, order, i, None, None)
    return e


def _interpolate_locked(track: np.ndarray, locked: np.ndarray, target: np.ndarray, order: str) -> np.ndarray:
    """Frames at gimbal lock (T, J) take the outer angle interpolated between the nearest determinate
    frames (the rotation does not fix it there), then the other two angles that reproduce the rotation."""
    out = track.copy()
    frames = np.arange(len(track))
    for j in np.nonzero(locked.any(0) & ~locked.all(0))[0]:  # a Python loop over the few joints locked at all
        free = ~locked[:, j]
        out[locked[:, j], j, 0] = np.interp(frames[locked[:, j]], frames[free], track[free, j, 0])
        out[locked[:, j], j] = _solve_inner(out[locked[:, j], j], target[locked[:, j], j], order)
    return out


def _axis_matrix(axis: str, angle: np.ndarray) -> np.ndarray:
    """Rotation matrices (..., 3, 3) by ``angle`` about a coordinate axis."""
    c, s = np.cos(angle), np.sin(angle)
    i = _AXIS[axis]
    j, k = (i + 1) % 3, (i + 2) % 3
    m = np.zeros(angle.shape + (3, 3))
    m[..., i, i] = 1.0
    m[..., j, j] = m[..., k, k] = c
    m[..., k, j] = s
    m[..., j, k] = -s
    return m


def _best_hinge(
    e: np.ndarray, target: np.ndarray, order: str, i: int, lo: np.ndarray | None, hi: np.ndarray | None
) -> np.ndarray:
    """Hinge ``i``'s angle (K,) that brings R(e) nearest ``target`` (K, 3, 3) with the other two held,
    inside [lo, hi] when given (otherwise the representative nearest its current value).

    trace(target^T R) is r cos(angle - phi) + const in one hinge's angle, so the best angle is phi,
    or where phi lies outside the range, the end of the range nearer phi on the circle.
    """
    eye = np.broadcast_to(np.eye(3), target.shape)
    left = eye.copy()
    for k in range(i):
        left = left @ _axis_matrix(order[k], e[:, k])
    right = eye.copy()
    for k in range(i + 1, 3):
        right = right @ _axis_matrix(order[k], e[:, k])
    m = right @ np.swapaxes(target, -1, -2) @ left  # trace(target^T L R_i R) = trace(M R_i)
    a = _AXIS[order[i]]
    b, c = (a + 1) % 3, (a + 2) % 3
    alpha = np.trace(m, axis1=-2, axis2=-1) - m[:, a, a]
    beta = m[:, b, c] - m[:, c, b]
    phi = np.arctan2(beta, alpha)
    if lo is None:
        return _near(phi, e[:, i])
    lo_i, hi_i = lo[:, i], hi[:, i]
    mid = _near(phi, 0.5 * (lo_i + hi_i))
    inside = (mid >= lo_i) & (mid <= hi_i)
    d_lo = np.abs(_near(phi, lo_i) - lo_i)
    d_hi = np.abs(_near(phi, hi_i) - hi_i)
    return np.where(inside, mid, np.where(d_lo <= d_hi, lo_i, hi_i))


def refine_in_range(
    start: np.ndarray,
    other: np.ndarray,
    target: np.ndarray,
    order: str,
    lo: np.ndarray,
    hi: np.ndarray,
    stay_tolerance: float | None = None,
) -> np.ndarray:
    """Angles (K, 3) in [lo, hi] (K, 3) whose rotation is nearest ``target`` (K, 3, 3).

    Batched coordinate ascent, each step the exact best angle of one hinge within its range,
    from several starts: ``start`` (the continuous track) and ``other`` (its twin solution)
    moved into the range, the range's centre and its 8 corners (coordinate ascent can stop in
    a local optimum). The result from ``start`` is kept unless another start is better by more
    than ``stay_tolerance`` radians (default ``JUMP_TOLERANCE_DEG``): continuity first.
    Written by hand because scipy's bounded minimisers solve one problem at a time, where this
    closed-form step runs every frame and joint at once.
    """
    tol = np.deg2rad(JUMP_TOLERANCE_DEG) if stay_tolerance is None else stay_tolerance
    corners = [np.where(np.array(c, dtype=bool), hi, lo) for c in np.ndindex(2, 2, 2)]
    results = [_ascend(s, target, order, lo, hi) for s in [start, other, 0.5 * (lo + hi), *corners]]
    errs = np.stack([_matrix_angle(_euler_matrix(e, order), target) for e in results])  # (starts, K)
    k = 1 + errs[1:].argmin(0)
    alt = np.stack(results)[k, np.arange(len(k))]
    switch = errs[k, np.arange(len(k))] < errs[0] - max(tol, 1e-9)
    return np.where(switch[:, None], alt, results[0])


def _ascend(s: np.ndarray, target: np.ndarray, order: str, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Coordinate ascent from ``s`` moved into [lo, hi] (see ``refine_in_range``)."""
    e = np.clip(_near(s, 0.5 * (lo + hi)), lo, hi)
    active = np.arange(len(e))  # problems still moving: converged ones leave the batch
    for _ in range(REFINE_SWEEPS):
        sub, before = e[active], e[active]
        for i in range(3):
            sub[:, i] = _best_hinge(sub, target[active], order, i, lo[active], hi[active])
        e[active] = sub
        active = active[np.abs(sub - before).max(-1) >= 1e-12]
        if active.size == 0:
            break
    return e


def _euler_matrix(e: np.ndarray, order: str) -> np.ndarray:
    """R = R_order[0](e0) R_order[1](e1) R_order[2](e2), (..., 3, 3)."""
    m = _axis_matrix(order[0], e[..., 0])
    for k in (1, 2):
        m = m @ _axis_matrix(order[k], e[..., k])
    return m


def _matrix_angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Geodesic angle between rotation matrices (radians)."""
    cos = 0.5 * (np.einsum("...ij,...ij->...", a, b) - 1.0)
    return np.arccos(np.clip(cos, -1.0, 1.0))


def geodesic_error(angles: np.ndarray, target_quat: np.ndarray, order: str) -> np.ndarray:
    """Geodesic angle (radians) between the rotations of hinge angles (..., 3) and quaternions (..., 4)."""
    q = rot.quat_from_euler(torch.as_tensor(angles), order)
    d = rot.quat_mul(rot.quat_conj(q), torch.as_tensor(target_quat))
    return (2.0 * torch.atan2(d[..., 1:].norm(dim=-1), d[..., 0].abs())).numpy()
