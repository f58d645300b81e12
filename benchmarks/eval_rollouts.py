"""What stepping only the running worlds saves in ``rgsd eval``'s rollouts, measured side by side in one run.

    python benchmarks/eval_rollouts.py --json docs/results/throughput_2core/eval_rollouts.json
    python benchmarks/eval_rollouts.py --motions /path/to/amass_clips --rollouts 4

A chunk of rollouts holds ``--batch-size`` worlds (the evaluation's default, 512) until its longest job ends. Its
worlds past the jobs, and each job's world once its clip has ended, are idle. ``rgsd_eval.rollouts`` steps only the
running jobs' worlds on MuJoCo (``RGSDTorchEnv.transition(stepped=...)``) and runs the policy on their rows (topped
up to ``ACT_MIN_ROWS``). This script runs the same jobs (the shipped policy, ``--rollouts`` noisy rollouts of every
clip at its z_m, the policy's own action noise) twice: once so, once with every world stepping and acting as a
chunk did before, and prints the wall time, the world steps the physics made and the ratio. It exits 1 if any
job's numbers differ between the two.

Then it measures what a batch step costs besides its running worlds' physics, in world steps of a full batch: one
rollout of the longest clip in 16, 128 and 512 worlds against that many rollouts, per step. The evaluation's
estimate counts that work (``rgsd_eval.batches.step_work``: ``BATCH_STEP_WORK`` + ``WORLD_WORK`` x worlds); the
table prints its figure beside the measured one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rgsd_agents.pretrained import pretrained_run
from rgsd_envs.envs.core import library_clip_embeddings
from rgsd_envs.envs.torch_env import RGSDTorchEnv
from rgsd_envs.motion.library import MotionLib
from rgsd_eval import rollouts
from rgsd_eval.batches import BATCH_STEP_WORK, WORLD_WORK, batch_steps, world_steps
from rgsd_eval.rollouts import RolloutJobs, run_rollouts
from rgsd_eval.runs import load_run


class _CountSteps:
    """Counts the world steps ``SimBackend.step`` makes (its ``env_ids``, or every world)."""

    def __init__(self, env: RGSDTorchEnv, every_world: bool):
        self.backend = env.core.backend
        self.inner = self.backend.step
        self.every_world = every_world
        self.count = 0
        self.backend.step = self  # type: ignore[method-assign]

    def __call__(self, targets: torch.Tensor, env_ids: torch.Tensor | None = None) -> None:
        ids = None if self.every_world else env_ids
        self.count += self.backend.num_envs if ids is None else int(ids.numel())
        self.inner(targets, ids)


def _run(loaded: Any, lib: MotionLib, jobs: RolloutJobs, batch: int, every_world: bool) -> tuple[Any, float, int]:
    """The jobs' rollouts, their wall time and the world steps the physics made."""
    env = RGSDTorchEnv(min(batch, len(jobs)), encoder_reward=False, config=loaded.env_config, motions=lib)
    counter = _CountSteps(env, every_world)
    acting_rows = rollouts._Acting.rows
    if every_world:  # a chunk's policy acted on every world's row
        rollouts._Acting.rows = lambda self, active: None  # type: ignore[method-assign]
    try:
        start = time.perf_counter()
        res = run_rollouts(
            env, loaded.policy, jobs, action_noise=loaded.action_std, seed=0, fall_height=loaded.fall_height
        )
        return res, time.perf_counter() - start, counter.count
    finally:
        rollouts._Acting.rows = acting_rows  # type: ignore[method-assign]
        env.close()


