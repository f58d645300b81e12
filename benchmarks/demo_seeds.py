"""The demo's figures as a range over seeds: ``rgsd demo --set seed=N`` on fresh folders, one at a time.

Each seed runs the README's first command (pretrain, 15 minutes of the ``demo`` preset, ``rgsd eval``) into
``<out>/seed_<N>``, alone on the machine: the demo trains on a time budget, so two at once would each get half the
samples. A seed whose ``report/metrics.json`` exists is kept (rerun the command after an interruption); a seed
folder without one is removed and started again, so every figure comes from an uninterrupted, fresh run.

Then it writes ``--json``: per seed the wall minutes, the training samples and each clip's ERR (cm), fall and
pelvis travel from ``rgsd eval``'s metrics.json; per clip the range over seeds. ``--markdown`` prints the results
table. Run on 2 quiet cores::

    python benchmarks/demo_seeds.py --seeds 0 1 2 --out runs/demo_seeds --json docs/results/demo_seeds.json
    python benchmarks/demo_seeds.py --seeds 0 1 2 --out runs/demo_seeds --json docs/results/demo_seeds.json --markdown
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rgsd_envs.motion.demo import DEMO_KINDS
from rgsd_envs.utils.files import atomic_path

CLIPS = tuple(f"demo_{k}" for k in DEMO_KINDS)
"""The demo motions in the README's column order (``DEMO_KINDS``'s)."""


def run_seed(seed: int, folder: Path, extra: list[str]) -> float | None:
    """Run one fresh demo into ``folder`` unless it finished before; its wall minutes (None when kept)."""
    if (folder / "report" / "metrics.json").exists():
        return None
    if folder.exists():
        shutil.rmtree(folder)
    cmd = [sys.executable, "-m", "rgsd_agents.cli", "demo", "--out", str(folder), "--no-progress"]
    cmd += ["--set", f"seed={seed}", *extra]
    print(f"$ {' '.join(cmd)}", flush=True)
    start = time.monotonic()
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"seed_{seed}.log", "w") as log:
        rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT)
    if rc != 0:
        raise SystemExit(f"seed {seed}: rgsd demo exited with {rc}; see {folder.parent}/seed_{seed}.log")
    minutes = (time.monotonic() - start) / 60
    (folder / "wall_minutes.json").write_text(json.dumps({"minutes": minutes}))
    return minutes


SUMMARY_FIGURES = {
    "imitation_episode_steps": re.compile(r"imitation episode length: [\d.]+ steps -> ([\d.]+) steps"),
    "samples_per_s": re.compile(r"iterations this session, mean (\d+) samples/s"),
}
"""Figures of the demo's closing training summary (its log): the mean imitation episode length over the last 50
iterations, and the mean training rate."""


def summary_figures(log: Path) -> dict[str, float | None]:
    """The training summary's figures from a seed's log (None where the log lacks one)."""
    text = log.read_text() if log.exists() else ""
    found = {key: pattern.search(text) for key, pattern in SUMMARY_FIGURES.items()}
    return {key: None if m is None else float(m.group(1)) for key, m in found.items()}


def seed_entry(folder: Path) -> dict[str, Any]:
    """One seed's wall minutes, samples and per-clip ERR, fall and travel from its ``rgsd eval`` metrics."""
    doc = json.loads((folder / "report" / "metrics.json").read_text())
    (run,) = doc["runs"].values()
    clips = run["imitation"]["clips"]
    missing = [c for c in CLIPS if c not in clips]
    if missing:
        raise SystemExit(f"{folder}/report/metrics.json: runs.*.imitation.clips lacks {missing}")
    wall = folder / "wall_minutes.json"
    return {
        "wall_minutes": round(json.loads(wall.read_text())["minutes"], 1) if wall.exists() else None,
        "training_samples": run["training_samples"],
        "training_summary": summary_figures(folder.parent / f"{folder.name}.log"),
        "clips": {
            c: {
                "err_cm": round(clips[c]["err_cm"], 1),
                "fell": clips[c]["fall_rate"] > 0,
                "travel_m": None if clips[c].get("travel_m") is None else round(clips[c]["travel_m"], 2),
                "ref_travel_m": None if clips[c].get("ref_travel_m") is None else round(clips[c]["ref_travel_m"], 2),
            }
            for c in CLIPS
        },
    }


def summarise(seeds: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Per clip: the lowest and highest ERR over seeds and how many seeds fell."""
    ranges = {}
    for c in CLIPS:
        errs = [s["clips"][c]["err_cm"] for s in seeds.values()]
        ranges[c] = {
            "err_cm_min": min(errs),
            "err_cm_max": max(errs),
            "falls": sum(s["clips"][c]["fell"] for s in seeds.values()),
        }
    samples = [s["training_samples"] for s in seeds.values()]
    walls = [s["wall_minutes"] for s in seeds.values() if s["wall_minutes"] is not None]
    return {
        "clips": ranges,
        "samples_min": min(samples),
        "samples_max": max(samples),
        "wall_minutes_min": min(walls) if walls else None,
        "wall_minutes_max": max(walls) if walls else None,
    }


def markdown(doc: dict[str, Any]) -> str:
    """The results table: one row, each clip's ERR range over the seeds and how many of them fell."""
    n = len(doc["seeds"])
    head = "| walk | run | sidestep | backward | punch |\n|---|---|---|---|---|\n"
    cells = []
    for c in CLIPS:
        r = doc["range"]["clips"][c]
        cell = f"{r['err_cm_min']:.1f}-{r['err_cm_max']:.1f}"
        if r["falls"]:
            cell += f" (falls in {r['falls']} of {n})"
        cells.append(cell)
    return head + "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--out", type=Path, default=Path("runs/demo_seeds"))
    p.add_argument("--json", type=Path, help="write the seeds and their ranges here")
    p.add_argument("--markdown", action="store_true", help="print the results table")
    p.add_argument("--demo-args", nargs=argparse.REMAINDER, default=[], help="passed on to rgsd demo")
    args = p.parse_args(argv)
    for seed in args.seeds:
        minutes = run_seed(seed, args.out / f"seed_{seed}", args.demo_args)
        print(f"seed {seed}: " + ("kept (finished before)" if minutes is None else f"{minutes:.1f} min"), flush=True)
    seeds = {s: seed_entry(args.out / f"seed_{s}") for s in args.seeds}
    doc = {
        "command": " ".join(["rgsd demo --out <out>/seed_<N> --set seed=<N>", *args.demo_args])
        + " (fresh folder, alone on 2 CPU cores)",
        "measured": "rgsd eval: ERR (cm), one deterministic rollout per clip from its first frame to its end",
        "seeds": {str(s): e for s, e in seeds.items()},
        "range": summarise(seeds),
    }
    if args.json:
        with atomic_path(args.json) as tmp:
            tmp.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {args.json}")
    if args.markdown:
        print(markdown(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
