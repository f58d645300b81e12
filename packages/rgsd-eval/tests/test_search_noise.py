"""A best-of-N search's rollouts draw their own action noise: the rollouts that re-evaluate the chosen latent are
fresh ones, and the evaluation's own rollouts keep the noise they had without a search."""

from __future__ import annotations

import numpy as np
import pytest

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.library import MotionLib
from rgsd_eval import evaluate
from rgsd_eval.batches import NOISE_BLOCK, JobNoise
from rgsd_eval.config import EvalConfig
from rgsd_eval.evaluate import IMITATION_GROUP, ReferenceFeatures, evaluate_run
from rgsd_eval.protocol import POLICY_NOISE
from rgsd_eval.runs import load_run
from rgsd_eval.testing import make_fake_run

N = 4
"""Candidates per clip and imitation rollouts per clip: the same, so search job c * N + i and imitation job
c * N + i have one index (and shared their noise before the search had its own stream)."""


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """A best-of-N run evaluated with action noise; every ``run_rollouts`` call's jobs and results recorded."""
    root = tmp_path_factory.mktemp("search")
    loaded = load_run(make_fake_run(root / "run", p_imitation=0.0, encoder_init="random"), best_of=N)
    assert loaded.latent.kind == "best-of"
    lib = MotionLib("demo")
    cfg = EvalConfig(rollouts=N, best_of=N, kappas=(100.0,), action_noise=POLICY_NOISE, video=False, progress=False)
    calls = []
    inner = evaluate.run_rollouts

    def spy(env, policy, jobs, **kw):
        res = inner(env, policy, jobs, **kw)
        calls.append(res)
        return res

    mp = pytest.MonkeyPatch()
    mp.setattr(evaluate, "run_rollouts", spy)
    try:
        ev = evaluate_run(loaded, lib, ReferenceFeatures.of(lib, cfg.fid_window), cfg)
    finally:
        mp.undo()
    return lib, ev, calls


def test_no_re_evaluation_rollout_replays_the_search_s_winning_rollout(searched):
    lib, ev, (search, res) = searched
    for c, name in enumerate(lib.names):
        best = c * N + ev.metrics["search"][name]["best_index"]
        won = search.root_pos[best]
        rows = np.flatnonzero((res.jobs.group == IMITATION_GROUP) & (res.jobs.clip == c))
        assert len(rows) == N and len(np.unique(res.error[rows])) == N  # noisy: N different rollouts
        np.testing.assert_array_equal(res.jobs.skill[rows], np.repeat(search.jobs.skill[best][None], N, 0))
        # the same clip, start and latent, with other noise: every path leaves the winner's
        assert not any(np.array_equal(res.root_pos[j], won, equal_nan=True) for j in rows)
        assert not np.isin(res.error[rows], search.error[best]).any()


def test_the_evaluation_s_rollouts_keep_the_noise_of_an_evaluation_without_a_search():
    """Stream 0 (every rollout but a search's) is seeded by (seed, job index) alone: a run whose latents need no
    search draws the same noise with or without the search's own stream."""
    seed, jobs = 3, np.array([5, 7])
    noise = JobNoise(seed, jobs, 3, sk.NUM_DOFS)
    first = np.stack([noise.step(t) for t in range(1, NOISE_BLOCK + 2)])  # into a second block
    for k, j in enumerate(jobs):
        rng = np.random.default_rng((seed, int(j)))
        own = np.concatenate([rng.standard_normal((NOISE_BLOCK, sk.NUM_DOFS), dtype=np.float32) for _ in range(2)])
        np.testing.assert_array_equal(first[:, k], own[: NOISE_BLOCK + 1])
    np.testing.assert_array_equal(first[:, 2], 0.0)  # the idle world past the jobs
    other = JobNoise(seed, jobs, 2, sk.NUM_DOFS, stream=evaluate.SEARCH_NOISE_STREAM).step(1)
    assert not np.isin(other, first[0]).any()
