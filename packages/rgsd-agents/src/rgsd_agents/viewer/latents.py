"""Each clip's latent as the run's own method picks it, for the viewer.

The encoder's z_m, the latents the run stored (CALM's ``clip_latents.json``), the per-step latents of Meta
Motivo's tracking inference (their mean is the clip's latent, and the track is turned to a variant's z), or,
for a run that picks by best-of-N (DIAYN and the other unguided baselines), the latents ``rgsd eval`` chose:
its ``<report>/<run>/clip_latents.json``, given with ``--latents``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rgsd_envs.motion.library import MotionLib
from rgsd_envs.runs.run_dir import load_clip_latents, load_tracking_latents
from rgsd_eval.rollouts import track_centres
from rgsd_eval.runs import LoadedRun, best_of_latents_needed


@dataclass
class ClipLatents:
    """(clips, 16) each clip's latent, and where it came from; per-step tracks where the run has them."""

    centres: np.ndarray
    source: str
    tracks: list[np.ndarray] | None = None
    """Per clip (frames - 1, 16) latents, one per step (None: one latent per clip)."""


def choose_latents(
    loaded: LoadedRun, lib: MotionLib, z_m: np.ndarray, latents_file: str | os.PathLike | None = None
) -> ClipLatents:
    """The run's clip latents (module docstring; ``z_m``: the env's clip embeddings); ``latents_file`` (a
    clip_latents.json) overrides the run's choice."""
    names = list(lib.names)
    if latents_file is not None:
        z = load_clip_latents(latents_file, names).double().numpy()
        return ClipLatents(z, f"{Path(latents_file).name} (given)")
    kind = loaded.latent.kind
    if kind == "stored":
        return ClipLatents(load_clip_latents(loaded.clip_latents, names).double().numpy(), "stored clip latents")
    if kind == "tracking":
        per_step = load_tracking_latents(loaded.tracking_latents, names, lib.num_frames.tolist())
        return ClipLatents(track_centres(per_step), "tracking latents (per step)", per_step)
    if kind == "best-of":
        raise best_of_latents_needed(loaded)
    return ClipLatents(np.asarray(z_m, dtype=np.float64), "encoder z_m")
