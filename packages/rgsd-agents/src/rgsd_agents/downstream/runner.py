"""Downstream training: a high-level policy that reaches goals in a style with frozen skills.

``DownstreamRunner`` trains ``pi_high(z | s, g)`` with PPO on
``RGSD-SMPL-GoalReaching-v0`` (docs/downstream.md): its actions are skills z that the frozen
low-level policy of an rgsd run turns into joint actions. Every ``eval_every``
iterations (also before training, and at the end when the last evaluation was not
of the final policy) it runs ``eval_episodes`` deterministic episodes: success
rate (within ``task.success_radius`` of the goal at a decision, every
``task.low_level_steps`` control steps), final distance
beside the start distance (what a humanoid that stays where it starts scores),
fall rate and, for sidestep and backward, the style FID of the generated motion
against the style's reference clips (the heading- and
position-invariant feature of ``rgsd_eval.features``). The run folder has
the layout of ``rgsd_envs.runs.run_dir`` (config.yaml, policy.pt = the high-level
actor, checkpoints/, tb/) plus ``evaluations.jsonl`` (one line per evaluation:
iteration, training step, metrics; ``downstream_report.aggregate_seeds`` averages
them over seeds) and ``report.md`` with curves and top views of goal-reaching
trajectories.

What the frozen low level sees at a wrapped phase. Every control step it gets
``[o_t, z]``: the 359-D frame features of the simulated humanoid (RGSD-SMPL-v0's)
and the high level's skill, normalised. The only reference-dependent entry of
``o_t`` is the phase, frame / (F - 1), of the clip (F frames) the episode started
from by reference state initialisation. Goal-reaching episodes (20 s) outlast the
clips (2-5 s), so the env wraps the reference clock (``goal_reaching_v0``): after
frame F - 2 comes frame 0 again, and the phase drops from (F - 2) / (F - 1) to 0
while the body carries on from wherever it is; phase 1 is never shown. Nothing
else changes at a wrap: no state is set, the skill is still the high level's,
and neither the reward nor success looks at the reference. The low level never
met this pairing in training, where episodes end at the clip's last frame, so
phase 0 only ever came with the clip's first pose (an episode started at frame 0).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rgsd_agents.config import NetworkConfig, PPOConfig, check_max_minutes
from rgsd_agents.downstream.low_level import check_resumed_low_level, low_level_sha256
from rgsd_agents.downstream.report import EVAL_EPISODES, EVALUATIONS, NEUTRAL_START
from rgsd_agents.rl.loop import TrainingLoop, load_generator_state
from rgsd_agents.rl.networks import ActorCritic
from rgsd_agents.rl.ppo import PPO
from rgsd_agents.rl.precision import configure_tf32
from rgsd_agents.rl.rollout import RolloutCollector
from rgsd_agents.rl.storage import RolloutStorage
from rgsd_envs.envs.goal_reaching_v0 import (
    GOAL_OBS_DIM,
    GoalReachingConfig,
    GoalReachingTorchEnv,
    GoalStepExtras,
    check_style,
)
from rgsd_envs.envs.registration import GOAL_ENV_ID
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.config import save_yaml, to_dict
from rgsd_envs.utils.device import HostBridge, env_device, resolve_device
from rgsd_envs.utils.files import InputFileError, atomic_path, output_folder
from rgsd_envs.utils.threads import torch_threads
from rgsd_eval.features import motion_features, num_windows
from rgsd_eval.fid import GaussianStats, fid

Tensor = torch.Tensor
log = logging.getLogger(__name__)

INIT_SKILLS = (NEUTRAL_START, "mean", "style")
"""Values of ``DownstreamConfig.init_skill``."""
TRAINING_WORLDS, EVALUATION_WORLDS = 0, 1
"""The purposes ``world_seeds`` tells apart: the training worlds' streams and the evaluation episodes'."""


def world_seeds(seed: int, purpose: int, num_worlds: int) -> list[int]:
    """One seed per world, drawn from (``seed``, ``purpose``): runs of different seeds, and a run's training and
    evaluation worlds, share no world's stream (the env's int seed gives world i seed + i, so seed 1's world i would
    be seed 0's world i + 1)."""
    state = np.random.SeedSequence([seed, purpose]).generate_state(num_worlds, dtype=np.uint64)
    return [int(s) for s in state]


