"""Failure-weighted clip sampling (EnvConfig.clip_sampling): clips that fail are drawn more often."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rgsd_envs.envs.config import ClipSamplingConfig, EnvConfig
from rgsd_envs.envs.core import FAILURE_RATE_MEMORY, IMITATION, RGSDCore


def _core(**sampling) -> RGSDCore:
    return RGSDCore(8, EnvConfig(clip_sampling=ClipSamplingConfig(**sampling)))


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
    core = _core(mode="failure_weighted", failure_share=0.5)
    n = core.lib.num_clips
    core.failure_rate = torch.zeros(n, dtype=torch.float64)
    core.failure_rate[0] = 1.0
    probs = core.clip_probabilities().numpy()
    assert probs[0] == pytest.approx(0.5 / n + 0.5)
    np.testing.assert_allclose(probs[1:], 0.5 / n)
    assert _drawn_shares(core)[0] > 0.45  # expected 0.6, uniform would be 0.2


def test_outcomes_move_the_failure_rate_of_their_clip_only():
    core = _core(mode="failure_weighted")
    core.reset_envs(list(range(8)), {"clip": 1, "task": "imitation"})
    info = core.observe()
    terminated = np.zeros(8, dtype=bool)
    terminated[:4] = True  # half of clip 1's episodes fail, the other half reach the clip's end
    truncated = ~terminated
    assert (info.task == IMITATION).all()
    core.record_outcomes(terminated, truncated)
    keep = (1 - 1 / FAILURE_RATE_MEMORY) ** 8  # 8 episodes at once: the old value's weight
    assert core.failure_rate[1].item() == pytest.approx(keep * 1.0 + (1 - keep) * 0.5)
    assert (core.failure_rate[[0, 2, 3, 4]] == 1.0).all()
    restored = _core(mode="failure_weighted")
    restored.load_state_dict(core.state_dict())
    torch.testing.assert_close(restored.failure_rate, core.failure_rate)


def test_bad_clip_sampling_is_a_clear_error():
    with pytest.raises(ValueError, match=r"clip_sampling\.mode must be one of"):
        ClipSamplingConfig(mode="by_error")
    with pytest.raises(ValueError, match=r"clip_sampling\.failure_share"):
        ClipSamplingConfig(failure_share=1.5)


def test_uniform_sampling_records_no_failure_rate():
    core = _core()
    core.reset_envs(list(range(8)), {"clip": 1, "task": "imitation"})
    core.record_outcomes(np.ones(8, dtype=bool), np.zeros(8, dtype=bool))
    assert (core.failure_rate.numpy() == 1.0).all()
