"""States built from a clip's own frames that an imitation reward should rank below the reference.

Each is a 5-frame encoder input (``rgsd_envs.envs.observations``) derived from
the reference stack ``s_t = (o_{t-4}, ..., o_t)`` of a frame t:

* ``held_still``: frame t's pose in all 5 frames, velocities zeroed, the phase
  still advancing (o_{t-4}..o_t's phases): a humanoid standing in that pose
  while the clip runs on.
* ``start_held``: the same with the clip's *first* pose (what a policy that
  never leaves its start pose is scored for at frame t).
* ``phase_shift``: the reference stack with every phase moved by +0.5 (mod 1).
* ``reversed``: the 5 frames in reverse order (time running backwards).
* ``slowed``: the clip played at ``SLOW_FACTOR`` (0.7) of its speed: slot k of
  the stack holds the pose of local frame round(0.7 (t - 4 + k)) with its
  velocities scaled by 0.7, and the reference's phases: a policy that keeps the
  pose but lags behind the clip (a policy trained on a real-mocap walk covered
  0.69 of the reference's distance).
* ``legs_held``: the reference stack with the legs (hips, knees, ankles, toes)
  frozen to the pelvis in the pose of ``LEG_LAG`` frames earlier: their positions
  and rotations from frame t - ``LEG_LAG`` in every slot, their velocities the
  pelvis's. The trunk and arms move as in the clip: a body that leans or slides
  along the clip's path without stepping (a demo policy's backward walk leaned
  back with a foot left in front, and the encoder reward stayed at 15-17 of 20).
* ``sinking``: the reference stack with the pelvis ``SINK_STEP`` lower in each
  slot than in the one before (0.05 m in the oldest slot, 0.25 m in the newest),
  the whole body with it: a body that sits down or falls while the pose goes on
  (the demo preset's encoder paid a policy sitting down on the backward walk
  0.63, more than its states within 15 cm of the reference, 0.41).

They feed the reward-sharpness report (``reward_sharpness``); ``HARD_NEGATIVES``
are the hard negatives of encoder pretraining (``PretrainConfig.negatives = "hard"``;
the others were tried as hard negatives and measured no gain: docs/results.md).
"""

from __future__ import annotations

import torch

from rgsd_envs.envs.observations import FRAME_DIM, FRAME_LAYOUT, HISTORY_LEN, body_columns, history_indices
from rgsd_envs.humanoid import skeleton as sk

Tensor = torch.Tensor

HARD_NEGATIVES = ("held_still", "phase_shift", "reversed")
"""The variants pretraining adds as negatives of each anchor (the order of ``hard_negative_inputs``)."""
VARIANTS = ("held_still", "start_held", "phase_shift", "reversed", "slowed", "legs_held", "sinking")
"""Every variant ``variant_stacks`` builds (columns of the reward-sharpness report)."""
SLOW_FACTOR = 0.7
"""Playback speed of the ``slowed`` variant."""
LEG_LAG = 10
"""Frames (1/3 s at 30 Hz, a third of a walking cycle) by which the ``legs_held`` variant's leg pose lags."""
_LEGS = sk.LEG_BODY_IDS
_LEG_POSE = torch.cat((body_columns(_LEGS, "body_pos"), body_columns(_LEGS, "body_rot")))
_LEG_VEL = torch.cat((body_columns(_LEGS, "body_lin_vel"), body_columns(_LEGS, "body_ang_vel")))
_ROOT_VEL = torch.cat((body_columns([0] * len(_LEGS), "body_lin_vel"), body_columns([0] * len(_LEGS), "body_ang_vel")))
SINK_STEP = 0.05
"""Metres by which the ``sinking`` variant's pelvis drops per slot of the stack."""
_PHASE = FRAME_LAYOUT["phase"]
_ROOT_HEIGHT = FRAME_LAYOUT["root_height"]
_VELOCITIES = slice(FRAME_LAYOUT["body_lin_vel"].start, FRAME_LAYOUT["body_ang_vel"].stop)


