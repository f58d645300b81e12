"""Float precision of the learner: TF32 matmuls on CUDA (``tf32``) and an optional bf16 autocast (``precision``).

``configure_tf32`` is called once where the learner's device is set up. On Ampere and later GPUs
TF32 runs float32 matmuls and convolutions on tensor cores with a 10-bit mantissa (inputs rounded,
float32 accumulation): several times faster for the paper's 1024-wide MLPs, and PPO's noise is far
larger than the rounding. It changes nothing on the CPU. ``learner_autocast`` wraps the learner's
forward and loss computations: "fp32" is a no-op, "bf16" runs matmuls in bfloat16 under
``torch.autocast`` (float32 weights, optimiser and reductions; bf16 needs no loss scaling). bf16
is off by default until it is measured against fp32 on learning curves.
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager

import torch

PRECISIONS = ("fp32", "bf16")
"""Values of the training config's ``precision`` field."""


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


def check_precision(precision: str) -> str:
    """``precision`` if it is one of PRECISIONS, else a ValueError naming the field and the choices."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return precision


def learner_autocast(precision: str, device: str | torch.device) -> AbstractContextManager:
    """The context of the learner's forward passes and losses: bf16 autocast on ``device`` for "bf16", none for "fp32"."""
    if check_precision(precision) == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)
