"""Environment steps per second against the raw physics bound, measured side by side.

For N in {1, 16, 64} worlds and 1 and 2 simulation threads this prints:

- ``env``: steps/s of the native vector env (``RGSDVectorEnv``: PD targets,
  physics, observations, terminations, resets, info), actions ~ N(0, 0.1) as an
  early policy would send;
- ``env+reward``: the same with the encoder-reward wrapper (default encoder);
- ``raw``: the physics bound for the same work: the same ``mj_step`` calls on the
  same states, timed inside MuJoCo's batch calls during the env run (no Python);
- ``ratio`` = env / raw, and the 2-thread speed-up of the env;
- ``floor``: the same ratio for the least an env with rgsd's observation does per step: the physics, the state
  read and the 359-D frame features (``frame_features``), with no episode logic, reward, resets or info. It bounds
  what any rework of the rest of the step can reach while the features stay torch code on one thread;
- ``rollout``: for reference, the physics of the same number of steps in one C
  call (``Batch.rollout``) holding the last targets from the env's final states
  (other states: other contacts, so a different amount of work).

Targets: at N=64 with 2 threads, ratio >= 0.85 and 2-thread speed-up >= 1.8x.
Run: ``python benchmarks/env_throughput.py [--steps 300] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
import torch

from rgsd_envs.envs.observations import frame_features
from rgsd_envs.envs.registration import make_vec_env


def _actions(num_envs: int, steps: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.normal(0.0, 0.1, (num_envs, 69)).astype(np.float32) for _ in range(steps)]


def env_rate(num_envs: int, threads: int, steps: int, reward: bool) -> tuple[float, float, object]:
    """Env steps/s and physics-only steps/s of the same run (world-steps) over ``steps`` calls of ``step``."""
    env = make_vec_env(num_envs, encoder_reward=reward, num_threads=threads)
    actions = _actions(num_envs, steps)
    env.reset(seed=0)
    for a in actions[:10]:
        env.step(a)
    backend = env.unwrapped.core.backend
    backend.physics_seconds = 0.0
    start = time.perf_counter()
    for a in actions:
        env.step(a)
    elapsed = time.perf_counter() - start
    return num_envs * steps / elapsed, num_envs * steps / backend.physics_seconds, env


def floor_ratio(env, steps: int) -> float:
    """Physics share of a loop doing only physics, state read and frame features (no episode logic)."""
    core = env.unwrapped.core
    backend = core.backend
    targets = [core.targets(torch.from_numpy(a)) for a in _actions(core.num_envs, steps)]
    phase = torch.zeros(core.num_envs)
    backend.physics_seconds = 0.0
    start = time.perf_counter()
    for t in targets:
        backend.step(t)
        s = backend.state()
        frame_features(phase, s.body_pos, s.body_rot, s.body_lin_vel, s.body_ang_vel)
    return backend.physics_seconds / (time.perf_counter() - start)


def raw_rate(env, steps: int) -> float:
    """World-steps/s of the bare physics: the same mj_step count in one C call."""
    backend = env.unwrapped.core.backend
    batch, n = backend.batch, backend.num_envs
    nstep = steps * backend.substeps
    ctrl = np.repeat(backend._ctrl.numpy()[:, None, :], nstep, axis=1)  # hold the current targets
    start = time.perf_counter()
    batch.rollout(nstep, control=ctrl, record=("qpos",))
    return n * steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="env steps per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per setting (median)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 16, 64])
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, steps {args.steps}, median of {args.repeats}")
    head = f"{'N':>4} {'thr':>3} | {'env':>9} {'env+reward':>11} {'raw':>9} | {'ratio':>5} {'ratio+rw':>8} {'floor':>5} | {'rollout':>9}"
    print(head + "\n" + "-" * len(head))
    rates: dict[tuple[int, int], float] = {}
    for n in args.sizes:
        for threads in (1, 2):
            env_r, rew_r, raw_r, raw_rw, roll_r, floor_r = [], [], [], [], [], []
            for _ in range(args.repeats):
                r, p, env = env_rate(n, threads, args.steps, reward=False)
                env_r.append(r)
                raw_r.append(p)
                roll_r.append(raw_rate(env, args.steps))
                floor_r.append(floor_ratio(env, args.steps))
                env.close()
                r, p, env = env_rate(n, threads, args.steps, reward=True)
                rew_r.append(r)
                raw_rw.append(p)
                env.close()
            e, w, p, pw, ro, fl = (np.median(x) for x in (env_r, rew_r, raw_r, raw_rw, roll_r, floor_r))
            rates[(n, threads)] = e
            print(
                f"{n:>4} {threads:>3} | {e:>9.0f} {w:>11.0f} {p:>9.0f} | {e / p:>5.2f} {w / pw:>8.2f} {fl:>5.2f} | {ro:>9.0f}",
                flush=True,
            )
    print("\n2-thread speed-up of env steps/s:")
    for n in args.sizes:
        print(f"  N={n:>3}: {rates[(n, 2)] / rates[(n, 1)]:.2f}x")


if __name__ == "__main__":
    main()
