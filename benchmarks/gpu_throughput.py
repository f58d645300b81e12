"""GPU-scale throughput: the MuJoCo Warp backend against native MuJoCo, side by side on one machine.

For each N (default 1024, 4096, 8192 worlds) this prints, for ``warp`` (MuJoCo Warp on
``--device``, default cuda when available) and ``mujoco`` (native MuJoCo on all of the
machine's cores), with the ratio warp / mujoco:

- ``physics``: world-steps/s of the backend alone (one control step = 2 physics steps, held
  random PD targets; warp: the CUDA-graph replay, synchronised before the clock stops);
- ``physics, dense M`` (warp only): the same with the mass matrix factored by tile Cholesky. mujoco-warp factors a
  kinematic tree's mass matrix densely up to 64 dofs and by sparse LDL beyond, one launch per tree level; the
  humanoid's one tree has 75 dofs, so its factorisations are 29 launches each, four per control step (45 % of an
  H200's env step in ``profile.txt``). The row lifts that bound for its backend, as mujoco-warp's own tests patch
  it, and prints the ratio to ``physics``; ``env, dense M``: the env on that layout, with its ratio to ``env``
  (so that, with the two, the env's share of its physics can be read for either layout); timed after the other
  rows, so that a failure there loses only those rows;
- ``env``: world-steps/s of the torch env ``RGSDTorchEnv`` (what the trainers step) with the
  encoder reward (PD targets, physics, observations, rewards, terminations, autoresets, its one
  host read per step), actions N(0, 0.1) already on the env's device;
- ``env, host restarts`` (warp only): the same env with ``masked_restarts`` off, finished worlds restarted through
  host indices after the step's read (on CUDA the default queues them before it as masked device ops), and the
  ratio of the two;
- ``train``: samples/s of the full training loop (rollout, GAE, PPO, discovery-encoder
  update) with the paper's networks ([1024, 1024, 1024, 512] actor, critic and encoder,
  minibatch 32768, 5 epochs), the learner on ``--device``; warp keeps the env on the device,
  mujoco runs the hybrid mode (simulation on the CPU, learner on the device); and the seconds of an iteration by
  part (env steps, policy, PPO update, discovery update, other), which say where a training falls short of its env.

Goals on one H100: >= 450k env steps/s at 8192 worlds (0.9 of the physics alone), >= 250k training samples/s.
``--profile FILE`` writes where the env step's time goes at the largest N: host milliseconds per phase, the GPU's
idle time per step by the host phase running through it (from the profiler's chrome trace, written beside as
``FILE.trace.json``), and torch's table of ops and kernels.
Figures are printed, never asserted (``--json FILE`` also writes them, for ``benchmarks/gpu_check.py``).
``--smoke`` runs everything on the CPU with tiny sizes (a CPU warp device is slow: it is for checking
that the benchmark runs, not for its numbers).
Run: ``python benchmarks/gpu_throughput.py`` on a GPU machine (needs ``rgsd-envs[warp]``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
import torch

from rgsd_agents.config import TrainConfig, load_config
from rgsd_agents.pretraining.encoder import build_encoder
from rgsd_agents.pretraining.reference import load_reference
from rgsd_agents.training.runner import Runner
from rgsd_envs.envs.torch_env import RGSDTorchEnv
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.sim import check_backend, make_backend
from rgsd_envs.testing import dense_mass_matrix
from rgsd_envs.utils.files import atomic_path

BACKENDS = ("warp", "mujoco")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _env_device(backend: str, device: torch.device) -> str:
    """Where the env's tensors live: with the simulator (warp) or on the CPU (mujoco, hybrid mode)."""
    return str(device) if backend == "warp" else "cpu"


def physics_rate(backend: str, n: int, steps: int, device: torch.device, dense_m: bool = False) -> float:
    """World-steps/s of the backend alone under held random PD targets (``dense_m``: ``dense_mass_matrix``)."""
    dev = torch.device(_env_device(backend, device))
    with dense_mass_matrix() if dense_m else contextlib.nullcontext():
        b = make_backend(backend, n, device=dev)
    rng = np.random.default_rng(0)
    off, scale = torch.as_tensor(sk.ACTION_OFFSET), torch.as_tensor(sk.ACTION_SCALE)
    targets = (off + scale * torch.as_tensor(rng.normal(0.0, 0.1, (n, sk.NUM_DOFS)))).to(dev, torch.float32)
    b.step(targets)  # warm-up (and, on cuda, the first graph launch)
    _sync(dev)
    start = time.perf_counter()
    for _ in range(steps):
        b.step(targets)
    _sync(dev)
    rate = n * steps / (time.perf_counter() - start)
    b.close()
    return rate


