"""Batched evaluation rollouts over the RGSD environment (its torch interface, ``RGSDTorchEnv``).

A rollout job is (clip, skill z): the world starts at the clip's first frame
(full reference state) with that z and runs the policy until the clip's last
frame. All jobs are stepped together, ``env.num_envs`` worlds at a time. With
``SkillTracks`` (a latent per step of each clip: Meta Motivo's tracking
inference) the world's skill changes every step (``env.set_skills``): the step
from frame t acts with row t of its clip's track, turned by the rotation that
takes the clip's centre to the job's z (``steer_tracks``), so a job whose z is
the centre follows the track itself.

The environment must be made for evaluation (``eval_env_config``): no
termination on deviation or falls, so every rollout reaches the clip's end, as
the Cartesian error of docs/evaluation.md needs (a fallen humanoid keeps accruing
error; falls are recorded as a flag instead). The rollouts step the env's torch interface, which never
resets a world by itself, so the state after the last step is still the
episode's own when it is read. Only simulator instability ends a rollout early (flagged ``unstable``; its error covers the frames it had).

Per job the result holds the Cartesian error (world frame) and the root-relative
error (MPJPE) with their per-frame values, fall, instability and tracking-success
flags, the root trajectory, the mean FID feature, and (on request) qpos for videos; FID
features are also folded into Gaussian statistics per (group, clip).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.utils import threads
from rgsd_envs.utils.progress import CountBar
from rgsd_eval.features import FEATURE_DIM, WINDOW, motion_features, num_windows
from rgsd_eval.fid import GaussianStats
from rgsd_eval.metrics import frame_errors, root_relative_frame_errors, tracking_success, until_first_fall


class Controller(Protocol):
    """Anything that maps observations (N, 375) to actions (N, 69): a ``PolicyMLP``."""

    def act(self, obs: Any) -> Any: ...


def eval_env_config(base: EnvConfig) -> tuple[EnvConfig, float]:
    """The evaluation variant of a run's EnvConfig, and the run's fall height (for the fall flag)."""
    cfg = base.without_early_termination(eval_kappa=None)
    return cfg, float(base.fall_height)


@dataclass
class RolloutJobs:
    """J rollouts to run: clip index, skill, group index and whether to keep qpos (for videos)."""

    clip: np.ndarray
    skill: np.ndarray
    group: np.ndarray
    keep_qpos: np.ndarray

    def __post_init__(self) -> None:
        self.clip = np.asarray(self.clip, dtype=np.int64).reshape(-1)
        j = self.clip.shape[0]
        self.skill = np.asarray(self.skill, dtype=np.float64).reshape(j, -1)
        self.group = np.broadcast_to(np.asarray(self.group, dtype=np.int64), (j,)).copy()
        self.keep_qpos = np.broadcast_to(np.asarray(self.keep_qpos, dtype=bool), (j,)).copy()

    def __len__(self) -> int:
        return int(self.clip.shape[0])

    @staticmethod
    def concat(parts: list[RolloutJobs]) -> RolloutJobs:
        """All jobs of several lists, in order."""
        return RolloutJobs(
            *(np.concatenate([getattr(p, k) for p in parts]) for k in ("clip", "skill", "group", "keep_qpos"))
        )


@dataclass
class Rollouts:
    """Results per job (see the module docstring); arrays indexed like the jobs."""

    jobs: RolloutJobs
    length: np.ndarray
    """(J,) frames recorded, the start frame included."""
    error: np.ndarray
    """(J,) Cartesian error (m), mean over frames 1..length-1."""
    error_until_fall: np.ndarray
    """(J,) Cartesian error (m), mean over frames 1..f, f the first frame flagged fallen (``metrics.until_first_fall``;
    ``error`` if it never fell)."""
    played_before_fall: np.ndarray
    """(J,) share of frames 1..length-1 that ``error_until_fall`` averages: up to the first fall (1: it never fell)."""
    frame_error: np.ndarray
    """(J, T_max) Cartesian error (m) of each recorded frame, NaN from ``length`` on."""
    mpjpe: np.ndarray
    """(J,) root-relative body error (m), mean over frames 1..length-1 (``metrics.root_relative_frame_errors``)."""
    fell: np.ndarray
    """(J,) the pelvis went below the run's fall height or a non-foot body touched the floor."""
    unstable: np.ndarray
    """(J,) the simulator flagged the world; the rollout ended early."""
    success: np.ndarray
    """(J,) reached the clip's end with its per-frame error at most 0.5 m on frames 1..length-1
    (``metrics.tracking_success``)."""
    root_pos: np.ndarray
    """(J, T_max, 3) pelvis positions, NaN after ``length``."""
    mean_feature: np.ndarray
    """(J, FEATURE_DIM) mean FID feature over the rollout's windows (NaN if it had none)."""
    feature_stats: dict[tuple[int, int], GaussianStats] = field(default_factory=dict)
    """FID feature statistics per (group, clip)."""
    qpos: dict[int, np.ndarray] = field(default_factory=dict)
    """(length, 76) qpos of the jobs with ``keep_qpos``."""


