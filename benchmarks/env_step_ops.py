"""Torch operations and warp kernel launches per env step, counted on the CPU warp device.

On a GPU each torch operation is (at least) one kernel launch and each ``wp.launch`` outside a captured graph is
another; at 8192 worlds the H200 spends 16.2 ms of GPU work in an env step that takes 21.3 ms, the rest being the
host launching them and waiting (docs/results/gpu_h200/profile.txt). The counts are device-independent, so this runs on a
CPU: ``RGSDTorchEnv`` with the encoder reward on warp (``--device cpu``), actions already on the device, and for
``--steps`` steps after a warm-up it counts

- ``torch ops``: aten operations seen by a ``TorchDispatchMode`` (views included: they are host work too);
- ``warp launches``: ``wp.launch`` calls (on CUDA the physics substeps replay as one graph instead, counted as one
  ``graph`` launch: ``--device cuda``);
- ``after the read``: the torch ops the host issues after the step's one device read, while the device waits
  for it; with ``masked_restarts`` off (finished worlds restart by host index after the read) and on (their
  restarts queued before it, the default on CUDA);
- the ops by name, most frequent first (``--top``).

Run: ``python benchmarks/env_step_ops.py [--num-envs 64] [--steps 20]`` (seconds once warp has compiled).
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from rgsd_envs.envs.torch_env import RGSDTorchEnv
from rgsd_envs.humanoid import skeleton as sk


class OpCounter(TorchDispatchMode):
    """Counts every aten operation dispatched inside the mode, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))


@contextmanager
def counting_warp_launches() -> Iterator[Counter[str]]:
    """Count ``wp.launch`` and ``wp.capture_launch`` calls inside the block (by kind)."""
    from rgsd_envs.testing import watching_warp

    counts: Counter[str] = Counter()

    def count(name: str, args: tuple, kwargs: dict) -> None:
        counts["graph" if name == "capture_launch" else "kernel"] += 1

    with watching_warp(("launch", "capture_launch"), count):
        yield counts


def count_per_step(
    num_envs: int, steps: int, device: str, masked: bool
) -> tuple[float, float, dict[str, float], Counter[str]]:
    """(torch ops, of them after the read, warp launches by kind, ops by name) per env step of the warp env with
    the encoder reward and ``masked_restarts`` as given."""
    from unittest import mock

    from rgsd_envs.envs import torch_env

    env = RGSDTorchEnv(num_envs, backend="warp", device=device)
    env.masked_restarts = masked
    gen = torch.Generator(device).manual_seed(0)
    actions = [0.1 * torch.randn(num_envs, sk.NUM_DOFS, generator=gen, device=device) for _ in range(steps + 3)]
    env.reset(seed=0)
    for a in actions[:3]:  # kernel loads, graph captures, first allocations
        env.step(a)
    counter = OpCounter()
    at_read: list[int] = []
    read = torch_env.read_host_flags

    def counted_read(flags: torch.Tensor):
        at_read.append(sum(counter.ops.values()))
        return read(flags)

    after = 0
    with mock.patch.object(torch_env, "read_host_flags", counted_read), counting_warp_launches() as launches, counter:
        for a in actions[3:]:
            env.step(a)
            after += sum(counter.ops.values()) - at_read[-1]
    env.close()
    ops = sum(counter.ops.values()) / steps
    return ops, after / steps, {k: v / steps for k, v in launches.items()}, counter.ops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--device", default="cpu", help="warp's device (cpu, or cuda on a GPU machine)")
    parser.add_argument("--top", type=int, default=15, help="most frequent ops to list")
    args = parser.parse_args()
    print(f"warp env with the encoder reward, {args.num_envs} worlds on {args.device}, {args.steps} steps:")
    for masked in (False, True):
        ops, after, launches, by_name = count_per_step(args.num_envs, args.steps, args.device, masked)
        print(f" masked_restarts {masked}:")
        print(f"  torch ops per env step:       {ops:.0f} ({after:.0f} after the read)")
        for kind, n in sorted(launches.items()):
            print(f"  warp {kind} launches per step: {n:.0f}")
        print(
            "  most frequent ops (per step): "
            + ", ".join(f"{k} {v / args.steps:.0f}" for k, v in by_name.most_common(args.top))
        )


if __name__ == "__main__":
    main()
