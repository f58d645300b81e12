"""Configuration of RGSD-SMPL-v0 (a dataclass that loads from YAML)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from rgsd_envs.humanoid.mjcf import DEFAULT_TIMESTEP
from rgsd_envs.sim import BACKENDS

CLIP_SAMPLING = ("uniform", "failure_weighted", "weighted")
FAILURE_RATE_PER = ("episode", "step")
REWARDS = ("encoder", "tracking")
DEVIATION_METRICS = ("mean", "max")
DEVIATION_KEYS = (
    "deviation_threshold",
    "deviation_termination",
    "deviation_metric",
    "deviation_adaptive",
    "deviation_adaptive_k",
    "deviation_min",
    "deviation_error_memory",
    "deviation_heading_deg",
)
"""The ``EnvConfig`` fields of the deviation rule (``rgsd_envs.envs.termination``): a trainer may change them
mid-run as a curriculum step."""


@dataclass
class EnvConfig:
    """Everything that shapes an RGSD-SMPL-v0 episode; see the env's docstring."""

    motions: str | list[str] = "demo"
    """Reference clips: "demo" (built-in), a clip file, a folder of clips, or a list."""
    p_imitation: float = 0.7
    """Probability p of an imitation episode (z = z_m); otherwise discovery (uniform z)."""
    eval_kappa: float | None = None
    """If set, every episode is an evaluation episode with z ~ vMF(z_m, eval_kappa)."""
    deviation_threshold: float = 0.5
    """Imitation episodes end when the body-position error (``deviation_metric``) exceeds this (m); with
    ``deviation_adaptive`` the loosest per-clip threshold."""
    deviation_termination: bool = True
    deviation_metric: str = "mean"
    """Body error of the deviation rule: "mean" over the bodies or "max" (PHC 0.25 m, ProtoMotions 0.5 m);
    ``rgsd_envs.envs.termination``."""
    deviation_adaptive: bool = False
    """Per-clip thresholds clamp(deviation_adaptive_k x EMA of the clip's error, deviation_min,
    deviation_threshold) that tighten as the clip is tracked better."""
    deviation_adaptive_k: float = 2.0
    """Multiple of the clip's error EMA. Measured on the demo clips at 0.7 M samples: the EMA of the max body error
    is 0.25-0.36 m on every clip (hands and feet lead it, the punch's most), so k = 3 never left the 0.5 m cap;
    with k = 2 a clip tightens once its typical max error is under 0.25 m."""
    deviation_min: float = 0.25
    """Tightest per-clip threshold of ``deviation_adaptive`` (m)."""
    deviation_error_memory: float = 5000.0
    """Imitation samples of a clip over which its error EMA is averaged (``deviation_adaptive``)."""
    deviation_heading_deg: float | None = None
    """Also end imitation episodes whose pelvis heading is off the reference's by more than this (degrees;
    None: no heading rule). The reward is nearly blind to a slow turn (heading-relative observations)."""
    clip_sampling: str = "uniform"
    """How RSI picks a clip: "uniform", "failure_weighted" (ProtoMotions-style: clips whose imitation
    episodes end in a failure are drawn more often; see ``failure_weighted_share``) or "weighted" (the draws
    follow weights a caller sets with ``RGSDCore.set_clip_weights``, uniform until then; ``rgsd train`` sets
    each clip's training-probe error to the power ``clip_weight_power``)."""
    failure_weighted_share: float = 0.5
    """With "failure_weighted" or "weighted": the share of draws that follow the clips' failure rates (or weights);
    the rest stay uniform,
    so every clip keeps at least (1 - share) of its uniform share."""
    failure_rate_memory: float = 100.0
    """With "failure_weighted": episodes per clip over which its failure rate is averaged (an EMA)."""
    failure_rate_per: str = "episode"
    """With "failure_weighted": "episode" (the share of a clip's imitation episodes that end in a failure) or
    "step" (failures per imitation step of the clip: a clip whose episodes fail soon after every start
    scores high, one that fails only late does not; with RSI, episodes started near a clip's end cannot fail,
    so the per-episode rate of a long clip stays high after it is learned)."""
    reward: str = "encoder"
    """Reward of imitation episodes: "encoder" (RGSD: C + kappa mu(s')^T z_m) or "tracking" (a DeepMimic-style
    pose/velocity/end-effector/root tracking reward, ``rgsd_envs.rewards.tracking``: a control experiment).
    Discovery episodes always use the trainable encoder's reward."""
    tracking_scale: float = 20.0
    """With reward "tracking": its value on the reference (the encoder reward's maximum 2 kappa at kappa 10)."""
    fall_height: float = 0.35
    """An episode ends when the pelvis drops below this height (m)..."""
    contact_termination: bool = True
    """...or when a body other than the feet and toes touches the floor."""
    obs_mode: str = "flat"
    """"flat": one 375-D Box; "dict": {"proprio": 359, "skill": 16}."""
    autoreset_mode: str = "SameStep"
    """Vector env autoreset: "SameStep" (final_obs in info) or "NextStep"."""
    backend: str = "mujoco"
    """Simulator: "mujoco" (native MuJoCo on CPU threads) or "warp" (MuJoCo Warp on ``device``, a GPU;
    needs the extra ``rgsd-envs[warp]``)."""
    timestep: float = DEFAULT_TIMESTEP
    armature_factor: float | None = None
    """Hinge armature as a multiple of kp * timestep^2 (None: ``HumanoidConfig``'s, 2). It already scales with
    the timestep squared; ``benchmarks/joint_inertia.py`` shows it against the links' own inertia."""
    num_threads: int | None = None
    """C threads stepping the worlds (default: one per core, at most num_envs)."""
    device: str = "cpu"
    """Torch device of the env-side tensors (observations, rewards, skills)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.p_imitation <= 1.0:
            raise ValueError(f"p_imitation must be in [0, 1], got {self.p_imitation}")
        if self.obs_mode not in ("flat", "dict"):
            raise ValueError(f"obs_mode must be 'flat' or 'dict', got {self.obs_mode!r}")
        if self.autoreset_mode not in ("SameStep", "NextStep"):
            raise ValueError(f"autoreset_mode must be 'SameStep' or 'NextStep', got {self.autoreset_mode!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if self.clip_sampling not in CLIP_SAMPLING:
            raise ValueError(f"clip_sampling must be one of {', '.join(CLIP_SAMPLING)}, got {self.clip_sampling!r}")
        if self.deviation_metric not in DEVIATION_METRICS:
            raise ValueError(
                f"deviation_metric must be one of {', '.join(DEVIATION_METRICS)}, got {self.deviation_metric!r}"
            )
        if not (0 < self.deviation_min <= self.deviation_threshold or not self.deviation_adaptive):
            raise ValueError(
                f"deviation_min must be in (0, deviation_threshold], got {self.deviation_min}, {self.deviation_threshold}"
            )
        if self.deviation_heading_deg is not None and not 0 < self.deviation_heading_deg <= 180:
            raise ValueError(f"deviation_heading_deg must be in (0, 180] or null, got {self.deviation_heading_deg}")
        if not (self.deviation_adaptive_k > 0 and self.deviation_error_memory >= 1):
            raise ValueError("deviation_adaptive_k must be > 0 and deviation_error_memory >= 1")
        if self.reward not in REWARDS:
            raise ValueError(f"reward must be one of {', '.join(REWARDS)}, got {self.reward!r}")
        if not self.tracking_scale > 0:
            raise ValueError(f"tracking_scale must be > 0, got {self.tracking_scale}")
        if not 0.0 <= self.failure_weighted_share <= 1.0 or self.failure_rate_memory < 1.0:
            raise ValueError("failure_weighted_share must be in [0, 1] and failure_rate_memory >= 1")
        if self.failure_rate_per not in FAILURE_RATE_PER:
            raise ValueError(
                f"failure_rate_per must be one of {', '.join(FAILURE_RATE_PER)}, got {self.failure_rate_per!r}"
            )
        if self.armature_factor is not None and self.armature_factor < 0:
            raise ValueError(f"armature_factor must be >= 0 or null, got {self.armature_factor}")
        if self.eval_kappa is not None and self.eval_kappa < 0:
            raise ValueError(f"eval_kappa must be >= 0, got {self.eval_kappa}")

    def without_early_termination(self, **changes: object) -> EnvConfig:
        """A copy in which only the clip's end (or instability) ends an episode: no deviation,
        contact or pelvis-height termination, as evaluation and tracking probes need (SPEC §6)."""
        return dataclasses.replace(
            self, deviation_termination=False, contact_termination=False, fall_height=-math.inf, **changes
        )
