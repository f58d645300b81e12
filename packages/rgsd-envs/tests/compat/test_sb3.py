"""stable-baselines3 trains on RGSD-SMPL-v0 through rgsd_envs.compat.sb3."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

# the sb3 extra is a test requirement; a GPU machine's bare image may lack it, and its `pytest -m cuda` collects
# this module too
pytest.importorskip("stable_baselines3")
from stable_baselines3 import PPO
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.vec_env import VecMonitor

from rgsd_envs.compat.sb3 import RGSDSb3VecEnv, make_sb3_vec_env


def test_adapter_reports_terminal_observations_and_truncation_like_sb3_expects(real_clip_dir):
    venv = make_sb3_vec_env(4, motions=real_clip_dir)
    obs = venv.reset()
    assert obs.shape == (4, 375)
    rng = np.random.default_rng(0)
    seen_trunc = seen_term = 0
    clips = [row["clip_id"] for row in venv.reset_infos]
    core = venv.env.unwrapped.core
    for _ in range(80):
        obs, rewards, dones, infos = venv.step(rng.normal(0, 0.2, (4, 69)).astype(np.float32))
        assert rewards.dtype == np.float32 and dones.shape == (4,)
        for i in np.flatnonzero(dones):
            assert infos[i]["terminal_observation"].shape == (375,)
            seen_trunc += infos[i]["TimeLimit.truncated"]
            seen_term += not infos[i]["TimeLimit.truncated"]
            # as SB3's own vector envs: the info of the episode that ended, the new one's in reset_infos
            assert infos[i]["clip_id"] == clips[i] and infos[i]["encoder_reward"] == pytest.approx(rewards[i])
            assert venv.reset_infos[i]["clip_id"] == core.clip_host[i] and "encoder_reward" not in venv.reset_infos[i]
        clips = [int(c) for c in core.clip_host]
        for i in np.flatnonzero(~dones):
            assert "terminal_observation" not in infos[i]
    assert seen_trunc > 0 and seen_term > 0
    assert venv.get_attr("num_envs") == [4, 4, 4, 4]
    venv.close()


def test_reset_uses_the_options_and_seeds_given_to_set_options_and_seed_once(real_clip_dir):
    venv = make_sb3_vec_env(3, motions=real_clip_dir)
    venv.set_options({"clip": 1, "task": "imitation"})
    venv.reset()
    assert [(d["clip_id"], d["task"]) for d in venv.reset_infos] == [(1, 1)] * 3
    assert venv._options == [{}, {}, {}]  # used once, as SB3's DummyVecEnv does
    venv.set_options([{"clip": 0, "start_frame": 2}, {"clip": 2, "start_frame": 2}, {}])
    venv.reset()
    assert [d["clip_id"] for d in venv.reset_infos[:2]] == [0, 2]
    assert venv.env.unwrapped.core.frame_host[:2].tolist() == [2, 2]
    venv.seed(7)
    obs = venv.reset()
    native = gym.make_vec("RGSD-SMPL-v0", num_envs=3, motions=real_clip_dir)
    expected, info = native.reset(seed=7)
    np.testing.assert_array_equal(obs, expected)
    assert [d["clip_id"] for d in venv.reset_infos] == info["clip_id"].tolist()
    venv.seed(7)
    venv.set_options([{"clip": 2}, {}, {}])  # world 0 seeded and fixed to clip 2, the others seeded
    venv.reset()
    assert [d["clip_id"] for d in venv.reset_infos] == [2, *info["clip_id"][1:].tolist()]
    native.close()
    venv.close()


def test_adapter_refuses_a_next_step_vector_env(real_clip_dir):
    env = gym.make_vec("RGSD-SMPL-v0", num_envs=2, motions=real_clip_dir, autoreset_mode="NextStep")
    with pytest.raises(ValueError, match="SameStep"):
        RGSDSb3VecEnv(env)
    env.close()


def test_sb3_ppo_trains_10k_steps(real_clip_dir):
    venv = VecMonitor(make_sb3_vec_env(8, motions=real_clip_dir))
    model = PPO("MlpPolicy", venv, n_steps=128, batch_size=256, n_epochs=3, seed=0, verbose=0)
    model.set_logger(Logger(None, []))  # SB3's default logger makes a folder in the temp dir per learn()
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(10_000)
    assert model.num_timesteps >= 10_000
    values = model.logger.name_to_value
    for key in ("train/value_loss", "train/policy_gradient_loss", "train/approx_kl"):
        assert np.isfinite(values[key]), key
    assert len(model.ep_info_buffer) >= 20
    assert all(np.isfinite(e["r"]) and e["l"] >= 1 for e in model.ep_info_buffer)
    changed = [not torch.equal(a, b.detach()) for a, b in zip(before, model.policy.parameters())]
    assert all(changed)
    action, _ = model.predict(venv.reset(), deterministic=True)
    assert action.shape == (8, 69)
    venv.close()
