"""Batched evaluation rollouts over the RGSD environment (its torch interface, ``RGSDTorchEnv``).

A rollout job is (clip, skill z): the world starts at the clip's first frame
(full reference state) with that z and runs the policy until the clip's last
frame. All jobs are stepped together, ``env.num_envs`` worlds at a time, in
batches cut from the jobs sorted by clip length (``batches``; results stay in
the jobs' order, and a job's numbers do not depend on its batch: its action
noise is its own stream). With
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
error (MPJPE), the per-frame Cartesian error, fall, instability and tracking-success
flags, the root trajectory, the mean FID feature, and (on request) qpos for videos; FID
features are also folded into Gaussian statistics per (group, clip). Per-frame
results are stored per job at its own clip's length (``Ragged``), and a batch
reads body positions a window of frames at a time, so memory follows the frames
the rollouts have, not jobs x the longest clip.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.termination import fall_flags
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.utils import threads
from rgsd_envs.utils.progress import CountBar
from rgsd_eval.batches import NOISE_BLOCK, JobNoise, batch_steps, batches
from rgsd_eval.features import FEATURE_DIM, WINDOW, motion_features
from rgsd_eval.fid import GaussianStats
from rgsd_eval.metrics import (
    frame_errors,
    root_relative_frame_errors,
    tracking_success,
    until_first_deviation,
    until_first_fall,
)


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
class Ragged:
    """Rows of different lengths, one per job, stored end to end: row j is ``data[offsets[j] : offsets[j + 1]]``."""

    data: np.ndarray
    offsets: np.ndarray
    """(J + 1,) where each row starts, then the end."""

    @classmethod
    def full(cls, lengths: np.ndarray, tail: tuple[int, ...], fill: float, dtype: Any) -> Ragged:
        """Rows of ``lengths`` entries of shape ``tail``, all ``fill``."""
        offsets = np.concatenate(([0], np.cumsum(np.asarray(lengths, dtype=np.int64))))
        return cls(np.full((int(offsets[-1]), *tail), fill, dtype=dtype), offsets)

    def __len__(self) -> int:
        return int(self.offsets.shape[0] - 1)

    def __getitem__(self, j: int) -> np.ndarray:
        """Row j (a view)."""
        return self.data[self.offsets[j] : self.offsets[j + 1]]

    def lengths(self) -> np.ndarray:
        """(J,) entries per row."""
        return np.diff(self.offsets)

    def at(self, rows: np.ndarray, index: np.ndarray | int) -> np.ndarray:
        """Entry ``index`` (one per row, or one for all) of each of ``rows``."""
        return self.data[self.offsets[np.asarray(rows, dtype=np.int64)] + index]

    def padded(self, rows: np.ndarray | None = None, width: int | None = None) -> np.ndarray:
        """(len(rows), width, ...) float rows (all rows by default; ``width`` default the longest), NaN past each
        row's end."""
        rows = np.arange(len(self)) if rows is None else np.asarray(rows, dtype=np.int64).reshape(-1)
        sizes = self.lengths()[rows]
        width = int(sizes.max(initial=0)) if width is None else width
        out = np.full((len(rows), width, *self.data.shape[1:]), np.nan, dtype=np.result_type(self.data, np.float32))
        for i, j in enumerate(rows):
            row = self[j][:width]
            out[i, : len(row)] = row
        return out


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
    error_until_deviation: np.ndarray
    """(J,) Cartesian error (m), mean over frames 1..d, d the first frame whose error exceeds the deviation threshold
    (``metrics.until_first_deviation``; ``error`` if none does)."""
    frame_error: Ragged
    """Per job (its clip's frames,) Cartesian error (m) of each recorded frame, NaN from ``length`` on."""
    mpjpe: np.ndarray
    """(J,) root-relative body error (m), mean over frames 1..length-1 (``metrics.root_relative_frame_errors``)."""
    fell: np.ndarray
    """(J,) the pelvis went below the run's fall height or a non-foot body touched the floor."""
    unstable: np.ndarray
    """(J,) the simulator flagged the world; the rollout ended early."""
    success: np.ndarray
    """(J,) reached the clip's end with its per-frame error at most 0.5 m on frames 1..length-1
    (``metrics.tracking_success``)."""
    root_pos: Ragged
    """Per job (its clip's frames, 3) float32 pelvis positions, NaN from ``length`` on."""
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
    fall_height: float = EnvConfig.fall_height,
    features: bool = True,
    fid_window: int = WINDOW,
    progress: bool = False,
    desc: str = "rollouts",
    on_step: StepHook | None = None,
    torch_threads: int | None = 1,
    max_frames: int | None = None,
    skill_tracks: SkillTracks | None = None,
    noise_stream: int = 0,
) -> Rollouts:
    """Run every job to its clip's end, ``env.num_envs`` worlds at a time (see the module docstring).

    ``skill_tracks``: every job's skill changes per step along its clip's track (module docstring).

    ``max_frames`` (at least 2) stops every rollout after that many frames, the start frame included, when its
    clip is longer.

    ``action_noise``: std of the Gaussian noise added to the mean action, one number or one per action dimension
    (the run's own policy std: ``runs.action_std``); job j's noise is drawn from a stream seeded by (``seed``, j),
    or by (``seed``, j, ``noise_stream``) for another stream than 0 (``batches.JobNoise``). A policy whose output
    is squashed by tanh (FB-CPR's) acts inside [-1, 1], so its noisy action is clamped back into that box, as its
    trainer samples it.

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
    planned = nf[jobs.clip]
    out = Rollouts(
        jobs=jobs,
        length=np.zeros(len(jobs), dtype=np.int64),
        error=np.full(len(jobs), np.nan),
        error_until_fall=np.full(len(jobs), np.nan),
        played_before_fall=np.full(len(jobs), np.nan),
        error_until_deviation=np.full(len(jobs), np.nan),
        frame_error=Ragged.full(planned, (), np.nan, np.float64),
        mpjpe=np.full(len(jobs), np.nan),
        fell=np.zeros(len(jobs), dtype=bool),
        unstable=np.zeros(len(jobs), dtype=bool),
        success=np.zeros(len(jobs), dtype=bool),
        root_pos=Ragged.full(planned, (3,), np.nan, np.float32),
        mean_feature=np.full((len(jobs), FEATURE_DIM), np.nan),
    )
    chunks = batches(planned, n)
    total = batch_steps(planned, n)  # one bar tick per batch step
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
        opts = _ChunkOptions(
            noisy,
            int(seed),
            fall_height,
            features,
            fid_window,
            on_step,
            bar,
            max_frames,
            box,
            skill_tracks,
            noise_stream,
        )
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
    seed: int
    """Seeds each job's action noise with its index (``batches.JobNoise``)."""
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
    noise_stream: int = 0
    """Keys the jobs' noise besides ``seed`` and their index (``batches.JobNoise``)."""


