"""One step and one partial reset of the vector env at large N, and how much of each is Python.

At N worlds (default 4096, CPU, mujoco backend, with the encoder reward) this times:

- ``step``: one ``env.step`` of all worlds (physics, observations, rewards,
  terminations, the autoresets of the worlds that ended, info);
- ``reset 5%``: ``env.reset(options={"reset_mask": m})`` of 5 % of the worlds
  (RSI draws, task and skills, ``set_state``, reset observations, encoder
  histories; the observation of all N worlds is returned);
- ``core reset 5%``: the same reset without the Gymnasium layer (what an
  autoreset costs inside a step): ``core.reset_envs`` + ``observe_reset`` +
  filling the encoder histories;
- ``draws 5%``: only the random part of that reset (clip, start frame, task,
  skill of each reset world), the part that was a per-world Python loop;
  ``draws 5% vMF``: the same with ``kappa`` given (evaluation: vMF skills);
  ``draws 100%``: the draws of a reset of all N worlds.

Columns: ``wall`` (ms, fastest of ``--repeats``: the machine may be shared), ``sim C`` (ms inside the
simulator's C calls ``Batch.step``/``Batch.forward``: MuJoCo's own per-world
loops), ``rest`` = wall - sim C (Python and torch/numpy), ``CPU`` (ms of
process CPU time of that call, all threads: less disturbed than wall time
when other programs share the cores), and ``Python``: the
share of the call spent in Python frames (cProfile tottime of functions defined
in .py files over the profiled total; the profiler inflates Python a little).

Run: ``python benchmarks/env_reset_scaling.py [--num-envs 4096] [--repeats 5]``.
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import cProfile
import inspect
import os
import pstats
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
import torch

from rgsd_envs.envs.registration import make_vec_env
from rgsd_envs.utils.threads import single_threaded


class TimedBatch:
    """Wraps a ``mujoco.batch.Batch``: counts the seconds spent in its step and forward calls."""

    def __init__(self, batch: object):
        self._batch = batch
        self.seconds = 0.0

    def __getattr__(self, name: str) -> object:
        return getattr(self._batch, name)

    def _timed(self, fn: Callable, *args: object, **kwargs: object) -> object:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start

    def step(self, *args: object, **kwargs: object) -> object:
        """Batch.step, timed."""
        return self._timed(self._batch.step, *args, **kwargs)

    def forward(self, *args: object, **kwargs: object) -> object:
        """Batch.forward, timed."""
        return self._timed(self._batch.forward, *args, **kwargs)


def python_share(fn: Callable[[], object]) -> float:
    """Share of ``fn``'s profiled time spent in Python frames (tottime of functions from .py files)."""
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    stats = pstats.Stats(prof).stats  # (file, line, name) -> (cc, nc, tottime, cumtime, callers)
    total = sum(v[2] for v in stats.values())
    python = sum(v[2] for (file, _, _), v in stats.items() if file.endswith(".py"))
    return python / max(total, 1e-12)


def measure(name: str, fn: Callable[[], object], timer: TimedBatch, repeats: int) -> dict[str, float]:
    """Wall and simulator-C milliseconds of the fastest of ``repeats`` calls of ``fn``, and its Python share."""
    runs = []
    for _ in range(repeats):
        timer.seconds = 0.0
        start, cpu = time.perf_counter(), time.process_time()
        fn()
        runs.append((time.perf_counter() - start, timer.seconds, time.process_time() - cpu))
    share = statistics.median(python_share(fn) for _ in range(3))
    wall, sim, cpu = (1e3 * x for x in min(runs))
    print(f"{name:<14} | {wall:9.2f} {sim:9.2f} {wall - sim:9.2f} {cpu:9.2f} | {100 * share:6.1f} %")
    return {"wall_ms": wall, "sim_ms": sim, "cpu_ms": cpu, "python_share": share}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--fraction", type=float, default=0.05, help="share of the worlds a partial reset resets")
    parser.add_argument("--repeats", type=int, default=9, help="timed calls per reset row (the fastest counts)")
    parser.add_argument("--step-repeats", type=int, default=3, help="timed calls of step (the fastest counts)")
    parser.add_argument("--threads", type=int, default=None, help="simulator C threads (default: one per core)")
    args = parser.parse_args()
    n = args.num_envs
    env = make_vec_env(n, num_threads=args.threads)
    base = env.unwrapped
    core = base.core
    timer = TimedBatch(core.backend.batch)
    core.backend.batch = timer
    k = max(1, round(args.fraction * n))
    rng = np.random.default_rng(0)
    mask = np.zeros(n, dtype=bool)
    mask[rng.choice(n, k, replace=False)] = True
    ids = torch.as_tensor(np.flatnonzero(mask), device=core.device)
    actions = rng.normal(0.0, 0.1, (n, 69)).astype(np.float32)
    env.reset(seed=0)
    for _ in range(3):
        env.step(actions)

    def core_reset() -> None:
        with single_threaded():  # as the env's own methods run
            core.reset_envs(ids.tolist())  # a list: what the older per-world version took
            core.observe_reset(ids)
            env.reward_core.start(ids)

    print(
        f"N={n}, reset {k} worlds ({100 * args.fraction:g} %), {core.backend.num_threads} sim threads, "
        f"{os.cpu_count()} CPUs, torch {torch.__version__}, fastest of {args.repeats} (step: {args.step_repeats})"
    )
    head = f"{'':<14} | {'wall ms':>9} {'sim C ms':>9} {'rest ms':>9} {'CPU ms':>9} | {'Python':>8}"
    print(head + "\n" + "-" * len(head))
    measure("step", lambda: env.step(actions), timer, args.step_repeats)
    measure(f"reset {100 * args.fraction:g}%", lambda: env.reset(options={"reset_mask": mask}), timer, args.repeats)
    measure(f"core reset {100 * args.fraction:g}%", core_reset, timer, args.repeats)
    measure(f"draws {100 * args.fraction:g}%", lambda: draws(core, ids.numpy()), timer, args.repeats)
    vmf = {"kappa": 20.0}
    measure(f"draws {100 * args.fraction:g}% vMF", lambda: draws(core, ids.numpy(), vmf), timer, args.repeats)
    measure("draws 100%", lambda: draws(core, np.arange(n)), timer, args.repeats)
    env.close()


def draws(core: object, ids: np.ndarray, options: dict | None = None) -> object:
    """Clip, start frame, task and skill of the next episodes of worlds ``ids`` (not applied)."""
    if "ids" in inspect.signature(core._draw).parameters:  # the batched version
        return core._draw(ids, options or {})
    core._clip_probs = None  # the older per-world version
    return [core._draw(i, options or {}) for i in ids.tolist()]


if __name__ == "__main__":
    main()
