"""Simulated twins of reference states: what a PD-driven body tracking the reference shows, and the reward report's
``sim_twin`` column that scores them."""

from __future__ import annotations

import pytest
import torch

from rgsd_agents.pretraining.config import PretrainConfig
from rgsd_agents.pretraining.loop import pretrain
from rgsd_agents.pretraining.reference import load_reference
from rgsd_agents.pretraining.sim_twins import reference_actions, simulated_twins, twin_frames
from rgsd_agents.pretraining.statistics import alignment_from_embeddings
from rgsd_agents.training.runner import reference_mean_action
from rgsd_envs.envs.observations import FRAME_DIM, FRAME_LAYOUT, HISTORY_LEN, reference_encoder_inputs
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.rewards.encoders import embed, load_encoder


@pytest.fixture(scope="module")
def lib() -> MotionLib:
    return MotionLib("demo")


def test_twin_frames_cover_each_clip_inside_and_start_up_to_steps_before(lib):
    g, start, k = twin_frames(lib, 4)
    for m in range(lib.num_clips):
        n, s0 = int(lib.num_frames[m]), int(lib.starts[m])
        mine = lib.clip_of_frame[g] == m
        assert torch.equal(g[mine], torch.arange(s0 + 1, s0 + n - 1))  # not the first or the last frame
    t = g - lib.starts[lib.clip_of_frame[g]]
    assert torch.equal(k, t.clamp_max(4)) and torch.equal(start, t - k)
    with pytest.raises(ValueError, match="at least 1"):
        twin_frames(lib, 0)


def test_reference_actions_set_pd_targets_at_the_reference_angles(lib):
    a = reference_actions(lib)
    assert a.shape == (lib.clip_of_frame.numel(), sk.NUM_DOFS) and float(a.abs().max()) <= 1.0
    targets = torch.as_tensor(sk.ACTION_OFFSET).float() + torch.as_tensor(sk.ACTION_SCALE).float() * a
    inside = a.abs() < 1.0
    assert torch.allclose(targets[inside], lib.frames("dof_pos").float()[inside], atol=1e-5)
    assert torch.allclose(reference_mean_action(lib), a.mean(0))


def test_twins_keep_the_reference_history_and_jitter_the_velocities(lib):
    """Frames before the simulated ones are the reference's; the simulated ones stay within a few cm of it
    in position but carry velocity offsets (measured: 0.14 m/s and 0.35 rad/s on average)."""
    twins, g, error = simulated_twins(lib, steps=4)
    _, _, k = twin_frames(lib, 4)
    ref = reference_encoder_inputs(lib)[g].view(-1, HISTORY_LEN, FRAME_DIM)
    tw = twins.view(-1, HISTORY_LEN, FRAME_DIM)
    for i in range(g.numel()):
        kept = HISTORY_LEN - int(k[i])
        assert torch.equal(tw[i, :kept], ref[i, :kept])
    last = (tw[:, -1] - ref[:, -1]).abs()
    assert float(last[:, FRAME_LAYOUT["phase"]].max()) == 0.0  # the clock is the reference's
    assert float(last[:, FRAME_LAYOUT["body_pos"]].mean()) < 0.03
    assert 0.05 < float(last[:, FRAME_LAYOUT["body_lin_vel"]].mean()) < 0.5
    assert 0.1 < float(last[:, FRAME_LAYOUT["body_ang_vel"]].mean()) < 1.0
    assert float(error.max()) < 0.1  # the mean body error the env reports for the twin


def test_twins_simulated_in_batches_match_one_batch(lib, monkeypatch):
    """Memory stays bounded: worlds are simulated WORLDS_PER_BATCH at a time, with the same states."""
    import rgsd_agents.pretraining.sim_twins as st

    whole = simulated_twins(lib, steps=4)
    monkeypatch.setattr(st, "WORLDS_PER_BATCH", 100)  # 439 twins: 5 batches, the last one padded
    batched = simulated_twins(lib, steps=4)
    for a, b in zip(whole, batched, strict=True):
        assert torch.allclose(a, b, atol=1e-5)


def test_the_reward_report_scores_the_twins_against_their_clip(tmp_path, lib):
    """``reward_sharpness.json``'s ``sim_twin`` column is the mean cos(mu(twin), z_m) of each clip's twins."""
    cfg = PretrainConfig(motions="demo", hidden=(32,), batch_size=64, steps=20, eval_every=10)
    result = pretrain(cfg, tmp_path / "enc", progress=False)
    _, inputs = load_reference(cfg)
    twins, g, _ = simulated_twins(lib, steps=4)
    enc = load_encoder(result.encoder_path)
    _, z = alignment_from_embeddings(embed(enc, inputs), lib.clip_of_frame, lib.num_clips)
    per_frame = (embed(enc, twins) * z[lib.clip_of_frame[g]]).sum(-1)
    for m, clip in enumerate(lib.names):
        mine = per_frame[lib.clip_of_frame[g] == m].mean()
        assert result.sharpness["cos"][clip]["sim_twin"] == pytest.approx(float(mine), abs=1e-5)
