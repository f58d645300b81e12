"""Simulator backends behind one small interface (SPEC §10).

``backend`` holds the interface (``SimBackend``, ``SimState``); each backend is one
module beside it (``mujoco_backend``: native MuJoCo on CPU threads). A new backend
subclasses ``SimBackend`` in its own module and gets a name in ``make_backend``.
"""

from __future__ import annotations

import torch

from rgsd_envs.humanoid.mjcf import HumanoidConfig
from rgsd_envs.sim.backend import SimBackend, SimState

__all__ = ["SimBackend", "SimState", "make_backend"]


def make_backend(
    name: str,
    num_envs: int,
    config: HumanoidConfig | None = None,
    device: str | torch.device = "cpu",
    num_threads: int | None = None,
) -> SimBackend:
    """Create a backend by name: "mujoco" (CPU, the reference) is the one shipped now."""
    config = config or HumanoidConfig()
    if name == "mujoco":
        from rgsd_envs.sim.mujoco_backend import MujocoBackend

        return MujocoBackend(num_envs, config, device=device, num_threads=num_threads)
    raise ValueError(f"unknown simulator backend {name!r}; available: 'mujoco' (a GPU backend is planned)")
