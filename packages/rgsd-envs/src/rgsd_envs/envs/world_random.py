"""Counter-based random numbers for many worlds at once (Philox4x32-10, batched in numpy).

Each world has a 64-bit key (from its seed) and an episode counter. A number is
a function of (key, episode, stream, index), computed rather than stepped
(Salmon et al. 2011, "Parallel random numbers: as easy as 1, 2, 3"), so:

- the draws of all worlds that reset together come from one batched call;
- a world's numbers do not depend on which other worlds reset with it, so a
  world of a vector env draws exactly what a single env seeded the same way draws;
- a number has a fixed place (stream and index) for its purpose (clip, start
  frame, task, skill, ...), so fixing one part of an episode through reset
  options leaves the others as they were.

The draws run on the host in float64 and the results (a few numbers per reset
world) are copied to the env's device once per reset: the same seed gives the
same episodes on every device.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

_U64 = np.uint64
_MASK32 = _U64(0xFFFFFFFF)
_PHILOX_M = (_U64(0xD2511F53), _U64(0xCD9E8D57))
_PHILOX_W = (_U64(0x9E3779B9), _U64(0xBB67AE85))


class Stream(enum.IntEnum):
    """What a world's random numbers are for: one stream per purpose (the one place they are numbered)."""

    EPISODE = 1
    """An episode's clip, start frame, task and skill (slots: ``core.EPISODE_SLOTS``)."""
    GOAL = 2
    """A goal-reaching episode's start clip and heading."""
    VMF_ATTEMPT = 1 << 16
    """Rejection attempt t of a vMF draw uses stream VMF_ATTEMPT + t."""
    GOAL_POSITION = 1 << 17
    """Rejection attempt t of a goal position uses stream GOAL_POSITION + t."""


def philox4x32(counter: np.ndarray, key: np.ndarray, rounds: int = 10) -> np.ndarray:
    """Philox4x32 of counters (..., 4) under keys (..., 2): (..., 4) 32-bit words (as uint64), broadcast."""
    c0, c1, c2, c3 = (np.asarray(counter[..., i], dtype=_U64) for i in range(4))
    k0, k1 = (np.asarray(key[..., i], dtype=_U64) for i in range(2))
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + _PHILOX_W[0]) & _MASK32, (k1 + _PHILOX_W[1]) & _MASK32
        p0, p1 = _PHILOX_M[0] * c0, _PHILOX_M[1] * c2  # 32 x 32 bits: exact in 64
        c0, c1, c2, c3 = (p1 >> _U64(32)) ^ c1 ^ k0, p1 & _MASK32, (p0 >> _U64(32)) ^ c3 ^ k1, p0 & _MASK32
    return np.stack(np.broadcast_arrays(c0, c1, c2, c3), axis=-1)


def seed_keys(seeds: np.ndarray) -> np.ndarray:
    """64-bit world keys from non-negative integer seeds (splitmix64: distinct seeds, distinct keys)."""
    z = np.asarray(seeds, dtype=_U64) + _U64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
    return z ^ (z >> _U64(31))


def _seed_array(seeds: Sequence[int | None] | np.ndarray) -> np.ndarray:
    """Seeds as uint64; None entries get fresh entropy; a clear error for negative or huge seeds."""
    if isinstance(seeds, np.ndarray) and seeds.dtype.kind in "iu":
        arr = seeds
    else:
        arr = np.array([-1 if s is None else s for s in seeds], dtype=object)
        fresh = arr == -1
        arr[fresh] = np.random.default_rng().integers(0, 2**63, int(fresh.sum()))
    if (arr < 0).any() or (arr >= 2**64).any():
        raise ValueError("seeds must be integers in [0, 2**64) (or None for fresh entropy)")
    return arr.astype(_U64)


def _as_u64(value: torch.Tensor | np.ndarray) -> np.ndarray:
    """uint64 words from a ``WorldRandom.state_dict`` entry (an int64 tensor of their bits, or a uint64 array)."""
    if isinstance(value, torch.Tensor):
        return value.cpu().numpy().astype(np.int64, copy=False).view(_U64)
    return np.asarray(value, dtype=_U64)


