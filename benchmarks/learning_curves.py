"""Sweeps: train several arms (a config with a few changes each), evaluate them and plot their learning curves.

A sweep is a folder of arm files, ``benchmarks/sweeps/<sweep>/<arm>.yaml``; the file's name is the arm's::

    base: cpu              # a preset name, or a config YAML (a relative path is read beside the arm file)
    set:                   # optional: dotted config keys, as `rgsd train --set` takes them
      ppo.epochs: 2
      env.motions: demo
    seed: 1                # optional (default: the base's)
    minutes: 60            # training budget in wall-clock minutes (max_minutes)
    note: what the arm tries, in one line   # optional

Each arm trains into ``<out>/<arm>`` with ``rgsd train`` (``--resume`` when the folder holds a checkpoint:
the budget counts over resumptions, so an interrupted sweep goes on where it stopped and a finished arm returns
at once), at most two at a time, each writing to ``<out>/logs/<arm>.log``. An arm that ``rgsd train`` refuses
(a bad key, a missing preset) is reported with its file and the reason; the others go on. Then ``rgsd eval``
compares the trained arms in ``<out>/eval``, and ``rgsd_eval.curves`` plots their imitation-probe curves
(``<out>/learning_curves.png``; every number in ``<out>/learning_curves.json``).

Examples::

    python benchmarks/learning_curves.py methods                  # benchmarks/sweeps/methods, into runs/sweeps/methods
    python benchmarks/learning_curves.py methods --arms rgsd diayn --eval-args "--rollouts 4 --no-video"
    python benchmarks/learning_curves.py path/to/my_sweep --out runs/my_sweep --set num_envs=64
    python benchmarks/learning_curves.py methods --plot-only     # re-plot what the run folders hold
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.files import atomic_path

SWEEPS = Path(__file__).resolve().parent / "sweeps"
ARM_FIELDS = ("base", "set", "seed", "minutes", "note")
PNG, JSON = "learning_curves.png", "learning_curves.json"
MAX_JOBS = 2
"""Arms trained at once: more would only share the same cores."""


@dataclass
class Arm:
    """One arm of a sweep, as its file gives it."""

    name: str
    path: Path
    base: str
    minutes: float
    set: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None
    note: str = ""

    def overrides(self) -> list[str]:
        """The ``key=value`` items of ``rgsd train --set`` (values other than text written as YAML reads them)."""
        return [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in self.set.items()]


def load_arm(path: Path) -> Arm:
    """An arm file, checked; errors name the file and the field."""
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise SystemExit(f"{path}: not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise SystemExit(f"{path}: expected a mapping of {', '.join(ARM_FIELDS)}")
    unknown = [k for k in data if k not in ARM_FIELDS]
    if unknown:
        raise SystemExit(f"{path}: unknown field '{unknown[0]}'; an arm file has {', '.join(ARM_FIELDS)}")
    base, sets, seed, minutes = data.get("base"), data.get("set") or {}, data.get("seed"), data.get("minutes")
    for name, ok, why in (
        ("base", isinstance(base, str), "must name a preset or a config YAML"),
        ("minutes", type(minutes) in (int, float) and minutes > 0, f"must be a number > 0, got {minutes!r}"),
        ("set", isinstance(sets, dict) and all(isinstance(k, str) for k in sets), "must map config keys to values"),
        ("seed", seed is None or (type(seed) is int and seed >= 0), f"must be an integer >= 0, got {seed!r}"),
    ):
        if not ok:
            raise SystemExit(f"{path}: field '{name}' {why}")
    beside = path.parent / base  # a config YAML next to the arm file, else a preset name or a path
    base = str(beside) if beside.is_file() else base
    return Arm(path.stem, path, base, float(minutes), sets, seed, str(data.get("note", "")))


def load_sweep(sweep: str, names: list[str] | None = None) -> dict[str, Arm]:
    """The arms of a sweep folder (a path, or a name under benchmarks/sweeps), or only those named."""
    folder = Path(sweep) if Path(sweep).is_dir() else SWEEPS / sweep
    files = sorted(folder.glob("*.yaml"))
    if not files:
        known = ", ".join(sorted(p.name for p in SWEEPS.iterdir() if p.is_dir()))
        raise SystemExit(f"{sweep}: no arm files (*.yaml) there; sweeps in {SWEEPS}: {known}")
    arms = {f.stem: load_arm(f) for f in files}
    unknown = [n for n in names or [] if n not in arms]
    if unknown:
        raise SystemExit(f"{folder}: no arm '{unknown[0]}'; arms: {', '.join(arms)}")
    return {n: arms[n] for n in names} if names else arms


def train_command(arm: Arm, run: Path, extra: list[str]) -> list[str]:
    """``rgsd train`` starting ``arm`` in ``run``, or resuming it where the folder holds a checkpoint."""
    cmd = [sys.executable, "-m", "rgsd_agents.cli", "train", "--no-progress"]
    budget = ["--set", f"max_minutes={arm.minutes:g}"]
    if any((run / RunDir.CHECKPOINTS).glob("*.pt")):
        return [*cmd, "--resume", str(run), *budget]
    cmd += ["--config", arm.base, "--out", str(run), *budget]
    cmd += ["--seed", str(arm.seed)] if arm.seed is not None else []
    return cmd + [a for item in [*arm.overrides(), *extra] for a in ("--set", item)]


def train(arm: Arm, out: Path, extra: list[str]) -> str:
    """Train (or resume) one arm, its output in ``<out>/logs/<arm>.log``: "trained", or "failed: <file>: <why>"."""
    log = out / "logs" / f"{arm.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = train_command(arm, out / arm.name, extra)
    with log.open("a") as f:
        f.write(f"$ {shlex.join(cmd)}\n")
        start = f.tell()
        f.flush()
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT)
    if rc == 0:
        return "trained"
    with log.open() as f:
        f.seek(start)
        lines = [line.strip() for line in f if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    why = (errors or lines or [f"exit status {rc}"])[-1]
    return f"failed: {arm.path}: rgsd train refused or stopped: {why} (log: {log})"


def evaluate(arms: dict[str, Arm], out: Path, eval_args: str) -> str:
    """``rgsd eval`` of every arm with a policy, side by side, into ``<out>/eval``."""
    from rgsd_agents.cli import main as rgsd

    runs = [out / n for n in arms if (out / n / RunDir.POLICY).is_file()]
    if not runs:
        return "skipped: no arm has a policy"
    argv = ["eval", *[a for r in runs for a in ("--run", str(r))], "--out", str(out / "eval"), "--no-progress"]
    rc = rgsd(argv + shlex.split(eval_args))
    return f"{out / 'eval' / 'report.md'}" if rc == 0 else f"failed: rgsd eval exit status {rc}"


def summarise(out: Path, arms: dict[str, Arm], status: dict[str, str]) -> dict[str, Any]:
    """Plot every arm's probe curves into ``<out>/learning_curves.png``; write ``learning_curves.json``."""
    from rgsd_eval.curves import plot_curves, read_curves

    curves, entries = {}, {}
    for name, arm in arms.items():
        entry: dict[str, Any] = {"file": str(arm.path), "base": arm.base, "set": arm.set, "seed": arm.seed}
        entry.update(minutes_budget=arm.minutes, note=arm.note, status=status.get(name, "not trained in this call"))
        try:
            curves[name] = read_curves(out / name)
        except FileNotFoundError as err:
            entry["error"] = str(err)
        else:
            entry.update(curves[name].to_dict())
        entries[name] = entry
    plot_curves(curves, out / PNG, legend_title="arm")
    with atomic_path(out / JSON) as tmp:
        tmp.write_text(json.dumps({"arms": entries}, indent=2) + "\n")
    return entries


