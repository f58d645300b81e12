"""ASE's and CALM's settings pinned to their authors' code, each number beside the file and line it comes from.

The code read: nv-tlabs/ASE at commit 28952a3 and NVlabs/CALM at commit 4f6bdb9. The ``<method>_paper`` preset
holds the method's PPO and policy, the method's config dataclass its own networks and losses. What rgsd keeps
otherwise is listed in docs/methods.md ("Departures from the papers").
"""

from __future__ import annotations

import pytest

from rgsd_agents.config import load_config
from rgsd_agents.methods.ase import ASEConfig
from rgsd_agents.methods.calm import CALMConfig
from rgsd_agents.rl.ppo import BOUNDS_COEF
from rgsd_envs.humanoid.mjcf import CONTROL_HZ


def _discriminator_steps(cfg) -> int:
    """Discriminator steps per iteration: one in every PPO minibatch step."""
    return cfg.ppo.epochs * (cfg.num_envs * cfg.horizon // cfg.ppo.minibatch_size)


def test_ase_defaults_and_ase_paper_preset_follow_ase_s_code():
    paper, cfg = load_config("ase_paper"), ASEConfig()
    net, ppo = paper.networks, paper.ppo
    assert paper.method.options == {}  # the method's settings are ASEConfig's defaults
    # policy and critic
    # nv-tlabs/ASE ase/data/cfg/train/rlg/ase_humanoid.yaml:27-28 (mlp units, activation), :12 (separate critic)
    assert net.actor_hidden == net.critic_hidden == (1024, 1024, 512)
    assert net.activation == "relu"
    # nv-tlabs/ASE ase/learning/ase_network_builder.py:156 (style_units), :288 (style of the latent's size), :285 (tanh)
    assert net.latent_branch == (512, 256)
    # nv-tlabs/ASE ase/data/cfg/train/rlg/ase_humanoid.yaml:22-24 (sigma -2.9, fixed)
    assert (net.init_log_std, net.learn_std) == (-2.9, False)
    # PPO
    # nv-tlabs/ASE ase/data/cfg/train/rlg/ase_humanoid.yaml:66 (learning_rate); one Adam for every network:
    # nv-tlabs/ASE ase/learning/common_agent.py:45
    assert ppo.actor_lr == ppo.critic_lr == cfg.lr == 2e-5
    # nv-tlabs/ASE ase/data/cfg/train/rlg/ase_humanoid.yaml:64 (gamma), :65 (tau), :77 (e_clip)
    assert (ppo.gamma, ppo.gae_lambda, ppo.clip) == (0.99, 0.95, 0.2)
    # nv-tlabs/ASE ase/data/cfg/humanoid_ase.yaml:3 (numEnvs); ase/data/cfg/train/rlg/ase_humanoid.yaml:78 (horizon)
    assert (paper.num_envs, paper.horizon) == (4096, 32)
    # nv-tlabs/ASE ase/data/cfg/train/rlg/ase_humanoid.yaml:80 (mini_epochs), :79 (minibatch_size)
    assert (ppo.epochs, ppo.minibatch_size) == (6, 16384)
    # nv-tlabs/ASE ase/data/cfg/train/rlg/ase_humanoid.yaml:81 (critic_coef); the squared error unhalved:
    # nv-tlabs/ASE ase/learning/common_agent.py:529
    assert ppo.critic_coef == 5.0
    # nv-tlabs/ASE ase/data/cfg/train/rlg/ase_humanoid.yaml:74 (entropy_coef)
    assert ppo.entropy_coef == 0.0
    # nv-tlabs/ASE ase/data/cfg/train/rlg/ase_humanoid.yaml:84 (bounds_loss_coef); ase/learning/common_agent.py:458
    # (soft_bound)
    assert (BOUNDS_COEF, ppo.bound) == (10.0, 1.0)
    # nv-tlabs/ASE ase/data/cfg/train/rlg/ase_humanoid.yaml:75 (truncate_grads: False)
    assert ppo.max_grad_norm is None
    # discriminator and encoder
    # nv-tlabs/ASE ase/data/cfg/train/rlg/ase_humanoid.yaml:37 (disc units); the encoder on the same trunk: :46
    # (enc separate: False), ase/learning/ase_network_builder.py:203
    assert cfg.hidden == (1024, 1024, 512)
    # nv-tlabs/ASE ase/data/cfg/train/rlg/ase_humanoid.yaml:89 (amp_minibatch_size); the minibatch's first rows:
    # ase/learning/ase_agent.py:172, :247
    assert cfg.disc_minibatch_size == 4096
    # 6 mini-epochs of 4096 x 32 / 16384 = 8 minibatches: 48 discriminator steps per iteration
    assert _discriminator_steps(paper) == 48
    # nv-tlabs/ASE ase/data/cfg/train/rlg/ase_humanoid.yaml:92 (disc_grad_penalty), :91 (disc_logit_reg),
    # :94 (disc_weight_decay)
    assert (cfg.grad_penalty, cfg.logit_reg, cfg.weight_decay) == (5.0, 0.01, 1e-4)
    # nv-tlabs/ASE ase/data/cfg/train/rlg/ase_humanoid.yaml:90 (disc_coef 5), :107 (enc_coef 5): equal weights
    assert cfg.encoder_coef == 5.0 / 5.0
    # nv-tlabs/ASE ase/data/cfg/train/rlg/ase_humanoid.yaml:113 (disc_reward_w) x :93 (disc_reward_scale)
    assert cfg.disc_weight == 0.5 * 2.0
    # nv-tlabs/ASE ase/data/cfg/train/rlg/ase_humanoid.yaml:114 (enc_reward_w), :109 (enc_reward_scale)
    assert (cfg.beta, cfg.kappa) == (0.5, 1.0)
    # nv-tlabs/ASE ase/data/cfg/train/rlg/ase_humanoid.yaml:99-100 (latent_steps_min, latent_steps_max)
    assert (cfg.latent_steps_min, cfg.latent_steps_max) == (1, 150)
    # nv-tlabs/ASE ase/data/cfg/train/rlg/ase_humanoid.yaml:105 (amp_diversity_tar); its weight, :104 (0.01), is
    # off as in the RGSD paper's ASE
    assert (cfg.diversity_target, cfg.diversity_coef) == (1.0, 0.0)


def test_calm_defaults_and_calm_paper_preset_follow_calm_s_code():
    paper, cfg = load_config("calm_paper"), CALMConfig()
    net, ppo = paper.networks, paper.ppo
    assert paper.method.options == {}  # the method's settings are CALMConfig's defaults
    # policy and critic
    # NVlabs/CALM calm/data/cfg/train/rlg/calm_humanoid.yaml:27-28 (mlp units, activation), :12 (separate critic)
    assert net.actor_hidden == net.critic_hidden == (1024, 1024, 512)
    assert net.activation == "relu"
    # NVlabs/CALM calm/learning/calm_network_builder.py:227 (style_units), :236-242 (the actor's style net)
    assert net.latent_branch == (512, 256)
    # NVlabs/CALM calm/data/cfg/train/rlg/calm_humanoid.yaml:22-24 (sigma -2.9, fixed)
    assert (net.init_log_std, net.learn_std) == (-2.9, False)
    # PPO
    # NVlabs/CALM calm/data/cfg/train/rlg/calm_humanoid.yaml:72 (learning_rate); one Adam for every network:
    # NVlabs/CALM calm/learning/common_agent.py:64
    assert ppo.actor_lr == ppo.critic_lr == cfg.lr == cfg.encoder_lr == 2e-5
    # NVlabs/CALM calm/data/cfg/train/rlg/calm_humanoid.yaml:70 (gamma), :71 (tau), :84 (e_clip)
    assert (ppo.gamma, ppo.gae_lambda, ppo.clip) == (0.99, 0.95, 0.2)
    # NVlabs/CALM calm/data/cfg/humanoid_calm_sword_shield_getup.yaml:3 (numEnvs);
    # calm/data/cfg/train/rlg/calm_humanoid.yaml:85 (horizon_length)
    assert (paper.num_envs, paper.horizon) == (4096, 32)
    # NVlabs/CALM calm/data/cfg/train/rlg/calm_humanoid.yaml:87 (mini_epochs), :86 (minibatch_size)
    assert (ppo.epochs, ppo.minibatch_size) == (6, 16384)
    # NVlabs/CALM calm/data/cfg/train/rlg/calm_humanoid.yaml:88 (critic_coef)
    assert ppo.critic_coef == 5.0
    # NVlabs/CALM calm/data/cfg/train/rlg/calm_humanoid.yaml:81 (entropy_coef)
    assert ppo.entropy_coef == 0.0
    # NVlabs/CALM calm/data/cfg/train/rlg/calm_humanoid.yaml:91 (bounds_loss_coef); calm/learning/common_agent.py:472
    # (soft_bound)
    assert (BOUNDS_COEF, ppo.bound) == (10.0, 1.0)
    # NVlabs/CALM calm/data/cfg/train/rlg/calm_humanoid.yaml:82 (truncate_grads: False)
    assert ppo.max_grad_norm is None
    # motion encoder
    # NVlabs/CALM calm/data/cfg/train/rlg/calm_humanoid.yaml:51 (enc units)
    assert cfg.encoder_hidden == (1024, 1024, 512)
    # NVlabs/CALM calm/learning/calm_network_builder.py:272 (60 frames a window);
    # calm/data/cfg/humanoid_calm_sword_shield_getup.yaml:15 (numAMPEncObsSteps)
    assert cfg.window == 60
    # NVlabs/CALM calm/data/cfg/train/rlg/calm_humanoid.yaml:118 (enc_regularization_coeff);
    # calm/learning/calm_agent.py:529 (align + 0.5 x uniform)
    assert (cfg.encoder_reg, cfg.uniformity_weight) == (0.1, 0.5)
    # NVlabs/CALM calm/learning/calm_agent.py:510-516: uniformity over amp_minibatch_size windows,
    # calm/data/cfg/train/rlg/calm_humanoid.yaml:96
    assert cfg.uniformity_rows == 4096
    # NVlabs/CALM calm/env/tasks/humanoid_amp.py:159 (the second window up to 0.5 s later)
    assert cfg.align_max_offset == 0.5 * CONTROL_HZ
    # conditional discriminator
    # NVlabs/CALM calm/data/cfg/train/rlg/calm_humanoid.yaml:44 (conditional_disc units)
    assert cfg.disc_hidden == (1024, 1024, 512)
    # NVlabs/CALM calm/learning/calm_network_builder.py:166 (style_units), :172-178 (its style net)
    assert cfg.disc_latent_branch == (512, 256)
    # NVlabs/CALM calm/data/cfg/train/rlg/calm_humanoid.yaml:96 (amp_minibatch_size); the minibatch's first rows:
    # calm/learning/calm_agent.py:303, :321
    assert cfg.disc_minibatch_size == 4096
    # 6 mini-epochs of 4096 x 32 / 16384 = 8 minibatches: 48 discriminator steps per iteration
    assert _discriminator_steps(paper) == 48
    # NVlabs/CALM calm/data/cfg/train/rlg/calm_humanoid.yaml:104 (conditional_disc_grad_penalty), :103 (logit reg),
    # :106 (weight decay)
    assert (cfg.grad_penalty, cfg.logit_reg, cfg.weight_decay) == (5.0, 0.01, 1e-4)
    # NVlabs/CALM calm/data/cfg/train/rlg/calm_humanoid.yaml:117 (conditional_disc_reward_w) x :105 (reward scale)
    assert cfg.disc_weight == 1.0 * 2.0
    # NVlabs/CALM calm/data/cfg/train/rlg/calm_humanoid.yaml:112-113 (latent_steps_min, latent_steps_max)
    assert (cfg.latent_steps_min, cfg.latent_steps_max) == (10, 150)


@pytest.mark.parametrize("name", ["ase", "calm"])
def test_the_cpu_scale_presets_keep_the_cpu_preset_s_ppo_and_policy(name):
    """At cpu scale every method shares the cpu preset's PPO and networks (the comparison on one budget)."""
    cpu, base = load_config(name), load_config("cpu")
    assert cpu.ppo == base.ppo and cpu.networks == base.networks
    assert cpu.networks.latent_branch == ()
