"""Seconds per PPO update of the demo's size in float32 and with ``ppo.bf16`` (issue 20), on one thread.

A rollout of 128 worlds x 32 steps (random observations; the update's cost does not
depend on their values), the demo's [256, 256] actor and critic, 4 epochs x 2
minibatches of 2048. Prints the mean of ``--repeats`` updates after one warm-up,
alternating the two so that other jobs on the machine affect both alike.

    python benchmarks/ppo_update_bf16.py --repeats 3
"""

from __future__ import annotations

import argparse
import time

import torch

from rgsd_agents.config import NetworkConfig, PPOConfig
from rgsd_agents.networks import ActorCritic
from rgsd_agents.ppo import PPO
from rgsd_agents.storage import RolloutStorage
from rgsd_envs.envs.observations import POLICY_OBS_DIM

ACT_DIM, WORLDS, HORIZON = 69, 128, 32


def demo_sized() -> tuple[ActorCritic, RolloutStorage]:
    """The demo preset's networks and one rollout of random data."""
    torch.manual_seed(0)
    ac = ActorCritic(POLICY_OBS_DIM, ACT_DIM, NetworkConfig(actor_hidden=(256, 256), critic_hidden=(256, 256)))
    st = RolloutStorage(HORIZON, WORLDS, POLICY_OBS_DIM, ACT_DIM, 1, 1)
    g = torch.Generator().manual_seed(0)
    z = torch.zeros(WORLDS, 1)
    for _ in range(HORIZON):
        obs = torch.randn(WORLDS, POLICY_OBS_DIM, generator=g)
        a, lp, v = ac.act(obs, g)
        st.add(obs, a, lp, v, torch.randn(WORLDS, generator=g), torch.ones(WORLDS), torch.ones(WORLDS), z, z, z)
    st.compute_returns(torch.zeros(WORLDS), 0.99, 0.95)
    return ac, st


def main(argv: list[str] | None = None) -> int:
    """Time the two precisions."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.repeats):
        for bf16 in (False, True):
            ac, st = demo_sized()
            ppo = PPO(ac, PPOConfig(actor_lr=3e-5, critic_lr=3e-4, epochs=4, minibatch_size=2048, bf16=bf16))
            ppo.update(st, torch.Generator().manual_seed(0))  # warm-up
            t = time.perf_counter()
            ppo.update(st, torch.Generator().manual_seed(0))
            times[bf16].append(time.perf_counter() - t)
    f32, b16 = (sum(times[k]) / len(times[k]) for k in (False, True))
    print(f"float32 {f32:.3f} s, bf16 {b16:.3f} s per update ({f32 / b16:.2f}x), {args.threads} thread(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
