"""Batched rotation maths in torch; quaternions are (w, x, y, z) as in MuJoCo.

Every function broadcasts over leading dimensions and runs on any device and
float dtype, so the same code serves offline motion processing (float64, CPU)
and the environments' hot path (float32, CPU or GPU).
"""

from __future__ import annotations

import math

import torch

Tensor = torch.Tensor


def quat_mul(a: Tensor, b: Tensor) -> Tensor:
    """Hamilton product a * b."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        (
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ),
        dim=-1,
    )


def quat_conj(q: Tensor) -> Tensor:
    """Conjugate (the inverse of a unit quaternion)."""
    return q * q.new_tensor([1.0, -1.0, -1.0, -1.0])


def quat_normalize(q: Tensor) -> Tensor:
    """Unit quaternion with non-negative w (one canonical sign)."""
    q = q / q.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return torch.where(q[..., :1] < 0, -q, q)


def quat_rotate(q: Tensor, v: Tensor) -> Tensor:
    """Rotate vectors v (..., 3) by unit quaternions q (..., 4)."""
    w = q[..., :1]
    u = q[..., 1:]
    t = 2.0 * torch.linalg.cross(u, v, dim=-1)
    return v + w * t + torch.linalg.cross(u, t, dim=-1)


def quat_rotate_inv(q: Tensor, v: Tensor) -> Tensor:
    """Rotate vectors v by the inverse of unit quaternions q."""
    return quat_rotate(quat_conj(q), v)


def quat_from_axis_angle(aa: Tensor) -> Tensor:
    """Quaternions from axis-angle vectors (..., 3) (angle = norm)."""
    angle = aa.norm(dim=-1, keepdim=True)
    half = 0.5 * angle
    # sin(x/2)/x, with its limit 1/2 near zero
    k = torch.where(angle > 1e-8, torch.sin(half) / angle.clamp_min(1e-8), 0.5 - angle**2 / 48.0)
    return torch.cat((torch.cos(half), aa * k), dim=-1)


def quat_to_axis_angle(q: Tensor) -> Tensor:
    """Axis-angle vectors (..., 3), angle in [0, pi], from unit quaternions."""
    q = quat_normalize(q)
    s = q[..., 1:].norm(dim=-1, keepdim=True)
    angle = 2.0 * torch.atan2(s, q[..., :1])
    k = torch.where(s > 1e-8, angle / s.clamp_min(1e-8), 2.0 + 0.0 * s)
    return q[..., 1:] * k


def quat_to_matrix(q: Tensor) -> Tensor:
    """Rotation matrices (..., 3, 3) from unit quaternions."""
    w, x, y, z = q.unbind(-1)
    return torch.stack(
        (
            1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
        ),
        dim=-1,
    ).reshape(q.shape[:-1] + (3, 3))  # fmt: skip


def matrix_to_quat(m: Tensor) -> Tensor:
    """Unit quaternions (w >= 0) from rotation matrices (..., 3, 3)."""
    m00, m11, m22 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    # four candidate forms; use the best-conditioned one per element
    cands = torch.stack(
        (
            torch.stack((1 + m00 + m11 + m22, m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1]), -1),
            torch.stack((m[..., 2, 1] - m[..., 1, 2], 1 + m00 - m11 - m22, m[..., 0, 1] + m[..., 1, 0], m[..., 0, 2] + m[..., 2, 0]), -1),
            torch.stack((m[..., 0, 2] - m[..., 2, 0], m[..., 0, 1] + m[..., 1, 0], 1 - m00 + m11 - m22, m[..., 1, 2] + m[..., 2, 1]), -1),
            torch.stack((m[..., 1, 0] - m[..., 0, 1], m[..., 0, 2] + m[..., 2, 0], m[..., 1, 2] + m[..., 2, 1], 1 - m00 - m11 + m22), -1),
        ),
        dim=-2,
    )  # fmt: skip
    diag = torch.stack((1 + m00 + m11 + m22, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22), -1)
    best = diag.argmax(-1, keepdim=True)
    q = torch.gather(cands, -2, best.unsqueeze(-1).expand(*best.shape[:-1], 1, 4)).squeeze(-2)
    return quat_normalize(q)


def quat_slerp(q0: Tensor, q1: Tensor, t: Tensor) -> Tensor:
    """Spherical interpolation from q0 to q1 at fractions t (..., 1) in [0, 1]."""
    dot = (q0 * q1).sum(-1, keepdim=True)
    q1 = torch.where(dot < 0, -q1, q1)
    dot = dot.abs().clamp(max=1.0)
    theta = torch.acos(dot)
    sin_theta = torch.sin(theta)
    near = sin_theta < 1e-6
    safe = torch.where(near, torch.ones_like(sin_theta), sin_theta)
    w0 = torch.where(near, 1.0 - t, torch.sin((1.0 - t) * theta) / safe)
    w1 = torch.where(near, t, torch.sin(t * theta) / safe)
    return quat_normalize(w0 * q0 + w1 * q1)


def _wrap(a: Tensor) -> Tensor:
    return torch.remainder(a + math.pi, 2 * math.pi) - math.pi


def euler_branches(q: Tensor, order: str = "xyz") -> tuple[Tensor, Tensor]:
    """Both intrinsic Euler solutions (..., 3) of each rotation, in hinge order "xyz" or "yxz".

    "xyz" means R = Rx(a) Ry(b) Rz(c); "yxz" means R = Ry(a) Rx(b) Rz(c); angles are
    given in that order (a, b, c). The first solution has |b| <= pi/2, the second is
    its twin (a + pi, pi - b, c + pi), each angle wrapped into [-pi, pi).
    """
    m = quat_to_matrix(q)
    if order == "xyz":
        b = torch.asin(m[..., 0, 2].clamp(-1.0, 1.0))
        a = torch.atan2(-m[..., 1, 2], m[..., 2, 2])
        c = torch.atan2(-m[..., 0, 1], m[..., 0, 0])
    elif order == "yxz":
        b = torch.asin((-m[..., 1, 2]).clamp(-1.0, 1.0))
        a = torch.atan2(m[..., 0, 2], m[..., 2, 2])
        c = torch.atan2(m[..., 1, 0], m[..., 1, 1])
    else:
        raise ValueError(f"unsupported Euler order {order!r}; use 'xyz' or 'yxz'")
    return torch.stack((a, b, c), -1), _wrap(torch.stack((a + math.pi, math.pi - b, c + math.pi), -1))


def euler_from_quat(q: Tensor, order: str = "xyz") -> Tensor:
    """Intrinsic Euler angles (..., 3) in hinge order "xyz" or "yxz" (see ``euler_branches``).

    Of the two equivalent solutions the one with the smaller norm is returned, so
    that a joint bent 150 degrees about its first axis reads 150 rather than its
    30-degree twin with both other angles flipped. Frame by frame this choice can
    flip between the twins; ``rgsd_envs.motion.joint_fit`` fits tracks instead.
    """
    s1, s2 = euler_branches(q, order)
    pick2 = s2.square().sum(-1, keepdim=True) < s1.square().sum(-1, keepdim=True)
    return torch.where(pick2, s2, s1)


_AXIS_INDEX = {"x": 0, "y": 1, "z": 2}


def quat_from_euler(e: Tensor, order: str = "xyz") -> Tensor:
    """Quaternions from intrinsic Euler angles (..., 3) given in hinge order."""
    out = None
    for k, axis in enumerate(order):
        aa = torch.zeros(e.shape[:-1] + (3,), dtype=e.dtype, device=e.device)
        aa[..., _AXIS_INDEX[axis]] = e[..., k]
        qk = quat_from_axis_angle(aa)
        out = qk if out is None else quat_mul(out, qk)
    return out


def heading_angle(q: Tensor) -> Tensor:
    """Yaw (rad) of the body's forward x axis projected on the ground plane."""
    w, x, y, z = q.unbind(-1)
    return torch.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def yaw_quat(angle: Tensor) -> Tensor:
    """Quaternions of rotations by angle (rad) about the world z axis."""
    half = 0.5 * angle
    zeros = torch.zeros_like(half)
    return torch.stack((torch.cos(half), zeros, zeros, torch.sin(half)), -1)


def heading_quat_inv(q: Tensor) -> Tensor:
    """Inverse of the yaw-only part of q: maps world vectors to the heading frame."""
    return yaw_quat(-heading_angle(q))


def quat_to_tan_norm(q: Tensor) -> Tensor:
    """6-D tangent-normal encoding: the rotated x axis then the rotated z axis."""
    ref = q.new_zeros(q.shape[:-1] + (3,))
    tan = quat_rotate(q, ref + q.new_tensor([1.0, 0.0, 0.0]))
    nrm = quat_rotate(q, ref + q.new_tensor([0.0, 0.0, 1.0]))
    return torch.cat((tan, nrm), -1)


def angular_velocity(q0: Tensor, q1: Tensor, dt: float) -> Tensor:
    """World-frame angular velocity that turns q0 into q1 over dt seconds."""
    return quat_to_axis_angle(quat_mul(q1, quat_conj(q0))) / dt
