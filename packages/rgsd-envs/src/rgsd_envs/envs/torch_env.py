"""RGSD-SMPL-v0 as a torch-native batched environment: the interface rgsd's own trainers use.

``RGSDTorchEnv`` takes actions and returns observations, rewards, done flags and
per-world information as tensors on the env's device (the GPU with the warp
backend), as rsl_rl's ``VecEnv`` and mjlab do. The Gymnasium environments
(``RGSDEnv``, ``RGSDVectorEnv``) are numpy adapters over the same two
primitives (``transition`` and ``restart``), so third-party libraries see the
same worlds.

One host read per step: a packed (2, N) tensor of the termination flags and a
NaN-action flag crosses to the host once (``StepExtras.done_host``). The rest
of the host's bookkeeping uses what the host already holds: it drew every
episode's clip, start frame and task, so it knows each world's frame and
whether it reached its clip's end, and which worlds are imitation worlds (the
two encoders score their worlds through index tensors uploaded from the host,
never through a device read). Worlds that finished restart in the same call
(SameStep autoreset); ``StepExtras`` describes the transition before the reset
and ``final_obs`` is the observation the finished worlds reached.

On a CUDA device the restarts are queued before the read as masked device ops
(``masked_restarts``): every world's next episode is drawn ahead on the host,
from the same counter-based numbers, so the device never waits for the host to
learn which worlds finished. The host side (its copies of clip, frame and task,
and the next draws) follows after the read, and the next draws upload while the
next step's physics runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch

from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.core import (
    RGSDCore,
    StepInfo,
    as_host_array,
    as_host_ids,
    check_reset_options,
    nonfinite_action_error,
)
from rgsd_envs.envs.observations import ObservationLayout
from rgsd_envs.envs.spaces import single_spaces
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.library import MotionLib, MotionSource
from rgsd_envs.rewards.encoder_reward import EncoderRewardCore
from rgsd_envs.rewards.encoders import EncoderLike
from rgsd_envs.utils.host_reads import read_host_flags
from rgsd_envs.utils.threads import env_side

Tensor = torch.Tensor


def make_config(config: EnvConfig | dict | None, overrides: dict[str, Any]) -> EnvConfig:
    """An ``EnvConfig`` from a config (or dict) and keyword overrides."""
    base = vars(config).copy() if isinstance(config, EnvConfig) else dict(config or {})
    base.update(overrides)
    return EnvConfig(**base)


@dataclass
class Transition:
    """One physics step of all worlds, before any reset: the primitive behind every ``step``."""

    info: StepInfo
    """Per-world rows of the state reached (device)."""
    terminated: Tensor
    truncated: Tensor
    reward: Tensor
    """(N,) float32: the encoder reward (0 without ``encoder_reward`` and for worlds that did not step)."""
    terminated_host: np.ndarray
    truncated_host: np.ndarray

    @property
    def done_host(self) -> np.ndarray:
        """(N,) host flags of the worlds whose episode ended."""
        return self.terminated_host | self.truncated_host


@dataclass
class StepExtras:
    """What a trainer needs besides (obs, reward, terminated, truncated): (N, ...) tensors on the env's
    device describing the transition just made (before the autoreset), plus the step's one host copy."""

    done: Tensor
    """(N,) bool: terminated | truncated."""
    time_outs: Tensor
    """(N,) bool: truncated at the clip's end (bootstrap these with V(final_obs))."""
    final_obs: Tensor
    """(N, obs_dim) observation of the state each world reached (before the reset of finished worlds); obs_dim =
    359 + skill_dim (375 by default)."""
    final_features: Tensor
    """(N, 359) frame features of that state."""
    task: Tensor
    """(N,) long task indicator of the transition's episode (1 imitation, 0 discovery)."""
    clip_id: Tensor
    """(N,) long index of the transition's reference clip (``motion_lib.names[i]`` is its name)."""
    frame: Tensor
    """(N,) long reference frame reached (the clip's last frame once past its end)."""
    cartesian_error: Tensor
    """(N,) mean body-position error to the reference frame (m)."""
    fall: Tensor
    """(N,) bool: the pelvis below ``fall_height`` or, with ``contact_termination``, a body other than the feet
    on the floor (terminates the episode)."""
    deviation: Tensor
    """(N,) bool: an imitation episode strayed from its reference past the deviation rule (terminates it)."""
    unstable: Tensor
    """(N,) bool: the simulator went unstable and put the world back at rest (terminates the episode)."""
    ref_body_pos: Tensor
    """(N, 24, 3) reference body positions of the frame reached."""
    encoder_reward: Tensor
    """(N,) the encoder reward (zeros without one)."""
    skills: Tensor
    """(N, skill_dim) the skill the transition was made with."""
    encoder_inputs: Tensor
    """(N, 1795) s: the 5 stacked frames before the step."""
    next_encoder_inputs: Tensor
    """(N, 1795) s': the 5 stacked frames after it."""
    started: Tensor
    """(N,) bool: worlds that started a new episode in this call."""
    done_host: np.ndarray
    """(N,) host copy of ``done`` (the step's one device read); index with it, never read ``done`` again."""
    time_outs_host: np.ndarray
    """(N,) host copy of ``time_outs``."""

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def keys(self) -> list[str]:
        """Field names (the extras read like a dict)."""
        return [f.name for f in fields(self)]


