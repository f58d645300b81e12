"""What a humanoid that stays where it starts scores on a downstream run's evaluation episodes.

``rgsd downstream`` evaluates ``eval_episodes`` deterministic episodes, each from the arena's centre to a goal drawn
uniformly in the arena at least ``task.min_goal_distance`` away; their final distance to the goal is only a sign of
travelling towards the goals where it is below the episodes' start distance, which this measures without running a
policy: the pelvis's distance to the goal when each episode starts (what staying put ends at). ``--seed`` draws the
episodes as a run of that seed does (``rgsd_agents.downstream.runner.world_seeds``); ``--world-seed S`` gives world i
the seed S + i instead (the evaluation episodes of runs whose records name that rule, such as the committed
``docs/results/downstream_shipped`` run: S = 10000 for its seed 0). For that run (a few seconds)::

    python benchmarks/downstream_start_distance.py --low-level packages/rgsd-agents/src/rgsd_agents/pretrained/rgsd_cpu \\
        --config demo --world-seed 10000 --json docs/results/downstream_shipped/start_distance.json
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import numpy as np

from rgsd_envs.utils.files import atomic_path


def start_distances(cfg: Any, world_seed: list[int] | int) -> np.ndarray:
    """(eval_episodes,) the pelvis's horizontal distance (m) to the goal as each evaluation episode starts."""
    import torch

    from rgsd_agents.downstream.runner import task_config
    from rgsd_envs.envs.goal_reaching_v0 import GoalReachingTorchEnv

    env = GoalReachingTorchEnv(cfg.eval_episodes, cfg.low_level, task_config(cfg, torch.device("cpu")))
    try:
        _, info = env.reset(seed=world_seed)
        pelvis = env.task.core.backend.state().body_pos[:, 0, :2].cpu().double().numpy()
        return np.linalg.norm(info["goal"].cpu().double().numpy() - pelvis, axis=-1)
    finally:
        env.close()


def main() -> None:
    """Measure and print (or write, ``--json``) the start distances."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--low-level", required=True, help="the low-level run folder the downstream run drives")
    p.add_argument("--config", default="demo", help="downstream preset or settings file (default: demo)")
    p.add_argument("--style", help="the style command (default: the config's)")
    seeds = p.add_mutually_exclusive_group(required=True)
    seeds.add_argument("--seed", type=int, help="the downstream run's seed (its evaluation episodes)")
    seeds.add_argument("--world-seed", type=int, help="world i gets this seed + i")
    p.add_argument("--json", type=Path, help="where to write the figures (default: print them)")
    args = p.parse_args()

    from rgsd_agents.config import load_config
    from rgsd_agents.downstream.runner import EVALUATION_WORLDS, DownstreamConfig, world_seeds
    from rgsd_envs.utils.config import to_dict

    overrides: dict[str, Any] = {"low_level": args.low_level}
    if args.style:
        overrides["task.style"] = args.style
    cfg = load_config(args.config, overrides, cls=DownstreamConfig, presets="downstream")
    if args.seed is not None:
        rule = f"world_seeds({args.seed}, EVALUATION_WORLDS, {cfg.eval_episodes})"
        d = start_distances(cfg, world_seeds(args.seed, EVALUATION_WORLDS, cfg.eval_episodes))
    else:
        rule = f"world i: {args.world_seed} + i"
        d = start_distances(cfg, args.world_seed)
    task = {k: v for k, v in to_dict(cfg.task).items() if k not in ("device", "num_threads")}
    doc = {
        "command": shlex.join(["python", "benchmarks/downstream_start_distance.py", *sys.argv[1:]]),
        "low_level": args.low_level,
        "config": args.config,
        "eval_episodes": cfg.eval_episodes,
        "world_seeds": rule,
        "task": task,
        "start_distance_m": {"mean": float(d.mean()), "min": float(d.min()), "max": float(d.max())},
    }
    text = json.dumps(doc, indent=1) + "\n"
    if args.json is None:
        print(text, end="")
        return
    with atomic_path(args.json) as tmp:
        Path(tmp).write_text(text)
    print(f"wrote {args.json}: start distance {d.mean():.3f} m (min {d.min():.3f}, max {d.max():.3f})")


if __name__ == "__main__":
    main()
