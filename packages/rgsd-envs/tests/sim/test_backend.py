"""The MuJoCo CPU backend: state readout, threads, instability, save/restore."""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.sim import make_backend


def _reference(lib, n):
    clips = torch.arange(n) % lib.num_clips
    frames = (torch.arange(n) * 3) % (lib.num_frames[clips] - 1)
    return clips, frames


def test_state_after_set_state_equals_the_reference_frame(real_clip_dir):
    lib = MotionLib(real_clip_dir)
    b = make_backend("mujoco", 8)
    clips, frames = _reference(lib, 8)
    qpos, qvel = lib.frame_qpos_qvel(clips, frames)
    b.set_state(torch.arange(8), qpos, qvel)
    s = b.state()
    ref = lib.frame_state(clips, frames)
    for name in ("body_pos", "body_rot", "body_lin_vel", "body_ang_vel"):
        torch.testing.assert_close(getattr(s, name), getattr(ref, name), atol=2e-5, rtol=1e-5)
    sub = b.state(torch.tensor([5, 2]))
    torch.testing.assert_close(sub.body_pos, s.body_pos[[5, 2]])


def test_body_velocities_are_mujocos_body_origin_velocities(real_clip_dir):
    lib = MotionLib(real_clip_dir)
    b = make_backend("mujoco", 2)
    qpos, qvel = lib.frame_qpos_qvel(torch.tensor([3, 4]), torch.tensor([5, 6]))
    b.set_state(torch.arange(2), qpos, qvel)
    b.step(qpos[:, 7:])
    s = b.state()
    d = b.batch.get_data(1)
    mujoco.mj_forward(b.model, d)
    res = np.zeros(6)
    for i in range(sk.NUM_BODIES):
        mujoco.mj_objectVelocity(b.model, d, mujoco.mjtObj.mjOBJ_XBODY, int(sk.MJ_BODY_IDS[i]), res, 0)
        np.testing.assert_allclose(s.body_lin_vel[1, i].numpy(), res[3:], atol=1e-4)
        np.testing.assert_allclose(s.body_ang_vel[1, i].numpy(), res[:3], atol=1e-4)


def test_results_are_identical_with_one_or_two_threads(real_clip_dir):
    lib = MotionLib(real_clip_dir)
    clips, frames = _reference(lib, 6)
    qpos, qvel = lib.frame_qpos_qvel(clips, frames)
    rng = np.random.default_rng(0)
    targets = [torch.as_tensor(rng.uniform(-1, 1, (6, 69))) for _ in range(20)]
    out = []
    for threads in (1, 2):
        b = make_backend("mujoco", 6, num_threads=threads)
        b.set_state(torch.arange(6), qpos, qvel)
        for t in targets:
            b.step(torch.as_tensor(sk.ACTION_OFFSET) + torch.as_tensor(sk.ACTION_SCALE) * t * 0.3)
        out.append(b.state().qpos.clone())
    torch.testing.assert_close(out[0], out[1], atol=0, rtol=0)


def test_a_step_of_chosen_worlds_moves_them_as_a_full_step_does_and_leaves_the_others(real_clip_dir):
    lib = MotionLib(real_clip_dir)
    clips, frames = _reference(lib, 6)
    qpos, qvel = lib.frame_qpos_qvel(clips, frames)
    target = torch.as_tensor(np.random.default_rng(0).uniform(-1, 1, (6, 69)))
    full, part = make_backend("mujoco", 6), make_backend("mujoco", 6)
    for b in (full, part):
        b.set_state(torch.arange(6), qpos, qvel)
    before = part.state().body_pos.clone()
    full.step(target)
    part.step(target, torch.tensor([1, 4]))
    moved, kept = [1, 4], [0, 2, 3, 5]
    torch.testing.assert_close(part.state().body_pos[moved], full.state().body_pos[moved], atol=0, rtol=0)
    torch.testing.assert_close(part.state().body_pos[kept], before[kept], atol=0, rtol=0)
    assert (full.state().body_pos[kept] != before[kept]).any()  # a step moves them


def test_an_exploding_world_is_flagged_every_time_and_the_others_are_not():
    b = make_backend("mujoco", 3)
    for _ in range(2):  # MuJoCo resets the world and restarts its counters: both events seen
        b._qvel[1] = 1e12
        b.step(b.state().qpos[:, 7:].clone())
        assert b.state().unstable.tolist() == [False, True, False]
        b.step(b.state().qpos[:, 7:].clone())
        assert not b.state().unstable.any()


def test_state_dict_restores_the_worlds_exactly(real_clip_dir):
    lib = MotionLib(real_clip_dir)
    clips, frames = _reference(lib, 4)
    qpos, qvel = lib.frame_qpos_qvel(clips, frames)
    b = make_backend("mujoco", 4)
    b.set_state(torch.arange(4), qpos, qvel)
    saved = b.state_dict()
    target = qpos[:, 7:].clone()
    for _ in range(5):
        b.step(target)
    first = b.state().qpos.clone()
    other = make_backend("mujoco", 4)
    other.load_state_dict(saved)
    for _ in range(5):
        other.step(target)
    torch.testing.assert_close(other.state().qpos, first, atol=0, rtol=0)


def test_unknown_backend_is_a_clear_error():
    import pytest

    with pytest.raises(ValueError, match="unknown simulator backend 'mjx'; choose one of 'mujoco', 'warp'"):
        make_backend("mjx", 1)


def test_close_stops_the_batch_threads_and_later_calls_are_refused():
    import os

    import pytest

    def threads() -> int:  # OS threads: MuJoCo's batch threads are C threads, unseen by ``threading``
        return len(os.listdir("/proc/self/task"))

    before = threads()
    backend = make_backend("mujoco", 4, num_threads=4)  # the caller's thread and 3 batch threads
    assert threads() == before + 3
    backend.close()
    backend.close()
    assert threads() == before  # ``backend`` is still referenced
    with pytest.raises(RuntimeError, match="this MuJoCo backend is closed"):
        backend.step(torch.zeros(4, sk.NUM_DOFS))
    with pytest.raises(RuntimeError, match="this MuJoCo backend is closed"):
        backend.state()
