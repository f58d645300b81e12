"""Batched episode logic of RGSD-SMPL-v0 over N worlds, in torch.

Shared by the single and the native vector environment: reference state
initialisation, the task indicator and skill, PD targets from actions,
observations, terminations and the per-step information, all batched over the
worlds (no per-world Python). Randomness comes from per-world counter-based
streams (``world_random``): drawn for all reset worlds at once, yet N worlds here
behave exactly like N single environments seeded the same way.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymnasium.error import ClosedEnvironmentError, ResetNeeded

from rgsd_envs.envs import skills
from rgsd_envs.envs.config import DEVIATION_KEYS, EnvConfig
from rgsd_envs.envs.observations import (
    FRAME_DIM,
    HISTORY_LEN,
    HUMANOID_LAYOUT,
    SKILL_DIM,
    frame_features,
    history_indices,
    phase_of,
    reference_encoder_inputs,
    reference_frame_features,
)
from rgsd_envs.envs.termination import DeviationRule, fall_flags
from rgsd_envs.envs.world_random import Stream, WorldRandom, box_muller
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.humanoid.mjcf import HumanoidConfig
from rgsd_envs.motion.library import MotionLib, MotionSource
from rgsd_envs.rewards import encoders as enc
from rgsd_envs.sim import make_backend
from rgsd_envs.utils.config import near_keys
from rgsd_envs.utils.device import HostBridge, resolve_device

Tensor = torch.Tensor

IMITATION, DISCOVERY = 1, 0
"""Task indicator values c (the paper's c ~ Bernoulli(p): 1 imitation, 0 discovery)."""
TASK_NAMES = {"imitation": IMITATION, "discovery": DISCOVERY}
RESET_OPTIONS = ("clip", "start_frame", "task", "skill", "kappa")
"""Keys of ``reset(options=...)`` that fix parts of the next episodes (the vector and torch envs add
``reset_mask``)."""
FAILURE_RATE_MEMORY = 100.0
"""Imitation episodes of a clip over which its failure rate (``clip_sampling.mode: failure_weighted``) is
averaged (an EMA)."""


@dataclass
class StepInfo:
    """Per-world information of one step or reset (torch, device of the env)."""

    task: Tensor
    clip_id: Tensor
    frame: Tensor
    ref_body_pos: Tensor
    cartesian_error: Tensor
    fall: Tensor
    deviation: Tensor
    unstable: Tensor

    def numpy(self, index: Any = slice(None)) -> dict[str, np.ndarray]:
        """The info as numpy arrays (optionally of selected worlds)."""
        return {k: v[index].detach().cpu().numpy() for k, v in vars(self).items()}


def episode_slots(skill_dim: int) -> dict[str, Any]:
    """Where an episode's numbers lie in its ``Stream.EPISODE`` numbers (each part starts at an even index: a part is
    drawn only for the worlds that need it; Box-Muller pairs need an even count)."""
    width = skill_dim + skill_dim % 2
    return {
        "clip": 0,
        "start_frame": 1,
        "task": 2,
        "skill": slice(4, 4 + skill_dim),
        "vmf_direction": slice(4 + width, 4 + width + skill_dim),
    }


EPISODE_SLOTS = episode_slots(SKILL_DIM)
"""``episode_slots`` of the default 16-D skill."""


def _per_world(options: dict[str, Any], key: str, n: int) -> Any:
    """Option ``key``: None, one value for all n reset worlds, or a numpy array with one entry per world.

    A value is per world when it holds one entry per reset world: a length-n
    sequence for clip, start_frame, task and kappa, an (n, 16) array for skill.
    """
    v = options.get(key)
    per_world_ndim = 2 if key == "skill" else 1
    if v is None or isinstance(v, str) or np.ndim(v) != per_world_ndim:
        return v
    if len(v) != n:
        raise ValueError(f"options[{key!r}] has {len(v)} entries; expected one per reset world ({n})")
    return v.detach().cpu().numpy() if isinstance(v, Tensor) else v if isinstance(v, np.ndarray) else list(v)


def check_reset_options(options: dict[str, Any], extra: tuple[str, ...] = ()) -> None:
    """A ValueError naming the first key of ``options`` that is neither in ``RESET_OPTIONS`` nor in ``extra`` (a
    misspelt option would otherwise be ignored), with the known keys and the nearest one."""
    known = (*RESET_OPTIONS, *extra)
    unknown = [k for k in options if k not in known]
    if unknown:
        near = near_keys(str(unknown[0]), known)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise ValueError(f"unknown reset option {unknown[0]!r}{hint}; known options: {', '.join(known)}")


def as_host_array(values: Any, dtype: Any = None) -> np.ndarray:
    """``values`` (a list, numpy array or tensor on any device; a tensor is read once) as a numpy array of
    ``dtype`` (None: its own); like ``np.asarray`` it may share memory with its input."""
    if isinstance(values, Tensor):
        a = values.detach().cpu().numpy()
        return a if dtype is None else a.astype(dtype)
    return np.asarray(values, dtype=dtype)


def as_host_ids(env_ids: Any) -> np.ndarray:
    """World indices as an int64 numpy array (from a list, array or tensor; a tensor is read once)."""
    return as_host_array(env_ids, np.int64).reshape(-1)


def nonfinite_action_error(actions: Any) -> ValueError:
    """The error for actions (N, 69) holding NaN or inf: names the first world and hinge."""
    a = as_host_array(actions)
    bad = np.argwhere(~np.isfinite(a))[0].tolist()
    return ValueError(
        f"action contains NaN or inf (world {bad[0]}, hinge {sk.DOF_NAMES[bad[1]]}); the policy output is broken"
    )


def default_encoder(lib: MotionLib, ref_inputs: Tensor, skill_dim: int) -> enc.ReferenceKernelEncoder:
    """The encoder of an env built without one: the training-free kernel encoder of ``lib``'s reference inputs."""
    return enc.ReferenceKernelEncoder(ref_inputs, lib.clip_of_frame, lib.num_clips, dim=skill_dim)


def library_clip_embeddings(lib: MotionLib, encoder: str | os.PathLike | None, skill_dim: int) -> Tensor:
    """(clips, skill_dim) z_m of ``lib``'s clips on the CPU, as an env with this encoder file (None: the default
    encoder) has them, without building its worlds: those the file stores for exactly these clips (names and frame
    counts), else embedded."""
    if encoder is not None:
        stored = enc.stored_clip_embeddings(encoder, list(lib.names), lib.num_frames.tolist(), skill_dim)
        if stored is not None:
            return stored
    lib = lib if lib.device.type == "cpu" else lib.to("cpu")
    inputs = reference_encoder_inputs(lib)
    model = default_encoder(lib, inputs, skill_dim) if encoder is None else enc.load_encoder(encoder, skill_dim)
    return enc.clip_embeddings(model, inputs, lib.clip_of_frame, lib.num_clips)


class RGSDCore:
    """N worlds of RGSD-SMPL-v0: state, episodes and observations as torch tensors."""

    layout = HUMANOID_LAYOUT
    """What the observations hold (``ObservationLayout``), as the methods read it; an instance's follows its
    config's ``skill_dim``."""

    def __init__(
        self,
        num_envs: int,
        config: EnvConfig | None = None,
        motions: MotionSource | MotionLib | None = None,
        encoder: enc.EncoderLike | str | None = None,
    ):
        cfg = config or EnvConfig()
        self.cfg = cfg
        self.layout = cfg.layout
        self.skill_dim = cfg.skill_dim
        self.slots = episode_slots(cfg.skill_dim)
        self.num_envs = num_envs
        self.device = resolve_device(cfg.device)  # "auto" or an unusable GPU: a DeviceError saying what to pass
        source = cfg.motions if motions is None else motions
        if isinstance(source, MotionLib):  # a library made elsewhere (often on the CPU) moves to the env's device
            self.lib = source if source.device == self.device else source.to(self.device)
        else:
            self.lib = MotionLib(source, device=self.device)
        offsets = (
            None if np.allclose(self.lib.body_offsets, sk.REST_OFFSETS) else tuple(map(tuple, self.lib.body_offsets))
        )
        self.humanoid = HumanoidConfig(timestep=cfg.timestep, offsets=offsets)
        self.backend = make_backend(cfg.backend, num_envs, self.humanoid, self.device, cfg.num_threads)
        self.ref_features = reference_frame_features(self.lib)
        self.ref_inputs = reference_encoder_inputs(self.lib, self.ref_features)
        self.frozen_encoder = enc.resolve_encoder(encoder, self._default_encoder, self.device, cfg.skill_dim)
        self.kappa = float(getattr(self.frozen_encoder, "kappa", enc.DEFAULT_KAPPA))
        self.clip_embeddings = enc.clip_embeddings(
            self.frozen_encoder, self.ref_inputs, self.lib.clip_of_frame, self.lib.num_clips
        ).to(self.device)
        self._z_np = enc.as_numpy_directions(self.clip_embeddings)
        self._next_episodes: Tensor | None = None
        """(N, 3 + skill_dim) float64 on the device: each world's next episode, drawn ahead (``_draw``) for
        ``restart_masked``: clip, start frame and task (exact as float64), then the skill; made when first needed."""
        self._next_host = np.zeros((num_envs, 3), dtype=np.int64)
        """(N, 3) host copy of the next episodes' clip, start frame and task."""
        self._bridge = HostBridge(self.device)
        """Uploads of the draws ahead through pinned buffers: they are queued behind the step's device work, and a
        copy from pageable memory may wait for that work to finish."""
        n, dev = num_envs, self.device
        self.clip = torch.zeros(n, dtype=torch.long, device=dev)
        self.frame = torch.zeros(n, dtype=torch.long, device=dev)
        self.task = torch.zeros(n, dtype=torch.long, device=dev)
        self.skill = torch.zeros(n, cfg.skill_dim, device=dev)
        self.random = WorldRandom(n)
        """Per-world counter-based random numbers (keys from the seeds, one episode counter per world)."""
        self._num_frames = self.lib.num_frames.cpu().numpy()
        self.clip_host = np.zeros(n, dtype=np.int64)
        """(N,) host copy of ``clip``: the host drew it, so reading it never waits for the device."""
        self.frame_host = np.zeros(n, dtype=np.int64)
        """(N,) host copy of ``frame`` (advanced with it by ``physics_step``)."""
        self.task_host = np.zeros(n, dtype=np.int64)
        """(N,) host copy of ``task``."""
        self.action_offset = torch.as_tensor(sk.ACTION_OFFSET, dtype=torch.float32, device=dev)
        self.action_scale = torch.as_tensor(sk.ACTION_SCALE, dtype=torch.float32, device=dev)
        self.features = torch.zeros(n, FRAME_DIM, device=dev)
        """(N, 359) frame features of the current state."""
        self._clip_cdf: np.ndarray | None = None
        self._failure_rate = np.ones(self.lib.num_clips, dtype=np.float64)
        self.deviation_rule = DeviationRule(cfg.deviation, self.lib.num_clips, dev)
        self.started = np.zeros(n, dtype=bool)
        """(N,) host flags of the worlds that started an episode (a reset or a loaded state): only they may step."""
        self.closed = False
        """Whether ``close`` released the simulator."""

    def _upload(self, values: np.ndarray, dtype: torch.dtype) -> Tensor:
        """Host values as a tensor on the env's device (a copy: options may be read-only views)."""
        return torch.tensor(values, dtype=dtype).to(self.device, non_blocking=True)

    def device_mask(self, mask: np.ndarray) -> Tensor:
        """A host bool mask (N,) as a tensor on the env's device (an upload, never a device read)."""
        return self._upload(mask, torch.bool)

    def device_ids(self, ids: np.ndarray) -> Tensor:
        """Host world indices as an index tensor on the env's device (an upload, never a device read)."""
        return torch.from_numpy(np.ascontiguousarray(ids, dtype=np.int64)).to(self.device, non_blocking=True)

    # -- reference data -------------------------------------------------
    def _default_encoder(self) -> enc.EncoderLike:
        return default_encoder(self.lib, self.ref_inputs, self.cfg.skill_dim)

    def reference_history(self, env_ids: Tensor | None = None) -> Tensor:
        """(n, 4, 359) reference features of the 4 frames before each world's current frame (all worlds: None).

        Fills the encoder history at an episode start (RSI); frames before the
        clip's start repeat its first frame.
        """
        clip, frame = (self.clip, self.frame) if env_ids is None else (self.clip[env_ids], self.frame[env_ids])
        start = self.lib.starts[clip]
        idx = history_indices(start + frame, start)[:, : HISTORY_LEN - 1]
        return self.ref_features[idx]

    # -- episodes ---------------------------------------------------------
    def seed(self, env_ids: Any, seeds: Any) -> None:
        """Re-seed worlds ``env_ids`` (gymnasium's seeding: a non-negative int, or None for fresh entropy)."""
        self.random.seed(as_host_ids(env_ids), seeds)

    def _clip_ids(self, value: Any, n: int) -> np.ndarray:
        """Clip option (index, name, or one per world) as (n,) indices, checked."""
        lib = self.lib
        if isinstance(value, str):
            value = lib.clip_id(value)
        elif isinstance(value, list) and any(isinstance(c, str) for c in value):
            value = [lib.clip_id(c) if isinstance(c, str) else c for c in value]
        clip = np.broadcast_to(np.asarray(value, dtype=np.int64), (n,))
        bad = (clip < 0) | (clip >= lib.num_clips)
        if bad.any():
            raise ValueError(f"options['clip'] = {clip[bad][0]} is not a clip index in [0, {lib.num_clips})")
        return clip

    def _task_values(self, value: Any, n: int) -> np.ndarray:
        """Task option ("imitation"/"discovery"/1/0, or one per world) as (n,) ints, checked."""
        values = value if isinstance(value, list) or np.ndim(value) == 1 else [value]
        for v in values:
            if v not in (*TASK_NAMES, *TASK_NAMES.values()):  # 2 would pass as "not imitation" yet is no task
                raise ValueError(f"options['task'] must be 'imitation', 'discovery', 1 or 0 (or a list), got {v!r}")
        if isinstance(value, str):
            value = TASK_NAMES[value]
        elif isinstance(value, list):
            value = [TASK_NAMES[v] if isinstance(v, str) else v for v in value]
        return np.broadcast_to(np.asarray(value, dtype=np.int64), (n,))

    def _draw(self, ids: np.ndarray, options: dict[str, Any]) -> tuple[np.ndarray, ...]:
        """Clips, start frames, tasks (n,) and skills (n, skill_dim) of the next episodes of worlds ``ids``.

        One batched draw from each world's ``Stream.EPISODE`` numbers; options fix parts of it.
        """
        n, lib, slots, d = ids.size, self.lib, self.slots, self.skill_dim
        # the clip's to the discovery skill's numbers in one Philox call: numpy's per-operation overhead makes a
        # call cost about the same for 3 numbers as for 20
        u = self.random.uniform(ids, Stream.EPISODE, self._part_end("skill"))
        clip_opt = _per_world(options, "clip", n)
        if clip_opt is not None:
            clip = self._clip_ids(clip_opt, n)
        elif self._clip_cdf is None:
            clip = np.minimum((u[:, slots["clip"]] * lib.num_clips).astype(np.int64), lib.num_clips - 1)
        else:
            clip = np.searchsorted(self._clip_cdf, u[:, slots["clip"]], side="right")
            clip = np.minimum(clip, lib.num_clips - 1)
        last = self._num_frames[clip] - 1
        start_opt = _per_world(options, "start_frame", n)
        if start_opt is None:
            start = np.minimum((u[:, slots["start_frame"]] * last).astype(np.int64), last - 1)
        else:
            start = np.broadcast_to(np.asarray(start_opt, dtype=np.int64), (n,))
            bad = (start < 0) | (start >= last)
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                raise ValueError(
                    f"options['start_frame'] = {start[k]} must be in [0, {last[k]}) for clip {lib.names[clip[k]]!r}"
                )
        kappa_opt = _per_world(options, "kappa", n) if "kappa" in options else self.cfg.eval_kappa
        task_opt = _per_world(options, "task", n)
        if task_opt is not None:
            task = self._task_values(task_opt, n)
        elif kappa_opt is not None:
            task = np.full(n, IMITATION, dtype=np.int64)
        else:
            task = np.where(u[:, slots["task"]] < self.cfg.p_imitation, IMITATION, DISCOVERY)
        skill_opt = _per_world(options, "skill", n)
        if skill_opt is not None:
            skill = np.asarray(skill_opt, dtype=np.float64)
            if skill.shape[-1:] != (d,):
                raise ValueError(f"options['skill'] must hold {d} numbers (the env's skill_dim), got {skill.shape}")
            z = np.broadcast_to(skill, (n, d)).copy()
            norms = np.linalg.norm(z, axis=-1, keepdims=True)
            if not np.isfinite(z).all() or (norms < 1e-8).any():
                raise ValueError(f"options['skill'] must be a finite non-zero vector of {d} numbers")
            z = z / norms
        elif kappa_opt is not None:
            kappa = np.broadcast_to(np.asarray(kappa_opt, dtype=np.float64), (n,))
            if not np.isfinite(kappa).all() or (kappa < 0).any():
                raise ValueError(f"options['kappa'] must be >= 0, got {kappa_opt}")
            direction = self._episode_normals(ids, "vmf_direction")
            attempt = skills.vmf_attempt_uniforms(d)
            z = skills.sample_vmf_batch(
                self._z_np[clip],
                kappa,
                direction,
                lambda t, rows: self.random.uniform(ids[rows], Stream.VMF_ATTEMPT + t, attempt),
            )
        else:
            z = self._z_np[clip]
            disc = np.flatnonzero(task != IMITATION)
            z[disc] = skills.uniform_sphere_batch(self._episode_normals(ids[disc], "skill", u[disc]))
        return clip, start, task, z

    def _part_end(self, part: str) -> int:
        """End of a part's numbers, rounded up to Box-Muller's pairs."""
        slots = self.slots[part]
        count = slots.stop - slots.start
        return slots.start + count + count % 2

    def _episode_normals(self, ids: np.ndarray, part: str, u: np.ndarray | None = None) -> np.ndarray:
        """Standard normals (n, skill_dim) of one part of the episodes of worlds ``ids`` (``episode_slots``), from
        ``u`` (their episode numbers from 0, as ``_draw`` holds them) when it reaches that far."""
        slots = self.slots[part]
        count, end = slots.stop - slots.start, self._part_end(part)
        if u is None or u.shape[1] < end:
            u = self.random.uniform(ids, Stream.EPISODE, end - slots.start, first=slots.start)
        else:
            u = u[:, slots.start : end]
        return box_muller(u)[:, :count]  # Box-Muller turns uniforms into normals in pairs

    def reset_envs(self, env_ids: Any, options: dict[str, Any] | None = None) -> None:
        """Start new episodes in worlds ``env_ids`` (list, array or tensor): RSI, task indicator and skill.

        Batched over the worlds; ``options`` may fix clip, start_frame, task,
        skill or kappa for all of them or per world (see the env's docstring).
        """
        self.require_open()
        check_reset_options(options or {})
        ids = as_host_ids(env_ids)
        if ids.size == 0:
            return
        weighted = self.cfg.clip_sampling.mode != "uniform"
        self._clip_cdf = np.cumsum(self.clip_probabilities_host()) if weighted else None
        clip, start, task, z = self._draw(ids, options or {})
        self.random.advance(ids)
        idx = self.device_ids(ids)
        self.clip[idx] = self._upload(clip, torch.long)
        self.frame[idx] = self._upload(start, torch.long)
        self.task[idx] = self._upload(task, torch.long)
        self.skill[idx] = self._upload(z, torch.float32)
        self.clip_host[ids], self.frame_host[ids], self.task_host[ids] = clip, start, task
        qpos, qvel = self.lib.frame_qpos_qvel(self.clip[idx], self.frame[idx])
        self.backend.set_state(idx, qpos, qvel)
        self.started[ids] = True

    def require_open(self) -> None:
        """Raise ``ClosedEnvironmentError`` once ``close`` has released the simulator."""
        if self.closed:
            raise ClosedEnvironmentError("this env is closed (close() released its simulator); make a new env")

    def require_started(self) -> None:
        """Raise unless the env is open and every world started an episode: a step before ``reset`` would run
        worlds with no episode (zero skill, a meaningless reward), so it is ``ResetNeeded``, as Gymnasium's."""
        self.require_open()
        if not self.started.all():
            first = int(np.flatnonzero(~self.started)[0])
            raise ResetNeeded(
                f"call reset() before step(): world {first} of {self.num_envs} has not started an episode"
            )

    # -- restarts queued on the device ------------------------------------------
    @property
    def masked_restarts_supported(self) -> bool:
        """Whether ``restart_masked`` draws what ``reset_envs`` would: uniform clip draws and no evaluation kappa,
        so a world's next episode depends only on its own numbers, which can be drawn ahead."""
        return self.cfg.clip_sampling.mode == "uniform" and self.cfg.eval_kappa is None

    def _refreshed_next_episodes(self) -> Tensor:
        """``_next_episodes`` with the rows of worlds whose numbers moved drawn anew on the host (one upload)."""
        if self._next_episodes is None:
            self._next_episodes = torch.zeros(
                self.num_envs, 3 + self.skill_dim, dtype=torch.float64, device=self.device
            )
        ids = np.flatnonzero(self.random.changed)
        if ids.size:
            clip, start, task, z = self._draw(ids, {})
            self._next_host[ids] = np.stack((clip, start, task), axis=1)
            rows = np.concatenate((self._next_host[ids].astype(np.float64), z), axis=1)
            bridge = self._bridge
            self._next_episodes.index_copy_(0, bridge.to_device(ids, "next_ids"), bridge.to_device(rows, "next_rows"))
            self.random.changed[ids] = False
        return self._next_episodes

    def restart_masked(self, done: Tensor) -> None:
        """Start new episodes in the worlds flagged in ``done`` (N,) bool, by masked ops on the device and with no
        host read, so a step can queue them before its one read: the episodes ``reset_envs`` would start, drawn
        ahead by the same ``_draw``. ``finish_masked_restart`` then brings the host copies and streams along."""
        if not self.masked_restarts_supported:
            raise RuntimeError("restart_masked needs clip_sampling.mode 'uniform' and no eval_kappa")
        d, lib = self._refreshed_next_episodes(), self.lib
        clip, start, task = d[:, 0].long(), d[:, 1].long(), d[:, 2].long()
        rows = done[:, None]
        self.clip = torch.where(done, clip, self.clip)
        self.frame = torch.where(done, start, self.frame)
        self.task = torch.where(done, task, self.task)
        self.skill = torch.where(rows, d[:, 3:].float(), self.skill)  # float32 of the draw, as ``reset_envs``
        qpos, qvel = lib.frame_qpos_qvel(clip, start)
        self.backend.set_state_masked(done, qpos, qvel)
        self.features = torch.where(rows, self.ref_features[lib.starts[clip] + start], self.features)

    def finish_masked_restart(self, ids: np.ndarray) -> None:
        """Host side of ``restart_masked`` for the worlds ``ids`` that restarted (known from the step's one read):
        their host copies of clip, start frame and task, and their streams moved on to the next episode."""
        if ids.size == 0:
            return
        self.clip_host[ids], self.frame_host[ids], self.task_host[ids] = self._next_host[ids].T
        self.random.advance(ids)

    # -- stepping -----------------------------------------------------------
    def targets(self, actions: Tensor) -> Tensor:
        """PD targets (N, 69): offset + scale * clip(action, -1, 1)."""
        return self.action_offset + self.action_scale * actions.clamp(-1.0, 1.0)

    def check_actions(self, actions: Any) -> Tensor:
        """Actions as a float32 (N, 69) tensor on the env's device, or a clear error.

        Host actions (numpy, lists) are checked for NaN/inf here; a tensor is only reshaped and moved, its
        values are checked by the step's one host read (``RGSDTorchEnv``), so checking costs no device sync.
        """
        expected = (self.num_envs, sk.NUM_DOFS)
        shape = tuple(actions.shape) if isinstance(actions, Tensor) else np.shape(actions)
        if shape != expected and not (self.num_envs == 1 and shape == (sk.NUM_DOFS,)):
            raise ValueError(
                f"action has shape {shape}; expected {expected if self.num_envs > 1 else (sk.NUM_DOFS,)} (one target per hinge, in [-1, 1])"
            )
        if isinstance(actions, Tensor):
            return actions.detach().to(self.device, torch.float32).reshape(expected)
        a = np.asarray(actions, dtype=np.float32).reshape(expected)
        if not np.isfinite(a).all():
            raise nonfinite_action_error(a)
        return torch.as_tensor(a).to(self.device)

    def physics_step(self, actions: Tensor, env_ids: Tensor | None = None) -> None:
        """Advance the worlds ``env_ids`` (host indices, sorted; None: all) one control step and move every world's
        reference clock on (``SimBackend.step``: the other worlds' states are then unspecified)."""
        self.backend.step(self.targets(actions), env_ids)
        self.frame += 1
        self.frame_host += 1

    def observe_reset(self, env_ids: Tensor) -> StepInfo:
        """Features and info rows of worlds that were just reset to reference frames.

        After RSI a world's state is its reference frame, so its observation is
        that frame's precomputed features (no simulator read) and its error is 0.
        """
        clip, frame = self.clip[env_ids], self.frame[env_ids]
        g = self.lib.starts[clip] + frame
        self.features = self.features.clone()
        self.features[env_ids] = self.ref_features[g]
        no = torch.zeros(env_ids.shape[0], dtype=torch.bool, device=self.device)
        ref_pos = self.lib.frames("body_pos")[g]
        return StepInfo(
            self.task[env_ids].clone(), clip.clone(), frame.clone(), ref_pos, no.float(), no, no.clone(), no.clone()
        )

    def observe(self, env_ids: Tensor | None = None, counted: Tensor | None = None) -> StepInfo:
        """Update ``features`` of the given worlds (all by default); return their info rows. ``counted``: (N,) bool
        mask of the worlds whose state is a transition's outcome, which alone feed the deviation rule's error
        averages (None: all).

        ``features`` is replaced, never written in place, so tensors handed out
        earlier (e.g. the features of a finished episode's last state) stay valid.
        """
        s = self.backend.state(env_ids)
        pos = s.body_pos.to(self.device, torch.float32)
        # all worlds without an indexing op: each op is a kernel launch on a GPU
        clip, task, frame = (
            (self.clip, self.task, self.frame)
            if env_ids is None
            else (self.clip[env_ids], self.task[env_ids], self.frame[env_ids])
        )
        nf = self.lib.num_frames[clip]
        frame = torch.minimum(frame, nf - 1)
        feats = frame_features(
            phase_of(frame, nf),
            pos,
            s.body_rot.to(self.device, torch.float32),
            s.body_lin_vel.to(self.device, torch.float32),
            s.body_ang_vel.to(self.device, torch.float32),
        )
        feats = torch.nan_to_num(feats, 0.0, 1e3, -1e3)
        if env_ids is None:
            self.features = feats
        else:
            self.features = self.features.clone()
            self.features[env_ids] = feats
        g = self.lib.starts[clip] + frame
        ref_pos = self.lib.frames("body_pos")[g]
        dist = (pos - ref_pos).norm(dim=-1)
        err = dist.mean(dim=-1)
        unstable = s.unstable.to(self.device)  # MuJoCo resets an exploding world (finite again)
        fall = fall_flags(pos, s.contact, self.cfg.fall_height, self.cfg.contact_termination)
        ref_rot = self.lib.frames("body_rot")[g, 0]
        deviation = self.deviation_rule(
            dist, task == IMITATION, clip, s.body_rot[:, 0].to(ref_rot), ref_rot, counted=counted
        )
        return StepInfo(task.clone(), clip.clone(), frame, ref_pos, err, fall, deviation, unstable)

    def done_flags(self, info: StepInfo) -> tuple[Tensor, Tensor]:
        """(terminated, truncated) on the device: failure, or the episode's last frame reached (no host read)."""
        terminated = info.fall | info.deviation | info.unstable
        last = self.lib.num_frames[self.clip] - 1
        if self.cfg.discovery_end_frame is not None:
            last = torch.where(self.task != IMITATION, last.clamp_min(self.cfg.discovery_end_frame), last)
        truncated = ~terminated & (self.frame >= last)
        return terminated, truncated

    def truncated_host(self, terminated: np.ndarray) -> np.ndarray:
        """(N,) host twin of ``done_flags``' truncation, from the host copies of clip, frame and task."""
        last = self._num_frames[self.clip_host] - 1
        if self.cfg.discovery_end_frame is not None:
            last = np.where(self.task_host != IMITATION, np.maximum(last, self.cfg.discovery_end_frame), last)
        return ~terminated & (self.frame_host >= last)

    @property
    def failure_rate(self) -> Tensor:
        """(clips,) EMA of the share of imitation episodes that ended in a failure;
        a float64 CPU tensor sharing the host array (writes go through)."""
        return torch.from_numpy(self._failure_rate)

    @failure_rate.setter
    def failure_rate(self, value: Any) -> None:
        self._failure_rate = as_host_array(value, np.float64).copy()

    def clip_probabilities_host(self) -> np.ndarray:
        """(clips,) ``clip_probabilities`` as a host array."""
        n = self.lib.num_clips
        uniform = np.full(n, 1.0 / n)
        rate = self._failure_rate
        if self.cfg.clip_sampling.mode == "uniform" or rate.sum() <= 0.0:
            return uniform
        share = self.cfg.clip_sampling.failure_share
        return (1.0 - share) * uniform + share * rate / rate.sum()

    def clip_probabilities(self) -> Tensor:
        """(clips,) probability of each clip at the next RSI draw (``clip_sampling``)."""
        return torch.from_numpy(self.clip_probabilities_host())

    def record_outcomes(self, terminated: np.ndarray, truncated: np.ndarray, stepped: np.ndarray | None = None) -> None:
        """Fold this step's imitation worlds (host flags, before any reset; ``stepped``: the worlds that made a
        transition, None: all) into each clip's failure-rate EMA (``clip_sampling.mode: failure_weighted``; a
        no-op otherwise)."""
        if self.cfg.clip_sampling.mode != "failure_weighted":
            return
        n = self.lib.num_clips
        imitating = self.task_host == IMITATION
        if stepped is not None:
            imitating = imitating & stepped
        ended = (terminated | truncated) & imitating
        if not ended.any():
            return
        clips = self.clip_host[ended]
        count = np.bincount(clips, minlength=n).astype(np.float64)
        fails = np.bincount(clips, weights=terminated[ended].astype(np.float64), minlength=n)
        seen = count > 0
        rate = self._failure_rate
        # k episodes of one clip at once: the EMA's weight on the old value is (1 - 1/memory)^k
        keep = (1.0 - 1.0 / FAILURE_RATE_MEMORY) ** count[seen]
        rate[seen] = keep * rate[seen] + (1.0 - keep) * fails[seen] / count[seen]

    def set_deviation_rule(self, **changes: Any) -> dict[str, Any]:
        """Change the deviation rule's settings (``DeviationConfig`` fields, ``DEVIATION_KEYS``) from the next step
        on, e.g. a training curriculum that tightens it; returns the previous values of the changed keys."""
        bad = sorted(set(changes) - set(DEVIATION_KEYS))
        if bad:
            raise ValueError(f"only the deviation rule may change mid-run ({', '.join(DEVIATION_KEYS)}), not {bad[0]}")
        before = {k: getattr(self.cfg.deviation, k) for k in changes}
        deviation = dataclasses.replace(self.cfg.deviation, **changes)  # validated as any DeviationConfig
        self.cfg = dataclasses.replace(self.cfg, deviation=deviation)
        self.deviation_rule.cfg = deviation
        return before

    def state_dict(self) -> dict[str, Any]:
        """Episode state, generators and simulator state of all worlds (for checkpoints)."""
        return {
            "backend": self.backend.state_dict(),
            "clip": self.clip.cpu().clone(),
            "frame": self.frame.cpu().clone(),
            "task": self.task.cpu().clone(),
            "skill": self.skill.cpu().clone(),
            "features": self.features.cpu().clone(),
            "failure_rate": torch.from_numpy(self._failure_rate.copy()),
            "deviation": self.deviation_rule.state_dict(),
            "random": self.random.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue exactly from ``state_dict``."""
        self.require_open()
        if state["clip"].shape[0] != self.num_envs:
            raise ValueError(f"saved state has {state['clip'].shape[0]} worlds, this environment {self.num_envs}")
        self.backend.load_state_dict(state["backend"])
        for name in ("clip", "frame", "task", "skill", "features"):
            setattr(self, name, torch.as_tensor(state[name]).to(self.device).clone())
        for name in ("clip", "frame", "task"):
            setattr(self, f"{name}_host", torch.as_tensor(state[name]).numpy().astype(np.int64).copy())
        if "failure_rate" in state:
            self.failure_rate = torch.as_tensor(state["failure_rate"], dtype=torch.float64).numpy()
        if "deviation" in state:
            self.deviation_rule.load_state_dict(state["deviation"])
        if "random" in state:
            self.random.load_state_dict(state["random"])
        else:  # saved before the counter-based streams: the draws cannot continue exactly
            warnings.warn(
                "this checkpoint holds per-world numpy generators (saved before rgsd-envs drew from counter-based "
                "streams); the worlds keep fresh random streams, so the resumed episodes differ from an uninterrupted run",
                stacklevel=2,
            )
        self.started[:] = True  # a loaded state continues its worlds' episodes

    def close(self) -> None:
        """Release the simulator (again: a no-op); stepping or resetting afterwards raises."""
        if not self.closed:
            self.closed = True
            self.backend.close()
