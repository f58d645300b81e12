"""Rollout batching: batches cut from jobs sorted by length, per-job results that do not depend on the batch,
per-job storage at each clip's own length, and windowed recording of long batches."""

from __future__ import annotations

import tempfile
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from rgsd_envs.envs.torch_env import RGSDTorchEnv
from rgsd_envs.motion.library import MotionLib
from rgsd_eval import rollouts
from rgsd_eval.batches import BATCH_STEP_WORK, WORLD_WORK, batch_steps, batches, step_work, world_steps
from rgsd_eval.config import EvalConfig
from rgsd_eval.evaluate import eval_plan
from rgsd_eval.latents import vmf_samples
from rgsd_eval.rollouts import RolloutJobs, eval_env_config, run_rollouts
from rgsd_eval.runs import load_run
from rgsd_eval.testing import make_fake_run


@pytest.fixture(scope="module")
def lib():
    return MotionLib("demo")


@pytest.fixture(scope="module")
def loaded():
    with tempfile.TemporaryDirectory() as d:
        yield load_run(make_fake_run(d + "/r"))


def _jobs() -> RolloutJobs:
    clip = np.array([0, 1, 2, 3, 4, 1, 1, 0, 2])
    z = vmf_samples(np.eye(16)[0], 20.0, len(clip), 0, 0)
    return RolloutJobs(clip, z, np.arange(len(clip)) % 2, np.arange(len(clip)) == 3)


def _run(loaded, lib, worlds: int, jobs: RolloutJobs, **kw):
    env = RGSDTorchEnv(worlds, encoder_reward=False, config=eval_env_config(loaded.env_config)[0], motions=lib)
    try:
        return run_rollouts(env, loaded.policy, jobs, fall_height=loaded.fall_height, **kw)
    finally:
        env.close()


def test_batches_are_cut_longest_first_so_a_long_clip_costs_one_batch():
    lengths = np.array([10, 10, 10, 100, 10, 10, 10, 100])
    assert [b.tolist() for b in batches(lengths, 4)] == [[3, 7, 0, 1], [2, 4, 5, 6]]
    # in the given order each batch of 4 would run to 100 frames: 2 x 99 batch steps
    assert batch_steps(lengths, 4) == 99 + 9
    assert world_steps(lengths) == 2 * 99 + 6 * 9  # the physics steps each rollout's own frames
    assert step_work(lengths, 4) == world_steps(lengths) + (99 + 9) * (BATCH_STEP_WORK + 4 * WORLD_WORK)


def test_eval_plan_counts_the_world_steps_of_length_sorted_batches():
    """One long clip among short ones: the estimate pays for it in one batch, not in every batch."""
    frames = np.array([3000] + [30] * 19)
    lib = SimpleNamespace(num_clips=20, num_frames=torch.as_tensor(frames), categories=["walk"] * 10 + ["run"] * 10)
    cfg = EvalConfig(video=False, rollouts=4, batch_size=16, kappas=(20.0,))
    plan = eval_plan(lib, cfg)
    jobs = np.concatenate([np.arange(20), np.repeat(np.arange(20), 4)])  # 1 imitation + 4 vMF per clip
    assert plan.rollouts == len(jobs) == 100
    assert plan.world_steps == 5 * 2999 + 95 * 29  # each rollout's own steps
    # 5 jobs on the long clip fill one batch of 16 (2999 steps); the other 95 short jobs fill 6 more (29 steps)
    assert plan.step_work == plan.world_steps + (2999 + 6 * 29) * (BATCH_STEP_WORK + 16 * WORLD_WORK)


def test_a_rollout_s_numbers_do_not_depend_on_its_batch(loaded, lib):
    """With action noise, the same jobs in 9 worlds at once and 2 at a time give every job the same rollout."""
    jobs = _jobs()
    whole = _run(loaded, lib, 9, jobs, action_noise=0.2, seed=3)
    pairs = _run(loaded, lib, 2, jobs, action_noise=0.2, seed=3)
    np.testing.assert_array_equal(pairs.root_pos.data, whole.root_pos.data)
    np.testing.assert_array_equal(pairs.frame_error.data, whole.frame_error.data)
    np.testing.assert_array_equal(pairs.length, whole.length)
    np.testing.assert_allclose(pairs.error, whole.error, rtol=1e-12)  # summation order only
    np.testing.assert_allclose(pairs.mean_feature, whole.mean_feature, rtol=1e-12)
    np.testing.assert_array_equal(pairs.qpos[3], whole.qpos[3])
    other = _run(loaded, lib, 9, jobs, action_noise=0.2, seed=4)
    assert not np.allclose(other.error, whole.error)  # the noise is drawn, and seeded


@pytest.fixture(scope="module")
def wide():
    """A run whose policy has the cpu preset's (256, 256) hidden layers: wide enough that a CPU matrix product of
    fewer than 16 rows takes another kernel."""
    with tempfile.TemporaryDirectory() as d:
        yield load_run(make_fake_run(d + "/r", hidden=(256, 256)))


