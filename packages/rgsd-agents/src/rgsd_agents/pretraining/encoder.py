"""A fresh encoder for pretraining: seeded initialisation, inputs standardised on the references."""

from __future__ import annotations

import torch

from rgsd_agents.pretraining.config import PretrainConfig
from rgsd_agents.pretraining.statistics import input_stats
from rgsd_envs.rewards.encoders import MLPEncoder
from rgsd_envs.utils.device import resolve_device

Tensor = torch.Tensor


def build_encoder(cfg: PretrainConfig, inputs: Tensor) -> MLPEncoder:
    """A freshly initialised encoder (seeded) standardising with the reference inputs' statistics."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        encoder = MLPEncoder(cfg.hidden, out_dim=cfg.skill_dim, kappa=cfg.kappa)
    mean, std = input_stats(inputs)
    encoder.set_input_stats(mean.cpu(), std.cpu())
    return encoder.to(resolve_device(cfg.device))
