"""The interface between the environments and the physics (docs/environments.md, Simulator backends).

A backend holds N worlds of one humanoid model. It sets full states for chosen
worlds, applies PD targets for one control step, and exposes the batched state
as torch tensors on its device. Everything above it (observations, rewards,
terminations, skills) is device-agnostic torch code, so a GPU backend (MuJoCo
Warp, MJX) only has to implement this class.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

import mujoco
import torch

from rgsd_envs.humanoid.mjcf import HumanoidConfig, load_model, physics_substeps

Tensor = torch.Tensor


@dataclass
class SimState:
    """Batched state after a control step; bodies in SMPL order, world frame."""

    qpos: Tensor
    """(N, 76) free joint (pos, quat wxyz) then hinges."""
    qvel: Tensor
    """(N, 75) root linear (world), root angular (pelvis frame), hinges."""
    body_pos: Tensor
    """(N, 24, 3) body origins."""
    body_rot: Tensor
    """(N, 24, 4) body orientations (w, x, y, z)."""
    body_lin_vel: Tensor
    """(N, 24, 3) linear velocities of the body origins."""
    body_ang_vel: Tensor
    """(N, 24, 3) angular velocities."""
    contact: Tensor
    """(N, 24) bool: the body touches the floor."""
    unstable: Tensor
    """(N,) bool: the simulator flagged this world during the last step (it was
    reset by the engine and its episode must end)."""


class SimBackend(abc.ABC):
    """N worlds of the humanoid, stepped together at the 30 Hz control rate."""

    num_envs: int
    device: torch.device
    config: HumanoidConfig
    model: mujoco.MjModel
    """The compiled humanoid (for rendering and tests)."""
    substeps: int
    """Physics steps per control step."""
    masks_on_device = False
    """Whether ``set_state_masked`` runs on the device with no host read (a device backend's override)."""

    def __init__(self, num_envs: int, config: HumanoidConfig | None = None, device: str | torch.device = "cpu"):
        """Check ``num_envs`` and load the humanoid model; subclasses then build their worlds."""
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.config = config or HumanoidConfig()
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.model = load_model(self.config)
        self.substeps = physics_substeps(self.model.opt.timestep)

    @property
    @abc.abstractmethod
    def control_dt(self) -> float:
        """Seconds per control step."""

    @abc.abstractmethod
    def set_state(self, env_ids: Tensor, qpos: Tensor, qvel: Tensor) -> None:
        """Set full states (N_ids, 76) / (N_ids, 75) of the given worlds and refresh their kinematics."""

    def set_state_masked(self, mask: Tensor, qpos: Tensor, qvel: Tensor) -> None:
        """Set the states of the worlds flagged in ``mask`` (N,) bool from (N, 76) / (N, 75) rows of every world.

        This default finds the flagged worlds on the host (free for a CPU backend); a device backend overrides it
        with masked writes, so a step can queue its restarts before its one device read."""
        ids = torch.nonzero(mask.cpu()).flatten()
        if ids.numel():
            self.set_state(ids, qpos[ids.to(qpos.device)], qvel[ids.to(qvel.device)])

    @abc.abstractmethod
    def step(self, targets: Tensor, env_ids: Tensor | None = None) -> None:
        """Hold PD targets (N, 69) for one control step (several physics steps) in the worlds ``env_ids`` (host
        indices, sorted; None: all). The other worlds' states are then unspecified: a CPU backend leaves them as they
        were, so a step costs what its worlds cost; a device backend may step them too, where a step of every world
        costs the same."""

    @abc.abstractmethod
    def state(self, env_ids: Tensor | None = None) -> SimState:
        """The current state of the given worlds (all by default); tensors may alias
        internal buffers: read them, do not keep them."""

    @abc.abstractmethod
    def state_dict(self) -> dict:
        """Everything needed to continue the worlds exactly (for checkpoints)."""

    @abc.abstractmethod
    def load_state_dict(self, state: dict) -> None:
        """Restore worlds saved by ``state_dict``."""

    def pop_solver_limit_hits(self) -> Tensor:
        """World-steps whose constraint solver stopped at its iteration limit since the last call (0-d int64 on
        the backend's device; the count restarts). Native MuJoCo reports none: 0 unless a backend overrides it."""
        return torch.zeros((), dtype=torch.long, device=self.device)

    def close(self) -> None:
        """Release native resources."""
