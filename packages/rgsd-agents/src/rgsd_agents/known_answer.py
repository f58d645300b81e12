"""Train any method on the toy envs (``rgsd_envs.envs.toy``) with the runners' own pieces, and measure what it
learned against an answer known in advance (docs/methods.md, "Known-answer tests").

``OnPolicyToyTrainer`` is the PPO runner's iteration (``rgsd_agents.training.runner.Runner.iterate``) without its
run folder: the method built by name through ``build_method`` on the env's ``ReferenceData``, ``SkillChoosingEnv``,
``collect_rollout`` with the method's ``relabel``, ``PPO.update`` with the method's minibatch hooks, then
``method.update``. ``FBToyTrainer`` is the off-policy runner's iteration (``OffPolicyRunner.collect`` and
``iterate``) around ``FBCPRAgent``. The measures below are the properties each method's paper claims; the tests
in ``packages/rgsd-agents/tests/methods/test_known_answers.py`` assert them, and fail on a planted bug
(``PLANTED_BUGS``, switched on with ``RGSD_PLANT_BUG=<name>``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from rgsd_agents.config import PPOConfig
from rgsd_agents.methods import build_method, method_class
from rgsd_agents.methods.base import MethodContext, SkillMethod
from rgsd_agents.methods.common import ReferenceData, unit_sphere
from rgsd_agents.methods.env import SkillChoosingEnv
from rgsd_agents.pretraining.loss import info_nce_loss
from rgsd_agents.rl.networks import ActorCritic, NetworkConfig
from rgsd_agents.rl.ppo import PPO
from rgsd_agents.rl.replay import ReplayBuffer
from rgsd_agents.rl.rollout import collect_rollout
from rgsd_agents.rl.storage import RolloutStorage
from rgsd_envs.envs.observations import SKILL_DIM
from rgsd_envs.envs.toy import GRID_MOVES, GRID_SIZE, GridWorldEnv, ToyEnv, grid_index, grid_move, grid_transition
from rgsd_envs.rewards.encoders import MLPEncoder

Tensor = torch.Tensor
CPU = torch.device("cpu")


# -- RGSD's pretrained encoder on a toy env ------------------------------------------------
def pretrain_toy_encoder(
    env: ToyEnv, steps: int = 300, hidden: tuple[int, ...] = (64, 64), seed: int = 0
) -> MLPEncoder:
    """An MLP encoder pretrained with rgsd's InfoNCE loss on the env's reference frames (positives: frames of the
    same clip up to 5 apart), as ``rgsd pretrain`` trains the humanoid's."""
    core = env.core
    inputs, clip_of_frame, starts, num_frames = (
        core.ref_inputs,
        core.lib.clip_of_frame,
        core.lib.starts,
        core.lib.num_frames,
    )
    g = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        encoder = MLPEncoder(hidden, inputs.shape[1])
    encoder.set_input_stats(inputs.mean(0), inputs.std(0))
    opt = torch.optim.Adam(encoder.parameters(), lr=1e-3)
    for _ in range(steps):
        anchor = torch.randint(inputs.shape[0], (128,), generator=g)
        clip = clip_of_frame[anchor]
        near = (anchor + torch.randint(-5, 6, (128,), generator=g)).clamp(
            starts[clip], starts[clip] + num_frames[clip] - 1
        )
        loss = info_nce_loss(encoder(inputs[anchor]), encoder(inputs[near]), clip, encoder.kappa, symmetric=True)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return encoder.eval()


# -- the on-policy runner's iteration ---------------------------------------------------
@dataclass
class ToyPPOSettings:
    """PPO and networks on a toy env: small, fast, the same update rule as the humanoid's."""

    num_envs: int = 64
    horizon: int = 32
    hidden: tuple[int, ...] = (64, 64)
    actor_lr: float = 1e-3
    critic_lr: float = 1e-3
    epochs: int = 4
    minibatch_size: int = 512
    gamma: float = 0.95
    init_log_std: float = -1.0
    entropy_coef: float = 0.0


