"""Thread discipline between MuJoCo's stepping threads and torch's intra-op pool.

On a few cores, torch's OpenMP workers spin after each parallel region and
steal the cores MuJoCo's batch threads step on (measured: step + state 42 ms vs
10 ms at N=64 on 2 cores). Environment-side tensors are small, so the env runs
its torch work on one thread; importing rgsd_envs before torch also makes idle
OpenMP workers sleep (``OMP_WAIT_POLICY=PASSIVE``) unless the user chose a policy.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import torch

F = TypeVar("F", bound=Callable[..., Any])


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` torch intra-op threads (None: unchanged); cheap to enter."""
    before = torch.get_num_threads()
    if n is None or n == before:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def single_threaded() -> contextlib.AbstractContextManager[None]:
    """Run torch ops on one intra-op thread inside the block."""
    return torch_threads(1)


def env_side(fn: F) -> F:
    """Decorator: run an environment method's torch work single-threaded."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with single_threaded():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
