"""MuJoCo Warp: N worlds of the humanoid on a warp device (a GPU, or the CPU for tests).

Needs the optional extra ``rgsd-envs[warp]`` (``mujoco-warp``); ``rgsd_envs.sim.check_backend``
says what to install when it is missing. The same MJCF as the ``mujoco`` backend, in float32.
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Callable
from typing import Any

import mujoco
import mujoco_warp as mjw
import numpy as np
import torch
import warp as wp

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.humanoid.mjcf import HumanoidConfig
from rgsd_envs.sim.backend import SimBackend, SimState, Tensor

log = logging.getLogger(__name__)
# no banner and no line per loaded kernel module in training logs (set wp.config.log_level to wp.LOG_INFO to see them)
wp.config.quiet = True
wp.config.log_level = max(wp.config.log_level, wp.LOG_WARNING)

MAX_CONTACTS_PER_WORLD = 64
"""Contacts allocated per world (``nconmax``); native MuJoCo peaks at 22 under random actions."""
MAX_CONSTRAINTS_PER_WORLD = 256
"""Constraint rows allocated per world (``njmax``); native MuJoCo peaks at 88 under random actions.
A world that needs more sets warp's overflow bit and is flagged unstable."""
SOLVER_LIMIT_BITS = int(mjw.OverflowType.ITERATIONS | mjw.OverflowType.LS_ITERATIONS)
"""Bits of ``Data.overflow`` that say the constraint solver (or its line search) stopped at its iteration
limit. The solver then returns its last iterate, as native MuJoCo does (which sets no flag at all): the
world is still valid, so these are counted (``WarpBackend.pop_solver_limit_hits``), never an instability."""
BUFFER_OVERFLOW_BITS = int(mjw.OverflowType.ALL) & ~SOLVER_LIMIT_BITS
"""Bits of ``Data.overflow`` that say a fixed-size buffer ran out (constraint rows past ``njmax``, contacts
past ``naconmax`` in the broad or narrow phase, CCD, EPA, islands, ...): constraints or contacts were dropped,
so the world's physics is wrong from there on and the world is flagged unstable and reset."""
_BUFFER_OVERFLOW_BITS = wp.constant(BUFFER_OVERFLOW_BITS)
_SOLVER_LIMIT_BITS = wp.constant(SOLVER_LIMIT_BITS)
DETERMINISTIC_ENV = "RGSD_WARP_DETERMINISTIC"
"""Environment variable: 1 sets ``opt.deterministic = DeterminismType.ALL`` (slower). In mujoco-warp 4.0.0 that
fixes the order of its floating-point atomics, but its contact and constraint-row sorts are still empty: contacts
and rows come in the order the GPU threads ran, so two identical GPU runs part by float32 rounding at the first
step with a contact or an active joint limit, and only constraint-free runs repeat bit for bit (the CUDA tests of
exact repetition use ``rgsd_envs.testing.warp_without_constraints``). The CPU warp device runs each kernel's
threads in order, so it repeats bit for bit with or without this."""
MAX_VALUE = 1e10
"""A position or velocity beyond this is an explosion (MuJoCo's ``mjMAXVAL``, its BADQPOS/BADQVEL test)."""
_MAX_VALUE = wp.constant(MAX_VALUE)
FLOOR_DEADBAND = 1e-6
"""The warp model's floor sits this far (m) below the native model's. Reference states put the
lowest foot exactly on the floor (distance ~1e-16 in float64): native MuJoCo sees no contact,
float32 rounding would make warp see one in about half the worlds and the two backends would
part at the first step; 1 µm is 15 float32 ulps at 1 m and changes a contact force by kp * 1 µm."""


