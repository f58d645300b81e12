"""The MuJoCo Warp backend on a GPU: graph replay against plain launches, two identical runs with contacts, and
against native MuJoCo up to the first floor contact (in the air, landing, a few steps on real-mocap states).

Marked ``cuda``: ``pytest -m cuda`` runs these on a GPU machine (``benchmarks/gpu_check.py`` does); without
CUDA they are skipped. The tolerances are those of the CPU warp device checks (test_warp_backend.py): warp
runs float32 on either device, so a GPU must meet the same bounds.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.sim import make_backend
from rgsd_envs.utils.device import HostBridge

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available() is False)"),
]

N = 4
"""Worlds per backend, as in the CPU warp device checks (the same starts, so the same contact onsets)."""
STEPS = 30
DROP = 0.6
"""Height (m) the demo starts are lifted by for the check up to the first floor contact."""


def _starts(lib: MotionLib) -> tuple[torch.Tensor, torch.Tensor]:
    clips = torch.arange(N) % lib.num_clips
    frames = (torch.arange(N) * 7 + 3) % (lib.num_frames[clips] - 1)
    return lib.frame_qpos_qvel(clips, frames)


def _targets(seed: int, steps: int = STEPS) -> list[torch.Tensor]:
    rng = np.random.default_rng(seed)
    off, scale = torch.as_tensor(sk.ACTION_OFFSET), torch.as_tensor(sk.ACTION_SCALE)
    return [(off + scale * torch.as_tensor(rng.uniform(-0.3, 0.3, (N, sk.NUM_DOFS)))).float() for _ in range(steps)]


@pytest.fixture(scope="module")
def demo_starts():
    return _starts(MotionLib("demo"))


@pytest.fixture(scope="module")
def cuda_backends():
    warp, native = make_backend("warp", N, device="cuda"), make_backend("mujoco", N)
    yield warp, native
    warp.close()
    native.close()


def test_the_captured_step_equals_plain_launches(demo_starts, monkeypatch):
    """The same backend with CUDA graphs on and off, deterministic contact order in both: bit for bit."""
    from rgsd_envs.sim import warp_backend as wb

    monkeypatch.setenv(wb.DETERMINISTIC_ENV, "1")
    graph = make_backend("warp", N, device="cuda")
    monkeypatch.setattr(wb, "use_cuda_graphs", lambda device: False)
    plain = make_backend("warp", N, device="cuda")
    assert graph._step_graph is not None and plain._step_graph is None
    qpos, qvel = (x.cuda() for x in demo_starts)
    for b in (graph, plain):
        b.set_state(torch.arange(N, device="cuda"), qpos, qvel)
    assert graph._observed_graph is not None and plain._observed_graph is None
    a, b = graph.state(), plain.state()  # the refresh after restarts, captured and not
    for name in ("body_pos", "body_rot", "body_lin_vel", "contact"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    for target in _targets(1):
        graph.step(target.cuda())
        plain.step(target.cuda())
        a, b = graph.state(), plain.state()
        for name in ("qpos", "qvel", "body_pos", "body_lin_vel", "contact", "unstable"):
            assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert int(graph.state().contact.sum()) > 0  # contacts were part of it
    assert torch.equal(graph.solver_limit_hits, plain.solver_limit_hits)


def test_two_identical_warp_runs_on_cuda_with_contacts_part_by_float32_rounding_at_most(monkeypatch, gap):
    """mujoco-warp 4.0.0 emits contacts and constraint rows in the order its GPU threads run (its deterministic
    mode's contact and row sorts are still empty), so two identical runs need not repeat bit for bit once worlds
    touch the floor: the solver sums the same rows in another order. What holds is that they part by rounding
    alone: a few control steps from on-floor starts, within the bound warp keeps to float64 MuJoCo."""
    from rgsd_envs.sim import warp_backend as wb

    monkeypatch.setenv(wb.DETERMINISTIC_ENV, "1")
    n = 256  # enough worlds that the threads' order varies
    lib = MotionLib("demo")
    clips = torch.arange(n) % lib.num_clips
    qpos, qvel = lib.frame_qpos_qvel(clips, (torch.arange(n) * 7 + 3) % (lib.num_frames[clips] - 1))
    runs = [make_backend("warp", n, device="cuda") for _ in range(2)]
    for run in runs:
        run.set_state(torch.arange(n, device="cuda"), qpos.cuda(), qvel.cuda())
    rng = np.random.default_rng(4)
    off, scale = torch.as_tensor(sk.ACTION_OFFSET), torch.as_tensor(sk.ACTION_SCALE)
    gaps = []
    for _ in range(3):
        target = (off + scale * torch.as_tensor(rng.uniform(-0.3, 0.3, (n, sk.NUM_DOFS)))).float().cuda()
        for run in runs:
            run.step(target)
        a, b = (run.state() for run in runs)
        gaps.append(max(gap(a.qpos, b.qpos), gap(a.body_pos, b.body_pos)))
    print(f"largest qpos / body position gap per control step: {gaps}")
    assert int(runs[0].state().contact.sum()) > n // 2  # on the floor: contacts throughout
    assert max(gaps) < 1e-4, gaps
    for run in runs:
        run.close()


def test_warp_on_cuda_follows_mujoco_in_the_air(cuda_backends, demo_starts, side_by_side):
    qpos, qvel = demo_starts[0].clone(), demo_starts[1]
    qpos[:, 2] += 6.0
    steps = side_by_side(*cuda_backends, qpos, qvel, _targets(0))
    assert all(s["contacts"] == 0 for s in steps)
    assert max(s["qpos"] for s in steps) < 1e-4 and max(s["body_pos"] for s in steps) < 1e-4, steps[-1]


def test_warp_on_cuda_follows_mujoco_until_the_first_floor_contact(
    cuda_backends, demo_starts, side_by_side, before_contact
):
    """Dropped from DROP m, the worlds fall free, then land (first contact at step 10 on the CPU warp device):
    the backends agree on every step before the first contact in either. Past it a contact onset can move by a
    physics step in float32 against float64 and the trajectories part; the policy-level contract for that
    stretch is the backend parity of a trained policy's error (rgsd-agents' test_backend_parity.py)."""
    qpos, qvel = demo_starts[0].clone(), demo_starts[1]
    qpos[:, 2] += DROP
    steps = side_by_side(*cuda_backends, qpos, qvel, _targets(0))
    free = before_contact(steps)
    assert 5 <= len(free) < STEPS, f"first contact at step {len(free) + 1}: the drop no longer tests a landing"
    assert max(s["qpos"] for s in free) < 1e-4 and max(s["body_pos"] for s in free) < 1e-4, free[-1]


def test_warp_on_cuda_follows_mujoco_through_contacts_on_real_mocap(cuda_backends, real_clip_dir, side_by_side):
    steps = side_by_side(*cuda_backends, *_starts(MotionLib(real_clip_dir)), _targets(0, 10))
    assert sum(s["contacts"] for s in steps) >= 10
    assert all(s["contact_mismatch"] == 0 for s in steps)
    assert max(s["qpos"] for s in steps) < 1e-4 and max(s["body_pos"] for s in steps) < 1e-4, steps[-1]


def test_solver_limit_hits_are_counted_inside_the_graph(cuda_backends, demo_starts):
    warp, _ = cuda_backends
    warp.set_state(torch.arange(N, device="cuda"), *(x.cuda() for x in demo_starts))
    warp.pop_solver_limit_hits()
    for target in _targets(2, 5):
        warp.step(target.cuda())
    hits = warp.pop_solver_limit_hits()
    assert hits.device.type == "cuda" and 0 <= int(hits) <= 5 * N
    assert int(warp.solver_limit_hits.sum()) == 0 and not warp.state().unstable.any()


def test_host_bridge_stages_host_arrays_and_tensors_through_bounded_pinned_buffers():
    bridge = HostBridge("cuda")
    rng = np.random.default_rng(0)
    for n in rng.integers(0, 64, size=50):
        x = rng.normal(size=(n, 375)).astype(np.float32)
        out = bridge.to_device(x, "final_obs")
        assert out.device.type == "cuda" and np.array_equal(out.cpu().numpy(), x)
        t = torch.from_numpy(x) + 1.0  # an env tensor on the host
        assert torch.equal(bridge.to_device(t, "obs").cpu(), t)
    assert set(bridge._buffers) == {"final_obs", "obs"}
    assert bridge.pinned_bytes <= 2 * 64 * 375 * 4
    assert all(b.is_pinned() for b in bridge._buffers.values())
    actions = torch.randn(8, 69, device="cuda")
    assert np.array_equal(bridge.to_host(actions), actions.cpu().numpy())
