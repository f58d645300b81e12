"""Finding, on any device, the calls that would make a GPU's host thread wait for the device.

``torch.cuda.set_sync_debug_mode("warn")`` reports synchronising calls, but only on a GPU. ``find_syncs``
reports the same calls from a run on the CPU, so a CPU test can guard a hot path. For the duration of a
block it records each of them with the innermost rgsd source line that made it:

- aten ops that synchronise on CUDA whatever their inputs (``SYNCING_OPS``: ``nonzero``, ``.item()``,
  ``unique``, ``masked_select``, ``torch.equal``, ...), indexing by a boolean mask (``x[mask]``, and
  ``x[mask] = v`` unless ``v`` is one host value, which torch turns into ``masked_fill_``) and
  ``repeat_interleave`` without ``output_size``;
- Python reads of a device tensor (``Tensor.numpy/.cpu/.item/.tolist/__bool__``, as ``count_host_reads``);
- host <-> device copies that block: ``.to(device)`` or ``copy_`` of a host tensor without
  ``non_blocking=True``, ``torch.tensor(data, device=...)``, a device tensor copied to the host unless
  asynchronously into pinned memory, an index tensor on the host, and a host scalar written into a device
  tensor by index (``x[ids] = 0.0``: ``index_put_`` moves the scalar to the device with a blocking copy);
- warp's ``synchronize*`` calls, ``wp.array.numpy/.list`` and ``wp.array`` built from host data.

On the CPU every tensor lives on one device, so the detector follows where each tensor made inside the block
would live on a GPU: tensors from numpy, from Python data (``torch.tensor``, the scalar of ``x[i] = 0.0``),
from a factory without ``device=`` or ``device="cpu"``, or from ``.cpu()`` are host tensors, and so is what an
op computes from host tensors alone; tensors from before the block, or made with another ``device=`` (a
``torch.device``, even a CPU one, is taken for the configured device), are device tensors. A non-blocking
upload from pageable memory is not recorded (torch does not count it: the driver stages it and returns).

Given a GPU device (``find_syncs("cuda")``), tensors' own devices say which are on the host instead. It is a
model of CUDA's behaviour, not a measurement: ``tests/test_cuda.py`` measures on a GPU.
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary

from rgsd_envs.utils.host_reads import READ_METHODS

aten = torch.ops.aten

SYNCING_OPS = frozenset(
    {
        aten.nonzero.default,
        aten.nonzero.out,
        aten.argwhere.default,
        aten._local_scalar_dense.default,
        aten.is_nonzero.default,
        aten.masked_select.default,
        aten.masked_scatter.default,
        aten.masked_scatter_.default,
        aten._unique.default,
        aten._unique2.default,
        aten.unique_dim.default,
        aten.unique_consecutive.default,
        aten.equal.default,
        aten.bincount.default,
        aten._linalg_check_errors.default,
    }
)
"""aten ops that synchronise on CUDA whatever their inputs (an output size or a value the host must know)."""
INDEX_PUT_OPS = frozenset({aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default})
"""aten ops of ``x[index] = value``."""
_FACTORIES = ("zeros", "ones", "empty", "full", "arange", "linspace", "rand", "randn", "randint", "eye")
"""``torch`` factories: made without ``device=`` they are host tensors."""
_FROM_DATA = ("tensor", "as_tensor", "asarray")
_WARP_SYNCS = ("synchronize", "synchronize_device", "synchronize_stream", "synchronize_event")
_HOST_MADE = frozenset({aten.lift_fresh.default, aten.lift_fresh_copy.default})
"""aten ops that wrap Python data into a tensor: on a GPU it is made on the host."""


class Sync(NamedTuple):
    """One call that would synchronise on CUDA: what it is and the innermost rgsd source line that made it."""

    op: str
    site: str


def rgsd_caller() -> str:
    """The innermost rgsd source line on the stack (``path:line code``, the path from the package's src)."""
    for frame in reversed(traceback.extract_stack()):
        name = frame.filename
        if "/rgsd_" in name and "/tests/" not in name and not name.endswith("/utils/syncs.py"):
            return f"{name.split('/src/')[-1]}:{frame.lineno} {frame.line}"
    return "outside rgsd"


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [x for x in tree_flatten(tree)[0] if isinstance(x, torch.Tensor)]


def _names_host(device: Any) -> bool:
    """Whether a ``device=`` argument is the host on every machine: None, or a "cpu" string."""
    return device is None or (isinstance(device, str) and device.startswith("cpu"))


def _is_mask(index: Any) -> bool:
    return isinstance(index, torch.Tensor) and index.dtype in (torch.bool, torch.uint8)


class _Tracker(TorchDispatchMode):
    """Records the aten ops that would synchronise and follows which tensors would live on the host."""

    def __init__(self, record: Callable[[str], None], on_gpu: bool):
        super().__init__()
        self.record = record
        self.on_gpu = on_gpu
        """Whether the code runs on a GPU (each tensor's own device then says whether it is on the host)."""
        self.host = WeakIdKeyDictionary()
        """The tensors made inside the block that would live on the host on a GPU."""
        self.quiet = 0
        """Depth of Python-level calls already recorded (the aten ops inside them are not recorded again)."""

    def on_host(self, t: torch.Tensor) -> bool:
        return t.device.type == "cpu" and (self.on_gpu or t in self.host)

    def names_host(self, device: Any) -> bool:
        """Whether a ``device=`` argument is the host (on the CPU: None or a "cpu" string, see module docstring)."""
        if self.on_gpu:
            return device is None or str(device).startswith("cpu")
        return _names_host(device)

    def mark(self, out: Any, host: bool) -> None:
        for t in _tensors(out):
            if host:
                self.host[t] = True
            else:
                self.host.pop(t, None)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        inputs = _tensors((args, kwargs))
        if not self.quiet and any(not self.on_host(t) for t in inputs):
            self.check(func, args, kwargs)
        out = func(*args, **kwargs)
        if func in _HOST_MADE or (inputs and all(self.on_host(t) for t in inputs) and func is not aten.copy_.default):
            self.mark(out, host=True)  # a move to the device (``Tensor.to``) is marked by its wrapper
        return out

    def check(self, func: Any, args: Any, kwargs: dict) -> None:
        """Record ``func`` if it would synchronise (it has a device tensor among its inputs)."""
        name = f"aten.{func.overloadpacket.__name__}"
        if func in SYNCING_OPS:
            self.record(name)
        elif func is aten.index.Tensor:
            indices = [i for i in args[1] if i is not None]
            if any(_is_mask(i) for i in indices):
                self.record(f"{name} by a boolean mask (its nonzero)")
            elif any(self.on_host(i) and i.dim() > 0 for i in indices):
                self.record(f"{name} by a host index tensor (a blocking upload)")
        elif func in INDEX_PUT_OPS:
            self.check_index_put(name, *args, **kwargs)
        elif func is aten.copy_.default:
            dst, src = args[0], args[1]
            non_blocking = args[2] if len(args) > 2 else kwargs.get("non_blocking", False)
            if self.on_host(src) and not non_blocking:
                self.record("aten.copy_ of a host tensor into a device one (a blocking upload)")
            elif self.on_host(dst) and not (non_blocking and dst.is_pinned()):
                self.record("aten.copy_ of a device tensor into a host one (a download)")
        elif func is aten.repeat_interleave.Tensor and kwargs.get("output_size") is None:
            self.record(f"{name} without output_size")
        elif any(self.on_host(t) and t.dim() > 0 for t in _tensors((args, kwargs))):
            self.record(f"{name} of host and device tensors (an error or a copy on CUDA)")

    def check_index_put(
        self, name: str, x: torch.Tensor, indices: Any, value: torch.Tensor, accumulate: bool = False, *_: Any
    ) -> None:
        present = [i for i in indices if i is not None]
        masks = [i for i in present if _is_mask(i)]
        one_host_value = value.numel() == 1 and self.on_host(value)
        if masks:
            # torch writes one host value through one device mask with masked_fill_, which does not synchronise
            if accumulate or not one_host_value or len(present) > 1 or self.on_host(masks[0]):
                self.record(f"{name} by a boolean mask (its nonzero)")
        elif any(self.on_host(i) and i.dim() > 0 for i in present):
            self.record(f"{name} by a host index tensor (a blocking upload)")
        elif self.on_host(value) and value.dim() == 0 and not self.on_host(x):
            self.record(f"{name} of a host scalar (a blocking upload of the value)")
        elif self.on_host(value) and value.dim() > 0:
            self.record(f"{name} of a host value tensor (an error or a copy on CUDA)")


@contextlib.contextmanager
def _patched(owner: Any, name: str, make: Callable[[Any], Any]) -> Iterator[None]:
    original = getattr(owner, name)
    setattr(owner, name, make(original))
    try:
        yield
    finally:
        setattr(owner, name, original)


@contextlib.contextmanager
def find_syncs(device: str | torch.device = "cpu") -> Iterator[list[Sync]]:
    """The calls inside the block that would synchronise on CUDA, in order, for code running on ``device`` (not
    thread-safe: one block at a time)."""
    found: list[Sync] = []

    def record(op: str) -> None:
        found.append(Sync(op, rgsd_caller()))

    mode = _Tracker(record, on_gpu=torch.device(device).type != "cpu")

    def quietly(fn: Any, *args: Any, **kwargs: Any) -> Any:
        mode.quiet += 1
        try:
            return fn(*args, **kwargs)
        finally:
            mode.quiet -= 1

    def read(name: str) -> Callable[[Any], Any]:
        def make(fn: Any) -> Any:
            def wrapper(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
                if not mode.quiet and not mode.on_host(self):
                    record(f"Tensor.{name}")
                out = quietly(fn, self, *args, **kwargs)
                if name == "cpu":
                    mode.mark(out, host=True)
                return out

            return wrapper

        return make

    def moved(fn: Any) -> Any:
        def wrapper(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            target = kwargs.get("device")
            for a in args:
                if isinstance(a, (str, torch.device, torch.Tensor)):
                    target = a
            if target is None:
                return fn(self, *args, **kwargs)
            to_host = mode.on_host(target) if isinstance(target, torch.Tensor) else mode.names_host(target)
            non_blocking = kwargs.get("non_blocking", False) or any(a is True for a in args)
            out = quietly(fn, self, *args, **kwargs)
            if to_host and not mode.on_host(self):
                if not mode.quiet and not (non_blocking and out.is_pinned()):
                    record("Tensor.to of a device tensor to the host (a download)")
            elif not to_host and mode.on_host(self) and not mode.quiet and not non_blocking:
                record("Tensor.to of a host tensor to the device (a blocking upload)")
            mode.mark(out, host=to_host)  # on the CPU ``out`` may be ``self``: it is taken to be moved
            return out

        return wrapper

    def made_from_data(fn: Any) -> Any:
        def wrapper(data: Any, *args: Any, **kwargs: Any) -> Any:
            device = kwargs.get("device")
            if isinstance(data, torch.Tensor):
                return moved(fn)(data, *args, **kwargs) if device is not None else fn(data, *args, **kwargs)
            out = fn(data, *args, **kwargs)
            if not mode.names_host(device) and not mode.quiet:
                record(f"torch.{fn.__name__}(data, device=...) (a blocking upload)")
            mode.mark(out, host=mode.names_host(device))
            return out

        return wrapper

    def factory(fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            out = fn(*args, **kwargs)
            mode.mark(out, host=mode.names_host(kwargs.get("device")))
            return out

        return wrapper

    def from_numpy(fn: Any) -> Any:
        def wrapper(array: Any) -> Any:
            out = fn(array)
            mode.mark(out, host=True)
            return out

        return wrapper

    def warp_call(label: str) -> Callable[[Any], Any]:
        def make(fn: Any) -> Any:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                if not mode.quiet:
                    record(label)
                return quietly(fn, *args, **kwargs)

            return wrapper

        return make

    def warp_array(fn: Any) -> Any:
        def wrapper(self: Any, data: Any = None, *args: Any, **kwargs: Any) -> Any:
            from_host = data is not None and not isinstance(data, torch.Tensor)
            from_host = from_host and not hasattr(data, "__cuda_array_interface__")
            if from_host and not mode.quiet and not mode.names_host(kwargs.get("device")):
                record("wp.array of host data (an upload)")
            return quietly(fn, self, data, *args, **kwargs)

        return wrapper

    with contextlib.ExitStack() as stack:
        for name in READ_METHODS:
            stack.enter_context(_patched(torch.Tensor, name, read(name)))
        stack.enter_context(_patched(torch.Tensor, "to", moved))
        stack.enter_context(_patched(torch, "from_numpy", from_numpy))
        for name in _FROM_DATA:
            stack.enter_context(_patched(torch, name, made_from_data))
        for name in _FACTORIES:
            stack.enter_context(_patched(torch, name, factory))
        wp = sys.modules.get("warp")
        if wp is not None:
            for name in _WARP_SYNCS:
                stack.enter_context(_patched(wp, name, warp_call(f"wp.{name}")))
            for name in ("numpy", "list"):
                stack.enter_context(_patched(wp.array, name, warp_call(f"wp.array.{name} (a download)")))
            stack.enter_context(_patched(wp.array, "__init__", warp_array))
        stack.enter_context(mode)
        yield found
