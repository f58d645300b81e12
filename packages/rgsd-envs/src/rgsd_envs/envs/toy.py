"""Toy envs behind the humanoid's interface: a 2-D point mass with reference paths and a tabular gridworld.

What they are for: the known-answer tests (``packages/rgsd-agents/tests/methods/test_known_answers.py``,
docs/methods.md) train every method on a task whose answer is known, in seconds, and show that the methods'
seam takes another env than the humanoid. Both envs present what ``RGSDTorchEnv`` presents to the runners and
the methods: ``reset``/``step`` with tensors and ``StepExtras`` (SameStep autoreset, truncation at the clip's
end), ``set_skills``, ``observations``, ``set_encoder`` and the encoder reward ``r = C + kappa mu(s')^T z``
(the humanoid's own ``EncoderRewardCore``), and a ``core`` with the reference clips (``lib``, ``ref_features``,
``ref_inputs``), the frozen encoder and its clip embeddings z_m. Their ``layout``
(``rgsd_envs.envs.observations.ObservationLayout``) tells the methods the sizes they read.

``PointMassEnv`` (layout: frame ``[phase, x, y, vx, vy]``, 5-D; history 5; skill 16):

==========  ======================================================================
action      (N, 2) velocity command in [-1, 1]^2, times ``MAX_SPEED`` (1.5 units/s)
dynamics    v' = MAX_SPEED * a, p' = p + DT * v' (DT = 0.1 s)
references  ``POINT_MASS_PATHS``: straight lines east, north and west at 1 unit/s and a
            clockwise circle (radius 0.75) below the start, 30 frames each, all from (0, 0)
episodes    reference state initialisation (a clip, a start frame before its last), task
            c ~ Bernoulli(p_imitation) with z = z_m (imitation) or uniform on the sphere;
            truncated at the clip's last frame, never terminated
==========  ======================================================================

``GridWorldEnv`` (layout: frame = one-hot cell of a 4 x 4 grid, 16-D, no phase; for FB, whose successor
measure is then a 16 x 16 matrix known in closed form, ``grid_transition``):

==========  ======================================================================
action      (N, 2) in [-1, 1]^2: stay if both |a_i| < 0.5, else one cell along the axis
            of the larger |a_i| in its sign's direction (walls: stay)
references  ``GRID_PATHS``: the perimeter loop and a snake through every cell, each cell
            held ``GRID_DWELL`` frames
episodes    start uniformly on a cell (``start="uniform"``, the default) or at a
            reference frame; truncated at the clip's last frame
==========  ======================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rgsd_envs.envs.core import DISCOVERY, IMITATION
from rgsd_envs.envs.observations import SKILL_DIM, ObservationLayout
from rgsd_envs.envs.torch_env import StepExtras
from rgsd_envs.rewards.encoder_reward import EncoderRewardCore
from rgsd_envs.rewards.encoders import MLPEncoder, clip_embeddings

Tensor = torch.Tensor

DT = 0.1
"""Point mass: seconds per step."""
MAX_SPEED = 1.5
"""Point mass: speed of a full action, units/s (the references move at 1)."""
PATH_FRAMES = 30
"""Point mass: frames of each reference path."""
GRID_SIZE = 4
"""Gridworld: cells per side (16 states: FB's 16-D latent can hold the successor measure exactly)."""
GRID_DWELL = 3
"""Gridworld: frames a reference path stays on each cell."""
STAY_THRESHOLD = 0.5
"""Gridworld: actions with both |a_i| below this stay."""
GRID_MOVES = ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1))
"""Gridworld moves (dx, dy): stay, east, west, north, south."""


def point_mass_paths() -> dict[str, np.ndarray]:
    """The point mass's reference paths by name: (PATH_FRAMES, 2) positions, 1 unit/s, all from (0, 0)."""
    t = np.arange(PATH_FRAMES) * DT
    r = 0.75
    w = 1.0 / r
    return {
        "line_east": np.stack([t, 0 * t], -1),
        "line_north": np.stack([0 * t, t], -1),
        "line_west": np.stack([-t, 0 * t], -1),
        "circle": np.stack([r * np.sin(w * t), r * np.cos(w * t) - r], -1),  # clockwise, centre (0, -r)
    }


def grid_paths() -> dict[str, np.ndarray]:
    """The gridworld's reference paths by name: (cells * GRID_DWELL, 2) integer cell coordinates (x, y)."""
    n = GRID_SIZE
    loop = [(x, 0) for x in range(n)] + [(n - 1, y) for y in range(1, n)]
    loop += [(x, n - 1) for x in range(n - 2, -1, -1)] + [(0, y) for y in range(n - 2, 0, -1)]
    snake = [(x if y % 2 == 0 else n - 1 - x, y) for y in range(n) for x in range(n)]
    return {name: np.repeat(np.array(cells), GRID_DWELL, axis=0) for name, cells in (("loop", loop), ("snake", snake))}


