"""Counting the places where Python code reads a tensor back to the host.

On a GPU each read (``Tensor.numpy``, ``.cpu``, ``.item``, ``.tolist``, and the
truth value of a tensor, ``bool(t)``, behind ``if mask.any():``) waits for the
device's queue to drain. ``count_host_reads`` wraps those five methods of
``torch.Tensor`` with counters for the duration of a block, so a test or a
benchmark can pin how many reads a training step makes on any device, the CPU
included (where the reads are free but the same code paths run). Reads made
from C++ (inside torch ops) are not seen: only Python calls, which is where a
data-dependent branch lives.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

READ_METHODS = ("numpy", "cpu", "item", "tolist", "__bool__")
"""The ``torch.Tensor`` methods counted as host reads."""


@contextlib.contextmanager
def count_host_reads() -> Iterator[Counter[str]]:
    """Count calls of ``READ_METHODS`` on any tensor inside the block (not thread-safe: one block at a time)."""
    counts: Counter[str] = Counter()
    originals = {name: getattr(torch.Tensor, name) for name in READ_METHODS}

    def counted(name: str, fn: Any) -> Any:
        def wrapper(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return fn(self, *args, **kwargs)

        wrapper.__name__ = name
        return wrapper

    for name, fn in originals.items():
        setattr(torch.Tensor, name, counted(name, fn))
    try:
        yield counts
    finally:
        for name, fn in originals.items():
            setattr(torch.Tensor, name, fn)


def read_host_flags(flags: torch.Tensor) -> np.ndarray:
    """A (k, N) bool tensor as a host array in ONE read (``tolist``; ``.cpu().numpy()`` would be two calls and,
    on a GPU, a device copy plus a host view)."""
    return np.array(flags.tolist(), dtype=bool).reshape(flags.shape)