def env_rate(
    backend: str,
    n: int,
    steps: int,
    device: torch.device,
    profile: Path | None = None,
    masked: bool | None = None,
    dense_m: bool = False,
) -> float:
    """World-steps/s of the torch env (the trainers' interface) with the encoder reward, actions on its device
    (``masked``: its ``masked_restarts``, None: the env's default; ``dense_m``: ``dense_mass_matrix``); with
    ``profile``, 20 more steps under torch's profiler, its table of ops and kernels written there."""
    dev = torch.device(_env_device(backend, device))
    with dense_mass_matrix() if dense_m else contextlib.nullcontext():
        env = RGSDTorchEnv(n, backend=backend, device=str(dev))
    if masked is not None:
        env.masked_restarts = masked
    gen = torch.Generator(dev).manual_seed(0)
    actions = [0.1 * torch.randn(n, sk.NUM_DOFS, generator=gen, device=dev) for _ in range(steps + 2)]
    env.reset(seed=0)
    for a in actions[:2]:
        env.step(a)
    _sync(dev)
    start = time.perf_counter()
    for a in actions[2:]:
        env.step(a)
    _sync(dev)
    rate = n * steps / (time.perf_counter() - start)
    if profile is not None:
        write_profile(env, actions[2:22], dev, profile)
    env.close()
    return rate


@contextlib.contextmanager
def wrapped_phases(env: RGSDTorchEnv, wrap: Callable[[str, Callable], Callable]) -> Iterator[list[str]]:
    """Each phase of ``RGSDTorchEnv.step`` replaced by ``wrap(phase name, method)`` inside the block; yields the
    phase names."""
    from rgsd_envs.envs import torch_env

    core = env.core
    targets = [
        (core, "check_actions", "actions check"),
        (core, "physics_step", "physics launch"),
        (core, "observe", "observations, termination"),
        (torch_env, "read_host_flags", "the one read (host waits for the device)"),
        (env, "restart", "restarts of ended worlds"),
        (core, "restart_masked", "restarts queued on the device"),
        (core, "finish_masked_restart", "restarts' host side"),
    ]
    if env.reward_core is not None:
        targets.append((env.reward_core, "transition", "encoder reward"))
    with contextlib.ExitStack() as stack:
        for owner, attr, name in targets:
            stack.enter_context(mock.patch.object(owner, attr, wrap(name, getattr(owner, attr))))
        yield [name for _, _, name in targets]


DEVICE_ACTIVITY = ("kernel", "gpu_memcpy", "gpu_memset")
"""Chrome-trace categories of work on the GPU (kineto's names)."""
OUTSIDE_PHASES = "no timed phase (other host work)"


