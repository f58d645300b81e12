"""Failure-weighted clip sampling (EnvConfig.clip_sampling): clips that fail are drawn more often."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.core import IMITATION, RGSDCore


def _core(**cfg) -> RGSDCore:
    return RGSDCore(8, EnvConfig(**cfg))


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
    core.seed(list(range(8)), list(range(8)))
    counts = np.zeros(n)
    for _ in range(40):
        core.reset_envs(list(range(8)))
        counts += np.bincount(core.clip.numpy(), minlength=n)
    assert counts[0] / counts.sum() > 0.45  # expected 0.6, uniform would be 0.2


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
        EnvConfig(clip_sampling="weighted")
