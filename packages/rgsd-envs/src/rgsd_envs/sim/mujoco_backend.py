"""Native MuJoCo on the CPU: N worlds stepped on C threads by ``mujoco.batch.Batch``."""

from __future__ import annotations

import logging
import os
import time
import warnings

import mujoco
import numpy as np
import torch
from mujoco import batch as mj_batch

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.humanoid.mjcf import HumanoidConfig
from rgsd_envs.sim.backend import SimBackend, SimState, Tensor

_STAGE_VEL = int(mujoco.mjtStage.mjSTAGE_VEL)
_INSTABILITY = [
    int(mujoco.mjtWarning.mjWARN_BADQACC),
    int(mujoco.mjtWarning.mjWARN_BADQPOS),
    int(mujoco.mjtWarning.mjWARN_BADQVEL),
]


_BATCH_REFERENCES = ("batch", "_qpos", "_qvel", "_ctrl", "_np", "_warning")
"""Attributes that hold the batch or a buffer bound to it (each keeps its threads alive)."""

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
    new state; the batch is persistent, so the next step starts from those stages
    instead of recomputing them. Torch tensors alias the batch's float64 buffers.
    """

    def __init__(
        self,
        num_envs: int,
        config: HumanoidConfig | None = None,
        device: str | torch.device = "cpu",
        num_threads: int | None = None,
    ):
        _route_mujoco_warnings()
        super().__init__(num_envs, config, device)
        threads = num_threads or min(num_envs, os.cpu_count() or 1)
        # persistent: one MjData per world, so the positions and velocities computed
        # at the end of a control step (mjSTAGE_VEL) seed the next step for free
        self.batch = mj_batch.Batch(self.model, nsim=num_envs, nthread=threads, persistent=True)
        b = self.batch
        self._qpos, self._qvel, self._ctrl = (_view(b.bind(f)) for f in ("qpos", "qvel", "ctrl"))
        self._np = {
            f: b.bind(f)
            for f in ("qpos", "qvel", "ctrl", "qacc_warmstart", "xpos", "xquat", "cvel", "subtree_com", "sensordata")
        }
        self._body_ids = np.asarray(sk.MJ_BODY_IDS)
        self._warning = b.warning
        self._unstable = torch.zeros(num_envs, dtype=torch.bool)
        self.physics_seconds = 0.0
        """Wall time spent inside MuJoCo's batch stepping (for benchmarks: the physics share)."""
        self._root_body = int(self.model.body_rootid[sk.MJ_BODY_IDS[0]])
        self.closed = False
        """Whether ``close`` stopped the batch's threads."""
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
        self._require_open()
        ids = env_ids.detach().cpu().numpy()
        if ids.size == 0:
            return
        order = np.argsort(ids)
        ids = ids[order].astype(np.int32)
        q = qpos.detach().cpu().numpy().astype(np.float64)[order]
        self._np["qpos"][ids] = q
        self._np["qvel"][ids] = qvel.detach().cpu().numpy()[order]
        self._np["ctrl"][ids] = np.clip(q[:, 7:], sk.DOF_RANGES[:, 0], sk.DOF_RANGES[:, 1])
        self._np["qacc_warmstart"][ids] = 0.0
        self.batch.forward(ids, stage=_STAGE_VEL)
        self._unstable[torch.from_numpy(ids.astype(np.int64))] = False

    def step(self, targets: Tensor, env_ids: Tensor | None = None) -> None:
        """Hold PD targets (N, 69) for one control step in the worlds ``env_ids`` (None: all); the others keep their
        states (and are not flagged unstable)."""
        self._require_open()
        self._ctrl.copy_(targets.detach().to("cpu", torch.float64))
        # MuJoCo resets an exploding world itself and restarts its warning counts,
        # so counts are cleared before each step and any count means "unstable now"
        self._warning[...] = 0
        ids = None if env_ids is None else env_ids.detach().cpu().numpy()
        start = time.perf_counter()
        self.batch.step(ids, nstep=self.substeps, stage=_STAGE_VEL)
        self.physics_seconds += time.perf_counter() - start
        self._unstable = torch.from_numpy((self._warning[:, _INSTABILITY, 1] > 0).any(axis=1))

    def state(self, env_ids: Tensor | None = None) -> SimState:
        """Batched state of the given worlds (all by default) on the backend's device, SMPL body order.

        Gathered with numpy from the batch's buffers (cheaper than torch ops at
        this size); body quantities are float32, qpos/qvel the float64 state.
        """
        self._require_open()
        a = self._np
        rows = slice(None) if env_ids is None else env_ids.detach().cpu().numpy()
        bodies = self._body_ids if env_ids is None else self._body_ids[None, :]
        sel = (slice(None), bodies) if env_ids is None else (rows[:, None], bodies)
        pos = a["xpos"][sel]
        cvel = a["cvel"][sel]
        ang = cvel[..., :3]
        # cvel's linear part is the velocity of the point at the tree's centre of
        # mass; move it to each body's origin: v + w x (pos - com)
        lin = cvel[..., 3:] + np.cross(ang, pos - a["subtree_com"][rows, self._root_body][:, None, :])
        f32 = np.float32
        out = SimState(
            qpos=torch.from_numpy(a["qpos"][rows]) if env_ids is not None else self._qpos,
            qvel=torch.from_numpy(a["qvel"][rows]) if env_ids is not None else self._qvel,
            body_pos=torch.from_numpy(pos.astype(f32)),
            body_rot=torch.from_numpy(a["xquat"][sel].astype(f32)),
            body_lin_vel=torch.from_numpy(lin.astype(f32)),
            body_ang_vel=torch.from_numpy(ang.astype(f32)),
            contact=torch.from_numpy(a["sensordata"][rows] > 0),
            # a copy: a restart later in the same env step clears these flags in place
            unstable=self._unstable[torch.from_numpy(np.asarray(rows))]
            if env_ids is not None
            else self._unstable.clone(),
        )
        if self.device.type != "cpu":
            out = SimState(**{k: v.to(self.device) for k, v in vars(out).items()})
        return out

    def state_dict(self) -> dict:
        """The batch's integration state rows (qpos, qvel, ctrl, warm start, ...)."""
        self._require_open()
        return {"rows": torch.from_numpy(self.batch.state.copy()), "unstable": self._unstable.clone()}

    def load_state_dict(self, state: dict) -> None:
        """Restore the state rows and recompute the derived fields."""
        self._require_open()
        rows = torch.as_tensor(state["rows"]).numpy()
        if rows.shape != self.batch.state.shape:
            raise ValueError(f"saved simulator state has shape {rows.shape}, this backend {self.batch.state.shape}")
        self.batch.state[...] = rows
        self.batch.forward(stage=_STAGE_VEL)
        self._unstable = torch.as_tensor(state["unstable"]).clone()

    def close(self) -> None:
        """Stop the batch's C threads now, not at garbage collection (again: a no-op); the backend is then unusable.

        ``mujoco.batch.Batch`` has no close: its threads end when the last reference to it goes, and every bound
        buffer (``bind``) holds one, so all of them are dropped here (a ``state()`` kept by a caller would still
        hold one: its docstring says not to keep them)."""
        self.closed = True
        for name in _BATCH_REFERENCES:
            self.__dict__.pop(name, None)

    def _require_open(self) -> None:
        if self.closed:
            raise RuntimeError("this MuJoCo backend is closed (close() stopped its threads); make a new one")
