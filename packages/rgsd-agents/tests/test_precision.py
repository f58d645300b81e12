"""The learner's precision switches: TF32 on CUDA only, bf16 autocast on request, and their config fields."""

from __future__ import annotations

import pytest
import torch

from rgsd_agents.config import TrainConfig, load_config
from rgsd_agents.precision import configure_tf32


@pytest.fixture
def tf32_flags():
    """The global TF32 switches, restored after the test."""
    saved = (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.get_float32_matmul_precision(),
    )
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]
    torch.set_float32_matmul_precision(saved[2])


def test_tf32_is_switched_on_for_a_cuda_learner_only(tf32_flags):
    assert configure_tf32("cpu") is False
    assert torch.backends.cuda.matmul.allow_tf32 is False and torch.get_float32_matmul_precision() == "highest"
    # the switches are process-wide settings: setting them needs no GPU
    assert configure_tf32(torch.device("cuda", 0)) is True
    assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    assert torch.get_float32_matmul_precision() == "high"
    assert configure_tf32("cuda", enabled=False) is False
    assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
    assert torch.get_float32_matmul_precision() == "highest"


def test_config_defaults_to_tf32_and_bf16_is_the_ppo_option():
    cfg = TrainConfig()
    assert cfg.tf32 is True and cfg.ppo.bf16 is False
    cfg = load_config("cpu", {"tf32": False, "ppo.bf16": True})
    assert cfg.tf32 is False and cfg.ppo.bf16 is True
