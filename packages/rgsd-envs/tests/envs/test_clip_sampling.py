"""Failure-weighted clip sampling (EnvConfig.clip_sampling): clips that fail are drawn more often."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.core import IMITATION, RGSDCore


def _core(**cfg) -> RGSDCore:
    return RGSDCore(8, EnvConfig(**cfg))


def _drawn_shares(core: RGSDCore) -> np.ndarray:
    """(clips,) share of each clip in 40 resets of the core's 8 worlds (seeded)."""
    core.seed(list(range(8)), list(range(8)))
    counts = np.zeros(core.lib.num_clips)
    for _ in range(40):
        core.reset_envs(list(range(8)))
        counts += np.bincount(core.clip.numpy(), minlength=core.lib.num_clips)
    return counts / counts.sum()


def test_uniform_sampling_draws_every_clip_equally():
    core = _core()
    np.testing.assert_allclose(core.clip_probabilities().numpy(), 1.0 / core.lib.num_clips)


def test_failure_weighted_sampling_favours_the_clips_that_fail():
    core = _core(clip_sampling="failure_weighted", failure_weighted_share=0.5)
    n = core.lib.num_clips
    core.failure_rate = torch.zeros(n, dtype=torch.float64)
    core.failure_rate[0] = 1.0
    probs = core.clip_probabilities().numpy()
    assert probs[0] == pytest.approx(0.5 / n + 0.5)
    np.testing.assert_allclose(probs[1:], 0.5 / n)
    assert _drawn_shares(core)[0] > 0.45  # expected 0.6, uniform would be 0.2


def test_outcomes_move_the_failure_rate_of_their_clip_only():
    core = _core(clip_sampling="failure_weighted", failure_rate_memory=2.0)
    core.reset_envs(list(range(8)), {"clip": 1, "task": "imitation"})
    info = core.observe()
    terminated = np.zeros(8, dtype=bool)
    terminated[:4] = True  # half of clip 1's episodes fail, the other half reach the clip's end
    truncated = ~terminated
    assert (info.task == IMITATION).all()
    core.record_outcomes(terminated, truncated)
    # 8 episodes, memory 2: old weight (1/2)^8, new value 0.5
    assert core.failure_rate[1].item() == pytest.approx(0.5**8 * 1.0 + (1 - 0.5**8) * 0.5)
    assert (core.failure_rate[[0, 2, 3, 4]] == 1.0).all()
    restored = _core(clip_sampling="failure_weighted")
    restored.load_state_dict(core.state_dict())
    torch.testing.assert_close(restored.failure_rate, core.failure_rate)


def test_bad_clip_sampling_is_a_clear_error():
    with pytest.raises(ValueError, match="clip_sampling must be one of"):
        EnvConfig(clip_sampling="by_error")


def test_per_step_failure_rate_favours_the_clip_that_fails_sooner():
    """Every episode of clips 1 and 2 fails, clip 1's after 5 steps and clip 2's after 20: per episode both
    rates are 1, per step clip 1's is four times clip 2's; a restored core continues the same counts."""
    rates = {}
    for per in ("episode", "step"):
        core = _core(clip_sampling="failure_weighted", failure_rate_memory=4.0, failure_rate_per=per)
        core.reset_envs(list(range(8)), {"clip": [1] * 4 + [2] * 4, "task": "imitation"})
        never = np.zeros(8, dtype=bool)
        for t in range(1, 101):
            fail = np.zeros(8, dtype=bool)
            fail[:4] = t % 5 == 0
            fail[4:] = t % 20 == 0
            core.record_outcomes(fail, never)
        rates[per] = core.failure_rate.numpy().copy()
        if per == "step":
            restored = _core(clip_sampling="failure_weighted", failure_rate_memory=4.0, failure_rate_per="step")
            restored.load_state_dict(core.state_dict())
            for c in (core, restored):
                c.record_outcomes(np.ones(8, dtype=bool), never)
            torch.testing.assert_close(restored.failure_rate, core.failure_rate)
    np.testing.assert_allclose(rates["episode"][[1, 2]], 1.0)
    assert rates["step"][1] == pytest.approx(1 / 5, rel=0.02)  # the 1/1 prior is forgotten
    assert rates["step"][2] == pytest.approx(1 / 20, rel=0.05)
    assert (rates["step"][[0, 3, 4]] == 1.0).all()  # clips with no episode keep the prior
    probs = _core(clip_sampling="failure_weighted", failure_weighted_share=1.0)
    probs.failure_rate = torch.from_numpy(rates["step"])
    assert probs.clip_probabilities()[1] > 3.9 * probs.clip_probabilities()[2]


def test_a_steps_autoreset_worlds_add_no_imitation_step():
    core = _core(clip_sampling="failure_weighted", failure_rate_per="step")
    core.reset_envs(list(range(8)), {"clip": 1, "task": "imitation"})
    none = np.zeros(8, dtype=bool)
    stepped = np.ones(8, dtype=bool)
    stepped[:3] = False
    core.record_outcomes(none, none, stepped)
    assert core.state_dict()["failure_counts"][1, 1].item() == 1 + 5


def test_weighted_sampling_follows_the_callers_weights_and_refuses_bad_ones():
    core = _core(clip_sampling="weighted", failure_weighted_share=0.5)
    n = core.lib.num_clips
    np.testing.assert_allclose(core.clip_probabilities().numpy(), 1.0 / n)  # uniform until weights are set
    weights = np.zeros(n)
    weights[2] = 3.0
    core.set_clip_weights(weights)
    probs = core.clip_probabilities().numpy()
    assert probs[2] == pytest.approx(0.5 / n + 0.5)
    assert _drawn_shares(core)[2] > 0.45  # expected 0.6, uniform would be 0.2
    restored = _core(clip_sampling="weighted", failure_weighted_share=0.5)
    restored.load_state_dict(core.state_dict())
    np.testing.assert_allclose(restored.clip_probabilities().numpy(), probs)
    for bad, match in ((np.ones(n + 1), "one per clip"), (np.full(n, np.nan), "finite"), (np.zeros(n), "not all 0")):
        with pytest.raises(ValueError, match=match):
            core.set_clip_weights(bad)
