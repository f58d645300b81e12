"""Float precision of the learner: TF32 matmuls on CUDA (the training config's ``tf32``).

``configure_tf32`` is called once where the learner's device is set up. On Ampere and later GPUs
TF32 runs float32 matmuls and convolutions on tensor cores with a 10-bit mantissa (inputs rounded,
float32 accumulation): several times faster for the paper's 1024-wide MLPs, and PPO's noise is far
larger than the rounding. It changes nothing on the CPU. The bf16 learner is a PPO option of its own
(``ppo.bf16``: ``rgsd_agents.networks.forward_mixed``, hidden layers under bf16 autocast, output layers,
losses and Adam in float32).
"""

from __future__ import annotations

import torch


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
