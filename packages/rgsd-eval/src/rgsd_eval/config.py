"""Evaluation settings: one dataclass, loadable from YAML (``rgsd eval --config``), saved with the report."""

from __future__ import annotations

from dataclasses import dataclass

from rgsd_envs.render import DEFAULT_TILE_SIZE
from rgsd_eval.features import WINDOW
from rgsd_eval.fid import DEFAULT_EPS
from rgsd_eval.latents import DEFAULT_BEST_OF, parse_latent_mode

PAPER_KAPPAS = (20.0, 100.0, 1000.0)
"""The paper's diversity sweep."""


@dataclass
class EvalConfig:
    """What ``rgsd eval`` runs and draws; the defaults finish the demo set in minutes on 2 cores."""

    rollouts: int = 16
    """Rollouts per clip and kappa with z ~ vMF(z_m, kappa); also per clip for imitation when action_noise > 0."""
    kappas: tuple[float, ...] = PAPER_KAPPAS
    """vMF concentrations of the diversity sweep."""
    latent: str = "auto"
    """"encoder" (z_m of the run's encoder), "stored" (the latents the run wrote per clip, method.json's
    ``clip_latents``), "best-of-N" (lowest-error of N uniform latents per clip), or "auto": what the run's
    method.json says; without one, best-of-``best_of`` for runs without a grounded encoder (p_imitation 0, random
    encoder init, no encoder.pt), else encoder."""
    best_of: int = DEFAULT_BEST_OF
    """N of best-of-N when ``latent`` is "auto" (the paper uses 500)."""
    action_noise: float = 0.0
    """Std of Gaussian noise added to the policy's mean action. With 0 the policy and the simulator are
    deterministic, so all imitation rollouts of a clip are identical and one is run."""
    seed: int = 0
    device: str = "auto"
    """Torch device of the policy's forward pass: "auto" (cuda when available), "cpu", "cuda" or "cuda:N" (the
    mujoco simulator stays on the CPU)."""
    batch_size: int = 512
    """Worlds stepped at once (all clips x rollouts are split into batches of this size)."""
    torch_threads: int | None = 1
    """Intra-op threads of the policy forward pass (None: torch's default)."""
    fid_window: int = WINDOW
    """Frames per FID feature window."""
    fid_eps: float = DEFAULT_EPS
    """Added to both covariance diagonals (feature units squared) before the matrix square root."""
    video: bool = True
    video_clips: int = 5
    """Clips that get videos (the first clip of each category first)."""
    video_variants: int = 3
    """vMF variants shown side by side in each variants video."""
    video_kappa: float | None = None
    """kappa of the variants video (None: the smallest, most varied, of ``kappas``)."""
    video_size: tuple[int, int] = DEFAULT_TILE_SIZE
    """Width and height (even) of one video tile (480 x 360: watchable; 96 x 72 renders fast for tests)."""
    video_frame_step: int = 2
    """Render every n-th frame (the video plays at 30/n fps, in real time)."""
    trajectory_kappa: float | None = None
    """kappa of the top-view trajectory figure (None: the middle of ``kappas``)."""
    trajectory_rollouts: int = 150
    """Most vMF trajectories drawn per clip in the top-view figure (the paper shows 150)."""
    sweep_clips: int = 5
    """Clips shown in the kappa-sweep figure (the first clip of each category first)."""
    progress: bool = True
    """tqdm progress bars on stderr."""

    def __post_init__(self) -> None:
        self.kappas = tuple(float(k) for k in self.kappas)
        self.video_size = tuple(int(v) for v in self.video_size)  # type: ignore[assignment]
        parse_latent_mode(self.latent)
        checks = {
            "rollouts": self.rollouts >= 1,
            "kappas": len(self.kappas) >= 1 and all(k > 0 for k in self.kappas),
            "best_of": self.best_of >= 1,
            "action_noise": self.action_noise >= 0,
            "batch_size": self.batch_size >= 1,
            "fid_window": self.fid_window >= 2,
            "fid_eps": self.fid_eps >= 0,
            "video_clips": self.video_clips >= 0,
            "video_variants": self.video_variants >= 1,
            "video_size": len(self.video_size) == 2 and all(v >= 2 and v % 2 == 0 for v in self.video_size),
            "video_frame_step": self.video_frame_step >= 1,
            "trajectory_rollouts": self.trajectory_rollouts >= 0,
            "sweep_clips": self.sweep_clips >= 1,
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"invalid eval setting {bad[0]} = {getattr(self, bad[0])!r}; see EvalConfig's field docs")

    @property
    def imitation_rollouts(self) -> int:
        """Imitation rollouts per clip: ``rollouts`` with action noise, else 1 (they would be identical)."""
        return self.rollouts if self.action_noise > 0 else 1

    @property
    def video_kappa_value(self) -> float:
        """kappa of the variants video."""
        return float(self.video_kappa) if self.video_kappa is not None else min(self.kappas)

    @property
    def trajectory_kappa_value(self) -> float:
        """kappa of the top-view trajectory figure."""
        if self.trajectory_kappa is not None:
            return float(self.trajectory_kappa)
        ks = sorted(self.kappas)
        return ks[len(ks) // 2]
