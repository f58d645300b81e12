"""The env's contract at its edges: reset before step, close, make keywords and reset options are checked."""

from __future__ import annotations

import math
import os

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.error import ClosedEnvironmentError, ResetNeeded

from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.core import RESET_OPTIONS
from rgsd_envs.envs.smpl_v0 import RGSDEnv, RGSDVectorEnv
from rgsd_envs.envs.torch_env import RGSDTorchEnv
from rgsd_envs.utils.device import DeviceError, resolve_device
from rgsd_envs.utils.files import InputFileError

ZEROS = np.zeros((2, 69), np.float32)


def _threads() -> int:
    """OS threads of this process (MuJoCo's batch threads are C threads, unseen by ``threading``)."""
    return len(os.listdir("/proc/self/task"))


# --- reset before step ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, step",
    [
        (lambda d: RGSDTorchEnv(2, motions=d), lambda e: e.step(torch.zeros(2, 69))),
        (lambda d: RGSDTorchEnv(2, motions=d), lambda e: e.transition(torch.zeros(2, 69))),
        (lambda d: gym.make_vec("RGSD-SMPL-v0", num_envs=2, motions=d), lambda e: e.step(ZEROS)),
        (lambda d: RGSDVectorEnv(2, motions=d, autoreset_mode="NextStep"), lambda e: e.step(ZEROS)),
        (lambda d: RGSDEnv(motions=d), lambda e: e.step(ZEROS[0])),
    ],
    ids=["torch-step", "torch-transition", "make_vec", "vector-next-step", "single-unwrapped"],
)
def test_step_before_reset_is_reset_needed(real_clip_dir, make, step):
    env = make(real_clip_dir)
    with pytest.raises(ResetNeeded, match=r"call reset\(\) before step\(\)"):
        step(env)
    env.close()


def test_a_partial_first_reset_leaves_the_other_worlds_needing_one(real_clip_dir):
    v = RGSDVectorEnv(2, motions=real_clip_dir)
    v.reset(seed=0, options={"reset_mask": np.array([True, False])})
    with pytest.raises(ResetNeeded, match="world 1 of 2 has not started"):
        v.step(ZEROS)
    v.reset(seed=0)
    obs, *_ = v.step(ZEROS)
    assert obs.shape == (2, 375)
    v.close()


def test_a_loaded_state_counts_as_a_reset(real_clip_dir):
    """Resuming (``load_state_dict``) continues the saved episodes: no reset needed, and the same next step."""
    first = RGSDTorchEnv(2, motions=real_clip_dir)
    first.reset(seed=3)
    saved = first.state_dict()
    expected = first.step(torch.zeros(2, 69))[1]
    resumed = RGSDTorchEnv(2, motions=real_clip_dir)
    resumed.load_state_dict(saved)
    torch.testing.assert_close(resumed.step(torch.zeros(2, 69))[1], expected, atol=0, rtol=0)
    v = RGSDVectorEnv(2, motions=real_clip_dir)
    v.load_state_dict({"core": saved["core"], "autoreset": torch.zeros(2, dtype=torch.bool)})
    assert v.step(ZEROS)[0].shape == (2, 375)
    for e in (first, resumed, v):
        e.close()


# --- close ------------------------------------------------------------------------------------------------------


def test_close_stops_the_simulator_threads_at_once_and_twice_is_harmless(real_clip_dir):
    before = _threads()
    envs = [RGSDTorchEnv(2, motions=real_clip_dir, num_threads=2) for _ in range(3)]  # one batch thread each
    started = _threads()
    assert started - before == 3
    for e in envs:
        e.close()
        e.close()
    assert _threads() == started - 3  # the envs are still referenced: their threads ended at close()


@pytest.mark.parametrize("vector", [False, True])
def test_step_and_reset_after_close_say_the_env_is_closed(real_clip_dir, vector):
    env = RGSDVectorEnv(2, motions=real_clip_dir) if vector else RGSDTorchEnv(2, motions=real_clip_dir)
    env.reset(seed=0)
    env.close()
    with pytest.raises(ClosedEnvironmentError, match="this env is closed"):
        env.step(ZEROS if vector else torch.zeros(2, 69))
    with pytest.raises(ClosedEnvironmentError, match="this env is closed"):
        env.reset(seed=0)


# --- make keywords ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"reward_kappa": -1.0}, r"reward_kappa must be > 0"),
        ({"reward_kappa": 0.0}, r"reward_kappa must be > 0"),
        ({"reward_kappa": math.nan}, r"reward_kappa must be a finite number, got nan"),
        ({"reward_constant": math.inf}, r"reward_constant must be a finite number, got inf"),
        ({"reward_constant": "1"}, r"reward_constant must be a finite number, got '1'"),
    ],
)
def test_reward_settings_that_would_invert_or_poison_the_reward_are_refused(real_clip_dir, kwargs, message):
    with pytest.raises(ValueError, match=message):
        gym.make("RGSD-SMPL-v0", motions=real_clip_dir, **kwargs)
    with pytest.raises(ValueError, match=message):
        gym.make_vec("RGSD-SMPL-v0", num_envs=2, motions=real_clip_dir, **kwargs)


