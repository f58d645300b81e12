"""rgsd_envs.utils.rotations against scipy (quaternions wxyz here, xyzw in scipy)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation, Slerp

from rgsd_envs.utils import rotations as rot

RNG = np.random.default_rng(0)
SCIPY_R = Rotation.random(64, random_state=1)


def wxyz(r: Rotation) -> torch.Tensor:
    """scipy rotations as float64 wxyz quaternions."""
    return torch.as_tensor(np.roll(r.as_quat(), 1, axis=-1))


def to_scipy(q: torch.Tensor) -> Rotation:
    """wxyz quaternions as scipy rotations."""
    return Rotation.from_quat(np.roll(q.numpy(), -1, axis=-1))


def same_rotation(q1: torch.Tensor, q2: torch.Tensor, atol: float = 1e-10) -> None:
    """Assert q1 and q2 are the same rotations (q and -q are equal)."""
    dot = (q1 * q2).sum(-1).abs()
    np.testing.assert_allclose(dot.numpy(), 1.0, atol=atol)


def test_axis_angle_to_quat_matches_scipy():
    aa = torch.as_tensor(SCIPY_R.as_rotvec())
    same_rotation(rot.quat_from_axis_angle(aa), wxyz(SCIPY_R))


def test_axis_angle_to_quat_is_accurate_for_tiny_angles():
    aa = torch.tensor([[1e-9, -2e-9, 3e-10], [0.0, 0.0, 0.0]], dtype=torch.float64)
    same_rotation(rot.quat_from_axis_angle(aa), wxyz(Rotation.from_rotvec(aa.numpy())), atol=1e-15)


def test_quat_to_axis_angle_is_accurate_for_tiny_angles():
    aa = torch.tensor([[1e-9, -2e-9, 3e-10], [0.0, 0.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(rot.quat_to_axis_angle(rot.quat_from_axis_angle(aa)), aa, atol=1e-18, rtol=1e-6)


def test_quat_to_axis_angle_matches_scipy():
    np.testing.assert_allclose(rot.quat_to_axis_angle(wxyz(SCIPY_R)).numpy(), SCIPY_R.as_rotvec(), atol=1e-10)


def test_quat_to_matrix_matches_scipy():
    np.testing.assert_allclose(rot.quat_to_matrix(wxyz(SCIPY_R)).numpy(), SCIPY_R.as_matrix(), atol=1e-12)


def test_matrix_to_quat_matches_scipy():
    same_rotation(rot.matrix_to_quat(torch.as_tensor(SCIPY_R.as_matrix())), wxyz(SCIPY_R))


@pytest.mark.parametrize("axis", [(1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0)])
def test_matrix_to_quat_handles_half_turns(axis):
    r = Rotation.from_rotvec(math.pi * np.asarray(axis, float) / np.linalg.norm(axis))
    same_rotation(rot.matrix_to_quat(torch.as_tensor(r.as_matrix())), wxyz(r))


def test_quat_mul_composes_like_matrices():
    a, b = SCIPY_R[:32], SCIPY_R[32:]
    same_rotation(rot.quat_mul(wxyz(a), wxyz(b)), wxyz(a * b))


def test_quat_rotate_matches_scipy_apply():
    v = torch.as_tensor(RNG.normal(size=(64, 3)))
    np.testing.assert_allclose(rot.quat_rotate(wxyz(SCIPY_R), v).numpy(), SCIPY_R.apply(v.numpy()), atol=1e-12)


def test_quat_rotate_inv_undoes_quat_rotate():
    v = torch.as_tensor(RNG.normal(size=(64, 3)))
    q = wxyz(SCIPY_R)
    np.testing.assert_allclose(rot.quat_rotate_inv(q, rot.quat_rotate(q, v)).numpy(), v.numpy(), atol=1e-12)


def test_quat_normalize_gives_unit_norm_and_non_negative_w():
    q = rot.quat_normalize(torch.as_tensor(RNG.normal(size=(64, 4))))
    np.testing.assert_allclose(q.norm(dim=-1).numpy(), 1.0, atol=1e-12)
    assert (q[:, 0] >= 0).all()


@pytest.mark.parametrize("t", [0.0, 0.3, 0.5, 1.0])
def test_slerp_matches_scipy(t):
    a, b = SCIPY_R[:32], SCIPY_R[32:]
    want = [Slerp([0, 1], Rotation.concatenate([a[i], b[i]]))([t])[0] for i in range(32)]
    got = rot.quat_slerp(wxyz(a), wxyz(b), torch.full((32, 1), t, dtype=torch.float64))
    same_rotation(got, wxyz(Rotation.concatenate(want)))


def test_slerp_takes_the_short_way_when_q1_has_the_other_sign():
    a, b = wxyz(SCIPY_R[:32]), wxyz(SCIPY_R[32:])
    t = torch.full((32, 1), 0.4, dtype=torch.float64)
    same_rotation(rot.quat_slerp(a, -b, t), rot.quat_slerp(a, b, t))


def test_slerp_of_nearly_equal_quaternions_stays_between_them():
    a = wxyz(SCIPY_R[:1])
    b = rot.quat_mul(a, rot.quat_from_axis_angle(torch.tensor([[1e-8, 0.0, 0.0]], dtype=torch.float64)))
    mid = rot.quat_slerp(a, b, torch.tensor([[0.5]], dtype=torch.float64))
    assert torch.isfinite(mid).all()
    same_rotation(mid, a, atol=1e-14)


@pytest.mark.parametrize("order", ["xyz", "yxz"])
def test_quat_from_euler_matches_scipy_intrinsic(order):
    e = torch.as_tensor(RNG.uniform(-math.pi, math.pi, size=(64, 3)))
    same_rotation(rot.quat_from_euler(e, order), wxyz(Rotation.from_euler(order.upper(), e.numpy())))


@pytest.mark.parametrize("order", ["xyz", "yxz"])
def test_euler_round_trip_recovers_the_angles(order):
    lim = math.pi / 2 - 0.05
    e = torch.as_tensor(RNG.uniform(-lim, lim, size=(64, 3)))
    np.testing.assert_allclose(rot.euler_from_quat(rot.quat_from_euler(e, order), order).numpy(), e.numpy(), atol=1e-10)


@pytest.mark.parametrize("order", ["xyz", "yxz"])
def test_euler_from_quat_gives_the_same_rotation_for_any_rotation(order):
    q = wxyz(SCIPY_R)
    same_rotation(rot.quat_from_euler(rot.euler_from_quat(q, order), order), q)


@pytest.mark.parametrize(("order", "want"), [("yxz", (150.0, 0.0, 0.0)), ("xyz", (0.0, 150.0, 0.0))])
def test_knee_bent_150_degrees_reads_150_about_y(order, want):
    q = wxyz(Rotation.from_rotvec([0.0, math.radians(150.0), 0.0]))
    np.testing.assert_allclose(np.rad2deg(rot.euler_from_quat(q, order).numpy()), want, atol=1e-9)


def test_euler_from_quat_refuses_other_orders():
    with pytest.raises(ValueError, match="'zyx'"):
        rot.euler_from_quat(wxyz(SCIPY_R), "zyx")


def test_heading_angle_reads_the_yaw_under_pitch_and_roll():
    yaw = torch.as_tensor(RNG.uniform(-3.0, 3.0, size=32))
    tilt = Rotation.from_euler("YX", RNG.uniform(-0.6, 0.6, size=(32, 2)))
    q = rot.quat_mul(rot.yaw_quat(yaw), wxyz(tilt))
    np.testing.assert_allclose(rot.heading_angle(q).numpy(), yaw.numpy(), atol=1e-12)


def test_heading_quat_inv_maps_the_forward_axis_to_x():
    q = wxyz(Rotation.from_euler("ZYX", RNG.uniform(-0.6, 0.6, size=(32, 3)) * (5, 1, 1)))
    fwd = rot.quat_rotate(q, torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64).expand(32, 3))
    local = rot.quat_rotate(rot.heading_quat_inv(q), fwd)
    np.testing.assert_allclose(local[:, 1].numpy(), 0.0, atol=1e-12)
    assert (local[:, 0] > 0).all()


def test_tan_norm_is_the_rotated_x_and_z_axes():
    m = SCIPY_R.as_matrix()
    np.testing.assert_allclose(
        rot.quat_to_tan_norm(wxyz(SCIPY_R)).numpy(), np.concatenate([m[:, :, 0], m[:, :, 2]], -1), atol=1e-12
    )


def test_angular_velocity_recovers_a_constant_spin():
    w = torch.as_tensor(RNG.normal(size=(32, 3)))
    q0 = wxyz(SCIPY_R[:32])
    dt = 1.0 / 30.0
    q1 = rot.quat_mul(rot.quat_from_axis_angle(w * dt), q0)
    np.testing.assert_allclose(rot.angular_velocity(q0, q1, dt).numpy(), w.numpy(), atol=1e-10)


def test_functions_broadcast_over_leading_dims_in_float32():
    q = wxyz(SCIPY_R).to(torch.float32).reshape(4, 16, 4)
    v = torch.ones(4, 16, 3)
    out = rot.quat_rotate(q, v)
    assert out.shape == (4, 16, 3) and out.dtype == torch.float32
    np.testing.assert_allclose(out.reshape(64, 3).numpy(), SCIPY_R.apply(np.ones((64, 3))), atol=1e-5)
