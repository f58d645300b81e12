"""Batched episode logic of RGSD-SMPL-v0 over N worlds, in torch.

Shared by the single and the native vector environment: reference state
initialisation, the task indicator and skill, PD targets from actions,
observations, terminations and the per-step information. Randomness comes from
one numpy Generator per world, so N worlds here behave exactly like N single
environments seeded the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rgsd_envs.envs import skills
from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.observations import (
    FRAME_DIM,
    HISTORY_LEN,
    SKILL_DIM,
    frame_features,
    history_indices,
    phase_of,
    reference_encoder_inputs,
    reference_frame_features,
)
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.humanoid.mjcf import HumanoidConfig
from rgsd_envs.motion.library import MotionLib, MotionSource
from rgsd_envs.rewards import encoders as enc
from rgsd_envs.rewards.tracking import tracking_reward, tracking_terms
from rgsd_envs.sim import make_backend

Tensor = torch.Tensor

IMITATION, DISCOVERY = 1, 0
"""Task indicator values c (SPEC §3)."""
TASK_NAMES = {"imitation": IMITATION, "discovery": DISCOVERY}


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


def _world_options(options: dict[str, Any], k: int, n: int) -> dict[str, Any]:
    """Options of the k-th of n reset worlds: per-world sequences are indexed, others shared.

    A value is per world when it holds one entry per reset world: a length-n list
    for clip, start_frame, task and kappa, an (n, 16) array for skill.
    """
    out = {}
    for key, v in options.items():
        per_world_ndim = 2 if key == "skill" else 1
        if v is not None and not isinstance(v, str) and np.ndim(v) == per_world_ndim:
            if len(v) != n:
                raise ValueError(f"options[{key!r}] has {len(v)} entries; expected one per reset world ({n})")
            v = v[k]
        out[key] = v
    return out


class RGSDCore:
    """N worlds of RGSD-SMPL-v0: state, episodes and observations as torch tensors."""

    def __init__(
        self,
        num_envs: int,
        config: EnvConfig | None = None,
        motions: MotionSource | MotionLib | None = None,
        encoder: enc.EncoderLike | str | None = None,
    ):
        cfg = config or EnvConfig()
        self.cfg = cfg
        self.num_envs = num_envs
        self.device = torch.device(cfg.device)
        source = cfg.motions if motions is None else motions
        self.lib = source if isinstance(source, MotionLib) else MotionLib(source, device=self.device)
        offsets = (
            None if np.allclose(self.lib.body_offsets, sk.REST_OFFSETS) else tuple(map(tuple, self.lib.body_offsets))
        )
        armature = {} if cfg.armature_factor is None else {"armature_factor": cfg.armature_factor}
        self.humanoid = HumanoidConfig(timestep=cfg.timestep, offsets=offsets, **armature)
        self.backend = make_backend(cfg.backend, num_envs, self.humanoid, self.device, cfg.num_threads)
        self.ref_features = reference_frame_features(self.lib)
        self.ref_inputs = reference_encoder_inputs(self.lib, self.ref_features)
        self.frozen_encoder = enc.resolve_encoder(encoder, self._default_encoder)
        self.kappa = float(getattr(self.frozen_encoder, "kappa", enc.DEFAULT_KAPPA))
        self.clip_embeddings = enc.clip_embeddings(
            self.frozen_encoder, self.ref_inputs, self.lib.clip_of_frame, self.lib.num_clips
        ).to(self.device)
        self._z_np = enc.as_numpy_directions(self.clip_embeddings)
        n, dev = num_envs, self.device
        self.clip = torch.zeros(n, dtype=torch.long, device=dev)
        self.frame = torch.zeros(n, dtype=torch.long, device=dev)
        self.task = torch.zeros(n, dtype=torch.long, device=dev)
        self.skill = torch.zeros(n, SKILL_DIM, device=dev)
        self.rngs: list[np.random.Generator] = [np.random.default_rng() for _ in range(n)]
        self.action_offset = torch.as_tensor(sk.ACTION_OFFSET, dtype=torch.float32, device=dev)
        self.action_scale = torch.as_tensor(sk.ACTION_SCALE, dtype=torch.float32, device=dev)
        self._non_foot = torch.ones(sk.NUM_BODIES, dtype=torch.bool, device=dev)
        self._non_foot[list(sk.FOOT_BODY_IDS)] = False
        self.features = torch.zeros(n, FRAME_DIM, device=dev)
        """(N, 359) frame features of the current state."""
        self.tracking_reward = torch.zeros(n, device=dev)
        """(N,) with ``cfg.reward == "tracking"``: the tracking reward of the current state (``observe``)."""
        self._clip_probs: np.ndarray | None = None
        self.failure_rate = torch.ones(self.lib.num_clips, dtype=torch.float64)
        """(clips,) EMA of the share of imitation episodes that ended in a failure (``clip_sampling``)."""

    # -- reference data -------------------------------------------------
    def _default_encoder(self) -> enc.EncoderLike:
        return enc.ReferenceKernelEncoder(self.ref_inputs, self.lib.clip_of_frame, self.lib.num_clips)

    def reference_history(self, env_ids: Tensor) -> Tensor:
        """(n, 4, 359) reference features of the 4 frames before each world's current frame.

        Fills the encoder history at an episode start (RSI); frames before the
        clip's start repeat its first frame.
        """
        g = self.lib.starts[self.clip[env_ids]] + self.frame[env_ids]
        idx = history_indices(g, self.lib.starts[self.clip[env_ids]])[:, : HISTORY_LEN - 1]
        return self.ref_features[idx]

    # -- episodes ---------------------------------------------------------
    def seed(self, env_ids: list[int], seeds: list[int | None]) -> None:
        """Re-seed the per-world generators (gymnasium's seeding for each)."""
        from gymnasium.utils import seeding

        for i, s in zip(env_ids, seeds):
            self.rngs[i], _ = seeding.np_random(s)

    def _draw(self, i: int, options: dict[str, Any]) -> tuple[int, int, int, np.ndarray]:
        """Clip, start frame, task and skill of world i's next episode (its own generator)."""
        rng, lib = self.rngs[i], self.lib
        clip = options.get("clip")
        clip = (
            (
                int(rng.integers(lib.num_clips))
                if self._clip_probs is None
                else int(rng.choice(lib.num_clips, p=self._clip_probs))
            )
            if clip is None
            else (lib.clip_id(clip) if isinstance(clip, str) else int(clip))
        )
        if not 0 <= clip < lib.num_clips:
            raise ValueError(f"options['clip'] = {clip} is not a clip index in [0, {lib.num_clips})")
        last = int(lib.num_frames[clip]) - 1
        start = options.get("start_frame")
        start = int(rng.integers(last)) if start is None else int(start)
        if not 0 <= start < last:
            raise ValueError(f"options['start_frame'] = {start} must be in [0, {last}) for clip {lib.names[clip]!r}")
        task = options.get("task")
        kappa = options.get("kappa", self.cfg.eval_kappa)
        if task is None:
            task = IMITATION if (kappa is not None or rng.random() < self.cfg.p_imitation) else DISCOVERY
        elif isinstance(task, str):
            if task not in TASK_NAMES:
                raise ValueError(f"options['task'] must be 'imitation' or 'discovery', got {task!r}")
            task = TASK_NAMES[task]
        if options.get("skill") is not None:
            z = np.asarray(options["skill"], dtype=np.float64).reshape(-1)
            if z.shape != (SKILL_DIM,) or not np.isfinite(z).all() or np.linalg.norm(z) < 1e-8:
                raise ValueError(f"options['skill'] must be a finite non-zero vector of {SKILL_DIM} numbers")
            z = z / np.linalg.norm(z)
        elif kappa is not None:
            z = skills.sample_vmf(rng, self._z_np[clip], float(kappa))
        elif task == IMITATION:
            z = self._z_np[clip]
        else:
            z = skills.sample_uniform_sphere(rng, SKILL_DIM)
        return clip, start, int(task), z

    def reset_envs(self, env_ids: list[int], options: dict[str, Any] | None = None) -> None:
        """Start new episodes in the given worlds: RSI, task indicator and skill."""
        if not env_ids:
            return
        weighted = self.cfg.clip_sampling == "failure_weighted"
        self._clip_probs = self.clip_probabilities().numpy() if weighted else None
        draws = [self._draw(i, _world_options(options or {}, k, len(env_ids))) for k, i in enumerate(env_ids)]
        ids = torch.as_tensor(env_ids, device=self.device)
        self.clip[ids] = torch.as_tensor([d[0] for d in draws], device=self.device)
        self.frame[ids] = torch.as_tensor([d[1] for d in draws], device=self.device)
        self.task[ids] = torch.as_tensor([d[2] for d in draws], device=self.device)
        self.skill[ids] = torch.as_tensor(np.stack([d[3] for d in draws]), dtype=torch.float32, device=self.device)
        qpos, qvel = self.lib.frame_qpos_qvel(self.clip[ids], self.frame[ids])
        self.backend.set_state(ids, qpos, qvel)

    # -- stepping -----------------------------------------------------------
    def targets(self, actions: Tensor) -> Tensor:
        """PD targets (N, 69): offset + scale * clip(action, -1, 1)."""
        return self.action_offset + self.action_scale * actions.clamp(-1.0, 1.0)

    def check_actions(self, actions: Any) -> Tensor:
        """Actions as a float32 (N, 69) tensor, or a clear error."""
        a = actions.detach().cpu().numpy() if isinstance(actions, Tensor) else np.asarray(actions, dtype=np.float32)
        expected = (self.num_envs, sk.NUM_DOFS)
        if a.shape != expected and not (self.num_envs == 1 and a.shape == (sk.NUM_DOFS,)):
            raise ValueError(
                f"action has shape {tuple(a.shape)}; expected {expected if self.num_envs > 1 else (sk.NUM_DOFS,)} (one target per hinge, in [-1, 1])"
            )
        a = a.reshape(expected)
        if not np.isfinite(a).all():
            bad = np.argwhere(~np.isfinite(a))[0].tolist()
            raise ValueError(
                f"action contains NaN or inf (world {bad[0]}, hinge {sk.DOF_NAMES[bad[1]]}); the policy output is broken"
            )
        return torch.as_tensor(a, dtype=torch.float32).to(self.device)

    def physics_step(self, actions: Tensor) -> None:
        """Advance all worlds one control step and move their reference clocks on."""
        self.backend.step(self.targets(actions))
        self.frame += 1

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

    def observe(self, env_ids: Tensor | None = None) -> StepInfo:
        """Update ``features`` of the given worlds (all by default); return their info rows.

        ``features`` is replaced, never written in place, so tensors handed out
        earlier (e.g. the features of a finished episode's last state) stay valid.
        """
        idx = slice(None) if env_ids is None else env_ids
        s = self.backend.state(env_ids)
        pos = s.body_pos.to(self.device, torch.float32)
        clip, task = self.clip[idx], self.task[idx]
        nf = self.lib.num_frames[clip]
        frame = torch.minimum(self.frame[idx], nf - 1)
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
        err = (pos - ref_pos).norm(dim=-1).mean(dim=-1)
        if self.cfg.reward == "tracking":
            self._track(s, feats, g, env_ids)
        unstable = s.unstable.to(self.device)  # MuJoCo resets an exploding world (finite again)
        fall = pos[:, 0, 2] < self.cfg.fall_height
        if self.cfg.contact_termination:
            fall = fall | (s.contact.to(self.device) & self._non_foot).any(dim=-1)
        deviation = (task == IMITATION) & (err > self.cfg.deviation_threshold)
        if not self.cfg.deviation_termination:
            deviation = torch.zeros_like(deviation)
        return StepInfo(task.clone(), clip.clone(), frame, ref_pos, err, fall, deviation, unstable)

    def _track(self, s: Any, feats: Tensor, g: Tensor, env_ids: Tensor | None) -> None:
        """Store the tracking reward of the observed worlds against their reference frames ``g``."""
        f32 = {"device": self.device, "dtype": torch.float32}
        lib = self.lib
        terms = tracking_terms(
            s.qpos[:, 7:].to(**f32),
            s.qvel[:, 6:].to(**f32),
            feats,
            s.body_pos[:, 0].to(**f32),
            s.qvel[:, :3].to(**f32),
            lib.frames("dof_pos")[g],
            lib.frames("dof_vel")[g],
            self.ref_features[g],
            lib.frames("root_pos")[g],
            lib.frames("root_lin_vel")[g],
        )
        r = tracking_reward(terms, self.cfg.tracking_scale)
        if env_ids is None:
            self.tracking_reward = r
        else:
            self.tracking_reward = self.tracking_reward.clone()
            self.tracking_reward[env_ids] = r

    def done_flags(self, info: StepInfo) -> tuple[Tensor, Tensor]:
        """(terminated, truncated): failure, or the clip's last frame reached; records imitation outcomes."""
        terminated = info.fall | info.deviation | info.unstable
        truncated = ~terminated & (self.frame >= self.lib.num_frames[self.clip] - 1)
        if self.cfg.clip_sampling == "failure_weighted":
            self._record_outcomes(info, terminated, truncated)
        return terminated, truncated

    def clip_probabilities(self) -> Tensor:
        """(clips,) probability of each clip at the next RSI draw (``clip_sampling``)."""
        uniform = torch.full((self.lib.num_clips,), 1.0 / self.lib.num_clips, dtype=torch.float64)
        if self.cfg.clip_sampling == "uniform" or float(self.failure_rate.sum()) <= 0.0:
            return uniform
        share = self.cfg.failure_weighted_share
        return (1.0 - share) * uniform + share * self.failure_rate / self.failure_rate.sum()

    def _record_outcomes(self, info: StepInfo, terminated: Tensor, truncated: Tensor) -> None:
        """Fold the imitation episodes that ended this step into each clip's failure-rate EMA."""
        ended = ((terminated | truncated) & (info.task == IMITATION)).cpu()
        if not ended.any():
            return
        clips = info.clip_id.cpu()[ended]
        failed = terminated.cpu()[ended].to(torch.float64)
        count = torch.bincount(clips, minlength=self.lib.num_clips).to(torch.float64)
        fails = torch.bincount(clips, weights=failed, minlength=self.lib.num_clips)
        seen = count > 0
        # k episodes of one clip at once: the EMA's weight on the old value is (1 - 1/memory)^k
        keep = (1.0 - 1.0 / self.cfg.failure_rate_memory) ** count[seen]
        self.failure_rate[seen] = keep * self.failure_rate[seen] + (1.0 - keep) * fails[seen] / count[seen]

    def state_dict(self) -> dict[str, Any]:
        """Episode state, generators and simulator state of all worlds (for checkpoints)."""
        return {
            "backend": self.backend.state_dict(),
            "clip": self.clip.cpu().clone(),
            "frame": self.frame.cpu().clone(),
            "task": self.task.cpu().clone(),
            "skill": self.skill.cpu().clone(),
            "features": self.features.cpu().clone(),
            "failure_rate": self.failure_rate.clone(),
            "rngs": [r.bit_generator.state for r in self.rngs],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue exactly from ``state_dict``."""
        if len(state["rngs"]) != self.num_envs:
            raise ValueError(f"saved state has {len(state['rngs'])} worlds, this environment {self.num_envs}")
        self.backend.load_state_dict(state["backend"])
        for name in ("clip", "frame", "task", "skill", "features"):
            setattr(self, name, torch.as_tensor(state[name]).to(self.device).clone())
        if "failure_rate" in state:
            self.failure_rate = torch.as_tensor(state["failure_rate"], dtype=torch.float64).clone()
        for rng, st in zip(self.rngs, state["rngs"]):
            rng.bit_generator.state = st

    def close(self) -> None:
        """Release the simulator."""
        self.backend.close()
