"""How much one evaluation's own random draws move its numbers: ``rgsd eval --seed N`` of the same trained runs.

An evaluation draws the action noise of its rollouts, the best-of-N search's candidate latents and the vMF skill
samples from ``--seed``. This evaluates each ``--run`` once per seed (the same settings file, clips and policy; a
training seed's spread comes on top) into ``<out>/<run>/seed_<N>`` and writes ``--json``: per run and seed the
all-clips imitation ERR (cm), ERR to fall, success rate and FID, and at the discovery kappa (where the protocol has
one) the mean ERR, path spread (m) and FID; per run and number the range over seeds. A seed folder whose
``metrics.json`` exists is kept (rerun after an interruption). Run, for the 2-core comparison's three local runs
(about half a minute a run and seed on 2 cores)::

    python benchmarks/eval_seed_spread.py --run runs/repro_cpu_d/runs/rgsd_seed0 \\
        --run runs/repro_cpu_d/runs/diayn_seed0 --run runs/repro_cpu_d/runs/metra_seed0 --motions runs/clips \\
        --config runs/repro_cpu_d/eval_settings.yaml --seeds 0 1 2 --out runs/eval_seed_spread \\
        --json docs/results/reproduce_cpu/eval_seed_spread.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rgsd_envs.utils.files import atomic_path

IMITATION = ("err_cm", "err_until_fall_cm", "success_rate", "fid")
"""All-clips imitation numbers read from each evaluation."""
DISCOVERY = ("err_cm", "path_spread_m", "fid")
"""Mean numbers at the discovery kappa read from each evaluation."""


def evaluate(
    run: Path, seed: int, folder: Path, motions: str, config: str | None, action_noise: float | None = None
) -> dict[str, Any]:
    """``rgsd eval`` of ``run`` at ``seed`` (and ``--action-noise``, where given) into ``folder`` (kept if it
    finished before); its metrics.json."""
    metrics = folder / "metrics.json"
    if not metrics.exists():
        cmd = [sys.executable, "-m", "rgsd_agents.cli", "eval", "--run", str(run), "--motions", motions]
        cmd += ["--out", str(folder), "--seed", str(seed), "--no-video", "--device", "cpu"]
        cmd += ["--config", config] if config else []
        cmd += ["--action-noise", str(action_noise)] if action_noise is not None else []
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.loads(metrics.read_text())


def numbers(metrics: dict[str, Any]) -> dict[str, float | None]:
    """The run's imitation and discovery numbers of one evaluation (``imitation/<key>``, ``discovery/<key>``)."""
    (run,) = metrics["runs"].values()
    out = {f"imitation/{k}": run["imitation"]["all"].get(k) for k in IMITATION}
    discovery = [d["mean"] for d in run.get("diversity", {}).values() if "discovery" in d.get("roles", ())]
    if discovery:  # a protocol without a discovery kappa has imitation numbers only
        out.update({f"discovery/{k}": discovery[0].get(k) for k in DISCOVERY})
    return out


def main() -> None:
    """Evaluate every run at every seed and write the per-seed numbers and their ranges."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", action="append", required=True, help="a trained run folder (repeat for several)")
    p.add_argument("--motions", required=True, help="the clips the runs are evaluated on")
    p.add_argument("--config", help="the evaluation settings file (YAML; default: rgsd eval's, the quick protocol)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--out", type=Path, required=True, help="folder of the evaluations")
    p.add_argument("--json", type=Path, help="where to write the figures")
    p.add_argument(
        "--action-noise",
        type=float,
        nargs="+",
        help="evaluate each run at each of these action stds (rgsd eval --action-noise; default: each run's own)",
    )
    args = p.parse_args()
    noises = args.action_noise or [None]
    result: dict[str, Any] = {
        "command": "python benchmarks/eval_seed_spread.py " + " ".join(sys.argv[1:]),
        "settings": args.config,
        "seeds": args.seeds,
        "runs": {},
    }
    start = time.monotonic()
    total, done = len(args.run) * len(noises) * len(args.seeds), 0
    for run, noise in ((Path(r), n) for r in args.run for n in noises):
        name = run.name if noise is None else f"{run.name} action_noise={noise:g}"
        folder = args.out / run.name if noise is None else args.out / run.name / f"action_noise_{noise:g}"
        per_seed = {}
        for seed in args.seeds:
            per_seed[seed] = numbers(evaluate(run, seed, folder / f"seed_{seed}", args.motions, args.config, noise))
            done += 1
            elapsed = time.monotonic() - start
            print(
                f"[{done}/{total}] {name} seed {seed}: ERR {per_seed[seed]['imitation/err_cm']:.1f} cm, "
                f"FID {per_seed[seed]['imitation/fid']:.2f} "
                f"({elapsed / 60:.1f} min, about {elapsed / done * (total - done) / 60:.0f} min left)",
                flush=True,
            )
        keys = per_seed[args.seeds[0]]
        ranges = {
            k: [min(v[k] for v in per_seed.values()), max(v[k] for v in per_seed.values())]
            for k in keys
            if all(v[k] is not None for v in per_seed.values())
        }
        result["runs"][name] = {"per_seed": per_seed, "range": ranges}
        print(f"{name}: ERR {ranges['imitation/err_cm'][0]:.1f}-{ranges['imitation/err_cm'][1]:.1f} cm over seeds")
    if args.json:
        with atomic_path(args.json) as tmp:
            tmp.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
