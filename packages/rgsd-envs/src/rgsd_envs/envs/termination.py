"""Termination rules: deviation of imitation episodes (which body error, over which threshold) and falls.

A world has fallen when its pelvis is below ``EnvConfig.fall_height`` or, where contact counts, a body other than
the feet touches the ground (``fall_flags``: the environment's fall termination and the evaluation's fall rate).

An imitation world deviates when its body error exceeds a threshold (docs/environments.md;
``EnvConfig.deviation``, a ``DeviationConfig``):

* ``metric``: "mean" (the mean over the 24 bodies of the distance to the
  reference, the Cartesian error itself) or "max" (the largest body distance, as
  PHC, 0.25 m, and ProtoMotions, 0.5 m: one body far off, a pelvis drifting
  sideways included, ends the episode even when the other bodies still track);
* ``adaptive``: the threshold of clip m is ``clamp(ADAPTIVE_K x e_m, min,
  threshold)`` where e_m is an EMA of the metric over the imitation worlds playing
  clip m (``ERROR_MEMORY`` samples). A clip that is tracked well gets a tighter
  threshold, so the policy is not rewarded for states it can no longer recover
  from; a clip that is tracked badly keeps the loose one and its episodes keep
  their length. It starts at ``threshold``. The max error is led by the hands and
  feet: on the demo clips at 0.7 M samples its EMA was 0.25-0.36 m on every clip
  (so PHC's 0.25 m would end most episodes at that stage).
* ``heading_deg``: also end an imitation episode when the pelvis's heading
  differs from the reference's by more than this many degrees. The observation
  and the encoder input are heading-relative, so the reward hardly sees a walk
  that slowly turns (``benchmarks/heading_drift.py``); this ends the turn where
  it starts rather than once its offset has grown past the body-error threshold.

The cartesian error reported in ``info`` stays the mean body error whatever
the rule; only termination follows it.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch

from rgsd_envs.envs.config import DeviationConfig
from rgsd_envs.envs.observations import body_axes
from rgsd_envs.humanoid import skeleton as sk

Tensor = torch.Tensor

ADAPTIVE_K = 2.0
"""Multiple of a clip's error EMA that the adaptive rule allows. On the demo clips at 0.7 M samples the EMA of the
max body error was 0.25-0.36 m on every clip, so k = 3 never left the 0.5 m cap; with k = 2 a clip tightens once
its typical max error is under 0.25 m."""
ERROR_MEMORY = 5000.0
"""Imitation samples of a clip over which its error EMA is averaged (the adaptive rule)."""


@functools.cache
def _non_foot(device: torch.device) -> Tensor:
    """``sk.NON_FOOT`` on ``device``, made once per device (read-only)."""
    return torch.as_tensor(sk.NON_FOOT, dtype=torch.bool, device=device)


def fall_flags(body_pos: Tensor, contact: Tensor, fall_height: float, use_contact: bool) -> Tensor:
    """(N,) whether each world has fallen: its pelvis below ``fall_height`` (m) or, with ``use_contact``, a body
    other than the feet touching the ground. ``body_pos`` (N, bodies, 3); ``contact`` (N, bodies) bool, moved to
    ``body_pos``'s device only when ``use_contact`` reads it."""
    fall = body_pos[:, sk.ROOT_ID, 2] < fall_height
    if use_contact:
        fall = fall | (contact.to(body_pos.device) & _non_foot(body_pos.device)).any(dim=-1)
    return fall


def body_error(distances: Tensor, metric: str) -> Tensor:
    """(N,) error of each world from its (N, bodies) body distances: their mean or their maximum (m)."""
    return distances.amax(dim=-1) if metric == "max" else distances.mean(dim=-1)


def heading_error(root_rot: Tensor, ref_root_rot: Tensor) -> Tensor:
    """(N,) absolute yaw difference (rad, in [0, pi]) of root quaternions (N, 4) and their references (N, 4)."""
    a, b = body_axes(root_rot)[..., :2], body_axes(ref_root_rot)[..., :2]
    cross = a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    return torch.atan2(cross, (a * b).sum(-1)).abs()


class DeviationRule:
    """Decides deviation per world and keeps each clip's error EMA for the tightening threshold."""

    def __init__(self, cfg: DeviationConfig, num_clips: int, device: torch.device | str = "cpu"):
        self.cfg = cfg
        self.device = torch.device(device)
        start = cfg.threshold / ADAPTIVE_K  # the threshold starts at cfg.threshold
        self.clip_error = torch.full((num_clips,), start, dtype=torch.float64, device=self.device)
        """(clips,) EMA of the deviation metric over imitation worlds of each clip (m), on the env's device
        (updated by fixed-shape ops: no host read per step)."""

    def thresholds(self) -> Tensor:
        """(clips,) the current threshold of each clip (m), float32 on the env's device."""
        cfg = self.cfg
        if not cfg.adaptive:
            return torch.full_like(self.clip_error, cfg.threshold, dtype=torch.float32)
        t = (ADAPTIVE_K * self.clip_error).clamp(cfg.min, cfg.threshold)
        return t.to(torch.float32)

    def __call__(
        self,
        distances: Tensor,
        imitation: Tensor,
        clip: Tensor,
        root_rot: Tensor | None = None,
        ref_root_rot: Tensor | None = None,
        counted: Tensor | None = None,
    ) -> Tensor:
        """(N,) bool: imitation worlds whose error exceeds their clip's threshold (or whose heading is off by more
        than ``heading_deg``, given the root rotations); updates the clips' EMAs with the errors of the imitation
        worlds in ``counted`` ((N,) bool; None: all)."""
        cfg = self.cfg
        if cfg.threshold == math.inf and cfg.heading_deg is None and not cfg.adaptive:
            return torch.zeros_like(imitation)
        error = body_error(distances, cfg.metric)
        off = error > (self.thresholds()[clip] if cfg.adaptive else cfg.threshold)  # a fixed one needs no gather
        if cfg.heading_deg is not None and root_rot is not None and ref_root_rot is not None:
            off = off | (heading_error(root_rot, ref_root_rot) > math.radians(cfg.heading_deg))
        deviation = imitation & off
        if cfg.adaptive:
            self._record(error, imitation if counted is None else imitation & counted, clip)
        return deviation

    def _record(self, error: Tensor, imitation: Tensor, clip: Tensor) -> None:
        """Fold this step's errors of imitation worlds into their clips' EMAs (batched per clip, fixed shapes)."""
        w = imitation.to(torch.float64)
        count = torch.zeros_like(self.clip_error).index_add_(0, clip, w)
        total = torch.zeros_like(self.clip_error).index_add_(0, clip, w * error.to(torch.float64))
        # k samples of one clip at once: the EMA's weight on the old value is (1 - 1/memory)^k (1 without samples)
        keep = (1.0 - 1.0 / ERROR_MEMORY) ** count
        self.clip_error = keep * self.clip_error + (1.0 - keep) * total / count.clamp_min(1.0)

    def state_dict(self) -> dict[str, Any]:
        """The clips' error EMAs (for exact resumption)."""
        return {"clip_error": self.clip_error.cpu().clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict``."""
        self.clip_error = torch.as_tensor(state["clip_error"], dtype=torch.float64).to(self.device).clone()
