"""Tracking metrics (ERR, MPJPE, success, global MPJPE, rates) on hand-made arrays, dispersion and latent spread:
pinned numbers, and zero error for the replayed reference."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rgsd_envs.envs import skills
from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.registration import ENV_ID
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.runs.policy import PolicyMLP
from rgsd_eval.latents import vmf_samples
from rgsd_eval.metrics import (
    cartesian_error,
    dispersion,
    frame_errors,
    global_mpjpe,
    latent_spread,
    mpjpe,
    rate,
    root_relative_frame_errors,
    sample_std,
    to_start_frame,
    tracking_success,
)
from rgsd_eval.rollouts import ACT_MIN_ROWS, RolloutJobs, eval_env_config, run_rollouts


@pytest.fixture(scope="module")
def lib():
    return MotionLib("demo")


@pytest.fixture(scope="module")
def env(lib):
    cfg, _ = eval_env_config(EnvConfig())
    e = gym.make_vec(ENV_ID, num_envs=5, encoder_reward=False, config=cfg, motions=lib, autoreset_mode="NextStep")
    yield e
    e.close()


def _policy(seed: int = 0) -> PolicyMLP:
    torch.manual_seed(seed)
    return PolicyMLP(375, 69, (16,))


def test_cartesian_error_of_the_reference_against_itself_is_zero(lib):
    for clip in lib.clips:
        assert cartesian_error(clip.body_pos, clip.body_pos) == 0.0


def test_cartesian_error_is_the_mean_body_distance_in_metres(lib):
    ref = lib.clips[0].body_pos
    shifted = ref + np.array([0.03, 0.04, 0.0])  # every body 5 cm off
    assert cartesian_error(shifted, ref) == pytest.approx(0.05, abs=1e-6)
    half = ref.copy()
    half[::2] += np.array([0.0, 0.0, 0.2])  # every other frame 20 cm off
    expected = 0.2 * len(ref[::2]) / len(ref)
    assert cartesian_error(half, ref) == pytest.approx(expected, abs=1e-6)
    one_body = ref.copy()
    one_body[:, 5] += np.array([0.24, 0.0, 0.0])  # one body of 24, 24 cm off: 1 cm on average
    np.testing.assert_allclose(frame_errors(one_body, ref), 0.01, atol=1e-6)


def test_cartesian_error_rejects_mismatched_shapes(lib):
    ref = lib.clips[0].body_pos
    with pytest.raises(ValueError, match="body positions"):
        cartesian_error(ref[:-1], ref)


def _poses(frames: int = 3, bodies: int = 4) -> np.ndarray:
    """(T, B, 3) a small made-up skeleton moving along x."""
    rng = np.random.default_rng(0)
    base = rng.normal(size=(bodies, 3))
    return np.stack([base + np.array([0.1 * t, 0.0, 0.0]) for t in range(frames)])


def test_mpjpe_removes_a_root_offset_that_err_counts_in_full():
    ref = _poses()
    shifted = ref + np.array([0.3, 0.4, 0.0])  # the whole body 0.5 m off: world error 0.5, posture exact
    assert cartesian_error(shifted, ref) == pytest.approx(0.5)
    assert mpjpe(shifted, ref) == pytest.approx(0.0, abs=1e-12)
    bent = ref.copy()
    bent[:, 2] += np.array([0.0, 0.0, 0.4])  # one body of 4 raised 0.4 m: 0.1 m on average, in either frame
    np.testing.assert_allclose(root_relative_frame_errors(bent, ref), 0.1)
    np.testing.assert_allclose(frame_errors(bent, ref), 0.1)
    pelvis = ref.copy()
    pelvis[:, 0] += np.array([0.0, 0.2, 0.0])  # the pelvis 0.2 m off: the other 3 bodies are 0.2 m off relative to it
    assert cartesian_error(pelvis, ref) == pytest.approx(0.05)
    assert mpjpe(pelvis, ref) == pytest.approx(3 * 0.2 / 4)
    with pytest.raises(ValueError, match="body positions"):
        mpjpe(ref[:-1], ref)


def test_success_fails_on_one_frame_above_half_a_metre():
    err = np.array(
        [
            [np.nan, 0.1, 0.5, 0.2],  # 0.5 m is still within
            [np.nan, 0.1, 0.51, 0.2],  # one frame above: failed even though it came back
            [np.nan, 0.1, np.nan, np.nan],  # frames not recorded are ignored
        ]
    )
    np.testing.assert_array_equal(tracking_success(err), [True, False, True])
    np.testing.assert_array_equal(tracking_success(err, completed=[True, True, False]), [True, False, False])
    assert rate(tracking_success(err)) == pytest.approx(2 / 3)


def test_the_spread_of_rollout_errors_is_the_sample_std_and_none_below_two_rollouts():
    assert sample_std(np.array([0.1, 0.2, 0.3])) == pytest.approx(0.1)  # n - 1: 0.0816 with n
    assert sample_std(np.array([0.1, np.nan, 0.3])) == pytest.approx(np.sqrt(0.02))  # NaN rollouts left out
    assert np.isnan(sample_std(np.array([0.07]))) and np.isnan(sample_std(np.array([0.07, np.nan])))


def test_global_mpjpe_averages_the_successful_rollouts_only():
    errors = np.array([0.1, 0.3, 0.9])
    assert global_mpjpe(errors, np.array([True, True, False])) == pytest.approx(0.2)
    assert np.isnan(global_mpjpe(errors, np.zeros(3, dtype=bool)))
    assert errors.mean() == pytest.approx(0.4333, abs=1e-4)  # ERR over every rollout: the other figure


def test_fall_rate_is_the_share_of_fallen_rollouts():
    assert rate(np.array([True, False, False, True])) == 0.5
    assert rate(np.zeros(3, dtype=bool)) == 0.0
    assert np.isnan(rate(np.array([], dtype=bool)))


def test_rollouts_record_mpjpe_and_success_beside_err(env, lib):
    def replay(e, t):
        core = e.unwrapped.core
        ref = core.lib.frame_state(core.clip, torch.full_like(core.clip, t))
        core.backend.set_state(torch.arange(e.unwrapped.num_envs), ref.qpos, ref.qvel)

    jobs = RolloutJobs(np.arange(5), env.unwrapped.core.clip_embeddings.numpy(), 0, False)
    held = run_rollouts(env, _policy(), jobs, on_step=replay, features=False, max_frames=20)
    assert held.mpjpe.max() < 1e-5 and held.success.all()
    free = run_rollouts(env, _policy(1), jobs, features=False)  # a random policy falls: far off, failed
    assert free.fell.all() and not held.fell.any()
    assert (free.mpjpe > 0).all() and (free.mpjpe < free.error).all()
    worst = np.nanmax(free.frame_error.padded()[:, 1:], axis=1)
    np.testing.assert_array_equal(free.success, worst <= 0.5)


def test_world_held_at_the_reference_each_step_scores_zero_error(env, lib):
    def replay(e, t):
        core = e.unwrapped.core
        ref = core.lib.frame_state(core.clip, torch.full_like(core.clip, t))
        core.backend.set_state(torch.arange(e.unwrapped.num_envs), ref.qpos, ref.qvel)

    jobs = RolloutJobs(np.arange(5), env.unwrapped.core.clip_embeddings.numpy(), 0, False)
    res = run_rollouts(env, _policy(), jobs, on_step=replay)
    np.testing.assert_array_equal(res.length, lib.num_frames.numpy())
    assert res.error.max() < 1e-5
    assert not res.fell.any() and not res.unstable.any()
    for c, clip in enumerate(lib.clips):
        np.testing.assert_allclose(res.root_pos[c], clip.body_pos[:, 0], atol=1e-5)


def test_rollout_error_equals_the_envs_per_step_error_averaged_over_the_episode(env, lib):
    policy = _policy(1)
    z = env.unwrapped.core.clip_embeddings.numpy()
    # same torch threads in both loops: float round-off differs between thread counts, and falls amplify it
    res = run_rollouts(env, policy, RolloutJobs(np.arange(5), z, 0, False), torch_threads=None)
    obs, _ = env.reset(
        seed=0, options={"clip": list(range(5)), "start_frame": [0] * 5, "task": "imitation", "skill": z}
    )
    n = lib.num_frames.numpy()
    sums, done = np.zeros(5), np.zeros(5, dtype=bool)
    for _ in range(1, int(n.max())):
        # the policy acts on ACT_MIN_ROWS rows, as in the rollouts: fewer take another kernel, and falls amplify it
        rows = torch.as_tensor(obs)
        rows = torch.cat((rows, rows[:1].expand(ACT_MIN_ROWS - len(rows), -1)))
        obs, _, term, trunc, info = env.step(policy.act(rows)[:5])
        sums += np.where(done, 0.0, info["cartesian_error"])
        done |= term | trunc
    assert done.all() and res.error.min() > 0.05  # the random policy drifts off
    np.testing.assert_allclose(res.error, sums / (n - 1), rtol=1e-4)


def test_dispersion_is_the_rms_distance_from_the_mean():
    assert dispersion(np.array([[0.0, 0.0], [2.0, 0.0]])) == pytest.approx(1.0)
    assert dispersion(np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])) == 0.0
    assert dispersion(np.array([[0.0, 0.0], [0.0, 4.0], [np.nan, 1.0]])) == pytest.approx(2.0)
    assert np.isnan(dispersion(np.array([[0.0, 1.0]])))


def test_to_start_frame_rotates_into_the_start_heading():
    # start at (1, 1) facing +y: (1, 3) is 2 m ahead, (0, 1) 1 m to the left (+y), (2, 0) 1 m behind and 1 m right
    out = to_start_frame(np.array([[1.0, 3.0], [0.0, 1.0], [2.0, 0.0]]), np.array([1.0, 1.0]), np.array([0.0, 2.0]))
    np.testing.assert_allclose(out, [[2.0, 0.0], [0.0, 1.0], [-1.0, -1.0]], atol=1e-12)


@pytest.mark.parametrize("dim", [16])
def test_spread_of_vmf_samples_falls_as_kappa_grows(dim):
    centre = np.eye(dim)[3]
    spreads, cosines = [], []
    for kappa in (20.0, 100.0, 1000.0):
        z = vmf_samples(centre, kappa, 400, seed=0, clip=0)
        np.testing.assert_allclose(np.linalg.norm(z, axis=1), 1.0, atol=1e-9)
        spreads.append(latent_spread(z, centre))
        cosines.append((z @ centre).mean())
        # the sample mean cosine matches the vMF mean resultant length A_d(kappa)
        assert cosines[-1] == pytest.approx(skills.vmf_mean_resultant_length(kappa, dim), abs=0.02)
    assert spreads[0] > spreads[1] > spreads[2]
    assert spreads[0] > 40 and spreads[2] < 8  # degrees: about 47, 21 and 7
    wide, tight = vmf_samples(centre, 20.0, 200, 1, 0), vmf_samples(centre, 1000.0, 200, 1, 0)
    assert dispersion(wide) > 3 * dispersion(tight)


def test_pelvis_travel_is_start_to_end_ground_distance_against_the_reference():
    from types import SimpleNamespace

    from rgsd_eval.evaluate import _travel
    from rgsd_eval.rollouts import Ragged

    root = np.full((2, 5, 3), np.nan, dtype=np.float32)
    root[0, :5] = [[0, 0, 1], [0.5, 0, 1], [1, 0, 1], [1.5, 0, 1], [3, 4, 1]]  # whole episode: 5 m
    root[1, :3] = [[1, 1, 1], [1, 2, 1], [1, 2, 1]]  # fell after 3 steps: 1 m
    res = SimpleNamespace(root_pos=Ragged(root.reshape(10, 3), np.array([0, 5, 10])), length=np.array([5, 3]))
    ref_xy = np.array([[0.0, 0.0], [2.0, 0.0], [6.0, 8.0]])  # 10 m
    out = _travel(res, np.array([0, 1]), ref_xy)
    assert out["ref_travel_m"] == pytest.approx(10.0)
    assert out["travel_m"] == pytest.approx(3.0)
    assert out["travel_ratio"] == pytest.approx(0.3)
    assert _travel(res, np.array([], dtype=int), ref_xy)["travel_m"] is None


def test_err_to_fall_averages_a_rollout_s_frames_up_to_its_first_fall():
    """Known answer: frame t's error is t cm; a rollout falling at frame k scores the mean of frames 1..k, one that
    never falls its whole-clip ERR, and a fall on frame 0 (not scored) or after an unstable end does not count."""
    from rgsd_eval.metrics import until_first_fall

    steps = 8
    t = np.arange(steps)[:, None]
    err = np.repeat(t.astype(float), 4, axis=1)  # (T, J): frame t's error is t
    length = np.array([8, 8, 8, 5])  # the last rollout ended (unstable) after frame 4
    scored = (t < length[None, :]) & (t >= 1)
    fell = np.zeros((steps, 4), dtype=bool)
    fell[3:, 0] = True  # falls at frame 3 and stays down
    fell[0, 2] = True  # "fallen" at the start frame only: not scored
    fell[6, 3] = True  # past its end
    until = until_first_fall(scored, fell)
    mean = (err * until).sum(0) / until.sum(0)
    np.testing.assert_allclose(mean, [2.0, 4.0, 4.0, 2.5])  # (1+2+3)/3; 1..7; 1..7; 1..4
    assert until[:, 0].tolist() == [False, True, True, True, False, False, False, False]


def test_rollouts_score_err_to_fall_beside_err(tmp_path):
    """Through the rollout summary: a recording that is off by t cm at frame t and falls at frame k has ERR the mean
    of frames 1..T-1, ERR to fall the mean of frames 1..k, and k of its T-1 frames played before a fall."""
    from rgsd_eval.rollouts import Ragged, Rollouts, _Recording, _summarise

    lib = MotionLib("demo")
    c, k = 0, 10
    n = int(lib.num_frames[c])
    start = int(lib.starts[c])
    ref = lib.frames("body_pos").cpu().numpy()[start : start + n]  # (T, 24, 3)
    offset = np.zeros((n, 1, 3))
    offset[:, 0, 0] = np.arange(n) / 100.0  # t cm along x on every body
    body = np.stack([ref + offset, ref + offset], axis=1).astype(np.float32)  # (T, 2, 24, 3)
    both = np.stack([ref, ref], axis=1)
    fell = np.zeros((n, 2), dtype=bool)
    fell[k:, 0] = True
    jobs = RolloutJobs(np.array([c, c]), np.ones((2, 16)), 0, False)
    out = Rollouts(
        jobs=jobs, length=np.zeros(2, dtype=np.int64), error=np.full(2, np.nan), error_until_fall=np.full(2, np.nan),
        played_before_fall=np.full(2, np.nan), error_until_deviation=np.full(2, np.nan),
        frame_error=Ragged.full([n, n], (), np.nan, np.float64),
        mpjpe=np.full(2, np.nan), fell=np.zeros(2, dtype=bool), unstable=np.zeros(2, dtype=bool),
        success=np.zeros(2, dtype=bool), root_pos=Ragged.full([n, n], (3,), np.nan, np.float32),
        mean_feature=np.full((2, 1), np.nan),
    )  # fmt: skip
    err, local = frame_errors(body, both), root_relative_frame_errors(body, both)
    _summarise(out, jobs, np.arange(2), _Recording(err, local, fell, np.full(2, n), np.zeros(2, bool)))
    whole = np.arange(1, n).mean() / 100.0
    np.testing.assert_allclose(out.error, [whole, whole], atol=1e-6)
    np.testing.assert_allclose(out.error_until_fall, [np.arange(1, k + 1).mean() / 100.0, whole], atol=1e-6)
    np.testing.assert_allclose(out.played_before_fall, [k / (n - 1), 1.0])  # frames 1..k of 1..n-1
    assert out.fell.tolist() == [True, False]


def test_err_to_deviation_stops_at_the_first_frame_past_the_training_threshold():
    """Synthetic per-frame errors through the rollout summary: a rollout whose error first exceeds the deviation
    threshold at frame k averages frames 1..k (that frame included, frame 0 left out as ERR does); one that never
    exceeds it (a frame exactly at the threshold does not) scores its ERR. The threshold is training's default."""
    from rgsd_envs.envs.config import DeviationConfig
    from rgsd_eval.metrics import DEVIATION_THRESHOLD_M
    from rgsd_eval.rollouts import Ragged, Rollouts, _Recording, _summarise

    assert DeviationConfig().threshold == DEVIATION_THRESHOLD_M
    n, k, thr = 30, 17, DEVIATION_THRESHOLD_M
    t = np.arange(n, dtype=np.float64)
    crosses = thr * t / (k - 0.5)  # at or under the threshold on frames 0..k-1, above it from frame k on
    never = np.full(n, thr * 0.5)
    never[0] = 10 * thr  # frame 0 is never scored: it neither counts nor ends the average
    never[5] = thr  # exactly at the threshold is not past it
    err = np.stack([crosses, never], axis=1)  # (T, 2)
    assert crosses[k] > thr >= crosses[k - 1]
    jobs = RolloutJobs(np.array([0, 0]), np.ones((2, 16)), 0, False)
    nan2 = np.full(2, np.nan)
    out = Rollouts(
        jobs=jobs, length=np.zeros(2, dtype=np.int64), error=nan2.copy(), error_until_fall=nan2.copy(),
        played_before_fall=nan2.copy(), error_until_deviation=nan2.copy(),
        frame_error=Ragged.full([n, n], (), np.nan, np.float64), mpjpe=nan2.copy(), fell=np.zeros(2, dtype=bool),
        unstable=np.zeros(2, dtype=bool), success=np.zeros(2, dtype=bool),
        root_pos=Ragged.full([n, n], (3,), np.nan, np.float32), mean_feature=np.full((2, 1), np.nan),
    )  # fmt: skip
    fell = np.zeros((n, 2), dtype=bool)
    _summarise(out, jobs, np.arange(2), _Recording(err, err, fell, np.full(2, n), np.zeros(2, bool)))
    np.testing.assert_allclose(out.error, [crosses[1:].mean(), never[1:].mean()])
    np.testing.assert_allclose(out.error_until_deviation, [crosses[1 : k + 1].mean(), never[1:].mean()])
    assert out.error_until_deviation[1] == out.error[1]
    np.testing.assert_allclose(out.error_until_fall, out.error)  # no fall: ERR to fall is ERR, whatever the error