def frame_features_of(inputs: Tensor) -> Tensor:
    """Frame features (F, 359) of reference encoder inputs (F, 1795): the newest frame of each stack."""
    return inputs.reshape(inputs.shape[0], HISTORY_LEN, FRAME_DIM)[:, -1]


def _held(features: Tensor, pose_frames: Tensor, stacks: Tensor) -> Tensor:
    """``pose_frames``' features with zero velocities in every slot, phases taken from ``stacks`` (B, 5, 359)."""
    still = features[pose_frames].clone()
    still[:, _VELOCITIES] = 0.0
    out = still.unsqueeze(1).expand(-1, HISTORY_LEN, -1).clone()
    out[..., _PHASE] = stacks[..., _PHASE]
    return out


def _slowed(features: Tensor, frames: Tensor, clip_starts: Tensor, stacks: Tensor) -> Tensor:
    """The stacks of the clip played at ``SLOW_FACTOR`` of its speed (poses of earlier frames, slower velocities)."""
    offsets = torch.arange(1 - HISTORY_LEN, 1, device=frames.device)
    local = (frames - clip_starts).unsqueeze(1) + offsets  # (B, 5) local frame of each slot
    src = clip_starts.unsqueeze(1) + torch.round(SLOW_FACTOR * local.clamp_min(0)).long()
    out = features[src].clone()
    out[..., _VELOCITIES] *= SLOW_FACTOR
    out[..., _PHASE] = stacks[..., _PHASE]
    return out


def _legs_held(features: Tensor, frames: Tensor, clip_starts: Tensor, stacks: Tensor) -> Tensor:
    """The reference stacks with the legs' pose of ``LEG_LAG`` frames earlier, moving with the pelvis."""
    held = torch.maximum(frames - LEG_LAG, clip_starts)
    out = stacks.clone()
    out[..., _LEG_POSE] = features[held][:, _LEG_POSE].unsqueeze(1)
    out[..., _LEG_VEL] = stacks[..., _ROOT_VEL]
    return out


def variant_stacks(features: Tensor, frames: Tensor, clip_starts: Tensor, names: tuple[str, ...]) -> Tensor:
    """Variants ``names`` of the reference stacks ending at global ``frames`` (B,): (B, len(names), 1795).

    ``clip_starts`` (B,) is the first global frame of each frame's clip.
    """
    stacks = features[history_indices(frames, clip_starts)]  # (B, 5, 359)
    out = []
    for name in names:
        if name == "held_still":
            v = _held(features, frames, stacks)
        elif name == "start_held":
            v = _held(features, clip_starts, stacks)
        elif name == "phase_shift":
            v = stacks.clone()
            v[..., _PHASE] = torch.remainder(stacks[..., _PHASE] + 0.5, 1.0)
        elif name == "reversed":
            v = stacks.flip(1)
        elif name == "slowed":
            v = _slowed(features, frames, clip_starts, stacks)
        elif name == "legs_held":
            v = _legs_held(features, frames, clip_starts, stacks)
        elif name == "sinking":
            v = stacks.clone()
            drop = SINK_STEP * torch.arange(1, HISTORY_LEN + 1, dtype=v.dtype, device=v.device)
            v[..., _ROOT_HEIGHT] -= drop.unsqueeze(-1)
        else:
            raise ValueError(f"unknown negative variant {name!r}; known: {', '.join(VARIANTS)}")
        out.append(v.flatten(1))
    return torch.stack(out, dim=1)


def hard_negative_inputs(features: Tensor, frames: Tensor, clip_starts: Tensor) -> Tensor:
    """The hard negatives ``HARD_NEGATIVES`` (held still, phase +0.5, reversed) of each frame: (B, 3, 1795)."""
    return variant_stacks(features, frames, clip_starts, HARD_NEGATIVES)