class OnPolicyToyTrainer:
    """A method on the PPO runner's pieces over a toy env (module docstring)."""

    def __init__(self, name: str, env: ToyEnv, options: dict[str, Any], settings: ToyPPOSettings, seed: int = 0):
        cls = method_class(name)
        if not cls.IMITATION:
            env.core.p_imitation = 0.0  # as the runner sets env.p_imitation
        self.settings = s = settings
        ctx = MethodContext(ReferenceData.from_core(env.core, CPU), env.num_envs, CPU, seed, env=env)
        self.method: SkillMethod = build_method(name, options, ctx)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            net = NetworkConfig(
                actor_hidden=s.hidden,
                critic_hidden=s.hidden,
                activation="tanh",
                init_log_std=s.init_log_std,
                learn_std=False,
                init_mean_action="zero",
            )
            self.ac = ActorCritic(env.obs_dim, env.act_dim, net)
        ppo = PPOConfig(
            actor_lr=s.actor_lr,
            critic_lr=s.critic_lr,
            gamma=s.gamma,
            gae_lambda=0.95,
            clip=0.2,
            epochs=s.epochs,
            minibatch_size=s.minibatch_size,
            entropy_coef=s.entropy_coef,
        )
        self.ppo = PPO(self.ac, ppo)
        lay = env.layout
        self.storage = RolloutStorage(
            s.horizon, env.num_envs, env.obs_dim, env.act_dim, lay.skill_dim, lay.encoder_input_dim
        )
        self.sample_gen = torch.Generator().manual_seed(seed)
        self.minibatch_gen = torch.Generator().manual_seed(seed + 1)
        self.env = SkillChoosingEnv(env, self.method)
        self.obs, _ = self.env.reset(seed=seed)
        self.ac.obs_normalizer.update(self.obs)
        self.method_stats: dict[str, Tensor] = {}

    def iterate(self) -> dict[str, Tensor]:
        """One rollout, PPO with the method's hooks, the method's update (``Runner.iterate``)."""

        def after_step(t: int, reward: Tensor, term: Tensor, trunc: Tensor, ex: Any) -> dict[str, Tensor]:
            return {
                "tasks": ex.task,
                "skills": ex.skills,
                "encoder_inputs": ex.encoder_inputs,
                "next_encoder_inputs": ex.next_encoder_inputs,
            }

        def relabel(storage: RolloutStorage) -> None:
            self.method_stats = self.method.relabel(storage)

        s = self.settings
        self.obs, _ = collect_rollout(
            self.env, self.ac, self.storage, self.obs, self.sample_gen, s.gamma, 0.95, after_step, relabel=relabel
        )
        ppo_stats = self.ppo.update(self.storage, self.minibatch_gen, self.method)
        return {**ppo_stats, **self.method_stats, **self.method.update(self.storage, self.minibatch_gen)}

    def train(self, iterations: int) -> None:
        """``iterations`` iterations."""
        for _ in range(iterations):
            self.iterate()

    @torch.no_grad()
    def policy(self, obs: Tensor) -> Tensor:
        """The actor's mean action for raw observations."""
        return self.ac.actor(obs)


# -- evaluation rollouts ------------------------------------------------------------------
@dataclass
class Rollout:
    """Deterministic rollouts from the same start: per step t = 1..T, (T, N, ...)."""

    positions: Tensor
    """(T + 1, N, 2) positions, the start first."""
    features: Tensor
    """(T, N, frame_dim) frames reached."""
    next_encoder_inputs: Tensor
    """(T, N, encoder input) s' of each step (empty without the encoder reward)."""


