"""Samples per second of the full RGSD training loop against the env alone and stable-baselines3 PPO.

Measured in one process, one after the other, with the ``cpu`` preset (or ``--config``):

- ``ours``: ``rgsd_agents.training.runner.Runner`` iterations (rollout with the policy,
  GAE, PPO update, discovery-encoder update), after one warm-up iteration, with
  the time share of simulation (env.step: physics, observations, encoder reward),
  policy inference (plus the loop's bookkeeping) and the updates;
- ``env only``: the same vector env (same N, same encoder reward) stepped with
  random actions N(0, 0.1), no learning;
- ``sb3``: stable-baselines3 PPO on ``rgsd_envs.compat.sb3.make_sb3_vec_env``
  with the same networks (tanh MLPs, same sizes, state-independent log std),
  n_steps = horizon, the same minibatch size and epochs (SB3 trains no discovery
  encoder and does not normalise observations, so it does less work per sample);
  and, for reference, the same with SB3's own defaults for the minibatch size
  (64) and epochs (10), which is what SB3 users get out of the box.

It also prints the loop's ceilings on this machine: the cores the loop keeps busy on average
(process CPU time over wall time: if every core were busy all the time the loop could be at most
cores / busy times faster) and the MuJoCo stepping's share (if nothing but the physics cost anything:
1 / share), with the samples 15 minutes hold.

Targets: ours / env-only >= 0.5 and ours / sb3 >= 3.
The encoder is a randomly initialised MLP of the preset's size (its cost, not
its weights, matters here). Run: ``python benchmarks/train_throughput.py``
(about 2-3 minutes on 2 cores); the numbers depend on the load of the machine.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
import torch

from rgsd_agents.config import TrainConfig, load_config
from rgsd_agents.pretraining.encoder import build_encoder
from rgsd_agents.pretraining.reference import load_reference
from rgsd_agents.training.runner import Runner


def make_encoder(cfg: TrainConfig, folder: Path) -> str:
    """A random encoder of the preset's size, standardised on the references."""
    _, inputs = load_reference(cfg.pretrain_config())
    path = folder / "encoder.pt"
    build_encoder(cfg.pretrain_config(), inputs).save(path)
    return str(path)


MUJOCO_SHARE = "  of which MuJoCo stepping"
"""The row of ``ours``'s shares that holds MuJoCo's stepping alone (part of ``env.step``'s share)."""


def ours(cfg: TrainConfig, folder: Path, iterations: int) -> tuple[float, dict[str, float], float, Runner]:
    """Samples/s of the full loop, the time shares of its parts and the CPU cores it kept busy on average
    (the process's CPU time over the wall time)."""
    runner = Runner(cfg, folder / "run", progress=False)
    runner.iterate()  # warm-up: first-touch allocations, thread pools
    backend = runner.env.core.backend
    backend.physics_seconds = 0.0
    cpu_start = time.process_time()
    metrics = [runner.iterate() for _ in range(iterations)]
    cpu = time.process_time() - cpu_start
    total = sum(m["perf/iteration_seconds"] for m in metrics)
    shares = {
        "simulation (env.step)": sum(m["perf/env_seconds"] for m in metrics) / total,
        MUJOCO_SHARE: backend.physics_seconds / total,
        "policy inference + bookkeeping": sum(m["perf/policy_seconds"] for m in metrics) / total,
        "PPO update": sum(m["perf/update_seconds"] for m in metrics) / total,
        "discovery-encoder update": sum(m["perf/method_seconds"] for m in metrics) / total,
    }
    return cfg.batch_size * iterations / total, shares, cpu / total, runner


def print_ceilings(rate: float, physics_share: float, cores_used: float) -> None:
    """What the loop could reach on this machine at best: every core busy, or nothing but the physics."""
    cores = os.cpu_count() or 1
    print(f"cores kept busy    {cores_used:8.2f} of {cores}")
    print(
        f"ceilings           every core busy all the time: {cores / cores_used:.2f}x; "
        f"everything but MuJoCo free: {1.0 / physics_share:.2f}x"
    )
    held = rate * 900 / 1e6  # M samples in 15 minutes
    print(f"15 minutes hold    {held:8.2f} M samples (at the first ceiling {held * cores / cores_used:.2f} M)")


