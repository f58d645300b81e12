"""One command that checks a GPU machine for rgsd and writes ``gpu_check.md`` with every figure.

    python benchmarks/gpu_check.py --out runs/gpu_check/           # one GPU, about 25 minutes on an H100
    python benchmarks/gpu_check.py --out runs/gpu_check/ --smoke   # the same steps on the CPU, a few minutes

Before the first step it checks that this Python holds what rgsd and the steps asked for import
(``prerequisites.py``: another Python than a GPU bundle's, missing packages) and stops with one line each if not.
Steps, each in its own process (a failure is recorded, with its log and the exception that ended it, and the next
step runs):

1. ``cuda_tests``: ``pytest -m cuda`` (graph replay, warp on cuda against mujoco, train + resume,
   no synchronisation in a rollout, flat GPU memory); skipped on a machine without CUDA.
2. ``demo_motions``, ``import_motions``: ``rgsd-motions demo`` and ``rgsd-motions import`` of the AMASS
   files in ``--motions`` (default the repository's ``motions/deepmimic-smpl``) into one
   folder of clips, ``<out>/motions`` (one motion source, as ``rgsd eval`` wants).
3. ``throughput``: ``benchmarks/gpu_throughput.py`` at N = 1024, 4096, 8192 worlds, warp beside the
   native mujoco backend (physics, env and full training loop with the paper's networks).
4. ``train``: ``rgsd train --config paper --device cuda --set env.backend=warp`` for ``--train-minutes``
   (10) on the demo motions plus the imported ones.
5. ``eval``: ``rgsd eval`` of that run (no videos).

``--steps`` runs some of them (``--steps throughput,train``) into the same ``--out``: each step's result is kept in
``<out>/steps.json`` and gpu_check.md is rewritten after every step from all the steps run so far, so a check can be
split over several shorter commands (a lent machine runs 10 minutes a command) and a killed command loses only
the step in flight. ``--resume`` runs the steps ``steps.json`` does not record as passed, so the same command again
finishes what a deadline or a killed command left (the sharing step keeps the groups it finished).
``--num-envs`` picks the throughput step's world counts.

``--quick`` runs the throughput, each method's short training and evaluation (``methods``), the CUDA tests (beside
the methods step, sharing the GPU), the sharing table and parity in one 9-minute command (``QUICK_STEPS``).

``gpu_check.md`` then holds the machine (nvidia-smi, CPU, torch / warp / MuJoCo versions), each step's
pass or fail and time, every figure, and the goals on one H100: at least 450k env steps/s at 8192 worlds
(``gpu_throughput.py``'s warp ``env`` row), 0.9 of the physics-only rate, and at least 250k training samples/s
with the paper's networks (the median ``charts/SPS`` of the paper-preset training, else of RGSD's paper preset
training alone in the sharing step). ``--smoke`` runs
every step on the CPU (warp on its CPU device, tiny N, a few iterations; the CUDA tests are reported as
skipped) so CI can check the script itself; its figures are not judged.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from prerequisites import problems  # noqa: E402  (what this Python must hold: one list, read from the packages)

DEFAULT_MOTIONS = REPO / "motions" / "deepmimic-smpl"
FULL_N = (1024, 4096, 8192)
ENV_STEPS_GOAL = 450_000
"""env steps/s of the warp env at 8192 worlds on one H100 (0.9 of the 500k physics-only rate measured there)."""
TRAIN_SAMPLES_GOAL = 250_000
"""training samples/s with the paper's networks on one H100."""
SMOKE_TRAIN = [
    "num_envs=8", "horizon=4", "iterations=2", "probe_every=0", "checkpoint_every=1",
    "pretrain.steps=20", "pretrain.hidden=[32]", "networks.actor_hidden=[32]", "networks.critic_hidden=[32]",
    "ppo.minibatch_size=16", "ppo.epochs=1", "method.options.minibatch_size=16",
]  # fmt: skip
"""The paper preset shrunk to seconds on the CPU (``--smoke``)."""
STEP_NAMES = (
    "cuda_tests",
    "demo_motions",
    "import_motions",
    "throughput",
    "train",
    "eval",
    "methods",
    "parity",
    "sharing",
)
"""Every step, in the order the full check runs them."""
QUICK_STEPS = ("demo_motions", "import_motions", "throughput", "methods", "cuda_tests", "sharing", "parity")
"""``--quick``'s steps in its order: the throughput first (the first to compile warp's kernels, a cost every later
step then skips), each method's short training before the sharing table that reuses RGSD's encoder, the sharing
table next (its groups are kept one by one, so a deadline that cuts it loses its largest group alone), and parity
last (the CUDA tests check it too)."""
QUICK_BESIDE = {"cuda_tests": "methods"}
"""``--quick`` runs these steps beside another (guest -> host), sharing the GPU, to fit one 9-minute command: the
CUDA tests' result is pass or fail, and the methods step's figures that count are its passes, evaluations and peak
memory (each process's own); its samples/s are then not one method's clean rate, which the sharing table's
single training gives."""
SECTIONS = (
    "Machine", "Goals", "Steps", "CUDA tests", "Throughput", "Methods", "Sharing", "Backend parity", "Training",
    "Evaluation",
)  # fmt: skip
"""The sections of gpu_check.md, in order."""
QUICK_METHOD_MINUTES = 0.67
"""Each method's training budget in the quick check's methods step (40 s, the six at once)."""
QUICK_SHARING_MINUTES = 0.4
"""Each copy's training budget in the quick check's sharing step."""
SHARING_COPIES = (1, 2, 4, 6)
"""Copies of RGSD's paper preset trained at once in the sharing step (six: as many as the methods step trains at
once, one per method)."""
PEAK_MEMORY_TAGS = {
    "perf/gpu_peak_allocated_mib": "peak_allocated_mib",
    "perf/gpu_peak_reserved_mib": "peak_reserved_mib",
}
"""TensorBoard tags of a training's peak GPU memory -> the figures' keys."""
DONE = ("pass", "skipped")
"""The statuses of a step that ``--resume`` does not run again."""
MIN_STEP_SECONDS = 20.0
"""A step is not started with less time than this left before ``--deadline-minutes``."""
ENV_PHYSICS_GOAL = 0.9
"""The warp env's steps/s over the backend's physics-only rate at 8192 worlds."""


