"""The on-policy training loop of every PPO-trained method: rollouts, updates, logging, checkpoints, resumption.

One iteration: ``horizon`` batched steps of all ``num_envs`` worlds (the policy
samples actions, the method may choose each world's latent), the method's
rewards (``SkillMethod.relabel``; RGSD keeps the env's encoder reward), GAE
with bootstrapping on truncation, a PPO update (``ppo.PPO``, with the method's
minibatch hooks) and the method's own update (RGSD: the discovery encoder).
The runner resolves the method by name (``rgsd_agents.methods``) and has no
branch on which method it runs. The observation normaliser's
statistics are frozen during a rollout (the stored normalised observations
and log-probabilities stay consistent for PPO's ratio) and updated with the
rollout's raw observations as it goes, taking effect at the next rollout.

The run folder follows ``rgsd_envs.runs.run_dir.RunDir``. A checkpoint holds
everything the next iteration depends on (networks, optimisers, normalisers,
the method's networks and state, the env's full state, the current observation, the
generators, the episode trackers), so ``--resume`` continues with the same
numbers as an uninterrupted run. Ctrl-C, SIGTERM or SIGHUP finishes the current
iteration, writes a checkpoint and stops; a second one aborts at once.

Devices: the learner (actor-critic, PPO, storage, the method's networks) lives
on ``cfg.device``; the env's tensors on ``cfg.env.device`` (the mujoco simulator
itself on the CPU), except that the warp backend and a "cuda" env device follow
the learner's GPU (``env_device``).
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

import rgsd_envs  # noqa: F401  (registers RGSD-SMPL-v0)
from rgsd_agents.config import CURRICULUM_KEYS, TrainConfig, resolve, training_world_seed
from rgsd_agents.methods import method_class
from rgsd_agents.methods.base import SkillMethod
from rgsd_agents.methods.common import to_floats
from rgsd_agents.methods.env import SkillChoosingEnv
from rgsd_agents.methods.runtime import build_runner_method, write_method_file
from rgsd_agents.pretraining.sim_twins import reference_actions
from rgsd_agents.probe import ProbeHooks
from rgsd_agents.rl.distributed import DataParallel
from rgsd_agents.rl.episode_stats import EpisodeStats
from rgsd_agents.rl.loop import TrainingLoop, load_generator_state, record_config_changes, save_run_config
from rgsd_agents.rl.networks import ActorCritic
from rgsd_agents.rl.ppo import PPO
from rgsd_agents.rl.precision import configure_tf32
from rgsd_agents.rl.rollout import RolloutCollector
from rgsd_agents.rl.storage import RolloutStorage
from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.torch_env import RGSDTorchEnv, StepExtras
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.rewards.encoders import load_encoder
from rgsd_envs.runs.policy import PolicyMLP
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.config import from_dict, save_yaml, to_dict
from rgsd_envs.utils.device import HostBridge, resolve_device
from rgsd_envs.utils.device import env_device as device_rule
from rgsd_envs.utils.files import atomic_path, output_folder
from rgsd_envs.utils.threads import torch_threads

Tensor = torch.Tensor
log = logging.getLogger(__name__)

CHECKPOINT_FORMAT = "rgsd-train-checkpoint"
CHECKPOINT_VERSION = 2
"""2: the method's networks (RGSD's discovery encoder too) live in the method's state."""


