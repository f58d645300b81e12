"""The learner's precision switches: TF32 on CUDA only, bf16 autocast on request, and their config fields."""

from __future__ import annotations

import pytest
import torch

from rgsd_agents.config import TrainConfig, load_config
from rgsd_agents.rl.precision import configure_tf32


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


def test_bf16_is_the_ppo_option_and_off_by_default():
    assert TrainConfig().ppo.bf16 is False
    assert load_config("cpu", {"ppo.bf16": True}).ppo.bf16 is True


def test_bf16_auto_is_on_only_for_a_cpu_learner_with_native_bf16(tmp_path, monkeypatch):
    from rgsd_agents.config import PPOConfig
    from rgsd_agents.rl import precision
    from rgsd_agents.rl.networks import ActorCritic, NetworkConfig
    from rgsd_agents.rl.ppo import PPO

    native = tmp_path / "cpuinfo_spr"
    native.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_bf16 amx_tile\n")
    plain = tmp_path / "cpuinfo_avx2"
    plain.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 fma\n")
    assert precision.cpu_has_native_bf16(native) and not precision.cpu_has_native_bf16(plain)
    assert not precision.cpu_has_native_bf16(tmp_path / "missing")  # no /proc (macOS, Windows): off
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: True)
    assert precision.resolve_bf16("auto", "cpu") and not precision.resolve_bf16("auto", "cuda:0")
    assert precision.resolve_bf16(True, "cuda") and not precision.resolve_bf16(False, "cpu")
    ac = ActorCritic(8, 3, NetworkConfig(actor_hidden=(16,), critic_hidden=(16,)))
    assert PPO(ac, PPOConfig(bf16="auto")).bf16 is True
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: False)
    assert PPO(ac, PPOConfig(bf16="auto")).bf16 is False and PPO(ac, PPOConfig(bf16=True)).bf16 is True
    with pytest.raises(ValueError, match=r"ppo\.bf16 must be true, false or auto"):
        PPOConfig(bf16="fast")
    assert load_config("cpu", {"ppo.bf16": "auto"}).ppo.bf16 == "auto"
