"""One rank of test_distributed.py's runs: ``rgsd train`` through the CLI, recording parameters after every update.

Run by torchrun: ``python -m torch.distributed.run --standalone --nproc-per-node 2 distributed_worker.py
RECORD_DIR -- <rgsd train arguments>``. After each iteration every rank appends a line to
``RECORD_DIR/rank<r>.jsonl``: the iteration and a SHA-256 per learner (actor, critic, discovery encoder,
observation and value normalisers) of its parameters' bytes. ``RGSD_TEST_SIGTERM=R:I`` makes rank R send itself
SIGTERM after iteration I (as a scheduler that stops one process of the job would).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
from pathlib import Path

import torch

from rgsd_agents.cli import main
from rgsd_agents.training.runner import Runner


def digests(runner: Runner) -> dict[str, str]:
    """SHA-256 of each learner's state (parameters and buffers) as raw bytes."""
    parts = {
        "actor": runner.ac.actor.net,
        "critic": runner.ac.critic,
        "obs_normalizer": runner.ac.obs_normalizer,
        "value_normalizer": runner.ac.value_normalizer,
        **{f"method.{k}": m for k, m in runner.method.modules().items()},
    }
    out = {}
    for name, module in parts.items():
        h = hashlib.sha256()
        for key, t in module.state_dict().items():
            h.update(key.encode())
            h.update(t.detach().cpu().contiguous().numpy().tobytes())
        out[name] = h.hexdigest()
    return out


def record_to(folder: Path) -> None:
    """Make every Runner append its digests to ``folder/rank<r>.jsonl`` after each iteration."""
    rank = int(os.environ.get("RANK", 0))
    original = Runner.on_iteration

    def on_iteration(self: Runner, metrics: dict[str, float]) -> None:
        original(self, metrics)
        line = {"iteration": self.iteration, "world_size": self.dp.world_size if self.dp else 1, **digests(self)}
        line["policy_loss"] = metrics["losses/policy_loss"]
        line["obs_count"] = float(self.ac.obs_normalizer.count)
        line["actor_lr"] = metrics["charts/actor_lr"]
        line["world_seed"] = self.world_seed
        with open(folder / f"rank{rank}.jsonl", "a") as f:
            f.write(json.dumps(line) + "\n")
        if os.environ.get("RGSD_TEST_SIGTERM") == f"{rank}:{self.iteration}":
            signal.raise_signal(signal.SIGTERM)

    Runner.on_iteration = on_iteration


if __name__ == "__main__":
    torch.set_num_threads(1)
    record_to(Path(sys.argv[1]))
    sys.exit(main(sys.argv[3:]))