# -- encoder set-up ---------------------------------------------------------------
def prepare_encoder(cfg: TrainConfig, run: RunDir, progress: bool = True) -> Path:
    """Write the env's frozen encoder to ``<run>/encoder.pt``: the method's ``ENCODER`` kind, from the given file,
    a fresh pretraining or a random init."""
    if method_class(cfg.method.name).ENCODER == "random":
        from rgsd_agents.pretraining.encoder import build_encoder
        from rgsd_agents.pretraining.reference import load_reference

        pretrain_cfg = cfg.pretrain_config()
        _, inputs = load_reference(pretrain_cfg)
        encoder = build_encoder(pretrain_cfg, inputs)
        encoder.save(run.encoder_path, init="random", seed=cfg.seed)
        log.info(
            "%s reads no pretrained encoder; a random one (hidden %s) -> %s, for the env's interface only",
            cfg.method.name,
            list(cfg.pretrain.hidden),
            run.encoder_path,
        )
    elif cfg.encoder is not None:
        load_encoder(cfg.encoder, cfg.env.skill_dim)  # clear error now rather than inside the env
        with atomic_path(run.encoder_path) as tmp:
            shutil.copyfile(cfg.encoder, tmp)
    else:
        from rgsd_agents.pretraining.loop import pretrain

        log.info("no encoder given: pretraining on %s into %s", cfg.env.motions, run.file("pretrain"))
        result = pretrain(cfg.pretrain_config(), run.file("pretrain"), progress=progress, env_cfg=cfg.env)
        log.info("pretraining: alignment %.5f after %d steps (%.0f s)", result.alignment, result.steps, result.seconds)
        with atomic_path(run.encoder_path) as tmp:
            shutil.copyfile(result.encoder_path, tmp)
    return run.encoder_path


