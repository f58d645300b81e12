"""The off-policy training loop: batched worlds fill a replay buffer, many gradient steps per batch of steps.

One iteration (``OffPolicyRunner.iterate``): ``steps_per_iteration`` steps of
all ``num_envs`` worlds, each transition ``(o_t, a_t, o_{t+1}, z, terminated)``
into the replay buffer (``rgsd_agents.rl.replay``) on the learner's device, then
``updates_per_iteration`` gradient steps of the method (``FBCPRAgent.update``)
on replay minibatches and expert windows of the reference clips. The worlds run
discovery episodes only (``env.p_imitation: 0``, the env's reward unused); the
method sets every world's latent through ``env.set_skills``: a new one at each
episode start and every ``update_z_every`` steps. The first ``random_steps``
transitions take uniformly random actions, and updates start after them.

The schedule's defaults are the paper's own loop, which ran on 50 CPU worlds:
50 updates after every 10 steps (500 transitions), i.e. 0.1 gradient steps of
1024 samples per transition, each transition replayed ~100 times; the replay
buffer is smaller than its 5 M so that it fits a CPU machine's memory. With N
worlds keep that ratio: ``updates_per_iteration`` ~ 0.1 * N *
``steps_per_iteration`` (on a GPU with 4096 worlds: 1 step and ~400 updates per
iteration, the massively parallel regime). On a CPU the updates, not the worlds,
bound the speed: one update of 256-unit networks on 256 samples takes ~0.3 s on
one busy core, one of the paper's 1024-unit networks on 1024 samples ~6 s.

Everything else is the PPO runner's: the run folder, ``TrainConfig`` (seed,
device, env, networks.actor_hidden, iterations, checkpoints, max_minutes),
TensorBoard, the imitation probe every ``probe_every`` iterations (the actor with each clip's per-step tracking
latents, as evaluation uses them), Ctrl-C, checkpoints and exact resume through ``loop.TrainingLoop``
(the replay buffer's rows are in the checkpoint while they take at most
``replay_checkpoint_max_gb``; a larger buffer is refilled on resume). Export:
``policy.pt`` (the actor, an ``rgsd-policy`` with a tanh output), each clip's
per-step latents in ``tracking_latents.npz`` (the tracking inference), its
whole-clip latent in ``clip_latents.json``, and ``method.json`` naming them for
rgsd eval.
One process: data-parallel training is not supported.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

import rgsd_envs  # noqa: F401  (registers RGSD-SMPL-v0)
from rgsd_agents.config import TrainConfig, resolve, training_world_seed
from rgsd_agents.probe import ProbeHooks
from rgsd_agents.rl.loop import TrainingLoop, load_generator_state
from rgsd_agents.rl.precision import configure_tf32
from rgsd_agents.rl.replay import ReplayBuffer
from rgsd_agents.training.offpolicy_config import OffPolicyConfig
from rgsd_envs.envs.observations import FRAME_DIM
from rgsd_envs.envs.torch_env import RGSDTorchEnv
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.runs.policy import PolicyMLP
from rgsd_envs.runs.run_dir import RunDir, save_tracking_latents
from rgsd_envs.utils.config import from_dict, save_yaml, to_dict
from rgsd_envs.utils.device import HostBridge, resolve_device
from rgsd_envs.utils.files import atomic_path, output_folder
from rgsd_envs.utils.threads import torch_threads

Tensor = torch.Tensor
log = logging.getLogger(__name__)


class OffPolicyRunner(ProbeHooks, TrainingLoop):
    """Builds the env, replay buffer and FB-CPR agent for a run folder; ``learn()`` trains (module docstring)."""

    CONFIG_CLASS = TrainConfig
    RESUME_REQUIRES = (RunDir.CONFIG,)
    CHECKPOINT_FORMAT = "rgsd-offpolicy-checkpoint"
    CHECKPOINT_VERSION = 1

    def __init__(self, cfg: TrainConfig, run_dir: str | Path, progress: bool = True, _resume: bool = False):
        super().__init__()
        from rgsd_agents.methods import fb_cpr  # the method imports this module's OffPolicyConfig
        from rgsd_agents.training.runner import env_device, prepare_encoder

        self.run = RunDir(run_dir)
        self.progress = progress
        self.device = resolve_device(cfg.device)  # before any file is written: a bad device leaves no folder
        self.bridge = HostBridge(self.device)
        configure_tf32(self.device)
        if cfg.torch_threads is not None:
            torch.set_num_threads(cfg.torch_threads)
        if cfg.method.name != fb_cpr.NAME:
            raise ValueError(f"the off-policy runner trains method.name {fb_cpr.NAME!r}, got {cfg.method.name!r}")
        self.method_cfg: fb_cpr.FBCPRConfig = from_dict(
            fb_cpr.FBCPRConfig, dict(cfg.method.options or {}), str(self.run.config_path), "method.options."
        )
        if self.method_cfg.z_dim != cfg.env.skill_dim:  # z is written into the env's skill slot
            raise ValueError(
                f"method.options.z_dim ({self.method_cfg.z_dim}) must equal env.skill_dim ({cfg.env.skill_dim}): "
                "FB-CPR's latent is the env's skill; set both (--set method.options.z_dim=N --set env.skill_dim=N)"
            )
        if not _resume:
            output_folder(self.run.path)
            resolve(cfg)
            cfg.method.options = to_dict(self.method_cfg)
            save_yaml(cfg, self.run.config_path)
            # the env's random encoder, as every method's run folder holds one (downstream and evaluation build
            # their envs from it); training itself runs without the encoder reward
            prepare_encoder(cfg, self.run, progress)
        self.cfg = cfg
        self.loop_cfg: OffPolicyConfig = self.method_cfg.loop
        self.env_cfg = dataclasses.replace(cfg.env, device=env_device(cfg.env, self.device))
        self.env = RGSDTorchEnv(cfg.num_envs, config=self.env_cfg, encoder_reward=False)
        core = self.env.core
        lib = core.lib
        self.agent = fb_cpr.FBCPRAgent(
            self.method_cfg, self.env.act_dim, cfg.networks.actor_hidden, cfg.networks.activation, self.device, cfg.seed
        )
        self.ref_features = core.ref_features.to(self.device, torch.float32)
        """(F, 359) every reference frame's features (expert windows, clip and tracking latents)."""
        self.expert = fb_cpr.ExpertWindows(
            self.ref_features, lib.starts.to(self.device), lib.num_frames.to(self.device), self.method_cfg.seq_length
        )
        d, f32 = self.method_cfg.z_dim, torch.float32
        fields = {
            "obs": ((FRAME_DIM,), f32),
            "action": ((self.env.act_dim,), f32),
            "next_obs": ((FRAME_DIM,), f32),
            "z": ((d,), f32),
            "terminated": ((), torch.bool),
        }
        self.replay = ReplayBuffer(self.loop_cfg.replay_capacity, fields, self.device)
        self.act_gen = torch.Generator(self.device).manual_seed(cfg.seed)
        """Action noise, random actions and rollout latents (learner device)."""
        self.update_gen = torch.Generator(self.device).manual_seed(cfg.seed + 1)
        """Replay minibatches, expert windows, the z mix and the update's noise (learner device)."""
        obs, _ = self.env.reset(seed=training_world_seed(cfg.seed, 0, cfg.num_envs))
        self.obs = self.bridge.to_device(obs).clone()
        self.z = torch.zeros(cfg.num_envs, d, device=self.device)
        """(N, d) each world's latent, norm sqrt(d) (the env's skill slot holds z / sqrt(d))."""
        self.episode_steps = torch.zeros(cfg.num_envs, dtype=torch.long, device=self.device)
        """(N,) steps since each world's episode began (a new latent when it is a multiple of update_z_every)."""
        self._all = np.arange(cfg.num_envs)
        self._fb_cpr = fb_cpr

    # -- one iteration ---------------------------------------------------------------------
    def collect(self) -> dict[str, Tensor]:
        """``steps_per_iteration`` steps of all worlds into the replay buffer; returns rollout statistics."""
        agent, env, n = self.agent, self.env, self.cfg.num_envs
        every, sqrt_d = self.method_cfg.update_z_every, math.sqrt(self.method_cfg.z_dim)
        states, terminated = [], []
        for t in range(self.loop_cfg.steps_per_iteration):
            s = self.obs[:, :FRAME_DIM]
            fresh = agent.rollout_latents(n, self.act_gen)
            self.z = torch.where((self.episode_steps % every == 0).unsqueeze(-1), fresh, self.z)
            env.set_skills(self._all, (self.z / sqrt_d).to(env.device))
            if self.global_step + t * n < self.loop_cfg.random_steps:
                action = torch.rand(n, env.act_dim, generator=self.act_gen, device=self.device) * 2 - 1
            else:
                action = agent.act(s, self.z, mean=False, generator=self.act_gen)
            next_obs, _, term, _, extras = env.step(action.to(env.device))
            term = self.bridge.to_device(term, "terminated")
            self.replay.add(
                obs=s,
                action=action,
                next_obs=self.bridge.to_device(extras.final_features, "final_features"),
                z=self.z,
                terminated=term,
            )
            started = self.bridge.to_device(extras.started, "started")
            self.episode_steps = torch.where(started, 0, self.episode_steps + 1)
            states.append(s)
            terminated.append(term)
            self.obs = self.bridge.to_device(next_obs).clone()
        agent.observe(torch.cat(states))  # the normaliser moves between updates, never during one
        return {"terminated": torch.stack(terminated).float().mean()}

    def iterate(self) -> dict[str, float]:
        """Collect, then the gradient steps (once the random phase is over); returns this iteration's metrics."""
        from rgsd_agents.methods.common import to_floats

        start = time.perf_counter()
        with torch_threads(self.cfg.rollout_threads):
            rollout = self.collect()
        t1 = time.perf_counter()
        n_steps = self.loop_cfg.steps_per_iteration * self.cfg.num_envs
        self.global_step += n_steps
        sums: dict[str, Tensor] = {}
        batch = self.method_cfg.batch_size
        updates = 0
        if self.global_step > self.loop_cfg.random_steps and len(self.replay) >= batch:
            for _ in range(self.loop_cfg.updates_per_iteration):
                stats = self.agent.update(
                    self.replay.sample(batch, self.update_gen),
                    self.expert.sample(batch, self.update_gen),
                    self.update_gen,
                )
                for k, v in stats.items():
                    sums[k] = sums[k] + v if k in sums else v
                updates += 1
        t2 = time.perf_counter()
        self.iteration += 1
        seconds = t2 - start
        self.elapsed += seconds
        metrics = {f"method/{k}": v / updates for k, v in to_floats(sums).items()}
        metrics.update({f"rollout/{k}": v for k, v in to_floats(rollout).items()})
        metrics.update(
            {
                "replay/size": float(len(self.replay)),
                "charts/updates": float(updates),
                "charts/iteration": float(self.iteration),
                "charts/SPS": n_steps / seconds,
                "perf/env_seconds": t1 - start,
                "perf/update_seconds": t2 - t1,
                "perf/iteration_seconds": seconds,
            }
        )
        return metrics

    # -- the imitation probe -----------------------------------------------------------------
    def on_start(self, writer: Any) -> None:
        """A probe of the untrained policy on fresh runs (``probe_every`` > 0)."""
        self.start_probe(writer)

    def probe_policy(self) -> PolicyMLP:
        """The actor (observations ``[o_t, z / sqrt(d)]``)."""
        return self.agent.actor

    def probe_candidates(self, clips: Sequence[int]) -> Tensor:
        """(len(clips), 1, T, 16) each of ``clips``' unit latents per step as evaluation uses them (the tracking
        inference; T the longest of these clips' steps, a shorter clip's last row repeated)."""
        every = self.tracking_latents()
        tracks = [every[i] for i in clips]
        T = max(t.shape[0] for t in tracks)
        return torch.stack([torch.cat([t, t[-1:].expand(T - t.shape[0], -1)]) for t in tracks]).unsqueeze(1)

    def postfix(self, metrics: dict[str, float]) -> str:
        """Progress-bar text: SPS, FB and discriminator losses."""
        parts = [f"sps={metrics['charts/SPS']:.0f}"]
        for key, label in (("method/fb_loss", "fb"), ("method/disc_loss", "disc"), ("method/Q_fb", "q_fb")):
            if key in metrics:
                parts.append(f"{label}={metrics[key]:.3g}")
        return " ".join(parts)

    # -- checkpoints -----------------------------------------------------------------------------
    def replay_in_checkpoint(self) -> bool:
        """Whether the replay rows go into checkpoints (at most ``replay_checkpoint_max_gb``)."""
        rows = self.replay.nbytes * len(self.replay) / self.replay.capacity
        return rows <= self.loop_cfg.replay_checkpoint_max_gb * 1e9

    def trainer_state(self) -> dict[str, Any]:
        """Everything the next iteration depends on besides the loop counters."""
        contents = self.replay_in_checkpoint()
        if not contents:
            log.warning("replay buffer above loop.replay_checkpoint_max_gb: checkpoint without it (refilled on resume)")
        return {
            "config": to_dict(self.cfg),
            "agent": self.agent.state_dict(),
            "replay": self.replay.state_dict(contents),
            "env": self.env.state_dict(),
            "obs": self.obs.cpu().clone(),
            "z": self.z.cpu().clone(),
            "episode_steps": self.episode_steps.cpu().clone(),
            "rng": {"act": self.act_gen.get_state(), "update": self.update_gen.get_state(), "device": self.device.type},
        }

    def load_trainer_state(self, state: dict[str, Any]) -> None:
        """Restore ``trainer_state``."""
        self.agent.load_state_dict(state["agent"])
        self.replay.load_state_dict(state["replay"])
        self.env.load_state_dict(state["env"])
        self.obs = state["obs"].to(self.device).clone()
        self.z = state["z"].to(self.device).clone()
        self.episode_steps = state["episode_steps"].to(self.device).clone()
        rng = state["rng"]
        for gen, key in ((self.act_gen, "act"), (self.update_gen, "update")):
            load_generator_state(gen, {"sample": rng[key], "sample_device": rng["device"]}, self.iteration)

    @torch.no_grad()
    def clip_latents(self) -> Tensor:
        """(clips, 16) each clip's unit latent (B averaged over the clip's frames, divided by sqrt(d))."""
        lib = self.env.core.lib
        spans = zip(lib.starts.tolist(), lib.num_frames.tolist())
        z = torch.stack([self.agent.clip_latent(self.ref_features[first : first + count]) for first, count in spans])
        return z / z.norm(dim=-1, keepdim=True)

    @torch.no_grad()
    def tracking_latents(self) -> list[Tensor]:
        """Per clip (frames - 1, 16): its unit latents per step (the tracking inference, divided by sqrt(d))."""
        lib = self.env.core.lib
        spans = zip(lib.starts.tolist(), lib.num_frames.tolist())
        tracks = [self.agent.tracking_latents(self.ref_features[first : first + count]) for first, count in spans]
        return [z / z.norm(dim=-1, keepdim=True) for z in tracks]

    def clip_library(self) -> MotionLib:
        """The clips of ``env.motions`` the worlds play (checked on resume)."""
        return self.env.core.lib

    def export(self) -> None:
        """Write policy.pt (the actor), tracking_latents.npz, clip_latents.json and method.json."""
        from rgsd_agents.methods.runtime import write_method_file

        fb_cpr = self._fb_cpr
        meta = self.policy_meta(self.env.core.skill_dim)
        std = [self.method_cfg.actor_std] * self.env.act_dim
        self.agent.actor.save(self.run.policy_path, **meta, action_std=std)
        names = self.env.core.lib.names
        with atomic_path(self.run.file(RunDir.CLIP_LATENTS)) as tmp:
            latents = dict(zip(names, self.clip_latents().cpu().tolist()))
            Path(tmp).write_text(json.dumps(latents, indent=1) + "\n")
        with atomic_path(self.run.file(RunDir.TRACKING_LATENTS)) as tmp:
            save_tracking_latents(tmp, dict(zip(names, self.tracking_latents())))
        entries = {
            "name": fb_cpr.NAME,
            "latent_choice": fb_cpr.LATENT_CHOICE,
            "tracking_latents": RunDir.TRACKING_LATENTS,
            "clip_latents": RunDir.CLIP_LATENTS,
            "clip_latents_rule": fb_cpr.CLIP_LATENTS_RULE,
        }
        write_method_file(self.run, entries)

    def close(self) -> None:
        """Release the environment."""
        self.env.close()
