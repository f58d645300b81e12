"""DIAYN's settings pinned to its authors' code (ben-eysenbach/sac: sac/algos/diayn.py, examples/mujoco_all_diayn.py)
where rgsd follows it; the departures (16-D vMF skills for its 50 categorical ones, PPO for SAC) are rows of
docs/methods.md's departures table."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rgsd_agents.config import load_config
from rgsd_agents.methods import METHODS
from rgsd_agents.methods.base import SkillMethod
from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.observations import ENCODER_INPUT_DIM, FRAME_DIM, HISTORY_LEN
from rgsd_envs.envs.torch_env import RGSDTorchEnv
from rgsd_envs.rewards.encoders import MLPEncoder


def test_diayn_skills_are_drawn_uniformly_once_per_episode_as_its_code():
    diayn = METHODS["diayn"]
    # sac/algos/diayn.py:92 p_z = 1 / num_skills for every skill; :154-156 z ~ p_z; :394 one z per episode
    assert diayn.choose_skills is SkillMethod.choose_skills  # the env's episode-start z is kept all episode
    assert diayn.IMITATION is False  # every episode is a discovery episode: z from the prior, never z_m
    env = RGSDTorchEnv(64, config=EnvConfig(p_imitation=0.0))
    try:
        env.reset(seed=0)
        z = env.core.skill.double()
    finally:
        env.close()
    # the prior is uniform: on the 16-D sphere (the departure from its 50 one-hot skills), mean near 0
    torch.testing.assert_close(z.norm(dim=-1), torch.ones(64, dtype=torch.float64))
    assert z.mean(0).norm().item() < 3.0 / np.sqrt(64)


def test_diayn_discriminator_reads_states_only_and_its_reward_is_log_q_of_z():
    # examples/mujoco_all_diayn.py:40 include_actions False; sac/algos/diayn.py:176-180 logits of obs only
    assert ENCODER_INPUT_DIM == HISTORY_LEN * FRAME_DIM  # s' with its 4 frames before: no action in it
    torch.manual_seed(0)
    env = RGSDTorchEnv(4, config=EnvConfig(p_imitation=0.0), encoder=MLPEncoder((8,)))  # DIAYN's: random
    try:
        env.reset(seed=0)
        _, reward, _, _, _ = env.step(torch.zeros(4, env.act_dim))
        rc = env.reward_core
        with torch.no_grad():
            mu = rc.trainable(rc.next_encoder_inputs)  # the discovery encoder q(z | s') = vMF(mu(s'), kappa)
        skills = rc.last_skills
    finally:
        env.close()
    assert isinstance(rc.trainable, MLPEncoder) and rc.trainable.input_dim == ENCODER_INPUT_DIM
    # sac/algos/diayn.py:181-188: reward log q(z | s') - log p(z) (add_p_z True: mujoco_all_diayn.py:42). For
    # q = vMF(mu(s'), kappa) and p uniform on the sphere that is kappa mu(s')^T z plus a constant; the env pays
    # C + kappa mu(s')^T z with C = kappa (the RGSD paper's constant), the same up to a constant
    assert rc.constant == rc.kappa
    torch.testing.assert_close(reward, rc.kappa + rc.kappa * (mu * skills).sum(-1))


def test_diayn_discount_follows_its_code():
    cfg = load_config("diayn")
    assert cfg.method.name == "diayn"
    assert cfg.ppo.gamma == pytest.approx(0.99)  # examples/mujoco_all_diayn.py:27 'discount': 0.99
    assert load_config("diayn_paper").ppo.gamma == pytest.approx(0.99)
