"""The viewer's simulation: one policy world and its vMF variants stepped live on the CPU, with the reference.

World 0 runs the session's skill z: the clip's latent z_m (the run's own choice: ``rgsd_agents.run_skills``),
or its slerp toward a second clip's latent (``set_blend``), or any unit vector a script gives (``set_skill``);
worlds 1..K run z ~ vMF(z, kappa). All start at the clip's first reference frame and run the policy's mean
action in the run's evaluation environment (no early termination), as ``rgsd play`` does; at the clip's end they
start over. A new blend or skill turns every world's skill at once, without a restart: the variants keep their
place around z. Nothing here draws: ``viewer.app`` shows the state, and tests drive this object directly.
"""

from __future__ import annotations

import math
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
    """Concentration of the variants' skills z' ~ vMF(z, kappa) around the policy's z: smaller spreads them further."""
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
        self.blend_clip: int | None = None
        """The clip whose latent the skill is blended toward (None: no blend)."""
        self.blend_t = 0.0
        """How far along the great circle from the clip's latent to ``blend_clip``'s the skill is, in [0, 1]."""
        self.given_skill: np.ndarray | None = None
        """A unit skill ``set_skill`` gave, in place of the clip's (None: the clip's, blended)."""
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

    def clip_number(self, clip: int | str, what: str = "clip") -> int:
        """The index of ``clip``, given by name or index; a ValueError for an unknown name or an index out of range
        (``what`` names the clip in the message)."""
        if isinstance(clip, str):
            return self.clip_index(clip)
        if not 0 <= int(clip) < self.lib.num_clips:
            raise ValueError(f"{what} index must be in [0, {self.lib.num_clips}), got {clip}")
        return int(clip)

    @property
    def skill_dim(self) -> int:
        """Numbers in a skill: the run's ``env.skill_dim``."""
        return int(self.latents.centres.shape[1])

    def skill(self) -> np.ndarray:
        """(16,) the policy's skill z: ``set_skill``'s, else the clip's latent slerped toward ``blend_clip``'s by
        ``blend_t`` (no blend: the clip's latent)."""
        if self.given_skill is not None:
            return self.given_skill
        z_m = self.latents.centres[self.clip]
        if self.blend_clip is None:
            return z_m
        return skills.slerp(z_m, self.latents.centres[self.blend_clip], self.blend_t)

    def skill_label(self) -> str:
        """The skill in words: ``walk``, ``walk -> run 0.40``, or a given one's cosine to the clip's latent."""
        if self.given_skill is not None:
            z_m = self.latents.centres[self.clip]
            cosine = float(self.given_skill @ z_m / np.linalg.norm(z_m))
            return f"given (set_skill), cosine {cosine:.2f} to {self.clip_name}'s"
        if self.blend_clip is None:
            return self.clip_name
        return f"{self.clip_name} -> {self.lib.names[self.blend_clip]} {self.blend_t:.2f}"

    def sample_skills(self) -> np.ndarray:
        """(1 + K, 16): the skill z (``skill``), then K draws of vMF(z, kappa)."""
        z = self.skill()
        draws = [skills.sample_vmf(self.rng, z, self.kappa) for _ in range(self.num_worlds - 1)]
        return np.stack([z, *draws])

    def reset(self, clip: int | str | None = None, new_variants: bool = False) -> None:
        """Start every world at the first frame of ``clip`` (default: the current one); variants redrawn on a new
        clip or with ``new_variants``."""
        c = self.clip if clip is None else self.clip_number(clip)
        if c != self.clip or new_variants or not self.skills.any():
            if c != self.clip:
                self.given_skill = None  # another clip: its own latent (blended as before)
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
        """Draw new variants z ~ vMF(z, kappa) and restart from the clip's first frame."""
        self.reset(new_variants=True)

    def set_blend(self, clip: int | str | None, t: float) -> None:
        """Make the skill slerp(z_m of the clip, z_m of ``clip``, ``t``) (``clip`` None: the clip's own latent), live:
        no restart (``turn_skills``). Replaces a ``set_skill`` skill; an unknown clip or t outside [0, 1] raises
        ValueError."""
        if not (math.isfinite(t) and 0.0 <= t <= 1.0):
            raise ValueError(f"blend t must be in [0, 1], got {t}")
        index = None if clip is None else self.clip_number(clip, "blend clip")
        self.blend_clip, self.blend_t, self.given_skill = index, float(t), None
        self.turn_skills()

    def set_skill(self, z: np.ndarray | list[float]) -> None:
        """Make the skill the unit vector along ``z`` (the run's ``skill_dim`` finite numbers, not all zero), live:
        no restart (``turn_skills``); a new clip, or ``set_blend``, goes back to the clips' latents."""
        self.given_skill = unit_skill(z, self.skill_dim)
        self.turn_skills()

    def turn_skills(self) -> None:
        """Give every world the current skill now, mid-clip: the policy z (``skill``), each variant its draw turned
        by the rotation that takes the old z to the new one (so it keeps its place around z; redrawn where the two
        are opposite, which no rotation in their plane joins)."""
        old, new = _unit(self.skills[0]), _unit(self.skill())
        if self.num_worlds > 1 and old @ new > OPPOSITE_COSINE:
            self.skills = steer_tracks(self.skills[None], old[None], new[None])[0]
            self.skills[0] = self.skill()
        else:
            self.skills = self.sample_skills()
        self.env.set_skills(np.arange(self.num_worlds), torch.as_tensor(self._skills_at(self.frame)))
        self._obs = self.env.observations()

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
        if self.latents.tracks is None:
            return self.skills
        row, centre = self._track_row(frame)
        rows = np.broadcast_to(row, self.skills.shape)[:, None]
        return steer_tracks(rows, np.broadcast_to(centre, self.skills.shape), self.skills)[:, 0]

    def _track_row(self, frame: int) -> tuple[np.ndarray, np.ndarray]:
        """The per-step latent for the step from ``frame`` and the skill it stands for: the clip's track row and
        its z_m; blended, the slerp of the two clips' rows (the blend clip's track repeats where it is shorter) and
        the slerp of their z_m (``skill``)."""
        tracks = self.latents.tracks
        assert tracks is not None
        track = tracks[self.clip]
        row = track[min(frame, track.shape[0] - 1)]
        if self.blend_clip is None or self.given_skill is not None:
            return row, self.latents.centres[self.clip]
        other = tracks[self.blend_clip]
        return skills.slerp(row, other[frame % other.shape[0]], self.blend_t), self.skill()


OPPOSITE_COSINE = -1.0 + 1e-6
"""Below this cosine an old and a new skill are opposite: the variants are drawn anew instead of turned."""


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def unit_skill(z: np.ndarray | list[float], dim: int) -> np.ndarray:
    """``z`` as a unit float64 vector of ``dim`` numbers; a ValueError saying what is wrong with it otherwise."""
    try:
        v = np.asarray(z, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"a skill is {dim} numbers (the run's env.skill_dim), got {z!r}") from None
    if v.shape != (dim,):
        got = f"{v.shape[0]}" if v.ndim == 1 else f"shape {v.shape}"
        raise ValueError(f"a skill is {dim} numbers (the run's env.skill_dim), got {got}")
    bad = np.flatnonzero(~np.isfinite(v))
    if bad.size:
        raise ValueError(f"a skill must be finite, got {v[bad[0]]} at index {bad[0]}")
    scale = float(np.abs(v).max())
    if scale == 0.0:
        raise ValueError("a skill must not be all zeros: it is a direction (scaled to unit length)")
    v = v / scale  # first to the largest entry: a norm of huge numbers would overflow
    return v / np.linalg.norm(v)
