"""Observation layout and features: the one place that defines them.

Frame features ``o_t`` (359-D), in this order:

==========  =====  ======================================================
slice       size   content
==========  =====  ======================================================
0:1         1      phase = frame index / (clip frames - 1), in [0, 1]
1:2         1      root (pelvis) height, m
2:71        69     positions of bodies 1..23 relative to the root, heading frame
71:215      144    rotations of all 24 bodies in the heading frame, tangent-normal 6-D
215:287     72     linear velocities of all 24 bodies, heading frame
287:359     72     angular velocities of all 24 bodies, heading frame
==========  =====  ======================================================

The heading frame is the root's yaw-only rotation. The policy sees ``o_t`` and the
skill ``z`` (16-D): a flat 375-D vector ``[o_t, z]`` by default. The encoder sees
the last 5 frames stacked oldest first, ``s_t = (o_{t-4}, ..., o_t)`` (1795-D).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from rgsd_envs.humanoid import skeleton as sk

if TYPE_CHECKING:
    from rgsd_envs.motion.library import MotionLib

Tensor = torch.Tensor

SKILL_DIM = 16
"""Dimension of the skill latent z (unit vector)."""
HISTORY_LEN = 5
"""Frames stacked for the encoder."""

FRAME_LAYOUT: dict[str, slice] = {
    "phase": slice(0, 1),
    "root_height": slice(1, 2),
    "body_pos": slice(2, 2 + 3 * (sk.NUM_BODIES - 1)),
    "body_rot": slice(71, 71 + 6 * sk.NUM_BODIES),
    "body_lin_vel": slice(215, 215 + 3 * sk.NUM_BODIES),
    "body_ang_vel": slice(287, 287 + 3 * sk.NUM_BODIES),
}
"""Slices of the 359-D frame features."""
FRAME_DIM = FRAME_LAYOUT["body_ang_vel"].stop
"""359."""
POLICY_OBS_DIM = FRAME_DIM + SKILL_DIM
"""375: frame features then the skill."""
POLICY_LAYOUT: dict[str, slice] = {**FRAME_LAYOUT, "skill": slice(FRAME_DIM, POLICY_OBS_DIM)}
"""Slices of the flat 375-D policy observation."""
ENCODER_INPUT_DIM = HISTORY_LEN * FRAME_DIM
"""1795."""

assert FRAME_DIM == 359 and FRAME_LAYOUT["body_rot"].start == FRAME_LAYOUT["body_pos"].stop


@dataclass(frozen=True)
class ObservationLayout:
    """The sizes a method reads off an env's observations: frame o_t, skill z, encoder history, phase column.

    An env describes its observations with one (``env.layout``, ``core.layout``): the policy sees
    ``[o_t, z]``, the encoder ``history_len`` frames stacked oldest first. ``HUMANOID_LAYOUT`` is RGSD-SMPL-v0's;
    the toy envs of ``rgsd_envs.envs.toy`` bring their own, which is how the methods run on another env."""

    frame_dim: int = FRAME_DIM
    """Size of a frame o_t."""
    phase_columns: tuple[int, int] | None = (FRAME_LAYOUT["phase"].start, FRAME_LAYOUT["phase"].stop)
    """(start, stop) of the columns of o_t holding the clip's clock (dropped from the methods' transition
    features); None: no clock."""
    skill_dim: int = SKILL_DIM
    history_len: int = HISTORY_LEN

    @property
    def phase(self) -> slice | None:
        """The phase's slice of o_t (None: no clock)."""
        return None if self.phase_columns is None else slice(*self.phase_columns)

    @property
    def feature_dim(self) -> int:
        """A frame's size without the phase (358 for the humanoid)."""
        return self.frame_dim - (0 if self.phase is None else self.phase.stop - self.phase.start)

    @property
    def policy_obs_dim(self) -> int:
        """Size of the policy observation ``[o_t, z]``."""
        return self.frame_dim + self.skill_dim

    @property
    def skill(self) -> slice:
        """The skill's slice of the policy observation."""
        return slice(self.frame_dim, self.policy_obs_dim)

    @property
    def encoder_input_dim(self) -> int:
        """Size of the encoder input (``history_len`` stacked frames)."""
        return self.history_len * self.frame_dim


HUMANOID_LAYOUT = ObservationLayout()
"""RGSD-SMPL-v0's layout (``FRAME_LAYOUT`` above)."""


def _axes_map() -> tuple[Tensor, Tensor]:
    """(16, 6) weights and (6,) bias: quaternion outer product -> rotation matrix columns x and z."""
    w = torch.zeros(4, 4, 6, dtype=torch.float64)
    W, X, Y, Z = range(4)
    # column x: (1 - 2(yy + zz), 2(xy + wz), 2(xz - wy))
    w[Y, Y, 0] = w[Z, Z, 0] = -2.0
    w[X, Y, 1] = w[W, Z, 1] = 2.0
    w[X, Z, 2], w[W, Y, 2] = 2.0, -2.0
    # column z: (2(xz + wy), 2(yz - wx), 1 - 2(xx + yy))
    w[X, Z, 3] = w[W, Y, 3] = 2.0
    w[Y, Z, 4], w[W, X, 4] = 2.0, -2.0
    w[X, X, 5] = w[Y, Y, 5] = -2.0
    return w.reshape(16, 6), torch.tensor([1.0, 0.0, 0.0, 0.0, 0.0, 1.0], dtype=torch.float64)


