"""Skill latents on the unit hypersphere: uniform directions and von Mises-Fisher maths.

The ``*_batch`` samplers draw for many worlds at once from given random numbers
(the env's per-world counter-based streams); ``sample_uniform_sphere`` and
``sample_vmf`` draw one sample from a numpy Generator; ``slerp`` moves along the great circle between two skills.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from scipy import special, stats

from rgsd_envs.envs.observations import SKILL_DIM
from rgsd_envs.envs.world_random import box_muller


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


SLERP_DEGENERATE = 1e-9
"""Below this sine of their angle two directions count as parallel or opposite (no plane of their own)."""


def slerp(a: np.ndarray, b: np.ndarray, t: float) -> np.ndarray:
    """The unit vector a fraction ``t`` of the way from direction ``a`` to ``b`` along the shorter great circle.

    ``a`` and ``b`` (d,) are normalised first; t = 0 gives ``a``, t = 1 gives ``b``, and the angle from ``a``
    grows linearly with ``t``. Parallel directions give ``a``; exactly opposite ones have no shorter arc, so the
    arc goes through the coordinate axis least aligned with ``a`` (a fixed choice: the same blend every time).
    A zero vector raises ValueError.
    """
    a, b = (np.asarray(v, dtype=np.float64) for v in (a, b))
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if not (na > 0 and nb > 0):
        raise ValueError(f"slerp needs two nonzero directions, got norms {na:g} and {nb:g}")
    a, b = a / na, b / nb
    cos = float(a @ b)
    u = b - cos * a  # b's part orthogonal to a: with a, an orthonormal basis of the great circle's plane
    sin = float(np.linalg.norm(u))
    if sin < SLERP_DEGENERATE:
        if cos > 0:
            return a
        u = np.eye(a.shape[0])[int(np.argmin(np.abs(a)))]
        u = u - (u @ a) * a
        sin = 0.0
    angle = math.atan2(sin, cos)  # accurate at every angle, unlike arccos near 0 and pi
    z = math.cos(t * angle) * a + math.sin(t * angle) * (u / np.linalg.norm(u))
    return z / np.linalg.norm(z)


def uniform_sphere_batch(normals: np.ndarray) -> np.ndarray:
    """Directions uniform on the sphere (n, d) from standard normals (n, d): each row k / |k|."""
    return normals / np.maximum(np.linalg.norm(normals, axis=-1, keepdims=True), 1e-12)


def vmf_attempt_uniforms(dim: int) -> int:
    """Uniforms one vMF rejection attempt in R^dim uses: 2 (d - 1) for the Beta draw, one to accept."""
    return 2 * (dim - 1) + 1


VMF_ATTEMPT_UNIFORMS = vmf_attempt_uniforms(SKILL_DIM)
"""``vmf_attempt_uniforms`` in R^16."""

MAX_VMF_ATTEMPTS = 1000


def sample_vmf_batch(
    mu: np.ndarray,
    kappa: np.ndarray,
    direction_normals: np.ndarray,
    attempt_uniforms: Callable[[int, np.ndarray], np.ndarray],
) -> np.ndarray:
    """Samples of vMF(mu_i, kappa_i) (n, d) for rows mu (n, d), kappa (n,), by Wood's (1994) rejection sampler.

    ``direction_normals`` (n, d) are standard normals for the tangent direction;
    ``attempt_uniforms(t, rows)`` returns (len(rows), 2 (d - 1) + 1) uniforms in [0, 1)
    for attempt t of the rows still pending. Beta((d-1)/2, (d-1)/2) is drawn as
    A / (A + B) of two chi-square(d - 1) sums of squared normals; kappa = 0 is uniform.
    """
    mu = mu / np.linalg.norm(mu, axis=-1, keepdims=True)
    n, d = mu.shape
    m = d - 1.0
    kappa = np.broadcast_to(np.asarray(kappa, dtype=np.float64), (n,))
    b = m / (2.0 * kappa + np.sqrt(4.0 * kappa**2 + m**2))  # = (-2k + sqrt(4k^2 + m^2)) / m, stable
    x0 = (1.0 - b) / (1.0 + b)
    c = kappa * x0 + m * np.log1p(-(x0**2))
    w = np.empty(n)
    pending = np.arange(n)
    for t in range(MAX_VMF_ATTEMPTS):
        if pending.size == 0:
            break
        u = attempt_uniforms(t, pending)
        g = box_muller(u[:, : 2 * (d - 1)]) ** 2
        a, rest = g[:, : d - 1].sum(-1), g[:, d - 1 :].sum(-1)
        z = a / (a + rest)
        bp, x0p, kp = b[pending], x0[pending], kappa[pending]
        wt = (1.0 - (1.0 + bp) * z) / (1.0 - (1.0 - bp) * z)
        ok = kp * wt + m * np.log1p(-x0p * wt) - c[pending] >= np.log(np.maximum(u[:, -1], 1e-300))
        w[pending[ok]] = wt[ok]
        pending = pending[~ok]
    if pending.size:
        raise RuntimeError(f"vMF sampler did not accept after {MAX_VMF_ATTEMPTS} attempts (kappa {kappa[pending]})")
    v = direction_normals - (direction_normals * mu).sum(-1, keepdims=True) * mu
    v = uniform_sphere_batch(v)
    return w[:, None] * mu + np.sqrt(np.clip(1.0 - w**2, 0.0, None))[:, None] * v


def vmf_mean_resultant_length(kappa: float, dim: int) -> float:
    """E[mu^T z] under vMF(mu, kappa) in R^dim: A_d(kappa) = I_{d/2}(kappa) / I_{d/2-1}(kappa)."""
    if kappa == 0:
        return 0.0
    return float(special.ive(dim / 2.0, kappa) / special.ive(dim / 2.0 - 1.0, kappa))


def vmf_kl_same_kappa(mu1: torch.Tensor, mu2: torch.Tensor, kappa: float) -> torch.Tensor:
    """KL(vMF(mu1, kappa) || vMF(mu2, kappa)) = kappa * A_d(kappa) * (1 - mu1^T mu2), batched."""
    a = vmf_mean_resultant_length(kappa, mu1.shape[-1])
    return kappa * a * (1.0 - (mu1 * mu2).sum(-1))