@dataclass
class ToyClips:
    """Reference clips of a toy env, concatenated in the layout of ``MotionLib`` (starts, frames, clip of frame)."""

    names: list[str]
    positions: Tensor
    """(F, 2) positions of every reference frame."""
    features: Tensor
    """(F, frame_dim) frame features of every reference frame."""
    starts: Tensor
    num_frames: Tensor
    clip_of_frame: Tensor

    @property
    def num_clips(self) -> int:
        """Clips."""
        return len(self.names)

    @property
    def total_frames(self) -> int:
        """Frames of all clips."""
        return int(self.positions.shape[0])

    def clip_positions(self, clip: int) -> Tensor:
        """(T, 2) positions of one clip."""
        first = int(self.starts[clip])
        return self.positions[first : first + int(self.num_frames[clip])]


class ToyCore:
    """The episode logic both toy envs share (reference starts, tasks, skills, frames); the subclass's env
    supplies the dynamics and the features. Attribute names follow ``RGSDCore``, whose readers it serves."""

    def __init__(
        self,
        num_envs: int,
        layout: ObservationLayout,
        clips: ToyClips,
        encoder: MLPEncoder | None,
        p_imitation: float,
        seed: int,
        device: torch.device,
    ):
        self.num_envs, self.layout, self.lib, self.device = num_envs, layout, clips, device
        self.p_imitation = float(p_imitation)
        self.ref_features = clips.features
        h = layout.history_len
        frames = torch.arange(clips.total_frames)
        idx = torch.maximum(frames.unsqueeze(-1) + torch.arange(1 - h, 1), clips.starts[clips.clip_of_frame][:, None])
        self.ref_inputs = self.ref_features[idx].flatten(1)
        """(F, history_len * frame_dim) encoder input of every reference frame."""
        if encoder is None:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed + 17)
                encoder = MLPEncoder((32,), layout.encoder_input_dim)
            encoder.set_input_stats(self.ref_inputs.mean(0), self.ref_inputs.std(0))
        self.frozen_encoder = encoder.to(device).eval().requires_grad_(False)
        self.kappa = float(encoder.kappa)
        self.clip_embeddings = clip_embeddings(encoder, self.ref_inputs, clips.clip_of_frame, clips.num_clips)
        self.generator = torch.Generator().manual_seed(seed)
        n = num_envs
        self.clip = torch.zeros(n, dtype=torch.long)
        self.frame = torch.zeros(n, dtype=torch.long)
        self.task = torch.zeros(n, dtype=torch.long)
        self.task_host = np.zeros(n, dtype=np.int64)
        self.skill = torch.zeros(n, layout.skill_dim)
        self.features = torch.zeros(n, layout.frame_dim)

    def device_ids(self, ids: np.ndarray) -> Tensor:
        """Host world indices as an index tensor."""
        return torch.from_numpy(np.ascontiguousarray(ids, dtype=np.int64))

    def reference_history(self, env_ids: Tensor) -> Tensor:
        """(n, history_len - 1, frame_dim) reference frames before each world's current frame (clamped)."""
        first = self.lib.starts[self.clip[env_ids]]
        g = first + self.frame[env_ids]
        idx = torch.maximum(g.unsqueeze(-1) + torch.arange(1 - self.layout.history_len, 0), first[:, None])
        return self.ref_features[idx]

    def draw(self, ids: np.ndarray, options: dict[str, Any]) -> None:
        """New episodes of worlds ``ids``: clip, start frame, task and skill (``options`` may fix each)."""
        n, g, lib = ids.size, self.generator, self.lib
        idx = self.device_ids(ids)
        clip = options.get("clip")
        clip = torch.randint(lib.num_clips, (n,), generator=g) if clip is None else torch.as_tensor(clip).expand(n)
        last = lib.num_frames[clip] - 1
        start = options.get("start_frame")
        if start is None:
            start = (torch.rand(n, generator=g) * last).long().clamp(max=last - 1)
        task = options.get("task")
        if task is None:
            task = torch.where(torch.rand(n, generator=g) < self.p_imitation, IMITATION, DISCOVERY)
        task = torch.as_tensor(task, dtype=torch.long).expand(n)
        skill = options.get("skill")
        if skill is None:
            uniform = torch.nn.functional.normalize(torch.randn(n, self.layout.skill_dim, generator=g), dim=-1)
            skill = torch.where((task == IMITATION).unsqueeze(-1), self.clip_embeddings[clip], uniform)
        skill = torch.as_tensor(skill, dtype=torch.float32).expand(n, -1)
        self.clip, self.frame, self.task, self.skill = (
            x.clone() for x in (self.clip, self.frame, self.task, self.skill)
        )
        self.clip[idx], self.frame[idx], self.task[idx] = clip, torch.as_tensor(start).expand(n), task
        self.skill[idx] = torch.nn.functional.normalize(skill, dim=-1)
        self.task_host[ids] = task.numpy()


