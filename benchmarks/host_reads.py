"""Host reads per env step of ``rgsd train`` on both backends.

A host read is a Python call of ``Tensor.numpy/.cpu/.item/.tolist/__bool__``
(``rgsd_envs.utils.host_reads.count_host_reads``); on a GPU each one waits for
the device's queue to drain. The runner (``--config``, default ``demo``, with
``--num-envs`` worlds and no probe) makes one warm-up iteration, then the
reads of ``--iterations`` whole iterations (rollout, PPO and discovery updates,
statistics) are counted and divided by the env steps they made; the rollout
alone is also shown. Before the torch interface (commit 88edfca) the same count
gave 38 per step on the warp path and 47 on the mujoco path.

The mujoco count is the warp count plus the restarts: ``MujocoBackend.set_state`` turns the restarted worlds'
ids, qpos and qvel into numpy arrays (``.cpu().numpy()`` each: six counted calls, which read nothing on the CPU
device), once per step that restarts any world. So it moves with how often episodes end; ``restarts`` prints
the share of counted steps that restarted a world.

Run: ``python benchmarks/host_reads.py`` (about a minute on 2 cores; the first warp
run of a machine compiles kernels for about 50 s more).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from rgsd_agents.config import load_config
from rgsd_agents.testing import tiny_encoder_file
from rgsd_agents.training.runner import Runner
from rgsd_envs.utils.host_reads import count_host_reads

BEFORE = {"warp": 38.0, "mujoco": 47.0}
"""Reads per env step before the torch interface (the same count, demo preset)."""


def reads_per_step(
    backend: str, config: str, num_envs: int, iterations: int, folder: Path
) -> tuple[float, float, float, dict]:
    """(whole iterations, rollout alone) reads per env step, the share of the iterations' steps that restarted
    a world, and the counts by method of the iterations."""
    sets = {"probe_every": 0, "num_envs": num_envs, "env.backend": backend, "device": "cpu"}
    cfg = load_config(config, sets)
    cfg.encoder = str(tiny_encoder_file(folder / f"{backend}-encoder.pt"))
    runner = Runner(cfg, folder / backend, progress=False)
    runner.iterate()
    sim = runner.env.core.backend
    restarts = []
    set_state = sim.set_state

    def counted_set_state(*args):  # one call per step that restarts worlds
        restarts.append(1)
        set_state(*args)

    sim.set_state = counted_set_state
    with count_host_reads() as whole:
        for _ in range(iterations):
            runner.iterate()
    share = len(restarts) / (iterations * cfg.horizon)
    with count_host_reads() as rollout:
        runner.rollout()
    runner.close()
    steps = cfg.horizon
    return sum(whole.values()) / (iterations * steps), sum(rollout.values()) / steps, share, dict(whole)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="demo")
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--backends", nargs="+", default=["warp", "mujoco"])
    args = parser.parse_args()
    print(f"host reads per env step, rgsd train --config {args.config}, {args.num_envs} worlds, CPU device")
    print(f"{'backend':<8} {'iteration':>10} {'rollout':>8} {'before':>7} {'restarts':>9}   by method (iterations)")
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends:
            whole, rollout, share, counts = reads_per_step(
                backend, args.config, args.num_envs, args.iterations, Path(tmp)
            )
            print(f"{backend:<8} {whole:10.2f} {rollout:8.2f} {BEFORE[backend]:7.0f} {share:9.2f}   {counts}")


if __name__ == "__main__":
    main()
