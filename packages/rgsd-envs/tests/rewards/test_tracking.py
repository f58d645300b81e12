"""The DeepMimic-style tracking reward: maximal on the reference, lower off it, used by imitation episodes only."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import rgsd_envs  # noqa: F401  (registers RGSD-SMPL-v0)
from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.core import IMITATION
from rgsd_envs.rewards.tracking import TERMS, tracking_reward

SCALE = 20.0


@pytest.fixture(scope="module")
def env():
    cfg = EnvConfig(reward="tracking", tracking_scale=SCALE)
    e = gym.make_vec("RGSD-SMPL-v0", num_envs=4, config=cfg)
    yield e
    e.close()


def _perturbed_reward(env, hinge_noise: float, root_shift: float) -> np.ndarray:
    """Tracking reward of 4 walk states at frame 30 with hinge angles and the pelvis moved off the reference."""
    core = env.unwrapped.core
    ids = torch.arange(4)
    env.reset(seed=0, options={"clip": 0, "start_frame": 30, "task": "imitation"})
    qpos, qvel = core.lib.frame_qpos_qvel(core.clip[ids], core.frame[ids])
    qpos = qpos.clone()
    g = torch.Generator().manual_seed(0)
    qpos[:, 7:] += hinge_noise * torch.randn(qpos[:, 7:].shape, generator=g, dtype=qpos.dtype)
    qpos[:, 0] += root_shift
    core.backend.set_state(ids, qpos, qvel)
    core.observe()
    return core.tracking_reward.numpy().copy()


def test_weights_sum_to_one_and_the_reward_is_scale_when_every_term_is_one():
    assert sum(w for w, _ in TERMS.values()) == pytest.approx(1.0)
    ones = {k: torch.ones(3) for k in TERMS}
    assert torch.allclose(tracking_reward(ones, SCALE), torch.full((3,), SCALE))


def test_reward_is_maximal_on_the_reference_and_falls_with_the_perturbation(env):
    on_ref = _perturbed_reward(env, 0.0, 0.0)
    assert np.all(on_ref > 0.99 * SCALE) and np.all(on_ref <= SCALE + 1e-4)
    small = _perturbed_reward(env, 0.05, 0.0)
    large = _perturbed_reward(env, 0.2, 0.0)
    assert np.all(small < on_ref - 0.01 * SCALE) and np.all(large < small)
    shifted = _perturbed_reward(env, 0.0, 0.3)  # the pose is right but the pelvis is 30 cm behind
    assert np.all(shifted < on_ref - 0.05 * SCALE * TERMS["root"][0])


def test_imitation_steps_earn_the_tracking_reward_and_discovery_steps_the_encoder_reward(env):
    core = env.unwrapped.core
    tasks = ["imitation", "imitation", "discovery", "discovery"]
    env.reset(seed=1, options={"clip": 0, "start_frame": 10, "task": tasks})
    _, reward, *_ = env.step(np.zeros((4, 69), dtype=np.float32))
    imit = (env.reward_core.last_tasks == IMITATION).numpy()
    assert imit.tolist() == [True, True, False, False]
    np.testing.assert_allclose(reward[imit], core.tracking_reward.numpy()[imit], rtol=1e-6)
    assert np.all(reward[imit] > 0) and np.all(reward[imit] < SCALE)
    rc = env.reward_core
    with torch.no_grad():
        mu = rc.trainable(rc.next_encoder_inputs[~torch.from_numpy(imit)])
    expected = rc.constant + rc.kappa * (mu * rc.last_skills[~torch.from_numpy(imit)]).sum(-1)
    np.testing.assert_allclose(reward[~imit], expected.numpy(), rtol=1e-5)


def test_unknown_reward_is_refused_with_the_field_named():
    with pytest.raises(ValueError, match="reward must be one of encoder, tracking"):
        EnvConfig(reward="deepmimic")
    with pytest.raises(ValueError, match="tracking_scale"):
        EnvConfig(reward="tracking", tracking_scale=0.0)