@torch.no_grad()
def roll_out(
    env: ToyEnv, policy: Callable[[Tensor], Tensor], skills: Tensor, clip: int = 0, steps: int | None = None
) -> Rollout:
    """Mean-action rollouts of every world of ``env`` with its skill row (N, 16), all from frame 0 of ``clip``."""
    steps = int(env.core.lib.num_frames[clip]) - 1 if steps is None else steps
    obs, _ = env.reset(seed=0, options={"clip": clip, "start_frame": 0, "task": 0, "skill": skills})
    positions = [env.positions(env.state).clone()]
    feats, inputs = [], []
    for _ in range(steps):
        obs, _, _, _, ex = env.step(policy(obs))
        feats.append(ex.final_features.clone())
        inputs.append(ex.next_encoder_inputs.clone())
        positions.append(env.feature_positions(ex.final_features))
    return Rollout(torch.stack(positions), torch.stack(feats), torch.stack(inputs))


def unit_skills(n: int, seed: int, dim: int = SKILL_DIM) -> Tensor:
    """(n, dim) uniform unit skills from ``seed`` (``unit_sphere`` on a CPU generator)."""
    return unit_sphere(n, torch.Generator().manual_seed(seed), dim)


def tracking_error(positions: Tensor, reference: Tensor) -> Tensor:
    """(N,) mean distance of positions (T + 1, N, 2) to the reference path (T + 1, 2), frame by frame."""
    return (positions - reference.unsqueeze(1)).norm(dim=-1).mean(0)


def histogram_distance(a: Tensor, b: Tensor, bins: int = 12) -> float:
    """Total-variation distance of the 2-D position histograms of point sets a, b (.., 2) over their joint box:
    0 identical, 1 disjoint."""
    a, b = a.reshape(-1, 2), b.reshape(-1, 2)
    both = torch.cat([a, b])
    lo, hi = both.min(0).values, both.max(0).values + 1e-6

    def hist(x: Tensor) -> Tensor:
        cell = ((x - lo) / (hi - lo) * bins).long().clamp(0, bins - 1)
        h = torch.bincount(cell[:, 0] * bins + cell[:, 1], minlength=bins * bins).float()
        return h / h.sum()

    return float(0.5 * (hist(a) - hist(b)).abs().sum())


def energy_distance(a: Tensor, b: Tensor) -> float:
    """Energy distance 2 E|a - b| - E|a - a'| - E|b - b'| of point sets a (.., D), b (.., D): 0 for equal
    distributions, larger the more they differ (no bins, no discriminator)."""
    a, b = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    return float(2 * torch.cdist(a, b).mean() - torch.cdist(a, a).mean() - torch.cdist(b, b).mean())


def skill_accuracy(encoder: Callable[[Tensor], Tensor], inputs: Tensor, skills: Tensor, skip: int = 5) -> float:
    """Share of states (after ``skip`` steps) whose skill the encoder names: argmax_k mu(s')^T z_k over the K
    skills the rollouts ran (inputs (T, K, D), skills (K, 16)); chance is 1 / K."""
    x = inputs[skip:]
    mu = encoder(x.reshape(-1, x.shape[-1])).reshape(*x.shape[:2], -1)
    guess = (mu @ skills.T).argmax(-1)
    return float((guess == torch.arange(skills.shape[0])).float().mean())


# -- Meta Motivo on the gridworld -------------------------------------------------------------
@dataclass
class ToyFBSettings:
    """The off-policy loop on the gridworld."""

    num_envs: int = 32
    steps_per_iteration: int = 4
    updates_per_iteration: int = 8
    random_steps: int = 2000
    replay_capacity: int = 100_000
    actor_hidden: tuple[int, ...] = (64, 64)
    options: dict[str, Any] = field(default_factory=dict)
    """``FBCPRConfig`` fields."""