def _step_work(loaded: Any, lib: MotionLib, z: np.ndarray) -> list[dict[str, float]]:
    """Per batch size: a step's time with one rollout running and with every world running, and the first less its
    one world's physics in world steps of the second (the work a batch step has whatever its worlds do)."""
    clip = int(lib.num_frames.argmax())
    steps = int(lib.num_frames[clip]) - 1
    rows = []
    for worlds in (16, 128, 512):
        ms = []
        for running in (1, worlds):
            jobs = RolloutJobs(np.full(running, clip), np.tile(z[clip], (running, 1)), 0, False)
            env = RGSDTorchEnv(worlds, encoder_reward=False, config=loaded.env_config, motions=lib)
            try:
                start = time.perf_counter()
                run_rollouts(env, loaded.policy, jobs, fall_height=loaded.fall_height)
                ms.append(1000.0 * (time.perf_counter() - start) / steps)
            finally:
                env.close()
        world_ms = ms[1] / worlds
        work = (ms[0] - world_ms) / world_ms
        rows.append(
            {"worlds": worlds, "one_ms": round(ms[0], 3), "all_ms": round(ms[1], 3), "work": round(work, 2),
             "estimate": BATCH_STEP_WORK + WORLD_WORK * worlds}
        )  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run both ways and print the comparison."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--motions", default=None, help="clips (default: the shipped policy's 13)")
    p.add_argument("--rollouts", type=int, default=16, help="noisy rollouts per clip (the quick protocol's 16)")
    p.add_argument("--batch-size", type=int, default=512, help="worlds of a chunk (rgsd eval's default)")
    p.add_argument("--threads", type=int, default=2, help="MuJoCo's threads")
    p.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    run = pretrained_run()
    loaded = load_run(run)
    loaded = dataclasses.replace(loaded, env_config=dataclasses.replace(loaded.env_config, num_threads=args.threads))
    lib = MotionLib(args.motions or str(run / "clips"))
    z = library_clip_embeddings(lib, loaded.encoder_path, loaded.env_config.skill_dim).double().numpy()
    clips = np.repeat(np.arange(lib.num_clips), args.rollouts)
    jobs = RolloutJobs(clips, z[clips], 0, False)
    frames = lib.num_frames.numpy()[clips]
    rows = {}
    for name, every in (("every world", True), ("running worlds", False)):
        res, seconds, steps = _run(loaded, lib, jobs, args.batch_size, every)
        rows[name] = {"seconds": round(seconds, 2), "world_steps": steps, "result": res}
    old, new = rows["every world"], rows["running worlds"]
    same = all(
        np.array_equal(getattr(old["result"], k), getattr(new["result"], k), equal_nan=True)
        for k in ("length", "error", "fell", "unstable")
    ) and np.array_equal(old["result"].root_pos.data, new["result"].root_pos.data, equal_nan=True)
    out = {
        "machine": {"processor": platform.processor() or platform.machine(), "mujoco_threads": args.threads},
        "clips": lib.num_clips,
        "jobs": len(jobs),
        "batch_size": args.batch_size,
        "own_world_steps": world_steps(frames),
        "batches_world_steps": batch_steps(frames, args.batch_size) * min(args.batch_size, len(jobs)),
        "every_world": {k: old[k] for k in ("seconds", "world_steps")},
        "running_worlds": {k: new[k] for k in ("seconds", "world_steps")},
        "speedup": round(old["seconds"] / new["seconds"], 2),
        "identical_results": bool(same),
    }
    print(f"{lib.num_clips} clips x {args.rollouts} rollouts = {len(jobs)} jobs, chunks of {args.batch_size} worlds")
    print("| chunk steps | seconds | world steps |")
    print("|---|---|---|")
    for name in rows:
        print(f"| {name} | {rows[name]['seconds']:.1f} | {rows[name]['world_steps']:,} |")
    print(f"speedup {out['speedup']}x; the jobs' own steps {out['own_world_steps']:,}; identical results: {same}")
    out["batch_step_work"] = _step_work(loaded, lib, z)
    print("| worlds | ms a step, 1 running | ms a step, all running | work, world steps | estimate's |")
    print("|---|---|---|---|---|")
    for r in out["batch_step_work"]:
        print(f"| {r['worlds']} | {r['one_ms']:.2f} | {r['all_ms']:.2f} | {r['work']:.1f} | {r['estimate']:.1f} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