@dataclass
class SkillTracks:
    """A latent per step of each clip, and each clip's centre latent (the job z that follows the track unturned)."""

    latents: list[np.ndarray]
    """Per clip (frames - 1, 16) unit latents; row t is the skill of the step from the clip's frame t."""
    centres: np.ndarray
    """(clips, 16) unit latents; ``track_centres`` of ``latents`` by default."""


def track_centres(latents: list[np.ndarray]) -> np.ndarray:
    """(clips, 16) each track's normalised mean latent."""
    mean = np.stack([z.mean(axis=0) for z in latents])
    return mean / np.maximum(np.linalg.norm(mean, axis=-1, keepdims=True), 1e-12)


def steer_tracks(tracks: np.ndarray, centre: np.ndarray, skill: np.ndarray) -> np.ndarray:
    """(m, T, 16) tracks turned by the rotation in the plane of (centre, skill) that takes each row's unit ``centre``
    (m, 16) to its unit ``skill`` (m, 16): R = I - (a + b)(a + b)^T / (1 + a.b) + 2 b a^T; R = I where they match."""
    a, b = centre[:, None, :], skill[:, None, :]
    c = (a * b).sum(-1, keepdims=True)
    s = a + b
    x = tracks
    out = x - s * (s * x).sum(-1, keepdims=True) / np.maximum(1.0 + c, 1e-9) + 2.0 * b * (a * x).sum(-1, keepdims=True)
    out = out / np.maximum(np.linalg.norm(out, axis=-1, keepdims=True), 1e-12)
    return np.where(np.all(a == b, axis=-1, keepdims=True), x, out)


StepHook = Callable[[Any, int], None]
"""``hook(env, t)``: called after step t, before the state is recorded."""


