"""Configuration of RGSD-SMPL-v0 (dataclasses that load from YAML)."""

from __future__ import annotations

import dataclasses
import math
import os
import types
from dataclasses import dataclass, field
from pathlib import Path

from rgsd_envs.envs.observations import HUMANOID_LAYOUT, SKILL_DIM, ObservationLayout
from rgsd_envs.humanoid.mjcf import DEFAULT_TIMESTEP
from rgsd_envs.sim import BACKENDS
from rgsd_envs.utils.config import UNNAMED, check_scalar_fields
from rgsd_envs.utils.device import check_device_name
from rgsd_envs.utils.files import InputFileError

CLIP_SAMPLING = ("uniform", "failure_weighted")
DEVIATION_METRICS = ("mean", "max")


@dataclass
class DeviationConfig:
    """When an imitation episode ends because it left its reference (``rgsd_envs.envs.termination``)."""

    threshold: float = 0.5
    """The episode ends when the body-position error (``metric``) exceeds this (m); with ``adaptive``, the loosest
    per-clip threshold. ``.inf``: no deviation rule (evaluation: ``EnvConfig.without_early_termination``)."""
    metric: str = "mean"
    """Body error of the rule: "mean" over the 24 bodies (the Cartesian error) or "max" (the farthest body, as PHC
    at 0.25 m and ProtoMotions at 0.5 m)."""
    adaptive: bool = False
    """Per-clip thresholds clamp(2 x EMA of the clip's error, ``min``, ``threshold``) that tighten as the clip is
    tracked better (``termination.ADAPTIVE_K``, ``termination.ERROR_MEMORY``)."""
    min: float = 0.25
    """Tightest per-clip threshold of ``adaptive`` (m)."""
    heading_deg: float | None = None
    """Also end the episode when the pelvis heading is off the reference's by more than this (degrees; None: no
    heading rule). The reward is nearly blind to a slow turn (its inputs are heading-relative)."""

    def __post_init__(self) -> None:
        check_scalar_fields(self)
        if self.metric not in DEVIATION_METRICS:
            raise ValueError(f"deviation.metric must be one of {', '.join(DEVIATION_METRICS)}, got {self.metric!r}")
        if not self.threshold >= 0:
            raise ValueError(f"deviation.threshold must be >= 0 (.inf: no rule), got {self.threshold}")
        if self.adaptive and not 0 < self.min <= self.threshold:
            raise ValueError(f"deviation.min must be in (0, deviation.threshold], got {self.min}, {self.threshold}")
        if self.heading_deg is not None and not 0 < self.heading_deg <= 180:
            raise ValueError(f"deviation.heading_deg must be in (0, 180] or null, got {self.heading_deg}")


DEVIATION_KEYS = tuple(f.name for f in dataclasses.fields(DeviationConfig))
"""The fields of the deviation rule: a trainer may change them mid-run as a curriculum step
(``RGSDCore.set_deviation_rule``)."""
NO_DEVIATION = DeviationConfig(threshold=math.inf)
"""The deviation rule switched off (only a fall or the clip's end ends an episode)."""
CPU_MUJOCO = types.MappingProxyType({"backend": "mujoco", "device": "cpu"})
"""Env settings of a run played on any machine (``rgsd view``, ``rgsd play``, a pretrained folder): native MuJoCo on
the CPU, whichever backend trained it (a policy scores the same on both: ``rgsd_eval.parity``)."""


@dataclass
class ClipSamplingConfig:
    """How reference state initialisation picks each episode's clip."""

    mode: str = "uniform"
    """"uniform", or "failure_weighted" (as ProtoMotions: clips whose imitation episodes end in a failure are drawn
    more often; each clip's failure rate is an EMA over its last ``core.FAILURE_RATE_MEMORY`` episodes)."""
    failure_share: float = 0.5
    """With "failure_weighted": the share of draws that follow the clips' failure rates; the rest stay uniform, so
    every clip keeps at least (1 - share) of its uniform share."""

    def __post_init__(self) -> None:
        check_scalar_fields(self)
        if self.mode not in CLIP_SAMPLING:
            raise ValueError(f"clip_sampling.mode must be one of {', '.join(CLIP_SAMPLING)}, got {self.mode!r}")
        if not 0.0 <= self.failure_share <= 1.0:
            raise ValueError(f"clip_sampling.failure_share must be in [0, 1], got {self.failure_share}")


MOTIONS_HINT = "give 'demo', clip files or folders of clips"
"""What a config's ``motions`` takes, for its errors."""


def check_motions_given(motions: str | list[str]) -> None:
    """An error naming the ``motions`` field (``from_dict`` puts the file and section in front) for a config whose
    ``motions`` names nothing (an empty string or list)."""
    if not motions:
        raise InputFileError(UNNAMED, f"is empty ({motions!r}): {MOTIONS_HINT}", "motions")