@dataclass
class HighLevelNetworkConfig(NetworkConfig):
    """The high-level actor and critic: small tanh MLPs on the 364-D goal observation, whose action is a skill, with a
    learned standard deviation (the low-level skill policy's networks are ``TrainConfig.networks``)."""

    actor_hidden: tuple[int, ...] = (256, 256)
    """Hidden sizes of the high-level actor (the downstream run's ``policy.pt``)."""
    critic_hidden: tuple[int, ...] = (256, 256)
    """Hidden sizes of the high-level critic."""
    latent_branch: tuple[int, ...] = ()
    """Keep it empty: the goal observation has no skill slice for a latent branch to take."""
    init_log_std: float = -1.0
    """Initial log standard deviation of the Gaussian over skills (exp(-1) = 0.37 per component, before the skill is
    normalised)."""
    learn_std: bool = True
    """Learn the log std (False: keep it at ``init_log_std``; the entropy bonus then has no effect)."""
    init_mean_action: str = "zero"
    """Not read by downstream training: the high level's initial mean skill is set by ``init_skill``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.latent_branch:
            raise ValueError(
                f"latent_branch must be empty for the high level (the goal observation has no skill slice), "
                f"got {list(self.latent_branch)}"
            )


@dataclass
class DownstreamConfig:
    """A high-level training run on RGSD-SMPL-GoalReaching-v0."""

    low_level: str = ""
    """The frozen low-level policy: an rgsd run folder (policy.pt, encoder.pt, config.yaml)."""
    low_level_sha256: str | None = None
    """The sha256 of the low-level run's policy.pt, written when the run starts: a resumed run checks its low-level
    policy against it, and takes the folder where it moved (``--resume RUN --low-level NEW``) when it matches."""
    seed: int = 0
    """Seeds the high-level networks, the action noise, the minibatches, the worlds (starts and goals) and the
    evaluation episodes (each world from the seed and its index, apart for training and evaluation: runs of other seeds
    share no episode)."""
    device: str = "auto"
    """Torch device of the high-level learner: "auto" (cuda when available), "cpu", "cuda" or "cuda:N". The
    low-level policy runs with the env on ``task.device``, except that a MuJoCo Warp low level's worlds follow the
    learner onto its GPU, as they did in training (``task_config``)."""
    num_envs: int = 64
    """Parallel goal-reaching worlds."""
    horizon: int = 16
    """High-level steps per world per iteration (each holds z for task.low_level_steps control steps)."""
    iterations: int = 2000
    """Rollout-and-update iterations."""
    max_minutes: float | None = None
    """Stop once the training iterations have taken this long, summed over resumed sessions (minutes, > 0; None: run
    all iterations). It counts the iterations' own time only: evaluations and checkpoints come on top, so the
    command takes longer; the progress bar's time left is wall-clock time."""
    checkpoint_every: int = 25
    """Iterations between checkpoints (also written at the end and when Ctrl-C, SIGTERM or SIGHUP stops the run)."""
    keep_checkpoints: int = 3
    """Newest ``iter_XXXXXX.pt`` files kept (``latest.pt`` is always kept)."""
    log_every: int = 1
    """Iterations between TensorBoard writes."""
    eval_every: int = 10
    """Iterations between evaluations (success rate, style FID); also one before training, and one of the final
    policy where the last was of an earlier iteration (the report's "trained" column)."""
    eval_episodes: int = EVAL_EPISODES
    """Deterministic episodes per evaluation, one per world, each to its end."""
    init_skill: str = NEUTRAL_START
    """Where the high-level policy starts (its output layer's bias, the initial mean skill before normalisation).

    "zero" (the default; the neutral start): a zero bias, so the untrained policy's mean is the freshly
    initialised network's small output (orthogonal init, gain 0.01) and the skills it samples, normalised,
    spread almost uniformly over the sphere: the skills' own prior, the same for every style and every
    method. The paper trains pi_high from the task reward alone with a default-initialised network (as
    CALM and ASE, whose reward it adopts, do) and gives it no initial skill; its finding that only RGSD keeps
    to the commanded style is about what the style term teaches, so the protocol hands no method its style
    latent at the start.

    "mean": the normalised mean of all clip latents, a deterministic start at the centre of the method's
    reference skills, still the same for every style.

    "style": the first style clip's latent (for freestyle the normalised mean of the locomotion clips'
    latents), so exploration starts in the commanded style: faster on a small budget, but the untrained
    policy already has the style's FID and every method is given its style latent."""
    torch_threads: int | None = None
    """torch intra-op threads of the PPO updates (None: torch's default, one per core)."""
    rollout_threads: int | None = 1
    """torch intra-op threads while collecting a rollout and during evaluations (None: as the updates)."""
    task: GoalReachingConfig = field(default_factory=GoalReachingConfig)
    networks: HighLevelNetworkConfig = field(default_factory=HighLevelNetworkConfig)
    ppo: PPOConfig = field(
        default_factory=lambda: PPOConfig(actor_lr=3e-4, critic_lr=1e-3, epochs=5, minibatch_size=512, entropy_coef=0.0)
    )
    """The high level's PPO update."""

    def __post_init__(self) -> None:
        if self.init_skill not in INIT_SKILLS:
            raise ValueError(f"init_skill must be one of {', '.join(INIT_SKILLS)}, got {self.init_skill!r}")
        for name in (
            "num_envs",
            "horizon",
            "checkpoint_every",
            "keep_checkpoints",
            "log_every",
            "eval_every",
            "eval_episodes",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.seed < 0:  # numpy's seed sequences take no negative seed
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        check_max_minutes(self.max_minutes)
        from rgsd_envs.utils.device import check_device_name

        check_device_name(self.device)

    @property
    def batch_size(self) -> int:
        """High-level samples per iteration."""
        return self.num_envs * self.horizon


def task_config(cfg: DownstreamConfig, learner: torch.device) -> GoalReachingConfig:
    """``cfg.task`` with its device chosen as training and evaluation choose the env's: a warp low level's config
    names the CPU, and its worlds follow the learner onto its GPU."""
    backend = RunDir(cfg.low_level).env_config().backend
    return dataclasses.replace(cfg.task, device=env_device(backend, cfg.task.device, learner))


class GoalEvaluator:
    """Deterministic episodes of the current high-level policy: success, distance, style FID, top views."""

    def __init__(self, cfg: DownstreamConfig, learner: torch.device):
        self.cfg = cfg
        self.env = GoalReachingTorchEnv(cfg.eval_episodes, cfg.low_level, task_config(cfg, learner))
        task = self.env.task
        lib = task.core.lib
        clips = [lib.clips[i] for i in task.start_clips] if cfg.task.style != "freestyle" else []
        self.reference = (
            GaussianStats.of(np.concatenate([motion_features(c.body_pos) for c in clips])) if clips else None
        )
        self.trajectories: list[dict[str, np.ndarray]] = []

    @torch.no_grad()
    def run(self, actor: torch.nn.Module) -> dict[str, float]:
        """One episode per world to its end (no autoreset is used: worlds stop at their first end); the
        per-step rows stay on the device and are read once at the end. Every evaluation of a run plays the same
        episodes (starts and goals)."""
        env, task = self.env, self.env.task
        device = next(actor.parameters()).device
        n = self.cfg.eval_episodes
        obs, info = env.reset(seed=world_seeds(self.cfg.seed, EVALUATION_WORLDS, n))
        goals = info["goal"].cpu().numpy()
        task.recording = []
        roots = [task.core.backend.state().body_pos[:, 0, :2].to(env.device).clone()]
        rows: list[Tensor] = []
        alive = np.ones(n, dtype=bool)
        for _ in range(task.max_steps):
            obs, _, _, _, ex = env.step(deterministic_skill(actor, obs.to(device)).to(env.device))
            rows.append(
                torch.stack((ex.success.float(), ex.distance, ex.fall.float(), ex.style_cosine, ex.done.float()))
            )
            # the step's last recorded pose: a world that ended has already restarted at the centre
            roots.append(task.recording[-1][:, 0, :2].clone())
            alive &= ~ex.done_host
            if not alive.any():
                break
        per_step = torch.stack(rows).cpu().numpy()  # (steps, 5, n): the one read of the episode
        success_t, distance_t, fall_t, cosine_t, done_t = (per_step[:, k] for k in range(5))
        ended = np.cumsum(done_t, axis=0) > 0
        alive_t = np.concatenate((np.ones((1, n), dtype=bool), ~ended[:-1]))  # alive before each step
        ended_at = np.where(ended.any(axis=0), ended.argmax(axis=0) + 1, task.max_steps)
        success = (success_t.astype(bool) & alive_t).any(axis=0)
        fell = (fall_t.astype(bool) & alive_t).any(axis=0)
        last = np.minimum(ended_at, per_step.shape[0]) - 1
        final_distance = distance_t[last, np.arange(n)]
        cosines = [cosine_t[alive_t[:, i], i] for i in range(n)]
        frames = torch.stack(task.recording).cpu().numpy()  # (T, n, 24, 3) at 30 Hz
        task.recording = None
        root_xy = torch.stack(roots, dim=1).cpu().numpy()  # (n, steps + 1, 2)
        self.trajectories = [
            {"root": root_xy[i, : ended_at[i] + 1], "goal": goals[i], "success": bool(success[i])} for i in range(n)
        ]
        start_distance = np.linalg.norm(root_xy[:, 0] - goals, axis=-1)
        out = {
            "eval/success_rate": float(success.mean()),
            "eval/final_distance": float(final_distance.mean()),
            "eval/start_distance": float(start_distance.mean()),
            "eval/fall_rate": float(fell.mean()),
        }
        if self.reference is not None:
            steps = self.cfg.task.low_level_steps
            gen = [
                motion_features(frames[: ended_at[i] * steps, i])
                for i in range(n)
                if num_windows(ended_at[i] * steps) > 0
            ]
            if gen:
                out["eval/style_fid"] = fid(self.reference, GaussianStats.of(np.concatenate(gen)))
            out["eval/style_cosine"] = float(np.concatenate([c.ravel() for c in cosines]).mean())
        return out

    def close(self) -> None:
        """Release the simulator."""
        self.env.close()


class DownstreamRunner(TrainingLoop, RolloutCollector):
    """PPO on the goal-reaching task over a frozen low-level policy (see the module docstring)."""

    CONFIG_CLASS = DownstreamConfig
    RESUME_OVERRIDABLE = TrainingLoop.RESUME_OVERRIDABLE + ("eval_every", RunDir.LOW_LEVEL_KEY)
    """``low_level`` may change to the folder the low-level run moved to (``check_resumed_low_level``)."""
    RESUME_REQUIRES = (RunDir.CONFIG,)

    CHECKPOINT_FORMAT = "rgsd-downstream-checkpoint"
    PROGRESS_DESC = "downstream"
    COMMAND = "rgsd downstream"

    def __init__(self, cfg: DownstreamConfig, run_dir: str | os.PathLike, progress: bool = True, _resume: bool = False):
        super().__init__()
        self.cfg, self.run, self.progress = cfg, RunDir(run_dir), progress
        self.device = resolve_device(cfg.device)  # before any file is written: a bad device leaves no folder
        configure_tf32(self.device)
        self.bridge = HostBridge(self.device)
        low = check_low_level(cfg.low_level)
        check_style(low, cfg.task.style)  # a style the low level has no clips of: said before any folder exists
        if cfg.torch_threads is not None:
            torch.set_num_threads(cfg.torch_threads)
        output_folder(self.run.path)
        if not _resume:
            cfg.low_level = str(low.path.resolve())
            cfg.low_level_sha256 = low_level_sha256(low)
            save_yaml(cfg, self.run.config_path)
        self.env = GoalReachingTorchEnv(cfg.num_envs, cfg.low_level, task_config(cfg, self.device))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed)
            self.ac = ActorCritic(GOAL_OBS_DIM, self.env.skill_dim, cfg.networks)
        if cfg.init_skill != NEUTRAL_START:
            self.ac.set_mean_action(initial_skill(self.env.task, cfg.init_skill))
        self.ac.to(self.device)
        self.ppo = PPO(self.ac, cfg.ppo)
        self.storage = RolloutStorage(cfg.horizon, cfg.num_envs, GOAL_OBS_DIM, self.env.skill_dim, 0, 0, self.device)
        self.sample_gen = torch.Generator(self.device).manual_seed(cfg.seed)
        self.minibatch_gen = torch.Generator().manual_seed(cfg.seed + 1)
        obs, _ = self.env.reset(seed=world_seeds(cfg.seed, TRAINING_WORLDS, cfg.num_envs))
        self.obs = self.bridge.to_device(obs).clone()
        self.ac.obs_normalizer.update(self.obs)
        self.evaluator: GoalEvaluator | None = None
        self.initial_eval: dict[str, float] = {}
        self.last_eval: dict[str, float] = {}
        self.last_eval_iteration: int | None = None
        """The iteration ``last_eval`` evaluated (None: no evaluation in this session yet)."""

    @classmethod
    def resume(
        cls, run_dir: str | Path, overrides: dict[str, Any] | None = None, progress: bool = True, **kwargs: Any
    ) -> Any:
        """``TrainingLoop.resume`` with the low-level run checked first (``check_resumed_low_level``): where it is
        now, given as the ``low_level`` override, must hold the policy the run trained over."""
        run, overrides = RunDir(run_dir), dict(overrides or {})
        if run.config_path.is_file() and run.has_checkpoint():  # else the loop says what is missing
            given = overrides.get(RunDir.LOW_LEVEL_KEY)
            if given is not None:
                overrides[RunDir.LOW_LEVEL_KEY] = str(check_low_level(given).path.resolve())
            check_resumed_low_level(run, run.config(), given)
        return super().resume(run_dir, overrides, progress, **kwargs)

    def iterate(self) -> dict[str, float]:
        """One rollout and a PPO update; returns this iteration's metrics."""
        cfg = self.cfg
        sums = torch.zeros(6, dtype=torch.float64, device=self.env.device)
        """reward, style cosine, episodes, successes, final distances, falls: summed on the device."""

        def after_step(t: int, reward: Tensor, term: Tensor, trunc: Tensor, ex: GoalStepExtras) -> None:
            done = ex.done.double()
            sums.add_(
                torch.stack(
                    (
                        reward.double().sum(),
                        ex.style_cosine.double().sum(),
                        done.sum(),
                        (ex.success.double() * done).sum(),
                        (ex.distance.double() * done).sum(),
                        (ex.fall.double() * done).sum(),
                    )
                )
            )

        start = time.perf_counter()
        with torch_threads(cfg.rollout_threads):
            times = self.collect(cfg.ppo.gamma, cfg.ppo.gae_lambda, after_step)
        ppo_stats = self.ppo.update(self.storage, self.minibatch_gen)
        seconds = time.perf_counter() - start
        self.iteration += 1
        self.global_step += cfg.batch_size
        self.elapsed += seconds
        reward_sum, cosine_sum, episodes, successes, distances, falls = sums.tolist()  # one read per iteration
        metrics = {
            "rollout/reward": reward_sum / cfg.batch_size,
            "rollout/style_cosine": cosine_sum / cfg.batch_size,
            "perf/env_seconds": times.env_seconds,
            "charts/SPS": cfg.batch_size / max(seconds, 1e-9),
        }
        if episodes:
            k = episodes
            metrics.update(
                {
                    "episodes/success_rate": successes / k,
                    "episodes/final_distance": distances / k,
                    "episodes/fall_rate": falls / k,
                    "episodes/count": float(k),
                }
            )
        metrics.update({f"losses/{k}": v for k, v in ppo_stats.items()})
        return metrics

    def evaluate(self) -> dict[str, float]:
        """Deterministic evaluation episodes of the current policy, appended to ``evaluations.jsonl``."""
        if self.evaluator is None:
            self.evaluator = GoalEvaluator(self.cfg, self.device)
        with torch_threads(self.cfg.rollout_threads):
            self.last_eval = self.evaluator.run(self.ac.actor)
        self.last_eval_iteration = self.iteration
        row = {
            "iteration": self.iteration,
            "step": self.global_step,
            "control_steps": self.global_step * self.cfg.task.low_level_steps,
            **self.last_eval,
        }
        path = self.run.path / EVALUATIONS
        if self.iteration == 0:  # a fresh run: an earlier attempt's lines are not this run's
            path.unlink(missing_ok=True)
        append_evaluation(path, row)
        return self.last_eval

    def on_start(self, writer: Any) -> None:
        """Evaluate the untrained high-level policy on fresh runs."""
        if self.iteration == 0:
            self.initial_eval = self.evaluate()
            for k, v in self.initial_eval.items():
                writer.add_scalar(k, v, 0)

    def on_iteration(self, metrics: dict[str, float]) -> None:
        """Evaluate every ``eval_every`` iterations."""
        if self.iteration % self.cfg.eval_every == 0:
            metrics.update(self.evaluate())

    def postfix(self, metrics: dict[str, float]) -> str:
        """Progress-bar text."""
        parts = [f"sps={metrics['charts/SPS']:.0f}", f"r={metrics['rollout/reward']:.3f}"]
        if "episodes/success_rate" in metrics:
            parts.append(f"succ={metrics['episodes/success_rate']:.2f}")
        if "eval/style_fid" in metrics:
            parts.append(f"fid={metrics['eval/style_fid']:.1f}")
        return " ".join(parts)

    def trainer_state(self) -> dict[str, Any]:
        """Networks, optimiser, env, observation and generators."""
        return {
            "config": to_dict(self.cfg),
            "actor_critic": self.ac.state_dict(),
            "ppo": self.ppo.state_dict(),
            "env": self.env.task.core.state_dict(),
            "goal": self.env.task.goal.clone(),
            "steps": self.env.task.steps.clone(),
            "success": self.env.task.success.clone(),
            "obs": self.obs.cpu().clone(),
            "rng": {
                "sample": self.sample_gen.get_state(),
                "sample_device": self.device.type,
                "minibatch": self.minibatch_gen.get_state(),
            },
            "initial_eval": dict(self.initial_eval),
        }

    def load_trainer_state(self, state: dict[str, Any]) -> None:
        """Restore ``trainer_state``."""
        self.ac.load_state_dict(state["actor_critic"])
        self.ppo.load_state_dict(state["ppo"])
        task = self.env.task
        task.core.load_state_dict(state["env"])
        task.goal, task.steps, task.success = (state[k].to(task.device).clone() for k in ("goal", "steps", "success"))
        task.steps_host = task.steps.cpu().numpy().astype(np.int64).copy()
        self.obs = state["obs"].to(self.device).clone()
        load_generator_state(self.sample_gen, state["rng"], self.iteration)
        self.minibatch_gen.set_state(state["rng"]["minibatch"])
        self.initial_eval = dict(state.get("initial_eval", {}))

    def clip_library(self) -> MotionLib:
        """The low-level run's clips, which the worlds start from (checked on resume)."""
        return self.env.task.core.lib

    def clips_setting(self) -> str:
        """The low-level run's ``env.motions``, which chose the clips."""
        return f"env.motions of the low-level run {self.cfg.low_level}"

    def export(self) -> None:
        """policy.pt: the high-level actor (observation 364-D -> skill, the low-level's skill_dim)."""
        self.ac.actor.save(
            self.run.policy_path,
            env_id=GOAL_ENV_ID,
            low_level=self.cfg.low_level,
            style=self.cfg.task.style,
            iteration=self.iteration,
        )

    def close(self) -> None:
        """Release the simulators."""
        self.env.close()
        if self.evaluator is not None:
            self.evaluator.close()

    def evaluate_final(self) -> dict[str, float]:
        """The evaluation of the final policy (``policy.pt``): the last one when it was of this iteration, else a
        new one (``eval_every`` need not divide the iterations), which the session's last metrics row gets too."""
        if self.last_eval_iteration != self.iteration or self.evaluator is None or not self.evaluator.trajectories:
            self.evaluate()
            if self.history:  # the curves end at the final policy's evaluation
                self.history[-1].update(self.last_eval)
        return self.last_eval

    def write_report(self) -> Path:
        """report.md with the learning curves and top views of the final policy's evaluation (``evaluate_final``)."""
        from rgsd_agents.downstream.report import write_downstream_report

        self.evaluate_final()
        return write_downstream_report(
            self.run.path, self.cfg, self.history, self.initial_eval, self.last_eval, self.evaluator.trajectories,
            iteration=self.iteration,
        )  # fmt: skip