class ToyEnv:
    """N worlds of a toy env with ``RGSDTorchEnv``'s interface (module docstring); subclasses give the dynamics."""

    LAYOUT: ObservationLayout
    ACT_DIM = 2

    def __init__(
        self,
        num_envs: int,
        clips: dict[str, np.ndarray],
        encoder: MLPEncoder | None = None,
        p_imitation: float = 0.0,
        encoder_reward: bool = True,
        seed: int = 0,
    ):
        self.num_envs = num_envs
        self.device = torch.device("cpu")
        self.layout = self.LAYOUT
        self.obs_dim, self.act_dim = self.layout.policy_obs_dim, self.ACT_DIM
        self.core = ToyCore(num_envs, self.layout, self.make_clips(clips), encoder, p_imitation, seed, self.device)
        lib = self.core.lib
        self.reference_states_table = torch.cat(
            [self.reference_states(lib.clip_positions(c)) for c in range(lib.num_clips)]
        )
        """(F, state_dim) physical state of every reference frame."""
        self.state = torch.zeros(num_envs, self.state_dim)
        """(N, state_dim) the physical state (point mass: position and velocity; gridworld: the cell)."""
        self.reward_core = EncoderRewardCore(self.core) if encoder_reward else None
        self.reset_options: dict[str, Any] = {}
        """Options of every automatic restart (e.g. ``{"task": 1}``); ``reset(options=...)`` sets them."""

    # -- what a subclass defines ------------------------------------------------------
    state_dim: int = 2

    def make_clips(self, paths: dict[str, np.ndarray]) -> ToyClips:
        """The reference clips from paths of positions."""
        names = list(paths)
        pos = [torch.as_tensor(p, dtype=torch.float32) for p in paths.values()]
        num_frames = torch.tensor([p.shape[0] for p in pos])
        starts = torch.cumsum(num_frames, 0) - num_frames
        clip_of_frame = torch.repeat_interleave(torch.arange(len(pos)), num_frames)
        states = torch.cat([self.reference_states(p) for p in pos])
        frame = torch.arange(clip_of_frame.shape[0]) - starts[clip_of_frame]
        feats = self.features_of(states, frame.float() / (num_frames[clip_of_frame] - 1).float())
        return ToyClips(names, torch.cat(pos), feats, starts, num_frames, clip_of_frame)

    def reference_states(self, positions: Tensor) -> Tensor:
        """(T, state_dim) physical states of one clip's positions."""
        raise NotImplementedError

    def features_of(self, state: Tensor, phase: Tensor) -> Tensor:
        """(B, frame_dim) frame features of physical states and phases."""
        raise NotImplementedError

    def positions(self, state: Tensor) -> Tensor:
        """(B, 2) positions of physical states."""
        return state[:, :2]

    def dynamics(self, state: Tensor, actions: Tensor) -> Tensor:
        """The next physical states (B, state_dim) for actions (B, 2) in [-1, 1]."""
        raise NotImplementedError

    def feature_positions(self, features: Tensor) -> Tensor:
        """(B, 2) positions of frames (B, frame_dim)."""
        raise NotImplementedError

    def start_states(self, env_ids: Tensor) -> Tensor:
        """(n, state_dim) the first states of new episodes (default: the reference frame, RSI)."""
        core = self.core
        g = core.lib.starts[core.clip[env_ids]] + core.frame[env_ids]
        return self.reference_states_table[g]

    # -- the interface ------------------------------------------------------------------
    @property
    def motion_lib(self) -> ToyClips:
        """The reference clips."""
        return self.core.lib

    def phase(self) -> Tensor:
        """(N,) each world's clip clock in [0, 1]."""
        core = self.core
        return core.frame.float() / (core.lib.num_frames[core.clip] - 1).float()

    def observations(self) -> Tensor:
        """(N, obs_dim) current observations ``[o_t, z]``."""
        return torch.cat((self.core.features, self.core.skill), dim=-1)

    def set_encoder(self, encoder: Any) -> None:
        """Replace the trainable (discovery) encoder."""
        self.reward_core.set_encoder(encoder)

    @property
    def encoder(self) -> Any:
        """The trainable (discovery) encoder."""
        return self.reward_core.trainable

    def set_skills(self, env_ids: Any, skills: Tensor) -> None:
        """New unit skills (n, 16) for the running episodes of worlds ``env_ids``."""
        ids = np.asarray(env_ids, dtype=np.int64).reshape(-1)
        z = torch.nn.functional.normalize(torch.as_tensor(skills, dtype=torch.float32).reshape(ids.size, -1), dim=-1)
        idx = self.core.device_ids(ids)
        self.core.skill = self.core.skill.clone()
        self.core.skill[idx] = z
        if self.reward_core is not None:
            self.reward_core.set_skills(ids, z)

    def restart(self, ids: np.ndarray, options: dict[str, Any] | None = None) -> None:
        """New episodes in worlds ``ids`` (host indices)."""
        if ids.size == 0:
            return
        core = self.core
        core.draw(ids, {**self.reset_options, **(options or {})})
        idx = core.device_ids(ids)
        self.state = self.state.clone()
        self.state[idx] = self.start_states(idx)
        core.features = core.features.clone()
        core.features[idx] = self.features_of(self.state[idx], self.phase()[idx])
        if self.reward_core is not None:
            self.reward_core.start(ids)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Tensor, dict[str, Any]]:
        """Reset every world (``options`` fix clip, start_frame, task or skill of these episodes and every later
        one; ``seed`` re-seeds the episode draws)."""
        if seed is not None:
            self.core.generator.manual_seed(seed)
        if options is not None:
            self.reset_options = dict(options)
        self.restart(np.arange(self.num_envs))
        core = self.core
        return self.observations(), {"task": core.task.clone(), "clip_id": core.clip.clone()}

    @torch.no_grad()
    def step(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, StepExtras]:
        """One step of all worlds; finished worlds restart in the same call (SameStep), as ``RGSDTorchEnv``."""
        core, lib = self.core, self.core.lib
        a = torch.as_tensor(actions, dtype=torch.float32).reshape(self.num_envs, self.ACT_DIM)
        if not torch.isfinite(a).all():
            raise ValueError("action contains NaN or inf; the policy output is broken")
        self.state = self.dynamics(self.state, a.clamp(-1.0, 1.0))
        core.frame = torch.minimum(core.frame + 1, lib.num_frames[core.clip] - 1)
        core.features = self.features_of(self.state, self.phase())
        ref_pos = lib.positions[lib.starts[core.clip] + core.frame]
        error = (self.positions(self.state) - ref_pos).norm(dim=-1)
        info_task, info_clip, info_frame = core.task.clone(), core.clip.clone(), core.frame.clone()
        truncated = core.frame >= lib.num_frames[core.clip] - 1
        terminated = torch.zeros_like(truncated)
        rc = self.reward_core
        reward = rc.transition(core.features) if rc is not None else torch.zeros(self.num_envs)
        final_obs = self.observations()
        done_host = truncated.numpy().copy()
        self.restart(np.flatnonzero(done_host))
        empty = torch.zeros(self.num_envs, 0)
        no = torch.zeros_like(truncated)
        extras = StepExtras(
            done=truncated.clone(),
            time_outs=truncated,
            final_obs=final_obs,
            final_features=final_obs[:, : self.layout.frame_dim],
            task=info_task,
            clip_id=info_clip,
            frame=info_frame,
            cartesian_error=error,
            fall=no,
            deviation=no,
            unstable=no,
            ref_body_pos=ref_pos,
            encoder_reward=reward,
            skills=rc.last_skills if rc is not None else final_obs[:, self.layout.skill],
            encoder_inputs=rc.encoder_inputs if rc is not None else empty,
            next_encoder_inputs=rc.next_encoder_inputs if rc is not None else empty,
            started=truncated.clone(),
            done_host=done_host,
            time_outs_host=done_host.copy(),
        )
        return self.observations(), reward, terminated, truncated, extras

    def close(self) -> None:
        """Nothing to release."""


