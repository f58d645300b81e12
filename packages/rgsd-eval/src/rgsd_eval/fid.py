"""Frechet distance between Gaussians fitted to feature sets (motion FID).

``FID = |mu_1 - mu_2|^2 + tr(C_1 + C_2 - 2 (C_1 C_2)^{1/2})`` with both
covariances regularised the same way, ``C_i = Sigma_i + eps I``. The trace of the
matrix square root is taken as ``tr sqrt(C_1^{1/2} C_2 C_1^{1/2})`` (similar
matrices, same eigenvalues): a symmetric positive semi-definite square root by
eigendecomposition, so the result is real, finite for singular covariances,
and exactly the same number for the same two inputs; FID(x, x) = 0.

Gaussians are fitted from streamed sufficient statistics (``GaussianStats``), so
many rollouts never have to be held in memory, and pooled sets (a category, all
clips) are merges of per-clip statistics. Features stay in their physical units
(m, m/s, rad/s; see ``features``): no data-dependent standardisation, so an FID
does not change when other clips join the motion set.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from scipy import linalg

DEFAULT_EPS = 1e-6
"""Added to both covariance diagonals (feature units squared)."""


def sqrtm_psd(a: np.ndarray, eps: float = 0.0) -> np.ndarray:
    """Regularised matrix square root of a symmetric PSD matrix: S with S @ S = a + eps I (real, finite)."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"expected a square matrix, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError("matrix contains NaN or inf")
    sym = 0.5 * (a + a.T) + eps * np.eye(a.shape[0])
    w, v = linalg.eigh(sym)
    return (v * np.sqrt(np.clip(w, 0.0, None))) @ v.T


def trace_sqrt_product(c1: np.ndarray, c2: np.ndarray) -> float:
    """tr((c1 c2)^{1/2}) for symmetric PSD c1, c2, via the symmetric form c1^{1/2} c2 c1^{1/2}."""
    s1 = sqrtm_psd(c1)
    m = s1 @ c2 @ s1
    w = linalg.eigvalsh(0.5 * (m + m.T))
    return float(np.sqrt(np.clip(w, 0.0, None)).sum())


def frechet_distance(
    mu1: np.ndarray, cov1: np.ndarray, mu2: np.ndarray, cov2: np.ndarray, eps: float = DEFAULT_EPS
) -> float:
    """Frechet distance between N(mu1, cov1 + eps I) and N(mu2, cov2 + eps I) (>= 0)."""
    mu1, mu2 = np.asarray(mu1, dtype=np.float64), np.asarray(mu2, dtype=np.float64)
    if mu1.shape != mu2.shape or cov1.shape != cov2.shape or cov1.shape != (mu1.size, mu1.size):
        raise ValueError(f"shape mismatch: mu {mu1.shape} vs {mu2.shape}, cov {cov1.shape} vs {cov2.shape}")
    eye = eps * np.eye(mu1.size)
    c1, c2 = np.asarray(cov1, dtype=np.float64) + eye, np.asarray(cov2, dtype=np.float64) + eye
    diff = mu1 - mu2
    value = diff @ diff + np.trace(c1) + np.trace(c2) - 2.0 * trace_sqrt_product(c1, c2)
    return max(float(value), 0.0)


@dataclass
class GaussianStats:
    """Streamed sufficient statistics of feature vectors: count, sums and outer products around a shift."""

    count: int
    shift: np.ndarray
    """(D,) subtracted before accumulating (the first batch's mean), for accuracy."""
    total: np.ndarray
    """(D,) sum of (x - shift)."""
    outer: np.ndarray
    """(D, D) sum of (x - shift)(x - shift)^T."""

    @classmethod
    def empty(cls, dim: int) -> GaussianStats:
        """No samples yet."""
        return cls(0, np.zeros(dim), np.zeros(dim), np.zeros((dim, dim)))

    @classmethod
    def of(cls, x: np.ndarray) -> GaussianStats:
        """Statistics of the rows of x (..., D)."""
        x = np.asarray(x, dtype=np.float64)
        s = cls.empty(x.shape[-1])
        s.add(x)
        return s

    @property
    def dim(self) -> int:
        """Feature dimension D."""
        return int(self.total.shape[0])

    def add(self, x: np.ndarray) -> None:
        """Fold the rows of x (..., D) in."""
        x = np.asarray(x, dtype=np.float64).reshape(-1, self.dim)
        if x.shape[0] == 0:
            return
        if self.count == 0:
            self.shift = x.mean(axis=0)
        xc = x - self.shift
        self.count += x.shape[0]
        self.total += xc.sum(axis=0)
        self.outer += xc.T @ xc

    def merge(self, other: GaussianStats) -> GaussianStats:
        """Statistics of both sample sets pooled (a new object)."""
        if other.count == 0:
            return GaussianStats(self.count, self.shift.copy(), self.total.copy(), self.outer.copy())
        if self.count == 0:
            return other.merge(self)
        d = other.shift - self.shift  # re-express the other's sums around this shift
        total = other.total + other.count * d
        outer = other.outer + np.outer(other.total, d) + np.outer(d, other.total) + other.count * np.outer(d, d)
        return GaussianStats(self.count + other.count, self.shift.copy(), self.total + total, self.outer + outer)

    @classmethod
    def pool(cls, stats: Iterable[GaussianStats], dim: int) -> GaussianStats:
        """All sample sets pooled."""
        out = cls.empty(dim)
        for s in stats:
            out = out.merge(s)
        return out

    @property
    def finite(self) -> bool:
        """Whether every sample folded in was finite (a NaN or inf feature makes the sums so)."""
        return bool(np.isfinite(self.total).all() and np.isfinite(self.outer).all())

    @property
    def mean(self) -> np.ndarray:
        """(D,) sample mean."""
        if self.count == 0:
            return np.full(self.dim, np.nan)
        return self.shift + self.total / self.count

    @property
    def cov(self) -> np.ndarray:
        """(D, D) sample covariance (divided by n - 1, as np.cov)."""
        if self.count < 2:
            return np.full((self.dim, self.dim), np.nan)
        m = self.total / self.count
        return (self.outer - self.count * np.outer(m, m)) / (self.count - 1)


def fid(reference: GaussianStats, generated: GaussianStats, eps: float = DEFAULT_EPS) -> float:
    """FID between two sample sets (NaN when either has fewer than 2 samples)."""
    if reference.count < 2 or generated.count < 2:
        return float("nan")
    return frechet_distance(reference.mean, reference.cov, generated.mean, generated.cov, eps)
