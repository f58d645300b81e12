"""The MuJoCo Warp backend on a CPU warp device, checked against the native mujoco backend.

CI installs the ``warp`` extra (requirements-test.txt), so nothing here is skipped. The first
warp backend of a machine compiles kernels (about 50 s on 2 cores, then cached); the fixtures
are module-scoped so that each test file pays the kernel load once.
"""

from __future__ import annotations

import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.sim import WARP_INSTALL, WarpUnavailableError, check_backend, make_backend

N = 4
STEPS = 30


@pytest.fixture(scope="module")
def lib(real_clip_dir):
    return MotionLib(real_clip_dir)


@pytest.fixture(scope="module")
def starts(lib):
    """Reference states of N worlds (clips and frames spread over the library)."""
    clips = torch.arange(N) % lib.num_clips
    frames = (torch.arange(N) * 7 + 3) % (lib.num_frames[clips] - 1)
    return lib.frame_qpos_qvel(clips, frames)


@pytest.fixture(scope="module")
def backends():
    w, m = make_backend("warp", N), make_backend("mujoco", N)
    yield w, m
    w.close()
    m.close()


def _targets(seed: int) -> list[torch.Tensor]:
    rng = np.random.default_rng(seed)
    off, scale = torch.as_tensor(sk.ACTION_OFFSET), torch.as_tensor(sk.ACTION_SCALE)
    return [off + scale * torch.as_tensor(rng.uniform(-0.3, 0.3, (N, sk.NUM_DOFS))) for _ in range(STEPS)]


def _gap(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double().cpu() - b.double().cpu()).abs().max())


def _compare(backends, qpos, qvel, targets) -> list[dict[str, float]]:
    """Step both backends from the same states with the same targets; per-step worst gaps."""
    warp, native = backends
    for b in backends:
        b.set_state(torch.arange(N), qpos, qvel)
    out = []
    for target in targets:
        warp.step(target)
        native.step(target)
        s_w, s_m = warp.state(), native.state()
        assert not s_w.unstable.any()
        gaps = {k: _gap(getattr(s_w, k), getattr(s_m, k)) for k in ("qpos", "body_pos")}
        gaps["contact_mismatch"] = int((s_w.contact.cpu() != s_m.contact).sum())
        gaps["contacts"] = int(s_m.contact.sum())
        out.append(gaps)
    return out


def test_reference_states_read_back_identically(backends, starts):
    warp, native = backends
    for b in backends:
        b.set_state(torch.arange(N), *starts)
    s_w, s_m = warp.state(), native.state()
    for name in ("qpos", "qvel", "body_pos", "body_rot", "body_lin_vel", "body_ang_vel"):
        assert _gap(getattr(s_w, name), getattr(s_m, name)) < 2e-6, name
    assert (s_w.contact.cpu() == s_m.contact).all()


def test_warp_follows_mujoco_for_30_control_steps_in_the_air(backends, starts):
    qpos, qvel = starts[0].clone(), starts[1]
    qpos[:, 2] += 6.0  # 30 steps (1 s) of free fall and PD motion without touching the floor
    steps = _compare(backends, qpos, qvel, _targets(0))
    assert all(s["contacts"] == 0 for s in steps)
    # measured: qpos 2.0e-6, body positions 1.2e-6 after 30 steps (float32 against float64)
    assert max(s["qpos"] for s in steps) < 1e-4 and max(s["body_pos"] for s in steps) < 1e-4, steps[-1]


def test_warp_follows_mujoco_through_floor_contacts(backends, starts):
    """With the floor, 1e-4 holds as long as no contact starts within the float32 noise of the other
    backend's; on these states (feet and then falling bodies touching down, up to 15 bodies on the
    floor) that is 25 control steps: measured qpos 7e-5, body positions 8e-5 at step 25, then one
    hand touches down one physics step apart and the two part at the 1e-2 level. The test holds
    20 steps to 1e-4 with every floor contact flag equal."""
    steps = _compare(backends, *starts, _targets(0)[:20])
    assert sum(s["contacts"] for s in steps) >= 40  # contacts were compared
    assert all(s["contact_mismatch"] == 0 for s in steps)
    assert max(s["qpos"] for s in steps) < 1e-4 and max(s["body_pos"] for s in steps) < 1e-4, steps[-1]