def table(entries: dict[str, Any]) -> str:
    """One line per arm: its last probe (samples, overall and per-clip error in cm), or why it has none."""
    lines = []
    for name, e in entries.items():
        if e.get("samples"):
            clips = ", ".join(f"{c} {v:.1f}" for c, v in e["final_cm"].items() if v is not None)
            lines.append(f"{name:>12}: {e['samples'][-1]:,} samples, overall {e['overall_cm'][-1]:.1f} cm; {clips}")
        else:
            why = e["status"] if e["status"].startswith("failed") else e.get("error", "no probe logged yet")
            lines.append(f"{name:>12}: no curve ({why})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Train the sweep's arms (unless --plot-only), evaluate them, plot their curves; 1 when an arm failed."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("sweep", help="a folder of arm files, or the name of one under benchmarks/sweeps")
    p.add_argument("--out", type=Path, help="folder of the arms' run folders and outputs (default runs/sweeps/<sweep>)")
    p.add_argument("--arms", nargs="+", help="only these arms (file names without .yaml)")
    p.add_argument("--jobs", type=int, default=MAX_JOBS, choices=range(1, MAX_JOBS + 1), help="arms trained at once")
    p.add_argument("--set", dest="extra", action="append", default=[], help="override for every new arm (key=value)")
    p.add_argument("--eval-args", default="", help='arguments for rgsd eval, e.g. "--rollouts 4 --no-video"')
    p.add_argument("--no-eval", action="store_true", help="train and plot, no rgsd eval")
    p.add_argument("--plot-only", action="store_true", help="only re-plot the curves the run folders hold")
    args = p.parse_args(argv)

    arms = load_sweep(args.sweep, args.arms)
    out = args.out or Path("runs") / "sweeps" / Path(args.sweep).name
    out.mkdir(parents=True, exist_ok=True)
    status: dict[str, str] = {}
    if not args.plot_only:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            jobs = {pool.submit(train, arm, out, args.extra): name for name, arm in arms.items()}
            for job in as_completed(jobs):
                status[jobs[job]] = job.result()
                print(f"arm {jobs[job]}: {status[jobs[job]]}", flush=True)
    report = "" if args.plot_only or args.no_eval else evaluate(arms, out, args.eval_args)
    entries = summarise(out, arms, status)
    print(table(entries))
    print(f"curves: {out / PNG}\nnumbers: {out / JSON}" + (f"\nevaluation: {report}" if report else ""))
    failed = any(s.startswith("failed") for s in [*status.values(), report])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
