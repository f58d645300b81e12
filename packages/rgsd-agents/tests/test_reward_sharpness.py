"""Hard negatives and the reward-sharpness report: the states they build, the loss, and what they change."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

from rgsd_agents.cli import build_parser
from rgsd_agents.commands import pretrain as pretrain_cmd
from rgsd_agents.pretraining.config import PretrainConfig
from rgsd_agents.pretraining.loop import pretrain
from rgsd_agents.pretraining.loss import info_nce_loss
from rgsd_agents.pretraining.negatives import (
    LEG_LAG,
    SINK_STEP,
    VARIANTS,
    frame_features_of,
    hard_negative_inputs,
    variant_stacks,
)
from rgsd_agents.pretraining.reward_sharpness import (
    COLUMNS,
    SHARPNESS_FILE,
    format_table,
    other_clips_cos,
    reward_sharpness,
    tensorboard_scalars,
    write_report,
)
from rgsd_envs.envs.observations import (
    FRAME_DIM,
    FRAME_LAYOUT,
    HISTORY_LEN,
    body_columns,
    reference_encoder_inputs,
)
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.rewards.encoders import MLPEncoder

TINY = dict(motions="demo", hidden=(128, 128), lr=1e-3, batch_size=64, steps=150, target_alignment=None, eval_every=50)
"""Trains in a few seconds on the 5 demo clips."""
VEL = slice(FRAME_LAYOUT["body_lin_vel"].start, FRAME_LAYOUT["body_ang_vel"].stop)
PHASE = FRAME_LAYOUT["phase"]


@pytest.fixture(scope="module")
def lib_inputs():
    lib = MotionLib("demo")
    return lib, reference_encoder_inputs(lib)


@pytest.fixture(scope="module")
def sharpness_of():
    """Mean cosines of the reward-sharpness report after a tiny pretraining, per kind of negatives."""
    cache = {}

    def get(negatives: str, tmp_path_factory) -> dict:
        if negatives not in cache:
            out = tmp_path_factory.mktemp(negatives)
            cfg = PretrainConfig(**TINY, negatives=negatives)
            result = pretrain(cfg, out, progress=False)
            cache[negatives] = (result, json.loads((out / SHARPNESS_FILE).read_text()))
        return cache[negatives]

    return get


def test_negative_states_are_held_still_phase_shifted_and_reversed(lib_inputs):
    lib, inputs = lib_inputs
    feats = frame_features_of(inputs)
    t = int(lib.starts[0]) + 20  # inside the walk, past its first 4 frames
    frames, starts = torch.tensor([t]), lib.starts[:1]
    ref = inputs[t].reshape(HISTORY_LEN, FRAME_DIM)
    still, start, shifted, rev = variant_stacks(
        feats, frames, starts, ("held_still", "start_held", "phase_shift", "reversed")
    )[0]
    still, start = still.reshape(HISTORY_LEN, FRAME_DIM), start.reshape(HISTORY_LEN, FRAME_DIM)
    assert torch.all(still[:, VEL] == 0) and torch.all(start[:, VEL] == 0)
    assert torch.equal(still[:, PHASE], ref[:, PHASE])  # the phase keeps advancing
    assert float(ref[-1, 0] - ref[0, 0]) == pytest.approx(4 / (int(lib.num_frames[0]) - 1), rel=1e-5)
    assert torch.equal(still[:, 2:215], feats[t, 2:215].expand(HISTORY_LEN, -1))  # frame t's pose in every slot
    assert torch.equal(start[:, 2:215], feats[int(lib.starts[0]), 2:215].expand(HISTORY_LEN, -1))
    shifted = shifted.reshape(HISTORY_LEN, FRAME_DIM)
    assert torch.allclose(shifted[:, 0], torch.remainder(ref[:, 0] + 0.5, 1.0))
    assert torch.equal(shifted[:, 1:], ref[:, 1:])
    assert torch.equal(rev.reshape(HISTORY_LEN, FRAME_DIM), ref.flip(0))
    assert hard_negative_inputs(feats, frames.repeat(3), starts.repeat(3)).shape == (3, 3, HISTORY_LEN * FRAME_DIM)


def test_slowed_stacks_hold_earlier_poses_slower_velocities_and_the_reference_phase(lib_inputs):
    from rgsd_agents.pretraining.negatives import SLOW_FACTOR

    lib, inputs = lib_inputs
    feats = frame_features_of(inputs)
    s0 = int(lib.starts[0])
    frames, starts = torch.tensor([s0 + 20, s0 + 2]), lib.starts[:1].repeat(2)
    slow = variant_stacks(feats, frames, starts, ("slowed",))[:, 0].reshape(2, HISTORY_LEN, FRAME_DIM)
    ref = inputs[frames].reshape(2, HISTORY_LEN, FRAME_DIM)
    assert SLOW_FACTOR == 0.7
    for k, local in enumerate(range(16, 21)):  # slot k of frame 20 holds local frame round(0.7 x (16 + k))
        src = s0 + round(0.7 * local)
        assert torch.equal(slow[0, k, 1:215], feats[src, 1:215])
        assert torch.allclose(slow[0, k, VEL], 0.7 * feats[src, VEL])
    assert torch.equal(slow[:, :, PHASE], ref[:, :, PHASE])  # the clip's clock runs on
    assert torch.equal(slow[1, :3, 1:215], feats[s0, 1:215].expand(3, -1))  # clamped at the clip's start


def test_legs_held_stacks_freeze_the_legs_to_the_pelvis_and_keep_the_rest_of_the_reference(lib_inputs):
    lib, inputs = lib_inputs
    feats = frame_features_of(inputs)
    s0 = int(lib.starts[3])  # the backward walk
    frames, starts = torch.tensor([s0 + 30, s0 + 3]), lib.starts[3:4].repeat(2)
    held = variant_stacks(feats, frames, starts, ("legs_held",))[:, 0].reshape(2, HISTORY_LEN, FRAME_DIM)
    ref = inputs[frames].reshape(2, HISTORY_LEN, FRAME_DIM)
    legs = sk.LEG_BODY_IDS
    assert [sk.BODY_NAMES[b] for b in legs] == [
        "L_Hip",
        "R_Hip",
        "L_Knee",
        "R_Knee",
        "L_Ankle",
        "R_Ankle",
        "L_Toe",
        "R_Toe",
    ]
    pose = torch.cat((body_columns(legs, "body_pos"), body_columns(legs, "body_rot")))
    vel = torch.cat((body_columns(legs, "body_lin_vel"), body_columns(legs, "body_ang_vel")))
    assert len(pose) == 8 * 3 + 8 * 6 and len(vel) == 8 * 6
    assert torch.equal(held[0][:, pose], feats[s0 + 30 - LEG_LAG, pose].expand(HISTORY_LEN, -1))  # an earlier pose
    assert torch.equal(held[1][:, pose], feats[s0, pose].expand(HISTORY_LEN, -1))  # clamped at the clip's start
    for k in range(8):  # each leg body moves with the pelvis
        lin, ang = body_columns([legs[k]], "body_lin_vel"), body_columns([legs[k]], "body_ang_vel")
        assert torch.equal(held[:, :, lin], ref[:, :, body_columns([0], "body_lin_vel")])
        assert torch.equal(held[:, :, ang], ref[:, :, body_columns([0], "body_ang_vel")])
    rest = torch.ones(FRAME_DIM, dtype=torch.bool)
    rest[torch.cat((pose, vel))] = False
    assert torch.equal(held[:, :, rest], ref[:, :, rest])  # phase, trunk and arms as in the clip
    assert not torch.equal(held[0][:, pose], ref[0][:, pose])


def test_sinking_stacks_lower_the_pelvis_slot_by_slot_and_keep_the_rest(lib_inputs):
    lib, inputs = lib_inputs
    feats = frame_features_of(inputs)
    frames, starts = lib.starts + 20, lib.starts
    sunk = variant_stacks(feats, frames, starts, ("sinking",))[:, 0].reshape(-1, HISTORY_LEN, FRAME_DIM)
    ref = inputs[frames].reshape(-1, HISTORY_LEN, FRAME_DIM)
    height = FRAME_LAYOUT["root_height"].start
    drop = ref[:, :, height] - sunk[:, :, height]
    assert torch.allclose(drop, SINK_STEP * torch.arange(1.0, HISTORY_LEN + 1).expand_as(drop), atol=1e-6)
    rest = torch.ones(FRAME_DIM, dtype=torch.bool)
    rest[height] = False
    assert torch.equal(sunk[:, :, rest], ref[:, :, rest])  # the pose, relative to the pelvis, goes on


def test_body_columns_follow_the_frame_layout():
    assert body_columns([1], "body_pos").tolist() == [2, 3, 4]
    assert body_columns([0, 2], "body_rot").tolist() == [*range(71, 77), *range(83, 89)]
    assert body_columns([23], "body_ang_vel").tolist() == [356, 357, 358]
    with pytest.raises(ValueError, match="root"):
        body_columns([0], "body_pos")
    with pytest.raises(ValueError, match="part"):
        body_columns([1], "phase")


def test_info_nce_with_hard_negatives_adds_them_to_each_anchors_denominator():
    g = torch.Generator().manual_seed(0)
    a, p = (F.normalize(torch.randn(3, 4, generator=g), dim=-1) for _ in range(2))
    hard = F.normalize(torch.randn(3, 2, 4, generator=g), dim=-1)
    clips, kappa = [0, 1, 1], 2.0
    total = 0.0
    for i in range(3):
        pos = math.exp(kappa * float(a[i] @ p[i]))
        neg = sum(math.exp(kappa * float(a[i] @ p[j])) for j in range(3) if clips[j] != clips[i])
        neg += sum(math.exp(kappa * float(a[i] @ h)) for h in hard[i])
        total += -math.log(pos / (pos + neg))
    got = info_nce_loss(a, p, torch.tensor(clips), kappa, hard=hard)
    assert float(got) == pytest.approx(total / 3, rel=1e-5)
    assert float(got) > float(info_nce_loss(a, p, torch.tensor(clips), kappa))


def test_sharpness_report_scores_reference_and_other_clips_against_z_m(lib_inputs):
    lib, inputs = lib_inputs
    torch.manual_seed(0)
    enc = MLPEncoder((32,), kappa=5.0)
    enc.set_input_stats(inputs.mean(0), inputs.std(0).clamp_min(1e-3))
    report = reward_sharpness(enc, lib, kappa=5.0, inputs=inputs)
    with torch.no_grad():
        e = enc(inputs)
    cof = lib.clip_of_frame
    z = F.normalize(torch.stack([e[cof == m].sum(0) for m in range(lib.num_clips)]), dim=-1)
    walk, run = lib.names[0], lib.names[1]
    assert report["cos"][walk]["reference"] == pytest.approx(float((e[cof == 0] @ z[0]).mean()), abs=1e-5)
    assert report["cos"][run]["other_clips"] == pytest.approx(float((e[cof != 1] @ z[1]).mean()), abs=1e-5)
    assert report["mean_reward"]["reference"] == pytest.approx(5.0 + 5.0 * report["mean_cos"]["reference"])
    assert report["columns"] == list(COLUMNS) and report["frames_scored"] == lib.total_frames
    assert "demo_walk" in format_table(report)
    assert len(tensorboard_scalars(report)) == len(COLUMNS) * (1 + lib.num_clips)


def _other_clips_by_matrix(e: torch.Tensor, cof: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """The other-clip mean from every reference state's cosine to every clip (frames x clips)."""
    m = z.shape[0]
    all_cos = e @ z.T
    own = torch.zeros(m, m, dtype=all_cos.dtype).index_add_(0, cof, all_cos).diagonal()
    counts = torch.bincount(cof, minlength=m).to(e.dtype)
    return (all_cos.sum(0) - own) / (counts.sum() - counts)