# -- the runner ----------------------------------------------------------------
class Runner(ProbeHooks, TrainingLoop, RolloutCollector):
    """Builds the env and learners for a run folder; ``learn()`` (``TrainingLoop``) trains."""

    CONFIG_CLASS = TrainConfig
    RESUME_OVERRIDABLE = TrainingLoop.RESUME_OVERRIDABLE + ("probe_every",)
    RESUME_CURRICULUM = CURRICULUM_KEYS
    """The deviation rule of imitation episodes may change on resume: a curriculum step (``add_curriculum_step``)."""
    RESUME_REQUIRES = (RunDir.CONFIG, RunDir.ENCODER)
    DATA_PARALLEL = True

    CHECKPOINT_FORMAT = CHECKPOINT_FORMAT
    CHECKPOINT_VERSION = CHECKPOINT_VERSION

    def __init__(
        self,
        cfg: TrainConfig,
        run_dir: str | Path,
        progress: bool = True,
        _resume: bool = False,
        dp: DataParallel | None = None,
    ):
        super().__init__()
        self.dp = dp
        self.run = RunDir(run_dir)
        self.progress = progress
        # before any file is written: a bad device leaves no folder
        self.device = dp.device if dp is not None else resolve_device(cfg.device)
        self.bridge = HostBridge(self.device)
        configure_tf32(self.device)  # before pretraining, so the encoder's matmuls get it too
        self.rank = 0 if dp is None else dp.rank
        if cfg.torch_threads is not None:
            torch.set_num_threads(cfg.torch_threads)
        if not _resume and self.is_main:
            output_folder(self.run.path)
            resolve(cfg)
            save_yaml(cfg, self.run.config_path)
            prepare_encoder(cfg, self.run, progress)
        if dp is not None and not _resume:
            dp.barrier()  # rank 0 has written config.yaml and encoder.pt (it may have pretrained)
            if not self.is_main:
                cfg = from_dict(TrainConfig, self.run.config(), str(self.run.config_path))
        self.cfg = cfg
        seed = cfg.seed + self.rank  # each rank: its own action noise and minibatches
        self.world_seed = training_world_seed(cfg.seed, self.rank, cfg.num_envs)
        """The reset seed of this rank's worlds (world i: ``world_seed + i``)."""
        self.env_cfg = dataclasses.replace(cfg.env, device=env_device(cfg.env, self.device))
        """The env config as built here (its device resolved for this process)."""
        self.env = RGSDTorchEnv(
            cfg.num_envs,
            config=self.env_cfg,
            encoder=str(self.run.encoder_path),
            reward_kappa=cfg.reward_kappa,
            reward_constant=cfg.reward_constant,
        )
        core = self.env.core
        layout = core.layout
        self.method: SkillMethod = build_runner_method(cfg, self.env, self.device, self.run, dp)
        """The skill method (``rgsd_agents.methods``): its rewards, latents and update."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed)
            self.ac = ActorCritic(layout.policy_obs_dim, self.env.act_dim, cfg.networks, layout.skill)
        if cfg.networks.init_mean_action == "reference":
            self.ac.set_mean_action(reference_mean_action(core.lib))
        self.ac.to(self.device)
        if dp is not None:
            self.share_learners()
        self.ppo = PPO(self.ac, cfg.ppo, dp)
        self.storage = RolloutStorage(
            cfg.horizon,
            cfg.num_envs,
            layout.policy_obs_dim,
            self.ac.actor.act_dim,
            layout.skill_dim,
            layout.encoder_input_dim,
            self.device,
        )
        self.sample_gen = torch.Generator(self.device).manual_seed(seed)
        """Action noise, drawn on the learner's device."""
        self.minibatch_gen = torch.Generator().manual_seed(seed + 1)
        """Minibatch permutations, drawn on the CPU (the same minibatches on every device)."""
        self.method_stats: dict[str, Tensor] = {}
        """The method's reward statistics of the last rollout."""
        self.env = SkillChoosingEnv(self.env, self.method)
        obs, _ = self.env.reset(seed=self.world_seed)
        self.obs = self.bridge.to_device(obs).clone()
        self.moments = None if dp is None else dp.batch_moments
        """Merges the normalisers' batch statistics over the ranks (None: one process)."""
        self.ac.obs_normalizer.update(self.obs, self.moments)
        self.tracker = EpisodeStats(self._frames_left())
        self.curriculum_steps = 0
        """Curriculum steps (``cfg.curriculum``) in force in the env."""
        if not _resume:
            self.apply_curriculum()  # steps at 0 samples act from the first rollout

    def add_curriculum_step(self, changes: dict[str, Any]) -> None:
        """Change ``CURRICULUM_KEYS`` from now on: a curriculum step at the current sample count, put in force,
        recorded and saved in config.yaml (nothing when every value is already in force)."""
        rule = self.env.core.cfg.deviation
        changes = {k: v for k, v in changes.items() if getattr(rule, k.removeprefix("env.deviation.")) != v}
        if not changes:
            return
        steps = list(self.cfg.curriculum)
        steps.insert(self.curriculum_steps, {"at_samples": float(self.global_step), "set": changes})
        cfg = dataclasses.replace(self.cfg, curriculum=steps)  # checks the step (keys, types, a valid env)
        self.cfg = cfg
        if self.is_main:
            save_run_config(self.run, cfg)
        self.apply_curriculum()

    def apply_curriculum(self, record: bool = True) -> None:
        """Put in force the curriculum steps whose ``at_samples`` the run has reached; ``record``: log each change
        and append it to ``config_changes.yaml`` (a resumed run re-applies the steps its checkpoint had silently)."""
        steps = self.cfg.curriculum
        while self.curriculum_steps < len(steps) and steps[self.curriculum_steps]["at_samples"] <= self.global_step:
            changes = self.cfg.curriculum_changes(self.curriculum_steps)
            before = self.env.core.set_deviation_rule(**changes)
            self.curriculum_steps += 1
            if record and self.is_main:
                diff = {f"env.deviation.{k}": (before[k], v) for k, v in changes.items()}
                record_config_changes(self.run, diff, self.iteration, self.global_step)

    def _frames_left(self) -> Tensor:
        """(N,) frames from each world's current frame to its clip's end (device)."""
        core = self.env.core
        return core.lib.num_frames[core.clip] - 1 - core.frame

    # -- one iteration --------------------------------------------------------
    def rollout(self) -> tuple[EpisodeStats, dict[str, float]]:
        """Collect ``horizon`` steps of all worlds into the storage and compute GAE."""
        stats = self.tracker
        stats.begin_rollout()

        def after_step(t: int, reward: Tensor, term: Tensor, trunc: Tensor, ex: StepExtras) -> dict[str, Tensor]:
            stats.step(reward, ex.task, ex.done, ex.time_outs, ex.cartesian_error, self._frames_left())
            return {
                "tasks": ex.task,
                "skills": ex.skills,
                "encoder_inputs": ex.encoder_inputs,
                "next_encoder_inputs": ex.next_encoder_inputs,
            }

        times = self.collect(self.cfg.ppo.gamma, self.cfg.ppo.gae_lambda, after_step, self.relabel_hook())
        return stats, {"perf/env_seconds": times.env_seconds, "perf/policy_seconds": times.policy_seconds}

    def relabel_hook(self) -> Callable[[RolloutStorage], None]:
        """The method's reward relabelling for ``collect``."""
        method = self.method

        def relabel(storage: RolloutStorage) -> None:
            self.method_stats = method.relabel(storage)

        return relabel

    def iterate(self) -> dict[str, float]:
        """One rollout, the PPO update and the method's update; returns this iteration's metrics."""
        start = time.perf_counter()
        with torch_threads(self.cfg.rollout_threads):
            stats, metrics = self.rollout()
        t0 = time.perf_counter()
        ppo_stats = self.ppo.update(self.storage, self.minibatch_gen, self.method)
        t1 = time.perf_counter()
        method_stats = self.method.update(self.storage, self.minibatch_gen)
        t2 = time.perf_counter()
        seconds = t2 - start
        world = 1 if self.dp is None else self.dp.world_size
        self.iteration += 1
        self.global_step += self.cfg.batch_size * world
        self.elapsed += seconds
        # the simulator's counter rides on the statistics' one read (warp: solver iteration-limit hits)
        metrics.update(stats.summary({"sim/solver_limit_hits": self.env.core.backend.pop_solver_limit_hits()}))
        if not self.method.ENV_REWARD:  # the env's encoder reward is not what this method trains on (method/reward is)
            for key in ("rollout/discovery_reward", "episodes/discovery_return"):
                metrics.pop(key, None)
        core = self.env.core
        if core.cfg.clip_sampling.mode != "uniform":
            probs = core.clip_probabilities_host().tolist()
            metrics.update({f"clip_sampling/{name}": p for name, p in zip(core.lib.names, probs)})
        if core.cfg.deviation.adaptive:
            limits = core.deviation_rule.thresholds().tolist()
            metrics.update({f"termination/{name}_threshold_m": t for name, t in zip(core.lib.names, limits)})
        metrics.update({f"losses/{k}": v for k, v in ppo_stats.items()})
        metrics.update({f"method/{k}": v for k, v in to_floats({**self.method_stats, **method_stats}).items()})
        metrics.update(
            {
                "perf/update_seconds": t1 - t0,
                "perf/method_seconds": t2 - t1,
                "perf/iteration_seconds": seconds,
                "charts/SPS": self.cfg.batch_size * world / seconds,
                "charts/actor_lr": self.ppo.optimizer.param_groups[0]["lr"],
                "charts/critic_lr": self.ppo.optimizer.param_groups[1]["lr"],
                "charts/iteration": float(self.iteration),
            }
        )
        self.apply_curriculum()  # before this iteration's checkpoint, so a resumed run finds it in force
        return metrics

    # -- hooks of the loop -------------------------------------------------------------
    def on_start(self, writer: Any) -> None:
        """Fresh runs: the method's start report (RGSD: the frozen reward's sharpness) and a probe of the untrained
        policy, so TensorBoard starts from them (rank 0 only)."""
        if self.is_main and self.iteration == 0:
            self.method.start_report(writer)
        self.start_probe(writer)

    def postfix(self, metrics: dict[str, float]) -> str:
        """Progress-bar text: SPS, imitation reward, episode length, errors."""
        return _postfix(metrics)

    def probe_policy(self) -> PolicyMLP:
        """The actor the probe rolls out."""
        return self.ac.actor

    def probe_candidates(self, clips: Sequence[int]) -> Tensor | None:
        """The method's latents for each of ``clips`` (None: the encoder's z_m)."""
        return self.method.probe_latents(clips)

    def probe_extras(self) -> dict[str, float]:
        """The method's probe statistics (RGSD: the discovery encoder's)."""
        return {f"discovery/{k}": v for k, v in self.method.probe_stats().items()}

    # -- checkpoints ----------------------------------------------------------------
    def trainer_state(self) -> dict[str, Any]:
        """Everything the next iteration depends on besides the loop counters (a data-parallel run: rank 0's
        worlds at the top level and every rank's in ``rank_states``; a collective call)."""
        local = self.rank_state()
        state = {
            "config": to_dict(self.cfg),
            "actor_critic": self.ac.state_dict(),
            "ppo": self.ppo.state_dict(),
            **local,
        }
        if self.dp is not None:
            gathered = self.dp.gather_to_main(local)
            if gathered is not None:
                gathered[0] = None  # rank 0's are the top-level entries
            state["rank_states"] = gathered
        return state

    def rank_state(self) -> dict[str, Any]:
        """What differs between the ranks of a data-parallel run: worlds, observation, generators, trackers."""
        return {
            "env": self.env.state_dict(),
            "obs": self.obs.cpu().clone(),
            "rng": {
                "sample": self.sample_gen.get_state(),
                "sample_device": self.device.type,
                "minibatch": self.minibatch_gen.get_state(),
            },
            "tracker": self.tracker.state_dict(),
            "method": self.method.state_dict(),
        }

    def load_trainer_state(self, state: dict[str, Any]) -> None:
        """Restore ``trainer_state`` (the env and networks must have the saved shapes); each rank of a
        data-parallel run takes its own worlds from ``rank_states``."""
        self.ac.load_state_dict(state["actor_critic"])
        self.ppo.load_state_dict(state["ppo"])
        ranks = [state, *(state.get("rank_states") or [None])[1:]]
        mine = ranks[self.rank] if self.rank < len(ranks) else None
        # the method's state is per rank (its generator); a rank the checkpoint lacks takes rank 0's
        self.method.load_state_dict((mine or state)["method"])
        self.share_learners()
        self.apply_curriculum(record=False)
        if mine is None:
            log.warning(
                "the checkpoint holds the worlds of %d rank(s); rank %d starts fresh worlds (seed %d), so this "
                "continuation is not identical to an uninterrupted run",
                len(ranks),
                self.rank,
                self.world_seed,
            )
            return
        self.load_rank_state(mine)

    def load_rank_state(self, state: dict[str, Any]) -> None:
        """Restore ``rank_state`` but the method's (``load_trainer_state`` restores it before sharing the learners)."""
        self.env.load_state_dict(state["env"])
        self.obs = state["obs"].to(self.device).clone()
        load_generator_state(self.sample_gen, state["rng"], self.iteration)
        self.minibatch_gen.set_state(state["rng"]["minibatch"])
        self.tracker.load_state_dict(state["tracker"])

    def share_learners(self) -> None:
        """Make rank 0's actor-critic and method networks every rank's (a data-parallel run), then let the method
        refresh what it derives from them (RGSD: the env's copy of the discovery encoder)."""
        if self.dp is not None:
            self.dp.broadcast_module(self.ac)
            for module in self.method.modules().values():
                self.dp.broadcast_module(module)
        self.method.after_load()

    def clip_library(self) -> MotionLib:
        """The clips of ``env.motions`` the worlds play (checked on resume)."""
        return self.env.core.lib

    def export(self) -> None:
        """Write the deployable files (rank 0 only): policy.pt (actor), method.json and the method's own (RGSD:
        discovery_encoder.pt; CALM: clip_latents.json)."""
        if not self.is_main:
            return
        meta = self.policy_meta(self.env.core.skill_dim)
        self.ac.actor.save(self.run.policy_path, **meta, action_std=self.ac.log_std.detach().exp().tolist())
        write_method_file(self.run, self.method.export(self.run.path, meta))

    def close(self) -> None:
        """Release the environment."""
        self.env.close()


def env_device(env_cfg: EnvConfig, learner: torch.device) -> str:
    """Device of the env's tensors for a run whose learner is on ``learner`` (``rgsd_envs.utils.device.env_device``)."""
    return device_rule(env_cfg.backend, env_cfg.device, learner)


def reference_mean_action(lib: MotionLib) -> Tensor:
    """The action (69,) whose PD targets are the reference clips' mean joint angles (clipped to [-1, 1])."""
    return reference_actions(lib).mean(0)


def _postfix(m: dict[str, float]) -> str:
    parts = [f"sps={m['charts/SPS']:.0f}"]
    for key, label, scale, fmt in (
        ("rollout/imitation_reward", "r_im", 1.0, ".2f"),
        ("episodes/imitation_length", "len_im", 1.0, ".1f"),
        ("rollout/imitation_cartesian_error", "err_cm", 100.0, ".1f"),
        ("rollout/discovery_reward", "r_disc", 1.0, ".2f"),
        ("probe/cartesian_error_cm", "probe_cm", 1.0, ".1f"),
    ):
        if key in m:
            parts.append(f"{label}={scale * m[key]:{fmt}}")
    return " ".join(parts)