def run_rollouts(
    env: Any,
    policy: Controller,
    jobs: RolloutJobs,
    *,
    action_noise: float | np.ndarray = 0.0,
    seed: int = 0,
    fall_height: float = 0.35,
    features: bool = True,
    fid_window: int = WINDOW,
    progress: bool = False,
    desc: str = "rollouts",
    on_step: StepHook | None = None,
    torch_threads: int | None = 1,
    max_frames: int | None = None,
    skill_tracks: SkillTracks | None = None,
) -> Rollouts:
    """Run every job to its clip's end, ``env.num_envs`` worlds at a time (see the module docstring).

    ``skill_tracks``: every job's skill changes per step along its clip's track (module docstring).

    ``max_frames`` (at least 2) stops every rollout after that many frames, the start frame included, when its
    clip is longer.

    ``action_noise``: std of the Gaussian noise added to the mean action, one number or one per action dimension
    (the run's own policy std: ``runs.action_std``). A policy whose output is squashed by tanh (FB-CPR's) acts
    inside [-1, 1], so its noisy action is clamped back into that box, as its trainer samples it.

    ``torch_threads`` bounds the policy's intra-op threads (None: torch's default);
    one is fastest on a few busy cores, where OpenMP workers fight the simulator's.
    """
    base = env.unwrapped
    core = base.core
    _check_eval_env(core.cfg)
    lib: MotionLib = core.lib
    n = base.num_envs
    """``env``: an ``RGSDTorchEnv`` or rgsd's Gymnasium vector env (its torch env runs the rollouts)."""
    nf = lib.num_frames.cpu().numpy()
    if len(jobs) and (jobs.clip.min() < 0 or jobs.clip.max() >= lib.num_clips):
        raise ValueError(f"job clip indices must be in [0, {lib.num_clips})")
    if max_frames is not None and max_frames < 2:
        raise ValueError(f"max_frames must be at least 2 (the start frame and one step), got {max_frames}")
    if max_frames is not None:
        nf = np.minimum(nf, max_frames)
    if skill_tracks is not None:
        counts = [z.shape[0] for z in skill_tracks.latents]
        expected = (lib.num_frames.cpu().numpy() - 1).tolist()
        if counts != expected or skill_tracks.centres.shape != (lib.num_clips, jobs.skill.shape[1]):
            raise ValueError(
                f"skill_tracks must hold frames - 1 latents per clip ({expected}) and one centre per clip, got "
                f"{counts} and centres {skill_tracks.centres.shape}"
            )
    t_max = int(nf[jobs.clip].max()) if len(jobs) else 1
    out = Rollouts(
        jobs=jobs,
        length=np.zeros(len(jobs), dtype=np.int64),
        error=np.full(len(jobs), np.nan),
        error_until_fall=np.full(len(jobs), np.nan),
        played_before_fall=np.full(len(jobs), np.nan),
        frame_error=np.full((len(jobs), t_max), np.nan),
        mpjpe=np.full(len(jobs), np.nan),
        fell=np.zeros(len(jobs), dtype=bool),
        unstable=np.zeros(len(jobs), dtype=bool),
        success=np.zeros(len(jobs), dtype=bool),
        root_pos=np.full((len(jobs), t_max, 3), np.nan, dtype=np.float32),
        mean_feature=np.full((len(jobs), FEATURE_DIM), np.nan),
    )
    chunks = [np.arange(i, min(i + n, len(jobs))) for i in range(0, len(jobs), n)]
    total = sum(int(nf[jobs.clip[c]].max()) - 1 for c in chunks)
    gen = torch.Generator().manual_seed(int(seed))
    with (
        # redrawn on a terminal, a line a minute with the time left in a log file (``nohup``)
        CountBar(desc, total, unit="step", disable=not progress) as bar,
        threads.torch_threads(torch_threads),
    ):
        noise = torch.as_tensor(np.asarray(action_noise, dtype=np.float32))
        if noise.dim() > 1 or (noise.dim() == 1 and noise.shape[0] not in (1, sk.NUM_DOFS)):
            raise ValueError(
                f"action_noise must be one std or {sk.NUM_DOFS} (one per action), got {tuple(noise.shape)}"
            )
        if (noise < 0).any():
            raise ValueError("action_noise must be >= 0")
        box = getattr(policy, "output", "linear") == "tanh"
        noisy = noise if bool((noise > 0).any()) else None
        opts = _ChunkOptions(noisy, gen, fall_height, features, fid_window, on_step, bar, max_frames, box, skill_tracks)
        for k, ids in enumerate(chunks):
            _run_chunk(env, policy, jobs, ids, out, opts, seed + k)
    return out


def _check_eval_env(cfg: EnvConfig) -> None:
    expected, _ = eval_env_config(cfg)
    bad = {k: v for k, v in vars(cfg).items() if v != getattr(expected, k)}
    if bad:
        raise ValueError(f"evaluation needs an environment made with eval_env_config(...); these fields differ: {bad}")


@dataclass
class _ChunkOptions:
    """What every chunk of one ``run_rollouts`` call shares."""

    action_noise: torch.Tensor | None
    """() or (act_dim,) std of the Gaussian action noise (None: none)."""
    generator: torch.Generator
    fall_height: float
    features: bool
    fid_window: int
    on_step: StepHook | None
    bar: CountBar
    max_frames: int | None = None
    clamp_unit_box: bool = False
    """Clamp noisy actions into [-1, 1] (policies with a tanh output)."""
    skill_tracks: SkillTracks | None = None
    """Per-step skills of every job (None: each job keeps its z)."""