def test_the_other_clip_mean_is_the_frames_by_clips_formula_without_its_matrix():
    g = torch.Generator().manual_seed(0)
    frames, clips = 20000, 400  # a frames x clips float32 matrix: 32 MB
    cof = torch.sort(torch.randint(0, clips, (frames,), generator=g)).values
    e = F.normalize(torch.randn(frames, 16, generator=g), dim=-1)
    z = F.normalize(torch.randn(clips, 16, generator=g), dim=-1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        out = other_clips_cos(e, cof, z)
    assert max(ev.cpu_memory_usage for ev in prof.events()) <= frames * 16 * 8  # at most one float64 copy of e
    torch.testing.assert_close(out, _other_clips_by_matrix(e, cof, z), atol=1e-6, rtol=1e-5)
    assert torch.isnan(other_clips_cos(e[:5], torch.zeros(5, dtype=torch.long), z[:1])).all()  # one clip: no others


def test_hard_negatives_make_the_reward_fall_off_the_reference(sharpness_of, tmp_path_factory):
    _, plain = sharpness_of("infonce", tmp_path_factory)
    hard_result, hard = sharpness_of("hard", tmp_path_factory)
    p, h = plain["mean_cos"], hard["mean_cos"]
    # measured: held still 0.971 -> 0.401, reversed 0.991 -> 0.583; reference 0.991 -> 0.974
    assert p["held_still"] > 0.9 and h["held_still"] < p["held_still"] - 0.3
    assert p["reversed"] > 0.9 and h["reversed"] < p["reversed"] - 0.2
    assert h["reference"] > 0.9 and h["reference"] > h["held_still"] + 0.4
    assert h["other_clips"] < 0.0
    assert hard_result.sharpness == hard and not hard_result.reached_target


def test_hard_negatives_refuse_an_alignment_early_stop_and_the_cli_drops_it():
    with pytest.raises(ValueError, match="target_alignment: null"):
        PretrainConfig(negatives="hard")
    with pytest.raises(ValueError, match="negatives"):
        PretrainConfig(negatives="semi-hard", target_alignment=None)
    args = build_parser().parse_args(["pretrain", "--out", "x", "--negatives", "hard"])
    cfg = pretrain_cmd.config_from_args(args)
    assert cfg.negatives == "hard" and cfg.target_alignment is None


def _refuse_nan(constant: str) -> float:
    raise ValueError(f"{constant} is not JSON")


def test_columns_without_a_scored_state_are_null_in_strict_json(lib_inputs, tmp_path):
    """Frames spaced past a clip's length leave it unscored: null in the file (NaN is not JSON), no TensorBoard tag."""
    lib, inputs = lib_inputs
    torch.manual_seed(0)
    enc = MLPEncoder((32,), kappa=5.0)
    enc.set_input_stats(inputs.mean(0), inputs.std(0).clamp_min(1e-3))
    report = reward_sharpness(enc, lib, kappa=5.0, inputs=inputs, max_frames=2, max_twins=50)
    path = write_report(report, tmp_path / SHARPNESS_FILE)
    loaded = json.loads(path.read_text(), parse_constant=_refuse_nan)
    unscored = [(n, c) for n, row in loaded["cos"].items() for c, v in row.items() if v is None]
    assert len(unscored) >= 3 * len(VARIANTS) and all(c in VARIANTS for _, c in unscored)
    assert all(isinstance(v, float) for v in loaded["mean_cos"].values())  # over the clips with a number
    assert loaded == report
    tags = tensorboard_scalars(loaded)
    assert len(tags) == len(COLUMNS) * (1 + lib.num_clips) - len(unscored)
    assert all(math.isfinite(v) for v in tags.values())
    name, column = unscored[0]
    assert f"reward_sharpness_clips/{name}_{column}_cos" not in tags
    assert "-" in format_table(loaded) and "nan" not in format_table(loaded)


def test_a_report_holding_nan_is_written_with_null(tmp_path):
    report = {"cos": {"a": {"reference": math.nan, "held_still": 0.5}}, "mean_cos": {"reference": math.inf}}
    text = write_report(report, tmp_path / SHARPNESS_FILE).read_text()
    assert json.loads(text, parse_constant=_refuse_nan) == {
        "cos": {"a": {"reference": None, "held_still": 0.5}},
        "mean_cos": {"reference": None},
    }
