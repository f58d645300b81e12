"""Seconds per update of the demo's size: PPO in float32 or bf16, 4 x 2048 or 2 x 4096, and the
discovery encoder's update, on one thread.

A rollout of 128 worlds x 32 steps (random data; the updates' cost does not depend
on the values), the demo's [256, 256] actor and critic and [256, 256] encoder.
Prints the mean of ``--repeats`` updates after one warm-up per variant, the
variants interleaved so that other jobs on the machine affect all alike.

    python benchmarks/update_cost.py --repeats 3
"""

from __future__ import annotations

import argparse
import time

import torch

from rgsd_agents.config import NetworkConfig, PPOConfig
from rgsd_agents.methods.discovery import DiscoveryConfig, DiscoveryTrainer
from rgsd_agents.rl.networks import ActorCritic
from rgsd_agents.rl.ppo import PPO
from rgsd_agents.rl.storage import RolloutStorage
from rgsd_envs.envs.observations import ENCODER_INPUT_DIM, POLICY_OBS_DIM, SKILL_DIM
from rgsd_envs.rewards.encoders import MLPEncoder

ACT_DIM, WORLDS, HORIZON = 69, 128, 32


def demo_sized() -> tuple[ActorCritic, RolloutStorage]:
    """The demo preset's networks and one rollout of random data."""
    torch.manual_seed(0)
    ac = ActorCritic(POLICY_OBS_DIM, ACT_DIM, NetworkConfig(actor_hidden=(256, 256), critic_hidden=(256, 256)))
    st = RolloutStorage(HORIZON, WORLDS, POLICY_OBS_DIM, ACT_DIM, SKILL_DIM, ENCODER_INPUT_DIM)
    g = torch.Generator().manual_seed(0)
    for _ in range(HORIZON):
        obs = torch.randn(WORLDS, POLICY_OBS_DIM, generator=g)
        a, lp, v = ac.act(obs, g)
        x = torch.randn(WORLDS, ENCODER_INPUT_DIM, generator=g)
        skill = torch.nn.functional.normalize(torch.randn(WORLDS, SKILL_DIM, generator=g), dim=-1)
        task = (torch.rand(WORLDS, generator=g) < 0.7).float()
        st.add(obs, a, lp, v, torch.randn(WORLDS, generator=g), torch.zeros(WORLDS), task, skill, x, x)
    st.compute_returns(torch.zeros(WORLDS), 0.99, 0.95)
    return ac, st


VARIANTS = {
    "ppo float32 4 x 2048": dict(epochs=4, minibatch_size=2048, bf16=False),
    "ppo bf16    4 x 2048": dict(epochs=4, minibatch_size=2048, bf16=True),
    "ppo float32 2 x 4096": dict(epochs=2, minibatch_size=4096, bf16=False),
    "ppo bf16    2 x 4096": dict(epochs=2, minibatch_size=4096, bf16=True),
}


def time_update(name: str) -> float:
    """Seconds of one update of variant ``name`` (or "discovery"), after a warm-up."""
    ac, st = demo_sized()
    if name == "discovery":
        enc, frozen = MLPEncoder((256, 256)), MLPEncoder((256, 256))
        step = DiscoveryTrainer(enc, frozen, 10.0, DiscoveryConfig(minibatch_size=4096)).update
    else:
        step = PPO(ac, PPOConfig(actor_lr=3e-5, critic_lr=3e-4, **VARIANTS[name])).update
    step(st, torch.Generator().manual_seed(0))
    t = time.perf_counter()
    step(st, torch.Generator().manual_seed(0))
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    """Time every variant."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    names = [*VARIANTS, "discovery"]
    times: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(args.repeats):
        for n in names:
            times[n].append(time_update(n))
    base = sum(times[names[0]]) / args.repeats
    for n in names:
        mean = sum(times[n]) / args.repeats
        print(
            f"{n:<22} {mean:.3f} s per update (ppo float32 4 x 2048 takes {base / mean:.2f}x this), {args.threads} thread(s)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
