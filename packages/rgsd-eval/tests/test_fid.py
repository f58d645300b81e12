"""Motion FID: zero for identical sets, growing with noise, invariant features, a finite regularised square root."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import linalg

from rgsd_envs.motion.library import MotionLib
from rgsd_eval.features import FEATURE_DIM, WINDOW, feature_names, motion_features, num_windows
from rgsd_eval.fid import GaussianStats, fid, frechet_distance, sqrtm_psd, trace_sqrt_product


@pytest.fixture(scope="module")
def clips():
    return MotionLib("demo").clips


def _yaw(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def test_feature_layout(clips):
    f = motion_features(clips[0].body_pos)
    assert f.shape == (num_windows(clips[0].num_frames), FEATURE_DIM) == (clips[0].num_frames - WINDOW + 1, 86)
    assert len(feature_names()) == FEATURE_DIM
    assert motion_features(clips[0].body_pos[:10]).shape == (0, FEATURE_DIM)
    batched = motion_features(np.stack([clips[0].body_pos, clips[2].body_pos]))
    np.testing.assert_allclose(batched[1], motion_features(clips[2].body_pos), atol=1e-12)


def test_features_are_invariant_to_heading_rotation_and_ground_translation(clips):
    for clip in clips:
        p = clip.body_pos.astype(np.float64)
        base = motion_features(p)
        for angle, shift in ((0.7, (3.0, -2.0)), (np.pi, (0.0, 0.0)), (-2.2, (-40.0, 15.5))):
            moved = p @ _yaw(angle).T + np.array([*shift, 0.0])
            # 1e-6: the square root of near-zero window variances amplifies round-off
            np.testing.assert_allclose(motion_features(moved), base, atol=1e-6)
    # ...but not to a vertical lift, nor to a body getting bigger
    p = clips[0].body_pos.astype(np.float64)
    assert not np.allclose(motion_features(p + np.array([0, 0, 0.1])), motion_features(p))
    assert not np.allclose(motion_features(p * 1.1), motion_features(p))


def test_features_of_known_motions(clips):
    # the first pose of a clip carried along its heading at 1.2 m/s: no limb motion, no turning
    p0 = clips[0].body_pos[0].astype(np.float64)
    left = p0[1, :2] - p0[2, :2]
    fwd = np.array([left[1], -left[0]]) / np.linalg.norm(left)
    t = np.arange(40)[:, None, None] / 30.0
    p = p0[None] + 1.2 * t * np.array([*fwd, 0.0])
    f = motion_features(p)
    names = feature_names()
    col = {n: i for i, n in enumerate(names)}
    np.testing.assert_allclose(f[:, col["mean root_vel.x"]], 1.2, atol=1e-9)
    np.testing.assert_allclose(f[:, col["mean root_vel.y"]], 0.0, atol=1e-9)
    np.testing.assert_allclose(f[:, col["mean yaw_rate"]], 0.0, atol=1e-9)
    np.testing.assert_allclose(f[:, col["mean root_height"]], p0[0, 2], atol=1e-12)
    std_cols = [i for i, n in enumerate(names) if n.startswith("std")]
    np.testing.assert_allclose(f[:, std_cols], 0.0, atol=1e-6)
    # turning on the spot at 0.5 rad/s
    turn = np.stack([p0 @ _yaw(0.5 * k / 30.0).T for k in range(40)])
    np.testing.assert_allclose(motion_features(turn)[:, col["mean yaw_rate"]], 0.5, atol=1e-6)


def test_fid_of_a_set_with_itself_is_zero(clips):
    for clip in clips:
        f = motion_features(clip.body_pos)
        a, b = GaussianStats.of(f), GaussianStats.of(f.copy())
        assert fid(a, b) == pytest.approx(0.0, abs=1e-8)
        assert fid(a, a) == pytest.approx(0.0, abs=1e-8)
    # different clips are far apart
    fa, fb = (GaussianStats.of(motion_features(c.body_pos)) for c in (clips[0], clips[4]))
    assert fid(fa, fb) > 1.0
    assert fid(fa, fb) == pytest.approx(fid(fb, fa), rel=1e-6)


def test_fid_grows_monotonically_with_added_noise(clips):
    rng = np.random.default_rng(0)
    for clip in clips[:3]:
        ref = GaussianStats.of(motion_features(clip.body_pos))
        values = []
        for sigma in (0.001, 0.003, 0.01, 0.03, 0.1):
            noisy = np.stack([clip.body_pos + rng.normal(0, sigma, clip.body_pos.shape) for _ in range(4)])
            values.append(fid(ref, GaussianStats.of(motion_features(noisy))))
        assert values[0] > 0
        assert all(a < b for a, b in itertools.pairwise(values)), values


def test_regularised_square_root_of_a_singular_covariance_is_finite():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 20))
    cov = np.cov(x, rowvar=False)  # rank 2 in 20 dimensions
    assert np.linalg.matrix_rank(cov) == 2
    for eps in (0.0, 1e-6):
        s = sqrtm_psd(cov, eps)
        assert np.isfinite(s).all() and np.isrealobj(s)
        np.testing.assert_allclose(s @ s, cov + eps * np.eye(20), atol=1e-9)
    zero = np.zeros((5, 5))
    assert frechet_distance(np.zeros(5), zero, np.ones(5), zero) == pytest.approx(5.0, abs=1e-9)
    with pytest.raises(ValueError, match="NaN"):
        sqrtm_psd(np.full((2, 2), np.nan))


def test_frechet_distance_matches_the_closed_forms():
    # diagonal covariances: |mu1 - mu2|^2 + sum (sqrt(v1) - sqrt(v2))^2
    mu1, mu2 = np.array([0.0, 1.0, 2.0]), np.array([1.0, 1.0, 0.0])
    v1, v2 = np.array([1.0, 4.0, 0.25]), np.array([4.0, 1.0, 0.25])
    expected = 5.0 + 1.0 + 1.0
    assert frechet_distance(mu1, np.diag(v1), mu2, np.diag(v2), eps=0.0) == pytest.approx(expected, abs=1e-10)
    # general covariances: the textbook formula with scipy's sqrtm
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(6, 6)), rng.normal(size=(6, 6))
    c1, c2 = a @ a.T + 0.1 * np.eye(6), b @ b.T + 0.1 * np.eye(6)
    m1, m2 = rng.normal(size=6), rng.normal(size=6)
    textbook = ((m1 - m2) ** 2).sum() + np.trace(c1 + c2 - 2 * linalg.sqrtm(c1 @ c2).real)
    assert frechet_distance(m1, c1, m2, c2, eps=0.0) == pytest.approx(textbook, rel=1e-8)
    assert trace_sqrt_product(c1, c2) == pytest.approx(np.trace(linalg.sqrtm(c1 @ c2).real), rel=1e-8)


def test_streamed_statistics_equal_the_pooled_sample_statistics():
    rng = np.random.default_rng(3)
    parts = [rng.normal(loc=10.0 * k, size=(n, 4)) for k, n in enumerate((5, 1, 30))]
    pooled = np.concatenate(parts)
    s = GaussianStats.empty(4)
    for p in parts:
        s.add(p)
    merged = GaussianStats.pool([GaussianStats.of(p) for p in parts], 4)
    # sums kept around a first batch's mean are not centred on the set's: merging must move them whole
    uncentred = []
    for p in parts:
        st = GaussianStats.of(p[:1])
        st.add(p[1:])
        uncentred.append(st)
    assert any(np.abs(st.total).max() > 1.0 for st in uncentred)
    shifted = GaussianStats.pool(uncentred, 4)
    for st in (s, merged, shifted):
        assert st.count == 36
        np.testing.assert_allclose(st.mean, pooled.mean(0), atol=1e-10)
        np.testing.assert_allclose(st.cov, np.cov(pooled, rowvar=False), atol=1e-9)
    assert np.isnan(fid(GaussianStats.of(parts[1]), s))  # one sample: no covariance


def test_clips_too_short_for_two_windows_are_left_out_of_the_reference_fid(clips):
    from rgsd_envs.testing import first_frames
    from rgsd_eval.evaluate import ReferenceFeatures

    lib = MotionLib([first_frames(clips[0], WINDOW, "one_window"), first_frames(clips[0], WINDOW + 1, "two"), clips[1]])
    ref = ReferenceFeatures.of(lib, WINDOW)
    assert ref.short == [0]  # 15 frames: one window, no covariance; 16 frames: two windows, an FID
    assert [s.count for s in ref.per_clip[:2]] == [1, 2]
    assert ref.scored([0, 1, 2]) == [1, 2]
    pooled = ref.pooled([0, 2])
    assert pooled.count == ref.per_clip[2].count
    np.testing.assert_allclose(pooled.mean, ref.per_clip[2].mean)
    assert ReferenceFeatures.of(lib, 8).short == []  # a shorter window scores them all
