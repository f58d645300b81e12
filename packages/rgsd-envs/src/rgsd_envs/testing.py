"""Test helpers that ship with rgsd-envs, for its tests and those of the packages built on it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np


@contextmanager
def warp_without_constraints() -> Iterator[None]:
    """Warp backends built inside this block step with MuJoCo's constraint solver off: no contacts, joint limits or
    friction loss, so the humanoid falls through the floor.

    Why: mujoco-warp 4.0.0 emits contacts and constraint rows in the order its GPU threads happen to run (its
    ``DeterminismType.CONTACTS`` and ``CONSTRAINT`` sorts are still empty), so two identical GPU runs part by
    float32 rounding at the first step with a constraint. Without constraints, its deterministic atomics make GPU
    runs repeat bit for bit: what tests of exact repetition (resume, masked restarts) need on CUDA.
    """
    from rgsd_envs.sim import warp_backend

    mjw = warp_backend.mjw
    original = mjw.put_model

    def put_model(*args, **kwargs):
        model = original(*args, **kwargs)
        model.opt.disableflags |= int(mjw.DisableBit.CONSTRAINT)
        return model

    mjw.put_model = put_model
    try:
        yield
    finally:
        mjw.put_model = original


@contextmanager
def dense_mass_matrix() -> Iterator[None]:
    """Warp backends made inside factor the humanoid's 75-dof mass matrix by tile Cholesky: mujoco-warp's
    ``M_BLOCK_DENSE_MAX`` is raised from 64 to the tree's dof count while the model is laid out, as its own tests
    patch it. Beyond 64 dofs it factors a tree by sparse LDL, one launch per tree level (29 for the humanoid)."""
    from unittest import mock

    from mujoco_warp._src import types

    from rgsd_envs.humanoid import skeleton as sk

    with mock.patch.object(types, "M_BLOCK_DENSE_MAX", max(types.M_BLOCK_DENSE_MAX, sk.NUM_DOFS + 6)):
        yield


@contextmanager
def watching_warp(names: tuple[str, ...], on_call: Callable[[str, tuple, dict], None]) -> Iterator[None]:
    """Inside the block, every call of the warp functions ``names`` (``"launch"``, ``"launch_tiled"``,
    ``"capture_launch"``, ...) first calls ``on_call(name, args, kwargs)``, then runs as usual (for benchmarks that
    count or record what a step launches)."""
    import warp as wp

    originals = {name: getattr(wp, name) for name in names}

    def watched(name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            on_call(name, args, kwargs)
            return originals[name](*args, **kwargs)

        return call

    for name in names:
        setattr(wp, name, watched(name))
    try:
        yield
    finally:
        for name, fn in originals.items():
            setattr(wp, name, fn)


def first_frames(clip: Any, frames: int, name: str) -> Any:
    """A ``MotionClip`` of the first ``frames`` frames of ``clip``, named ``name`` (a clip as short as a test needs)."""
    import dataclasses

    from rgsd_envs.motion.clip import _ARRAYS

    return dataclasses.replace(clip, name=name, **{key: getattr(clip, key)[:frames] for key in _ARRAYS})


def assert_same_vector_info(native: dict[str, Any], sync: dict[str, Any], where: str = "info") -> None:
    """Assert a vector env's info is laid out as ``SyncVectorEnv``'s (``sync``): the same keys and ``_key`` presence
    masks, dtypes and shapes, and values, those of absent entries too (Sync leaves them 0); floats to float32 noise
    (a batch of worlds sums in another order than one world)."""
    assert native.keys() == sync.keys(), f"{where}: keys {sorted(native.keys() ^ sync.keys())} differ"
    for k, b in sync.items():
        a = native[k]
        if isinstance(b, dict):
            assert_same_vector_info(a, b, f"{where} {k}")
        elif b.dtype == object:  # final_obs: None or the world's last observation
            assert [x is None for x in a] == [x is None for x in b], f"{where}: {k} present for other worlds"
            for x, y in zip(a, b):
                if y is not None:
                    np.testing.assert_allclose(x, y, atol=2e-4, err_msg=f"{where}: {k}")
        else:
            same = a.dtype == b.dtype and a.shape == b.shape
            assert same, f"{where}: {k} is {a.dtype} {a.shape}, Sync's {b.dtype} {b.shape}"
            if b.dtype.kind == "f":
                np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-4, err_msg=f"{where}: {k}")
            else:
                np.testing.assert_array_equal(a, b, err_msg=f"{where}: {k}")


def raise_stop_signal(signum: int) -> None:
    """Send this process ``signum`` (SIGINT, SIGTERM, SIGHUP) as a command under test would receive it (from any
    thread), unless no handler would catch it: then an AssertionError, so that a command that installs none fails
    its test instead of killing the test run."""
    import os
    import signal
    import threading

    handler = signal.getsignal(signum)
    if handler in (signal.SIG_DFL, signal.SIG_IGN, None):
        raise AssertionError(f"{signal.Signals(signum).name} has no handler here: it would end the process")
    if threading.current_thread() is threading.main_thread():
        signal.raise_signal(signum)  # handled before this returns
    else:
        os.kill(os.getpid(), signum)  # handled by the main thread, as a signal from outside


@contextmanager
def stop_signals_as_in_a_terminal() -> Iterator[None]:
    """SIGHUP at its default and SIGINT raising KeyboardInterrupt for the block, as in a terminal, even where the
    tests run under ``nohup`` or as a background job (which starts with SIGINT ignored, so Python installs no
    KeyboardInterrupt handler): a command leaves an ignored SIGHUP ignored (``rgsd_envs.utils.signals``), so its
    stop could not be tested there."""
    import signal

    restore = {}
    for name, terminal in (("SIGHUP", signal.SIG_DFL), ("SIGINT", signal.default_int_handler)):
        signum = getattr(signal, name, None)
        if signum is not None and signal.getsignal(signum) == signal.SIG_IGN:
            signal.signal(signum, terminal)
            restore[signum] = signal.SIG_IGN
    try:
        yield
    finally:
        for signum, handler in restore.items():
            signal.signal(signum, handler)