def device_idle_by_phase(trace: dict, phases: list[str], steps: int) -> dict[str, float]:
    """From a torch profiler chrome trace: the GPU's busy and idle milliseconds per step over the traced span
    (first to last device activity), and its idle time split by the host phase (``record_function`` ranges named
    in ``phases``) running through it. Empty when the trace has no device activity (a CPU run)."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X" and "dur" in e]
    busy = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events if e.get("cat") in DEVICE_ACTIVITY)
    if not busy:
        return {}
    merged = [list(busy[0])]
    for a, b in busy[1:]:
        if a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    gaps = [(merged[i][1], merged[i + 1][0]) for i in range(len(merged) - 1)]
    ranges = [
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]), e["name"])
        for e in events
        if e.get("cat") == "user_annotation" and e.get("name") in phases
    ]
    idle = dict.fromkeys(phases, 0.0)
    idle[OUTSIDE_PHASES] = 0.0
    for g0, g1 in gaps:
        covered = 0.0
        for r0, r1, name in ranges:  # phases do not nest: each instant of a gap is in one phase at most
            overlap = min(g1, r1) - max(g0, r0)
            if overlap > 0:
                idle[name] += overlap
                covered += overlap
        idle[OUTSIDE_PHASES] += (g1 - g0) - covered
    span = merged[-1][1] - merged[0][0]
    gpu_idle = sum(g1 - g0 for g0, g1 in gaps)
    out = {name: t / 1e3 / steps for name, t in idle.items() if t > 0}
    return {"GPU busy": (span - gpu_idle) / 1e3 / steps, "GPU idle": gpu_idle / 1e3 / steps, **out}


def phase_times(env: RGSDTorchEnv, actions: list[torch.Tensor], dev: torch.device) -> dict[str, float]:
    """Host milliseconds per env step in each phase of ``RGSDTorchEnv.step`` (wall clock, no added syncs).

    On a GPU the host only queues work until the step's one read, which waits for the device: a short read
    means the host is the bottleneck, and the phases after it are host time the device sits idle through."""
    totals: dict[str, float] = {}

    def timed(name: str, fn):
        def run(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                totals[name] = totals.get(name, 0.0) + time.perf_counter() - t

        return run

    with wrapped_phases(env, timed):
        _sync(dev)
        start = time.perf_counter()
        for a in actions:
            env.step(a)
        _sync(dev)
        total = time.perf_counter() - start
    ms = {name: 1e3 * t / len(actions) for name, t in totals.items()}
    ms["other host work"] = 1e3 * total / len(actions) - sum(ms.values())
    ms["step"] = 1e3 * total / len(actions)
    return ms


def write_profile(env: RGSDTorchEnv, actions: list[torch.Tensor], dev: torch.device, path: Path) -> None:
    """The env step's phases (``phase_times``), then torch.profiler over ``len(actions)`` env steps: the ops and
    kernels by self time (device time on a GPU)."""
    from torch.profiler import ProfilerActivity, profile

    phases = phase_times(env, actions, dev)
    lines = [f"{'phase':<44s}{'ms per step':>12s}"] + [f"{k:<44s}{v:12.3f}" for k, v in phases.items()]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])

    def annotated(name: str, fn):
        def run(*a, **k):
            with torch.profiler.record_function(name):
                return fn(*a, **k)

        return run

    with wrapped_phases(env, annotated) as names, profile(activities=activities) as prof:
        for a in actions:
            env.step(a)
        _sync(dev)
    trace = path.with_name(path.name + ".trace.json")
    prof.export_chrome_trace(str(trace))
    idle = device_idle_by_phase(json.loads(trace.read_text()), names, len(actions))
    if idle:
        lines += [
            "",
            "the GPU over the same steps, and its idle time by the host phase running through it (chrome trace)",
        ]
        lines += [f"{k:<44s}{v:12.3f}" for k, v in idle.items()]
    key = "self_cuda_time_total" if dev.type == "cuda" else "self_cpu_time_total"
    table = prof.key_averages().table(sort_by=key, row_limit=30, max_name_column_width=60)
    with atomic_path(path) as tmp:
        Path(tmp).write_text(
            f"{len(actions)} env steps of {env.num_envs} worlds on {dev}: host time per phase\n"
            + "\n".join(lines)
            + f"\n\nthe same steps under torch's profiler, sorted by {key}\n{table}\n"
        )


def train_config(backend: str, n: int, device: torch.device, smoke: bool) -> TrainConfig:
    """The paper preset at N worlds with this backend; in smoke mode a short horizon."""
    overrides = {
        "num_envs": n,
        "device": str(device),
        "probe_every": 0,
        "env.backend": backend,
        "env.device": _env_device(backend, device),
    }
    if smoke:
        overrides.update({"horizon": 4, "ppo.epochs": 1})
    return load_config("paper", overrides)


TRAIN_PHASES = ("env", "policy", "update", "method")
"""The training iteration's parts the runner times (``perf/<phase>_seconds``): env steps, the policy's actions and
values in the rollout, the PPO update, the method's own update (RGSD: the discovery encoder)."""


def train_rate(cfg: TrainConfig, folder: Path, iterations: int) -> tuple[float, dict[str, float]]:
    """Samples/s of the full training loop after one warm-up iteration, and its mean seconds per iteration by
    part (``TRAIN_PHASES``, and ``other``: GAE, relabelling, statistics). Host clocks: a part's GPU work that
    runs on past its end without a read is counted in the next."""
    _, inputs = load_reference(cfg.pretrain_config())
    encoder = folder / "encoder.pt"
    build_encoder(cfg.pretrain_config(), inputs).save(encoder)  # random weights: its cost is what matters here
    cfg.encoder = str(encoder)
    runner = Runner(cfg, folder / "run", progress=False)
    runner.iterate()
    metrics = [runner.iterate() for _ in range(iterations)]
    runner.close()
    split = {p: sum(m[f"perf/{p}_seconds"] for m in metrics) / iterations for p in TRAIN_PHASES}
    total = sum(m["perf/iteration_seconds"] for m in metrics)
    split["other"] = total / iterations - sum(split.values())
    return cfg.batch_size * iterations / total, {k: round(v, 4) for k, v in split.items()}