@dataclass
class _Recording:
    """One chunk's per-step records of its m jobs (T = the chunk's longest clip)."""

    body_pos: np.ndarray
    """(T, m, 24, 3)"""
    qpos: np.ndarray
    """(T, len(keep), 76) of the jobs in ``keep``."""
    keep: np.ndarray
    fell: np.ndarray
    """(T, m)"""
    length: np.ndarray
    unstable: np.ndarray


def _run_chunk(
    env: Any, policy: Controller, jobs: RolloutJobs, ids: np.ndarray, out: Rollouts, opts: _ChunkOptions, seed: int
) -> None:
    """Reset the worlds to the chunk's jobs, step them to the longest clip's end and summarise.

    Runs on the env's torch interface (``RGSDTorchEnv``; a Gymnasium env's own torch env): the records stay
    on the env's device and are read once per chunk; per step only the env's one host read happens."""
    base = env.unwrapped
    tenv = getattr(base, "torch_env", base)
    core = tenv.core
    lib: MotionLib = core.lib
    n, m = tenv.num_envs, len(ids)
    world_jobs = np.concatenate([ids, np.full(n - m, ids[0])])  # idle worlds repeat the first job
    clips = jobs.clip[world_jobs]
    nf = lib.num_frames.cpu().numpy()
    steps = int(nf[clips[:m]].max())
    if opts.max_frames is not None:
        steps = min(steps, opts.max_frames)
    track = (
        None if opts.skill_tracks is None else _world_tracks(opts.skill_tracks, clips, jobs.skill[world_jobs], steps)
    )
    options = {
        "clip": clips.tolist(),
        "start_frame": [0] * n,
        "task": "imitation",
        "skill": jobs.skill[world_jobs] if track is None else track[:, 0],
    }
    obs, _ = tenv.reset(seed=seed, options=options)
    everyone = np.arange(n)
    dev = tenv.device
    keep = np.flatnonzero(jobs.keep_qpos[ids])
    keep_idx = core.device_ids(keep)
    body_pos = torch.zeros((steps, m, sk.NUM_BODIES, 3), device=dev)
    qpos = torch.zeros((steps, len(keep), sk.QPOS_DIM), device=dev)
    fell = torch.zeros((steps, m), dtype=torch.bool, device=dev)
    non_foot = torch.ones(sk.NUM_BODIES, dtype=torch.bool, device=dev)
    non_foot[list(sk.FOOT_BODY_IDS)] = False

    def record(t: int) -> None:
        s = core.backend.state()
        pos = s.body_pos[:m].to(dev, torch.float32)
        body_pos[t] = pos
        qpos[t] = s.qpos.to(dev, torch.float32).index_select(0, keep_idx)
        fell[t] = (pos[:, 0, 2] < opts.fall_height) | (s.contact[:m].to(dev) & non_foot).any(dim=-1)

    record(0)
    length = np.full(m, steps, dtype=np.int64)
    unstable = np.zeros(m, dtype=bool)
    alive = np.ones(m, dtype=bool)
    for t in range(1, steps):
        if track is not None and t > 1:  # the step from frame t - 1 acts with the track's row t - 1
            tenv.set_skills(everyone, torch.as_tensor(track[:, t - 1], dtype=torch.float32))
            obs = tenv.observations()
        actions = torch.as_tensor(policy.act(obs), dtype=torch.float32)
        if opts.action_noise is not None:
            noise = torch.randn(actions.shape, generator=opts.generator) * opts.action_noise
            actions = actions + noise.to(actions.device)
            if opts.clamp_unit_box:
                actions = actions.clamp(-1.0, 1.0)
        tr = tenv.transition(actions.to(dev))
        obs = tenv.observations()
        if opts.on_step is not None:
            opts.on_step(env, t)
        record(t)
        # the evaluation config ends an episode only at the clip's end or on instability
        bad = alive & tr.terminated_host[:m]
        ended = bad | (alive & tr.truncated_host[:m])
        length[ended] = np.where(bad[ended], t, t + 1)  # an unstable step's state is the engine's reset
        unstable |= bad
        alive &= ~ended
        opts.bar.advance(1)
        if not alive.any():
            opts.bar.advance(steps - 1 - t)
            break
    recording = _Recording(body_pos.cpu().numpy(), qpos.cpu().numpy(), keep, fell.cpu().numpy(), length, unstable)
    _summarise(out, jobs, ids, lib, recording, opts)