def box_muller(u: np.ndarray) -> np.ndarray:
    """Standard normals (n, 2k) from uniforms in [0, 1) (n, 2k): first half radii, second half angles."""
    pairs = u.shape[-1] // 2
    radius = np.sqrt(-2.0 * np.log1p(-u[..., :pairs]))  # 1 - u in (0, 1]
    angle = 2.0 * np.pi * u[..., pairs : 2 * pairs]
    return np.concatenate((radius * np.cos(angle), radius * np.sin(angle)), axis=-1)


class WorldRandom:
    """Keys and episode counters of N worlds; batched uniform and normal draws for chosen worlds."""

    def __init__(self, num_worlds: int):
        self.keys = seed_keys(np.random.default_rng().integers(0, 2**63, num_worlds).astype(_U64))
        """(N,) uint64 key of each world (fresh entropy until seeded)."""
        self.episodes = np.zeros(num_worlds, dtype=_U64)
        """(N,) uint64 number of episodes each world has started since it was seeded."""
        self.changed = np.ones(num_worlds, dtype=bool)
        """(N,) worlds whose key or episode counter moved since a user of numbers drawn ahead last cleared it."""

    def seed(self, ids: np.ndarray, seeds: Sequence[int | None] | np.ndarray) -> None:
        """Re-seed worlds ``ids`` (None: fresh entropy); their episode counters restart at 0."""
        ids = np.asarray(ids, dtype=np.int64)
        self.keys[ids] = seed_keys(_seed_array(seeds))
        self.episodes[ids] = 0
        self.changed[ids] = True

    def advance(self, ids: np.ndarray) -> None:
        """Move worlds ``ids`` on to their next episode's numbers."""
        ids = np.asarray(ids, dtype=np.int64)
        self.episodes[ids] += _U64(1)
        self.changed[ids] = True

    def uniform(self, ids: np.ndarray, stream: int, count: int, first: int = 0) -> np.ndarray:
        """(len(ids), count) float64 uniform in [0, 1) (53 random bits) of the worlds' current episodes:
        numbers ``first`` (even) to ``first + count`` of the stream."""
        if first % 2:
            raise ValueError(f"first must be even (two numbers per Philox block), got {first}")
        ids = np.asarray(ids, dtype=np.int64)
        blocks = (count + 1) // 2  # a Philox block is 4 words: two 53-bit numbers
        ep = self.episodes[ids]
        counter = np.empty((ids.size, blocks, 4), dtype=_U64)
        counter[..., 0] = np.arange(first // 2, first // 2 + blocks, dtype=_U64)
        counter[..., 1] = _U64(stream)
        counter[..., 2] = (ep & _MASK32)[:, None]
        counter[..., 3] = (ep >> _U64(32))[:, None]
        k = self.keys[ids]
        key = np.stack((k & _MASK32, k >> _U64(32)), axis=-1)[:, None, :]
        words = philox4x32(counter, key)
        bits = (words[..., 0::2] >> _U64(5)) * _U64(1 << 26) + (words[..., 1::2] >> _U64(6))
        return (bits.astype(np.float64) * 2.0**-53).reshape(ids.size, 2 * blocks)[:, :count]

    def normal(self, ids: np.ndarray, stream: int, count: int) -> np.ndarray:
        """(len(ids), count) float64 standard normal (Box-Muller on ``uniform`` of the same stream)."""
        return box_muller(self.uniform(ids, stream, count + count % 2))[:, :count]

    def state_dict(self) -> dict[str, Any]:
        """Keys and episode counters (for checkpoints): int64 tensors holding the uint64 bits (torch files of
        plain data hold tensors, and torch has no full uint64 support)."""
        return {name: torch.from_numpy(getattr(self, name).view(np.int64).copy()) for name in ("keys", "episodes")}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue exactly from ``state_dict``."""
        keys, episodes = (_as_u64(state[name]) for name in ("keys", "episodes"))
        if keys.shape != self.keys.shape or episodes.shape != self.episodes.shape:
            raise ValueError(f"saved random state has {keys.shape[0]} worlds, this environment {self.keys.shape[0]}")
        self.keys, self.episodes = keys.copy(), episodes.copy()
        self.changed[:] = True