@dataclass
class Step:
    """One step's command and what became of it."""

    name: str
    argv: list[str]
    timeout: float
    status: str = "not run"
    """"pass", "fail", "skipped" or "not run"."""
    seconds: float = 0.0
    note: str = ""
    log: Path | None = None
    extra: dict = field(default_factory=dict)


def run_step(step: Step, logs: Path) -> Step:
    """Run ``step.argv`` from the repository root, its output in ``logs/<name>.log``; never raises."""
    step.log, step.note, step.extra = logs / f"{step.name}.log", "", {}  # nothing carried over from an earlier run
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    print(f"[gpu_check] {step.name}: {' '.join(step.argv)}", flush=True)
    start = time.perf_counter()
    with step.log.open("w") as log:
        try:
            proc = subprocess.run(
                step.argv, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=step.timeout
            )
            step.status = "pass" if proc.returncode == 0 else "fail"
            if proc.returncode:
                step.note = f"exit code {proc.returncode}"
        except subprocess.TimeoutExpired:
            step.status, step.note = "fail", f"stopped after its {step.timeout:.0f} s limit"
        except OSError as err:
            step.status, step.note = "fail", f"could not start: {err}"
    step.seconds = time.perf_counter() - start
    if step.status == "fail":
        step.note += f"; {failure_note(step.log)}"
    return step


TRACEBACK = "Traceback (most recent call last):"
FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')
MESSAGE_LINES = 6
"""A traceback followed by more lines than this is not how the command ended (its log went on): its last lines are
the note instead."""


def failure_note(log: Path, context: int = 2, width: int = 160) -> str:
    """Why a command failed, from its log: the exception that ended it, its message whole and where it was raised
    (file and line; the traceback's other lines left out), else the log's last line whole after up to ``context``
    lines before it, each cut at ``width`` characters."""
    text = log.read_text(errors="replace") if log.is_file() else ""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "no output"
    starts = [i for i, line in enumerate(lines) if line.strip() == TRACEBACK]
    body, where = (lines[starts[-1] + 1 :] if starts else []), None
    while body and body[0][:1].isspace():  # the frames: "  File ...", their source lines and markers
        where = FRAME.match(body[0]) or where
        body = body[1:]
    if not body or len(body) > MESSAGE_LINES:
        cut = [line.strip()[:width] + ("…" if len(line.strip()) > width else "") for line in lines[-1 - context : -1]]
        return " / ".join([*cut, lines[-1].strip()])
    message = " / ".join(line.strip() for line in body)
    return message + (f" (raised at {'/'.join(Path(where['file']).parts[-3:])}:{where['line']})" if where else "")


def _command(cmd: list[str]) -> str:
    """Output of a command, or why there is none (for the machine description)."""
    if shutil.which(cmd[0]) is None:
        return f"{cmd[0]}: not found"
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError) as err:
        return f"{cmd[0]}: {err}"


def _version(module: str) -> str:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:  # a missing package is reported, not raised
        return "not installed"