def seed_worlds(core: RGSDCore, ids: np.ndarray, seed: int | list[int | None] | None) -> None:
    """Re-seed worlds ``ids`` of ``core`` before a reset: an int seed gives world i seed + i, a list one seed per
    world of the env; None, or a None in the list, leaves a world's stream as it is (as ``SyncVectorEnv`` leaves an
    env reset with ``seed=None``)."""
    if seed is None:
        return
    seeds = [seed + i for i in range(core.num_envs)] if isinstance(seed, int) else list(seed)
    if len(seeds) != core.num_envs:
        raise ValueError(f"seed list has {len(seeds)} entries; expected num_envs={core.num_envs}")
    seeded = [i for i in ids if seeds[i] is not None]
    core.seed(seeded, [seeds[i] for i in seeded])


class RGSDTorchEnv:
    """N worlds of RGSD-SMPL-v0 with tensors in and out on ``device`` (see the module docstring).

    ``encoder_reward=True`` (the registered env's reward) scores each transition with
    ``r = C + kappa * mu(s')^T z``; ``False`` gives the bare env (reward 0, for methods that
    compute their own reward from the stored transitions).
    """

    def __init__(
        self,
        num_envs: int = 64,
        config: EnvConfig | dict | None = None,
        motions: MotionSource | MotionLib | None = None,
        encoder: EncoderLike | str | None = None,
        encoder_reward: bool = True,
        reward_kappa: float | None = None,
        reward_constant: float | None = None,
        **overrides: Any,
    ):
        self.cfg = make_config(config, overrides)
        self.num_envs = num_envs
        self.core = RGSDCore(num_envs, self.cfg, motions=motions, encoder=encoder)
        self.device = self.core.device
        self.reward_core: EncoderRewardCore | None = None
        if encoder_reward:
            self.enable_encoder_reward(reward_kappa, reward_constant)
        self.obs_dim = self.core.layout.policy_obs_dim
        """Size of one world's observation: 359 + ``skill_dim``."""
        self.act_dim = sk.NUM_DOFS
        """Size of one world's action: 69, one PD target per hinge."""
        self.single_observation_space, self.single_action_space = single_spaces("flat", self.core.skill_dim)
        """One world's spaces, as Gymnasium's vector envs name them: ``Box(-inf, inf, (obs_dim,))`` and
        ``Box(-1, 1, (act_dim,))`` (float32; the torch env takes and gives tensors of these shapes, (N, ...))."""
        self._masked_restarts: bool | None = None

    @property
    def masked_restarts(self) -> bool:
        """Whether ``step`` restarts finished worlds by masked device ops queued before its read (the default on
        CUDA with a backend that sets states on the device, where the env's config allows it:
        ``RGSDCore.masked_restarts_supported``) instead of by host indices after it. Both start the same
        episodes; set it to choose."""
        if self._masked_restarts is None:
            core = self.core
            return self.device.type == "cuda" and core.backend.masks_on_device and core.masked_restarts_supported
        return self._masked_restarts

    @masked_restarts.setter
    def masked_restarts(self, value: bool) -> None:
        if value and not self.core.masked_restarts_supported:
            raise ValueError("masked restarts need env.clip_sampling.mode 'uniform' and no env.eval_kappa")
        self._masked_restarts = bool(value)

    @property
    def layout(self) -> ObservationLayout:
        """What the observations hold (``rgsd_envs.envs.observations.HUMANOID_LAYOUT``), as the methods read it."""
        return self.core.layout

    @property
    def motion_lib(self) -> MotionLib:
        """The reference clips."""
        return self.core.lib

    @property
    def unwrapped(self) -> RGSDTorchEnv:
        """This env (code written for wrapped Gymnasium envs reads ``env.unwrapped.core``)."""
        return self

    def enable_encoder_reward(self, kappa: float | None = None, constant: float | None = None) -> EncoderRewardCore:
        """Score transitions with the encoder reward from now on (what ``encoder_reward=True`` does)."""
        self.reward_core = EncoderRewardCore(self.core, kappa, constant)
        return self.reward_core

    # -- the trainable encoder --------------------------------------------------
    @property
    def encoder(self) -> EncoderLike:
        """The trainable (discovery) encoder."""
        return self._rewards().trainable

    def set_encoder(self, encoder: EncoderLike | str | os.PathLike) -> None:
        """Replace the trainable (discovery) encoder: an encoder object or file."""
        self._rewards().set_encoder(encoder)

    def _rewards(self) -> EncoderRewardCore:
        if self.reward_core is None:
            raise RuntimeError("this env was made with encoder_reward=False: it has no encoder reward")
        return self.reward_core

    # -- observations ------------------------------------------------------------
    def observations(self) -> Tensor:
        """(N, 359 + skill_dim) current observations ``[o_t, z]`` (float32, env device)."""
        return torch.cat((self.core.features, self.core.skill), dim=-1)

    def set_skills(self, env_ids: Any, skills: Tensor) -> None:
        """Give the running episodes of worlds ``env_ids`` new skills (N_ids, skill_dim), normalised; the
        observations and the encoder reward use them from now on (e.g. latents resampled mid-episode)."""
        ids = as_host_ids(env_ids)
        z = torch.as_tensor(skills, dtype=torch.float32).to(self.device).reshape(ids.size, self.core.skill_dim)
        z = z / z.norm(dim=-1, keepdim=True).clamp_min(1e-8)
        idx = self.core.device_ids(ids)
        self.core.skill = self.core.skill.clone()
        self.core.skill[idx] = z
        if self.reward_core is not None:
            self.reward_core.set_skills(ids, z)

    # -- the two primitives ------------------------------------------------------
    def seed_reset(self, seed: Any, options: dict[str, Any] | None) -> tuple[np.ndarray, dict[str, Any]]:
        """The worlds a reset covers (all, or ``options["reset_mask"]``) and the remaining options; seeds those
        worlds first (``seed_worlds``)."""
        self.core.require_open()
        options = dict(options or {})
        check_reset_options(options, extra=("reset_mask",))
        ids = reset_mask_ids(options.pop("reset_mask", None), self.num_envs)
        seed_worlds(self.core, ids, seed)
        return ids, options

    def restart(self, ids: np.ndarray, options: dict[str, Any] | None = None) -> StepInfo:
        """Start new episodes in worlds ``ids`` (host indices): RSI, task, skill, reward history; their info rows."""
        self.core.reset_envs(ids, options)
        info = self.core.observe_reset(self.core.device_ids(ids))
        if self.reward_core is not None:
            self.reward_core.start(ids)
        return info

    def transition(
        self,
        actions: Tensor,
        stepped: np.ndarray | None = None,
        before_read: Callable[[Tensor], None] | None = None,
    ) -> Transition:
        """Advance the worlds one control step and score it. Worlds outside ``stepped`` (a host mask, None: all)
        make no transition (Gymnasium's NextStep autoreset's pending worlds, an evaluation's finished rollouts):
        they end nothing and feed no statistics, and their rows of what this step returns are meaningless. The
        MuJoCo backend leaves their states as they were (a step costs what the stepped worlds cost); MuJoCo Warp
        steps them too. ``before_read`` gets the device's done flags (N,) once the step's work is queued, before
        its one read."""
        core = self.core
        core.require_started()  # before reset() the worlds have no episode: ResetNeeded, as Gymnasium's
        if stepped is not None and stepped.all():
            stepped = None  # every world: the plain step
        a = core.check_actions(actions)
        core.physics_step(a, None if stepped is None else torch.from_numpy(np.flatnonzero(stepped)))
        # a world that made no transition adds no sample to the deviation rule's error averages
        info = core.observe(counted=None if stepped is None else core.device_mask(stepped))
        terminated, truncated = core.done_flags(info)
        # the reward's ops are queued before the step's one read, so the device runs them while the host waits
        if self.reward_core is not None:
            reward = self.reward_core.transition(core.features, stepped)
        else:
            reward = torch.zeros(self.num_envs, device=self.device)
        if before_read is not None:
            before_read(terminated | truncated)
        packet = read_host_flags(torch.stack((terminated, ~torch.isfinite(a).all(dim=-1))))  # the step's one read
        if packet[1].any():
            raise nonfinite_action_error(a)
        term_host = packet[0]
        trunc_host = core.truncated_host(term_host)
        if stepped is not None:
            moved = core.device_ids(np.flatnonzero(~stepped))
            terminated, truncated = terminated.clone(), truncated.clone()
            terminated.index_fill_(0, moved, False)  # ``x[moved] = False`` would upload False, a blocking copy
            truncated.index_fill_(0, moved, False)
            term_host, trunc_host = term_host & stepped, trunc_host & stepped
        core.record_outcomes(term_host, trunc_host, stepped)
        return Transition(info, terminated, truncated, reward, term_host, trunc_host)

    # -- the torch interface -------------------------------------------------------
    @env_side
    def reset(
        self, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """Reset all worlds (or those in ``options["reset_mask"]``); int seeds give world i seed + i.

        Returns the observations (N, obs_dim) and the task, clip_id and frame of every world's episode."""
        ids, options = self.seed_reset(seed, options)
        self.restart(ids, options)
        core = self.core
        return self.observations(), {
            "task": core.task.clone(),
            "clip_id": core.clip.clone(),
            "frame": core.frame.clone(),
        }

    @env_side
    def step(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, StepExtras]:
        """One 30 Hz control step of all worlds; finished worlds restart in the same call (SameStep)."""
        rc = self.reward_core
        if self.masked_restarts:
            final: list[Tensor] = []

            def queue_restarts(done: Tensor) -> None:
                final.append(self.observations())
                self.core.restart_masked(done)
                if rc is not None:
                    rc.start_masked(done)

            tr = self.transition(actions, before_read=queue_restarts)
            final_obs, done_host = final[0], tr.done_host
            ids = np.flatnonzero(done_host)
            self.core.finish_masked_restart(ids)
            if rc is not None:
                rc.finish_masked_start(ids)
        else:
            tr = self.transition(actions)
            final_obs = self.observations()
            done_host = tr.done_host
            ids = np.flatnonzero(done_host)
            if ids.size:
                self.restart(ids)
        done = tr.terminated | tr.truncated
        info = tr.info
        extras = StepExtras(
            done=done,
            time_outs=tr.truncated,
            final_obs=final_obs,
            final_features=final_obs[:, : self.core.features.shape[1]],
            task=info.task,
            clip_id=info.clip_id,
            frame=info.frame,
            cartesian_error=info.cartesian_error,
            fall=info.fall,
            deviation=info.deviation,
            unstable=info.unstable,
            ref_body_pos=info.ref_body_pos,
            encoder_reward=tr.reward,
            skills=rc.last_skills if rc is not None else final_obs[:, self.core.features.shape[1] :],
            encoder_inputs=rc.encoder_inputs if rc is not None else _empty(self.num_envs, self.device),
            next_encoder_inputs=rc.next_encoder_inputs if rc is not None else _empty(self.num_envs, self.device),
            started=done,
            done_host=done_host,
            time_outs_host=tr.truncated_host,
        )
        return self.observations(), tr.reward, tr.terminated, tr.truncated, extras

    # -- checkpoints ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly: worlds, episodes, generators, reward histories."""
        return {
            "core": self.core.state_dict(),
            "reward": None if self.reward_core is None else self.reward_core.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue exactly from ``state_dict`` (also reads the layout of the Gymnasium wrappers before v0.2)."""
        if "env" in state:  # {"env": RGSDVectorEnv state, "reward": ...}, saved through the Gymnasium wrapper
            state = {"core": state["env"]["core"], "reward": state.get("reward")}
        self.core.load_state_dict(state["core"])
        if self.reward_core is not None and state.get("reward") is not None:
            self.reward_core.load_state_dict(state["reward"])

    def close(self) -> None:
        """Release the simulator (again: a no-op); ``reset`` and ``step`` then raise ``ClosedEnvironmentError``."""
        self.core.close()


def reset_mask_ids(mask: Any, num_envs: int) -> np.ndarray:
    """The worlds ``options["reset_mask"]`` (a list, numpy array or tensor; None: every world) resets, as host
    indices. Refused as Gymnasium's ``SyncVectorEnv`` refuses them: a shape other than (num_envs,) (a shorter mask
    would leave worlds unreset), a dtype other than bool (indices are not a mask) and a mask with no world."""
    if mask is None:
        return np.arange(num_envs)
    m = as_host_array(mask)
    if m.shape != (num_envs,):
        raise ValueError(
            f"options['reset_mask'] has shape {m.shape}, but the env has num_envs={num_envs}: give one bool per "
            f"world, shape ({num_envs},)"
        )
    if m.dtype != np.bool_:
        raise TypeError(
            f"options['reset_mask'] has dtype {m.dtype}: give one bool per world (True: reset it), not indices "
            "or numbers"
        )
    if not m.any():
        raise ValueError("options['reset_mask'] selects no world: set at least one entry True, or skip the reset")
    return np.flatnonzero(m)


def _empty(n: int, device: torch.device) -> Tensor:
    return torch.zeros(n, 0, device=device)
