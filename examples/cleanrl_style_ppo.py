"""CleanRL-style PPO on RGSD-SMPL-v0, in one readable file.

The whole algorithm top to bottom, as in CleanRL's ``ppo_continuous_action.py``,
with one change that matters here: episodes end by *truncation* at the clip's
last frame, so the value of the final observation (``info["final_obs"]``,
SameStep autoreset) is bootstrapped for truncated episodes and not for
terminated ones. Skill sampling and the encoder reward live in the environment,
so this loop needs nothing rgsd-specific beyond ``gym.make_vec``.

    python examples/cleanrl_style_ppo.py --num-envs 16 --total-steps 200000

For the method itself (discovery encoder updates, presets, checkpoints) use
``rgsd train``.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import itertools
import time
from dataclasses import dataclass, fields

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.utils.tensorboard import SummaryWriter

import rgsd_envs  # noqa: F401  (registers RGSD-SMPL-v0)


@dataclass
class Args:
    num_envs: int = 16
    """parallel worlds in the native vector env"""
    total_steps: int = 200_000
    """environment steps (over all worlds)"""
    num_steps: int = 32
    """rollout horizon per world"""
    lr: float = 3e-4
    """Adam learning rate"""
    gamma: float = 0.99
    """discount factor"""
    gae_lambda: float = 0.95
    """GAE lambda"""
    epochs: int = 5
    """passes over each rollout"""
    minibatches: int = 4
    """minibatches per pass"""
    clip: float = 0.2
    """PPO's ratio clip"""
    ent_coef: float = 0.0
    """entropy bonus weight"""
    vf_coef: float = 1.0
    """value loss weight"""
    max_grad_norm: float = 1.0
    """gradient norm clip"""
    init_log_std: float = -1.0
    """initial log standard deviation of the Gaussian policy"""
    hidden: int = 256
    """width of the two hidden layers of actor and critic"""
    seed: int = 0
    """torch and environment seed"""
    motions: str = "demo"
    """reference clips: "demo", a clip file or a folder"""
    logdir: str | None = None
    """TensorBoard folder (None: no logging)"""


def layer(i: int, o: int, std: float = np.sqrt(2)) -> nn.Linear:
    lin = nn.Linear(i, o)
    nn.init.orthogonal_(lin.weight, std)
    nn.init.zeros_(lin.bias)
    return lin


class Agent(nn.Module):
    def __init__(self, obs_dim: int, act_dim: int, hidden: int, init_log_std: float):
        super().__init__()
        self.critic = nn.Sequential(
            layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden), nn.Tanh(), layer(hidden, 1, 1.0)
        )
        self.actor = nn.Sequential(
            layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden), nn.Tanh(), layer(hidden, act_dim, 0.01)
        )
        self.log_std = nn.Parameter(torch.full((act_dim,), init_log_std))

    def value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x).squeeze(-1)

    def act(self, x: torch.Tensor, action: torch.Tensor | None = None):
        dist = torch.distributions.Normal(self.actor(x), self.log_std.exp())
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action).sum(-1), dist.entropy().sum(-1), self.value(x)


def bootstrap_truncated(reward: torch.Tensor, term, trunc, info: dict, value, gamma: float) -> torch.Tensor:
    """r + gamma V(final_obs) for episodes cut off by truncation, as a new tensor (``reward``, the env's, is kept for
    logging); a terminated episode (termination wins when a world reports both) has no future to bootstrap."""
    idx = np.flatnonzero(trunc & ~term)
    reward = reward.clone()
    if idx.size:
        final = torch.as_tensor(np.stack([info["final_obs"][i] for i in idx]))
        with torch.no_grad():
            reward[idx] += gamma * value(final)
    return reward


