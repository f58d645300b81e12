"""The skill dimension as a setting (``EnvConfig.skill_dim``): spaces, draws, encoders and policy files follow it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rgsd_envs.envs import skills
from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.core import EPISODE_SLOTS, episode_slots
from rgsd_envs.envs.observations import FRAME_DIM, HUMANOID_LAYOUT
from rgsd_envs.envs.torch_env import RGSDTorchEnv
from rgsd_envs.rewards.encoders import MLPEncoder
from rgsd_envs.runs.policy import PolicyMLP, check_policy_fits, load_policy
from rgsd_envs.utils.files import InputFileError


def test_the_default_keeps_the_16_d_episode_draws():
    # the per-world random streams must stay where they were, or seeded episodes of existing runs change
    before = {"clip": 0, "start_frame": 1, "task": 2, "skill": slice(4, 20), "vmf_direction": slice(20, 36)}
    assert before == EPISODE_SLOTS
    assert skills.VMF_ATTEMPT_UNIFORMS == skills.vmf_attempt_uniforms(16) == 31
    assert EnvConfig().skill_dim == 16 and EnvConfig().layout == HUMANOID_LAYOUT


def test_episode_slots_of_an_odd_dimension_start_each_part_at_an_even_number():
    slots = episode_slots(33)
    assert slots["skill"] == slice(4, 37) and slots["vmf_direction"] == slice(38, 71)


@pytest.mark.parametrize("dim", [32, 33])
def test_observations_and_skills_follow_skill_dim(dim):
    env = RGSDTorchEnv(6, config=EnvConfig(skill_dim=dim))
    obs, _ = env.reset(seed=0)
    assert env.obs_dim == FRAME_DIM + dim and tuple(obs.shape) == (6, FRAME_DIM + dim)
    assert env.layout.skill == slice(FRAME_DIM, FRAME_DIM + dim)
    torch.testing.assert_close(obs[:, FRAME_DIM:].norm(dim=-1), torch.ones(6))
    obs, reward, *_ = env.step(torch.zeros(6, 69))
    assert tuple(obs.shape) == (6, FRAME_DIM + dim) and torch.isfinite(reward).all()
    env.close()


@pytest.mark.parametrize("dim", [16, 32])
def test_the_torch_env_names_its_sizes_and_spaces_so_a_loop_need_not_hard_code_them(dim):
    env = RGSDTorchEnv(3, config=EnvConfig(skill_dim=dim))
    assert (env.obs_dim, env.act_dim) == (FRAME_DIM + dim, 69)
    assert env.single_observation_space == gym.spaces.Box(-np.inf, np.inf, (FRAME_DIM + dim,), np.float32)
    assert env.single_action_space == gym.spaces.Box(-1.0, 1.0, (69,), np.float32)
    obs, _ = env.reset(seed=0)
    assert env.single_observation_space.contains(obs[0].numpy())
    env.single_action_space.seed(0)
    actions = torch.as_tensor(np.stack([env.single_action_space.sample() for _ in range(3)]))
    obs, _, _, _, extras = env.step(actions)
    assert tuple(extras.final_obs.shape) == (3, env.obs_dim) and tuple(extras.skills.shape) == (3, dim)
    env.close()
    vmf = RGSDTorchEnv(4, config=EnvConfig(skill_dim=dim, eval_kappa=50.0))
    vmf.reset(seed=1)
    z, z_m = vmf.core.skill, vmf.core.clip_embeddings[vmf.core.clip]
    assert tuple(z.shape) == (4, dim)
    assert ((z * z_m).sum(-1) > 0.5).all()  # vMF(z_m, 50) in R^dim stays near its clip's direction
    vmf.close()


def test_gymnasium_spaces_follow_skill_dim():
    flat = gym.make("rgsd_envs:RGSD-SMPL-v0", skill_dim=32)
    assert flat.observation_space.shape == (FRAME_DIM + 32,)
    obs, _ = flat.reset(seed=0)
    assert flat.observation_space.contains(obs)
    flat.close()
    nested = gym.make("rgsd_envs:RGSD-SMPL-v0", skill_dim=32, obs_mode="dict")
    assert nested.observation_space["skill"].shape == (32,)
    nested.close()


def test_a_skill_option_of_another_size_is_refused():
    env = RGSDTorchEnv(2, config=EnvConfig(skill_dim=32))
    with pytest.raises(ValueError, match=r"must hold 32 numbers \(the env's skill_dim\)"):
        env.reset(seed=0, options={"skill": np.ones(16)})
    env.close()


@pytest.mark.parametrize("bad", [1, 0, 2.5, True])
def test_skill_dim_below_two_or_not_an_integer_is_refused(bad):
    with pytest.raises(ValueError, match="skill_dim must be an integer >= 2"):
        EnvConfig(skill_dim=bad)


def test_an_encoder_file_of_the_env_s_width_is_taken(tmp_path):
    path = MLPEncoder(hidden=(8,), out_dim=32).save(tmp_path / "wide.pt")
    env = RGSDTorchEnv(2, config=EnvConfig(skill_dim=32), encoder=str(path))
    assert tuple(env.core.clip_embeddings.shape[1:]) == (32,)
    env.close()
    with pytest.raises(InputFileError, match="32-D skills, the environment's skill_dim is 16") as err:
        RGSDTorchEnv(2, encoder=str(path))
    assert err.value.field == "out_dim"


def test_a_policy_file_states_its_skill_dim_and_a_mismatch_names_file_and_field(tmp_path):
    path = PolicyMLP(FRAME_DIM + 32, 69, (8,)).save(tmp_path / "policy.pt", skill_dim=32)
    policy = load_policy(path)
    check_policy_fits(policy, path, EnvConfig(skill_dim=32).layout)
    with pytest.raises(InputFileError, match="trained with a 32-D skill, the environment has skill_dim 16") as err:
        check_policy_fits(policy, path, HUMANOID_LAYOUT)
    assert err.value.path == str(path) and err.value.field == "meta.skill_dim"
    old = load_policy(PolicyMLP(FRAME_DIM + 32, 69, (8,)).save(tmp_path / "old.pt"))  # no stated skill_dim
    with pytest.raises(InputFileError, match="needs 375 -> 69") as err:
        check_policy_fits(old, tmp_path / "old.pt", HUMANOID_LAYOUT)
    assert err.value.field == "obs_dim"
