"""Where a run's imitation episodes fail, clip by clip: failures per episode and per step.

The run's policy (mean action) plays imitation episodes in ``--worlds`` worlds for ``--steps`` steps with the
run's training rule (RSI, deviation termination; ``--set KEY=VALUE`` changes an ``EnvConfig`` field, e.g.
``deviation_metric=max``) and clips drawn uniformly. Per clip it prints the share of ended episodes that
failed (what ``failure_rate_per: episode`` follows), the failures per imitation step (``failure_rate_per:
step``) and the mean episode length. Under RSI an episode that starts near its clip's end cannot fail, so
the per-episode rate of a long clip stays high once it is learned; the per-step rate does not.

Example::

    python benchmarks/clip_failures.py --run runs/demo --set deviation_metric=max --set deviation_adaptive=false
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
import yaml

from rgsd_envs.runs.run_dir import RunDir


def clip_failures(
    run: Path, worlds: int, steps: int, changes: dict[str, str], seed: int = 1
) -> dict[str, dict[str, float]]:
    """Per clip of the run's motions: failures per ended episode, failures per imitation step, steps, episode length."""
    import gymnasium as gym

    from rgsd_envs.envs.registration import ENV_ID
    from rgsd_envs.motion.library import MotionLib

    rd = RunDir(run)
    typed = {k: yaml.safe_load(v) for k, v in changes.items()}  # "max", "0.5", "false" as YAML reads them
    cfg = rd.env_config(**(typed | {"p_imitation": 1.0, "clip_sampling": "uniform", "num_threads": 1}))
    policy = rd.load_policy()
    lib = MotionLib(cfg.motions)
    env = gym.make_vec(ENV_ID, num_envs=worlds, config=cfg, motions=lib, encoder=str(rd.encoder_path))
    core = env.unwrapped.core
    obs, _ = env.reset(seed=seed, options={"task": "imitation"})
    n = lib.num_clips
    played, failed, ended = np.zeros(n), np.zeros(n), np.zeros(n)
    with torch.no_grad():
        for _ in range(steps):
            clip = core.clip_host.copy()
            obs, _, term, trunc, _ = env.step(policy.act(obs).numpy())
            played += np.bincount(clip, minlength=n)
            failed += np.bincount(clip, weights=term.astype(np.float64), minlength=n)
            ended += np.bincount(clip, weights=(term | trunc).astype(np.float64), minlength=n)
    env.close()
    return {
        name: {
            "failures_per_episode": float(failed[m] / max(ended[m], 1.0)),
            "failures_per_step": float(failed[m] / max(played[m], 1.0)),
            "steps": float(played[m]),
            "episode_length": float(played[m] / max(ended[m], 1.0)),
        }
        for m, name in enumerate(lib.names)
    }


def main(argv: list[str] | None = None) -> int:
    """Print (and with --out write) each clip's failures per episode and per step."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", type=Path, required=True, help="a training run folder")
    p.add_argument("--worlds", type=int, default=250)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="an EnvConfig field for the rollouts"
    )
    p.add_argument("--out", type=Path, help="write the numbers as JSON")
    args = p.parse_args(argv)
    changes = dict(item.split("=", 1) for item in args.set)
    torch.set_num_threads(1)
    rows = clip_failures(args.run, args.worlds, args.steps, changes)
    print(f"{'clip':<16} {'fail/episode':>12} {'fail/step':>10} {'episode len':>12}")
    for name, r in rows.items():
        print(
            f"{name:<16} {r['failures_per_episode']:12.2f} {r['failures_per_step']:10.4f} {r['episode_length']:12.1f}"
        )
    if args.out:
        args.out.write_text(json.dumps({"run": str(args.run), "set": changes, "clips": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
