"""Skill latents: uniform directions, the vMF sampler, the closed-form vMF KL and slerp."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import special

from rgsd_envs.envs.skills import (
    sample_uniform_sphere,
    sample_vmf,
    slerp,
    vmf_kl_same_kappa,
    vmf_mean_resultant_length,
)

D = 16


def _samples(kappa: float, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    mu = sample_uniform_sphere(rng, D)
    return mu, np.stack([sample_vmf(rng, mu, kappa) for _ in range(n)])


@pytest.mark.parametrize("kappa", [1.0, 10.0, 50.0, 200.0, 1000.0])
def test_vmf_samples_have_the_theoretical_mean_resultant_length(kappa):
    mu, z = _samples(kappa, 4000)
    expected = (
        special.iv(D / 2, kappa) / special.iv(D / 2 - 1, kappa) if kappa < 500 else vmf_mean_resultant_length(kappa, D)
    )
    cos = z @ mu
    se = cos.std() / np.sqrt(len(cos))
    assert abs(cos.mean() - expected) < 5 * se + 1e-4
    assert vmf_mean_resultant_length(kappa, D) == pytest.approx(expected, rel=1e-9)


def test_vmf_samples_are_unit_vectors_whose_mean_points_at_mu():
    mu, z = _samples(20.0, 2000, seed=3)
    np.testing.assert_allclose(np.linalg.norm(z, axis=1), 1.0, atol=1e-12)
    m = z.mean(0)
    assert m @ mu / np.linalg.norm(m) > 0.99
    # the part orthogonal to mu has no preferred direction
    perp = z - np.outer(z @ mu, mu)
    assert np.linalg.norm(perp.mean(0)) < 0.05


def test_spread_of_vmf_samples_falls_as_kappa_grows():
    spreads = [1.0 - _samples(k, 1000, seed=1)[1] @ _samples(k, 1, seed=1)[0] for k in (20.0, 100.0, 1000.0)]
    means = [s.mean() for s in spreads]
    assert means[0] > means[1] > means[2] > 0


def test_uniform_sphere_samples_have_zero_mean_and_unit_norm():
    rng = np.random.default_rng(0)
    z = np.stack([sample_uniform_sphere(rng, D) for _ in range(4000)])
    np.testing.assert_allclose(np.linalg.norm(z, axis=1), 1.0, atol=1e-12)
    assert np.abs(z.mean(0)).max() < 0.05
    # E[z z^T] = I / d for the uniform distribution
    np.testing.assert_allclose(z.T @ z / len(z), np.eye(D) / D, atol=0.01)


def test_kappa_zero_is_uniform():
    rng = np.random.default_rng(0)
    mu = np.eye(D)[0]
    z = np.stack([sample_vmf(rng, mu, 0.0) for _ in range(3000)])
    assert abs((z @ mu).mean()) < 0.03


def test_vmf_kl_is_zero_for_equal_means_and_matches_monte_carlo():
    kappa = 10.0
    rng = np.random.default_rng(0)
    mu1 = sample_uniform_sphere(rng, D)
    mu2 = sample_uniform_sphere(rng, D)
    t1, t2 = torch.tensor(mu1), torch.tensor(mu2)
    assert float(vmf_kl_same_kappa(t1, t1, kappa)) == pytest.approx(0.0, abs=1e-12)
    # KL = E_{z~q1}[log q1(z) - log q2(z)] = kappa E[(mu1 - mu2)^T z] (same normaliser)
    z = np.stack([sample_vmf(rng, mu1, kappa) for _ in range(4000)])
    mc = kappa * (z @ (mu1 - mu2)).mean()
    assert float(vmf_kl_same_kappa(t1, t2, kappa)) == pytest.approx(mc, rel=0.05)


def test_vmf_kl_grows_with_the_angle_between_means():
    kappa = 10.0
    mu = torch.eye(D, dtype=torch.float64)[0]
    angles = torch.linspace(0.0, np.pi, 7, dtype=torch.float64)
    others = torch.zeros(7, D, dtype=torch.float64)
    others[:, 0], others[:, 1] = torch.cos(angles), torch.sin(angles)
    kl = vmf_kl_same_kappa(mu.expand(7, -1), others, kappa)
    assert (kl.diff() > 0).all()


def _angle(u: np.ndarray, v: np.ndarray) -> float:
    return float(np.arccos(np.clip(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)), -1.0, 1.0)))


@pytest.mark.parametrize("seed", range(4))
def test_slerp_runs_from_a_to_b_at_unit_norm_with_the_angle_linear_in_t(seed):
    rng = np.random.default_rng(seed)
    a, b = 3.0 * sample_uniform_sphere(rng, D), 0.5 * sample_uniform_sphere(rng, D)  # any length: normalised
    np.testing.assert_allclose(slerp(a, b, 0.0), a / 3.0, atol=1e-12)
    np.testing.assert_allclose(slerp(a, b, 1.0), b / 0.5, atol=1e-12)
    total = _angle(a, b)
    for t in np.linspace(0.0, 1.0, 11):
        z = slerp(a, b, t)
        assert np.linalg.norm(z) == pytest.approx(1.0, abs=1e-12)
        assert _angle(a, z) == pytest.approx(t * total, abs=1e-9)
        assert _angle(z, b) == pytest.approx((1.0 - t) * total, abs=1e-9)  # on the great circle, not beside it
    mid = a / 3.0 + b / 0.5
    np.testing.assert_allclose(slerp(a, b, 0.5), mid / np.linalg.norm(mid), atol=1e-12)


def test_slerp_of_parallel_or_opposite_directions_stays_on_the_sphere():
    a = sample_uniform_sphere(np.random.default_rng(7), D)
    np.testing.assert_allclose(slerp(a, 2.0 * a, 0.3), a, atol=1e-12)
    for t in (0.0, 0.25, 0.5, 1.0):  # opposite: a fixed half circle, the angle still linear in t
        z = slerp(a, -a, t)
        assert np.linalg.norm(z) == pytest.approx(1.0, abs=1e-12)
        assert _angle(a, z) == pytest.approx(t * np.pi, abs=1e-7)
    nearly = -a + 1e-7 * sample_uniform_sphere(np.random.default_rng(8), D)
    assert _angle(a, slerp(a, nearly, 0.5)) == pytest.approx(0.5 * _angle(a, nearly), abs=1e-6)
    with pytest.raises(ValueError, match="two nonzero directions"):
        slerp(a, np.zeros(D), 0.5)