def test_state_of_chosen_worlds_and_save_restore(backends, starts):
    warp, _ = backends
    qpos, qvel = starts
    warp.set_state(torch.arange(N), qpos, qvel)
    sub = warp.state(torch.tensor([3, 1]))
    torch.testing.assert_close(sub.body_pos, warp.state().body_pos[[3, 1]])
    # set_state of one world leaves the others untouched
    before = warp.state().body_pos.clone()
    warp.set_state(torch.tensor([2]), qpos[[0]], qvel[[0]])
    after = warp.state().body_pos
    torch.testing.assert_close(after[[0, 1, 3]], before[[0, 1, 3]], atol=0, rtol=0)
    torch.testing.assert_close(after[2], before[0], atol=0, rtol=0)
    saved = warp.state_dict()
    target = qpos[:, 7:].clone()
    warp.step(target)
    warp.step(target)
    first = warp.state().qpos.clone()
    warp.load_state_dict(saved)
    warp.step(target)
    warp.step(target)
    torch.testing.assert_close(warp.state().qpos, first, atol=0, rtol=0)


def test_a_nan_world_is_flagged_and_reset_the_others_carry_on(backends, starts):
    warp, _ = backends
    qpos, qvel = starts
    warp.set_state(torch.arange(N), qpos, qvel)
    warp._qvel[1, 10] = float("nan")
    warp.step(qpos[:, 7:].clone())
    s = warp.state()
    assert s.unstable.tolist() == [False, True, False, False]
    assert torch.isfinite(s.qpos).all() and torch.isfinite(s.qvel).all()
    # put back at the rest pose at the exploding substep (then stepped on from there)
    rest = torch.as_tensor(warp.model.qpos0, dtype=torch.float32)
    assert float((s.qpos[1, :3] - rest[:3]).norm()) < 0.05
    warp._qvel[2] = 1e12  # an explosion is flagged as well
    warp.step(qpos[:, 7:].clone())
    assert warp.state().unstable.tolist() == [False, False, True, False]
    warp.set_state(torch.tensor([2]), qpos[[2]], qvel[[2]])
    assert not warp.state().unstable.any()


def _rollout(backend: str, motions: str, seed: int = 3, steps: int = 20):
    # imitation episodes that end at 5 cm of deviation: short episodes, so terminations and
    # autoresets are compared many times, and each restart puts both backends on the same state
    v = gym.make_vec(
        "RGSD-SMPL-v0", num_envs=N, motions=motions, backend=backend, p_imitation=1.0, deviation_threshold=0.05
    )
    rng = np.random.default_rng(seed)
    obs, _ = v.reset(seed=seed)
    out = [(obs, None, None, None)]
    for _ in range(steps):
        obs, r, te, tr, _ = v.step(rng.uniform(-0.5, 0.5, (N, sk.NUM_DOFS)).astype(np.float32))
        out.append((obs, r, te, tr))
    v.close()
    return out


def test_a_4_world_vector_env_agrees_between_backends(real_clip_dir):
    warp, native = _rollout("warp", real_clip_dir), _rollout("mujoco", real_clip_dir)
    np.testing.assert_allclose(warp[0][0], native[0][0], atol=1e-5)
    ended, obs_gap, reward_gap = 0, 0.0, 0.0
    for (ow, rw, tw, uw), (om, rm, tm, um) in zip(warp[1:], native[1:]):
        assert (tw == tm).all() and (uw == um).all()
        obs_gap = max(obs_gap, float(np.abs(ow - om).max()))
        reward_gap = max(reward_gap, float(np.abs(rw - rm).max()))
        ended += int((tw | uw).sum())
    print(f"vector env: observation gap {obs_gap:.1e}, reward gap {reward_gap:.1e}, {ended} episodes ended")
    # measured: observations 7e-5, rewards 1e-4 (kappa times the encoder's float32 noise), 60 episode ends
    assert obs_gap < 1e-3 and reward_gap < 1e-3
    assert ended >= 4, "too few episodes ended: terminations were not compared"


def test_check_env_passes_with_the_warp_backend(real_clip_dir):
    e = gym.make("RGSD-SMPL-v0", motions=real_clip_dir, backend="warp", disable_env_checker=True)
    check_env(e.unwrapped, skip_render_check=True)
    e.close()


def test_a_missing_warp_extra_is_one_line_saying_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco_warp", None)  # import mujoco_warp now raises ImportError
    with pytest.raises(WarpUnavailableError, match="install it with") as err:
        check_backend("warp")
    assert WARP_INSTALL in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(WarpUnavailableError):
        gym.make("RGSD-SMPL-v0", backend="warp")
    with pytest.raises(ValueError, match="unknown simulator backend 'mjx'; choose one of 'mujoco', 'warp'"):
        check_backend("mjx")
    check_backend("mujoco")