@wp.kernel
def _guard_worlds(
    qpos: wp.array2d(dtype=float),
    qvel: wp.array2d(dtype=float),
    qacc_warmstart: wp.array2d(dtype=float),
    qpos0: wp.array(dtype=float),
    overflow: wp.array(dtype=int),
    unstable: wp.array(dtype=int),
):
    """Flag a world whose state is not finite (or too large) or whose buffers overflowed, and put it
    back at the model's rest state, as native MuJoCo does with an exploding world."""
    w = wp.tid()
    bad = (overflow[w] & _BUFFER_OVERFLOW_BITS) != 0
    for i in range(qpos.shape[1]):
        x = qpos[w, i]
        if not wp.isfinite(x) or wp.abs(x) > _MAX_VALUE:
            bad = True
    for i in range(qvel.shape[1]):
        v = qvel[w, i]
        if not wp.isfinite(v) or wp.abs(v) > _MAX_VALUE:
            bad = True
    if bad:
        unstable[w] = 1
        for i in range(qpos.shape[1]):
            qpos[w, i] = qpos0[i]
        for i in range(qvel.shape[1]):
            qvel[w, i] = 0.0
            qacc_warmstart[w, i] = 0.0


CONSTRAINT_CONTACT = 1
"""mujoco-warp's ``ContactType.CONSTRAINT`` bit of ``Contact.type``: a contact the solver sees (the ones MuJoCo's
contact sensors count)."""
_CONSTRAINT_CONTACT = wp.constant(CONSTRAINT_CONTACT)


@wp.kernel
def _floor_contacts(
    nacon: wp.array(dtype=int),
    contact_geom: wp.array(dtype=wp.vec2i),
    contact_worldid: wp.array(dtype=int),
    contact_type: wp.array(dtype=int),
    geom_slot: wp.array(dtype=int),
    floor: int,
    found: wp.array2d(dtype=int),
):
    """Mark ``found[world, slot]`` for each solver contact between the floor and a geom of a sensed body (``geom_slot``:
    the body's contact-sensor column, -1 for none): what the model's floor contact sensors report, in one pass
    over the contacts instead of their match, sort and reduction per sensor and world."""
    c = wp.tid()
    if c >= wp.min(nacon[0], contact_geom.shape[0]):
        return
    if (contact_type[c] & _CONSTRAINT_CONTACT) == 0:
        return
    g = contact_geom[c]
    other = wp.int32(-1)  # a dynamic variable: warp makes a literal a constant
    if g[0] == floor:
        other = g[1]
    elif g[1] == floor:
        other = g[0]
    if other < 0:
        return
    slot = geom_slot[other]
    if slot >= 0:
        found[contact_worldid[c], slot] = 1  # every writer writes 1: the result does not depend on their order


@wp.kernel
def _count_solver_limits(overflow: wp.array(dtype=int), hits: wp.array(dtype=int)):
    """Add one to a world's count when its solver stopped at the iteration limit in this control step."""
    w = wp.tid()
    if (overflow[w] & _SOLVER_LIMIT_BITS) != 0:
        hits[w] = hits[w] + 1


def contact_sensor_slots(model: mujoco.MjModel, floor: int) -> np.ndarray:
    """(ngeom,) int32: for each geom, the column of the contact sensor of its body (the model's floor sensors,
    one per body, against geom ``floor``), or -1."""
    slots = np.full(model.ngeom, -1, np.int32)
    for i in range(model.nsensor):
        if (
            model.sensor_type[i] != mujoco.mjtSensor.mjSENS_CONTACT
            or model.sensor_objtype[i] != mujoco.mjtObj.mjOBJ_BODY
            or model.sensor_reftype[i] != mujoco.mjtObj.mjOBJ_GEOM
            or model.sensor_refid[i] != floor
        ):
            raise ValueError(f"sensor {i}: the warp backend computes body-floor contact sensors only")
        slots[model.geom_bodyid == model.sensor_objid[i]] = model.sensor_adr[i]
    return slots


def graph_unavailable_reason(device: Any) -> str | None:
    """Why the control step cannot be captured as a CUDA graph on this warp device (None: it can)."""
    if not device.is_cuda:
        return "not a CUDA device"
    if not device.is_mempool_enabled:
        return (
            f"warp's memory pool is disabled on {device} (a graph cannot allocate; "
            f"call wp.set_mempool_enabled({str(device)!r}, True) before creating the env)"
        )
    return None