def _world_tracks(tracks: SkillTracks, clips: np.ndarray, skills: np.ndarray, steps: int) -> np.ndarray:
    """(n, max(steps - 1, 1), 16) each world's skill per step: its clip's track (the last row held past the clip's
    end), steered from the clip's centre to the world's job z."""
    rows = np.arange(max(steps - 1, 1))
    per_world = np.stack([tracks.latents[c][np.minimum(rows, tracks.latents[c].shape[0] - 1)] for c in clips])
    return steer_tracks(per_world, tracks.centres[clips], np.asarray(skills, dtype=np.float64))


def _summarise(
    out: Rollouts, jobs: RolloutJobs, ids: np.ndarray, lib: MotionLib, rec: _Recording, opts: _ChunkOptions
) -> None:
    """Errors, flags, trajectories and features of one chunk's recordings into ``out``."""
    body_pos, length = rec.body_pos, rec.length
    steps = body_pos.shape[0]
    clips = jobs.clip[ids]
    nf = lib.num_frames.cpu().numpy()[clips]
    t = np.arange(steps)[:, None]
    frame_idx = lib.starts.cpu().numpy()[clips][None, :] + np.minimum(t, nf[None, :] - 1)
    ref = lib.frames("body_pos").cpu().numpy()[frame_idx]  # (steps, m, 24, 3)
    err = frame_errors(body_pos, ref)  # (steps, m)
    local = root_relative_frame_errors(body_pos, ref)  # (steps, m)
    valid = t < length[None, :]
    scored = valid & (t >= 1)

    def scored_mean(x: np.ndarray, frames: np.ndarray = scored) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.where(frames.any(0), (x * frames).sum(0) / np.maximum(frames.sum(0), 1), np.nan)

    out.error[ids] = scored_mean(err)
    until_fall = until_first_fall(scored, rec.fell)
    out.error_until_fall[ids] = scored_mean(err, until_fall)
    with np.errstate(invalid="ignore", divide="ignore"):
        out.played_before_fall[ids] = np.where(scored.any(0), until_fall.sum(0) / scored.sum(0), np.nan)
    out.mpjpe[ids] = scored_mean(local)
    out.frame_error[ids, :steps] = np.where(valid, err, np.nan).T
    out.length[ids] = length
    out.fell[ids] = (rec.fell & scored).any(axis=0)
    out.unstable[ids] = rec.unstable
    out.success[ids] = tracking_success(np.where(scored, err, np.nan).T, ~rec.unstable)
    root = np.where(valid[..., None], body_pos[:, :, 0], np.nan)
    out.root_pos[ids, :steps] = root.transpose(1, 0, 2)
    for k, j in enumerate(ids[rec.keep]):
        out.qpos[int(j)] = rec.qpos[: length[rec.keep[k]], k].astype(np.float64)
    if not opts.features:
        return
    for size in np.unique(length):
        sel = np.flatnonzero(length == size)
        if num_windows(int(size), opts.fid_window) == 0:
            continue
        f = motion_features(body_pos[:size, sel].transpose(1, 0, 2, 3), lib.fps, opts.fid_window)  # (k, w, D)
        out.mean_feature[ids[sel]] = f.mean(axis=1)
        groups = jobs.group[ids[sel]]
        for g, c in sorted(set(zip(groups.tolist(), clips[sel].tolist()))):
            rows = f[(groups == g) & (clips[sel] == c)]
            out.feature_stats.setdefault((g, c), GaussianStats.empty(FEATURE_DIM)).add(rows)