def machine() -> list[str]:
    """Markdown lines describing the GPU, CPU, memory and library versions."""
    import torch

    cpu = next(
        (ln.split(":", 1)[1].strip() for ln in _read("/proc/cpuinfo").splitlines() if ln.startswith("model name")),
        platform.processor() or platform.machine(),
    )
    mem = next((ln.split(":", 1)[1].strip() for ln in _read("/proc/meminfo").splitlines() if "MemTotal" in ln), "?")
    gpus = _command(
        ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm", "--format=csv"]
    )
    cuda = torch.version.cuda or "none (CPU build)"
    lines = [
        f"- GPU (nvidia-smi): `{gpus.splitlines()[-1] if gpus else 'none'}`",
        f"- torch {torch.__version__} (CUDA {cuda}, cuda available: {torch.cuda.is_available()}"
        + (f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "")
        + ")",
        f"- warp {_version('warp-lang')}, mujoco-warp {_version('mujoco-warp')}, mujoco {_version('mujoco')}",
        f"- CPU: {cpu}, {os.cpu_count()} cores, memory {mem}, load average {os.getloadavg()[0]:.1f} at the start",
        f"- Python {platform.python_version()} on {platform.platform()}",
        f"- rgsd commit: {commit_text()}",
        "",
        "```",
        _command(["nvidia-smi"]) or "nvidia-smi: no output",
        "```",
    ]
    return lines


def commit_text() -> str:
    """The commit of the rgsd code that runs, as its reports record it (``rgsd_envs.utils.provenance``: the checkout's
    ``git describe``, else the ``COMMIT.json`` a GPU bundle packed in place of ``.git``). Imported here, after the
    prerequisites check: importing rgsd imports its simulator."""
    from rgsd_envs.utils import provenance

    return provenance.commit_text(provenance.rgsd_version())


def method_names() -> list[str]:
    """Every method of rgsd's registry (``rgsd_agents.methods``), each trained from its ``<method>_paper`` preset in
    the methods step. Imported here, after the prerequisites check: importing rgsd imports its simulator."""
    from rgsd_agents import methods

    return methods.method_names()


def kernel_cache_lines(logs: Path) -> list[str]:
    """A Markdown line on warp's kernels: how many module variants the GPU bundle shipped compiled (its
    ``rgsd-kernels.json`` under ``WARP_CACHE_PATH``) and how many warp compiled here since (named in
    ``logs/warp_compiled.txt``: what the shipped ones did not cover)."""
    root = os.environ.get("WARP_CACHE_PATH")
    shipped = _json(Path(root) / "rgsd-kernels.json") if root else {}
    if not shipped:
        return ["- warp kernels: none shipped compiled (no `rgsd-kernels.json` under `WARP_CACHE_PATH`)"]
    cache = Path(root) / shipped["warp"]
    folders = {p.name for p in cache.iterdir() if p.is_dir()} if cache.is_dir() else set()
    compiled = sorted(folders - set(shipped["modules"]))
    (logs / "warp_compiled.txt").write_text("".join(f"{name}\n" for name in compiled))
    return [
        f"- warp kernels: {len(shipped['modules'])} module variants shipped compiled for sm_{shipped['arch']} "
        f"(`WARP_CACHE_PATH`); {len(compiled)} compiled on this machine since (`logs/warp_compiled.txt`)"
    ]


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def cuda_test_counts(xml: Path) -> dict[str, int]:
    """Tests, failures, errors and skips in a pytest JUnit XML file (empty when it is missing)."""
    if not xml.is_file():
        return {}
    root = ET.parse(xml).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        return {}
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    counts["failed_names"] = [  # type: ignore[assignment]
        f"{case.get('classname')}::{case.get('name')}"
        for case in suite.iter("testcase")
        if case.find("failure") is not None or case.find("error") is not None
    ]
    return counts


def training_figures(run: Path) -> dict[str, float]:
    """From a run's TensorBoard events: iterations, samples, median and last charts/SPS, peak GPU memory of the
    process (MiB), last rewards and errors."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags().get("scalars", []))
    if "charts/SPS" not in tags:
        return {}
    sps = acc.Scalars("charts/SPS")
    steady = [e.value for e in sps[1:]] or [sps[0].value]  # the first iteration pays kernel loads and captures
    out = {
        "iterations": float(len(sps)),
        "samples": float(sps[-1].step),
        "median_sps": statistics.median(steady),
        "last_sps": sps[-1].value,
    }
    for tag, key in PEAK_MEMORY_TAGS.items():
        if tag in tags:
            out[key] = max(e.value for e in acc.Scalars(tag))
    for tag in ("rollout/imitation_reward", "rollout/imitation_cartesian_error", "probe/cartesian_error_cm"):
        if tag in tags:
            out[tag] = acc.Scalars(tag)[-1].value
    return out


def sample_times(run: Path) -> list[tuple[float, float]]:
    """(wall-clock time, samples so far) at the end of each of a run's iterations, from its TensorBoard events."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    if "charts/SPS" not in acc.Tags().get("scalars", []):
        return []
    return [(e.wall_time, float(e.step)) for e in acc.Scalars("charts/SPS")]


