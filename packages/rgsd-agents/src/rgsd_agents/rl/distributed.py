"""Data-parallel training with ``torch.distributed``, launched by ``torchrun`` (one process per GPU or CPU slot).

``torchrun --nproc-per-node K -m rgsd_agents.cli train ...`` starts K processes
with ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` in their environment (rsl_rl's
multi-GPU runner reads the same variables). ``init_distributed`` joins the
process group: NCCL when the device is a GPU (rank r uses ``cuda:LOCAL_RANK``),
gloo on CPUs (how CI tests it). Without those variables, or with one process,
it returns ``None`` and training runs exactly as a single process.

What keeps the ranks identical (``DataParallel``): the learners' parameters and
buffers are broadcast from rank 0 at the start and after a resume; every
gradient of the actor, the critic and the discovery encoder is averaged over
the ranks before each optimiser step (so gradient clipping and Adam see the same
numbers everywhere); the observation and value normalisers fold in the moments
(count, mean, variance) of all ranks' batches, so their statistics stay equal.
Each rank steps its own worlds with seed + rank; advantages are standardised per
rank. Rank 0 alone writes the run folder, TensorBoard, probes and checkpoints.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from rgsd_envs.utils.device import resolve_device

Tensor = torch.Tensor
log = logging.getLogger(__name__)
TIMEOUT = datetime.timedelta(hours=2)
"""How long a rank waits for the others (rank 0 may pretrain the encoder while they wait)."""


def launched_ranks() -> tuple[int, int, int]:
    """(rank, world size, local rank) from torchrun's environment variables ((0, 1, 0) without them)."""
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("LOCAL_RANK", 0))


@dataclass
class DataParallel:
    """One rank of a data-parallel run; the collectives that keep the ranks' learners identical."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that writes files and logs."""
        return self.rank == 0

    # -- gradients ---------------------------------------------------------------------
    @torch.no_grad()
    def average_gradients(self, params: Iterable[nn.Parameter]) -> None:
        """Replace each parameter's gradient by its mean over the ranks (one flat all-reduce; None counts as 0)."""
        params = [p for p in params if p.requires_grad]
        if not params:
            return
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        flat /= self.world_size
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = flat[offset : offset + n].view_as(p).clone()
            offset += n

    # -- normaliser statistics -----------------------------------------------------------
    @torch.no_grad()
    def batch_moments(self, x: Tensor) -> tuple[int, Tensor, Tensor]:
        """(count, mean, population variance) over the rows of every rank's batch ``x`` (B, ...), in x's dtype."""
        count = torch.tensor([float(x.shape[0])], dtype=torch.float64, device=x.device)
        total = x.sum(0)
        dist.all_reduce(count)
        dist.all_reduce(total)
        n = int(count.item())
        if n == 0:
            return 0, total, torch.zeros_like(total)
        mean = total / n
        m2 = (x - mean).square().sum(0)
        dist.all_reduce(m2)
        return n, mean, m2 / n

    @torch.no_grad()
    def mean(self, x: Tensor) -> Tensor:
        """The mean of the scalar ``x`` over the ranks (every rank gets the same value)."""
        t = x.detach().reshape(1).to(self._collective_device, torch.float64)
        dist.all_reduce(t)
        return (t / self.world_size).to(x.device, x.dtype).reshape(x.shape)

    # -- parameters and flags --------------------------------------------------------------
    @torch.no_grad()
    def broadcast_module(self, module: nn.Module) -> None:
        """Rank 0's parameters and buffers into every rank's ``module``."""
        for t in [*module.parameters(), *module.buffers()]:
            dist.broadcast(t.data, src=0)

    def any(self, flag: bool) -> bool:
        """Whether ``flag`` is set on any rank (every rank gets the same answer)."""
        t = torch.tensor([1.0 if flag else 0.0], device=self._collective_device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item() > 0)

    def max_int(self, value: int) -> int:
        """The largest ``value`` over the ranks (every rank gets the same answer)."""
        t = torch.tensor([value], dtype=torch.int64, device=self._collective_device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return int(t.item())

    def main_value(self, value: Any) -> Any:
        """Rank 0's ``value`` (a picklable object) on every rank."""
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather_to_main(self, value: Any) -> list[Any] | None:
        """Every rank's ``value`` as a list on rank 0 (None elsewhere)."""
        out: list[Any] | None = [None] * self.world_size if self.is_main else None
        dist.gather_object(value, out, dst=0)
        return out

    def barrier(self) -> None:
        """Wait for every rank."""
        if self.device.type == "cuda":
            dist.barrier(device_ids=[self.device.index])
        else:
            dist.barrier()

    @property
    def _collective_device(self) -> torch.device:
        return self.device if self.device.type == "cuda" else torch.device("cpu")


def init_distributed(device_spec: str = "auto") -> DataParallel | None:
    """Join the process group torchrun set up (NCCL on GPUs, gloo on CPUs); None for a single process."""
    rank, world_size, local_rank = launched_ranks()
    if world_size <= 1:
        return None
    device = resolve_device(device_spec)
    if device.type == "cuda":
        device = resolve_device(f"cuda:{local_rank}")
        torch.cuda.set_device(device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    if not dist.is_initialized():
        kwargs: dict[str, Any] = {"device_id": device} if device.type == "cuda" else {}
        dist.init_process_group(backend, rank=rank, world_size=world_size, timeout=TIMEOUT, **kwargs)
    log.info("rank %d of %d (%s on %s)", rank, world_size, backend, device)
    return DataParallel(rank, world_size, local_rank, device)


def shutdown(dp: DataParallel | None, wait: bool = True) -> None:
    """Leave the process group (no-op for a single process); ``wait``: after every rank has arrived here."""
    global _left_group
    if dp is not None and dist.is_initialized():
        if wait:  # a rank tearing its group down while another still talks to it can abort that one at exit
            dist.barrier()
        dist.destroy_process_group()
        _left_group = True


_left_group = False
"""Whether this process has joined a process group and left it (``shutdown``)."""


def end_rank(code: int) -> int:
    """``code``, or for a rank that has left its process group: the process ends here with ``code``.

    Past ``destroy_process_group`` the backend's threads can still be alive, and the interpreter's teardown then
    aborts the rank now and then ("terminate called without an active exception", exit -6) after a complete run,
    which torchrun reports as a failed job. Once the run's files are closed (the caller's), nothing is left for
    that teardown to do: the streams are flushed and the process exits at once.
    """
    if not _left_group:
        return code
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed terminal (SIGHUP) or stream
            stream.flush()
    os._exit(code)
