"""Helpers shared by the warp backend's checks against native MuJoCo (CPU warp device and CUDA)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from rgsd_envs.sim.backend import SimBackend


def _gap(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double().cpu() - b.double().cpu()).abs().max())


def step_side_by_side(
    warp: SimBackend, native: SimBackend, qpos: torch.Tensor, qvel: torch.Tensor, targets: list[torch.Tensor]
) -> list[dict[str, float]]:
    """Step a warp backend (on its own device) and the native one from the same states with the same PD
    targets; per step, the worst qpos and body-position gaps, contact-flag mismatches and each backend's contacts."""
    dev = warp.device
    warp.set_state(torch.arange(warp.num_envs, device=dev), qpos.to(dev), qvel.to(dev))
    native.set_state(torch.arange(native.num_envs), qpos, qvel)
    out = []
    for target in targets:
        warp.step(target.to(dev))
        native.step(target)
        s_w, s_m = warp.state(), native.state()
        assert not s_w.unstable.any()
        gaps = {k: _gap(getattr(s_w, k), getattr(s_m, k)) for k in ("qpos", "body_pos")}
        gaps["contact_mismatch"] = int((s_w.contact.cpu() != s_m.contact).sum())
        gaps["contacts"] = int(s_m.contact.sum())
        gaps["warp_contacts"] = int(s_w.contact.sum())
        out.append(gaps)
    return out


def until_first_contact(steps: list[dict[str, float]]) -> list[dict[str, float]]:
    """The steps of ``step_side_by_side`` before the first one with a floor contact in either backend."""
    first = next((t for t, s in enumerate(steps) if s["contacts"] or s["warp_contacts"]), len(steps))
    return steps[:first]


@pytest.fixture(scope="session")
def side_by_side() -> Callable[..., list[dict[str, float]]]:
    """``step_side_by_side``: warp against native MuJoCo, step by step."""
    return step_side_by_side


@pytest.fixture(scope="session")
def before_contact() -> Callable[[list[dict[str, float]]], list[dict[str, float]]]:
    """``until_first_contact``: the contact-free steps at the start of a side-by-side run."""
    return until_first_contact


@pytest.fixture(scope="session")
def gap() -> Callable[[torch.Tensor, torch.Tensor], float]:
    """The largest absolute difference of two tensors (on any devices), in float64."""
    return _gap