class FBToyTrainer:
    """Meta Motivo's agent on the off-policy runner's pieces over the gridworld (module docstring)."""

    def __init__(self, env: GridWorldEnv, settings: ToyFBSettings, seed: int = 0):
        from rgsd_agents.methods import fb_cpr

        self.fb = fb_cpr
        self.env, self.settings = env, settings
        self.cfg = fb_cpr.FBCPRConfig(**settings.options)
        S = env.layout.frame_dim
        self.agent = fb_cpr.FBCPRAgent(self.cfg, env.act_dim, settings.actor_hidden, "relu", CPU, seed, state_dim=S)
        lib = env.core.lib
        self.ref_features = env.core.ref_features
        self.expert = fb_cpr.ExpertWindows(self.ref_features, lib.starts, lib.num_frames, self.cfg.seq_length)
        f32 = torch.float32
        fields = {
            "obs": ((S,), f32),
            "action": ((env.act_dim,), f32),
            "next_obs": ((S,), f32),
            "z": ((self.cfg.z_dim,), f32),
            "terminated": ((), torch.bool),
        }
        self.replay = ReplayBuffer(settings.replay_capacity, fields, CPU)
        self.act_gen = torch.Generator().manual_seed(seed)
        self.update_gen = torch.Generator().manual_seed(seed + 1)
        obs, _ = env.reset(seed=seed)
        self.obs = obs
        self.z = torch.zeros(env.num_envs, self.cfg.z_dim)
        self.episode_steps = torch.zeros(env.num_envs, dtype=torch.long)
        self.global_step = 0

    def collect(self) -> None:
        """``OffPolicyRunner.collect``: steps of all worlds into the replay buffer."""
        agent, env, n, S = self.agent, self.env, self.env.num_envs, self.env.layout.frame_dim
        every, sqrt_d = self.cfg.update_z_every, math.sqrt(self.cfg.z_dim)
        states = []
        for t in range(self.settings.steps_per_iteration):
            s = self.obs[:, :S]
            fresh = agent.rollout_latents(n, self.act_gen)
            self.z = torch.where((self.episode_steps % every == 0).unsqueeze(-1), fresh, self.z)
            env.set_skills(np.arange(n), self.z / sqrt_d)
            if self.global_step + t * n < self.settings.random_steps:
                action = torch.rand(n, env.act_dim, generator=self.act_gen) * 2 - 1
            else:
                action = agent.act(s, self.z, mean=False, generator=self.act_gen)
            next_obs, _, term, _, ex = env.step(action)
            self.replay.add(obs=s, action=action, next_obs=ex.final_features, z=self.z, terminated=term)
            self.episode_steps = torch.where(ex.started, 0, self.episode_steps + 1)
            states.append(s)
            self.obs = next_obs
        agent.observe(torch.cat(states))

    def iterate(self) -> None:
        """``OffPolicyRunner.iterate``: collect, then the gradient steps once the random phase is over."""
        self.collect()
        self.global_step += self.settings.steps_per_iteration * self.env.num_envs
        batch = self.cfg.batch_size
        if self.global_step > self.settings.random_steps and len(self.replay) >= batch:
            for _ in range(self.settings.updates_per_iteration):
                self.agent.update(
                    self.replay.sample(batch, self.update_gen),
                    self.expert.sample(batch, self.update_gen),
                    self.update_gen,
                )

    def train(self, iterations: int) -> None:
        """``iterations`` iterations."""
        for _ in range(iterations):
            self.iterate()

    # -- what FB's paper claims ---------------------------------------------------------------
    def replay_state_distribution(self) -> Tensor:
        """(16,) rho: the replay's distribution of next states (B is trained on them)."""
        nxt = self.replay.data["next_obs"][: len(self.replay)]
        return nxt.mean(0)

    @torch.no_grad()
    def successor_measures(self, z: Tensor, samples: int = 256) -> tuple[Tensor, Tensor]:
        """(learned, analytic), each (K, 16, 16) for latents z (K, d) of norm sqrt(d): the learned
        E_{a ~ pi_z(s)} F(s, a, z)^T B(s') rho(s') and the analytic P_pi (I - gamma P_pi)^-1 of pi_z, the policy
        with the update's clipped noise, whose move probabilities are counted over ``samples`` noise draws."""
        agent, cfg, S = self.agent, self.cfg, GRID_SIZE * GRID_SIZE
        eye = torch.eye(S)
        P = grid_transition()  # (S, moves, S)
        rho = self.replay_state_distribution()
        B = agent.backward_map(agent.normalize(eye))  # (S, d)
        g = torch.Generator().manual_seed(123)
        learned, analytic = [], []
        for zk in z:
            zs = zk.expand(S * samples, -1)
            states = eye.repeat_interleave(samples, 0)
            mean = agent.mean_action(states, zs)
            noise = (torch.randn(mean.shape, generator=g) * cfg.actor_std).clamp(-cfg.stddev_clip, cfg.stddev_clip)
            action = (mean + noise).clamp(-1 + 1e-6, 1 - 1e-6)
            moves = F.one_hot(grid_move(action), len(GRID_MOVES)).float().view(S, samples, -1).mean(1)
            P_pi = torch.einsum("sm,smt->st", moves, P)
            analytic.append(P_pi @ torch.linalg.inv(eye - cfg.discount * P_pi))
            Fs = agent.forward_map(agent.normalize(states), zs, action).mean(0)  # (S * samples, d)
            learned.append(((Fs @ B.T) * rho).view(S, samples, S).mean(1))
        return torch.stack(learned), torch.stack(analytic)

    @torch.no_grad()
    def reward_latent(self, reward: Tensor) -> Tensor:
        """Zero-shot reward inference: z = project(E_rho[r(s') B(s')]) over the replay's next states."""
        nxt = self.replay.data["next_obs"][: len(self.replay)]
        B = self.agent.backward_map(self.agent.normalize(nxt))
        r = nxt @ reward
        return self.fb.project_z((r.unsqueeze(-1) * B).mean(0))

    @torch.no_grad()
    def tracking_latents(self, clip: int) -> Tensor:
        """Meta Motivo's tracking inference (``fb_cpr.tracking_inference``, the method's own) over a clip: (T, d),
        the last frame, which has no next state, keeping the latent before it."""
        lib = self.env.core.lib
        first, count = int(lib.starts[clip]), int(lib.num_frames[clip])
        B_next = self.agent.backward_map(self.agent.normalize(self.ref_features[first + 1 : first + count]))
        z = self.fb.tracking_inference(B_next, self.cfg.seq_length)
        return torch.cat([z, z[-1:]])


