"""A DeepMimic-style tracking reward: the control arm of issue 11 (``EnvConfig.reward = "tracking"``).

``r = scale * (w_p r_p + w_v r_v + w_e r_e + w_r r_r)`` with each term in (0, 1]
(Peng et al. 2018, DeepMimic, eq. 5-9; weights and scales of the paper):

=============  ======  =====  ===============================================================
term           weight  scale  error (simulated state s' against the reference frame it is at)
=============  ======  =====  ===============================================================
pose           0.65    2      sum over the 69 hinges of the squared angle difference (rad^2);
                              DeepMimic: squared local joint rotation angles
velocity       0.10    0.1    sum over the 69 hinges of the squared velocity difference
end_effector   0.15    40     sum over ankles and wrists of the squared position difference
                              (m^2), positions relative to the root in its heading frame
root           0.10    10     squared world pelvis position difference (m^2) plus 0.01 x the
                              squared pelvis velocity difference; DeepMimic: centre of mass
=============  ======  =====  ===============================================================

each term ``exp(-scale * error)``. The reward is 1 x ``scale`` (``EnvConfig.tracking_scale``)
on the reference and falls off with every kind of deviation, standing still
included (the root term keeps the pelvis travelling with the clip).

In the env it replaces the encoder reward of *imitation* episodes only;
discovery episodes keep the trainable encoder's reward (a tracking reward has
no reference to track there), so the discovery encoder and its KL term train
as before. It is a control experiment, never the default: if a policy learns
walking with it in a budget where the encoder reward does not, the reward is
the bottleneck; if neither does, it is samples or physics.
"""

from __future__ import annotations

from typing import Any

import torch

from rgsd_envs.envs.observations import FRAME_LAYOUT
from rgsd_envs.humanoid import skeleton as sk

Tensor = torch.Tensor

TERMS: dict[str, tuple[float, float]] = {
    "pose": (0.65, 2.0),
    "velocity": (0.1, 0.1),
    "end_effector": (0.15, 40.0),
    "root": (0.1, 10.0),
}
"""(weight, scale) of each term (DeepMimic's paper values); the weights sum to 1."""
END_EFFECTORS = ("L_Ankle", "R_Ankle", "L_Wrist", "R_Wrist")
"""Bodies of the end-effector term (DeepMimic: ankles and wrists)."""
ROOT_VELOCITY_WEIGHT = 0.01
"""Weight of the pelvis velocity error inside the root term (DeepMimic's code: 0.01 on root velocity)."""
_EE_IDS = torch.tensor([sk.BODY_NAMES.index(b) - 1 for b in END_EFFECTORS])  # body_pos features exclude the root
_BODY_POS = FRAME_LAYOUT["body_pos"]


def tracking_terms(
    dof_pos: Tensor,
    dof_vel: Tensor,
    features: Tensor,
    root_pos: Tensor,
    root_vel: Tensor,
    ref_dof_pos: Tensor,
    ref_dof_vel: Tensor,
    ref_features: Tensor,
    ref_root_pos: Tensor,
    ref_root_vel: Tensor,
) -> dict[str, Tensor]:
    """Each term (N,) in (0, 1] from simulated and reference hinges (N, 69), frame features (N, 359) and
    pelvis position and velocity (N, 3), world frame."""
    n = features.shape[0]
    ee = _EE_IDS.to(features.device)
    body = features[:, _BODY_POS].reshape(n, -1, 3)[:, ee]
    ref_body = ref_features[:, _BODY_POS].reshape(n, -1, 3)[:, ee]
    errors = {
        "pose": (dof_pos - ref_dof_pos).square().sum(-1),
        "velocity": (dof_vel - ref_dof_vel).square().sum(-1),
        "end_effector": (body - ref_body).square().sum((-1, -2)),
        "root": (root_pos - ref_root_pos).square().sum(-1)
        + ROOT_VELOCITY_WEIGHT * (root_vel - ref_root_vel).square().sum(-1),
    }
    return {k: torch.exp(-TERMS[k][1] * e) for k, e in errors.items()}


def tracking_reward(terms: dict[str, Tensor], scale: float = 1.0) -> Tensor:
    """``scale`` x the weighted sum of the terms (N,): at most ``scale``, on the reference."""
    return scale * sum(TERMS[k][0] * v for k, v in terms.items())


def state_tracking_reward(
    state: Any, features: Tensor, lib: Any, ref_features: Tensor, frames: Tensor, scale: float = 1.0
) -> Tensor:
    """Tracking reward (N,) of simulated states (a ``SimState`` and their frame features) against the
    reference frames ``frames`` (global frame indices of ``lib``, a ``MotionLib``)."""
    f32 = {"device": features.device, "dtype": torch.float32}
    terms = tracking_terms(
        state.qpos[:, 7:].to(**f32),
        state.qvel[:, 6:].to(**f32),
        features,
        state.body_pos[:, 0].to(**f32),
        state.qvel[:, :3].to(**f32),
        lib.frames("dof_pos")[frames],
        lib.frames("dof_vel")[frames],
        ref_features[frames],
        lib.frames("root_pos")[frames],
        lib.frames("root_lin_vel")[frames],
    )
    return tracking_reward(terms, scale)
