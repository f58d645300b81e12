"""Skill latents on the unit hypersphere: uniform directions and von Mises-Fisher maths."""

from __future__ import annotations

import numpy as np
import torch
from scipy import special


def sample_uniform_sphere(rng: np.random.Generator, dim: int) -> np.ndarray:
    """One direction uniform on the unit sphere in R^dim: k / |k|, k ~ N(0, I)."""
    k = rng.standard_normal(dim)
    return k / max(np.linalg.norm(k), 1e-12)


def sample_vmf(rng: np.random.Generator, mu: np.ndarray, kappa: float) -> np.ndarray:
    """One sample of vMF(mu, kappa) on the unit sphere (Wood, 1994).

    The cosine w = mu^T z is drawn by rejection from its exact marginal, the rest
    of z is a uniform direction orthogonal to mu.
    """
    mu = np.asarray(mu, dtype=np.float64)
    mu = mu / np.linalg.norm(mu)
    d = mu.shape[0]
    if kappa <= 0:
        return sample_uniform_sphere(rng, d)
    # b = (-2k + sqrt(4k^2 + (d-1)^2)) / (d-1), written without cancellation
    b = (d - 1) / (2.0 * kappa + np.sqrt(4.0 * kappa**2 + (d - 1) ** 2))
    x0 = (1.0 - b) / (1.0 + b)
    c = kappa * x0 + (d - 1) * np.log(1.0 - x0**2)
    while True:
        beta = rng.beta((d - 1) / 2.0, (d - 1) / 2.0)
        w = (1.0 - (1.0 + b) * beta) / (1.0 - (1.0 - b) * beta)
        u = rng.uniform()
        if kappa * w + (d - 1) * np.log(1.0 - x0 * w) - c >= np.log(u):
            break
    v = rng.standard_normal(d)
    v -= v.dot(mu) * mu
    v /= max(np.linalg.norm(v), 1e-12)
    return w * mu + np.sqrt(max(1.0 - w * w, 0.0)) * v


def vmf_mean_resultant_length(kappa: float, dim: int) -> float:
    """E[mu^T z] under vMF(mu, kappa) in R^dim: A_d(kappa) = I_{d/2}(kappa) / I_{d/2-1}(kappa)."""
    if kappa == 0:
        return 0.0
    return float(special.ive(dim / 2.0, kappa) / special.ive(dim / 2.0 - 1.0, kappa))


def vmf_kl_same_kappa(mu1: torch.Tensor, mu2: torch.Tensor, kappa: float) -> torch.Tensor:
    """KL(vMF(mu1, kappa) || vMF(mu2, kappa)) = kappa * A_d(kappa) * (1 - mu1^T mu2), batched."""
    a = vmf_mean_resultant_length(kappa, mu1.shape[-1])
    return kappa * a * (1.0 - (mu1 * mu2).sum(-1))