class PointMassEnv(ToyEnv):
    """A 2-D point mass with velocity commands and reference paths (module docstring)."""

    LAYOUT = ObservationLayout(frame_dim=5, phase_columns=(0, 1), skill_dim=SKILL_DIM)
    state_dim = 4

    def __init__(self, num_envs: int = 64, paths: dict[str, np.ndarray] | None = None, **kwargs: Any):
        super().__init__(num_envs, point_mass_paths() if paths is None else paths, **kwargs)

    def reference_states(self, positions: Tensor) -> Tensor:
        """Positions and backward-difference velocities (the velocity a step into each frame commands)."""
        vel = torch.diff(positions, dim=0, prepend=positions[:1]) / DT
        vel[0] = vel[1] if positions.shape[0] > 1 else 0.0
        return torch.cat([positions, vel], -1)

    def features_of(self, state: Tensor, phase: Tensor) -> Tensor:
        """``[phase, x, y, vx, vy]``."""
        return torch.cat([phase.reshape(-1, 1), state], -1)

    def feature_positions(self, features: Tensor) -> Tensor:
        """Columns x, y."""
        return features[:, 1:3].clone()

    def dynamics(self, state: Tensor, actions: Tensor) -> Tensor:
        """v' = MAX_SPEED * a, p' = p + DT * v'."""
        v = MAX_SPEED * actions
        return torch.cat([state[:, :2] + DT * v, v], -1)


