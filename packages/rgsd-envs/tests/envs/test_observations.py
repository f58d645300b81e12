"""The 359-D frame features and the encoder's history: known values, and invariance to the world's yaw and place."""

from __future__ import annotations

import math

import torch

from rgsd_envs.envs.observations import FRAME_DIM, FRAME_LAYOUT, body_columns, frame_features, history_indices
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.utils.rotations import (
    heading_quat_inv,
    quat_mul,
    quat_normalize,
    quat_rotate,
    quat_to_tan_norm,
    yaw_quat,
)

B = sk.NUM_BODIES


def _random_state(n: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    pos = torch.randn(n, B, 3, generator=g, dtype=torch.float64)
    rot = quat_normalize(torch.randn(n, B, 4, generator=g, dtype=torch.float64))
    lin = torch.randn(n, B, 3, generator=g, dtype=torch.float64)
    ang = torch.randn(n, B, 3, generator=g, dtype=torch.float64)
    return pos, rot, lin, ang


def _still(n: int = 1) -> tuple[torch.Tensor, ...]:
    """Every body at the origin with the identity rotation and no velocity."""
    rot = torch.zeros(n, B, 4, dtype=torch.float64)
    rot[..., 0] = 1.0
    zeros = torch.zeros(n, B, 3, dtype=torch.float64)
    return zeros.clone(), rot, zeros.clone(), zeros.clone()


def test_features_do_not_change_when_the_world_turns_about_z_and_shifts():
    pos, rot, lin, ang = _random_state(4)
    phase = torch.tensor([0.0, 0.25, 0.5, 1.0], dtype=torch.float64)
    before = frame_features(phase, pos, rot, lin, ang)
    yaw = yaw_quat(torch.tensor([0.3, -1.2, 2.5, math.pi], dtype=torch.float64))[:, None].expand(-1, B, -1)
    shift = torch.tensor([1.5, -2.0, 0.0], dtype=torch.float64)
    after = frame_features(
        phase,
        quat_rotate(yaw, pos) + shift,
        quat_mul(yaw, rot),
        quat_rotate(yaw, lin),
        quat_rotate(yaw, ang),
    )
    assert before.shape == (4, FRAME_DIM)
    torch.testing.assert_close(after, before, atol=1e-10, rtol=0)


def test_a_lift_or_a_roll_of_the_world_changes_the_features():
    pos, rot, lin, ang = _random_state(2, seed=1)
    phase = torch.zeros(2, dtype=torch.float64)
    before = frame_features(phase, pos, rot, lin, ang)
    lifted = frame_features(phase, pos + torch.tensor([0.0, 0.0, 0.1], dtype=torch.float64), rot, lin, ang)
    assert torch.allclose(lifted[:, FRAME_LAYOUT["root_height"]], before[:, FRAME_LAYOUT["root_height"]] + 0.1)
    roll = torch.tensor([math.cos(0.2), math.sin(0.2), 0.0, 0.0], dtype=torch.float64).expand(2, B, 4)
    rolled = frame_features(phase, quat_rotate(roll, pos), quat_mul(roll, rot), lin, ang)
    assert (rolled - before).abs().max() > 0.05


def test_phase_root_height_and_root_relative_positions_have_known_values():
    pos, rot, lin, ang = _still()
    pos[0, 0] = torch.tensor([5.0, -3.0, 0.9], dtype=torch.float64)  # the root, far from the origin
    pos[0, 1] = torch.tensor([6.0, -1.0, 0.5], dtype=torch.float64)  # body 1: 1 m ahead, 2 m left, 0.4 m lower
    f = frame_features(torch.tensor([0.4], dtype=torch.float64), pos, rot, lin, ang)[0]
    assert f[FRAME_LAYOUT["phase"]].item() == 0.4
    assert f[FRAME_LAYOUT["root_height"]].item() == 0.9
    torch.testing.assert_close(f[body_columns([1], "body_pos")], torch.tensor([1.0, 2.0, -0.4], dtype=torch.float64))
    # an identity rotation is its x axis (1, 0, 0) then its z axis (0, 0, 1)
    torch.testing.assert_close(
        f[body_columns([0], "body_rot")], torch.tensor([1.0, 0, 0, 0, 0, 1], dtype=torch.float64)
    )


def test_vectors_are_seen_in_the_roots_heading_frame():
    pos, rot, lin, ang = _still()
    quarter = yaw_quat(torch.tensor(math.pi / 2, dtype=torch.float64))  # the root faces world +y
    rot[0, 0] = quarter
    pos[0, 2] = torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64)  # 1 m along world +y: straight ahead
    lin[0, 3] = torch.tensor([0.0, 2.0, 0.0], dtype=torch.float64)  # moving forward
    ang[0, 4] = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)  # world +x: the root's right, heading -y
    f = frame_features(torch.zeros(1, dtype=torch.float64), pos, rot, lin, ang)[0]
    torch.testing.assert_close(f[body_columns([2], "body_pos")], torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64))
    torch.testing.assert_close(f[body_columns([3], "body_lin_vel")], torch.tensor([2.0, 0, 0], dtype=torch.float64))
    torch.testing.assert_close(f[body_columns([4], "body_ang_vel")], torch.tensor([0, -1.0, 0], dtype=torch.float64))
    # the root's own rotation in its heading frame is the identity; body 5 (identity in the world) is turned back
    torch.testing.assert_close(
        f[body_columns([0], "body_rot")], torch.tensor([1.0, 0, 0, 0, 0, 1], dtype=torch.float64)
    )
    torch.testing.assert_close(
        f[body_columns([5], "body_rot")], torch.tensor([0, -1.0, 0, 0, 0, 1], dtype=torch.float64)
    )


def test_body_rotations_are_the_tangent_normal_encoding_in_the_heading_frame():
    pos, rot, lin, ang = _random_state(3, seed=2)
    f = frame_features(torch.zeros(3, dtype=torch.float64), pos, rot, lin, ang)
    local = quat_mul(heading_quat_inv(rot[:, :1]).expand(-1, B, -1), rot)
    torch.testing.assert_close(f[:, FRAME_LAYOUT["body_rot"]], quat_to_tan_norm(local).reshape(3, -1))


def test_history_repeats_the_clips_own_first_frame_not_the_librarys():
    starts = torch.tensor([0, 0, 10, 10, 10])
    frames = torch.tensor([2, 7, 10, 11, 16])
    torch.testing.assert_close(
        history_indices(frames, starts),
        torch.tensor(
            [[0, 0, 0, 1, 2], [3, 4, 5, 6, 7], [10, 10, 10, 10, 10], [10, 10, 10, 10, 11], [12, 13, 14, 15, 16]]
        ),
    )