def missing_motion(motions: str | os.PathLike | list[str]) -> str | None:
    """The first item of ``motions`` that is neither "demo" nor an existing file or folder, or None."""
    items = [motions] if isinstance(motions, (str, os.PathLike)) else list(motions)
    return next((str(m) for m in items if str(m) != "demo" and not Path(m).exists()), None)


@dataclass
class EnvConfig:
    """Everything that shapes an RGSD-SMPL-v0 episode; see the env's docstring."""

    motions: str | list[str] = "demo"
    """Reference clips: "demo" (built-in), a clip file, a folder of clips, or a list."""
    p_imitation: float = 0.7
    """Probability p of an imitation episode (z = z_m); otherwise discovery (uniform z)."""
    eval_kappa: float | None = None
    """If set, every episode is an evaluation episode with z ~ vMF(z_m, eval_kappa)."""
    deviation: DeviationConfig = field(default_factory=DeviationConfig)
    """The deviation rule of imitation episodes."""
    clip_sampling: ClipSamplingConfig = field(default_factory=ClipSamplingConfig)
    """How each episode's clip is drawn."""
    discovery_end_frame: int | None = None
    """Discovery episodes are truncated when the clip's clock reaches this frame index, past the clip's last
    frame if it is larger (the observation's phase then holds at 1); None: at the clip's last frame, as every
    episode. Longer discovery episodes let a latent held for many steps (Meta Motivo's 150) be redrawn within one."""
    fall_height: float = 0.35
    """An episode ends when the pelvis drops below this height (m)..."""
    contact_termination: bool = True
    """...or when a body other than the feet and toes touches the floor."""
    backend: str = "mujoco"
    """Simulator: "mujoco" (native MuJoCo on CPU threads) or "warp" (MuJoCo Warp on ``device``, a GPU;
    needs the extra ``rgsd-envs[warp]``)."""
    timestep: float = DEFAULT_TIMESTEP
    """Physics timestep (s); the hinge armature scales with its square (``HumanoidConfig.armature_factor``)."""
    num_threads: int | None = None
    """C threads stepping the worlds (default: one per core, at most num_envs)."""
    device: str = "cpu"
    """Torch device of the env-side tensors (observations, rewards, skills): "cpu", "cuda", "cuda:N" or "auto" (cuda
    when available)."""
    skill_dim: int = SKILL_DIM
    """Dimension of the skill z (a unit vector; the paper's 16). The policy observation is ``[o_t, z]`` of size
    359 + skill_dim and the encoder maps states into R^skill_dim; more clips than dimensions cannot all be
    orthogonal, so hundreds of clips may want 32 or 64 (docs/results.md, Clip scaling)."""

    def __post_init__(self) -> None:
        # keyword arguments of gym.make may give the groups as mappings
        if isinstance(self.deviation, dict):
            self.deviation = DeviationConfig(**self.deviation)
        if isinstance(self.clip_sampling, dict):
            self.clip_sampling = ClipSamplingConfig(**self.clip_sampling)
        check_motions_given(self.motions)
        if isinstance(self.skill_dim, bool) or not isinstance(self.skill_dim, int) or self.skill_dim < 2:
            raise ValueError(f"skill_dim must be an integer >= 2, got {self.skill_dim!r}")
        check_scalar_fields(self)
        check_device_name(self.device)
        if not 0.0 <= self.p_imitation <= 1.0:
            raise ValueError(f"p_imitation must be in [0, 1], got {self.p_imitation}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if self.eval_kappa is not None and not self.eval_kappa >= 0:
            raise ValueError(f"eval_kappa must be >= 0, got {self.eval_kappa}")
        if self.discovery_end_frame is not None and self.discovery_end_frame < 1:
            raise ValueError(f"discovery_end_frame must be >= 1 or None, got {self.discovery_end_frame}")
        if math.isnan(self.fall_height):
            raise ValueError("fall_height must be a height in m (-.inf: no height rule), got nan")
        if not self.timestep > 0:
            raise ValueError(f"timestep must be > 0, got {self.timestep}")

    @property
    def layout(self) -> ObservationLayout:
        """The observation layout of this env: the humanoid's frame with ``skill_dim``."""
        return dataclasses.replace(HUMANOID_LAYOUT, skill_dim=self.skill_dim)

    def without_early_termination(self, **changes: object) -> EnvConfig:
        """A copy in which only the clip's end (or instability) ends an episode: no deviation,
        contact or pelvis-height termination, as evaluation and tracking probes need (docs/evaluation.md)."""
        return dataclasses.replace(
            self, deviation=NO_DEVIATION, contact_termination=False, fall_height=-math.inf, **changes
        )
