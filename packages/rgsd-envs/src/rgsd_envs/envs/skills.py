"""Skill latents on the unit hypersphere: uniform directions and von Mises-Fisher maths."""

from __future__ import annotations

import numpy as np
import torch
from scipy import special, stats


def sample_uniform_sphere(rng: np.random.Generator, dim: int) -> np.ndarray:
    """One direction uniform on the unit sphere in R^dim: k / |k|, k ~ N(0, I)."""
    k = rng.standard_normal(dim)
    return k / max(np.linalg.norm(k), 1e-12)


def sample_vmf(rng: np.random.Generator, mu: np.ndarray, kappa: float) -> np.ndarray:
    """One sample of vMF(mu, kappa) on the unit sphere, drawn from ``rng`` (scipy's sampler)."""
    mu = np.asarray(mu, dtype=np.float64)
    mu = mu / np.linalg.norm(mu)
    if kappa <= 0:
        return sample_uniform_sphere(rng, mu.shape[0])
    return stats.vonmises_fisher(mu, kappa).rvs(1, random_state=rng)[0]


def vmf_mean_resultant_length(kappa: float, dim: int) -> float:
    """E[mu^T z] under vMF(mu, kappa) in R^dim: A_d(kappa) = I_{d/2}(kappa) / I_{d/2-1}(kappa)."""
    if kappa == 0:
        return 0.0
    return float(special.ive(dim / 2.0, kappa) / special.ive(dim / 2.0 - 1.0, kappa))


def vmf_kl_same_kappa(mu1: torch.Tensor, mu2: torch.Tensor, kappa: float) -> torch.Tensor:
    """KL(vMF(mu1, kappa) || vMF(mu2, kappa)) = kappa * A_d(kappa) * (1 - mu1^T mu2), batched."""
    a = vmf_mean_resultant_length(kappa, mu1.shape[-1])
    return kappa * a * (1.0 - (mu1 * mu2).sum(-1))
