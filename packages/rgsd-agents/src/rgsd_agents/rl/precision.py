"""Float precision of the learner: TF32 matmuls on CUDA, always on for a CUDA learner.

``configure_tf32`` is called once where the learner's device is set up. On Ampere and later GPUs
TF32 runs float32 matmuls and convolutions on tensor cores with a 10-bit mantissa (inputs rounded,
float32 accumulation): several times faster for the paper's 1024-wide MLPs, and PPO's noise is far
larger than the rounding. It changes nothing on the CPU. The bf16 learner is a PPO option of its own
(``ppo.bf16``: ``rgsd_agents.rl.networks.forward_mixed``, hidden layers under bf16 autocast, output layers,
losses and Adam in float32); ``ppo.bf16: auto`` turns it on only for a CPU learner whose CPU has native
bf16 arithmetic (AVX512-BF16 or AMX-BF16); elsewhere autocast would emulate bf16 and be slower than float32.
Its speed-up is not measured in the committed results (``benchmarks/update_cost.py`` times the update both ways).
"""

from __future__ import annotations

from pathlib import Path

import torch

BF16_SETTINGS = (True, False, "auto")
"""Values of ``ppo.bf16``."""
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
"""/proc/cpuinfo flags of CPUs with bf16 dot products in hardware."""


def configure_tf32(device: str | torch.device, enabled: bool = True) -> bool:
    """Allow (or forbid) TF32 for float32 matmuls and cuDNN on a CUDA learner; no-op off CUDA. True if TF32 is on."""
    if torch.device(device).type != "cuda":
        return False
    # the legacy switches: torch >= 2.9 refuses to read them once its new fp32_precision API was used to set
    # TF32, while values set here can be read through either API
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    torch.set_float32_matmul_precision("high" if enabled else "highest")
    return enabled


def cpu_has_native_bf16(cpuinfo: str | Path = "/proc/cpuinfo") -> bool:
    """Whether the CPU lists a native bf16 flag (AVX512-BF16, AMX-BF16) in ``cpuinfo``; False where unreadable."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return False
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return any(f in flags for f in NATIVE_BF16_FLAGS)


def check_bf16_setting(setting: object) -> None:
    """Raise a ValueError naming ``ppo.bf16`` unless ``setting`` is one of ``BF16_SETTINGS``."""
    if setting not in BF16_SETTINGS:
        raise ValueError(f"ppo.bf16 must be true, false or auto, got {setting!r}")


def resolve_bf16(setting: bool | str, device: str | torch.device) -> bool:
    """``ppo.bf16`` as used: True/False as given; "auto": a CPU learner on a CPU with native bf16."""
    check_bf16_setting(setting)
    if setting == "auto":
        return torch.device(device).type == "cpu" and cpu_has_native_bf16()
    return bool(setting)
