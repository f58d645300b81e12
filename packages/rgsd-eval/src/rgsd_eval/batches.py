"""How rollout jobs share the worlds: batches cut from the jobs sorted by length, and each job's own action noise.

A batch of worlds steps until its longest rollout ends, so batches cut from jobs in their given order pay for the
longest clip in every batch that holds one of its jobs. Cut from the jobs sorted by length, longest first, every
batch holds rollouts of about one length. On MuJoCo only the running jobs' worlds step (``rollouts``), so the
physics makes each job's own steps (``world_steps``); what a batch step costs besides, whatever its worlds do (the
observations, the policy, the recording), is ``step_work``, the evaluation estimate's count.

A rollout's numbers must not depend on the batch it ran in, so its action noise is its own: a stream seeded by
(seed, the job's index in the job list), drawn ``NOISE_BLOCK`` steps at a time. Rollouts that must not share noise
with those of another job list of the same seed (a best-of-N search's, beside the evaluation's) take another
``stream``: their noise is seeded by (seed, index, stream).
"""

from __future__ import annotations

import numpy as np

NOISE_BLOCK = 64
"""Steps of noise drawn at once per job (a fixed block, so a job's draws do not depend on its batch)."""


def batch_order(lengths: np.ndarray) -> np.ndarray:
    """Job indices, longest rollout first (ties in the given order): the order batches are cut from."""
    return np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable")


def batches(lengths: np.ndarray, size: int) -> list[np.ndarray]:
    """Job indices of each batch of at most ``size`` worlds, cut from ``batch_order``."""
    order = batch_order(lengths)
    return [order[i : i + size] for i in range(0, len(order), size)]


BATCH_STEP_WORK = 11.0
"""A batch step's fixed work (the env's observations and host read, the policy, the recording), in world steps' time,
besides ``WORLD_WORK`` per world of the batch: a line fitted to ``benchmarks/eval_rollouts.py``'s step costs with one
rollout running in 16, 128 and 512 worlds on 2 idle cores (docs/results/throughput_2core/eval_rollouts.json)."""
WORLD_WORK = 0.08
"""A batch step's work per world of the batch, running or not (observations are made for every world)."""


def world_steps(lengths: np.ndarray) -> int:
    """World steps the physics makes for jobs of these lengths (frames, the start frame included): their own."""
    return int((np.asarray(lengths, dtype=np.int64) - 1).sum())


def batch_steps(lengths: np.ndarray, size: int) -> int:
    """Steps of the ``batches`` of ``size`` worlds: each runs to its longest rollout's end."""
    lengths = np.asarray(lengths, dtype=np.int64)
    return sum(int(lengths[ids].max()) - 1 for ids in batches(lengths, size))


def step_work(lengths: np.ndarray, size: int) -> float:
    """The time of running jobs of these lengths in ``batches`` of an env of ``size`` worlds, in world steps: their
    own steps, and each batch step's fixed work (``BATCH_STEP_WORK`` + ``WORLD_WORK`` x ``size``)."""
    return world_steps(lengths) + batch_steps(lengths, size) * (BATCH_STEP_WORK + WORLD_WORK * size)


def job_rng(seed: int, job: int, stream: int = 0) -> np.random.Generator:
    """The noise generator of job ``job``: seeded by (seed, job), or (seed, job, stream) for another stream."""
    return np.random.default_rng((int(seed), int(job)) if stream == 0 else (int(seed), int(job), int(stream)))


class JobNoise:
    """Standard normal action noise of one batch's jobs: job j's step t is row t - 1 of its own stream."""

    def __init__(self, seed: int, job_ids: np.ndarray, worlds: int, dim: int, stream: int = 0):
        self.rngs = [job_rng(seed, j, stream) for j in job_ids]
        self.worlds, self.dim = worlds, dim
        self.block = np.zeros((0, worlds, dim), dtype=np.float32)
        self.first = 1
        """The step of ``block``'s first row."""

    def step(self, t: int) -> np.ndarray:
        """(worlds, dim) noise of step t (t = 1, 2, ... in order); idle worlds past the jobs get zeros."""
        if t >= self.first + self.block.shape[0]:
            self.first = 1 + (t - 1) // NOISE_BLOCK * NOISE_BLOCK
            self.block = np.zeros((NOISE_BLOCK, self.worlds, self.dim), dtype=np.float32)
            for k, rng in enumerate(self.rngs):
                self.block[:, k] = rng.standard_normal((NOISE_BLOCK, self.dim), dtype=np.float32)
        return self.block[t - self.first]