def append_evaluation(path: Path, row: dict[str, Any]) -> None:
    """Add an evaluation row to ``evaluations.jsonl``; a last row of the same iteration (the same policy evaluated
    again, by a session resumed from that iteration) is replaced, not repeated. A resumed run may also repeat
    iterations past its checkpoint: readers keep the last row of an iteration."""
    lines = path.read_text().splitlines() if path.is_file() else []
    if lines and _iteration_of(lines[-1]) == row["iteration"]:
        with atomic_path(path) as tmp:
            Path(tmp).write_text("".join(f"{line}\n" for line in lines[:-1]) + json.dumps(row) + "\n")
        return
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")


def _iteration_of(line: str) -> int | None:
    """The iteration of an evaluations.jsonl line (None: not a readable row, e.g. cut short by a crash)."""
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return row.get("iteration") if isinstance(row, dict) else None


LOCOMOTION = ("walk", "run", "sidestep", "backward")


def deterministic_skill(actor: torch.nn.Module, obs: Tensor) -> Tensor:
    """The high level's deterministic action: the mean skill, unclamped, as training's sampled skills are (the env
    normalises it; clamping a component first would turn its direction)."""
    return actor(obs)


def initial_skill(task: Any, kind: str = "style") -> Tensor:
    """The initial mean skill of ``DownstreamConfig.init_skill`` "mean" (the normalised mean of all clip latents)
    or "style" (the first style clip's latent, where the style reward is at its maximum; for freestyle the
    normalised mean of the locomotion clips' latents, all clips if none)."""
    lib, z = task.core.lib, task.clip_latents
    if kind == "mean":
        return torch.nn.functional.normalize(z.mean(0), dim=0)
    if kind != "style":
        raise ValueError(f"no initial skill for init_skill {kind!r}")
    if task.z_style is not None:
        return task.z_style[0]
    ids = [i for i, c in enumerate(lib.categories) if c in LOCOMOTION] or list(range(lib.num_clips))
    return torch.nn.functional.normalize(z[ids].mean(0), dim=0)


def check_low_level(path: str | os.PathLike) -> RunDir:
    """A low-level run folder with its policy, encoder and config, or a clear error."""
    run = RunDir(path)
    if not run.path.is_dir():
        raise InputFileError(run.path, "low-level run folder not found (train one with `rgsd train` or `rgsd demo`)")
    run.check_kind(RunDir.SKILL_RUN, "rgsd downstream --low-level")
    run.check(RunDir.CONFIG, RunDir.POLICY, RunDir.ENCODER)
    return run
