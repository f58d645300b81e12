"""RGSD-SMPL-v0 as a Gymnasium environment: API, episodes, vectorisation, errors."""

from __future__ import annotations

import copy
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

import rgsd_envs
from rgsd_envs.envs.core import DISCOVERY, IMITATION
from rgsd_envs.envs.observations import ENCODER_INPUT_DIM, FRAME_DIM, POLICY_LAYOUT, POLICY_OBS_DIM, SKILL_DIM
from rgsd_envs.envs.smpl_v0 import RGSDEnv, RGSDVectorEnv
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.rewards.encoder_reward import EncoderRewardVecWrapper, EncoderRewardWrapper
from rgsd_envs.testing import assert_same_vector_info


@pytest.fixture(scope="module")
def env(real_clip_dir):
    e = gym.make("RGSD-SMPL-v0", motions=real_clip_dir)
    yield e
    e.close()


def test_check_env_passes(real_clip_dir):
    e = gym.make("RGSD-SMPL-v0", motions=real_clip_dir, disable_env_checker=True)
    check_env(e.unwrapped, skip_render_check=True)
    check_env(e, skip_render_check=True)
    e.close()


def test_check_env_passes_with_dict_observations(real_clip_dir):
    e = gym.make("RGSD-SMPL-v0", motions=real_clip_dir, obs_mode="dict", disable_env_checker=True)
    check_env(e.unwrapped, skip_render_check=True)  # resets with one seed twice and compares what came back
    check_env(e, skip_render_check=True)
    e.close()


def _arrays(x, path=""):
    """(path, array) of every numpy array in a return value (dicts, tuples, object arrays of final_obs)."""
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _arrays(v, f"{path}.{k}")
    elif isinstance(x, tuple) or (isinstance(x, np.ndarray) and x.dtype == object):
        for i, v in enumerate(x):
            yield from _arrays(v, f"{path}[{i}]")
    elif isinstance(x, np.ndarray):
        yield path, x


@pytest.mark.parametrize(
    ("vector", "kwargs"),
    [
        (False, {}),
        (False, {"obs_mode": "dict"}),
        (True, {"obs_mode": "dict"}),
        (True, {"obs_mode": "dict", "autoreset_mode": "NextStep"}),
        (True, {}),
    ],
)
def test_returned_arrays_belong_to_the_caller(real_clip_dir, vector, kwargs):
    # a replay buffer keeps what reset and step return: later steps and resets must not change it
    make = gym.make_vec if vector else gym.make
    env = make("RGSD-SMPL-v0", motions=real_clip_dir, **({"num_envs": 3} if vector else {}), **kwargs)
    env.action_space.seed(0)
    kept = [env.reset(seed=1)]
    ends = 0
    for _ in range(40):
        kept.append(env.step(env.action_space.sample()))
        done = kept[-1][2] | kept[-1][3]
        ends += int(np.sum(done))
        if not vector and done:
            kept.append(env.reset())
    copies = [copy.deepcopy(k) for k in kept]
    kept.append(env.reset(seed=2))
    kept.append(env.step(env.action_space.sample()))
    assert ends >= 2  # episodes ended, so restarts (and final_obs) are among what was kept
    if vector and kwargs.get("autoreset_mode") is None:
        assert any("final_obs" in k[-1] for k in kept[1:-2])
    for i, (was, now) in enumerate(zip(copies, kept)):
        for (path, a), (_, b) in zip(_arrays(was), _arrays(now)):
            np.testing.assert_array_equal(a, b, err_msg=f"return {i}{path} changed after later calls")
    env.close()