_AXES_W, _AXES_B = _axes_map()
_AXES_CACHE: dict[tuple[torch.dtype, torch.device], tuple[Tensor, Tensor]] = {}


def body_axes(body_rot: Tensor) -> Tensor:
    """World directions of each body's x and z axes (..., 6) from unit quaternions (..., 4)."""
    key = (body_rot.dtype, body_rot.device)
    if key not in _AXES_CACHE:
        _AXES_CACHE[key] = (_AXES_W.to(*key[::-1]), _AXES_B.to(*key[::-1]))
    w, b = _AXES_CACHE[key]
    outer = (body_rot.unsqueeze(-1) * body_rot.unsqueeze(-2)).flatten(-2)
    return outer @ w + b


def frame_features(
    phase: Tensor, body_pos: Tensor, body_rot: Tensor, body_lin_vel: Tensor, body_ang_vel: Tensor
) -> Tensor:
    """359-D frame features from world-frame body states (N, 24, ...) and phase (N,).

    The heading frame differs from the world by a yaw only, so every vector is
    turned by one 2-D rotation of x and y. A body's tangent-normal encoding is the
    heading-frame image of its x and z axes. (Written for few torch ops: at
    N=64 the cost is dispatch, not arithmetic.)
    """
    n = body_pos.shape[0]
    axes = body_axes(body_rot)  # (N, 24, 6): x axis then z axis, world frame
    fwd = axes[:, 0, :2]  # root's forward axis on the ground plane
    r = fwd.norm(dim=-1, keepdim=True).clamp_min(1e-9)
    c, s = fwd[:, :1] / r, -fwd[:, 1:] / r  # rotation by -heading
    vecs = torch.cat(
        (body_pos[:, 1:] - body_pos[:, :1], axes.reshape(n, -1, 3), body_lin_vel, body_ang_vel), dim=1
    )  # (N, 23 + 48 + 24 + 24, 3), in the order of the layout
    x, y = vecs[..., 0], vecs[..., 1]
    turned = torch.stack((c * x - s * y, s * x + c * y, vecs[..., 2]), dim=-1)
    return torch.cat((phase.reshape(n, 1).to(body_pos.dtype), body_pos[:, 0, 2:3], turned.reshape(n, -1)), dim=-1)


def body_columns(bodies: list[int] | tuple[int, ...], part: str) -> Tensor:
    """Columns of the 359-D frame features that hold ``part`` (a ``FRAME_LAYOUT`` key) of the given body ids."""
    if part not in ("body_pos", "body_rot", "body_lin_vel", "body_ang_vel"):
        raise ValueError(f"part must be a per-body slice of FRAME_LAYOUT, got {part!r}")
    width = 6 if part == "body_rot" else 3
    first = 1 if part == "body_pos" else 0  # body_pos starts at body 1 (relative to the root)
    if part == "body_pos" and 0 in bodies:
        raise ValueError("body_pos has no root entry (positions are relative to the root)")
    start = FRAME_LAYOUT[part].start
    return torch.tensor([start + width * (b - first) + k for b in bodies for k in range(width)], dtype=torch.long)


def phase_of(frames: Tensor, num_frames: Tensor) -> Tensor:
    """Phase in [0, 1]: frame index over the clip's last frame index."""
    return frames.to(torch.float32) / (num_frames - 1).clamp_min(1).to(torch.float32)


def history_indices(frames: Tensor, clip_starts: Tensor) -> Tensor:
    """Indices of the HISTORY_LEN reference frames ending at each frame, clamped to its clip's start.

    ``frames`` are global (concatenated) frame indices; frames before the clip's
    first frame repeat the first frame (the history repeats o_0).
    """
    offsets = torch.arange(-(HISTORY_LEN - 1), 1, device=frames.device)
    idx = frames.unsqueeze(-1) + offsets
    return torch.maximum(idx, clip_starts.unsqueeze(-1))


def reference_frame_features(lib: MotionLib) -> Tensor:
    """359-D features of every reference frame of a MotionLib, (F, 359), phase included."""
    frames = torch.arange(lib.total_frames, device=lib.device)
    clip = lib.clip_of_frame
    phase = phase_of(frames - lib.starts[clip], lib.num_frames[clip])
    return frame_features(
        phase, lib.frames("body_pos"), lib.frames("body_rot"), lib.frames("body_lin_vel"), lib.frames("body_ang_vel")
    )


def stack_history(features: Tensor, indices: Tensor) -> Tensor:
    """Encoder inputs (..., 1795) from frame features (F, 359) and history indices (..., 5)."""
    return features[indices].flatten(-2)


def reference_encoder_inputs(lib: MotionLib, features: Tensor | None = None) -> Tensor:
    """Encoder input s_t (F, 1795) for every reference frame (history clamped to clip starts)."""
    feats = reference_frame_features(lib) if features is None else features
    frames = torch.arange(lib.total_frames, device=lib.device)
    return stack_history(feats, history_indices(frames, lib.starts[lib.clip_of_frame]))
