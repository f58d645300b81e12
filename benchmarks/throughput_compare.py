"""Training throughput of two checkouts side by side in one run, interleaved, in wall and CPU time.

``python benchmarks/throughput_compare.py OLD_CHECKOUT NEW_CHECKOUT`` runs each
checkout's ``benchmarks/train_throughput.py`` machinery (its ``ours`` loop: the
full training iteration of the ``cpu`` preset) in a child process with that
checkout's packages first on ``PYTHONPATH``, alternating A, B, A, B ... for
``--rounds`` rounds, and prints samples/s of wall time and samples per CPU
second (the process's CPU time over all its threads). On a busy machine the wall
figures move with the load; the CPU figures move much less, so they carry the
comparison there.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, os, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, os.path.join(sys.argv[1], "benchmarks"))
import train_throughput as tt
from rgsd_agents.config import load_config
from rgsd_agents.training.runner import Runner
cfg = load_config("cpu", {"probe_every": 0})
with tempfile.TemporaryDirectory() as tmp:
    cfg.encoder = tt.make_encoder(cfg, Path(tmp))
    runner = Runner(cfg, Path(tmp) / "run", progress=False)
    runner.iterate()
    iters = int(sys.argv[2])
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(iters):
        runner.iterate()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    runner.close()
print(json.dumps({"wall_sps": cfg.batch_size * iters / wall, "cpu_sps": cfg.batch_size * iters / cpu}))
"""


def measure(checkout: Path, iterations: int) -> dict[str, float]:
    """One child run of ``checkout``'s training loop: samples per wall second and per CPU second."""
    paths = [str(checkout / "packages" / p / "src") for p in ("rgsd-envs", "rgsd-agents", "rgsd-eval")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(checkout), str(iterations)], env=env, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise RuntimeError(f"{checkout}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=6)
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for r in range(args.rounds):
        for name in ("old", "new"):
            m = measure(getattr(args, name), args.iterations)
            results[name].append(m)
            load = os.getloadavg()[0]
            print(
                f"round {r + 1} {name}: {m['wall_sps']:7.0f} samples/s wall, {m['cpu_sps']:7.0f} per CPU s (load {load:.1f})",
                flush=True,
            )
    for key, label in (("wall_sps", "samples/s (wall)"), ("cpu_sps", "samples per CPU second")):
        old = statistics.median(m[key] for m in results["old"])
        new = statistics.median(m[key] for m in results["new"])
        print(f"median {label:<24s} old {old:7.0f}  new {new:7.0f}  new / old = {new / old:.2f}")


if __name__ == "__main__":
    main()