def test_make_works_in_a_fresh_process_with_module_prefix_and_make_vec_is_native():
    code = (
        "import gymnasium as gym\n"
        "e = gym.make('rgsd_envs:RGSD-SMPL-v0')\n"
        "o, _ = e.reset(seed=0)\n"
        "o, r, te, tr, i = e.step(e.action_space.sample())\n"
        "assert o.shape == (375,) and isinstance(r, float), (o.shape, r)\n"
        "v = gym.make_vec('RGSD-SMPL-v0', num_envs=4)\n"
        "from rgsd_envs.envs.smpl_v0 import RGSDVectorEnv\n"
        "assert isinstance(v.unwrapped, RGSDVectorEnv), type(v.unwrapped)\n"
        "o, _ = v.reset(seed=1)\n"
        "o, r, te, tr, i = v.step(v.action_space.sample())\n"
        "assert o.shape == (4, 375) and r.shape == (4,)\n"
        "print('ok', v.metadata['autoreset_mode'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ok AutoresetMode.SAME_STEP" in out.stdout


def test_spaces_follow_the_spec(env):
    assert env.observation_space.shape == (POLICY_OBS_DIM,) == (375,)
    assert env.action_space.shape == (69,)
    assert np.all(env.action_space.low == -1) and np.all(env.action_space.high == 1)
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.float32 and obs.shape == (375,)
    assert POLICY_LAYOUT["skill"] == slice(359, 375)


def test_dict_observation_mode(real_clip_dir):
    e = RGSDEnv(motions=real_clip_dir, obs_mode="dict")
    obs, _ = e.reset(seed=3)
    assert set(obs) == {"proprio", "skill"}
    assert obs["proprio"].shape == (FRAME_DIM,) and obs["skill"].shape == (SKILL_DIM,)
    assert abs(np.linalg.norm(obs["skill"]) - 1) < 1e-5
    e.close()


def test_reset_puts_the_humanoid_in_the_reference_state_and_observes_it_exactly(env):
    base = env.unwrapped
    obs, info = env.reset(seed=5, options={"clip": 2, "start_frame": 7})
    lib = base.motion_lib
    g = int(lib.starts[2]) + 7
    ref = base.core.ref_features[g].numpy()
    np.testing.assert_allclose(obs[:FRAME_DIM], ref, atol=2e-4)
    assert info["clip_id"] == 2 and info["frame"] == 7
    assert info["cartesian_error"] < 1e-4
    np.testing.assert_allclose(info["ref_body_pos"], lib.frames("body_pos")[g].numpy(), atol=1e-6)


def test_imitation_skill_is_the_clip_embedding_and_discovery_skill_is_a_unit_vector(env):
    base = env.unwrapped
    obs, info = env.reset(seed=0, options={"clip": 1, "task": "imitation"})
    assert info["task"] == IMITATION
    np.testing.assert_allclose(obs[POLICY_LAYOUT["skill"]], base.core.clip_embeddings[1].numpy(), atol=1e-6)
    obs, info = env.reset(options={"clip": 1, "task": "discovery"})
    z = obs[POLICY_LAYOUT["skill"]]
    assert info["task"] == DISCOVERY
    assert abs(np.linalg.norm(z) - 1) < 1e-5
    assert np.dot(z, base.core.clip_embeddings[1].numpy()) < 0.99


def test_task_indicator_follows_p_imitation(real_clip_dir):
    e = RGSDEnv(motions=real_clip_dir, p_imitation=0.7)
    e.reset(seed=11)
    tasks = [e.reset()[1]["task"] for _ in range(600)]
    frac = np.mean(tasks)
    assert 0.64 < frac < 0.76, frac  # binomial sd ~0.019
    e.close()


def test_start_frames_are_uniform_within_the_clip_and_never_its_last_frame(real_clip_dir):
    e = RGSDEnv(motions=real_clip_dir)
    e.reset(seed=2)
    n = int(e.motion_lib.num_frames[e.motion_lib.clip_id("run")])
    starts = [e.reset(options={"clip": "run"})[1]["frame"] for _ in range(400)]
    assert min(starts) == 0 and max(starts) == n - 2
    assert len(set(starts)) == n - 1
    e.close()


def test_phase_advances_and_episode_truncates_at_the_clips_last_frame(env):
    base = env.unwrapped
    lib = base.motion_lib
    c = lib.clip_id("walk")
    n = int(lib.num_frames[c])
    obs, _ = env.reset(seed=0, options={"clip": c, "start_frame": n - 4, "task": "discovery"})
    phases = [obs[0]]
    for k in range(3):
        obs, _, term, trunc, info = env.step(np.zeros(69, np.float32))
        phases.append(obs[0])
        assert not term
        assert trunc == (k == 2)
    np.testing.assert_allclose(np.diff(phases), 1.0 / (n - 1), atol=1e-6)
    assert phases[-1] == pytest.approx(1.0)
    assert info["frame"] == n - 1


def test_deviation_terminates_imitation_but_not_discovery(real_clip_dir):
    e = RGSDEnv(motions=real_clip_dir, deviation={"threshold": 0.0})
    opts = {"clip": "walk", "start_frame": 0}
    e.reset(seed=0, options={**opts, "task": "imitation"})
    _, _, term, _, info = e.step(np.zeros(69, np.float32))
    assert term and info["deviation"] and not info["fall"]
    e.reset(options={**opts, "task": "discovery"})
    _, _, term, _, info = e.step(np.zeros(69, np.float32))
    assert not term and not info["deviation"]
    e.close()


def test_a_fall_terminates_the_episode(real_clip_dir):
    e = RGSDEnv(motions=real_clip_dir)
    e.reset(seed=0, options={"clip": "walk", "start_frame": 0})
    core = e.unwrapped.core
    ref = core.lib.frame_state(torch.tensor([0]), torch.tensor([0]))
    qpos = ref.qpos.clone()
    qpos[0, 2] = 0.15  # pelvis near the floor: lying down
    core.backend.set_state(torch.tensor([0]), qpos.double(), torch.zeros(1, 75, dtype=torch.float64))
    _, _, term, trunc, info = e.step(np.zeros(69, np.float32))
    assert term and not trunc and info["fall"]
    e.close()


def test_simulator_instability_ends_the_episode_not_the_process(real_clip_dir):
    venv = RGSDVectorEnv(3, motions=real_clip_dir)
    venv.reset(seed=0)
    qvel = venv.core.backend._qvel
    qvel[1] = 1e12  # blow world 1 up
    _, _, term, _, info = venv.step(np.zeros((3, 69), np.float32))
    assert term[1] and info["final_info"]["unstable"][1]
    assert not info["final_info"]["_unstable"][0]
    obs, _, term, _, _ = venv.step(np.zeros((3, 69), np.float32))
    assert np.isfinite(obs).all() and not term[1]
    venv.close()


def _rollout(venv, steps, seed, infos=None):
    """Observations and step results of a seeded random rollout; ``infos`` (a list) collects the reset's and every
    step's info."""
    rng = np.random.default_rng(seed)
    obs, info = venv.reset(seed=seed)
    out = [obs]
    if infos is not None:
        infos.append(info)
    for _ in range(steps):
        a = rng.uniform(-1, 1, (venv.num_envs, 69)).astype(np.float32) * 0.5
        obs, r, te, tr, info = venv.step(a)
        if infos is not None:
            infos.append(info)
        finals = info.get("final_obs")
        out.append(
            (
                obs,
                r,
                te,
                tr,
                None if finals is None else [f for f in finals if f is not None],
                info["clip_id"],
                info["frame"],
            )
        )
    return out


@pytest.mark.parametrize("mode", ["SameStep", "NextStep"])
def test_native_vector_env_matches_sync_vector_env_step_for_step(real_clip_dir, mode):
    kw = dict(motions=real_clip_dir, autoreset_mode=mode)
    native = gym.make_vec("RGSD-SMPL-v0", num_envs=3, **kw)
    sync = gym.make_vec(
        "RGSD-SMPL-v0",
        num_envs=3,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": mode},
        motions=real_clip_dir,
    )
    infos_a, infos_b = [], []
    a, b = _rollout(native, 70, 42, infos_a), _rollout(sync, 70, 42, infos_b)
    for t, (ia, ib) in enumerate(zip(infos_a, infos_b)):
        assert_same_vector_info(ia, ib, f"step {t}")
    np.testing.assert_allclose(a[0], b[0], atol=1e-5)
    ended = 0
    for sa, sb in zip(a[1:], b[1:]):
        np.testing.assert_allclose(sa[0], sb[0], atol=2e-4)
        np.testing.assert_allclose(sa[1], sb[1], rtol=1e-4, atol=2e-4)  # float32 batch-size noise in the encoder
        assert (sa[2] == sb[2]).all() and (sa[3] == sb[3]).all()
        assert (sa[5] == sb[5]).all() and (sa[6] == sb[6]).all()
        ended += int((sa[2] | sa[3]).sum())
        if sa[4] is not None:
            for fa, fb in zip(sa[4], sb[4]):
                np.testing.assert_allclose(fa, fb, atol=2e-4)
    assert ended >= 3  # episodes ended and restarted during the comparison
    native.close()
    sync.close()


def test_gymnasium_observation_statistics_wrappers_take_the_next_step_vector_env(real_clip_dir):
    # docs/environments.md: NormalizeObservation refuses SameStep (the default), so NextStep is asked for
    same_step = gym.make_vec("RGSD-SMPL-v0", num_envs=2, motions=real_clip_dir)
    with pytest.raises(ValueError, match="NEXT_STEP"):
        gym.wrappers.vector.NormalizeObservation(same_step)
    same_step.close()
    env = gym.wrappers.vector.NormalizeObservation(
        gym.make_vec("RGSD-SMPL-v0", num_envs=2, motions=real_clip_dir, autoreset_mode="NextStep")
    )
    env.reset(seed=0)
    obs, reward, *_ = env.step(np.zeros((2, 69), np.float32))
    assert obs.shape == (2, POLICY_OBS_DIM) and np.isfinite(obs).all() and (reward > 0).all()
    env.close()


def test_same_seed_gives_the_same_trajectory(real_clip_dir):
    runs = []
    for _ in range(2):
        v = gym.make_vec("RGSD-SMPL-v0", num_envs=2, motions=real_clip_dir)
        runs.append(_rollout(v, 20, 7))
        v.close()
    for sa, sb in zip(runs[0][1:], runs[1][1:]):
        np.testing.assert_array_equal(sa[0], sb[0])
        np.testing.assert_array_equal(sa[1], sb[1])


def test_registered_env_carries_the_encoder_reward_wrapper(real_clip_dir):
    e = gym.make("RGSD-SMPL-v0", motions=real_clip_dir)
    assert any(isinstance(w, EncoderRewardWrapper) for w in _wrappers(e))
    v = gym.make_vec("RGSD-SMPL-v0", num_envs=2, motions=real_clip_dir)
    assert isinstance(v, EncoderRewardVecWrapper)
    bare = gym.make("RGSD-SMPL-v0", motions=real_clip_dir, encoder_reward=False)
    bare.reset(seed=0)
    assert bare.step(np.zeros(69, np.float32))[1] == 0.0
    for x in (e, v, bare):
        x.close()


def _wrappers(env):
    while hasattr(env, "env"):
        yield env
        env = env.env


def test_wrong_action_shape_is_a_clear_error(env):
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"action has shape \(68,\); expected \(69,\)"):
        env.unwrapped.step(np.zeros(68, np.float32))