def lacks_cpu_compiler(device: str | torch.device) -> bool:
    """Whether warp is asked for its CPU device without its CPU compiler (warp-clang), which an offline GPU bundle
    may leave out (warp's own error surfaces later, inside the first kernel's compile)."""
    return wp.get_device(warp_device(torch.device(device))).is_cpu and wp._src.context.runtime.llvm is None


CUDA_LAUNCH_BLOCK = 256
"""Threads per block of a CUDA launch that names none (warp's default): the variant of a module it loads."""


def kernels_cached(device: Any) -> bool:
    """Whether warp's kernel cache holds this backend's kernels for the warp ``device``; they are compiled with
    mujoco-warp's on a machine's first run, so False means the first step compiles all of them."""
    block = 1 if device.is_cpu else CUDA_LAUNCH_BLOCK  # warp launches on its CPU device with blocks of 1
    folder = wp.get_module(__name__).get_module_identifier(block)
    return os.path.isdir(os.path.join(wp.config.kernel_cache_dir, folder))


def use_cuda_graphs(device: Any) -> bool:
    """Whether to capture the control step on this warp device; a one-line warning when a CUDA device cannot."""
    reason = graph_unavailable_reason(device)
    if device.is_cuda and reason is not None:
        log.warning("warp backend: CUDA graphs unavailable, launching kernels one by one (slower): %s", reason)
    return reason is None


def ordered_launch(run: Callable[[], None], warp_stream: Any, torch_stream: Any) -> None:
    """``run`` (warp work on ``warp_stream``) after the work queued on torch's stream, and torch's later work
    after it: torch wrote the controls or states that warp reads, and reads the state that warp writes."""
    warp_stream.wait_stream(torch_stream)
    run()
    torch_stream.wait_stream(warp_stream)


def warp_device(device: torch.device) -> str:
    """The warp device name of a torch device ("cpu", "cuda:0", ...)."""
    if device.type == "cpu":
        return "cpu"
    if device.type == "cuda":
        return f"cuda:{device.index if device.index is not None else torch.cuda.current_device()}"
    raise ValueError(f"the warp backend runs on 'cpu' or 'cuda' devices, got {device}")


