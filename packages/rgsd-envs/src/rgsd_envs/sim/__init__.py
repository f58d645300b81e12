"""Simulator backends behind one small interface (SPEC §10)."""

from rgsd_envs.sim.backend import SimBackend, SimState, make_backend

__all__ = ["SimBackend", "SimState", "make_backend"]
