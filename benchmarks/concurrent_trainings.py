"""Several trainings sharing one GPU: each one's samples/s and peak memory, their sum, and (optionally) each
run's evaluation and a downstream step.

    # the six methods' paper presets at once, 40 s of training each, then `rgsd eval --protocol paper` of each
    python benchmarks/concurrent_trainings.py --methods rgsd ase calm diayn metra fb_cpr --minutes 0.67 \\
        --motions runs/gpu_check/motions --out runs/gpu_check/methods --eval --downstream
    # 1, 2, 4 and 6 copies of RGSD's paper preset, one group after the other: how the GPU shares
    python benchmarks/concurrent_trainings.py --copies 1 2 4 6 --minutes 0.4 --motions ... --out runs/gpu_check/sharing

Every training is ``rgsd train --config <method>_paper --device <device> --set env.backend=warp`` in its own
process, started together, with an iteration-time budget (``max_minutes``). From each run's TensorBoard events: its
iterations, samples, median ``charts/SPS`` after the first iteration (which pays kernel loads and graph captures)
and its peak CUDA memory (``perf/gpu_peak_allocated_mib``, ``perf/gpu_peak_reserved_mib``; per process). The
group's figures: the sum of its members' medians, and (``overlap_sps``) their summed rate over the window in which
all of them were iterating, which does not count a member's iterations run alone before the others started or
after they stopped (startups differ by seconds, and a median of few iterations can be mostly solo ones). Off-policy methods (Meta Motivo) count env transitions,
the PPO methods rollout samples: the aggregate of a mixed group adds unlike things, so sharing is measured on
copies of one preset.

``--json FILE`` (default ``<out>/concurrent.json``) is rewritten after each group and each evaluation, so a killed
command keeps what it measured; ``--resume`` then keeps the groups it finished (trained, and evaluated where asked,
on the same device and budget) and runs the rest. ``--smoke`` shrinks everything to seconds on the CPU (warp on its
CPU device).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from gpu_check import (  # noqa: E402  (one list of methods, one reading of a run and of a failure)
    SMOKE_TRAIN,
    failure_note,
    method_names,
    overlap_sps,
    sample_times,
    training_figures,
)

SMOKE_METHOD_SETS = {
    "fb_cpr": [
        "method.options.batch_size=32", "method.options.f_hidden=16", "method.options.critic_hidden=16",
        "method.options.b_hidden=16", "method.options.disc_hidden=16", "method.options.z_buffer_size=64",
        "method.options.loop.steps_per_iteration=2", "method.options.loop.updates_per_iteration=2",
        "method.options.loop.random_steps=8", "method.options.loop.replay_capacity=256",
    ],
    "ase": ["method.options.hidden=[32]"],
    "calm": ["method.options.encoder_hidden=[32]", "method.options.disc_hidden=[32]"],
    "metra": ["method.options.hidden=[32]", "method.options.phi_steps=2"],
}  # fmt: skip
"""Per-method shrinking for ``--smoke`` (as the smoke reproduce scale's)."""
SMOKE_SKIP = {
    "fb_cpr": ("ppo.minibatch_size=16", "ppo.epochs=1", "method.options.minibatch_size=16"),
    "ase": ("method.options.minibatch_size=16",),
    "calm": ("method.options.minibatch_size=16",),
}
"""Smoke settings a method has no field for (Meta Motivo trains without PPO; ASE and CALM have no encoder
minibatch)."""
EVAL_SMOKE = ["--rollouts", "2", "--best-of", "2", "--trajectory-rollouts", "2", "--kappas", "20", "--sweep-clips", "1"]
EVAL_QUICK = ["--rollouts", "8", "--best-of", "8", "--trajectory-rollouts", "8"]
"""The paper protocol with 8 rollouts per clip (it states 500): every table and figure, in seconds on a GPU."""


def _cli() -> list[str]:
    return [sys.executable, "-m", "rgsd_agents.cli"]


def train_argv(method: str, run: Path, args: argparse.Namespace) -> list[str]:
    """``rgsd train`` of one method's paper preset on warp worlds, for ``args.minutes``."""
    sets = ["env.backend=warp", f"max_minutes={args.minutes}", f"env.motions={args.motions}", "probe_every=0"]
    if args.encoder and method != "fb_cpr":  # the off-policy config has no frozen encoder (its rewards are its own)
        sets.append(f"encoder={args.encoder}")
    if args.smoke:
        sets += [s for s in SMOKE_TRAIN if s not in SMOKE_SKIP.get(method, ())] + SMOKE_METHOD_SETS.get(method, [])
        sets = [s for s in sets if not (method == "fb_cpr" and s.startswith("networks.critic_hidden"))]
    argv = [*_cli(), "train", "--config", f"{method}_paper", "--out", str(run), "--device", args.device]
    return argv + ["--no-progress"] + [a for kv in sets for a in ("--set", kv)]


def launch(jobs: dict[str, list[str]], logs: Path, timeout: float) -> dict[str, dict]:
    """Start every job at once (its output in ``logs/<label>.log``), wait for all; each one's exit code and
    seconds (``None``: stopped at ``timeout``)."""
    logs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    start = time.perf_counter()
    procs = {}
    for label, argv in jobs.items():
        with (logs / f"{label}.log").open("w") as log:
            procs[label] = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    out: dict[str, dict] = {}
    for label, proc in procs.items():
        left = max(1.0, timeout - (time.perf_counter() - start))
        try:
            code: int | None = proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            proc.terminate()  # rgsd train checkpoints and exits on SIGTERM
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            code = None
        out[label] = {"exit_code": code, "seconds": round(time.perf_counter() - start, 1)}
    return out


def train_group(label: str, methods: list[str], args: argparse.Namespace) -> dict:
    """Train ``methods`` at once (labels ``<method>`` or ``<method>_<i>`` for copies); their figures and sum."""
    runs = {}
    for i, m in enumerate(methods):
        name = m if methods.count(m) == 1 else f"{m}_{i}"
        runs[name] = (m, args.out / label / name)
    jobs = {name: train_argv(m, run, args) for name, (m, run) in runs.items()}
    shutil.rmtree(args.out / label, ignore_errors=True)  # a group a killed command left half-run starts clean
    timeout = 60.0 * args.minutes + args.startup_seconds
    status = launch(jobs, args.out / label / "logs", timeout)
    members = {}
    for name, (m, run) in runs.items():
        rec = {"method": m, **status[name], **(training_figures(run) if (run / "tb").is_dir() else {})}
        if rec["exit_code"] != 0:
            rec["error"] = failure_note(args.out / label / "logs" / f"{name}.log")
        members[name] = rec
    ok = [r for r in members.values() if r["exit_code"] == 0 and "median_sps" in r]
    together, window = overlap_sps([sample_times(run) for _, run in runs.values() if (run / "tb").is_dir()])
    return {
        "trainings": len(methods),
        "passed": len(ok) == len(methods),
        "aggregate_sps": sum(r["median_sps"] for r in ok),
        "overlap_sps": together if len(ok) == len(methods) else None,
        "overlap_seconds": round(window, 1),
        "members": members,
    }


TRAINING_FAILED = "its training failed"
"""Why a run is not evaluated (or, RGSD's, not taken downstream): its ``rgsd train`` exited non-zero or was stopped."""


def eval_group(group: dict, label: str, args: argparse.Namespace) -> dict:
    """``rgsd eval --protocol paper`` (few rollouts, no video) of every run of a group whose training passed, at
    once; the others are recorded as not run."""
    jobs = {}
    for name, member in group["members"].items():
        if member["exit_code"] != 0:
            continue
        run = args.out / label / name
        argv = [*_cli(), "eval", "--run", str(run), "--out", str(run / "eval"), "--protocol", "paper"]
        argv += ["--device", args.device, "--no-video", "--no-progress"]
        jobs[name] = argv + (EVAL_SMOKE if args.smoke else EVAL_QUICK)
    status = launch(jobs, args.out / label / "eval_logs", args.eval_seconds) if jobs else {}
    out = {}
    for name in group["members"]:
        if name not in status:
            out[name] = {"exit_code": None, "skipped": TRAINING_FAILED}
            continue
        rec = status[name]
        metrics = args.out / label / name / "eval" / "metrics.json"
        if rec["exit_code"] == 0 and metrics.is_file():
            run = next(iter(json.loads(metrics.read_text())["runs"].values()))
            cats = run.get("imitation", {}).get("categories", {})
            rec["err_cm"] = {c: v.get("err_cm") for c, v in cats.items()}
            rec["fid"] = {c: v.get("fid") for c, v in cats.items()}
        else:
            rec["error"] = failure_note(args.out / label / "eval_logs" / f"{name}.log")
        out[name] = rec
    return out


def downstream(label: str, args: argparse.Namespace) -> dict:
    """A few iterations of goal reaching on the group's RGSD run (the downstream step runs on this machine)."""
    run = args.out / label / "rgsd"
    sets = ["iterations=2", "max_minutes=null", "eval_every=2", "eval_episodes=4", "checkpoint_every=2"]
    sets += ["num_envs=8", "horizon=8", "ppo.minibatch_size=16"] if args.smoke else []
    argv = [*_cli(), "downstream", "--low-level", str(run), "--out", str(args.out / label / "downstream")]
    argv += ["--config", "demo", "--device", args.device, "--no-progress"] + [a for kv in sets for a in ("--set", kv)]
    status = launch({"downstream": argv}, args.out / label / "downstream_logs", args.eval_seconds)["downstream"]
    if status["exit_code"] != 0:
        status["error"] = failure_note(args.out / label / "downstream_logs" / "downstream.log")
    return status


def finished(group: dict, methods: list[str], args: argparse.Namespace) -> bool:
    """Whether an earlier command's record of a group is what this command would measure, complete: the same
    methods, every training passed, and the evaluations and downstream step asked for ran and passed."""
    same = sorted(r.get("method") for r in group.get("members", {}).values()) == sorted(methods)
    evaluated = not args.eval or (
        len(group.get("eval", {})) == len(methods) and all(r["exit_code"] == 0 for r in group["eval"].values())
    )
    downstream_ok = not (args.downstream and "rgsd" in group.get("members", {})) or (
        group.get("downstream", {}).get("exit_code") == 0
    )
    return same and bool(group.get("passed")) and evaluated and downstream_ok


def kept_groups(path: Path, groups: dict[str, list[str]], args: argparse.Namespace) -> dict[str, dict]:
    """The groups of ``path`` (an earlier command's figures) that ``--resume`` keeps: finished ones measured on the
    same device with the same budget per training."""
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if old.get("device") != args.device or old.get("minutes") != args.minutes:
        return {}
    return {
        label: g for label, g in old.get("groups", {}).items() if label in groups and finished(g, groups[label], args)
    }


def main(argv: list[str] | None = None) -> int:
    """Run the groups (and evaluations), write the JSON after each; exit 1 if any training or evaluation failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    known = method_names()
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--methods", nargs="+", choices=known, help="one group: these methods at once")
    which.add_argument("--copies", type=int, nargs="+", help="groups of this many copies of --method, in turn")
    parser.add_argument("--method", default="rgsd", choices=known, help="the preset of --copies (rgsd)")
    parser.add_argument("--motions", type=Path, required=True, help="the clips to train on")
    parser.add_argument("--encoder", type=Path, help="a frozen encoder for every run (else RGSD pretrains its own)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--json", type=Path, help="figures file (default <out>/concurrent.json)")
    parser.add_argument(
        "--minutes", type=float, default=0.67, help="each training's iteration-time budget (max_minutes)"
    )
    parser.add_argument("--startup-seconds", type=float, default=120.0, help="allowed beside the budget")
    parser.add_argument("--eval-seconds", type=float, default=180.0, help="limit of each evaluation group")
    parser.add_argument("--eval", action="store_true", help="then rgsd eval --protocol paper of every run")
    parser.add_argument("--downstream", action="store_true", help="then a downstream step on the RGSD run")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--smoke", action="store_true", help="the CPU, tiny sizes: checks that it runs")
    parser.add_argument(
        "--resume", action="store_true", help="keep the groups --json records as finished; run the rest"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.device, args.minutes = "cpu", 0.05
    args.out, args.motions = args.out.resolve(), args.motions.resolve()
    path = args.json or args.out / "concurrent.json"
    args.out.mkdir(parents=True, exist_ok=True)
    doc: dict = {"device": args.device, "minutes": args.minutes, "groups": {}}

    def save() -> None:
        from rgsd_envs.utils.files import atomic_path

        with atomic_path(path) as tmp:
            Path(tmp).write_text(json.dumps(doc, indent=1))

    groups = {"methods": list(args.methods)} if args.methods else {f"x{k}": [args.method] * k for k in args.copies}
    if args.resume:
        doc["groups"] = kept_groups(path, groups, args)
    ok = True
    for label, methods in groups.items():
        if label in doc["groups"]:
            print(f"[concurrent] {label}: kept from {path} (--resume)", flush=True)
            continue
        print(f"[concurrent] {label}: {len(methods)} trainings ({', '.join(methods)})", flush=True)
        group = doc["groups"][label] = train_group(label, methods, args)
        ok &= group["passed"]
        save()
        for name, rec in group["members"].items():
            print(
                f"[concurrent]   {name}: exit {rec['exit_code']}, {rec.get('median_sps', 0):,.0f} samples/s, "
                f"peak {rec.get('peak_allocated_mib', 0):,.0f} MiB {rec.get('error', '')}",
                flush=True,
            )
        both = group["overlap_sps"]
        print(
            f"[concurrent]   sum {group['aggregate_sps']:,.0f} samples/s (medians); while all ran: "
            + (f"{both:,.0f} samples/s over {group['overlap_seconds']:.0f} s" if both else "too short to measure"),
            flush=True,
        )
        if args.eval:
            group["eval"] = eval_group(group, label, args)
            ok &= all(r["exit_code"] == 0 for r in group["eval"].values())
            save()
            for name, rec in group["eval"].items():
                ran = f"exit {rec['exit_code']} in {rec['seconds']} s" if "seconds" in rec else "not run"
                print(
                    f"[concurrent]   eval {name}: {ran} {rec.get('err_cm', rec.get('error', rec.get('skipped', '')))}",
                    flush=True,
                )
        if args.downstream and "rgsd" in group["members"]:
            trained = group["members"]["rgsd"]["exit_code"] == 0
            group["downstream"] = (
                downstream(label, args) if trained else {"exit_code": None, "skipped": TRAINING_FAILED}
            )
            ok &= group["downstream"]["exit_code"] == 0
            save()
            print(f"[concurrent]   downstream: {group['downstream']}", flush=True)
    doc["groups"] = {label: doc["groups"][label] for label in groups}  # kept and new groups in the asked order
    save()
    print(f"[concurrent] wrote {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