def grid_move(actions: Tensor) -> Tensor:
    """(B,) index into ``GRID_MOVES`` of actions (B, 2) in [-1, 1]."""
    ax, ay = actions[:, 0], actions[:, 1]
    along_x = ax.abs() >= ay.abs()
    move = torch.where(along_x, torch.where(ax > 0, 1, 2), torch.where(ay > 0, 3, 4))
    return torch.where(actions.abs().amax(-1) < STAY_THRESHOLD, 0, move)


def grid_step(cells: Tensor, moves: Tensor) -> Tensor:
    """(B, 2) cells after moves (B,) (walls: stay)."""
    delta = torch.tensor(GRID_MOVES, dtype=cells.dtype)[moves]
    return (cells + delta).clamp(0, GRID_SIZE - 1)


def grid_transition() -> Tensor:
    """(states, moves, states) transition probabilities of the gridworld (deterministic)."""
    s = GRID_SIZE * GRID_SIZE
    cells = torch.stack([torch.arange(s) % GRID_SIZE, torch.arange(s) // GRID_SIZE], -1).float()
    P = torch.zeros(s, len(GRID_MOVES), s)
    for m in range(len(GRID_MOVES)):
        nxt = grid_step(cells, torch.full((s,), m)).long()
        P[torch.arange(s), m, nxt[:, 0] + GRID_SIZE * nxt[:, 1]] = 1.0
    return P


def grid_index(cells: Tensor) -> Tensor:
    """(B,) state index x + GRID_SIZE * y of cells (B, 2)."""
    c = cells.round().long()
    return c[:, 0] + GRID_SIZE * c[:, 1]


class GridWorldEnv(ToyEnv):
    """A 4 x 4 gridworld with one-hot states and continuous actions mapped to moves (module docstring)."""

    LAYOUT = ObservationLayout(frame_dim=GRID_SIZE * GRID_SIZE, phase_columns=None, skill_dim=SKILL_DIM)
    state_dim = 2

    def __init__(
        self, num_envs: int = 64, paths: dict[str, np.ndarray] | None = None, start: str = "uniform", **kwargs: Any
    ):
        if start not in ("uniform", "reference"):
            raise ValueError(f"start must be 'uniform' or 'reference', got {start!r}")
        self.start = start
        kwargs.setdefault("encoder_reward", False)
        super().__init__(num_envs, grid_paths() if paths is None else paths, **kwargs)

    def reference_states(self, positions: Tensor) -> Tensor:
        """The cells themselves."""
        return positions.clone()

    def features_of(self, state: Tensor, phase: Tensor) -> Tensor:
        """One-hot of the cell (no phase: the state is Markov)."""
        return torch.nn.functional.one_hot(grid_index(state), GRID_SIZE * GRID_SIZE).float()

    def feature_positions(self, features: Tensor) -> Tensor:
        """The cell of the one-hot."""
        i = features.argmax(-1)
        return torch.stack([i % GRID_SIZE, i // GRID_SIZE], -1).float()

    def dynamics(self, state: Tensor, actions: Tensor) -> Tensor:
        """One move per step (``grid_move``)."""
        return grid_step(state, grid_move(actions))

    def start_states(self, env_ids: Tensor) -> Tensor:
        """A uniformly drawn cell (``start="uniform"``) or the reference frame's."""
        if self.start == "reference" or "start_frame" in self.reset_options:
            return super().start_states(env_ids)
        return torch.randint(GRID_SIZE, (env_ids.shape[0], 2), generator=self.core.generator).float()


__all__ = [
    "GRID_MOVES",
    "GRID_SIZE",
    "GridWorldEnv",
    "PointMassEnv",
    "ToyClips",
    "ToyEnv",
    "grid_index",
    "grid_move",
    "grid_paths",
    "grid_transition",
    "point_mass_paths",
]