def env_only(runner: Runner, steps: int) -> float:
    """Samples/s of the same vector env under random actions N(0, 0.1)."""
    env, n = runner.env, runner.cfg.num_envs
    rng = np.random.default_rng(0)
    actions = [rng.normal(0.0, 0.1, (n, 69)).astype(np.float32) for _ in range(steps)]
    env.reset(seed=1)
    for a in actions[:5]:
        env.step(a)
    start = time.perf_counter()
    for a in actions:
        env.step(a)
    return n * steps / (time.perf_counter() - start)


def sb3(
    cfg: TrainConfig, encoder: str, iterations: int, batch_size: int | None = None, epochs: int | None = None
) -> float:
    """Samples/s of stable-baselines3 PPO: our settings, or SB3's minibatch size and epochs when given."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import Logger

    from rgsd_envs.compat.sb3 import make_sb3_vec_env

    venv = make_sb3_vec_env(cfg.num_envs, config=cfg.env, encoder=encoder)
    policy_kwargs = {
        "net_arch": {"pi": list(cfg.networks.actor_hidden), "vf": list(cfg.networks.critic_hidden)},
        "activation_fn": torch.nn.Tanh,
        "log_std_init": cfg.networks.init_log_std,
    }
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=cfg.horizon,
        batch_size=batch_size or cfg.ppo.minibatch_size,
        n_epochs=epochs or cfg.ppo.epochs,
        learning_rate=cfg.ppo.actor_lr,
        gamma=cfg.ppo.gamma,
        gae_lambda=cfg.ppo.gae_lambda,
        clip_range=cfg.ppo.clip,
        ent_coef=cfg.ppo.entropy_coef,
        max_grad_norm=cfg.ppo.max_grad_norm,
        policy_kwargs=policy_kwargs,
        device="cpu",
        seed=cfg.seed,
        verbose=0,
    )
    model.set_logger(Logger(None, []))  # SB3's default logger makes a folder in the temp dir per learn()
    model.learn(cfg.batch_size)  # warm-up iteration
    start = time.perf_counter()
    model.learn(cfg.batch_size * iterations, reset_num_timesteps=False)
    rate = cfg.batch_size * iterations / (time.perf_counter() - start)
    venv.close()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="cpu", help="preset or YAML file (default: cpu)")
    parser.add_argument("--iterations", type=int, default=6, help="timed iterations per trainer")
    parser.add_argument("--no-sb3", action="store_true", help="skip the stable-baselines3 measurement")
    args = parser.parse_args()
    cfg = load_config(args.config, {"probe_every": 0})
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cfg.encoder = make_encoder(cfg, folder)
        print(
            f"config {args.config}: N={cfg.num_envs} horizon={cfg.horizon} actor {list(cfg.networks.actor_hidden)} "
            f"critic {list(cfg.networks.critic_hidden)} encoder {list(cfg.pretrain.hidden)} epochs={cfg.ppo.epochs} "
            f"minibatch={cfg.ppo.minibatch_size}; torch threads {torch.get_num_threads()}, {os.cpu_count()} cores, "
            f"load average {os.getloadavg()[0]:.1f}"
        )
        rate, shares, cores_used, runner = ours(cfg, folder, args.iterations)
        env_rate = env_only(runner, cfg.horizon * args.iterations)
        runner.close()
        print(f"ours (full loop)   {rate:8.0f} samples/s")
        print(f"env only           {env_rate:8.0f} samples/s   ours / env = {rate / env_rate:.2f}  (target >= 0.5)")
        for name, share in shares.items():
            print(f"  {name:<32s} {100 * share:5.1f} % of the loop")
        print_ceilings(rate, shares[MUJOCO_SHARE], cores_used)
        if not args.no_sb3:
            sb3_rate = sb3(cfg, cfg.encoder, args.iterations)
            print(
                f"sb3 PPO, our settings      {sb3_rate:8.0f} samples/s   ours / sb3 = {rate / sb3_rate:.2f}  (target >= 3)"
            )
            default_rate = sb3(cfg, cfg.encoder, 2, batch_size=64, epochs=10)
            print(
                f"sb3 PPO, SB3's minibatch 64 and 10 epochs {default_rate:8.0f} samples/s   "
                f"ours / sb3 = {rate / default_rate:.2f}"
            )
        print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