@pytest.mark.parametrize(
    "kwargs, field, expected",
    [
        ({"fall_height": "x"}, "fall_height", "expected float, got 'x'"),
        ({"p_imitation": None}, "p_imitation", "expected float, got None"),
        ({"contact_termination": "no"}, "contact_termination", "expected true/false, got 'no'"),
        ({"num_threads": 1.5}, "num_threads", "expected int or null, got 1.5"),
        ({"eval_kappa": "5"}, "eval_kappa", "expected float or null, got '5'"),
        ({"deviation": {"threshold": "0.5"}}, "threshold", "expected float, got '0.5'"),
        ({"clip_sampling": {"failure_share": True}}, "failure_share", "expected float, got True"),
    ],
)
def test_a_number_field_given_something_else_is_named(kwargs, field, expected):
    with pytest.raises(InputFileError, match=f"field '{field}': {expected}"):
        EnvConfig(**kwargs)


@pytest.mark.parametrize("field, value", [("eval_kappa", math.nan), ("fall_height", math.nan)])
def test_nan_settings_are_refused(field, value):
    with pytest.raises(ValueError, match=f"{field} must be"):
        EnvConfig(**{field: value})


def test_numbers_of_numpy_types_and_ints_for_floats_are_accepted():
    cfg = EnvConfig(fall_height=np.float32(0.3), p_imitation=1, num_threads=np.int64(2), contact_termination=np.True_)
    assert cfg.fall_height == np.float32(0.3) and cfg.num_threads == 2


def test_a_device_that_is_no_device_name_is_named():
    with pytest.raises(InputFileError, match=r"field 'device': must be one of auto, cpu, cuda, cuda:N, got 'gpu'"):
        EnvConfig(device="gpu")


def test_device_auto_is_the_device_auto_resolves_to(real_clip_dir):
    env = RGSDTorchEnv(1, motions=real_clip_dir, device="auto")
    assert env.device == resolve_device("auto")
    env.close()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a usable GPU")
def test_cuda_without_a_gpu_is_a_device_error_saying_what_to_pass(real_clip_dir):
    with pytest.raises(DeviceError, match=r"device 'cuda' requested .*; pass device='cpu' \(--device cpu on the"):
        gym.make("RGSD-SMPL-v0", motions=real_clip_dir, device="cuda")


def test_make_vec_with_a_render_mode_says_to_use_the_sync_vector_env(real_clip_dir):
    with pytest.raises(
        ValueError, match=r"native vector env of RGSD-SMPL-v0 does not render.*vectorization_mode='sync'"
    ):
        gym.make_vec("RGSD-SMPL-v0", num_envs=2, motions=real_clip_dir, render_mode="rgb_array")
    v = gym.make_vec(
        "RGSD-SMPL-v0", num_envs=2, motions=real_clip_dir, vectorization_mode="sync", render_mode="rgb_array"
    )
    v.reset(seed=0)
    assert v.render()[0].ndim == 3
    v.close()


# --- reset options ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, message",
    [
        ({"clips": 1}, r"unknown reset option 'clips' \(did you mean 'clip'\?\); known options: clip, start_frame"),
        ({"clip": 0, "start": 3}, r"unknown reset option 'start' \(did you mean 'start_frame'\?\)"),
        ({"reset_mask": [True]}, r"unknown reset option 'reset_mask'"),  # a single env resets its one world
    ],
)
def test_unknown_reset_options_are_named_with_the_known_ones(real_clip_dir, options, message):
    env = RGSDEnv(motions=real_clip_dir)
    with pytest.raises(ValueError, match=message):
        env.reset(seed=0, options=options)
    env.close()


def test_the_vector_env_knows_reset_mask_and_lists_it(real_clip_dir):
    v = RGSDVectorEnv(2, motions=real_clip_dir)
    with pytest.raises(ValueError, match=r"known options: clip, start_frame, task, skill, kappa, reset_mask"):
        v.reset(seed=0, options={"mask": np.array([True, False])})
    v.close()


BAD_RESET_MASKS = [
    ([True], ValueError, r"options\['reset_mask'\] has shape \(1,\), but the env has num_envs=2"),  # world 1 left
    ([True, False, True], ValueError, r"options\['reset_mask'\] has shape \(3,\), but the env has num_envs=2"),
    (np.array([0, 1]), TypeError, r"options\['reset_mask'\] has dtype int64: give one bool per world"),  # indices
    (torch.zeros(2, dtype=torch.bool), ValueError, r"options\['reset_mask'\] selects no world"),
]
"""Masks Gymnasium's SyncVectorEnv refuses, refused the same way (lists and tensors are taken too)."""


