"""The viewer's simulation: one policy world and its vMF variants stepped live on the CPU, with the reference.

World 0 runs the clip's latent z_m (the run's own choice: ``rgsd_agents.run_skills``); worlds 1..K run
z ~ vMF(z_m, kappa). All start at the clip's first reference frame and run the policy's mean action in the
run's evaluation environment (no early termination), as ``rgsd play`` does; at the clip's end they start
over. Nothing here draws: ``viewer.app`` shows the state, and tests drive this object directly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch

import rgsd_envs  # noqa: F401  (registers the environments)
from rgsd_agents.run_skills import ClipLatents, choose_latents, default_clip
from rgsd_envs.envs import skills
from rgsd_envs.envs.torch_env import RGSDTorchEnv
from rgsd_envs.motion.library import MotionLib
from rgsd_eval.metrics import frame_errors
from rgsd_eval.rollouts import steer_tracks
from rgsd_eval.runs import LoadedRun


@dataclass
class SessionConfig:
    """What the live simulation starts with."""

    variants: int = 3
    """vMF variants beside the policy (worlds 1..variants)."""
    kappa: float = 20.0
    """Concentration of the variants' z ~ vMF(z_m, kappa): smaller spreads them further."""
    seed: int = 0
    """Seed of the first variants; every "new variants" draws the next ones."""

    def __post_init__(self) -> None:
        if self.variants < 0:
            raise ValueError(f"variants must be >= 0, got {self.variants}")
        if not self.kappa > 0:
            raise ValueError(f"kappa must be positive, got {self.kappa}")


class ViewerSession:
    """A run's policy on one clip, with K variants and the reference, stepped one control step at a time."""

    def __init__(
        self, loaded: LoadedRun, lib: MotionLib, cfg: SessionConfig, latents_file: str | os.PathLike | None = None
    ) -> None:
        """Make the environment (1 + ``cfg.variants`` worlds), choose the clip latents (``run_skills``) and
        start on the default clip (``run_skills.default_clip``)."""
        self.loaded, self.lib, self.cfg = loaded, lib, cfg
        self.env = RGSDTorchEnv(
            1 + cfg.variants,
            encoder_reward=False,
            config=loaded.env_config,
            motions=lib,
            encoder=None if loaded.encoder_path is None else str(loaded.encoder_path),
        )
        try:
            z_m = self.env.core.clip_embeddings.cpu().double().numpy()
            self.latents: ClipLatents = choose_latents(loaded, lib, z_m, latents_file)
        except Exception:
            self.env.close()
            raise
        self.kappa = float(cfg.kappa)
        self.rng = np.random.default_rng(cfg.seed)
        self.clip = 0
        self.frame = 0
        self.skills = np.zeros((self.num_worlds, self.latents.centres.shape[1]))
        self._obs: torch.Tensor | None = None
        self.reset(default_clip(list(lib.names)))

    @property
    def num_worlds(self) -> int:
        """1 + the number of variants."""
        return self.env.num_envs

    @property
    def clip_name(self) -> str:
        """The current clip's name."""
        return self.lib.names[self.clip]

    @property
    def num_frames(self) -> int:
        """Frames of the current clip."""
        return int(self.lib.num_frames[self.clip])

    def clip_index(self, name: str) -> int:
        """The index of the clip ``name``, or a ValueError listing the clip names."""
        if name not in self.lib.names:
            raise ValueError(f"no clip named {name!r}; the run's clips: {', '.join(self.lib.names)}")
        return self.lib.names.index(name)

    def sample_skills(self) -> np.ndarray:
        """(1 + K, 16): the clip's latent, then K draws of vMF(z_m, kappa)."""
        z_m = self.latents.centres[self.clip]
        draws = [skills.sample_vmf(self.rng, z_m, self.kappa) for _ in range(self.num_worlds - 1)]
        return np.stack([z_m, *draws])

    def reset(self, clip: int | str | None = None, new_variants: bool = False) -> None:
        """Start every world at the first frame of ``clip`` (default: the current one); variants redrawn on a new
        clip or with ``new_variants``."""
        c = self.clip if clip is None else self.clip_index(clip) if isinstance(clip, str) else int(clip)
        if not 0 <= c < self.lib.num_clips:
            raise ValueError(f"clip index must be in [0, {self.lib.num_clips}), got {c}")
        if c != self.clip or new_variants or not self.skills.any():
            self.clip = c
            self.skills = self.sample_skills()
        n = self.num_worlds
        options = {"clip": [c] * n, "start_frame": [0] * n, "task": "imitation", "skill": self._skills_at(0)}
        self._obs, _ = self.env.reset(seed=self.cfg.seed, options=options)
        self.frame = 0

    def set_kappa(self, kappa: float) -> None:
        """New concentration of the variants; they are redrawn and restart from the clip's first frame."""
        if not kappa > 0:
            raise ValueError(f"kappa must be positive, got {kappa}")
        self.kappa = float(kappa)
        self.reset(new_variants=True)

    def new_variants(self) -> None:
        """Draw new variants z ~ vMF(z_m, kappa) and restart from the clip's first frame."""
        self.reset(new_variants=True)

    def step(self) -> None:
        """One control step of every world; past the clip's last frame every world starts over."""
        if self.frame + 1 >= self.num_frames:
            self.reset()
            return
        if self.latents.tracks is not None and self.frame > 0:  # per-step latents: the track's row for this step
            self.env.set_skills(np.arange(self.num_worlds), torch.as_tensor(self._skills_at(self.frame)))
            self._obs = self.env.observations()
        with torch.no_grad():
            actions = torch.as_tensor(self.loaded.policy.act(self._obs), dtype=torch.float32)
        self.env.transition(actions.to(self.env.device))
        self._obs = self.env.observations()
        self.frame += 1

    def body_positions(self) -> np.ndarray:
        """(1 + K, 24, 3) the worlds' body positions (m)."""
        return self.env.core.backend.state().body_pos.cpu().double().numpy()

    def pelvis_positions(self) -> np.ndarray:
        """(1 + K, 3) the worlds' pelvis positions (m)."""
        return self.body_positions()[:, 0]

    def reference_positions(self) -> np.ndarray:
        """(24, 3) the clip's body positions at the current frame."""
        return self.lib.clips[self.clip].body_pos[min(self.frame, self.num_frames - 1)].astype(np.float64)

    def errors_cm(self) -> np.ndarray:
        """(1 + K,) each world's Cartesian error to the reference frame (cm, mean over bodies)."""
        pos = self.body_positions()
        return 100.0 * frame_errors(pos, np.broadcast_to(self.reference_positions(), pos.shape))

    def close(self) -> None:
        """Free the environment."""
        self.env.close()

    def _skills_at(self, frame: int) -> np.ndarray:
        """(1 + K, 16) the worlds' skills for the step from ``frame``: their z, or the clip's track turned to it."""
        tracks = self.latents.tracks
        if tracks is None:
            return self.skills
        row = tracks[self.clip][min(frame, tracks[self.clip].shape[0] - 1)]
        centre = np.broadcast_to(self.latents.centres[self.clip], self.skills.shape)
        rows = np.broadcast_to(row, self.skills.shape)[:, None]
        return steer_tracks(rows, centre, self.skills)[:, 0]