@pytest.mark.parametrize("worlds", [7, 3])
def test_an_env_of_fewer_worlds_than_the_acting_floor_gives_the_same_rollouts(wide, lib, worlds):
    """40 noisy jobs in 40 worlds and in an env of fewer than ``ACT_MIN_ROWS`` worlds: every job's path, errors and
    the FID statistics per (group, clip) are the same (the policy's rows are padded to the floor)."""
    clip = np.arange(40) % lib.num_clips
    jobs = RolloutJobs(clip, vmf_samples(np.eye(16)[0], 20.0, len(clip), 0, 0), clip % 2, False)
    kw = {"action_noise": 0.055, "seed": 1, "max_frames": 60}
    whole, few = _run(wide, lib, 40, jobs, **kw), _run(wide, lib, worlds, jobs, **kw)
    np.testing.assert_array_equal(few.root_pos.data, whole.root_pos.data)
    np.testing.assert_array_equal(few.frame_error.data, whole.frame_error.data)
    np.testing.assert_array_equal(few.fell, whole.fell)
    np.testing.assert_allclose(few.error, whole.error, rtol=1e-12)  # summation order only
    np.testing.assert_allclose(few.mpjpe, whole.mpjpe, rtol=1e-12)
    np.testing.assert_allclose(few.mean_feature, whole.mean_feature, rtol=1e-12)
    assert few.feature_stats.keys() == whole.feature_stats.keys()
    for key, s in whole.feature_stats.items():
        f = few.feature_stats[key]
        assert f.count == s.count
        np.testing.assert_allclose(f.mean, s.mean, rtol=1e-12, atol=1e-14)  # pooled in another order only
        np.testing.assert_allclose(f.cov, s.cov, rtol=1e-10, atol=1e-14)


def test_results_are_stored_per_job_at_its_clip_s_length(loaded, lib):
    jobs = _jobs()
    res = _run(loaded, lib, 4, jobs, features=False)
    frames = lib.num_frames.numpy()[jobs.clip]
    assert res.root_pos.data.shape == (frames.sum(), 3) and res.frame_error.data.shape == (frames.sum(),)
    for j, c in enumerate(jobs.clip):
        assert res.root_pos[j].shape == (frames[j], 3)
        np.testing.assert_allclose(res.root_pos[j][0], lib.clips[c].body_pos[0, 0], atol=1e-5)  # starts on the clip
    assert res.frame_error.padded().shape == (len(jobs), frames.max())


def test_recording_in_windows_of_frames_scores_as_one_window(loaded, lib, monkeypatch):
    """A batch longer than its recording window (here every batch: 64 job-frames) gives the same numbers as one
    read at the end: errors exactly, FID features up to float rounding (velocities across window edges)."""
    jobs = _jobs()
    whole = _run(loaded, lib, 4, jobs)
    monkeypatch.setattr(rollouts, "RECORD_JOB_FRAMES", 64)
    windowed = _run(loaded, lib, 4, jobs)
    np.testing.assert_array_equal(windowed.error, whole.error)
    np.testing.assert_array_equal(windowed.root_pos.data, whole.root_pos.data)
    np.testing.assert_array_equal(windowed.qpos[3], whole.qpos[3])
    np.testing.assert_allclose(windowed.mean_feature, whole.mean_feature, rtol=1e-9, atol=1e-12)
    assert windowed.feature_stats.keys() == whole.feature_stats.keys()
    for key, s in whole.feature_stats.items():
        w = windowed.feature_stats[key]
        assert w.count == s.count
        np.testing.assert_allclose(w.shift + w.total / w.count, s.shift + s.total / s.count, rtol=1e-9, atol=1e-12)


def _step_spy(env: RGSDTorchEnv, every_world: bool) -> list[int]:
    """Worlds stepped per ``SimBackend.step`` call (every world's step forced when ``every_world``)."""
    backend, counts = env.core.backend, []
    inner = backend.step

    def step(targets, env_ids=None):
        ids = None if every_world else env_ids
        counts.append(backend.num_envs if ids is None else int(ids.numel()))
        inner(targets, ids)

    backend.step = step
    return counts


@pytest.mark.parametrize("noise", [0.0, 0.2])
def test_only_the_running_jobs_worlds_step_and_the_numbers_are_those_of_every_world_stepping(loaded, lib, noise):
    """12 worlds for 9 jobs of different lengths: the 3 worlds past the jobs never step and a job's world stops at
    its clip's end (MuJoCo steps exactly the jobs' own frames), with every job's rollout unchanged."""
    jobs = _jobs()
    out = {}
    for every_world in (True, False):
        env = RGSDTorchEnv(12, encoder_reward=False, config=eval_env_config(loaded.env_config)[0], motions=lib)
        counts = _step_spy(env, every_world)
        try:
            out[every_world] = run_rollouts(
                env, loaded.policy, jobs, fall_height=loaded.fall_height, action_noise=noise
            )
        finally:
            env.close()
        out[every_world, "steps"] = sum(counts)
    res, old = out[False], out[True]
    frames = lib.num_frames.numpy()[jobs.clip]
    assert (res.length == frames).all()
    assert out[False, "steps"] == (frames - 1).sum() < out[True, "steps"] == 12 * (frames.max() - 1)
    np.testing.assert_array_equal(res.root_pos.data, old.root_pos.data)
    np.testing.assert_array_equal(res.frame_error.data, old.frame_error.data)
    np.testing.assert_array_equal(res.error, old.error)
    np.testing.assert_array_equal(res.mean_feature, old.mean_feature)
