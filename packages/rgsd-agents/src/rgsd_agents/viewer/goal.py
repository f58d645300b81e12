"""The viewer's downstream simulation: a goal-reaching run's high-level policy live in one world, goal movable.

A folder ``rgsd downstream`` wrote (its config.yaml names the frozen ``low_level`` run) is played as the task
RGSD-SMPL-GoalReaching-v0 defines it: the high-level policy picks a skill z every ``task.low_level_steps``
control steps from the observation with the goal in the humanoid's heading frame, and the low-level policy
turns z into joint actions. The episode starts as the task's do (centre of the arena, a start clip's pose, a
random heading and goal) but never times out: the goal stays until ``set_goal`` moves it (the page's floor
click), and a fall restarts the episode with the same goal. A low-level ``policy.pt`` other than the one the run
recorded (``low_level_sha256``) is played with a warning. Nothing here draws: ``viewer.app`` shows the state.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import torch

from rgsd_agents.downstream.low_level import warn_other_low_level
from rgsd_envs.envs.config import CPU_MUJOCO
from rgsd_envs.envs.goal_reaching_v0 import GOAL_OBS_DIM, GoalReachingCore, low_level_run
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.files import InputFileError


def is_downstream_run(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a run folder of ``rgsd downstream`` (``RunDir.kind``; an unreadable config.yaml is left
    to the skill-run loader to report)."""
    return RunDir(path).kind() == RunDir.DOWNSTREAM_RUN


def floor_point(origin: np.ndarray, direction: np.ndarray, height: float = 0.0) -> np.ndarray | None:
    """(3,) where the ray ``origin + t direction`` (t > 0) meets the plane z = ``height``; None if it never does."""
    o, d = np.asarray(origin, dtype=np.float64), np.asarray(direction, dtype=np.float64)
    if abs(d[2]) < 1e-9:
        return None
    t = (height - o[2]) / d[2]
    return None if t <= 0 else o + t * d


class GoalSession:
    """A downstream run's policy reaching a goal in one world, one control step at a time (module docstring)."""

    def __init__(self, run: str | os.PathLike, seed: int = 0) -> None:
        """Load the run (config.yaml, policy.pt) and its low-level run, and start an episode."""
        from rgsd_agents.downstream.runner import DownstreamConfig
        from rgsd_envs.utils.config import from_dict

        self.run = RunDir(run)
        self.run.check(RunDir.CONFIG, RunDir.POLICY)
        self.cfg: DownstreamConfig = from_dict(DownstreamConfig, self.run.config(), str(self.run.config_path))
        self.policy = self.run.load_policy()
        low = low_level_run(self.cfg.low_level)
        warn_other_low_level(self.run, low, self.cfg.low_level_sha256)
        # the high level's action is a skill of the low-level run's size, which need not be the default 16
        skill_dim = low.env_config().skill_dim
        if (self.policy.obs_dim, self.policy.act_dim) != (GOAL_OBS_DIM, skill_dim):
            raise InputFileError(
                self.run.policy_path,
                f"policy maps {self.policy.obs_dim} -> {self.policy.act_dim}; a high-level policy over the low-level "
                f"run {self.cfg.low_level} (env.skill_dim {skill_dim}) maps {GOAL_OBS_DIM} -> {skill_dim}",
                "obs_dim" if self.policy.obs_dim != GOAL_OBS_DIM else "act_dim",
            )
        # the viewer's one world runs on native MuJoCo on the CPU whatever backend and device the run trained on
        task_cfg = dataclasses.replace(self.cfg.task, device=CPU_MUJOCO["device"], num_threads=1)
        self.task = GoalReachingCore(1, self.cfg.low_level, task_cfg, env_overrides=CPU_MUJOCO)
        self.task.core.seed([0], [seed])
        self.frame = 0
        """Control steps since the episode started."""
        self.style_cosine = 0.0
        """Cosine of the last skill to the nearest style clip latent (0 for freestyle)."""
        self._frames: list[np.ndarray] = []
        self._fell = False
        self.task.reset_envs([0])
        self._pose = self._simulated_pose()

    @property
    def style(self) -> str:
        """The run's style command."""
        return self.cfg.task.style

    @property
    def success_radius(self) -> float:
        """Distance to the goal (m) within which it counts as reached."""
        return float(self.cfg.task.success_radius)

    def goal(self) -> np.ndarray:
        """(2,) the goal's world position (m)."""
        return self.task.goal[0].cpu().double().numpy()

    def set_goal(self, x: float, y: float) -> None:
        """Move the goal to the floor point (x, y) (m); the policy sees it at its next decision."""
        self.task.set_goal([0], (x, y))

    def reset(self) -> None:
        """Start a new episode at the arena's centre with the goal where it is."""
        goal = self.goal()
        self.task.reset_envs([0])
        self.task.set_goal([0], goal)
        self._frames, self._fell, self.frame = [], False, 0
        self._pose = self._simulated_pose()

    def step(self) -> None:
        """One control step (1/30 s) of the drawn pose; a fall restarts the episode once its frames are shown."""
        if not self._frames:
            if self._fell:
                self.reset()
            self._decide()
        self._pose = self._frames.pop(0)
        self.frame += 1

    def observation(self) -> np.ndarray:
        """(364,) what the high-level policy sees now (``GOAL_OBS_LAYOUT``) for the simulated state."""
        return self.task.observation()[0].cpu().double().numpy()

    def body_positions(self) -> np.ndarray:
        """(1, 24, 3) the drawn pose's body positions (m): the simulation up to ``low_level_steps`` - 1 steps ago."""
        return self._pose[None]

    def pelvis_positions(self) -> np.ndarray:
        """(1, 3) the drawn pose's pelvis position (m)."""
        return self._pose[None, 0]

    def distance(self) -> float:
        """Horizontal distance (m) from the drawn pelvis to the goal."""
        return float(np.linalg.norm(self._pose[0, :2] - self.goal()))

    def close(self) -> None:
        """Free the simulator."""
        self.task.close()

    def _decide(self) -> None:
        """One high-level step: a skill from the current observation, held for ``low_level_steps`` control steps
        whose poses are queued for drawing (the task steps them in one call)."""
        from rgsd_agents.downstream.runner import deterministic_skill

        with torch.no_grad():
            z = deterministic_skill(self.policy, self.task.observation())
        self.task.recording = []
        try:
            _, fell, _, info = self.task.step(z)
            frames = self.task.recording
        finally:
            self.task.recording = None
        self._frames = [f[0].cpu().double().numpy() for f in frames]
        self._fell = bool(fell[0])
        self.style_cosine = float(info["style_cosine"][0])

    def _simulated_pose(self) -> np.ndarray:
        return self.task.core.backend.state().body_pos[0].cpu().double().numpy()
