"""Top-view pelvis paths of a run as data (``<report>/<run>/top_views.npz``), so that figures over many reports
(methods side by side, seeds pooled) can be drawn without rolling out again.

The file holds, per clip, the reference pelvis path (T, 2), the imitation rollouts' (K, T, 2) and up to
``max_variants`` vMF rollouts' (K, T, 2) at the top views' kappa, on the ground plane in metres (world frame),
as float16 (millimetre precision within 8 m of the origin: plenty for a figure), with the clip names and
categories and the kappa.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rgsd_envs.utils.files import InputFileError, atomic_path

TOP_VIEWS = "top_views.npz"
"""Per run folder of a report: its top-view pelvis paths (``save_top_views``)."""


@dataclass
class TopViews:
    """The pelvis paths of one run's top views (see the module docstring)."""

    clip_names: list[str]
    categories: list[str]
    kappa: float
    ref: list[np.ndarray]
    """Per clip: (T, 2) reference pelvis path."""
    imitation: list[np.ndarray]
    """Per clip: (K, T, 2) imitation rollouts' paths."""
    variants: list[np.ndarray]
    """Per clip: (K, T, 2) vMF(kappa) rollouts' paths."""

    def clips_of(self, category: str) -> list[int]:
        """Indices of the clips of ``category``."""
        return [i for i, c in enumerate(self.categories) if c == category]


def save_top_views(
    path: str | os.PathLike,
    clip_names: Sequence[str],
    categories: Sequence[str],
    kappa: float,
    ref_root: Sequence[np.ndarray],
    imitation_root: Sequence[np.ndarray],
    variant_root: Sequence[np.ndarray],
    max_variants: int = 150,
) -> Path:
    """Write the pelvis paths (positions (…, T, 3) in, ground plane kept) as ``TOP_VIEWS`` atomically."""
    arrays: dict[str, np.ndarray] = {
        "clip_names": np.array(list(clip_names)),
        "categories": np.array(list(categories)),
        "kappa": np.array(float(kappa)),
    }
    for c in range(len(clip_names)):
        arrays[f"ref_{c}"] = np.asarray(ref_root[c])[..., :2].astype(np.float16)
        arrays[f"imitation_{c}"] = np.asarray(imitation_root[c])[..., :2].astype(np.float16)
        arrays[f"variants_{c}"] = np.asarray(variant_root[c])[:max_variants, ..., :2].astype(np.float16)
    path = Path(path)
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.savez_compressed(f, **arrays)
    return path


def load_top_views(path: str | os.PathLike) -> TopViews:
    """The ``TopViews`` of a ``top_views.npz`` file, or an error naming the file."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "missing: rgsd eval writes it beside each run's trajectories.png")
    try:
        with np.load(path) as data:
            names = [str(n) for n in data["clip_names"]]
            n = len(names)
            return TopViews(
                clip_names=names,
                categories=[str(c) for c in data["categories"]],
                kappa=float(data["kappa"]),
                ref=[data[f"ref_{c}"].astype(np.float32) for c in range(n)],
                imitation=[data[f"imitation_{c}"].astype(np.float32) for c in range(n)],
                variants=[data[f"variants_{c}"].astype(np.float32) for c in range(n)],
            )
    except (KeyError, ValueError, OSError) as err:
        raise InputFileError(path, f"not a top-view file ({err}); run rgsd eval again") from None
