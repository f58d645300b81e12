"""Simulator backends behind one small interface (docs/environments.md, Simulator backends).

``backend`` holds the interface (``SimBackend``, ``SimState``); each backend is one
module beside it (``mujoco_backend``: native MuJoCo on CPU threads; ``warp_backend``:
MuJoCo Warp on a GPU or a CPU warp device, from the optional extra ``rgsd-envs[warp]``).
A new backend subclasses ``SimBackend`` in its own module and gets a name in ``BACKENDS``.
"""

from __future__ import annotations

import importlib

import torch

from rgsd_envs.humanoid.mjcf import HumanoidConfig
from rgsd_envs.sim.backend import SimBackend, SimState

__all__ = ["BACKENDS", "SimBackend", "SimState", "WarpUnavailableError", "check_backend", "make_backend"]

BACKENDS = ("mujoco", "warp")
"""Names of the simulator backends (``EnvConfig.backend``, ``--set env.backend=...``)."""
WARP_INSTALL = 'pip install "rgsd-envs[warp]"'


class WarpUnavailableError(ImportError):
    """backend="warp" was asked for but MuJoCo Warp (the ``warp`` extra) does not import."""


def check_backend(name: str) -> None:
    """Raise a one-line error unless backend ``name`` exists and its packages import.

    ValueError for an unknown name; ``WarpUnavailableError`` (saying what to install)
    when "warp" is asked for without the extra. Cheap enough to call before a run starts.
    """
    if name not in BACKENDS:
        raise ValueError(f"unknown simulator backend {name!r}; choose one of {', '.join(map(repr, BACKENDS))}")
    if name == "warp":
        try:
            importlib.import_module("warp")
            importlib.import_module("mujoco_warp")
        except ImportError as err:
            raise WarpUnavailableError(
                f"backend 'warp' needs MuJoCo Warp, which does not import ({err}); install it with: {WARP_INSTALL}"
            ) from err


def make_backend(
    name: str,
    num_envs: int,
    config: HumanoidConfig | None = None,
    device: str | torch.device = "cpu",
    num_threads: int | None = None,
) -> SimBackend:
    """Create a backend by name: "mujoco" (CPU threads, the reference) or "warp" (MuJoCo Warp)."""
    check_backend(name)
    config = config or HumanoidConfig()
    if name == "warp":
        from rgsd_envs.sim.warp_backend import WarpBackend, lacks_cpu_compiler

        if lacks_cpu_compiler(device):
            raise WarpUnavailableError(
                "backend 'warp' on the CPU needs warp's CPU compiler (warp/bin/warp-clang.so), which this installation "
                "lacks (benchmarks/gpu_bundle.py leaves it out unless --keep-warp-cpu); run warp on cuda "
                "(env.device=cuda; downstream: task.device=cuda) or the mujoco backend"
            )
        return WarpBackend(num_envs, config, device=device, num_threads=num_threads)
    from rgsd_envs.sim.mujoco_backend import MujocoBackend

    return MujocoBackend(num_envs, config, device=device, num_threads=num_threads)
