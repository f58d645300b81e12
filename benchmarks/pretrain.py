"""Encoder pretraining to within-motion alignment 0.999: wall time, steps, alignment, separation.

Pretrains ``rgsd_agents.pretraining`` (default settings unless overridden) on the
built-in demo clips plus the real AMASS-format clips in motions/deepmimic-smpl (13 clips),
stopping as soon as the alignment reaches the target, for each seed. Prints per
run: training-loop wall time, steps, seconds per step, the final within-motion
alignment, the separation (max cosine between different clips' z_m; lower is
better) and the machine's load average (timings on a shared machine are
pessimistic). ``--paper`` runs the paper's learning rate (1e-4) instead.
These are figures, not a test. Run: ``python benchmarks/pretrain.py`` (~45 s per seed on 2 shared cores).
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
from pathlib import Path

from rgsd_agents.pretraining.config import PretrainConfig
from rgsd_agents.pretraining.loop import pretrain

REAL_MOTIONS = Path(__file__).resolve().parents[1] / "motions" / "deepmimic-smpl"


def write_real_clips(src: Path, out: Path) -> int:
    """Import the AMASS *_poses.npz files of ``src`` as rgsd clips into ``out``; the count."""
    from rgsd_envs.motion.amass import amass_to_clip, read_amass
    from rgsd_envs.motion.kinematics import KinematicModel

    logging.getLogger("rgsd_envs").setLevel(logging.ERROR)
    km = KinematicModel()
    files = sorted(src.glob("*_poses.npz"))
    if not files:
        raise SystemExit(f"no AMASS *_poses.npz clips in {src} (pass --motions)")
    for f in files:
        clip = amass_to_clip(read_amass(f), kinematics=km)
        clip.save(out / f"{clip.name}.npz")
    return len(files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--motions", type=Path, default=REAL_MOTIONS, help="folder of real AMASS *_poses.npz clips")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--target", type=float, default=0.999)
    parser.add_argument("--lr", type=float, help="Adam learning rate (default: PretrainConfig's)")
    parser.add_argument("--paper", action="store_true", help="the paper's learning rate, 1e-4")
    parser.add_argument("--hidden", type=int, nargs="+", help="encoder hidden sizes (default: the paper's)")
    parser.add_argument("--threads", type=int, help="torch threads (default: PretrainConfig's; 0: torch's default)")
    parser.add_argument("--seconds", type=float, default=600.0, help="give up after this many seconds per run")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="rgsd_pretrain_bench_") as tmp:
        clips_dir = Path(tmp) / "real"
        clips_dir.mkdir()
        n_real = write_real_clips(args.motions, clips_dir)
        overrides: dict = {
            "motions": ["demo", str(clips_dir)],
            "target_alignment": args.target,
            "max_seconds": args.seconds,
        }
        if args.paper:
            overrides["lr"] = 1e-4
        if args.lr is not None:
            overrides["lr"] = args.lr
        if args.threads is not None:
            overrides["num_threads"] = args.threads or None
        if args.hidden:
            overrides["hidden"] = tuple(args.hidden)
        print(f"5 demo + {n_real} real clips; {os.cpu_count()} cpus")
        for seed in args.seeds:
            cfg = PretrainConfig(seed=seed, **overrides)
            load0 = os.getloadavg()[0]
            t0 = time.perf_counter()
            r = pretrain(cfg, Path(tmp) / f"seed{seed}", progress=False)
            total = time.perf_counter() - t0
            status = "reached" if r.reached_target else "NOT reached"
            print(
                f"seed {seed}: lr {cfg.lr:g}, threads {cfg.num_threads or 'default'}, hidden {list(cfg.hidden)}, batch {cfg.batch_size}: {status} {args.target} in "
                f"{r.seconds:.1f} s training ({total:.1f} s with data and outputs), {r.steps} steps, "
                f"{r.seconds / max(r.steps, 1):.3f} s/step; alignment {r.alignment:.5f}, separation (max cos between "
                f"clips) {r.separation:.3f}, loss {r.loss:.4f}; load average {load0:.1f} -> {os.getloadavg()[0]:.1f}"
            )


if __name__ == "__main__":
    main()
