"""RGSD-SMPL-GoalReaching-v0: reward, goal frame, style embeddings, episodes."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml
from gymnasium.utils.env_checker import check_env

from rgsd_envs.envs.goal_reaching_v0 import (
    GOAL_OBS_DIM,
    GOAL_OBS_LAYOUT,
    GoalReachingConfig,
    GoalReachingCore,
    goal_in_heading_frame,
    goal_reward,
    style_cosine,
    style_embedding,
)
from rgsd_envs.envs.observations import ENCODER_INPUT_DIM, POLICY_OBS_DIM
from rgsd_envs.rewards.encoders import MLPEncoder
from rgsd_envs.runs.policy import PolicyMLP
from rgsd_envs.utils.files import InputFileError
from rgsd_envs.utils.rotations import yaw_quat


@pytest.fixture(scope="module")
def low_level(tmp_path_factory):
    """A run folder with an untrained low-level policy and encoder on the demo clips."""
    run = tmp_path_factory.mktemp("low_level")
    torch.manual_seed(0)
    PolicyMLP(POLICY_OBS_DIM, 69, hidden=(32,)).save(run / "policy.pt")
    MLPEncoder(hidden=(32,)).save(run / "encoder.pt")
    (run / "config.yaml").write_text(yaml.safe_dump({"env": {"motions": "demo"}}))
    return str(run)


def test_reward_is_goal_term_plus_style_term():
    cfg = GoalReachingConfig(style="sidestep")
    z_style = torch.tensor([1.0] + [0.0] * 15)
    d = torch.tensor([0.0, 4.0, 4.0])
    z = torch.zeros(3, 16)
    z[0, 0] = z[1, 0] = 2.0  # aligned with the style (normalised inside)
    z[2, 1] = 1.0  # orthogonal: cosine distance 1
    r = goal_reward(d, z, z_style, cfg)
    expected = [1.0 + 1.0, math.exp(-1.0) + 1.0, math.exp(-1.0) + math.exp(-8.0)]
    np.testing.assert_allclose(r.numpy(), expected, rtol=1e-6)
    free = goal_reward(d, z, None, GoalReachingConfig(style="freestyle"))
    np.testing.assert_allclose(free.numpy(), [1.0, math.exp(-1.0), math.exp(-1.0)], rtol=1e-6)


def test_goal_is_expressed_in_the_heading_frame():
    root = torch.tensor([[1.0, 2.0, 0.9]] * 2)
    facing_y = yaw_quat(torch.tensor([math.pi / 2, math.pi / 2]))  # facing +y: left is -x
    goal = torch.tensor([[1.0, 5.0], [0.0, 2.0]])
    local = goal_in_heading_frame(root, facing_y, goal)
    np.testing.assert_allclose(local.numpy(), [[3.0, 0.0], [0.0, 1.0]], atol=1e-6)


def test_style_embedding_holds_each_of_the_styles_clip_embeddings(low_level):
    task = GoalReachingCore(1, low_level, GoalReachingConfig(style="backward"))
    core = task.core
    ids = [i for i, c in enumerate(core.lib.categories) if c == "backward"]
    expected = torch.nn.functional.normalize(core.clip_embeddings[ids], dim=-1)
    torch.testing.assert_close(style_embedding(core, "backward"), expected)
    assert style_embedding(core, "freestyle") is None
    assert set(task.start_clips) == set(ids)
    task.close()


def test_style_reward_at_each_style_clips_own_latent_is_its_maximum():
    # three backward clips with nearly orthogonal latents, as after pretraining, and one walk clip
    gen = torch.Generator().manual_seed(0)
    q, _ = torch.linalg.qr(torch.randn(16, 16, generator=gen))
    latents = q[:4] + 0.05 * torch.randn(4, 16, generator=gen)
    core = SimpleNamespace(
        lib=SimpleNamespace(categories=["backward", "walk", "backward", "backward"]), clip_embeddings=latents
    )
    cfg = GoalReachingConfig(style="backward")
    z_style = style_embedding(core, "backward")
    d = torch.zeros(1)
    others = torch.randn(512, 16, generator=gen)
    best_elsewhere = goal_reward(d.expand(512), others, z_style, cfg).max()
    for k in (0, 2, 3):
        own = latents[k : k + 1]
        r = goal_reward(d, own, z_style, cfg)
        torch.testing.assert_close(r, torch.tensor([2.0]))  # both terms at their maximum of 1
        torch.testing.assert_close(style_cosine(own, z_style), torch.tensor([1.0]))
        assert r > best_elsewhere
    walk = latents[1:2]
    assert goal_reward(d, walk, z_style, cfg) < 1.1  # another style's latent earns almost no style reward


def test_unknown_style_and_a_style_without_clips_are_clear_errors(low_level, real_clip_dir, tmp_path):
    with pytest.raises(ValueError, match="style must be one of"):
        GoalReachingConfig(style="moonwalk")
    run = tmp_path / "run"
    run.mkdir()
    PolicyMLP(POLICY_OBS_DIM, 69, hidden=(8,)).save(run / "policy.pt")
    (run / "config.yaml").write_text(yaml.safe_dump({"env": {"motions": real_clip_dir}}))
    with pytest.raises(ValueError, match="needs reference clips of category 'sidestep'"):
        GoalReachingCore(1, str(run), GoalReachingConfig(style="sidestep"))


def test_missing_low_level_run_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="run folder not found"):
        gym.make("RGSD-SMPL-GoalReaching-v0", low_level=str(tmp_path / "nope"))


@pytest.mark.parametrize("style", ["freestyle", "backward"])
def test_a_low_level_whose_clips_moved_names_its_config_field(low_level, tmp_path, style):
    moved = tmp_path / "moved"
    moved.mkdir()
    for name in ("policy.pt", "encoder.pt"):
        (moved / name).write_bytes((Path(low_level) / name).read_bytes())
    (moved / "config.yaml").write_text(yaml.safe_dump({"env": {"motions": str(tmp_path / "gone")}}))
    with pytest.raises(InputFileError, match=r"the clips the low-level run trained on.*set env\.motions in the") as e:
        gym.make("RGSD-SMPL-GoalReaching-v0", low_level=str(moved), style=style)
    assert e.value.path == str(moved / "config.yaml") and "'env.motions'" in str(e.value)
    assert "--motions" not in str(e.value)  # gym.make has no such flag


def test_episodes_start_at_the_centre_with_a_goal_in_the_arena(low_level):
    env = gym.make("RGSD-SMPL-GoalReaching-v0", low_level=low_level, style="sidestep")
    goals = []
    for seed in range(12):
        obs, info = env.reset(seed=seed)
        assert obs.shape == (GOAL_OBS_DIM,) == (364,)
        root = env.unwrapped.task.core.backend.state().body_pos[0, 0]
        assert abs(float(root[0])) < 1e-6 and abs(float(root[1])) < 1e-6
        g = info["goal"]
        assert np.all(np.abs(g) <= 10.0) and np.hypot(*g) >= 1.0
        np.testing.assert_allclose(np.linalg.norm(obs[GOAL_OBS_LAYOUT["goal"]]), np.hypot(*g), rtol=1e-4)
        np.testing.assert_array_equal(obs[GOAL_OBS_LAYOUT["style"]], [0, 1, 0])
        goals.append(g)
    assert np.std(goals, axis=0).min() > 2.0  # spread over the arena
    env.close()


def test_an_action_runs_the_low_level_policy_for_k_control_steps_and_episodes_truncate(low_level):
    cfg = GoalReachingConfig(episode_seconds=1.0, low_level_steps=3)
    task = GoalReachingCore(2, low_level, cfg)
    task.core.seed([0, 1], [0, 1])
    task.reset_envs([0, 1])
    steps = 0
    while True:
        _, term, trunc, _ = task.step(torch.randn(2, 16))
        steps += 1
        if (term | trunc).all() or steps > 20:
            break
    assert task.max_steps == 10 and (steps == 10 or term.any())
    task.close()


def test_success_is_reaching_the_goal_radius(low_level):
    task = GoalReachingCore(1, low_level, GoalReachingConfig())
    task.core.seed([0], [3])
    task.reset_envs([0])
    task.goal[0] = task.core.backend.state().body_pos[0, 0, :2]  # the goal under the pelvis
    reward, _, _, info = task.step(torch.randn(1, 16))
    assert bool(info["success"][0]) and float(info["distance"][0]) < 0.5
    assert float(reward[0]) > math.exp(-0.25 * 0.5)
    task.close()


def test_set_goal_moves_one_world_s_goal_and_what_its_policy_sees_mid_episode(low_level):
    task = GoalReachingCore(2, low_level, GoalReachingConfig())
    task.core.seed([0, 1], [0, 1])
    task.reset_envs([0, 1])
    task.step(torch.randn(2, 16))
    other = task.goal[0].clone()
    task.success[1] = True
    task.set_goal([1], (3.0, -2.5))
    np.testing.assert_allclose(task.goal[1].numpy(), [3.0, -2.5])
    torch.testing.assert_close(task.goal[0], other)  # the other world keeps its goal
    assert not bool(task.success[1])  # success is about the new goal
    st = task.core.backend.state()
    expected = goal_in_heading_frame(st.body_pos[1:, 0], st.body_rot[1:, 0], torch.tensor([[3.0, -2.5]]))
    torch.testing.assert_close(task.observation()[1:, GOAL_OBS_LAYOUT["goal"]], expected.float())
    with pytest.raises(ValueError, match="goal must be finite"):
        task.set_goal([0, 1], np.zeros((3, 2)))
    task.close()


def test_single_env_passes_check_env_and_vector_env_autoresets(low_level):
    env = gym.make("RGSD-SMPL-GoalReaching-v0", low_level=low_level, disable_env_checker=True)
    check_env(env.unwrapped, skip_render_check=True)
    env.close()
    venv = gym.make_vec("RGSD-SMPL-GoalReaching-v0", num_envs=3, low_level=low_level, episode_seconds=0.5)
    obs, _ = venv.reset(seed=0)
    assert obs.shape == (3, 364)
    for _ in range(3):
        obs, _, term, trunc, info = venv.step(np.ones((3, 16), np.float32))
    assert trunc.all() or term.any()
    assert info["_final_obs"].any()
    with pytest.raises(ValueError, match=r"skill\) has shape \(3, 15\)"):
        venv.step(np.ones((3, 15), np.float32))
    venv.close()


def test_a_step_before_reset_or_after_close_is_refused(low_level):
    from gymnasium.error import ClosedEnvironmentError, ResetNeeded

    venv = gym.make_vec("RGSD-SMPL-GoalReaching-v0", num_envs=2, low_level=low_level)
    with pytest.raises(ResetNeeded, match=r"call reset\(\) before step\(\)"):
        venv.step(np.ones((2, 16), np.float32))
    venv.reset(seed=0)
    venv.step(np.ones((2, 16), np.float32))
    venv.close()
    with pytest.raises(ClosedEnvironmentError, match="this env is closed"):
        venv.unwrapped.torch_env.step(torch.ones(2, 16))


def test_encoder_input_width_is_the_envs():
    assert ENCODER_INPUT_DIM == 1795


@pytest.mark.parametrize("make", [gym.make, lambda env_id: gym.make_vec(env_id, num_envs=2)])
def test_make_without_low_level_says_what_to_pass_and_how_to_get_one(make):
    from rgsd_envs.envs.goal_reaching_v0 import MissingLowLevelPolicyError

    with pytest.raises(MissingLowLevelPolicyError) as err:
        make("RGSD-SMPL-GoalReaching-v0")
    msg = str(err.value)
    assert isinstance(err.value, ValueError) and "\n" not in msg
    assert "low_level=<run folder or policy.pt>" in msg and "rgsd train --config demo" in msg
    assert "rgsd_agents.pretrained.pretrained_run()" in msg and "rgsd play --pretrained" in msg  # the shipped one


def test_low_level_may_be_the_policy_file_of_a_run(low_level):
    from pathlib import Path

    env = gym.make("RGSD-SMPL-GoalReaching-v0", low_level=str(Path(low_level) / "policy.pt"))
    obs, _ = env.reset(seed=0)
    assert obs.shape == (GOAL_OBS_DIM,)
    env.close()


def test_a_world_that_falls_on_the_last_step_is_terminated_not_truncated(low_level):
    task = GoalReachingCore(2, low_level, GoalReachingConfig(episode_seconds=0.1, low_level_steps=3))
    assert task.max_steps == 1
    task.core.seed([0, 1], [0, 1])
    task.reset_envs([0, 1])
    qpos = task.core.backend.state().qpos.clone()
    qpos[0, 2] = 0.15  # world 0's pelvis near the floor: it falls within the step
    task.core.backend.set_state(torch.tensor([0, 1]), qpos.double(), torch.zeros(2, 75, dtype=torch.float64))
    _, term, trunc, _ = task.step(torch.randn(2, 16))
    task.close()
    assert term.tolist() == [True, False] and trunc.tolist() == [False, True]


def test_vector_env_matches_sync_vector_env_of_single_envs_step_for_step(low_level):
    from rgsd_envs.testing import assert_same_vector_info

    kw = dict(low_level=low_level, episode_seconds=0.5)
    native = gym.make_vec("RGSD-SMPL-GoalReaching-v0", num_envs=3, **kw)
    sync = gym.make_vec(
        "RGSD-SMPL-GoalReaching-v0",
        num_envs=3,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
        **kw,
    )
    (oa, ia), (ob, ib) = native.reset(seed=3), sync.reset(seed=3)
    np.testing.assert_allclose(oa, ob, atol=1e-5)
    assert_same_vector_info(ia, ib, "reset")
    rng = np.random.default_rng(0)
    restarted = 0
    for t in range(7):  # episodes of 3 high-level steps: two autoresets of every world
        z = rng.normal(size=(3, 16)).astype(np.float32)
        a, b = native.step(z), sync.step(z)
        np.testing.assert_allclose(a[0], b[0], atol=2e-4)
        np.testing.assert_allclose(a[1], b[1], rtol=1e-4, atol=2e-4)
        assert (a[2] == b[2]).all() and (a[3] == b[3]).all()
        assert_same_vector_info(a[4], b[4], f"step {t}")
        if "final_info" in a[4]:
            restarted += int(a[4]["_final_info"].sum())
            # a restarted world reports its new episode's goal; the finished episode's numbers are in final_info
            done = a[4]["_final_info"]
            assert (a[4]["_goal"] == done).all() and not a[4]["_distance"][done].any()
            assert (a[4]["final_info"]["_distance"] == done).all()
    assert restarted >= 3
    native.close()
    sync.close()


def test_vector_env_resets_only_the_worlds_in_reset_mask(low_level):
    venv = gym.make_vec("RGSD-SMPL-GoalReaching-v0", num_envs=3, low_level=low_level)
    venv.reset(seed=0)
    obs, _, _, _, _ = venv.step(np.ones((3, 16), np.float32))
    goals = venv.unwrapped.task.goal.clone()
    after, info = venv.reset(seed=[5, 6, 7], options={"reset_mask": [True, False, False]})
    assert info["_goal"].tolist() == [True, False, False] and (info["goal"][1:] == 0).all()
    np.testing.assert_array_equal(after[1:], obs[1:])  # the others keep their episodes
    torch.testing.assert_close(venv.unwrapped.task.goal[1:], goals[1:])
    assert not np.allclose(after[0], obs[0])
    single = gym.make("RGSD-SMPL-GoalReaching-v0", low_level=low_level)
    _, single_info = single.reset(seed=5)  # world 0 got seed 5: the episode a single env seeded 5 starts
    np.testing.assert_allclose(info["goal"][0], single_info["goal"], atol=1e-6)
    single.close()
    venv.close()


def test_vector_env_refuses_a_reset_mask_that_is_not_one_bool_per_world(low_level):
    """As the imitation env: a shorter mask would leave worlds unreset, a longer one name worlds that do not exist."""
    venv = gym.make_vec("RGSD-SMPL-GoalReaching-v0", num_envs=3, low_level=low_level)
    venv.reset(seed=0)
    goals = venv.unwrapped.task.goal.clone()
    for mask, shape in (([True, False], r"\(2,\)"), (np.ones(4, bool), r"\(4,\)")):
        with pytest.raises(ValueError, match=rf"options\['reset_mask'\] has shape {shape}, but the env has num_envs=3"):
            venv.reset(seed=1, options={"reset_mask": mask})
    with pytest.raises(ValueError, match=r"options\['reset_mask'\] selects no world"):
        venv.reset(seed=1, options={"reset_mask": np.zeros(3, bool)})
    torch.testing.assert_close(venv.unwrapped.task.goal, goals)  # no world drew a new goal
    venv.close()


def test_reset_options_the_goal_task_does_not_take_are_refused(low_level):
    """The imitation env's options (clip, task, skill, ...) would do nothing here: refused, not ignored."""
    venv = gym.make_vec("RGSD-SMPL-GoalReaching-v0", num_envs=2, low_level=low_level)
    with pytest.raises(
        ValueError, match=r"unknown reset option 'clip': RGSD-SMPL-GoalReaching-v0 takes only reset_mask"
    ):
        venv.reset(seed=0, options={"clip": 0})
    venv.close()
    single = gym.make("RGSD-SMPL-GoalReaching-v0", low_level=low_level)
    with pytest.raises(ValueError, match=r"unknown reset option 'reset_mask': RGSD-SMPL-GoalReaching-v0 takes none"):
        single.reset(seed=0, options={"reset_mask": [True]})
    single.close()