class WarpBackend(SimBackend):
    """MuJoCo Warp backend: one ``mjw.Data`` holding N worlds; torch tensors alias its arrays.

    A control step is ``physics_substeps`` times ``mj_step`` (``step1``: positions, mass matrix,
    collisions, constraints and velocities; ``step2``: actuation, constraint solve, implicit
    integration; then a guard that flags and resets exploding worlds), then ``_observed``: what
    ``state`` reads of the new state (poses, centres of mass, body velocities, contacts and
    their floor flags; mujoco-warp's sensors stay off: ``_floor_contacts``). The next control
    step recomputes everything else from the state itself, so a restart only writes states: the
    worlds' observed fields are refreshed when ``state`` is next read before a step (one pass for
    all worlds, without the mass matrix, its factorisation, constraints or forces of a ``step1``).
    On a CUDA device the control step and that refresh are each captured once as a CUDA graph and
    replayed; on the CPU they run as plain kernel launches. On CUDA, warp's stream waits for
    torch's current stream before each launch and torch's stream waits for warp's after it
    (``ordered_launch``), captured or not, so no host synchronisation is needed.

    Solver iteration-limit hits (``SOLVER_LIMIT_BITS``) do not end a world; each world counts the
    control steps in which its solver hit the limit (``solver_limit_hits``, read and reset on the
    device by ``pop_solver_limit_hits``).
    """

    masks_on_device = True

    def __init__(
        self,
        num_envs: int,
        config: HumanoidConfig | None = None,
        device: str | torch.device = "cpu",
        num_threads: int | None = None,
    ):
        del num_threads  # warp schedules its own threads
        super().__init__(num_envs, config, device)  # self.model; the warp copy is ``wp_model``
        self.wp_device = wp.get_device(warp_device(self.device))
        data = mujoco.MjData(self.model)
        mujoco.mj_forward(self.model, data)
        with wp.ScopedDevice(self.wp_device):
            self.wp_model = mjw.put_model(self.model)
            self.wp_model.opt.warn_overflow = 0  # overflowing worlds are flagged unstable instead
            # the floor contact flags come from _floor_contacts, once per control step: mujoco-warp's contact
            # sensors match, tile-sort and reduce per sensor and world at every substep (a tenth of an 8192-world
            # step's GPU time on an H200), and the model has no other sensor
            self.wp_model.opt.disableflags |= int(mjw.DisableBit.SENSOR)
            if os.environ.get(DETERMINISTIC_ENV, "0") not in ("", "0"):
                self.wp_model.opt.deterministic = int(mjw.DeterminismType.ALL)
            self.wp_data = mjw.put_data(
                self.model, data, nworld=num_envs, nconmax=MAX_CONTACTS_PER_WORLD, njmax=MAX_CONSTRAINTS_PER_WORLD
            )
            # the floor is a static geom: warp sets its pose once, here, and never recomputes it
            floor = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, "floor")
            wp.to_torch(self.wp_data.geom_xpos)[:, floor, 2] -= FLOOR_DEADBAND
            self._qpos0 = wp.array(self.model.qpos0.astype(np.float32), dtype=float)
            self._unstable_wp = wp.zeros(num_envs, dtype=int)
            self._floor = floor
            self._geom_slot = wp.array(contact_sensor_slots(self.model, floor), dtype=int)
            self._found_wp = wp.zeros((num_envs, self.model.nsensordata), dtype=int)
            self._solver_hits_wp = wp.zeros(num_envs, dtype=int)
        d = self.wp_data
        t = {
            f: wp.to_torch(getattr(d, f))
            for f in ("qpos", "qvel", "ctrl", "qacc_warmstart", "time", "xpos", "xquat", "cvel", "subtree_com")
        }
        t["found"] = wp.to_torch(self._found_wp)
        self._t = t
        self._qpos, self._qvel, self._ctrl = t["qpos"], t["qvel"], t["ctrl"]
        self._unstable_i = wp.to_torch(self._unstable_wp)
        self.solver_limit_hits = wp.to_torch(self._solver_hits_wp)
        """(N,) int32 on the device: control steps since the last ``pop_solver_limit_hits`` in which each
        world's constraint solver stopped at its iteration limit (not an instability: the world goes on)."""
        self._body_ids = torch.as_tensor(np.asarray(sk.MJ_BODY_IDS), device=self.device)
        self._root_body = int(self.model.body_rootid[sk.MJ_BODY_IDS[0]])
        self._lo = torch.as_tensor(sk.DOF_RANGES[:, 0], dtype=torch.float32, device=self.device)
        self._hi = torch.as_tensor(sk.DOF_RANGES[:, 1], dtype=torch.float32, device=self.device)
        self.physics_seconds = 0.0
        """Kept for the benchmarks' interface; warp launches are asynchronous, so it stays 0."""
        if not kernels_cached(self.wp_device):  # else the first step's silent minute looks like a hang
            log.info(
                "warp backend: compiling MuJoCo Warp's kernels for %s, once per machine (a minute or two; cached in %s)",
                self.wp_device,
                wp.config.kernel_cache_dir,
            )
        self._use_graph = use_cuda_graphs(self.wp_device)
        self._step_graph = self._capture(self._control_step)
        self._observed_graph = self._capture(self._observed)
        self._stale = True
        """Whether states were written since the observed fields were computed (``state`` refreshes them)."""
        self.solver_limit_hits.zero_()  # the capture's warm-up step counted too

    # -- the warp programs ------------------------------------------------------
    def _observed(self) -> None:
        """What ``state`` reads, at every world's current state: body poses, centres of mass, body velocities,
        contacts and their floor flags (not the mass matrix, constraints or forces: the next step's ``step1``)."""
        m, d = self.wp_model, self.wp_data
        mjw.kinematics(m, d)
        mjw.com_pos(m, d)
        mjw.com_vel(m, d)
        mjw.collision(m, d)
        self._mark_floor_contacts()

    def _control_step(self) -> None:
        """One control step of all worlds (``substeps`` physics steps) with the instability guard."""
        m, d = self.wp_model, self.wp_data
        self._unstable_wp.zero_()
        d.overflow.zero_()
        for _ in range(self.substeps):
            mjw.step1(m, d)
            mjw.step2(m, d)
            wp.launch(
                _guard_worlds,
                dim=self.num_envs,
                inputs=[d.qpos, d.qvel, d.qacc_warmstart, self._qpos0, d.overflow, self._unstable_wp],
            )
        self._observed()
        wp.launch(_count_solver_limits, dim=self.num_envs, inputs=[d.overflow, self._solver_hits_wp])

    def _mark_floor_contacts(self) -> None:
        """The floor contact flags of the contacts the last collision pass found, as the model's sensors report
        them."""
        d = self.wp_data
        self._found_wp.zero_()
        wp.launch(
            _floor_contacts,
            dim=d.naconmax,
            inputs=[d.nacon, d.contact.geom, d.contact.worldid, d.contact.type, self._geom_slot, self._floor],
            outputs=[self._found_wp],
        )

    def _capture(self, fn: Callable[[], None]):
        """``fn`` captured as a CUDA graph (None on the CPU or when capture fails: it is then run directly)."""
        if not self._use_graph:
            return None
        self._launch(fn, None)  # compiles and loads the kernels outside the capture
        was_enabled = gc.isenabled()
        gc.disable()  # a collected warp object inside a capture would be recorded into the graph
        try:
            with wp.ScopedDevice(self.wp_device), wp.ScopedCapture(device=self.wp_device) as capture:
                fn()
        except Exception as err:  # any capture failure leaves the uncaptured path, which works
            log.warning("warp backend: CUDA graph capture failed, launching kernels one by one (slower): %s", err)
            return None
        finally:
            if was_enabled:
                gc.enable()
        return capture.graph

    def _launch(self, fn: Callable[[], None], graph) -> None:
        """Run ``fn`` (or its graph) ordered after pending torch work and before later torch work."""
        if not self.wp_device.is_cuda:
            with wp.ScopedDevice(self.wp_device):
                fn()  # CPU kernels run synchronously: nothing to order
            return
        warp_stream = self.wp_device.stream
        torch_stream = wp.stream_from_torch(torch.cuda.current_stream(self.device))
        if graph is None:

            def run() -> None:
                with wp.ScopedDevice(self.wp_device):  # launches on the device's stream, ``warp_stream``
                    fn()

        else:

            def run() -> None:
                wp.capture_launch(graph, stream=warp_stream)

        ordered_launch(run, warp_stream, torch_stream)

    # -- SimBackend -------------------------------------------------------------
    @property
    def control_dt(self) -> float:
        """Seconds per control step."""
        return self.substeps * float(self.model.opt.timestep)

    def set_state(self, env_ids: Tensor, qpos: Tensor, qvel: Tensor) -> None:
        """Set full states of the given worlds; ``state`` then refreshes the observed fields of all worlds (the
        others' do not change, so a full refresh is one graph instead of a gather)."""
        ids = env_ids.to(self.device, torch.long)
        if ids.numel() == 0:
            return
        q = qpos.detach().to(self.device, torch.float32)
        self._qpos[ids] = q
        self._qvel[ids] = qvel.detach().to(self.device, torch.float32)
        self._ctrl[ids] = self._holding(q)
        # index_fill_ takes its value as a kernel argument; ``x[ids] = 0`` would upload it with a blocking copy
        self._t["qacc_warmstart"].index_fill_(0, ids, 0.0)
        self._unstable_i.index_fill_(0, ids, 0)
        self._stale = True

    def _holding(self, qpos: Tensor) -> Tensor:
        """PD targets that hold the joint angles of ``qpos`` (float32 on the device), clipped to their ranges."""
        return torch.minimum(torch.maximum(qpos[:, 7:], self._lo), self._hi)

    def set_state_masked(self, mask: Tensor, qpos: Tensor, qvel: Tensor) -> None:
        """Set the states of the worlds flagged in ``mask`` (N,) from rows of every world with masked writes (no
        host read), as ``set_state`` does."""
        flag = mask.to(self.device)
        rows = flag[:, None]
        q = qpos.detach().to(self.device, torch.float32)
        target = self._holding(q)
        for buf, new in (
            (self._qpos, q),
            (self._qvel, qvel.detach().to(self.device, torch.float32)),
            (self._ctrl, target),
        ):
            buf.copy_(torch.where(rows, new, buf))  # in place: the tensors alias warp's arrays
        self._t["qacc_warmstart"].masked_fill_(rows, 0.0)
        self._unstable_i.masked_fill_(flag, 0)
        self._stale = True

    def step(self, targets: Tensor, env_ids: Tensor | None = None) -> None:
        """Hold PD targets (N, 69) for one control step in every world, ``env_ids`` or not: the step's kernels cost
        the same whatever the worlds that matter (and stay one CUDA graph)."""
        self._ctrl.copy_(targets.detach().to(self.device, torch.float32))
        self._launch(self._control_step, self._step_graph)
        self._stale = False  # the step ends with the observed fields of its new state

    def state(self, env_ids: Tensor | None = None) -> SimState:
        """Batched state of the given worlds (all by default), float32 on the backend's device, SMPL order."""
        if self._stale:  # states were written since the last step: bring their observed fields up to date
            self._launch(self._observed, self._observed_graph)
            self._stale = False
        rows = None if env_ids is None else env_ids.to(self.device, torch.long)

        def worlds(x: Tensor) -> Tensor:  # all worlds without an op: each op is a launch on a GPU
            return x if rows is None else x[rows]

        t, ids = self._t, self._body_ids
        pos = worlds(t["xpos"]).index_select(1, ids)
        cvel = worlds(t["cvel"]).index_select(1, ids)
        ang = cvel[..., :3]
        # cvel's linear part is the velocity of the point at the tree's centre of mass; move it to
        # each body's origin: v + w x (pos - com), as the mujoco backend does
        com = worlds(t["subtree_com"])[:, self._root_body, None, :]
        lin = cvel[..., 3:] + torch.linalg.cross(ang, pos - com)
        return SimState(
            qpos=worlds(self._qpos),
            qvel=worlds(self._qvel),
            body_pos=pos,
            body_rot=worlds(t["xquat"]).index_select(1, ids),
            body_lin_vel=lin,
            body_ang_vel=ang,
            contact=worlds(t["found"]) != 0,
            unstable=worlds(self._unstable_i) != 0,
        )

    def pop_solver_limit_hits(self) -> Tensor:
        """World-steps whose solver hit its iteration limit since the last call (0-d int64 on the device,
        no host synchronisation; ``.item()`` it once per iteration), and restart the count."""
        total = self.solver_limit_hits.sum()
        self.solver_limit_hits.zero_()
        return total

    def state_dict(self) -> dict:
        """Integration state of all worlds (positions, velocities, controls, warm start, time)."""
        t = self._t
        out = {k: t[k].detach().cpu().clone() for k in ("qpos", "qvel", "ctrl", "qacc_warmstart", "time")}
        out["unstable"] = (self._unstable_i != 0).cpu().clone()
        return out

    def load_state_dict(self, state: dict) -> None:
        """Restore worlds saved by ``state_dict`` and recompute the derived fields."""
        if "qpos" not in state:
            raise ValueError(
                "this simulator state was saved by another backend; resume with the backend it was saved with"
            )
        for k in ("qpos", "qvel", "ctrl", "qacc_warmstart", "time"):
            v = torch.as_tensor(state[k])
            if v.shape != self._t[k].shape:
                raise ValueError(
                    f"saved simulator state {k!r} has shape {tuple(v.shape)}, this backend {tuple(self._t[k].shape)}"
                )
            self._t[k].copy_(v.to(self.device, self._t[k].dtype))
        self._unstable_i.copy_(torch.as_tensor(state["unstable"]).to(self.device, self._unstable_i.dtype))
        self._stale = True