def grid_cells(index: Tensor) -> Tensor:
    """(B, 2) cells of state indices (B,)."""
    return torch.stack([index % GRID_SIZE, index // GRID_SIZE], -1).float()


@torch.no_grad()
def greedy_return(trainer: FBToyTrainer, z: Tensor, reward: Tensor, starts: Tensor, steps: int) -> Tensor:
    """(B,) discounted return sum_t gamma^t r(s_{t+1}) of pi_z's mean action from each start state index."""
    agent, gamma = trainer.agent, trainer.cfg.discount
    cells = grid_cells(starts)
    total = torch.zeros(starts.shape[0])
    for t in range(steps):
        s = F.one_hot(grid_index(cells), GRID_SIZE * GRID_SIZE).float()
        cells = grid_step_cells(cells, agent.mean_action(s, z.expand(s.shape[0], -1)))
        total += gamma**t * reward[grid_index(cells)]
    return total


def grid_step_cells(cells: Tensor, actions: Tensor) -> Tensor:
    """Cells after actions (the gridworld's dynamics)."""
    from rgsd_envs.envs.toy import grid_step

    return grid_step(cells, grid_move(actions))


def optimal_return(reward: Tensor, starts: Tensor, gamma: float, steps: int) -> Tensor:
    """(B,) the best finite-horizon discounted return from each start (value iteration on the grid)."""
    P = grid_transition()
    v = torch.zeros(P.shape[0])
    for _ in range(steps):
        v = (P @ (reward + gamma * v)).amax(-1)
    return v[starts]


# -- planted bugs -----------------------------------------------------------------------------
PLANTED_BUGS: dict[str, str] = {
    "rgsd": "the encoder reward's cosine term with its sign flipped, C - kappa mu(s')^T z (EncoderRewardCore)",
    "diayn": "the discovery encoder's loss with its sign flipped (discovery.discovery_loss)",
    "metra": "phi's objective with its sign flipped (metra.metra_losses)",
    "ase": "the discriminator reward with its sign flipped (ase.discriminator_reward)",
    "calm": "the discriminator reward with its sign flipped (calm.discriminator_reward)",
    "fb_cpr": "the FB loss's diagonal term with its sign flipped (fb_cpr.fb_td_loss)",
}
"""The bug planted in each method by ``planted_bug`` (``RGSD_PLANT_BUG=<name>``): its known-answer test must fail."""


@contextmanager
def planted_bug(name: str | None) -> Iterator[None]:
    """Within the block, method ``name``'s reward or loss carries its ``PLANTED_BUGS`` bug (None: no bug)."""
    if name is None:
        yield
        return
    from rgsd_agents.methods import ase, calm, discovery, fb_cpr, metra

    patches: list[tuple[Any, str, Any]] = []
    if name == "rgsd":
        from rgsd_envs.rewards.encoder_reward import EncoderRewardCore

        orig_t = EncoderRewardCore.transition

        def flipped_reward(self: EncoderRewardCore, *args: Any, **kwargs: Any) -> Tensor:
            return 2 * self.constant - orig_t(self, *args, **kwargs)

        patches.append((EncoderRewardCore, "transition", flipped_reward))
    elif name == "diayn":
        orig = discovery.discovery_loss

        def flipped(*args: Any, **kwargs: Any) -> Any:
            loss, stats = orig(*args, **kwargs)
            return -loss, stats

        patches.append((discovery, "discovery_loss", flipped))
    elif name == "metra":
        orig_m = metra.metra_losses

        def flipped_phi(phi: Any, log_lambda: Tensor, s: Tensor, s_next: Tensor, z: Tensor, slack: float) -> Any:
            return orig_m(phi, log_lambda, s, s_next, -z, slack)

        patches.append((metra, "metra_losses", flipped_phi))
    elif name in ("ase", "calm"):
        module = ase if name == "ase" else calm
        orig_r = module.discriminator_reward
        patches.append((module, "discriminator_reward", lambda logits: -orig_r(logits)))
    elif name == "fb_cpr":

        def flipped_diag(Fs: Tensor, B: Tensor, target_M: Tensor, discount: Tensor) -> Any:
            diff = Fs @ B.T - discount * target_M
            off = 1.0 - torch.eye(B.shape[0])
            offdiag = 0.5 * (diff * off).square().sum() / off.sum()
            diag = torch.diagonal(diff, dim1=1, dim2=2).mean() * Fs.shape[0]  # the bug: + where fb_td_loss has -
            return offdiag + diag, {"fb_offdiag": offdiag.detach(), "fb_diag": diag.detach(), "M": diff.mean().detach()}

        patches.append((fb_cpr, "fb_td_loss", flipped_diag))
    else:
        raise ValueError(f"no planted bug for {name!r}; one of {', '.join(PLANTED_BUGS)}")
    saved = [(m, attr, getattr(m, attr)) for m, attr, _ in patches]
    try:
        for m, attr, fn in patches:
            setattr(m, attr, fn)
        yield
    finally:
        for m, attr, fn in saved:
            setattr(m, attr, fn)


__all__ = [
    "PLANTED_BUGS",
    "FBToyTrainer",
    "OnPolicyToyTrainer",
    "Rollout",
    "ToyFBSettings",
    "ToyPPOSettings",
    "energy_distance",
    "greedy_return",
    "histogram_distance",
    "optimal_return",
    "planted_bug",
    "pretrain_toy_encoder",
    "roll_out",
    "skill_accuracy",
    "tracking_error",
    "unit_skills",
]
