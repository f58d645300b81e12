"""The skills ``rgsd play``, ``rgsd view`` and ``rgsd export`` command a trained run with, chosen in one place.

Each clip's latent as the run's own method picks it: the encoder's z_m, the latents the run stored (CALM's
``clip_latents.json``), the per-step latents of Meta Motivo's tracking inference (their mean is the clip's latent,
and the track is turned to a variant's z), or, for a run that picks by best-of-N (DIAYN and the other unguided
baselines), the latents ``rgsd eval`` chose: its ``<report>/<run>/clip_latents.json``, given with ``--latents``.
And the clip a command starts on when none is named (``default_clip``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from rgsd_envs.motion.library import MotionLib
from rgsd_envs.runs.run_dir import load_clip_latents, load_tracking_latents
from rgsd_eval.rollouts import track_centres
from rgsd_eval.runs import LoadedRun, best_of_latents_needed

DEFAULT_CLIP = "walk"
"""The clip a command starts on when the clips have it (the README's ``rgsd play --pretrained --clip walk``)."""


def default_clip(names: list[str]) -> int:
    """Index of the clip to start on when none is named: ``DEFAULT_CLIP`` where the clips have it, else the first."""
    return names.index(DEFAULT_CLIP) if DEFAULT_CLIP in names else 0


@dataclass
class ClipLatents:
    """(clips, d) each clip's latent, and where it came from; per-step tracks where the run has them."""

    centres: np.ndarray
    source: str
    """Where the latents came from, in a few words naming the file (the viewer shows it, the ONNX metadata keeps it)."""
    tracks: list[np.ndarray] | None = None
    """Per clip (frames - 1, d) latents, one per step (None: one latent per clip)."""


def choose_latents(
    loaded: LoadedRun,
    lib: MotionLib,
    z_m: np.ndarray | None = None,
    latents_file: str | os.PathLike | None = None,
) -> ClipLatents:
    """The run's clip latents over ``lib`` (module docstring); ``latents_file`` (a clip_latents.json) overrides the
    run's choice. ``z_m``: the clip embeddings of an env the caller has made with the run's encoder
    (``loaded.encoder_path``); None: computed here when the method uses them. A best-of-N run without
    ``latents_file`` raises ``best_of_latents_needed``'s InputFileError."""
    names = list(lib.names)
    dim = loaded.env_config.skill_dim
    if latents_file is not None:
        z = load_clip_latents(latents_file, names, skill_dim=dim, run=loaded.run.path).double().numpy()
        return ClipLatents(z, f"{latents_file} (given)")
    kind = loaded.latent.kind
    if kind == "stored":
        z = load_clip_latents(loaded.clip_latents, names, skill_dim=dim).double().numpy()
        return ClipLatents(z, f"{loaded.clip_latents.name} (the run's stored clip latents)")
    if kind == "tracking":
        per_step = load_tracking_latents(loaded.tracking_latents, names, lib.num_frames.tolist(), dim)
        source = f"{loaded.tracking_latents.name} (per-step tracking latents; a clip's z_m is their mean)"
        return ClipLatents(track_centres(per_step), source, per_step)
    if kind == "best-of":
        raise best_of_latents_needed(loaded)
    if z_m is None:
        z_m = encoder_embeddings(loaded, lib)
    encoder = "the env's default encoder" if loaded.encoder_path is None else loaded.encoder_path.name
    return ClipLatents(np.asarray(z_m, dtype=np.float64), f"encoder z_m ({encoder})")


def encoder_embeddings(loaded: LoadedRun, lib: MotionLib) -> np.ndarray:
    """(clips, d) the clip embeddings z_m of the run's encoder over ``lib`` (no encoder: the env's default); those
    its encoder file stores for these clips, without building an env."""
    from rgsd_envs.envs.core import library_clip_embeddings

    return library_clip_embeddings(lib, loaded.encoder_path, loaded.env_config.skill_dim).double().numpy()
