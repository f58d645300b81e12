"""The encoder-reward wrappers: history, reward formula, encoder swapping, state."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from rgsd_envs.envs.core import IMITATION
from rgsd_envs.envs.observations import ENCODER_INPUT_DIM, FRAME_DIM, HISTORY_LEN
from rgsd_envs.rewards.encoders import MLPEncoder


@pytest.fixture()
def venv(real_clip_dir):
    v = gym.make_vec("RGSD-SMPL-v0", num_envs=4, motions=real_clip_dir, reward_kappa=5.0, reward_constant=1.0)
    yield v
    v.close()


def test_reset_fills_the_history_from_the_reference_clip(venv):
    venv.reset(seed=0, options={"clip": [0, 1, 2, 3], "start_frame": [0, 2, 7, 9]})
    core = venv.unwrapped.core
    lib = core.lib
    from rgsd_envs.envs.observations import history_indices

    for w, (c, f) in enumerate(zip([0, 1, 2, 3], [0, 2, 7, 9])):
        g = torch.tensor([int(lib.starts[c]) + f])
        idx = history_indices(g, lib.starts[torch.tensor([c])])
        expected = core.ref_features[idx].flatten(1)[0]
        torch.testing.assert_close(venv.reward_core.history[w].flatten(), expected, atol=1e-4, rtol=0)


def test_reward_is_C_plus_kappa_times_cosine_with_the_episode_skill(venv):
    venv.reset(seed=1)
    rng = np.random.default_rng(0)
    for _ in range(5):
        _, reward, *_ = venv.step(rng.normal(0, 0.1, (4, 69)).astype(np.float32))
        rc = venv.reward_core
        s_next = rc.next_encoder_inputs
        z, c = rc.last_skills, rc.last_tasks
        frozen, trainable = rc.frozen, rc.trainable
        with torch.no_grad():
            mu = torch.where((c == IMITATION)[:, None], frozen(s_next), trainable(s_next))
        expected = 1.0 + 5.0 * (mu * z).sum(-1)
        np.testing.assert_allclose(reward, expected.numpy(), rtol=1e-4, atol=1e-4)  # float32, batch-size dependent sums
        # s' extends s by the new frame
        torch.testing.assert_close(s_next[:, : (HISTORY_LEN - 1) * FRAME_DIM], rc.encoder_inputs[:, FRAME_DIM:])


def test_set_encoder_changes_discovery_rewards_only(real_clip_dir):
    venv = gym.make_vec("RGSD-SMPL-v0", num_envs=6, motions=real_clip_dir)
    tasks = ["imitation", "discovery"] * 3
    venv.reset(seed=0, options={"task": tasks})
    state = copy.deepcopy(venv.state_dict())
    a = np.zeros((6, 69), np.float32)
    _, r_before, *_ = venv.step(a)
    venv.load_state_dict(state)
    torch.manual_seed(0)
    venv.set_encoder(MLPEncoder(hidden=(16,)))
    _, r_after, *_ = venv.step(a)
    imit = np.array([t == "imitation" for t in tasks])
    np.testing.assert_allclose(r_after[imit], r_before[imit], rtol=1e-6)
    assert np.abs(r_after[~imit] - r_before[~imit]).min() > 1e-3
    venv.close()


def test_set_encoder_of_the_wrong_width_is_a_clear_error(venv):
    with pytest.raises(ValueError, match=r"set_encoder's encoder returned \(2, 4\)"):
        venv.set_encoder(torch.nn.Linear(ENCODER_INPUT_DIM, 4))


def test_set_encoder_accepts_an_encoder_file(venv, tmp_path):
    path = MLPEncoder(hidden=(8,)).save(tmp_path / "enc.pt")
    venv.set_encoder(str(path))
    assert isinstance(venv.encoder, MLPEncoder)


def test_single_env_wrapper_gives_the_same_reward_formula(real_clip_dir):
    env = gym.make("RGSD-SMPL-v0", motions=real_clip_dir, reward_kappa=3.0, reward_constant=0.5)
    env.reset(seed=2, options={"task": "imitation"})
    _, r, *_ = env.step(np.zeros(69, np.float32))
    rc = env.get_wrapper_attr("reward_core")
    with torch.no_grad():
        mu = rc.frozen(rc.next_encoder_inputs)
    assert r == pytest.approx(0.5 + 3.0 * float((mu * rc.last_skills).sum()), rel=1e-5)
    env.close()