def _row(name: str, rates: dict[str, float], unit: str) -> str:
    w, m = rates.get("warp"), rates.get("mujoco")
    ratio = f"{w / m:6.2f}x" if w and m else "     -"
    cells = "".join(f"{rates[b]:>12,.0f}" if b in rates else f"{'-':>12s}" for b in BACKENDS)
    return f"  {name:<8s}{cells}  {ratio}   {unit}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1024, 4096, 8192])
    parser.add_argument("--steps", type=int, default=100, help="timed control steps (physics, env)")
    parser.add_argument("--train-iterations", type=int, default=3, help="timed training iterations")
    parser.add_argument("--no-train", action="store_true", help="skip the training-loop measurement")
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--smoke", action="store_true", help="CPU, N=8, a few steps: checks that it runs (< 1 min)")
    parser.add_argument("--profile", type=Path, help="write a torch profile of the warp env step at the largest N here")
    parser.add_argument(
        "--json", type=Path, help="also write the figures to this JSON file ({N: {row: {backend: x}}}), kept N added to"
    )
    args = parser.parse_args()
    if args.smoke:
        args.device, args.num_envs, args.steps, args.train_iterations = "cpu", [8], 3, 1
    device = torch.device(args.device)
    for b in args.backends:
        check_backend(b)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "none"
    print(
        f"device {device} (GPU: {gpu}); {os.cpu_count()} cores, torch threads {torch.get_num_threads()}, "
        f"load average {os.getloadavg()[0]:.1f}; {args.steps} timed steps, {args.train_iterations} timed iterations"
    )
    print(f"  {'':<8s}{'warp':>12s}{'mujoco':>12s}  {'ratio':>7s}")
    figures: dict[str, dict[str, dict[str, float]]] = {}
    splits: dict[str, dict[str, dict[str, float]]] = {}
    """N -> backend -> seconds per training iteration by part (``train_rate``)."""
    seconds: dict[str, dict[str, float]] = {}
    """Wall seconds of each row, setup included (kernel loads, graph captures, env and networks built): where a
    short GPU job's time goes, beside the timed steps' few seconds."""
    if args.json and args.json.is_file():  # a run at other N adds to the file: same N is measured anew
        earlier = json.loads(args.json.read_text())
        figures, seconds = earlier.get("figures", {}), earlier.get("seconds", {})
        splits = earlier.get("train_split", {})
    clock = time.perf_counter()

    def save() -> None:  # after each row, so a stopped or failed run keeps every figure measured so far
        nonlocal clock
        last = next(reversed(rows))
        took = seconds.setdefault(str(n), {})[last] = round(time.perf_counter() - clock, 1)
        print(f"  {'':<8s}({last}: {took:.1f} s wall, setup included)", flush=True)
        clock = time.perf_counter()
        if args.json:
            doc = {"device": str(device), "gpu": gpu, "figures": figures, "seconds": seconds, "train_split": splits}
            with atomic_path(args.json) as tmp_json:
                Path(tmp_json).write_text(json.dumps(doc, indent=1))

    for n in args.num_envs:
        print(f"N = {n}")
        rows = figures[str(n)] = {}
        rows["physics"] = {b: physics_rate(b, n, args.steps, device) for b in args.backends}
        print(_row("physics", rows["physics"], "world-steps/s"), flush=True)
        save()
        rows["env"] = {
            b: env_rate(b, n, args.steps, device, args.profile if b == "warp" and n == max(args.num_envs) else None)
            for b in args.backends
        }
        print(_row("env", rows["env"], "env steps/s (with encoder reward)"), flush=True)
        save()
        if "warp" in args.backends:
            host = env_rate("warp", n, args.steps, device, masked=False)
            rows["env_host_restarts"] = {"warp": host}
            print(f"  {'env, host restarts':<20s}{host:>12,.0f}   default / this: {rows['env']['warp'] / host:.2f}x")
            save()
        if not args.no_train:
            rows["train"] = {}
            split = splits[str(n)] = {}
            for b in args.backends:
                with tempfile.TemporaryDirectory() as tmp:
                    cfg = train_config(b, n, device, args.smoke)
                    rows["train"][b], split[b] = train_rate(cfg, Path(tmp), args.train_iterations)
            print(_row("train", rows["train"], "samples/s, paper networks (full loop)"), flush=True)
            for b, parts in split.items():
                print(f"  {'':<8s}{b} iteration, s: " + ", ".join(f"{k} {v:.3f}" for k, v in parts.items()))
            save()
        if "warp" in args.backends:
            for row, name, rate, base in (
                ("physics_dense_m", "physics, dense M", physics_rate, "physics"),
                ("env_dense_m", "env, dense M", env_rate, "env"),
            ):
                try:  # last: mujoco-warp does not lay out trees this large densely itself
                    dense = rate("warp", n, args.steps, device, dense_m=True)
                except Exception as err:  # reported; the rows before it are kept
                    print(f"  {name:<20s}failed: {type(err).__name__}: {err}", flush=True)
                    clock = time.perf_counter()  # the next row's wall seconds start here, as after a save
                    break
                rows[row] = {"warp": dense}
                without = rows[base]["warp"]
                print(f"  {name:<20s}{dense:>12,.0f}   this / without: {dense / without:.2f}x", flush=True)
                save()


if __name__ == "__main__":
    main()
