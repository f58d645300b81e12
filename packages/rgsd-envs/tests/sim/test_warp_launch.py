"""How the warp backend launches on CUDA, checked on the CPU with fake devices and streams that record calls.

No kernel is compiled here: the backend object is built without ``__init__`` and warp's launch functions
are replaced by recorders, so the order of stream waits, launches and host synchronisations is visible.
"""

from __future__ import annotations

import contextlib
import logging
from types import SimpleNamespace

import pytest
import torch

from rgsd_envs.sim import warp_backend as wb


class _Stream:
    """A stream that records ``wait_stream`` calls into a shared log."""

    def __init__(self, name: str, calls: list[str]):
        self.name, self.calls = name, calls

    def wait_stream(self, other: _Stream) -> None:
        self.calls.append(f"{self.name} waits {other.name}")


def _fake_cuda_backend(monkeypatch, calls: list[str]) -> wb.WarpBackend:
    """A WarpBackend on a fake CUDA warp device whose warp calls are recorded in ``calls``."""
    backend = wb.WarpBackend.__new__(wb.WarpBackend)
    backend.device = torch.device("cuda", 0)
    backend.wp_device = SimpleNamespace(is_cuda=True, is_mempool_enabled=True, stream=_Stream("warp", calls))
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: "torch current stream")
    monkeypatch.setattr(wb.wp, "stream_from_torch", lambda s: _Stream("torch", calls))
    monkeypatch.setattr(wb.wp, "ScopedDevice", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(wb.wp, "synchronize_device", lambda device=None: calls.append("host synchronise"))
    monkeypatch.setattr(wb.wp, "synchronize", lambda: calls.append("host synchronise"))
    monkeypatch.setattr(wb.wp, "capture_launch", lambda graph, stream=None: calls.append(f"replay on {stream.name}"))
    return backend


@pytest.mark.parametrize("captured", [False, True])
def test_launches_wait_for_torch_then_torch_waits_for_warp_without_host_sync(monkeypatch, captured):
    calls: list[str] = []
    backend = _fake_cuda_backend(monkeypatch, calls)
    backend._launch(lambda: calls.append("kernels"), "graph" if captured else None)
    body = "replay on warp" if captured else "kernels"
    assert calls == ["warp waits torch", body, "torch waits warp"]


def test_ordered_launch_puts_the_work_between_the_two_waits():
    calls: list[str] = []
    wb.ordered_launch(lambda: calls.append("run"), _Stream("warp", calls), _Stream("torch", calls))
    assert calls == ["warp waits torch", "run", "torch waits warp"]


def test_cpu_launches_run_directly(monkeypatch):
    calls: list[str] = []
    backend = _fake_cuda_backend(monkeypatch, calls)
    backend.wp_device = SimpleNamespace(is_cuda=False)
    backend._launch(lambda: calls.append("kernels"), None)
    assert calls == ["kernels"]


def test_no_graphs_without_warps_memory_pool_is_one_warning_line(caplog):
    with caplog.at_level(logging.WARNING, logger=wb.log.name):
        assert not wb.use_cuda_graphs(SimpleNamespace(is_cuda=True, is_mempool_enabled=False))
    (record,) = caplog.records
    message = record.getMessage()
    assert "CUDA graphs unavailable" in message and "memory pool is disabled" in message
    assert "set_mempool_enabled" in message and "\n" not in message
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=wb.log.name):
        assert wb.use_cuda_graphs(SimpleNamespace(is_cuda=True, is_mempool_enabled=True))
        assert not wb.use_cuda_graphs(SimpleNamespace(is_cuda=False))  # the CPU never captures, and says nothing
    assert caplog.records == []


def test_a_failed_capture_warns_and_falls_back_to_plain_launches(monkeypatch, caplog):
    calls: list[str] = []
    backend = _fake_cuda_backend(monkeypatch, calls)
    backend._use_graph = True

    def no_capture(**kwargs):
        raise RuntimeError("conditional graph nodes need CUDA driver 12.4")

    monkeypatch.setattr(wb.wp, "ScopedCapture", no_capture)
    with caplog.at_level(logging.WARNING, logger=wb.log.name):
        assert backend._capture(lambda: calls.append("kernels")) is None
    assert calls == ["warp waits torch", "kernels", "torch waits warp"]  # the warm-up launch, ordered
    assert "capture failed" in caplog.text and "driver 12.4" in caplog.text
