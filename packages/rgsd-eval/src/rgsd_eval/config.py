"""Evaluation settings: one dataclass, loadable from YAML (``rgsd eval --config``), saved with the report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rgsd_envs.motion.selection import spread_clips
from rgsd_envs.render import DEFAULT_TILE_SIZE
from rgsd_envs.utils.config import shown_value
from rgsd_eval.features import WINDOW
from rgsd_eval.fid import DEFAULT_EPS
from rgsd_eval.latents import parse_latent_mode
from rgsd_eval.protocol import PAPER_KAPPAS, POLICY_NOISE, QUICK, get_protocol
from rgsd_eval.protocol import sweep_clip_ids as choose_sweep_clips

__all__ = ["PAPER_KAPPAS", "EvalConfig"]


@dataclass
class EvalConfig:
    """What ``rgsd eval`` runs and draws. The defaults are the quick protocol's (``rgsd_eval.protocol``: the
    demo set in minutes on 2 cores); ``EvalConfig.for_protocol("paper")`` is the paper's."""

    protocol: str = QUICK.name
    """The protocol the settings started from ("quick" or "paper"; ``rgsd_eval.protocol``); the report names it
    and every setting that differs from it."""
    rollouts: int = QUICK.rollouts
    """Rollouts per clip and kappa with z ~ vMF(z_m, kappa); also per clip for imitation when the rollouts are
    stochastic (``action_noise`` "policy" or > 0)."""
    kappas: tuple[float, ...] = QUICK.kappas
    """vMF concentrations of the diversity sweep."""
    discovery_kappa: float | None = QUICK.discovery_kappa
    """kappa of the discovery evaluation (the paper: 50): ``rollouts`` vMF rollouts on every clip, ERR and FID per
    clip and category; None: none beyond the sweep."""
    sweep_all_clips: bool = QUICK.sweep_all_clips
    """Roll the sweep's kappas out on every clip (True) or only on the ``sweep_clips`` shown (the paper's three)."""
    sweep_categories: tuple[str, ...] = QUICK.sweep_categories
    """Categories whose first clip leads the sweep's clips (the paper protocol: run, sidestep, backward); the
    first clip of every other category follows (``protocol.sweep_clip_ids``). A category set here (``--set``,
    ``--config``) that no clip has is an error; a protocol's own lead where the motions have them."""
    latent: str = "auto"
    """"encoder" (z_m of the run's encoder), "stored" (the latents the run wrote per clip, method.json's
    ``clip_latents``), "tracking" (a latent per step the run wrote, method.json's ``tracking_latents``: Meta
    Motivo's tracking inference), "best-of-N" (lowest-error of N uniform latents per clip), or "auto": what the run's
    method.json says; without one, best-of-``best_of`` for runs without a grounded encoder (p_imitation 0, random
    encoder init, no encoder.pt), else encoder."""
    per_step_latents: bool = QUICK.per_step_latents
    """Whether ``latent`` "auto" scores a run whose method.json names per-step latents (``latent_choice``
    "tracking": Meta Motivo) with them (True) or with the one latent per clip it stored (False: its
    ``clip_latents``, B averaged over the clip; the paper protocol, which scores every method with one latent per
    motion)."""
    best_of: int = QUICK.best_of
    """N of best-of-N when ``latent`` is "auto" (the paper uses 500)."""
    action_noise: float | Literal["policy"] = QUICK.action_noise
    """Std of Gaussian noise added to the policy's mean action: "policy" (each run's own action std, read from its
    policy.pt or config: ``runs.action_std``; the paper protocol) or one number for every run (an override). With 0
    the policy is deterministic and one imitation rollout is run per clip: on MuJoCo (and warp on the CPU) more would
    be identical; warp on CUDA orders contacts as its GPU threads run, so its rollouts are not repeatable bit for bit
    and the one rollout is one of several possible."""
    seed: int = 0
    """Seeds the best-of-N candidate latents, the vMF samples (per clip and kappa) and the rollouts' starts and action
    noise."""
    device: str = "auto"
    """Torch device of the policy's forward pass: "auto" (cuda when available), "cpu", "cuda" or "cuda:N". A mujoco
    run's simulator stays on the CPU; a warp run's worlds run on this device (``runs.load_run``: its env follows the
    policy's device, as it followed the learner's in training)."""
    max_clips: int | None = None
    """Evaluate at most this many clips of the motion set (None: every clip): a larger set is cut to a deterministic
    subset spread over its categories (``rgsd_envs.motion.selection.spread_clips``); the report and metrics.json
    (``clips_selected``) say how many of how many."""
    batch_size: int = 512
    """Worlds stepped at once (all clips x rollouts are split into batches of this size)."""
    torch_threads: int | None = 1
    """Intra-op threads of the policy forward pass (None: torch's default)."""
    fid_window: int = WINDOW
    """Frames per FID feature window. A clip needs ``fid_window`` + 1 frames (two windows) for an FID; a shorter one
    is evaluated without it, named in the report."""
    fid_eps: float = DEFAULT_EPS
    """Added to both covariance diagonals (feature units squared) before the matrix square root."""
    video: bool = True
    """Write the videos and HTML replays of the video clips (``--no-video``: False)."""
    video_clips: int = 5
    """Clips that get videos (the first clip of each category first)."""
    video_variants: int = 3
    """vMF variants shown side by side in each variants video."""
    video_kappa: float | None = None
    """kappa of the variants video (None: ``discovery_kappa`` if set, else the smallest, most varied, of
    ``kappas``); rolled out on the video clips if the sweep did not."""
    video_size: tuple[int, int] = DEFAULT_TILE_SIZE
    """Width and height (even) of one video tile (480 x 360: watchable; 96 x 72 renders fast for tests)."""
    video_frame_step: int = 2
    """Render every n-th frame (the video plays at 30/n fps, in real time)."""
    trajectory_kappa: float | None = QUICK.trajectory_kappa
    """kappa of the top-view trajectory figure (``--trajectory-kappa``; None: ``discovery_kappa`` if set, else
    the middle of ``kappas``); a kappa the sweep does not roll out on every clip is rolled out for the figure."""
    trajectory_rollouts: int = QUICK.trajectory_rollouts
    """Most vMF trajectories drawn per clip in the top-view figure (the paper shows 150 per method)."""
    sweep_clips: int = QUICK.sweep_clips
    """Clips shown in the kappa-sweep figure (see ``sweep_categories``)."""
    progress: bool = True
    """tqdm progress bars on stderr when it is a terminal (none in a log file or pipe)."""

    def __post_init__(self) -> None:
        get_protocol(self.protocol)
        self.kappas = tuple(float(k) for k in self.kappas)
        self.sweep_categories = tuple(str(c) for c in self.sweep_categories)
        for name in ("discovery_kappa", "trajectory_kappa", "video_kappa"):
            if getattr(self, name) is not None:
                setattr(self, name, float(getattr(self, name)))
        self.video_size = tuple(int(v) for v in self.video_size)  # type: ignore[assignment]
        parse_latent_mode(self.latent)
        rules = {  # field: (whether it holds, the rule an error states)
            "rollouts": (self.rollouts >= 1, "must be >= 1"),
            "kappas": (
                len(self.kappas) >= 1 and all(k > 0 for k in self.kappas),
                "must be a non-empty list of kappas > 0",
            ),
            "discovery_kappa": (self.discovery_kappa is None or self.discovery_kappa > 0, "must be > 0 or null"),
            "trajectory_kappa": (self.trajectory_kappa is None or self.trajectory_kappa > 0, "must be > 0 or null"),
            "video_kappa": (self.video_kappa is None or self.video_kappa > 0, "must be > 0 or null"),
            "best_of": (self.best_of >= 1, "must be >= 1"),
            "action_noise": (
                self.action_noise == POLICY_NOISE
                or (isinstance(self.action_noise, (int, float)) and self.action_noise >= 0),
                f"must be a std >= 0 or {POLICY_NOISE!r}",
            ),
            "max_clips": (self.max_clips is None or self.max_clips >= 1, "must be >= 1 or null"),
            "batch_size": (self.batch_size >= 1, "must be >= 1"),
            "fid_window": (self.fid_window >= 2, "must be >= 2"),
            "fid_eps": (self.fid_eps >= 0, "must be >= 0"),
            "video_clips": (self.video_clips >= 0, "must be >= 0"),
            "video_variants": (self.video_variants >= 1, "must be >= 1"),
            "video_size": (
                len(self.video_size) == 2 and all(v >= 2 and v % 2 == 0 for v in self.video_size),
                "must be [width, height], each even and >= 2",
            ),
            "video_frame_step": (self.video_frame_step >= 1, "must be >= 1"),
            "trajectory_rollouts": (self.trajectory_rollouts >= 0, "must be >= 0"),
            "sweep_clips": (self.sweep_clips >= 1, "must be >= 1"),
            "seed": (self.seed >= 0, "must be >= 0"),
        }
        bad = next((k for k, (ok, _) in rules.items() if not ok), None)
        if bad is not None:
            raise ValueError(f"{bad} {rules[bad][1]}, got {shown_value(getattr(self, bad))}")

    @classmethod
    def for_protocol(cls, name: str, **changes: Any) -> EvalConfig:
        """The settings of protocol ``name`` ("quick", "paper"), with ``changes`` on top."""
        return cls(**{**get_protocol(name).settings(), **changes})

    def overrides(self) -> dict[str, Any]:
        """The protocol's settings that this config changes: {field: value here}."""
        base = get_protocol(self.protocol).settings()
        return {k: getattr(self, k) for k, v in base.items() if getattr(self, k) != v}

    @property
    def stochastic(self) -> bool:
        """Whether rollouts add action noise ("policy" or a positive std)."""
        return self.action_noise == POLICY_NOISE or self.action_noise > 0

    @property
    def imitation_rollouts(self) -> int:
        """Imitation rollouts per clip: ``rollouts`` with action noise, else 1 (they would be identical)."""
        return self.rollouts if self.stochastic else 1

    @property
    def video_kappa_value(self) -> float:
        """kappa of the variants video."""
        if self.video_kappa is not None:
            return self.video_kappa
        return self.discovery_kappa if self.discovery_kappa is not None else min(self.kappas)

    @property
    def trajectory_kappa_value(self) -> float:
        """kappa of the top-view trajectory figure."""
        if self.trajectory_kappa is not None:
            return self.trajectory_kappa
        if self.discovery_kappa is not None:
            return self.discovery_kappa
        ks = sorted(self.kappas)
        return ks[len(ks) // 2]

    def evaluated_clip_ids(self, categories: Sequence[str]) -> list[int]:
        """Library indices of the clips evaluated, ascending: every clip, or ``max_clips`` of them spread over the
        categories."""
        if self.max_clips is None:
            return list(range(len(categories)))
        return spread_clips(categories, self.max_clips)  # every clip where there are at most max_clips

    def check_sweep_categories(self, categories: Sequence[str]) -> None:
        """A ValueError naming a ``sweep_categories`` entry set here (not the protocol's) that no clip has."""
        if "sweep_categories" not in self.overrides():
            return  # a protocol's categories lead where the motions have them (protocol.sweep_clip_ids)
        missing = [c for c in self.sweep_categories if c not in categories]
        if missing:
            raise ValueError(
                f"sweep_categories: no category {missing[0]!r} in the motions "
                f"(categories: {', '.join(dict.fromkeys(categories))})"
            )

    def sweep_clip_ids(self, categories: list[str]) -> list[int]:
        """Clips of the kappa-sweep figure (and of its rollouts unless ``sweep_all_clips``)."""
        return choose_sweep_clips(categories, self.sweep_clips, self.sweep_categories)

    def kappa_plan(self, categories: list[str], video_clips: list[int]) -> dict[float, list[int]]:
        """Every kappa rolled out and the clips it is rolled out on: the sweep's kappas first (on every clip or the
        sweep clips), then the discovery and top-view kappas on every clip, then the video kappa on the video
        clips; a kappa named twice gets the union of its clips."""
        every = list(range(len(categories)))
        sweep = every if self.sweep_all_clips else sorted(self.sweep_clip_ids(categories))
        plan: dict[float, set[int]] = {}
        for kappa in self.kappas:
            plan.setdefault(kappa, set()).update(sweep)
        for kappa in (self.discovery_kappa, self.trajectory_kappa_value):
            if kappa is not None:
                plan.setdefault(kappa, set()).update(every)
        if self.video and video_clips:
            plan.setdefault(self.video_kappa_value, set()).update(video_clips)
        return {k: sorted(v) for k, v in plan.items()}