@pytest.mark.parametrize("mask, error, message", BAD_RESET_MASKS, ids=["short", "long", "indices", "none"])
@pytest.mark.parametrize(
    "make",
    [lambda d: RGSDTorchEnv(2, motions=d), lambda d: RGSDVectorEnv(2, motions=d)],
    ids=["torch", "vector"],
)
def test_a_reset_mask_that_is_not_one_bool_per_world_is_refused_before_any_reset(
    real_clip_dir, make, mask, error, message
):
    env = make(real_clip_dir)
    env.reset(seed=0)
    core = env.core
    episodes = core.random.episodes.tolist()
    with pytest.raises(error, match=message):
        env.reset(seed=1, options={"reset_mask": mask})
    assert core.random.episodes.tolist() == episodes  # no world started an episode
    env.close()


@pytest.mark.parametrize("task", [2, -1, "imitate", [1, 2]])
def test_a_task_other_than_the_two_is_refused(real_clip_dir, task):
    v = RGSDVectorEnv(2, motions=real_clip_dir)
    with pytest.raises(ValueError, match=r"options\['task'\] must be 'imitation', 'discovery', 1 or 0"):
        v.reset(seed=0, options={"task": task})
    v.close()


def test_every_documented_reset_option_is_still_taken(real_clip_dir):
    v = RGSDVectorEnv(2, motions=real_clip_dir)
    z = np.eye(16)[:2]
    _, info = v.reset(seed=0, options={"clip": [0, 1], "start_frame": 2, "task": [1, "discovery"], "skill": z})
    assert info["task"].tolist() == [1, 0] and info["clip_id"].tolist() == [0, 1] and info["frame"].tolist() == [2, 2]
    _, info = v.reset(seed=0, options={"kappa": 5.0, "reset_mask": np.array([False, True])})
    assert info["_task"].tolist() == [False, True] and info["task"][1] == 1
    assert set(RESET_OPTIONS) == {"clip", "start_frame", "task", "skill", "kappa"}
    v.close()


def test_worlds_left_out_of_stepped_make_no_transition_and_feed_no_statistics(real_clip_dir):
    """A world ``transition(stepped=...)`` leaves out keeps its state, ends nothing and leaves the failure rates
    and the deviation rule's averages as they were, however far its reference clock runs past its clip's end."""
    env = RGSDTorchEnv(2, config=EnvConfig(motions=real_clip_dir, p_imitation=1.0, deviation={"adaptive": True}))
    env.reset(seed=0, options={"clip": 0})
    core = env.core
    rates, errors = core.failure_rate.clone(), core.deviation_rule.clip_error.clone()
    before = core.backend.state().body_pos[1].clone()
    stepped = np.array([False, False])
    for _ in range(int(core.lib.num_frames[0]) + 5):
        tr = env.transition(torch.zeros(2, 69), stepped=stepped)
        assert not tr.terminated_host.any() and not tr.truncated_host.any()
    torch.testing.assert_close(core.backend.state().body_pos[1], before, atol=0, rtol=0)
    torch.testing.assert_close(core.failure_rate, rates, atol=0, rtol=0)
    torch.testing.assert_close(core.deviation_rule.clip_error, errors, atol=0, rtol=0)


def test_a_none_in_a_seed_list_leaves_that_worlds_stream_as_it_was(real_clip_dir):
    """``reset(seed=[s, None])`` re-seeds world 0 only: world 1 goes on to its next episode, as ``SyncVectorEnv``
    leaves an env reset with ``seed=None``."""
    a, b = RGSDVectorEnv(2, motions=real_clip_dir), RGSDVectorEnv(2, motions=real_clip_dir)
    a.reset(seed=[3, 7])
    obs_a, info_a = a.reset(seed=[4, None])
    b.reset(seed=[9, 7])
    obs_b, info_b = b.reset()  # no seed: world 1's second episode of seed 7
    np.testing.assert_array_equal(obs_a[1], obs_b[1])
    for key in ("clip_id", "frame", "task"):
        assert info_a[key][1] == info_b[key][1]
    assert a.torch_env.core.random.episodes.tolist() == [1, 2]  # world 1 counts on from its first episode
    a.close(), b.close()


@pytest.mark.parametrize("cls", ["RGSDVectorEnv", "GoalReachingVectorEnv"])
def test_closing_a_vector_env_whose_constructor_refused_is_quiet(cls):
    """Gymnasium's VectorEnv closes on deletion, also an instance whose constructor raised before its simulator
    existed: closing must not raise (it printed "Exception ignored ... has no attribute")."""
    from rgsd_envs.envs import goal_reaching_v0, smpl_v0

    module = smpl_v0 if cls == "RGSDVectorEnv" else goal_reaching_v0
    half_built = object.__new__(getattr(module, cls))
    half_built.close_extras()