def overlap_sps(series: list[list[tuple[float, float]]]) -> tuple[float | None, float]:
    """The summed samples/s of trainings over the window in which all of them were iterating, and its seconds
    (None when a training has fewer than two iterations inside it). Unlike a sum of medians, a training that
    iterated alone before the others started or after they stopped does not count its solo rate."""
    if not series or any(len(s) < 2 for s in series):
        return None, 0.0
    start, end = max(s[0][0] for s in series), min(s[-1][0] for s in series)
    total = 0.0
    for s in series:
        inside = [(t, n) for t, n in s if start <= t <= end]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return None, max(end - start, 0.0)
        total += (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])
    return total, end - start


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def throughput_section(doc: dict) -> list[str]:
    """Markdown tables of gpu_throughput.py's figures."""
    figures = doc.get("figures", {})
    if not figures:
        return ["No throughput figures (see the throughput step's log)."]
    units = {
        "physics": "world-steps/s",
        "physics_dense_m": "world-steps/s, mass matrix by tile Cholesky",
        "env_dense_m": "env steps/s, mass matrix by tile Cholesky",
        "env": "env steps/s (encoder reward)",
        "env_host_restarts": "env steps/s, restarts through host indices",
        "train": "samples/s (paper networks, full loop)",
    }
    lines = [
        f"`benchmarks/gpu_throughput.py` on {doc.get('device')} (GPU: {doc.get('gpu')}); mujoco runs the native "
        "backend on all cores (hybrid mode for training: CPU worlds, learner on the device).",
        "",
        "| N | measure | warp | mujoco | warp / mujoco |",
        "|---|---|---|---|---|",
    ]
    for n, rows in figures.items():
        for row, rates in rows.items():
            w, m = rates.get("warp"), rates.get("mujoco")
            ratio = f"{w / m:.2f}x" if w and m else "-"
            lines.append(f"| {n} | {row} ({units.get(row, '')}) | {_fmt(w)} | {_fmt(m)} | {ratio} |")
    for n, split in doc.get("train_split", {}).items():
        for backend, parts in split.items():
            total = sum(parts.values())
            share = ", ".join(f"{k} {v:.3f} s ({v / total:.0%})" for k, v in parts.items()) if total > 0 else "-"
            lines += ["", f"One training iteration at N = {n} on {backend}, by part (host clocks): {share}."]
    for n, rows in doc.get("seconds", {}).items():
        took = ", ".join(f"{row} {t:.1f}" for row, t in rows.items())
        lines += ["", f"Wall seconds of each row at N = {n}, setup included (kernel loads, graph captures): {took}."]
    return lines


def evaluation_section(metrics: Path) -> list[str]:
    """Markdown table of the evaluation's per-category error and FID."""
    if not metrics.is_file():
        return ["No evaluation metrics (see the eval step's log)."]
    doc = json.loads(metrics.read_text())
    lines = []
    for label, run in doc.get("runs", {}).items():
        im = run.get("imitation", {})
        lines += [
            f"Run `{label}`: latent {run.get('latent')}, within-motion alignment "
            f"{run.get('within_motion_alignment', float('nan')):.4f}.",
            "",
            "| category | ERR (cm) | FID |",
            "|---|---|---|",
        ]
        for cat, v in im.get("categories", {}).items():
            lines.append(f"| {cat} | {v.get('err_cm', float('nan')):.1f} | {v.get('fid', float('nan')):.2f} |")
    lines += ["", f"Full report: `{metrics.parent / 'report.md'}`."]
    return lines


def goals(throughput: dict, train: dict[str, float], smoke: bool, train_source: str = "") -> list[str]:
    """The goal table: figure, target, met (the training figure: ``train``'s median from ``train_source``, else
    the throughput row)."""
    at_8192 = throughput.get("figures", {}).get("8192", {})
    env_8192 = at_8192.get("env", {}).get("warp")
    physics_8192 = at_8192.get("physics", {}).get("warp")
    ratio = env_8192 / physics_8192 if env_8192 and physics_8192 else None
    train_sps = train.get("median_sps") or at_8192.get("train", {}).get("warp")

    def verdict(value: float | None, target: float) -> str:
        if smoke:
            return "not judged (--smoke: CPU)"
        if value is None:
            return "no figure (step failed or not run)"
        return "met" if value >= target else "NOT met"

    return [
        "| goal (one H100) | figure | target | result |",
        "|---|---|---|---|",
        f"| env steps/s, warp, 8192 worlds (gpu_throughput `env` row) | {_fmt(env_8192)} | {ENV_STEPS_GOAL:,} | "
        f"{verdict(env_8192, ENV_STEPS_GOAL)} |",
        f"| env steps/s over physics-only steps/s, 8192 worlds | {'-' if ratio is None else f'{ratio:.2f}'} | "
        f"{ENV_PHYSICS_GOAL} | {verdict(ratio, ENV_PHYSICS_GOAL)} |",
        f"| training samples/s, paper networks ("
        f"{train_source if train.get('median_sps') else 'the throughput `train` row at 8192'}) | {_fmt(train_sps)} | "
        f"{TRAIN_SAMPLES_GOAL:,} | {verdict(train_sps, TRAIN_SAMPLES_GOAL)} |",
    ]


