"""``HostBridge``'s pinned staging buffers, checked on the CPU.

The GPU path is exercised without a GPU: the bridge is told to stage (``pinned = True``) on a CPU device,
page-locked allocation is replaced by plain memory and CUDA events by no-ops, so the buffer bookkeeping
runs exactly as it does in front of a GPU.
"""

from __future__ import annotations

import numpy as np
import torch

from rgsd_envs.utils.device import HostBridge

OBS = 375


class _Event:
    def record(self, stream=None) -> None:
        pass

    def synchronize(self) -> None:
        pass


def _staging_bridge(monkeypatch) -> HostBridge:
    """A bridge that stages through its "pinned" buffers on a CPU-only machine."""
    empty = torch.empty

    def unpinned_empty(*args, pin_memory=False, **kwargs):
        return empty(*args, **kwargs)

    monkeypatch.setattr(torch, "empty", unpinned_empty)
    monkeypatch.setattr(torch.cuda, "Event", _Event)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: None)
    bridge = HostBridge("cpu")
    bridge.pinned = True
    return bridge


def _held_bytes(bridge: HostBridge) -> int:
    return sum(b.untyped_storage().nbytes() for b in bridge._buffers.values())


def test_varying_row_counts_keep_one_pinned_buffer_per_name_and_bounded_memory(monkeypatch):
    bridge = _staging_bridge(monkeypatch)
    rng = np.random.default_rng(0)
    rows = rng.integers(0, 64, size=50)
    for i, n in enumerate(rows):
        final_obs = rng.normal(size=(n, OBS)).astype(np.float32)
        out = bridge.to_device(final_obs, "final_obs")
        np.testing.assert_array_equal(out.numpy(), final_obs)  # what came out is this call's data
        obs = np.full((16, OBS), float(i), np.float32)
        assert bridge.to_device(obs, "obs").tolist() == obs.tolist()
    assert len(bridge._buffers) == 2
    largest = int(rows.max()) * OBS * 4 + 16 * OBS * 4
    assert _held_bytes(bridge) == largest, "pinned memory grew past the largest array per name"


def test_a_smaller_array_reuses_a_prefix_of_the_buffer(monkeypatch):
    bridge = _staging_bridge(monkeypatch)
    bridge.to_device(np.ones((8, 3), np.float32), "x")
    (buf,) = bridge._buffers.values()
    small = bridge.to_device(np.full((2, 3), 7, np.int64), "x")  # other rows and dtype, same name
    assert bridge._buffers["x"] is buf
    assert small.dtype == torch.int64 and small.tolist() == [[7, 7, 7]] * 2
    bigger = np.arange(40.0, dtype=np.float32).reshape(10, 4)
    assert bridge.to_device(bigger, "x").tolist() == bigger.tolist() and _held_bytes(bridge) == 160


def test_host_tensors_pass_through_on_the_cpu():
    bridge = HostBridge("cpu")
    t = torch.arange(6.0).reshape(2, 3)
    assert bridge.to_device(t) is t and not bridge._buffers
