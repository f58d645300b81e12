"""benchmarks/reward_near_reference.py: a policy on the reference scores as the reference; a swap puts back
exactly the group it names."""

from __future__ import annotations

import pytest
import torch


def test_swaps_restore_the_reference_group_by_group(load_benchmark, tmp_path):
    rnr = load_benchmark("reward_near_reference")
    from rgsd_agents.testing import tiny_encoder_file
    from rgsd_envs.envs.observations import FRAME_DIM, FRAME_LAYOUT, HISTORY_LEN, reference_encoder_inputs
    from rgsd_envs.motion.library import MotionLib
    from rgsd_envs.rewards.encoders import load_encoder

    lib = MotionLib("demo")
    encoder = load_encoder(tiny_encoder_file(tmp_path / "encoder.pt"))
    reference = reference_encoder_inputs(lib)
    steps = 6
    on_ref = torch.stack([reference[lib.starts + 1 + k] for k in range(steps)])  # (steps, clips, 1795)
    errors = torch.linspace(0.0, 0.5, steps).unsqueeze(1).expand(steps, lib.num_clips)
    rows = rnr.reward_near_reference(lib, on_ref, encoder, first=steps, errors=errors)
    for r in rows.values():
        assert len(r["policy_cos_by_step"]) == steps and r["body_error_by_step"][-1] == pytest.approx(0.5)
        assert sum(r["policy_cos_by_step"]) / steps == pytest.approx(r["policy_cos"], abs=1e-3)
        assert r["policy_cos_first"] == pytest.approx(r["reference_cos"], abs=1e-6)
        assert all(v == pytest.approx(r["reference_cos"], abs=1e-6) for v in r["swap"].values())
    still = on_ref.clone().view(steps, lib.num_clips, HISTORY_LEN, FRAME_DIM)
    still[..., FRAME_LAYOUT["body_ang_vel"]] = 0.0  # the reference with its bodies' spin removed
    rows = rnr.reward_near_reference(lib, still.flatten(2), encoder, first=steps)
    for r in rows.values():
        assert r["swap"]["body_ang_vel"] == pytest.approx(r["reference_cos"], abs=1e-6)
        assert r["swap"]["body_pos"] == pytest.approx(r["policy_cos_first"], abs=1e-6)
    assert any(abs(r["policy_cos_first"] - r["reference_cos"]) > 1e-3 for r in rows.values())
