"""RGSD-SMPL-GoalReaching-v0: reach a goal in a given style with a frozen skill policy.

## Description
A downstream task (the paper's GoalReaching; docs/downstream.md). A trained low-level policy ``pi_low(a | s, z)``
(an rgsd run folder) is frozen; the agent of this environment is the high-level
policy ``pi_high(z | s, g)``: its action is a skill ``z`` that the low-level
policy turns into joint actions. The humanoid starts at the centre of a
20 x 20 m arena from a reference state of the commanded style (reference state
initialisation, any clip for ``freestyle``) with a random heading; the goal is
drawn uniformly in the arena, at least ``min_goal_distance`` from the start.

## Action space
``Box(-1, 1, (skill_dim,), float32)``, ``skill_dim`` the low-level run's
``env.skill_dim`` (16 by default; 256 for ``fb_cpr_paper``): the skill,
normalised to a unit vector before it reaches the low-level policy. Each action is held for ``low_level_steps`` (5)
control steps at 30 Hz: the high-level policy decides at 6 Hz.

## Observation space
``Box(-inf, inf, (364,), float32)``: the 359-D frame features ``o_t`` (as in
RGSD-SMPL-v0; the phase cycles with the start clip's period), the goal position
in the humanoid's heading frame (x forward, y left; 2), and the style as a
one-hot over (freestyle, sidestep, backward) (3). Slices: ``GOAL_OBS_LAYOUT``.

## Reward
``exp(-0.25 * d_goal) + exp(-8 * (1 - max_k cos(z, z_style_k)))`` with ``d_goal``
the horizontal distance from the pelvis to the goal (m) after the action and
``z_style_k`` the embeddings of the style's reference clips (frozen encoder): the
skill is rewarded for closeness to the nearest of them, so the style term is at its
maximum at every style clip's own latent (their mean sits 45-55 degrees from each of
nearly orthogonal clip latents, where the term was 0.03-0.10). ``freestyle`` uses
the first term only. The clip latents are the run's: the frozen encoder's
embeddings (RGSD), the run's ``clip_latents.json`` named in ``method.json`` (CALM:
its motion encoder's embedding of each clip's first window; Meta Motivo: B averaged
over the whole clip, one latent per style clip where its evaluation tracks with one
per step), or ``clip_latents`` from ``rgsd eval`` for best-of-N methods (ASE,
METRA, DIAYN).

## Episode end
Truncated after ``episode_seconds`` (20 s); terminated by a fall (pelvis below
0.35 m or a body other than the feet touching the floor) or simulator
instability. Episodes do not stop at the goal, so reaching it early never costs
reward. ``GoalReachingCore.set_goal`` moves a world's goal mid-episode (``rgsd view``'s
floor click). ``info["success"]``: the pelvis was within ``success_radius`` (0.5 m) of
the goal at a decision of the episode: the distance is tested once per high-level step, after its
``low_level_steps`` control steps, so a path that only grazes the disc between two decisions is not a
success (a run at 3 m/s moves 0.5 m from one decision to the next). Also ``distance``, ``style_cosine`` (the
cosine to the nearest style clip latent, 0 for freestyle), ``fall``.

## Version history
* v0: initial release.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rgsd_envs.envs.config import NO_DEVIATION
from rgsd_envs.envs.core import RGSDCore
from rgsd_envs.envs.observations import FRAME_DIM, SKILL_DIM
from rgsd_envs.envs.smpl_v0 import step_info, vector_info
from rgsd_envs.envs.torch_env import reset_mask_ids, seed_worlds
from rgsd_envs.envs.world_random import Stream
from rgsd_envs.humanoid.mjcf import CONTROL_HZ
from rgsd_envs.motion.library import motion_categories
from rgsd_envs.runs.policy import PolicyMLP, check_policy_fits
from rgsd_envs.runs.run_dir import RunDir, load_clip_latents
from rgsd_envs.utils import rotations as rot
from rgsd_envs.utils.files import InputFileError
from rgsd_envs.utils.host_reads import read_host_flags
from rgsd_envs.utils.threads import env_side

Tensor = torch.Tensor
log = logging.getLogger(__name__)


@functools.cache
def _warn_once(message: str) -> None:
    """A warning logged once per process: a downstream run builds several envs over one low level."""
    log.warning(message)


STYLES = ("freestyle", "sidestep", "backward")
"""Style commands; sidestep and backward name the motion categories they follow."""
GOAL_OBS_DIM = FRAME_DIM + 2 + len(STYLES)
GOAL_OBS_LAYOUT: dict[str, slice] = {
    "frame": slice(0, FRAME_DIM),
    "goal": slice(FRAME_DIM, FRAME_DIM + 2),
    "style": slice(FRAME_DIM + 2, GOAL_OBS_DIM),
}
"""Slices of the 364-D observation."""


@dataclass
class GoalReachingConfig:
    """Task parameters of RGSD-SMPL-GoalReaching-v0 (see the module docstring)."""

    style: str = "freestyle"
    """The style command: "freestyle" (reach the goal, any motion), "sidestep" or "backward" (reach it in the style
    of the low-level run's clips of that category, which also give the start states)."""
    arena_size: float = 20.0
    """Side of the square arena (m); the start is at its centre."""
    min_goal_distance: float = 1.0
    """Goals are drawn uniformly in the arena at least this far from the start (m)."""
    success_radius: float = 0.5
    """An episode succeeds once the pelvis is this close to the goal (m, horizontal) at a decision: tested after
    each high-level step's ``low_level_steps`` control steps, not between them."""
    episode_seconds: float = 20.0
    """Episode length (s of simulated time); episodes do not end at the goal."""
    low_level_steps: int = 5
    """Control steps (1/30 s each) per high-level action."""
    distance_scale: float = 0.25
    """a of the reward's goal term exp(-a d_goal), d_goal the pelvis-goal distance in m (the paper's 0.25)."""
    style_scale: float = 8.0
    """b of the reward's style term exp(-b (1 - cos)), cos the skill's cosine to the nearest style clip latent (the
    paper's 8; no style term for freestyle)."""
    num_threads: int | None = None
    """C threads stepping the worlds, in place of the low-level run's ``env.num_threads`` (None: one per core, at
    most the worlds)."""
    device: str = "cpu"
    """Torch device of the env-side tensors and of the frozen low-level policy, in place of the low-level run's
    ``env.device``; under ``rgsd downstream`` a MuJoCo Warp low level's worlds follow the learner's device instead."""
    clip_latents: str | None = None
    """A JSON file {clip name: latent (16 floats)} giving each clip's latent instead of the run's encoder
    embeddings: the style latent of a method that picks clip latents as the best of N (ASE, METRA, DIAYN).
    ``rgsd eval`` writes one per run: ``<report>/<run>/clip_latents.json``."""

    def __post_init__(self) -> None:
        if self.style not in STYLES:
            raise ValueError(f"style must be one of {', '.join(STYLES)}, got {self.style!r}")
        if self.low_level_steps < 1:
            raise ValueError(f"low_level_steps must be >= 1, got {self.low_level_steps}")


def style_cosine(z: Tensor, z_style: Tensor) -> Tensor:
    """Cosine (N,) between skills z (N, 16) and the nearest of the style latents z_style (K, 16) or (16,)."""
    return (torch.nn.functional.normalize(z, dim=-1) @ torch.atleast_2d(z_style).T).amax(-1)


def goal_reward(distance: Tensor, z: Tensor, z_style: Tensor | None, cfg: GoalReachingConfig) -> Tensor:
    """exp(-0.25 d) + exp(-8 (1 - cos to the nearest style latent)); the style term is dropped for freestyle."""
    r = torch.exp(-cfg.distance_scale * distance)
    if z_style is not None:
        r = r + torch.exp(-cfg.style_scale * (1.0 - style_cosine(z, z_style)))
    return r


def goal_in_heading_frame(root_pos: Tensor, root_rot: Tensor, goal: Tensor) -> Tensor:
    """Goal (N, 2) relative to the pelvis, in its yaw-only frame (x forward, y left)."""
    d = goal - root_pos[:, :2]
    yaw = rot.heading_angle(root_rot)
    c, s = torch.cos(yaw), torch.sin(yaw)
    return torch.stack((c * d[:, 0] + s * d[:, 1], -s * d[:, 0] + c * d[:, 1]), dim=-1)


def style_embedding(core: RGSDCore, style: str, clip_latents: Tensor | None = None) -> Tensor | None:
    """z_style (K, 16): the normalised latents of the style's K clips (``clip_latents``, else the encoder's
    embeddings; None for freestyle)."""
    if style == "freestyle":
        return None
    ids = [i for i, c in enumerate(core.lib.categories) if c == style]
    if not ids:
        raise ValueError(style_without_clips(style, core.lib.categories))
    latents = core.clip_embeddings if clip_latents is None else clip_latents
    return torch.nn.functional.normalize(latents[ids], dim=-1)


def style_without_clips(style: str, categories: Iterable[str]) -> str:
    """Why ``style`` cannot be commanded over clips of ``categories``, and what to do instead."""
    return (
        f"style {style!r} needs reference clips of category {style!r}; the low-level run's clips have "
        f"categories {sorted(set(categories))} (choose one of those styles, freestyle, or a low level trained on "
        f"{style} clips)"
    )


def low_level_motions(run: RunDir) -> Any:
    """The low-level run's clips (its config.yaml's ``env.motions``), or an error naming that field of that file
    and how to point it at clips that moved (neither ``gym.make`` nor ``rgsd downstream`` takes other clips: the
    worlds start from the ones the low level trained on)."""
    return run.training_motions(
        fix="put the clips back there or set env.motions in the low-level run's config.yaml to where they are now",
        role="the low-level run",
    )


def check_style(run: RunDir, style: str) -> None:
    """An InputFileError naming the run's ``env.motions`` unless its clips exist (``low_level_motions``) and have
    ``style``'s category (freestyle needs none): said before any simulator is built or file written."""
    motions = low_level_motions(run)
    if style == "freestyle":
        return
    categories = motion_categories(motions)
    if style not in categories:
        raise InputFileError(run.config_path, style_without_clips(style, categories), "env.motions")


class MissingLowLevelPolicyError(ValueError):
    """RGSD-SMPL-GoalReaching-v0 was made without the low-level policy it drives."""

    def __init__(self) -> None:
        super().__init__(
            "RGSD-SMPL-GoalReaching-v0 needs a trained low-level policy: pass low_level=<run folder or policy.pt>, "
            'e.g. gym.make("RGSD-SMPL-GoalReaching-v0", low_level="runs/demo"); '
            "the shipped one works at once: its folder is rgsd_agents.pretrained.pretrained_run() (`rgsd play "
            "--pretrained` prints it), or train one with `rgsd train --config demo --out runs/demo`"
        )


def low_level_run(low_level: str | os.PathLike | RunDir | None) -> RunDir:
    """The run folder of a low-level policy given as a run folder or its ``policy.pt``."""
    if isinstance(low_level, RunDir):
        return low_level
    if low_level is None or str(low_level) == "":
        raise MissingLowLevelPolicyError()
    path = Path(low_level)
    return RunDir(path.parent if path.is_file() and path.name == RunDir.POLICY else path)


class GoalReachingCore:
    """N worlds of the goal-reaching task driven by a frozen low-level policy."""

    def __init__(
        self,
        num_envs: int,
        low_level: str | os.PathLike | RunDir | None,
        config: GoalReachingConfig | None = None,
        env_overrides: Mapping[str, Any] | None = None,
    ):
        """N worlds over the ``low_level`` run's env; ``env_overrides`` replace more of its env settings
        (``CPU_MUJOCO``: the viewer's native MuJoCo on the CPU)."""
        self.cfg = config or GoalReachingConfig()
        run = low_level_run(low_level)
        run.check(RunDir.CONFIG, RunDir.POLICY)
        check_style(run, self.cfg.style)
        overrides = {"num_threads": self.cfg.num_threads, "device": self.cfg.device, "eval_kappa": None}
        env_cfg = dataclasses.replace(run.env_config(**{**overrides, **(env_overrides or {})}), deviation=NO_DEVIATION)
        # the encoder whose clip embeddings are the run's clip latents (method.json's "encoder" choice), else
        # encoder.pt (best-of-N methods: ASE, METRA, DIAYN keep their random frozen encoder's embeddings; runs with
        # stored clip_latents.json, CALM and Meta Motivo, take their latents from that file below)
        latent_encoder = run.latent_encoder_path() or (run.encoder_path if run.encoder_path.exists() else None)
        encoder = None if latent_encoder is None else str(latent_encoder)
        self.core = RGSDCore(num_envs, env_cfg, encoder=encoder)
        self.policy: PolicyMLP = run.load_policy().to(self.core.device)
        check_policy_fits(self.policy, run.policy_path, self.core.layout)
        self.num_envs = num_envs
        self.device = self.core.device
        stored = self.cfg.clip_latents if self.cfg.clip_latents is not None else run.clip_latents_path()
        self.clip_latents = (
            self.core.clip_embeddings
            if stored is None
            else load_clip_latents(stored, list(self.core.lib.names), self.core.device, self.core.skill_dim, run.path)
        )
        """(clips, 16) each clip's latent: ``clip_latents``, the run's stored ones (method.json) or its encoder
        embeddings."""
        info = run.method()
        if info is not None and info["latent_choice"] == "best_of_n" and self.cfg.clip_latents is None:
            _warn_once(
                f"{run.path} picks clip latents as the best of N ({info['name']}): without task.clip_latents (rgsd "
                "eval writes <report>/<run>/clip_latents.json) the style latent comes from its unused encoder.pt"
            )
        self.z_style = style_embedding(self.core, self.cfg.style, self.clip_latents)
        lib = self.core.lib
        self.start_clips = (
            list(range(lib.num_clips))
            if self.cfg.style == "freestyle"
            else [i for i, c in enumerate(lib.categories) if c == self.cfg.style]
        )
        self.style_onehot = torch.zeros(len(STYLES), device=self.device)
        self.style_onehot[STYLES.index(self.cfg.style)] = 1.0
        self.goal = torch.zeros(num_envs, 2, device=self.device)
        self.steps = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self.success = torch.zeros(num_envs, dtype=torch.bool, device=self.device)
        self.steps_host = np.zeros(num_envs, dtype=np.int64)
        """(N,) host copy of ``steps`` (the host knows when an episode times out without reading the device)."""
        self.max_steps = round(self.cfg.episode_seconds * CONTROL_HZ / self.cfg.low_level_steps)
        self.recording: list[Tensor] | None = None
        """Set to a list to record body positions (N, 24, 3) after every 30 Hz control step."""

    def reset_envs(self, env_ids: Any) -> None:
        """New episodes: RSI from the style's clips, moved to the centre, random heading and goal (batched)."""
        env_ids = np.asarray(env_ids, dtype=np.int64).reshape(-1)
        if env_ids.size == 0:
            return
        rand = self.core.random  # all draws at the episode's counter, before reset_envs moves it on
        u = rand.uniform(env_ids, Stream.GOAL, 2)
        starts = np.asarray(self.start_clips)
        clips = starts[np.minimum((u[:, 0] * starts.size).astype(np.int64), starts.size - 1)]
        yaw = torch.from_numpy(-math.pi + 2.0 * math.pi * u[:, 1])
        half = self.cfg.arena_size / 2
        goals = np.zeros((env_ids.size, 2))
        pending = np.arange(env_ids.size)
        for attempt in range(1000):  # uniform in the arena, not on top of the start
            if pending.size == 0:
                break
            g = (2.0 * rand.uniform(env_ids[pending], Stream.GOAL_POSITION + attempt, 2) - 1.0) * half
            ok = np.hypot(g[:, 0], g[:, 1]) >= self.cfg.min_goal_distance
            goals[pending[ok]] = g[ok]
            pending = pending[~ok]
        self.core.reset_envs(env_ids, {"clip": clips, "task": "imitation"})
        ids = self.core.device_ids(env_ids)
        st = self.core.backend.state(ids)
        qpos, qvel = st.qpos.clone().double(), st.qvel.clone().double()
        turn = rot.yaw_quat(yaw.to(qpos.device, non_blocking=True) - rot.heading_angle(qpos[:, 3:7]))
        qpos[:, :2] = 0.0
        qpos[:, 3:7] = rot.quat_mul(turn, qpos[:, 3:7])
        qvel[:, :3] = rot.quat_rotate(turn, qvel[:, :3])  # world linear velocity turns too
        self.core.backend.set_state(ids, qpos, qvel)
        self.core.observe(ids)
        self.goal[ids] = torch.tensor(goals, dtype=torch.float32).to(self.device, non_blocking=True)
        self.steps.index_fill_(0, ids, 0)  # ``x[ids] = 0`` would upload the 0 with a blocking copy
        self.steps_host[env_ids] = 0
        self.success.index_fill_(0, ids, False)

    def set_goal(self, env_ids: Any, goal: Any) -> None:
        """Move the goal of worlds ``env_ids`` to ``goal`` (world x, y in m: (2,) or one row per world) mid-episode."""
        env_ids = np.asarray(env_ids, dtype=np.int64).reshape(-1)
        g = torch.as_tensor(np.asarray(goal, dtype=np.float32).reshape(-1, 2))
        if g.shape[0] not in (1, env_ids.size) or not torch.isfinite(g).all():
            raise ValueError(f"goal must be finite, (2,) or ({env_ids.size}, 2); got {tuple(np.shape(goal))}")
        ids = self.core.device_ids(env_ids)
        self.goal[ids] = g.expand(env_ids.size, 2).to(self.device)
        self.success.index_fill_(0, ids, False)  # success means reaching this goal, not the one before

    def observation(self) -> Tensor:
        """(N, 364): frame features, goal in the heading frame, style one-hot."""
        st = self.core.backend.state()
        goal = goal_in_heading_frame(st.body_pos[:, 0].to(self.device), st.body_rot[:, 0].to(self.device), self.goal)
        return torch.cat((self.core.features, goal, self.style_onehot.expand(self.num_envs, -1)), dim=-1)

    @torch.no_grad()
    def step(self, z: Tensor) -> tuple[Tensor, Tensor, Tensor, dict[str, Tensor]]:
        """Run the low-level policy on skill z for ``low_level_steps``; reward, terminated, truncated, info."""
        self.core.require_started()
        z = torch.nn.functional.normalize(z.to(self.device, torch.float32), dim=-1)
        fell = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        for _ in range(self.cfg.low_level_steps):
            action = self.policy(torch.cat((self.core.features, z), dim=-1))
            self.core.physics_step(action.clamp(-1.0, 1.0))
            lib = self.core.lib
            # the phase cycles with the start clip's period (clips loop)
            self.core.frame = self.core.frame % (lib.num_frames[self.core.clip] - 1)
            self.core.frame_host %= self.core._num_frames[self.core.clip_host] - 1
            info = self.core.observe()
            fell |= info.fall | info.unstable
            if self.recording is not None:
                self.recording.append(self.core.backend.state().body_pos.to(self.device).clone())
        self.steps += 1
        self.steps_host += 1
        root = self.core.backend.state().body_pos[:, 0].to(self.device)
        distance = (root[:, :2] - self.goal).norm(dim=-1)
        # success is tested at decisions only (the shipped figures measure it so): a pass between two is missed
        self.success |= distance < self.cfg.success_radius
        reward = goal_reward(distance, z, self.z_style, self.cfg)
        truncated = ~fell & (self.steps >= self.max_steps)
        style_cos = style_cosine(z, self.z_style) if self.z_style is not None else torch.zeros_like(distance)
        return (
            reward,
            fell,
            truncated,
            {"distance": distance, "success": self.success.clone(), "style_cosine": style_cos, "fall": fell},
        )

    def close(self) -> None:
        """Release the simulator."""
        self.core.close()


@dataclass
class GoalStepExtras:
    """Per-world tensors of a goal-reaching step before the autoreset, plus the step's one host copy."""

    done: Tensor
    time_outs: Tensor
    final_obs: Tensor
    """(N, 364) observation each world reached (before finished worlds restart)."""
    distance: Tensor
    success: Tensor
    style_cosine: Tensor
    fall: Tensor
    done_host: np.ndarray
    time_outs_host: np.ndarray


class GoalReachingTorchEnv:
    """N worlds of the goal-reaching task with tensors in and out on ``device`` (the downstream trainer's
    interface; one host read per step, as ``RGSDTorchEnv``)."""

    def __init__(
        self,
        num_envs: int = 16,
        low_level: str | os.PathLike | None = None,
        config: GoalReachingConfig | dict | None = None,
        **overrides: Any,
    ):
        self.cfg = _config(config, overrides)
        self.num_envs = num_envs
        self.task = GoalReachingCore(num_envs, low_level, self.cfg)
        self.device = self.task.device
        self.skill_dim = self.task.core.skill_dim
        """Size of the action (the low-level run's ``env.skill_dim``)."""

    def reset(
        self, seed: int | list[int | None] | None = None, env_ids: Any = None
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """Reset worlds ``env_ids`` (host indices; None: every world), seeding them first (an int seed gives world i
        seed + i, a list one seed per world: ``seed_worlds``); observations (N, 364) and goals (N, 2) of every world."""
        ids = np.arange(self.num_envs) if env_ids is None else np.asarray(env_ids, dtype=np.int64).reshape(-1)
        seed_worlds(self.task.core, ids, seed)
        self.task.reset_envs(ids)
        return self.task.observation(), {"goal": self.task.goal.clone()}

    def step(self, z: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, GoalStepExtras]:
        """Hold skills z (N, 16) for ``low_level_steps`` control steps; finished worlds restart (SameStep)."""
        if tuple(z.shape) != (self.num_envs, self.skill_dim):
            raise ValueError(f"action (skill) has shape {tuple(z.shape)}; expected {(self.num_envs, self.skill_dim)}")
        task = self.task
        reward, fell, truncated, info = task.step(z)
        final_obs = task.observation()
        packet = read_host_flags(torch.stack((fell, ~torch.isfinite(z).all(dim=-1).to(fell.device))))
        if packet[1].any():
            raise ValueError("action (skill) contains NaN or inf")
        term_host = packet[0]
        trunc_host = ~term_host & (task.steps_host >= task.max_steps)
        done_host = term_host | trunc_host
        ids = np.flatnonzero(done_host)
        obs = final_obs
        if ids.size:
            task.reset_envs(ids)
            obs = task.observation()
        extras = GoalStepExtras(
            fell | truncated,
            truncated,
            final_obs,
            info["distance"],
            info["success"],
            info["style_cosine"],
            fell,
            done_host,
            trunc_host,
        )
        return obs, reward, fell, truncated, extras

    def close(self) -> None:
        """Release the simulator."""
        self.task.close()


def _spaces(skill_dim: int = SKILL_DIM) -> tuple[spaces.Box, spaces.Box]:
    return (
        spaces.Box(-np.inf, np.inf, (GOAL_OBS_DIM,), np.float32),
        spaces.Box(-1.0, 1.0, (skill_dim,), np.float32),
    )


def _check_action(z: Any, shape: tuple[int, ...]) -> Tensor:
    t = torch.as_tensor(np.asarray(z, dtype=np.float32))
    if tuple(t.shape) != shape:
        raise ValueError(f"action (skill) has shape {tuple(t.shape)}; expected {shape}")
    if not torch.isfinite(t).all():
        raise ValueError("action (skill) contains NaN or inf")
    return t


def _config(config: GoalReachingConfig | dict | None, overrides: dict[str, Any]) -> GoalReachingConfig:
    base = vars(config).copy() if isinstance(config, GoalReachingConfig) else dict(config or {})
    base.update(overrides)
    return GoalReachingConfig(**base)


def check_goal_reset_options(options: dict[str, Any] | None, known: tuple[str, ...]) -> None:
    """A ValueError naming a reset option the goal-reaching env does not take (the imitation env's clip, task,
    skill, ... choose the low level's episodes, which this task draws itself): ignored, it would do nothing."""
    unknown = [k for k in options or {} if k not in known]
    if unknown:
        takes = f"takes only {', '.join(known)}" if known else "takes none"
        raise ValueError(f"unknown reset option {unknown[0]!r}: RGSD-SMPL-GoalReaching-v0 {takes}")


STEP_INFO_KEYS = ("distance", "success", "style_cosine", "fall")
"""The per-world numbers of a step's info (the docstring's Episode end)."""


class GoalReachingEnv(gym.Env):
    """One world of RGSD-SMPL-GoalReaching-v0 (see the module docstring)."""

    metadata = {"render_modes": []}

    def __init__(
        self,
        low_level: str | os.PathLike | None = None,
        config: GoalReachingConfig | dict | None = None,
        **overrides: Any,
    ):
        self.cfg = _config(config, overrides)
        self.task = GoalReachingCore(1, low_level, self.cfg)
        self.observation_space, self.action_space = _spaces(self.task.core.skill_dim)

    @env_side
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        """New episode: start at the centre, goal somewhere in the arena."""
        check_goal_reset_options(options, ())
        super().reset(seed=seed)
        if seed is not None:
            self.task.core.seed([0], [seed])
        self.task.reset_envs([0])
        return self.task.observation()[0].cpu().numpy(), {"goal": self.task.goal[0].cpu().numpy().copy()}

    @env_side
    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Hold skill ``action`` for ``low_level_steps`` control steps."""
        z = _check_action(action, (self.task.core.skill_dim,))
        reward, term, trunc, info = self.task.step(z.unsqueeze(0))
        out = {k: info[k][0].item() for k in STEP_INFO_KEYS}
        return self.task.observation()[0].cpu().numpy(), float(reward[0]), bool(term[0]), bool(trunc[0]), out

    def close(self) -> None:
        """Release the simulator."""
        self.task.close()


class GoalReachingVectorEnv(VectorEnv):
    """N worlds of RGSD-SMPL-GoalReaching-v0 (autoreset SameStep; ``reset_mask``, ``final_obs``, ``final_info`` and
    the ``_key`` masks as ``SyncVectorEnv`` gives them): a numpy adapter over ``GoalReachingTorchEnv``."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(
        self,
        num_envs: int = 16,
        low_level: str | os.PathLike | None = None,
        config: GoalReachingConfig | dict | None = None,
        **overrides: Any,
    ):
        self.torch_env = GoalReachingTorchEnv(num_envs, low_level, config, **overrides)
        self.cfg = self.torch_env.cfg
        self.num_envs = num_envs
        self.task = self.torch_env.task
        self.single_observation_space, self.single_action_space = _spaces(self.torch_env.skill_dim)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)

    @env_side
    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict]:
        """Reset every world (or those in ``options["reset_mask"]``); int seeds give world i seed + i."""
        check_goal_reset_options(options, ("reset_mask",))
        ids = reset_mask_ids((options or {}).get("reset_mask"), self.num_envs)
        obs, info = self.torch_env.reset(seed, ids)
        return obs.cpu().numpy(), vector_info({"goal": info["goal"][ids].cpu().numpy()}, ids, self.num_envs, rows=ids)

    @env_side
    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step all worlds; finished episodes restart at once (their info is the new episode's goal, the step's is
        in ``final_info``, as SyncVectorEnv gives it)."""
        z = _check_action(actions, (self.num_envs, self.torch_env.skill_dim))
        obs, reward, _, _, ex = self.torch_env.step(z.to(self.torch_env.device))
        values = {k: getattr(ex, k).cpu().numpy() for k in STEP_INFO_KEYS}
        done = np.flatnonzero(ex.done_host)
        final = goals = None
        if done.size:
            final = {
                "final_obs": ex.final_obs.cpu().numpy()[done],
                "final_info": {k: v[done] for k, v in values.items()},
            }
            goals = {"goal": self.task.goal[self.task.core.device_ids(done)].cpu().numpy()}
        infos = step_info(values, self.num_envs, done, goals, final)
        terminated = ex.done_host & ~ex.time_outs_host
        return obs.cpu().numpy(), reward.cpu().numpy().astype(np.float64), terminated, ex.time_outs_host.copy(), infos

    def close_extras(self, **kwargs: Any) -> None:
        """Release the simulator (none yet where the constructor refused its arguments: Gymnasium closes on deletion)."""
        task = getattr(self, "task", None)
        if task is not None:
            task.close()
