"""Torch devices of training and evaluation: one parser of ``--device`` and the host <-> device crossing.

``resolve_device`` turns "auto", "cpu", "cuda" or "cuda:N" into a ``torch.device``
and fails with one line that says what to pass instead (``DeviceError``), so
every command can check its device before it creates a run folder.
``HostBridge`` moves the observations a CPU simulator returns (numpy or CPU tensors) onto the
learner's device and its actions back, through pinned host buffers when the
device is a GPU (the hybrid CPU-simulator / GPU-learner mode); on the CPU it is
a no-copy pass-through, so CPU numbers are unchanged.
"""

from __future__ import annotations

import argparse
import math
import re
from typing import Any

import numpy as np
import torch

from rgsd_envs.utils.config import UNNAMED
from rgsd_envs.utils.files import InputFileError

Tensor = torch.Tensor
DEVICE_CHOICES = ("auto", "cpu", "cuda", "cuda:N")
"""What ``--device`` accepts (N: a GPU index)."""
_CUDA = re.compile(r"^cuda(:(\d+))?$")


class DeviceError(ValueError):
    """A device that cannot be used here; the message says what to pass instead."""


def _no_cuda_reason() -> str:
    if torch.version.cuda is None:
        return "this torch is a CPU build"
    return "no GPU is visible to this CUDA build of torch (check the driver and CUDA_VISIBLE_DEVICES)"


def is_device_name(spec: str | None) -> bool:
    """Whether ``spec`` is one of ``DEVICE_CHOICES`` (None: "auto"), usable here or not."""
    text = "auto" if spec is None else str(spec).strip().lower()
    return text in ("auto", "cpu") or _CUDA.match(text) is not None


def check_device_name(spec: str | None) -> None:
    """An error naming a config's ``device`` field (``from_dict`` puts the file or ``--set`` in front) unless
    ``spec`` is a device name (``is_device_name``): a config is refused as it loads, under the key it gave;
    whether the device is usable here is ``resolve_device``'s to say."""
    if not is_device_name(spec):
        raise InputFileError(UNNAMED, f"must be one of {', '.join(DEVICE_CHOICES)}, got {spec!r}", "device")


def device_argument(text: str) -> str:
    """An argparse type: a ``--device`` that is a device name (``is_device_name``), else an argparse error."""
    if not is_device_name(text):
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(DEVICE_CHOICES)}, got {text!r}")
    return text


def resolve_device(spec: str | torch.device | None = "auto") -> torch.device:
    """``torch.device`` of "auto" (cuda if available, else cpu), "cpu", "cuda" or "cuda:N"; ``DeviceError`` if unusable."""
    if isinstance(spec, torch.device):
        spec = str(spec)
    text = "auto" if spec is None else str(spec).strip().lower()
    if text == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if text == "cpu":
        return torch.device("cpu")
    # the messages name both forms: the same device comes from a command's --device and from a Python keyword
    match = _CUDA.match(text)
    if match is None:  # a config's device was checked as it loaded (check_device_name): this is an argument's
        raise DeviceError(
            f"device {spec!r} is not a device; pass one of {', '.join(DEVICE_CHOICES)} (device='...' in Python, "
            "--device on the command line)"
        )
    if not torch.cuda.is_available():
        raise DeviceError(
            f"device '{text}' requested but torch.cuda.is_available() is False ({_no_cuda_reason()}); "
            "pass device='cpu' (--device cpu on the command line) or install a CUDA build of torch"
        )
    if match.group(2) is not None:
        index, count = int(match.group(2)), torch.cuda.device_count()
        if index >= count:
            raise DeviceError(
                f"device '{text}' requested but only {count} CUDA device(s) are visible; "
                f"pass device='cuda:0' to 'cuda:{count - 1}' (--device on the command line)"
            )
        return torch.device("cuda", index)
    return torch.device("cuda", torch.cuda.current_device())


def pinned_empty(nbytes: int) -> Tensor:
    """``nbytes`` of page-locked host memory (uint8), the source and target of asynchronous GPU copies."""
    return torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)


class HostBridge:
    """Observations (numpy or CPU tensors) -> tensors on ``device``; actions on ``device`` -> numpy (see module
    docstring).

    On a GPU each name (``"obs"``, ``"final_obs"``, ``"actions"``, ...) owns one pinned byte buffer, grown
    only when a larger array arrives and otherwise reused through a prefix view, so pinned memory stays at
    the largest array seen per name even when the row count changes every call (the final observations of
    the worlds that ended do).
    """

    def __init__(self, device: str | torch.device):
        self.device = torch.device(device)
        self.pinned = self.device.type == "cuda"
        self._buffers: dict[str, Tensor] = {}
        """One pinned uint8 buffer per name, as large as the largest array staged under that name."""
        self._pending: dict[str, Any] = {}
        """CUDA events of copies out of a pinned buffer still in flight (the buffer is reused after them)."""

    @property
    def pinned_bytes(self) -> int:
        """Pinned host memory held by this bridge."""
        return sum(b.numel() for b in self._buffers.values())

    def _staging(self, name: str, shape: tuple[int, ...], dtype: torch.dtype) -> Tensor:
        """A pinned (shape, dtype) view at the start of ``name``'s buffer, free to overwrite (past copies done)."""
        event = self._pending.pop(name, None)
        if event is not None:
            event.synchronize()
        nbytes = math.prod(shape) * dtype.itemsize
        buf = self._buffers.get(name)
        if buf is None or buf.numel() < nbytes:
            buf = self._buffers[name] = pinned_empty(nbytes)
        return buf[:nbytes].view(dtype).view(shape)

    def to_device(self, x: Any, name: str = "obs") -> Tensor:
        """A tensor on the device (``x`` itself, or a view of it, on its own device; a fresh device tensor
        otherwise, staged through a pinned buffer when it comes from the host)."""
        if isinstance(x, Tensor):
            if x.device.type == self.device.type and self.device.index in (None, x.device.index):
                return x
            if x.device.type != "cpu" or not self.pinned:
                return x.to(self.device, non_blocking=True)
            t = x
        else:
            t = torch.from_numpy(np.ascontiguousarray(x))
            if not self.pinned:
                return t
        buf = self._staging(name, tuple(t.shape), t.dtype)
        buf.copy_(t)
        out = buf.to(self.device, non_blocking=True)
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(self.device))
        self._pending[name] = event
        return out

    def to_host(self, x: Tensor, name: str = "actions") -> np.ndarray:
        """``x`` as numpy (no copy on the CPU; from a GPU a view of a pinned buffer, valid until the next call)."""
        if x.device.type == "cpu":
            return x.numpy()
        buf = self._staging(name, tuple(x.shape), x.dtype)
        buf.copy_(x, non_blocking=True)
        torch.cuda.current_stream(x.device).synchronize()
        return buf.numpy()


def env_device(backend: str, env_spec: str, learner: torch.device) -> str:
    """Device of the env's tensors: the learner's for the warp backend (simulator, observations and networks on
    one GPU) and for a "cuda" env device (each rank's own GPU); otherwise ``env_spec``."""
    if backend == "warp" or (learner.type == "cuda" and resolve_device(env_spec).type == "cuda"):
        return str(learner)
    return env_spec