RECORD_JOB_FRAMES = 1 << 17
"""Job-frames of body positions a chunk holds at once (about 38 MB of float32): longer chunks are recorded and
featurised in windows of frames, so a chunk's memory does not grow with its clips' 24 x 3 positions per frame."""


@dataclass
class _Recording:
    """One chunk's per-frame records of its m jobs (T = the chunk's longest rollout): what its scores need."""

    err: np.ndarray
    """(T, m) Cartesian error per frame (``metrics.frame_errors``; 0 on frames never recorded)."""
    local: np.ndarray
    """(T, m) root-relative error per frame."""
    fell: np.ndarray
    """(T, m)"""
    length: np.ndarray
    unstable: np.ndarray


def _run_chunk(
    env: Any, policy: Controller, jobs: RolloutJobs, ids: np.ndarray, out: Rollouts, opts: _ChunkOptions, seed: int
) -> None:
    """Reset the worlds to the chunk's jobs, step them to the longest rollout's end and summarise.

    Runs on the env's torch interface (``RGSDTorchEnv``; a Gymnasium env's own torch env): body positions stay on
    the env's device for a window of frames (``RECORD_JOB_FRAMES``) and are read and scored once per window; per
    step only the env's one host read happens."""
    base = env.unwrapped
    tenv = getattr(base, "torch_env", base)
    core = tenv.core
    n, m = tenv.num_envs, len(ids)
    world_jobs = np.concatenate([ids, np.full(n - m, ids[0])])  # idle worlds repeat the first job
    clips = jobs.clip[world_jobs]
    steps = int(out.frame_error.lengths()[ids].max())
    skills = jobs.skill[world_jobs]
    track = None if opts.skill_tracks is None else _TrackRows(opts.skill_tracks, clips, skills)
    options = {
        "clip": clips.tolist(),
        "start_frame": [0] * n,
        "task": "imitation",
        "skill": skills if track is None else track.row(0),
    }
    obs, _ = tenv.reset(seed=seed, options=options)
    everyone = np.arange(n)
    noise = None if opts.action_noise is None else JobNoise(opts.seed, ids, n, sk.NUM_DOFS, opts.noise_stream)
    window = min(int(steps), max(4 * opts.fid_window, RECORD_JOB_FRAMES // m))
    rec = _Recorder(core, jobs, ids, out, opts, int(steps), window)
    rec.record(0)
    length = np.full(m, steps, dtype=np.int64)
    unstable = np.zeros(m, dtype=bool)
    alive = np.ones(m, dtype=bool)
    # only the worlds of running jobs act and step: the padding worlds past the jobs never, a job's world from its
    # end on (MuJoCo then steps just those worlds; a policy's rows are its own, so a job's numbers stay the same)
    active = np.arange(n) < m
    acting = _Acting(n, tenv.device, policy)
    for t in range(1, steps):
        if track is not None and t > 1:  # the step from frame t - 1 acts with the track's row t - 1
            tenv.set_skills(everyone, torch.as_tensor(track.row(t - 1), dtype=torch.float32))
            obs = tenv.observations()
        rows = acting.rows(active)
        actions = acting.act(policy, obs, rows)
        if noise is not None:
            drawn = noise.step(t)[:, : actions.shape[-1]]
            drawn = torch.from_numpy(drawn if rows is None else drawn[active]) * opts.action_noise
            actions = actions + drawn.to(actions.device)
            if opts.clamp_unit_box:
                actions = actions.clamp(-1.0, 1.0)
        tr = tenv.transition(acting.every_world(actions, rows).to(tenv.device), stepped=active)
        obs = tenv.observations()
        if opts.on_step is not None:
            opts.on_step(env, t)
        # the evaluation config ends an episode only at the clip's end or on instability
        bad = alive & tr.terminated_host[:m]
        ended = bad | (alive & tr.truncated_host[:m])
        length[ended] = np.where(bad[ended], t, t + 1)  # an unstable step's state is the engine's reset
        unstable |= bad
        alive &= ~ended
        active[:m] = alive
        rec.record(t, length, alive)
        opts.bar.advance(1)
        if not alive.any():
            opts.bar.advance(steps - 1 - t)
            break
    rec.finish(length)
    _summarise(out, jobs, ids, _Recording(rec.err, rec.local, rec.fell, length, unstable))


ACT_MIN_ROWS = 16
"""Fewest rows a policy on the CPU acts on: below 16 rows CPU matrix products take another kernel, whose rounding
differs, so a job's actions would depend on how many of its chunk's jobs still run, or on how many worlds the env
has."""


class _Acting:
    """The acting rows of a chunk's step: on the CPU the running jobs' worlds, padded with copies of the first to
    ``ACT_MIN_ROWS`` rows (``act``; a row's actions do not depend on the others'), on a GPU every world; their
    observations in, every world's actions out (zeros for the others: they do not step)."""

    def __init__(self, n: int, device: torch.device, policy: Controller):
        self.n, self.device = n, device
        params = getattr(policy, "parameters", None)
        # a policy on a GPU acts for every world: cuBLAS picks its kernels by row count too, and costs about the same
        self.on_cpu = params is None or all(p.device.type == "cpu" for p in params())
        self.active: np.ndarray | None = None
        self.ids: torch.Tensor | None = None

    def rows(self, active: np.ndarray) -> torch.Tensor | None:
        """Device indices of the acting worlds (None: every world), remade when ``active`` changes."""
        if not self.on_cpu or active.all():
            return None
        if self.active is None or not np.array_equal(self.active, active):
            self.active = active.copy()
            self.ids = torch.from_numpy(np.flatnonzero(active)).to(self.device)
        return self.ids

    def act(self, policy: Controller, obs: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
        """(acting rows, act_dim) the policy's actions for the acting rows of ``obs``, computed on at least
        ``ACT_MIN_ROWS`` rows on the CPU (copies of the first pad them), so the kernel is that of any larger batch."""
        x = obs if rows is None else obs[rows]
        short = ACT_MIN_ROWS - x.shape[0] if self.on_cpu else 0
        if short > 0:
            x = torch.cat((x, x[:1].expand(short, -1)))
        actions = torch.as_tensor(policy.act(x), dtype=torch.float32)
        return actions if short <= 0 else actions[:-short]

    def every_world(self, actions: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
        """(n, act_dim) actions with the acting rows' ``actions`` in place and zeros elsewhere."""
        if rows is None:
            return actions
        full = torch.zeros((self.n, actions.shape[-1]), dtype=actions.dtype, device=actions.device)
        return full.index_copy_(0, rows.to(actions.device), actions)


class _TrackRows:
    """Each world's skill per step (``SkillTracks``), computed a block of rows at a time."""

    def __init__(self, tracks: SkillTracks, clips: np.ndarray, skills: np.ndarray):
        self.tracks, self.clips = tracks, clips
        self.skills = np.asarray(skills, dtype=np.float64)
        self.first, self.block = 0, np.zeros((len(clips), 0, skills.shape[-1]))

    def row(self, r: int) -> np.ndarray:
        """(n, 16) the worlds' skills of the step from frame r: their clip's track row r (the last row held past the
        clip's end), steered from the clip's centre to the world's job z."""
        if not self.first <= r < self.first + self.block.shape[1]:
            self.first = r // NOISE_BLOCK * NOISE_BLOCK
            rows = np.arange(self.first, self.first + NOISE_BLOCK)
            latents = self.tracks.latents
            per_world = np.stack([latents[c][np.minimum(rows, latents[c].shape[0] - 1)] for c in self.clips])
            self.block = steer_tracks(per_world, self.tracks.centres[self.clips], self.skills)
        return self.block[:, r - self.first]


class _Recorder:
    """A chunk's states, read from the device a window of frames at a time and scored there: per-frame errors and
    fall flags, pelvis paths, kept qpos and FID features (a feature window's frames and their neighbours for the
    velocities may span two windows of frames: the last ``fid_window`` + 1 frames are carried over)."""

    def __init__(
        self, core: Any, jobs: RolloutJobs, ids: np.ndarray, out: Rollouts, opts: _ChunkOptions, steps: int, window: int
    ):
        self.core, self.jobs, self.ids, self.out, self.opts = core, jobs, ids, out, opts
        self.lib: MotionLib = core.lib
        m = len(ids)
        dev = core.device
        self.window, self.steps = window, steps
        self.keep = np.flatnonzero(jobs.keep_qpos[ids])
        self.keep_idx = core.device_ids(self.keep)
        self.body = torch.zeros((window, m, sk.NUM_BODIES, 3), device=dev)
        self.qpos = torch.zeros((window, len(self.keep), sk.QPOS_DIM), device=dev)
        self.fell_dev = torch.zeros((window, m), dtype=torch.bool, device=dev)
        self.err = np.zeros((steps, m))
        self.local = np.zeros((steps, m))
        self.fell = np.zeros((steps, m), dtype=bool)
        self.kept: list[np.ndarray] = []
        self.start = 0
        """The frame of ``body``'s first row."""
        clips = jobs.clip[ids]
        self.nf = self.lib.num_frames.cpu().numpy()[clips]
        self.first_frame = self.lib.starts.cpu().numpy()[clips]
        self.capacity = out.frame_error.lengths()[ids]
        ctx = opts.fid_window + 1
        self.tail = np.zeros((0, m, sk.NUM_BODIES, 3), dtype=np.float32)
        self.tail_cap = ctx
        self.next_window = np.zeros(m, dtype=np.int64)
        """Per job the first FID window start not yet featurised."""
        self.feature_sum = np.zeros((m, FEATURE_DIM))
        self.feature_count = np.zeros(m, dtype=np.int64)

    def record(self, t: int, length: np.ndarray | None = None, alive: np.ndarray | None = None) -> None:
        """Store frame t's state; score the window when it is full (``length``, ``alive``: the jobs' so far)."""
        s = self.core.backend.state()
        m = len(self.ids)
        row = t - self.start
        dev = self.body.device
        pos = s.body_pos[:m].to(dev, torch.float32)
        self.body[row] = pos
        self.qpos[row] = s.qpos.to(dev, torch.float32).index_select(0, self.keep_idx)
        # the fall rate counts contact whether or not the run's env terminated on it
        self.fell_dev[row] = fall_flags(pos, s.contact[:m], self.opts.fall_height, use_contact=True)
        if row + 1 == self.window and t + 1 < self.steps:
            assert length is not None and alive is not None
            self._flush(t + 1, np.where(alive, -1, length))

    def finish(self, length: np.ndarray) -> None:
        """Score the frames left after the last step; the jobs ended with ``length`` frames."""
        recorded = min(self.steps, int(length.max()))
        if recorded > self.start:
            self._flush(recorded, length)
        t = np.arange(self.steps)[:, None]
        valid = t < length[None, :]
        capacity = self.capacity
        within = t < capacity[None, :]
        idx = (self.out.frame_error.offsets[self.ids][None, :] + t)[within]
        self.out.frame_error.data[idx] = np.where(valid, self.err, np.nan)[within]
        self.out.root_pos.data[idx[~valid[within]]] = np.nan
        q = np.concatenate(self.kept, axis=0) if self.kept else np.zeros((0, len(self.keep), sk.QPOS_DIM))
        for k, j in enumerate(self.ids[self.keep]):
            self.out.qpos[int(j)] = q[: length[self.keep[k]], k].astype(np.float64)
        if self.opts.features:
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = self.feature_sum / self.feature_count[:, None]
            self.out.mean_feature[self.ids] = np.where(self.feature_count[:, None] > 0, mean, np.nan)

    def _flush(self, end: int, done_length: np.ndarray) -> None:
        """Score frames ``start`` to ``end`` - 1 (held in the buffers); ``done_length`` per job: its length if it
        has ended, else -1."""
        a, rows = self.start, end - self.start
        pos = self.body[:rows].cpu().numpy()  # (rows, m, 24, 3)
        t = np.arange(a, end)[:, None]
        frame_idx = self.first_frame[None, :] + np.minimum(t, self.nf[None, :] - 1)
        ref = self.lib.frames("body_pos").cpu().numpy()[frame_idx]  # (rows, m, 24, 3)
        self.err[a:end] = frame_errors(pos, ref)
        self.local[a:end] = root_relative_frame_errors(pos, ref)
        self.fell[a:end] = self.fell_dev[:rows].cpu().numpy()
        if len(self.keep):
            self.kept.append(self.qpos[:rows].cpu().numpy().copy())  # the buffer is refilled
        within = t < self.capacity[None, :]
        idx = (self.out.root_pos.offsets[self.ids][None, :] + t)[within]
        self.out.root_pos.data[idx] = pos[:, :, 0][within]
        if self.opts.features:
            self._features(np.concatenate((self.tail, pos)), end, done_length)
            self.tail = np.concatenate((self.tail, pos))[-self.tail_cap :]
        self.start = end

    def _features(self, seg: np.ndarray, end: int, done_length: np.ndarray) -> None:
        """FID windows of the segment of frames ``end - len(seg)`` to ``end`` - 1 not featurised yet: a window of a
        job still running only when the frame after it is in the segment (its velocities are central differences),
        every remaining window of a job that has ended."""
        fw, lib, jobs = self.opts.fid_window, self.lib, self.jobs
        s0 = end - seg.shape[0]
        seg_end = np.where(done_length >= 0, np.minimum(done_length, end), end)
        last = np.where(done_length >= 0, done_length - fw + 1, end - fw)  # window starts [next, last)
        keys = np.stack((seg_end, self.next_window, last), axis=1)
        clips = jobs.clip[self.ids]
        for e, lo, hi in sorted({tuple(k) for k in keys.tolist()}):
            if hi <= lo or e - s0 < max(2, fw):
                continue
            sel = np.flatnonzero((keys == (e, lo, hi)).all(axis=1))
            f = motion_features(seg[: e - s0, sel].transpose(1, 0, 2, 3), lib.fps, fw)[:, lo - s0 : hi - s0]
            self.feature_sum[sel] += f.sum(axis=1)
            self.feature_count[sel] += f.shape[1]
            self.next_window[sel] = hi
            groups = jobs.group[self.ids[sel]]
            for g, c in sorted(set(zip(groups.tolist(), clips[sel].tolist()))):
                rows = f[(groups == g) & (clips[sel] == c)]
                self.out.feature_stats.setdefault((g, c), GaussianStats.empty(FEATURE_DIM)).add(rows)


def _summarise(out: Rollouts, jobs: RolloutJobs, ids: np.ndarray, rec: _Recording) -> None:
    """Errors and flags of one chunk's per-frame records into ``out``."""
    err, length = rec.err, rec.length
    steps = err.shape[0]
    t = np.arange(steps)[:, None]
    valid = t < length[None, :]
    scored = valid & (t >= 1)

    def scored_mean(x: np.ndarray, frames: np.ndarray = scored) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            # np.where, not x * frames: a NaN frame outside the scored ones (an unstable step's) must not count
            return np.where(frames.any(0), np.where(frames, x, 0.0).sum(0) / np.maximum(frames.sum(0), 1), np.nan)

    out.error[ids] = scored_mean(err)
    until_fall = until_first_fall(scored, rec.fell)
    out.error_until_fall[ids] = scored_mean(err, until_fall)
    with np.errstate(invalid="ignore", divide="ignore"):
        out.played_before_fall[ids] = np.where(scored.any(0), until_fall.sum(0) / scored.sum(0), np.nan)
    out.error_until_deviation[ids] = scored_mean(err, until_first_deviation(scored, err))
    out.mpjpe[ids] = scored_mean(rec.local)
    out.length[ids] = length
    out.fell[ids] = (rec.fell & scored).any(axis=0)
    out.unstable[ids] = rec.unstable
    out.success[ids] = tracking_success(err.T, ~rec.unstable, scored=scored.T)
