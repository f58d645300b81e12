"""The learner's precision switches: TF32 on CUDA only, bf16 autocast on request, and their config fields."""

from __future__ import annotations

import pytest
import torch

from rgsd_agents.config import TrainConfig, load_config
from rgsd_agents.precision import configure_tf32, learner_autocast


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


def test_bf16_autocast_runs_the_learners_matmuls_in_bfloat16_and_fp32_changes_nothing():
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    x = torch.randn(32, 8)
    with learner_autocast("fp32", "cpu"):
        full = net(x)
    with learner_autocast("bf16", torch.device("cpu")):
        half = net(x)
        loss = half.float().pow(2).mean()
    loss.backward()
    assert full.dtype == torch.float32 and half.dtype == torch.bfloat16
    assert all(p.grad.dtype == torch.float32 for p in net.parameters())  # weights and gradients stay float32
    torch.testing.assert_close(half.float(), full, atol=0.05, rtol=0.05)  # bf16: 8-bit mantissa
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16, got 'fp16'"):
        learner_autocast("fp16", "cpu")


def test_config_defaults_to_tf32_and_fp32_and_rejects_other_precisions():
    cfg = TrainConfig()
    assert cfg.tf32 is True and cfg.precision == "fp32"
    cfg = load_config("cpu", {"tf32": False, "precision": "bf16"})
    assert cfg.tf32 is False and cfg.precision == "bf16"
    with pytest.raises(ValueError, match="precision"):
        load_config("cpu", {"precision": "half"})