def train(args: Args) -> dict[str, float]:
    """Run PPO and return the last iteration's statistics."""
    torch.manual_seed(args.seed)
    envs = gym.make_vec("RGSD-SMPL-v0", num_envs=args.num_envs, motions=args.motions)
    obs_dim, act_dim = envs.single_observation_space.shape[0], envs.single_action_space.shape[0]
    agent = Agent(obs_dim, act_dim, args.hidden, args.init_log_std)
    opt = torch.optim.Adam(agent.parameters(), lr=args.lr, eps=1e-5)
    writer = SummaryWriter(args.logdir) if args.logdir else None
    n, t = args.num_envs, args.num_steps
    obs_buf = torch.zeros(t, n, obs_dim)
    act_buf = torch.zeros(t, n, act_dim)
    logp_buf, rew_buf, done_buf, val_buf = (torch.zeros(t, n) for _ in range(4))
    next_obs = torch.as_tensor(envs.reset(seed=args.seed)[0])
    iterations = max(1, args.total_steps // (n * t))
    stats: dict[str, float] = {}
    start = time.time()
    for it in range(iterations):
        ep_rewards = []
        for step in range(t):
            obs_buf[step] = next_obs
            with torch.no_grad():
                action, logp, _, value = agent.act(next_obs)
            obs, reward, term, trunc, info = envs.step(action.numpy().clip(-1, 1))
            ep_rewards.append(float(np.mean(reward)))  # the env's reward, before the value bootstrap below
            reward = torch.as_tensor(reward, dtype=torch.float32)
            target = bootstrap_truncated(reward, term, trunc, info, agent.value, args.gamma)
            act_buf[step], logp_buf[step], val_buf[step] = action, logp, value
            rew_buf[step], done_buf[step] = target, torch.as_tensor(term | trunc, dtype=torch.float32)
            next_obs = torch.as_tensor(obs)
        with torch.no_grad():
            next_value = agent.value(next_obs)
            adv = torch.zeros(t, n)
            last = torch.zeros(n)
            for step in reversed(range(t)):
                nv = next_value if step == t - 1 else val_buf[step + 1]
                nonterminal = 1.0 - done_buf[step]
                delta = rew_buf[step] + args.gamma * nv * nonterminal - val_buf[step]
                last = delta + args.gamma * args.gae_lambda * nonterminal * last
                adv[step] = last
            returns = adv + val_buf
        b_obs, b_act = obs_buf.reshape(-1, obs_dim), act_buf.reshape(-1, act_dim)
        b_logp, b_adv, b_ret = logp_buf.flatten(), adv.flatten(), returns.flatten()
        mb = b_obs.shape[0] // args.minibatches
        for _ in range(args.epochs):
            for idx in torch.randperm(b_obs.shape[0]).split(mb):
                _, logp, ent, value = agent.act(b_obs[idx], b_act[idx])
                ratio = (logp - b_logp[idx]).exp()
                a = b_adv[idx]
                a = (a - a.mean()) / (a.std() + 1e-8)
                pg = torch.max(-a * ratio, -a * ratio.clamp(1 - args.clip, 1 + args.clip)).mean()
                v_loss = 0.5 * (value - b_ret[idx]).square().mean()
                loss = pg + args.vf_coef * v_loss - args.ent_coef * ent.mean()
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                opt.step()
        sps = (it + 1) * n * t / (time.time() - start)
        stats = {
            "reward": float(np.mean(ep_rewards)),
            "value_loss": v_loss.item(),
            "policy_loss": pg.item(),
            "sps": sps,
        }
        if writer:
            writer.add_scalar("charts/reward", stats["reward"], (it + 1) * n * t)
            writer.add_scalar("charts/SPS", sps, (it + 1) * n * t)
            writer.add_scalar("losses/value_loss", stats["value_loss"], (it + 1) * n * t)
            writer.add_scalar("losses/policy_loss", stats["policy_loss"], (it + 1) * n * t)
        print(
            f"iter {it + 1}/{iterations} reward {stats['reward']:.2f} value_loss {stats['value_loss']:.2f} SPS {sps:.0f}"
        )
    envs.close()
    if writer:
        writer.close()
    return stats


def field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring (the string under it in the class body; Python keeps none at run time)."""
    body = ast.parse(inspect.getsource(cls)).body[0].body
    return {
        a.target.id: b.value.value
        for a, b in itertools.pairwise(body)
        if isinstance(a, ast.AnnAssign) and isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant)
    }


def make_parser() -> argparse.ArgumentParser:
    """One flag per ``Args`` field, its docstring as the help."""
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    docs = field_docs(Args)
    for f in fields(Args):
        parser.add_argument(
            f"--{f.name.replace('_', '-')}",
            type=type(f.default) if f.default is not None else str,
            default=f.default,
            help=docs[f.name],
        )
    return parser


def main() -> None:
    train(Args(**vars(make_parser().parse_args())))


if __name__ == "__main__":
    main()
