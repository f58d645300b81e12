"""Restarts queued on the device (``RGSDTorchEnv.masked_restarts``) start the episodes host-index restarts start.

Two envs with the same seed step the same actions, one restarting finished worlds by masked device ops before the
step's read, the other by host indices after it; every output of every step, the host copies and the episode
state must be equal bit for bit, through many restarts, a re-seeding reset and a resume from a checkpoint. On a
GPU (marked ``cuda``) two warp runs repeat bit for bit only without constraints (mujoco-warp orders contacts and
constraint rows as its threads run: ``rgsd_envs.testing.warp_without_constraints``), so the humanoid falls through
the floor there, which ends episodes all the more; the encoder's GPU kernels are not promised to repeat bit for
bit, so rewards are held to float32 rounding and everything else to bit for bit.
"""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np
import pytest
import torch

from rgsd_envs.envs.torch_env import RGSDTorchEnv
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.testing import warp_without_constraints
from rgsd_envs.utils.host_reads import count_host_reads

N = 16
STEPS = 40


REWARDS = ("reward", "encoder_reward")


def _same(x, y, rounding: bool) -> bool:
    if not isinstance(x, torch.Tensor):
        return np.array_equal(x, y)
    return torch.allclose(x, y, rtol=1e-5, atol=1e-5) if rounding else torch.equal(x, y)


def _assert_same_step(a: tuple, b: tuple, t: int, reward_rounding: bool = False) -> None:
    for name, x, y in zip(("obs", "reward", "terminated", "truncated"), a[:4], b[:4], strict=True):
        assert _same(x, y, reward_rounding and name in REWARDS), f"step {t}: {name} differ"
    for key in [f.name for f in dataclasses.fields(a[4])]:
        assert _same(a[4][key], b[4][key], reward_rounding and key in REWARDS), f"step {t}: extras[{key!r}] differ"


def _assert_same_worlds(host: RGSDTorchEnv, masked: RGSDTorchEnv, t: int) -> None:
    for name in ("clip_host", "frame_host", "task_host"):
        assert np.array_equal(getattr(host.core, name), getattr(masked.core, name)), f"step {t}: {name}"
    for name in ("clip", "frame", "task", "skill", "features"):
        assert torch.equal(getattr(host.core, name), getattr(masked.core, name)), f"step {t}: {name}"
    assert np.array_equal(masked.core.clip_host, masked.core.clip.cpu().numpy()), "host copy behind the device"
    assert np.array_equal(host.reward_core.tasks_host, masked.reward_core.tasks_host)
    assert torch.equal(host.reward_core.history, masked.reward_core.history), f"step {t}: encoder history"


CUDA = pytest.param(
    "warp",
    "cuda",
    marks=[
        pytest.mark.cuda,
        pytest.mark.skipif(
            not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available() is False)"
        ),
    ],
    id="warp-cuda",
)


@pytest.mark.parametrize(("backend", "device"), [("mujoco", "cpu"), ("warp", "cpu"), CUDA])
def test_masked_restarts_start_the_episodes_host_restarts_start(backend, device, monkeypatch):
    cuda = device == "cuda"
    physics = contextlib.nullcontext()
    if cuda:  # GPU physics that repeats bit for bit: deterministic atomics, no constraint rows in racy order
        from rgsd_envs.sim import warp_backend

        monkeypatch.setenv(warp_backend.DETERMINISTIC_ENV, "1")
        physics = warp_without_constraints()
    with physics:
        _masked_equals_host(backend, device)


def _masked_equals_host(backend: str, device: str) -> None:
    cuda = device == "cuda"
    host, masked = (RGSDTorchEnv(N, backend=backend, device=device) for _ in range(2))
    assert masked.masked_restarts == cuda, "the default: masked on CUDA, by index on the CPU"
    host.masked_restarts, masked.masked_restarts = False, True
    for env in (host, masked):
        env.reset(seed=3)
    gen = torch.Generator().manual_seed(0)
    restarts = 0
    saved = None
    for t in range(STEPS):
        if t == 15:  # a reset that re-seeds every world: the numbers drawn ahead must follow
            for env in (host, masked):
                env.reset(seed=11)
        if t == 25:
            saved = masked.state_dict()
        actions = (0.4 * torch.randn(N, sk.NUM_DOFS, generator=gen)).to(device)
        a = host.step(actions)
        with count_host_reads() as reads:
            b = masked.step(actions)
        if backend == "warp":  # restarts by mask read nothing from the device: the step's one read stays the only one
            assert sum(reads.values()) == 1, f"step {t}: {dict(reads)}"
        _assert_same_step(a, b, t, reward_rounding=cuda)
        _assert_same_worlds(host, masked, t)
        restarts += int(a[4].done_host.sum())
    assert restarts > N, f"the actions should end many episodes, ended {restarts}"

    # a fresh env resumed from the masked env's checkpoint goes on as the host env did
    resumed, replay = (RGSDTorchEnv(N, backend=backend, device=device) for _ in range(2))
    resumed.masked_restarts, replay.masked_restarts = True, False
    for env in (resumed, replay):
        env.load_state_dict(saved)
    gen = torch.Generator().manual_seed(1)
    for t in range(10):
        actions = (0.4 * torch.randn(N, sk.NUM_DOFS, generator=gen)).to(device)
        _assert_same_step(replay.step(actions), resumed.step(actions), t, reward_rounding=cuda)


def test_masked_restarts_refuse_draws_the_step_changes():
    env = RGSDTorchEnv(2, encoder_reward=False, clip_sampling={"mode": "failure_weighted"})
    with pytest.raises(ValueError, match=r"clip_sampling\.mode 'uniform'"):
        env.masked_restarts = True
    assert not env.masked_restarts