def methods_section(doc: dict, beside: list[str] | None = None) -> list[str]:
    """Each method's short paper-preset training on CUDA (all six at once), its peak memory and evaluation;
    ``beside``: the steps that shared the GPU with it."""
    group = doc.get("groups", {}).get("methods")
    if not group:
        return ["No methods figures (see the methods step's log)."]
    lines = [
        f"`benchmarks/concurrent_trainings.py`: every method's `<method>_paper` preset on {doc.get('device')} with "
        f"warp worlds, all at once for {doc.get('minutes')} min each, then `rgsd eval --protocol paper` with "
        "8 rollouts per clip (no video) of each, then 2 downstream iterations on the RGSD run. Samples: rollout "
        "samples (PPO methods) or env transitions (Meta Motivo). Peak memory: each process's own (torch)."
        + (
            f" The {', '.join(beside)} step ran beside it on the same GPU, so its samples/s are shared ones."
            if beside
            else ""
        ),
        "",
        "| method | trained | iterations | samples | median samples/s | peak allocated (MiB) | peak reserved (MiB) "
        "| evaluated | mean ERR (cm) | why it failed |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    evals = group.get("eval", {})
    for name, r in group["members"].items():
        e = evals.get(name, {})
        errs = [v for v in (e.get("err_cm") or {}).values() if v is not None]
        evaluated = "pass" if e.get("exit_code") == 0 else ("FAIL" if e else "-")
        if e.get("skipped"):
            evaluated = f"not run ({e['skipped']})"
        why = (r.get("error") and f"training: {r['error']}") or (e.get("error") and f"evaluation: {e['error']}")
        lines.append(
            f"| {name} | {'pass' if r.get('exit_code') == 0 else 'FAIL'} | {_fmt(r.get('iterations'))} | "
            f"{_fmt(r.get('samples'))} | {_fmt(r.get('median_sps'))} | {_fmt(r.get('peak_allocated_mib'))} | "
            f"{_fmt(r.get('peak_reserved_mib'))} | {evaluated} | {f'{sum(errs) / len(errs):.1f}' if errs else '-'} "
            f"| {(why or '-').replace('|', '/')} |"
        )
    lines += ["", f"Sum of the medians: {_fmt(group.get('aggregate_sps'))} samples/s."]
    if "downstream" in group:
        d = group["downstream"]
        if d.get("skipped"):
            lines.append(f"Downstream step: not run ({d['skipped']}).")
        else:
            ran = f"{'pass' if d.get('exit_code') == 0 else 'FAIL'} in {d.get('seconds')} s"
            lines.append(f"Downstream step: {ran}" + (f": {d['error']}." if d.get("error") else "."))
    return lines


def sharing_section(doc: dict) -> list[str]:
    """Aggregate samples/s of 1, 2, 4 and 6 copies of one preset sharing the GPU."""
    groups = doc.get("groups", {})
    if not groups:
        return ["No sharing figures (see the sharing step's log)."]

    def together(g: dict) -> float:
        return g.get("overlap_sps") or g.get("aggregate_sps") or 0.0

    one = together(groups["x1"]) if "x1" in groups else None
    lines = [
        f"Copies of RGSD's `paper` preset training at once on {doc.get('device')} ({doc.get('minutes')} min each, "
        "one encoder): their summed samples/s while all of them were iterating (else the sum of their medians), "
        "the sum of their medians, and the largest peak memory of one.",
        "",
        "| trainings | all passed | samples/s together | sum of medians | per training | x one alone "
        "| peak allocated per training (MiB) |",
        "|---|---|---|---|---|---|---|",
    ]
    for g in groups.values():
        k, agg = g["trainings"], together(g)
        peak = max((r.get("peak_allocated_mib") or 0.0 for r in g["members"].values()), default=0.0)
        lines.append(
            f"| {k} | {'yes' if g.get('passed') else 'NO'} | {_fmt(agg)} | {_fmt(g.get('aggregate_sps'))} | "
            f"{_fmt(agg / k)} | {f'{agg / one:.2f}' if one else '-'} | {_fmt(peak)} |"
        )
    return lines


def parity_section(doc: dict) -> list[str]:
    """The shipped policy's error per clip on MuJoCo and on warp (``benchmarks/backend_parity.py``)."""
    if not doc:
        return ["No parity figures (see the parity step's log)."]
    lines = [
        f"`benchmarks/backend_parity.py` on warp device {doc.get('device')}: mean gap {doc.get('mean_gap_cm', 0):.3f} "
        f"cm, largest {doc.get('max_gap_cm', 0):.3f} cm; all clips within tolerance: {doc.get('ok')}.",
        "",
        "| clip | mujoco (cm) | warp (cm) | gap (cm) | tolerance (cm) | compared | ok |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in doc.get("clips", []):
        lines.append(
            f"| {c['clip']} | {c['error_cm']['mujoco']:.2f} | {c['error_cm']['warp']:.2f} | {c['gap_cm']:.3f} | "
            f"{c['tolerance_cm']:.2f} | {c['compared']} | {c['ok']} |"
        )
    return lines


def train_argv(args: argparse.Namespace, out: Path) -> list[str]:
    """``rgsd train --config paper`` on warp, on the clips of ``<out>/motions`` (demo plus imported)."""
    sets = ["env.backend=warp", f"max_minutes={args.train_minutes}", f"env.motions={out / 'motions'}"]
    sets += SMOKE_TRAIN if args.smoke else []
    argv = [sys.executable, "-m", "rgsd_agents.cli", "train", "--config", "paper", "--out", str(out / "train_run")]
    argv += ["--device", "cpu" if args.smoke else "cuda", "--no-progress"]
    return argv + [a for kv in sets for a in ("--set", kv)]


def build_steps(args: argparse.Namespace, out: Path) -> dict[str, Step]:
    """The commands of every step, in the full check's order."""
    py = sys.executable
    throughput = [py, "benchmarks/gpu_throughput.py", "--json", str(out / "throughput.json")]
    if args.smoke:
        throughput += ["--smoke"]
    else:
        throughput += ["--device", "cuda", "--num-envs", *map(str, args.num_envs)]
    if args.quick:  # the goals' rows: warp alone, and where the env step's time goes
        throughput += ["--backends", "warp", "--profile", str(out / "profile.txt")]
    evaluation = [py, "-m", "rgsd_agents.cli", "eval", "--run", str(out / "train_run"), "--out", str(out / "eval")]
    evaluation += ["--device", "cpu" if args.smoke else "cuda", "--no-video", "--no-progress"]
    evaluation += ["--rollouts", "1", "--kappas", "20", "--motions", "demo"] if args.smoke else []
    motions = [py, "-m", "rgsd_envs.motion.cli"]
    tests = [py, "-m", "pytest", "-m", "cuda", "-q", "-rs", f"--junitxml={out / 'cuda_tests.xml'}"]
    concurrent = [py, "benchmarks/concurrent_trainings.py", "--motions", str(out / "motions")]
    concurrent += ["--smoke"] if args.smoke else ["--device", "cuda"]
    methods = [*concurrent, "--methods", *args.methods, "--minutes", str(QUICK_METHOD_MINUTES), "--eval"]
    methods += ["--downstream", "--out", str(out / "methods")] + (["--resume"] if args.resume else [])
    copies = SHARING_COPIES[:2] if args.smoke else SHARING_COPIES  # 2 CPU cores: 4 copies add nothing to the check
    sharing = [*concurrent, "--copies", *map(str, copies), "--minutes", str(QUICK_SHARING_MINUTES)]
    sharing += ["--encoder", str(out / "methods" / "methods" / "rgsd" / "encoder.pt"), "--out", str(out / "sharing")]
    sharing += ["--resume"] if args.resume else []
    parity = [py, "benchmarks/backend_parity.py", "--device", "cpu" if args.smoke else "cuda"]
    parity += ["--json", str(out / "parity.json")] + (["--max-frames", "10"] if args.smoke else [])
    steps = [
        Step("cuda_tests", tests, 15 * 60),
        Step("demo_motions", [*motions, "demo", "--out", str(out / "motions")], 120),
        Step("import_motions", [*motions, "import", str(args.motions), "--out", str(out / "motions"), "--quiet"], 300),
        Step("throughput", throughput, (5 if args.smoke or args.quick else 15) * 60),
        Step("train", train_argv(args, out), args.train_minutes * 60 + 600),
        Step("eval", evaluation, (5 if args.smoke else 10) * 60),
        Step("methods", methods, 10 * 60),
        Step("parity", parity, 5 * 60),
        Step("sharing", sharing, 10 * 60),
    ]
    assert tuple(s.name for s in steps) == STEP_NAMES
    return {s.name: s for s in steps}


def settle(step: Step, beside: list[str], cuda: bool) -> None:
    """A finished step's final status and note, as the console and the report both give them: the CUDA tests
    without CUDA are "skipped", a failed import trains on the demo motions alone, a step run beside others says so."""
    if step.name == "cuda_tests" and not cuda:
        step.extra["no_cuda"] = True
        if step.status == "pass":
            step.status, step.note = "skipped", "no CUDA: every cuda test skipped"
    if step.name == "import_motions" and step.status != "pass":
        step.note += "; training on the demo motions alone"
    if beside:
        step.extra["beside"] = beside
        step.note = f"ran beside {', '.join(beside)}; {step.note}".rstrip("; ")


def load_state(path: Path, steps: dict[str, Step]) -> None:
    """Fill ``steps`` with the results an earlier command recorded in ``steps.json`` (if any)."""
    if not path.is_file():
        return
    for name, rec in json.loads(path.read_text()).items():
        if name in steps:
            step = steps[name]
            step.status, step.seconds, step.note = rec["status"], rec["seconds"], rec["note"]
            step.log, step.extra = (Path(rec["log"]) if rec.get("log") else None), rec.get("extra", {})


def save_state(path: Path, steps: dict[str, Step]) -> None:
    """Record every step's result in ``steps.json`` (atomically), for a later ``--steps`` command."""
    from rgsd_envs.utils.files import atomic_path

    doc = {
        s.name: {"status": s.status, "seconds": s.seconds, "note": s.note, "log": str(s.log or ""), "extra": s.extra}
        for s in steps.values()
    }
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(doc, indent=1))


def parse_steps(text: str) -> list[str]:
    """The step names of ``--steps`` (comma-separated), in run order; unknown names raise a clear error."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = sorted(set(names) - set(STEP_NAMES))
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"--steps: unknown step(s) {unknown or text!r}; valid: {', '.join(STEP_NAMES)}"
        )
    return [n for n in STEP_NAMES if n in names]


def _json(path: Path) -> dict:
    """A JSON file's object, or {} when it is missing or cut short (a step killed mid-write)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def write_report(path: Path, args: argparse.Namespace, steps: dict[str, Step], machine_lines: list[str]) -> None:
    """gpu_check.md: machine, goals, steps, and each step's figures."""
    from rgsd_envs.utils.files import atomic_path

    out = path.parent
    throughput = json.loads((out / "throughput.json").read_text()) if (out / "throughput.json").is_file() else {}
    train = training_figures(out / "train_run") if (out / "train_run" / "tb").is_dir() else {}
    train_source = "the median charts/SPS of the paper-preset run"
    if not train.get("median_sps"):  # the quick check trains no train_run: RGSD's paper preset alone, else beside
        x1 = _json(out / "sharing" / "concurrent.json").get("groups", {}).get("x1", {})
        alone = x1.get("overlap_sps") or x1.get("aggregate_sps")
        rgsd = _json(out / "methods" / "concurrent.json").get("groups", {}).get("methods", {}).get("members", {})
        shared = rgsd.get("rgsd", {}).get("median_sps")
        if alone:
            train, train_source = {"median_sps": alone}, "RGSD's paper preset alone, the sharing table's one training"
        elif shared:
            train, train_source = {"median_sps": shared}, "RGSD's paper preset in the methods step, sharing the GPU"
        else:
            train, train_source = {}, ""
    counts = cuda_test_counts(out / "cuda_tests.xml")
    mode = "quick" if args.quick else "full"
    if args.smoke:
        mode += ", --smoke (CPU, tiny sizes: checks the script, its figures are not judged)"
    sections: dict[str, list[str]] = {
        "Machine": [*machine_lines[:1], *kernel_cache_lines(out / "logs"), *machine_lines[1:]],
        "Goals": goals(throughput, train, args.smoke, train_source),
        "Steps": ["| step | result | seconds | note | log |", "|---|---|---|---|---|"]
        + [
            f"| {s.name} | {s.status} | {s.seconds:.0f} | {s.note.replace('|', '/')} | "
            f"`{s.log.relative_to(out) if s.log else '-'}` |"
            for s in steps.values()
        ],
    }
    if counts:
        failed = counts.pop("failed_names", [])
        cuda = [f"`pytest -m cuda`: {counts['tests']} tests, {counts['failures']} failed, {counts['errors']} errors, "]
        cuda[0] += f"{counts['skipped']} skipped" + (
            " (no CUDA on this machine)." if steps["cuda_tests"].extra.get("no_cuda") else "."
        )
        cuda += [f"- failed: `{name}`" for name in failed]
    else:
        cuda = ["No test results (see the cuda_tests step's log)."]
    sections["CUDA tests"] = cuda
    sections["Throughput"] = throughput_section(throughput)
    trained_here = (out / "train_run" / "tb").is_dir()
    if train:
        sections["Training"] = [
            (
                f"`rgsd train --config paper` on warp ({'cpu, smoke sizes' if args.smoke else 'cuda'}), "
                f"{args.train_minutes} min budget, motions: demo + `{args.motions}`."
            )
            if trained_here
            else f"No train step ran; the figure is {train_source}.",
            "",
            "| figure | value |",
            "|---|---|",
            *[f"| {k} | {_fmt(v) if abs(v) >= 100 else f'{v:.3g}'} |" for k, v in train.items()],
        ]
    else:
        sections["Training"] = ["No training figures (see the train step's log)."]
    sections["Evaluation"] = evaluation_section(out / "eval" / "metrics.json")
    sections["Methods"] = methods_section(
        _json(out / "methods" / "concurrent.json"), steps["methods"].extra.get("beside", [])
    )
    sections["Sharing"] = sharing_section(_json(out / "sharing" / "concurrent.json"))
    sections["Backend parity"] = parity_section(_json(out / "parity.json"))
    profile = out / "profile.txt"
    if profile.is_file():  # where the env step's time goes (the throughput step's --profile)
        sections["Throughput"] += [
            "",
            "Where the env step's time goes at the largest N (torch profiler, `gpu_throughput.py --profile`):",
            "",
            "```",
            *profile.read_text().strip().splitlines()[:40],
            "```",
        ]
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# rgsd GPU check",
        "",
        f"`python benchmarks/gpu_check.py {' '.join(sys.argv[1:])}`, {stamp}, mode: {mode}.",
    ]
    for name in SECTIONS:
        lines += ["", f"## {name}", "", *sections[name]]
    with atomic_path(path) as tmp:
        tmp.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Run every step, write gpu_check.md; exit status 1 if any step failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="output folder (gpu_check.md, logs/, run, report)")
    parser.add_argument(
        "--motions", type=Path, default=DEFAULT_MOTIONS, help=f"AMASS files to train on beside demo ({DEFAULT_MOTIONS})"
    )
    parser.add_argument("--train-minutes", type=float, default=10.0, help="time budget of the paper-preset training")
    parser.add_argument("--smoke", action="store_true", help="the same steps on the CPU with tiny sizes (minutes)")
    parser.add_argument(
        "--quick", action="store_true", help=f"the check in one 9-minute command: {','.join(QUICK_STEPS)}"
    )
    parser.add_argument(
        "--steps", type=parse_steps, default=None, help=f"comma-separated, of {','.join(STEP_NAMES)} (all)"
    )
    parser.add_argument(
        "--num-envs", type=int, nargs="+", default=None, help="world counts of the throughput step (quick: 8192)"
    )
    parser.add_argument(
        "--resume", action="store_true", help="run only the steps --out's steps.json does not record as passed"
    )
    parser.add_argument(
        "--methods", nargs="+", default=None, help="the methods step's methods (every method of rgsd_agents.methods)"
    )
    parser.add_argument(
        "--deadline-minutes", type=float, default=None,
        help="stop starting steps past this wall-clock time; each step's limit shrinks to what is left (quick: 8.5)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    order = list(QUICK_STEPS) if args.quick else list(STEP_NAMES)
    wanted = [n for n in order if n in (args.steps or order)]
    lacking = problems(tests="cuda_tests" in wanted)  # before the first step: a job's minutes are not spent on it
    if lacking:
        for line in lacking:
            print(f"gpu_check: {line}", file=sys.stderr)
        return 2
    known = method_names()
    unknown = [m for m in args.methods or () if m not in known]
    if unknown:
        parser.error(f"--methods: {', '.join(unknown)} not among rgsd's methods ({', '.join(known)})")
    args.methods = args.methods or known
    if args.smoke:
        args.train_minutes = 1.0
    if args.num_envs is None:
        args.num_envs = [8192] if args.quick else list(FULL_N)
    if args.deadline_minutes is None and args.quick and not args.smoke:
        args.deadline_minutes = 8.5
    deadline = math.inf if args.deadline_minutes is None else time.perf_counter() + 60.0 * args.deadline_minutes
    out = args.out.resolve()
    args.motions = args.motions.resolve()
    (out / "logs").mkdir(parents=True, exist_ok=True)
    machine_lines = machine()
    steps = build_steps(args, out)
    state, report = out / "steps.json", out / "gpu_check.md"
    load_state(state, steps)
    chosen = [n for n in wanted if not (args.resume and steps[n].status in DONE)]
    if args.resume:
        print(f"[gpu_check] --resume: {', '.join(chosen) or 'every step already passed'}", flush=True)
    import torch

    guests = {host: guest for guest, host in QUICK_BESIDE.items() if args.quick and {guest, host} <= set(chosen)}
    for name in chosen:
        if name in guests.values():
            continue  # it ran beside its host step
        running = [n for n in (name, guests.get(name)) if n]
        left = deadline - time.perf_counter()
        if left < MIN_STEP_SECONDS:
            for n in running:
                steps[n].status, steps[n].note = "not run", f"out of time ({max(left, 0):.0f} s left of the deadline)"
                steps[n].seconds, steps[n].log = 0.0, None
            continue
        for n in running:
            stopped = steps[n]
            stopped.timeout = min(stopped.timeout, left)
            stopped.status, stopped.note = "fail", "the command was stopped before this step ended"
            stopped.seconds, stopped.log = 0.0, out / "logs" / f"{n}.log"
        save_state(state, steps)  # what a killed command leaves: this step marked as stopped, its log kept
        write_report(report, args, steps, machine_lines)
        # a guest step runs in a thread beside its host (each is a subprocess: the thread only waits)
        beside = [threading.Thread(target=run_step, args=(steps[n], out / "logs")) for n in running[1:]]
        for thread in beside:
            thread.start()
        run_step(steps[name], out / "logs")
        for thread in beside:
            thread.join()
        for step in (steps[n] for n in running):
            settle(step, [n for n in running if n != step.name], torch.cuda.is_available())
            print(f"[gpu_check] {step.name}: {step.status} in {step.seconds:.0f} s {step.note}", flush=True)
        save_state(state, steps)
        write_report(report, args, steps, machine_lines)  # after each step: a killed command keeps what it measured
    save_state(state, steps)
    write_report(report, args, steps, machine_lines)
    print(f"[gpu_check] wrote {report}")
    return 0 if all(steps[n].status in DONE for n in wanted) else 1


if __name__ == "__main__":
    sys.exit(main())
