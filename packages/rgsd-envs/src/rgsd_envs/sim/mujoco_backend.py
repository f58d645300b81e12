"""Native MuJoCo on the CPU: N worlds stepped on C threads by ``mujoco.batch.Batch``."""

from __future__ import annotations

import logging
import os
import warnings

import mujoco
import numpy as np
import torch
from mujoco import batch as mj_batch

from rgsd_envs import skeleton as sk
from rgsd_envs.humanoid_mjcf import HumanoidConfig, load_model, physics_substeps
from rgsd_envs.sim.backend import SimBackend, SimState, Tensor

_STAGE_VEL = int(mujoco.mjtStage.mjSTAGE_VEL)
_INSTABILITY = [int(mujoco.mjtWarning.mjWARN_BADQACC), int(mujoco.mjtWarning.mjWARN_BADQPOS), int(mujoco.mjtWarning.mjWARN_BADQVEL)]


log = logging.getLogger(__name__)
_handler_installed = False


def _route_mujoco_warnings() -> None:
    """Send MuJoCo's engine warnings to logging instead of stdout and MUJOCO_LOG.TXT.

    Instability still reaches users through ``SimState.unstable`` / ``info["unstable"]``.
    """
    global _handler_installed
    if not _handler_installed:
        mujoco.set_mju_user_warning(lambda msg: log.debug("mujoco: %s", msg))
        _handler_installed = True


def _view(arr: np.ndarray) -> Tensor:
    """A torch tensor sharing memory with a (possibly read-only) numpy buffer."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # read-only buffers: we never write through it
        return torch.from_numpy(arr)


class MujocoBackend(SimBackend):
    """MuJoCo CPU backend: one ``Batch`` of N simulations, state read without copies.

    Each control step runs ``physics_substeps`` calls of ``mj_step`` per world on
    ``num_threads`` threads (the GIL is released), then brings positions and
    velocities up to date (``mjSTAGE_VEL``) so every derived field describes the
    new state. Torch tensors alias the batch's float64 buffers.
    """

    def __init__(
        self,
        num_envs: int,
        config: HumanoidConfig | None = None,
        device: str | torch.device = "cpu",
        num_threads: int | None = None,
    ):
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        _route_mujoco_warnings()
        self.config = config or HumanoidConfig()
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.model = load_model(self.config)
        self.substeps = physics_substeps(self.model.opt.timestep)
        threads = num_threads or min(num_envs, os.cpu_count() or 1)
        self.batch = mj_batch.Batch(self.model, nsim=num_envs, nthread=threads)
        b = self.batch
        self._qpos, self._qvel, self._ctrl = (_view(b.bind(f)) for f in ("qpos", "qvel", "ctrl"))
        self._xpos, self._xquat, self._cvel = (_view(b.bind(f)) for f in ("xpos", "xquat", "cvel"))
        self._com = _view(b.bind("subtree_com"))
        self._sensor = _view(b.bind("sensordata"))
        self._warning = b.warning
        self._unstable = torch.zeros(num_envs, dtype=torch.bool)
        self._ids = torch.as_tensor(sk.MJ_BODY_IDS)
        self._root_body = int(self.model.body_rootid[sk.MJ_BODY_IDS[0]])
        b.reset()
        b.forward(stage=_STAGE_VEL)

    @property
    def num_threads(self) -> int:
        """C threads stepping the worlds."""
        return self.batch.nthread

    @property
    def control_dt(self) -> float:
        """Seconds per control step."""
        return self.substeps * float(self.model.opt.timestep)

    def set_state(self, env_ids: Tensor, qpos: Tensor, qvel: Tensor) -> None:
        """Set full states of the given worlds and refresh their kinematics."""
        ids = np.sort(np.asarray(env_ids.detach().cpu(), dtype=np.int64))
        if ids.size == 0:
            return
        order = np.argsort(np.asarray(env_ids.detach().cpu()))
        q = qpos.detach().to("cpu", torch.float64)[order]
        v = qvel.detach().to("cpu", torch.float64)[order]
        t = torch.as_tensor(ids)
        self._qpos[t] = q
        self._qvel[t] = v
        self._ctrl[t] = q[:, 7:].clamp(torch.as_tensor(sk.DOF_RANGES[:, 0]), torch.as_tensor(sk.DOF_RANGES[:, 1]))
        self.batch.bind("qacc_warmstart")[ids] = 0.0
        self.batch.forward(ids, stage=_STAGE_VEL)
        self._unstable[t] = False

    def step(self, targets: Tensor) -> None:
        """Hold PD targets (N, 69) for one control step."""
        self._ctrl.copy_(targets.detach().to("cpu", torch.float64))
        # MuJoCo resets an exploding world itself and restarts its warning counts,
        # so counts are cleared before each step and any count means "unstable now"
        self._warning[...] = 0
        self.batch.step(nstep=self.substeps, stage=_STAGE_VEL)
        self._unstable = torch.from_numpy((self._warning[:, _INSTABILITY, 1] > 0).any(axis=1))

    def state(self) -> SimState:
        """Batched state as torch tensors on the backend's device (SMPL body order)."""
        ids = self._ids
        pos = self._xpos[:, ids]
        cvel = self._cvel[:, ids]
        ang = cvel[..., :3]
        # cvel's linear part is the velocity of the point at the tree's centre of mass
        lin = cvel[..., 3:] + torch.linalg.cross(ang, pos - self._com[:, self._root_body : self._root_body + 1], dim=-1)
        out = SimState(
            qpos=self._qpos,
            qvel=self._qvel,
            body_pos=pos,
            body_rot=self._xquat[:, ids],
            body_lin_vel=lin,
            body_ang_vel=ang,
            contact=self._sensor > 0,
            unstable=self._unstable,
        )
        if self.device.type != "cpu":
            out = SimState(**{k: v.to(self.device) for k, v in vars(out).items()})
        return out

    def state_dict(self) -> dict:
        """The batch's integration state rows (qpos, qvel, ctrl, warm start, ...)."""
        return {"rows": torch.from_numpy(self.batch.state.copy()), "unstable": self._unstable.clone()}

    def load_state_dict(self, state: dict) -> None:
        """Restore the state rows and recompute the derived fields."""
        rows = torch.as_tensor(state["rows"]).numpy()
        if rows.shape != self.batch.state.shape:
            raise ValueError(f"saved simulator state has shape {rows.shape}, this backend {self.batch.state.shape}")
        self.batch.state[...] = rows
        self.batch.forward(stage=_STAGE_VEL)
        self._unstable = torch.as_tensor(state["unstable"]).clone()
