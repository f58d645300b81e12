"""Which skill z each clip is evaluated with: the encoder's z_m, latents the run stored (one per clip, or one per
step: "tracking"), or the best of N.

Baselines without a grounded encoder (the DIAYN ablation) have no meaningful
z_m; following the paper, N latents are drawn uniformly on the sphere per clip,
each is rolled out from the clip's first frame, and the one with the lowest
Cartesian error stands in for z_m. Sampling is seeded per (purpose, clip), so
results do not depend on batching.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from rgsd_envs.envs import skills
from rgsd_envs.envs.observations import SKILL_DIM

DEFAULT_BEST_OF = 64
"""N of ``--latent auto`` when it picks best-of-N (the paper uses 500)."""
_STREAM_SEARCH, _STREAM_VMF = 1, 2


@dataclass(frozen=True)
class LatentMode:
    """How clip latents are chosen: "encoder" (z_m), "stored" (the run's ``clip_latents`` file), "tracking" (the
    run's ``tracking_latents`` file: a latent per step) or "best-of" with n candidates; "auto" decides per run."""

    kind: str
    n: int = DEFAULT_BEST_OF

    def __str__(self) -> str:
        return f"best-of-{self.n}" if self.kind == "best-of" else self.kind


def parse_latent_mode(text: str) -> LatentMode:
    """Parse "auto", "encoder", "stored", "tracking" or "best-of-N" (N >= 1)."""
    t = str(text).strip().lower()
    if t in ("auto", "encoder", "stored", "tracking"):
        return LatentMode(t)
    m = re.fullmatch(r"best-of-(\d+)", t)
    if m and int(m.group(1)) >= 1:
        return LatentMode("best-of", int(m.group(1)))
    raise ValueError(
        "latent mode must be 'auto', 'encoder', 'stored', 'tracking' or 'best-of-N' with N >= 1 (e.g. best-of-64), "
        f"got {text!r}"
    )


def latent_rule(latent: str, clip_latents_rule: str | None = None) -> str:
    """A recorded latent mode (``str(LatentMode)``: metrics.json's ``latent``) in words, for the reports' "clip
    latent" row; ``clip_latents_rule``: what the run's stored latent is (method.json's ``clip_latents_rule``)."""
    mode = parse_latent_mode(latent)
    if mode.kind == "encoder":
        return "z_m, its encoder's embedding of the clip"
    if mode.kind == "stored":
        return clip_latents_rule or "the latent it stored per clip (clip_latents.json)"
    if mode.kind == "tracking":
        return "a latent per step (its tracking inference), not one per motion"
    if mode.kind == "best-of":
        return f"the best of {mode.n} uniform latents by ERR"
    return latent


def auto_latent_mode(
    p_imitation: float, encoder_init: str | None, has_encoder: bool, n: int = DEFAULT_BEST_OF
) -> LatentMode:
    """best-of-n for runs without a grounded encoder (p_imitation 0, random encoder init, no encoder file), else encoder."""
    grounded = has_encoder and p_imitation > 0 and encoder_init != "random"
    return LatentMode("encoder") if grounded else LatentMode("best-of", n)


def _rng(seed: int, stream: int, *keys: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), stream, *map(int, keys)]))


def search_candidates(num_clips: int, n: int, seed: int, dim: int = SKILL_DIM) -> np.ndarray:
    """(M, n, dim) latents uniform on the sphere in R^dim (the run's skill_dim), seeded per clip."""
    out = np.empty((num_clips, n, dim))
    for c in range(num_clips):
        k = _rng(seed, _STREAM_SEARCH, c).standard_normal((n, dim))
        out[c] = k / np.maximum(np.linalg.norm(k, axis=-1, keepdims=True), 1e-12)
    return out


def select_best(candidates: np.ndarray, errors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The lowest-error candidate per clip: latents (M, 16) and indices (M,) from (M, N, 16) and errors (M, N)."""
    err = np.where(np.isfinite(errors), errors, np.inf)
    idx = np.argmin(err, axis=1)
    return candidates[np.arange(candidates.shape[0]), idx], idx


def vmf_samples(centre: np.ndarray, kappa: float, n: int, seed: int, clip: int) -> np.ndarray:
    """(n, 16) samples of vMF(centre, kappa), seeded per (clip, kappa value): a kappa draws the same samples
    whichever other kappas are evaluated beside it."""
    rng = _rng(seed, _STREAM_VMF, clip, int(np.float64(kappa).view(np.uint64)))  # the float's bits: exact
    return np.stack([skills.sample_vmf(rng, centre, float(kappa)) for _ in range(n)])
