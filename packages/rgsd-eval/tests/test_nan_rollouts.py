"""Non-finite numbers in a rollout: a NaN frame outside the scored ones leaves the errors alone, a NaN scored frame
fails the success test, and NaN motion features leave that FID empty instead of stopping the report."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np
import pytest

from rgsd_envs.motion.library import MotionLib
from rgsd_eval import evaluate
from rgsd_eval.config import EvalConfig
from rgsd_eval.evaluate import IMITATION_GROUP, ReferenceFeatures, evaluate_run
from rgsd_eval.features import FEATURE_DIM
from rgsd_eval.fid import GaussianStats, fid
from rgsd_eval.metrics import tracking_success
from rgsd_eval.rollouts import _Recording, _summarise
from rgsd_eval.runs import load_run
from rgsd_eval.testing import make_fake_run

NAN = np.nan


def _summary(err: np.ndarray, length: list[int]) -> SimpleNamespace:
    """``_summarise`` of per-frame errors (T, jobs), the root-relative ones the same, no falls, none unstable."""
    m = err.shape[1]
    out = SimpleNamespace(
        **{
            k: np.full(m, NAN)
            for k in ("error", "error_until_fall", "played_before_fall", "error_until_deviation", "mpjpe")
        },
        length=np.zeros(m, dtype=np.int64),
        **{k: np.zeros(m, dtype=bool) for k in ("fell", "unstable", "success")},
    )
    fell = np.zeros(err.shape, dtype=bool)
    _summarise(out, None, np.arange(m), _Recording(err, err.copy(), fell, np.array(length), np.zeros(m, dtype=bool)))
    return out


def test_a_nan_frame_past_a_rollout_s_end_leaves_its_errors_alone():
    """Frame 3 of job 0 is past its end (length 3: an unstable step's state, say) and NaN: its errors average
    frames 1 and 2 only; job 1's NaN is on a scored frame, so its mean is NaN and it did not succeed."""
    err = np.array([[0.0, 0.0], [0.1, 0.1], [0.2, NAN], [NAN, 0.3]])
    out = _summary(err, [3, 4])
    np.testing.assert_allclose(out.error, [0.15, NAN])
    np.testing.assert_allclose(out.mpjpe, [0.15, NAN])
    np.testing.assert_allclose(out.error_until_fall, [0.15, NAN])
    np.testing.assert_allclose(out.played_before_fall, [1.0, 1.0])
    np.testing.assert_allclose(out.error_until_deviation, [0.15, NAN])
    np.testing.assert_array_equal(out.success, [True, False])


def test_success_fails_on_a_non_finite_scored_frame_and_ignores_unscored_ones():
    err = np.array([[0.1, NAN, 0.2], [0.1, np.inf, 0.2], [0.1, 0.2, NAN]])
    scored = np.array([True, True, False])
    np.testing.assert_array_equal(
        tracking_success(err, scored=np.broadcast_to(scored, err.shape)), [False, False, True]
    )
    np.testing.assert_array_equal(tracking_success(err, scored=np.ones(err.shape, dtype=bool)), [False] * 3)


def test_nan_motion_features_leave_that_fid_empty_with_a_warning_and_the_others_as_they_are(tmp_path, caplog):
    """One NaN window among clip 0's imitation rollouts: its FID, its category's and the all-clips one are None
    (each named in a warning); every other clip's FID is the Frechet distance of its own statistics."""
    lib = MotionLib("demo")
    loaded = load_run(make_fake_run(tmp_path / "run"))
    cfg = EvalConfig(rollouts=2, kappas=(100.0,), video=False, progress=False)
    ref = ReferenceFeatures.of(lib, cfg.fid_window)
    results = []
    inner = evaluate.run_rollouts

    def spoil(env, policy, jobs, **kw):
        res = inner(env, policy, jobs, **kw)
        res.feature_stats[IMITATION_GROUP, 0].add(np.full((1, FEATURE_DIM), NAN))
        results.append(res)
        return res

    mp = pytest.MonkeyPatch()
    mp.setattr(evaluate, "run_rollouts", spoil)
    try:
        with caplog.at_level(logging.WARNING, logger=evaluate.__name__):
            imitation = evaluate_run(loaded, lib, ref, cfg).metrics["imitation"]
    finally:
        mp.undo()
    (res,) = results
    first, cat = lib.names[0], lib.categories[0]
    assert imitation["clips"][first]["fid"] is None
    assert imitation["categories"][cat]["fid"] is None and imitation["all"]["fid"] is None
    for c in range(1, lib.num_clips):
        expected = fid(ref.per_clip[c], res.feature_stats[IMITATION_GROUP, c], cfg.fid_eps)
        assert imitation["clips"][lib.names[c]]["fid"] == pytest.approx(expected, rel=1e-12) and expected > 0
    warned = [r.getMessage() for r in caplog.records if "FID" in r.getMessage()]
    assert len(warned) == 3 and all("left empty" in w for w in warned)
    assert f"{first}'s imitation rollouts" in warned[0]
    assert not GaussianStats.of(np.full((2, 3), NAN)).finite and GaussianStats.of(np.ones((2, 3))).finite