def test_nan_actions_are_a_clear_error(real_clip_dir):
    v = RGSDVectorEnv(2, motions=real_clip_dir)
    v.reset(seed=0)
    a = np.zeros((2, 69), np.float32)
    a[1, 5] = np.nan
    with pytest.raises(ValueError, match=f"NaN or inf \\(world 1, hinge {sk.DOF_NAMES[5]}\\)"):
        v.step(a)
    v.close()


def test_unknown_motion_path_is_a_clear_error(tmp_path):
    missing = tmp_path / "nowhere" / "clip.npz"
    with pytest.raises(ValueError, match=r"nowhere/clip\.npz: motions not found: give .demo."):
        gym.make("RGSD-SMPL-v0", motions=str(missing))


def test_encoder_of_the_wrong_width_is_a_clear_error(real_clip_dir):
    wrong = torch.nn.Sequential(torch.nn.Linear(ENCODER_INPUT_DIM, 8), torch.nn.Flatten())
    with pytest.raises(ValueError, match=rf"returned \(2, 8\).*expected \(2, {SKILL_DIM}\)"):
        gym.make("RGSD-SMPL-v0", motions=real_clip_dir, encoder=wrong)
    narrow_input = torch.nn.Linear(100, 16)
    with pytest.raises(ValueError, match=rf"failed on the probe input torch\.zeros\(2, {ENCODER_INPUT_DIM}\)"):
        gym.make("RGSD-SMPL-v0", motions=real_clip_dir, encoder=narrow_input)


def test_async_vector_env_works_with_picklable_kwargs_and_autoresets_same_step(real_clip_dir):
    # "spawn": forking a process that holds MuJoCo's and OpenMP's threads can deadlock; Gymnasium's vector envs
    # default to NextStep, so SameStep (final_obs in the info) is asked for
    v = gym.make_vec(
        "RGSD-SMPL-v0",
        num_envs=2,
        vectorization_mode="async",
        vector_kwargs={"context": "spawn", "autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
        motions=real_clip_dir,
    )
    assert v.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
    obs, _ = v.reset(seed=0)
    v.action_space.seed(0)
    for _ in range(60):
        obs, r, term, trunc, info = v.step(v.action_space.sample())
        assert obs.shape == (2, 375) and np.isfinite(r).all()
        if (term | trunc).any():
            break
    assert (term | trunc).any() and (info["_final_obs"] == (term | trunc)).all()
    v.close()


def test_version_is_exposed():
    assert rgsd_envs.__version__
