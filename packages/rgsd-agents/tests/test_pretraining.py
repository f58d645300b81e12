"""Encoder pretraining: InfoNCE, sampling, training outcome, outputs, CLI and the reward it yields."""

from __future__ import annotations

import argparse
import logging
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn.functional as F
import yaml

import rgsd_envs  # noqa: F401  (registers RGSD-SMPL-v0)
from rgsd_agents.commands import pretrain as pretrain_cmd
from rgsd_agents.pretraining.config import (
    CONFIG_FILE,
    COSINE_PLOT_FILE,
    ENCODER_FILE,
    PLOT_FILE,
    TB_DIR,
    PretrainConfig,
)
from rgsd_agents.pretraining.encoder import build_encoder
from rgsd_agents.pretraining.loop import pretrain
from rgsd_agents.pretraining.loss import info_nce_loss
from rgsd_agents.pretraining.pairs import sample_pairs
from rgsd_agents.pretraining.reference import load_reference, resolve_motions
from rgsd_agents.pretraining.reward_sharpness import SHARPNESS_FILE
from rgsd_agents.pretraining.statistics import STD_FLOOR, alignment_from_embeddings, input_stats
from rgsd_envs.envs.observations import FRAME_DIM, FRAME_LAYOUT, HISTORY_LEN
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.rewards.encoders import embed, load_encoder, read_encoder_file, within_motion_alignment
from rgsd_envs.utils.config import load_yaml
from rgsd_envs.utils.files import LOCK_NAME, InputFileError, folder_lock

KAPPA = 10.0
SMALL = dict(
    motions="demo", hidden=(256, 256), lr=1e-3, batch_size=128, steps=250, target_alignment=None, eval_every=50
)
"""A small encoder that trains in seconds on the 5 demo clips."""


def direct_info_nce(a: torch.Tensor, p: torch.Tensor, clips: list[int], kappa: float) -> float:
    """The paper's InfoNCE written out term by term: negatives are other clips' positives."""
    total = 0.0
    for i in range(len(clips)):
        pos = math.exp(kappa * float(a[i] @ p[i]))
        neg = sum(math.exp(kappa * float(a[i] @ p[j])) for j in range(len(clips)) if clips[j] != clips[i])
        total += -math.log(pos / (pos + neg))
    return total / len(clips)


# -- InfoNCE ------------------------------------------------------------------------
def test_info_nce_of_a_hand_made_case():
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    loss = info_nce_loss(a, a.clone(), torch.tensor([0, 1]), kappa=1.0)
    # each anchor: positive cos 1, one negative cos 0 -> -log(e / (e + 1))
    assert float(loss) == pytest.approx(math.log(1.0 + math.exp(-1.0)), rel=1e-6)


@pytest.mark.parametrize("kappa", [1.0, KAPPA])
def test_info_nce_matches_direct_computation(kappa):
    g = torch.Generator().manual_seed(0)
    a = F.normalize(torch.randn(7, 5, generator=g, dtype=torch.float64), dim=-1)
    p = F.normalize(torch.randn(7, 5, generator=g, dtype=torch.float64), dim=-1)
    clips = [0, 0, 1, 2, 1, 3, 0]
    got = info_nce_loss(a, p, torch.tensor(clips), kappa)
    assert float(got) == pytest.approx(direct_info_nce(a, p, clips, kappa), rel=1e-9)
    sym = info_nce_loss(a, p, torch.tensor(clips), kappa, symmetric=True)
    expected = 0.5 * (direct_info_nce(a, p, clips, kappa) + direct_info_nce(p, a, clips, kappa))
    assert float(sym) == pytest.approx(expected, rel=1e-9)


def test_same_clip_candidates_are_not_negatives():
    e1, e2 = torch.eye(3, dtype=torch.float64)[:2]
    # two pairs per clip, every state of a clip on its clip's direction: the optimum
    emb = torch.stack([e1, e1, e2, e2])
    clips = torch.tensor([0, 0, 1, 1])
    loss = info_nce_loss(emb, emb.clone(), clips, KAPPA)
    # masked: only the other clip's (orthogonal) candidates compete -> log(1 + 2 e^-kappa)
    assert float(loss) == pytest.approx(math.log1p(2 * math.exp(-KAPPA)), rel=1e-5)
    # unmasked, the same-clip twin would count as a negative: loss >= log 2
    unmasked = F.cross_entropy(KAPPA * emb @ emb.T, torch.arange(4))
    assert float(unmasked) > math.log(2.0)
    # a batch of one clip has no negatives at all: the loss is exactly 0
    assert float(info_nce_loss(emb, emb.clone(), torch.zeros(4, dtype=torch.long), KAPPA)) == 0.0


def test_info_nce_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="clip_ids"):
        info_nce_loss(torch.zeros(4, 3), torch.zeros(4, 3), torch.zeros(3, dtype=torch.long), KAPPA)


# -- data ---------------------------------------------------------------------------
def test_pairs_come_from_the_sampled_clip_and_clips_are_uniform():
    lib = MotionLib("demo")
    clips, anchors, positives = sample_pairs(lib, 20000, torch.Generator().manual_seed(1))
    assert torch.equal(lib.clip_of_frame[anchors], clips)
    assert torch.equal(lib.clip_of_frame[positives], clips)
    freq = torch.bincount(clips, minlength=lib.num_clips).float() / clips.numel()
    assert torch.allclose(freq, torch.full_like(freq, 1 / lib.num_clips), atol=0.02)
    assert (anchors != positives).float().mean() > 0.9  # independent draws inside the clip
    # every frame of every clip is drawn, its first and last too, about equally often (~89 draws each)
    counts = torch.bincount(torch.cat((anchors, positives)), minlength=lib.total_frames)
    assert counts.min() > 15 and counts[lib.starts + lib.num_frames - 1].min() > 15


def test_input_std_floors_still_dims_at_a_fraction_of_their_group():
    x = torch.randn(500, HISTORY_LEN * FRAME_DIM, generator=torch.Generator().manual_seed(0))
    still = FRAME_LAYOUT["body_ang_vel"].start + 3  # a dim the reference never moves
    x[:, still::FRAME_DIM] = 0.25
    mean, std = input_stats(x)
    assert torch.allclose(mean, x.mean(0))
    assert std[still] == pytest.approx(STD_FLOOR * float(x.std(0)[FRAME_LAYOUT["body_ang_vel"]].median()), rel=0.05)
    moving = FRAME_LAYOUT["body_lin_vel"].start
    assert std[moving] == pytest.approx(float(x.std(0)[moving]))


# -- training ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A small encoder pretrained on the demo clips, with its initial alignment."""
    cfg = PretrainConfig(**SMALL)
    lib, inputs = load_reference(cfg)
    initial = within_motion_alignment(build_encoder(cfg, inputs), inputs, lib.clip_of_frame, lib.num_clips)
    out = tmp_path_factory.mktemp("pretrain")
    result = pretrain(cfg, out, progress=False)
    return cfg, result, initial, lib, inputs


def test_pretraining_aligns_states_of_a_clip_and_separates_clips(trained):
    cfg, result, initial, lib, inputs = trained
    assert result.steps == cfg.steps and math.isfinite(result.loss)
    assert result.alignment > initial
    assert result.alignment >= 0.99
    # five clips in R^16 can be spread to cos -1/4 (a simplex): far apart
    assert result.separation < 0.0
    enc = load_encoder(result.encoder_path)
    assert within_motion_alignment(enc, inputs, lib.clip_of_frame, lib.num_clips) == pytest.approx(
        result.alignment, abs=1e-6
    )


def test_saved_encoder_carries_clips_and_the_env_accepts_it(trained):
    cfg, result, _, lib, inputs = trained
    payload = read_encoder_file(result.encoder_path)
    assert payload["clip_names"] == lib.names and payload["kappa"] == cfg.kappa
    assert payload["clip_frames"] == lib.num_frames.tolist() and all(type(n) is int for n in payload["clip_frames"])
    assert payload["config"]["hidden"] == list(cfg.hidden)
    enc = load_encoder(result.encoder_path)
    _, z = alignment_from_embeddings(embed(enc, inputs), lib.clip_of_frame, lib.num_clips)
    assert torch.allclose(payload["clip_embeddings"], z, atol=1e-6)
    env = gym.make("RGSD-SMPL-v0", motions="demo", encoder=str(result.encoder_path))
    try:
        core = env.unwrapped.core
        assert core.kappa == cfg.kappa
        assert torch.allclose(core.clip_embeddings, payload["clip_embeddings"], atol=1e-5)
    finally:
        env.close()


def test_reference_states_score_near_max_reward_and_other_clips_clearly_lower(trained):
    cfg, result, _, lib, inputs = trained
    enc = load_encoder(result.encoder_path)
    z = read_encoder_file(result.encoder_path)["clip_embeddings"]
    reward = cfg.kappa + cfg.kappa * embed(enc, inputs) @ z.T  # (F, M): r = C + kappa mu(s)^T z_m, C = kappa
    own = lib.clip_of_frame.unsqueeze(1) == torch.arange(lib.num_clips)
    assert reward[own].mean() > 0.99 * 2 * cfg.kappa
    assert reward[own].min() > 0.9 * 2 * cfg.kappa
    assert reward[~own].max() < 1.5 * cfg.kappa
    assert reward[~own].mean() < 1.0 * cfg.kappa


def test_env_reward_of_tracked_reference_is_near_max_and_low_under_other_clips_skill(trained):
    cfg, result, _, lib, _ = trained
    env = gym.make("RGSD-SMPL-v0", motions="demo", encoder=str(result.encoder_path))
    start, steps = 5, 3
    try:
        z = env.unwrapped.core.clip_embeddings.numpy()
        rewards = np.zeros((lib.num_clips, lib.num_clips, steps))  # [clip of the state, clip of the skill, step]
        for m in range(lib.num_clips):
            ref = lib.frame_state(torch.full((steps,), m), torch.arange(start + 1, start + 1 + steps))
            actions = ((ref.dof_pos.numpy() - sk.ACTION_OFFSET) / sk.ACTION_SCALE).astype(np.float32)
            for o in range(lib.num_clips):
                env.reset(seed=0, options={"clip": m, "start_frame": start, "task": "imitation", "skill": z[o]})
                for k in range(steps):  # PD targets that track the reference
                    _, r, term, trunc, info = env.step(actions[k])
                    assert not (term or trunc)
                    assert r == pytest.approx(info["encoder_reward"])
                    rewards[m, o, k] = r
    finally:
        env.close()
    own = rewards[np.arange(lib.num_clips), np.arange(lib.num_clips)]  # (M, steps)
    other = rewards[~np.eye(lib.num_clips, dtype=bool)]  # (M (M-1), steps)
    # open-loop PD tracking drifts off the reference, so the reward may sag a little over the steps
    assert own[:, 0].min() > 0.95 * 2 * cfg.kappa, own
    assert own.min() > 0.9 * 2 * cfg.kappa, own
    assert other.max() < 1.3 * cfg.kappa, other
    assert other.mean() < 1.0 * cfg.kappa


def test_pretraining_is_deterministic_for_a_seed(tmp_path):
    cfg = PretrainConfig(motions="demo", hidden=(32,), steps=12, eval_every=4, seed=5)
    a = pretrain(cfg, tmp_path / "a", progress=False)
    b = pretrain(cfg, tmp_path / "b", progress=False)
    c = pretrain(PretrainConfig(**{**vars(cfg), "seed": 6}), tmp_path / "c", progress=False)
    sa, sb, sc = (read_encoder_file(r.encoder_path)["state_dict"] for r in (a, b, c))
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert a.alignment == b.alignment and a.loss == b.loss
    assert not torch.equal(sa["net.0.weight"], sc["net.0.weight"])


def test_a_pretraining_into_the_same_folder_again_writes_its_curves_alone(tmp_path):
    """TensorBoard would draw both pretrainings' curves over each other: the earlier one's event files go."""
    cfg = PretrainConfig(motions="demo", hidden=(32,), steps=2, eval_every=1, seed=5, target_alignment=None)
    pretrain(cfg, tmp_path, progress=False)
    first = sorted((tmp_path / TB_DIR).glob("events.out.tfevents.*"))
    pretrain(cfg, tmp_path, progress=False)
    again = sorted((tmp_path / TB_DIR).glob("events.out.tfevents.*"))
    assert len(first) == len(again) == 1 and first != again


def _folder(folder):
    """Every file under ``folder`` (hidden ones too) and its bytes; not the lock, which names the last command that
    held the folder."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != LOCK_NAME
    }


def test_a_pretraining_stopped_after_its_encoder_leaves_the_earlier_one_whole(tmp_path, monkeypatch):
    """A stop while the new encoder's figures are drawn: the earlier encoder stays with its own figures, report and
    curves, none of the new pretraining's files beside them."""
    import rgsd_agents.pretraining.loop as loop

    cfg = PretrainConfig(motions="demo", hidden=(32,), steps=2, eval_every=1, seed=5, target_alignment=None)
    out = tmp_path / "enc"
    pretrain(cfg, out, progress=False)
    before = _folder(out)
    assert {PLOT_FILE, COSINE_PLOT_FILE, SHARPNESS_FILE, CONFIG_FILE, ENCODER_FILE} <= before.keys()

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(loop, "_draw_figures", stopped)
    with pytest.raises(KeyboardInterrupt):
        pretrain(PretrainConfig(**{**vars(cfg), "hidden": (16,)}), out, progress=False)
    assert _folder(out) == before and [p.name for p in tmp_path.iterdir()] == ["enc"]
    assert list(read_encoder_file(out / ENCODER_FILE)["hidden"]) == [32]


def _one_pretraining(folder) -> tuple[list[int], list[int], list[str]]:
    """The hidden sizes encoder.pt and pretrain.yaml name, and the curves' event files."""
    encoder = list(read_encoder_file(folder / ENCODER_FILE)["hidden"])
    config = yaml.safe_load((folder / CONFIG_FILE).read_text())["hidden"]
    return encoder, config, sorted(p.name for p in (folder / TB_DIR).glob("events.out.tfevents.*"))


def test_a_stop_while_the_outputs_are_put_in_place_leaves_the_earlier_set_or_the_new_one(tmp_path, monkeypatch):
    """A stop between the renames that put the new outputs in place (the earlier ones moved aside, the new ones not
    yet in): the folder holds the earlier encoder with its own curves, never the new encoder with the earlier curves."""
    import os

    cfg = PretrainConfig(motions="demo", hidden=(32,), steps=2, eval_every=1, seed=5, target_alignment=None)
    out = tmp_path / "enc"
    pretrain(cfg, out, progress=False)
    before = _folder(out)
    earlier = _one_pretraining(out)
    assert earlier[:2] == ([32], [32]) and len(earlier[2]) == 1
    rename, renames = os.rename, []

    def stopped_before_the_new_outputs(src, dst):
        renames.append((str(src), str(dst)))
        if len(renames) == 2:
            raise KeyboardInterrupt
        return rename(src, dst)

    monkeypatch.setattr(os, "rename", stopped_before_the_new_outputs)
    again = PretrainConfig(**{**vars(cfg), "hidden": (16,)})
    with pytest.raises(KeyboardInterrupt):
        pretrain(again, out, progress=False)
    monkeypatch.undo()
    assert _folder(out) == before and _one_pretraining(out) == earlier
    assert len(renames) >= 2 and renames[1][1] == str(out)  # the stage's rename onto the folder was the one stopped
    assert [p.name for p in tmp_path.iterdir()] == ["enc"]  # no stage or earlier set left beside it
    pretrain(again, out, progress=False)
    new = _one_pretraining(out)
    assert new[:2] == ([16], [16]) and len(new[2]) == 1 and new[2] != earlier[2]
    assert {PLOT_FILE, COSINE_PLOT_FILE, SHARPNESS_FILE} <= {p.name for p in out.iterdir()}


def test_a_pretraining_refuses_a_folder_holding_files_it_did_not_write(tmp_path):
    """It replaces its folder whole: a file of the user's there would go with the earlier pretraining."""
    out = tmp_path / "enc"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    cfg = PretrainConfig(motions="demo", hidden=(16,), steps=2, eval_every=1, target_alignment=None)
    with pytest.raises(InputFileError) as err:
        pretrain(cfg, out, progress=False)
    assert str(err.value) == (
        f"{out}: holds notes.txt, which a pretraining does not write and would delete (it replaces its folder "
        "whole); pretrain into a new or empty folder, or one that holds only an earlier pretraining"
    )
    assert [p.name for p in out.iterdir()] == ["notes.txt"] and [p.name for p in tmp_path.iterdir()] == ["enc"]


def test_rgsd_pretrain_into_a_folder_another_command_holds_is_refused(tmp_path, capsys):
    from rgsd_agents.cli import main as rgsd

    out = tmp_path / "enc"
    with folder_lock(out, "rgsd pretrain"):
        code = rgsd(["pretrain", "--motions", "demo", "--out", str(out), "--steps", "2", "--hidden", "16"])
        assert code == 2
    assert f"error: {out}: in use by pid " in capsys.readouterr().err
    assert not out.exists()  # nothing written; the lock went with the folder it made


def test_an_interrupted_pretraining_leaves_the_earlier_one_in_its_folder_as_it_was(tmp_path, monkeypatch):
    """encoder.pt, pretrain.yaml and tb/ belong together: none of them is replaced before the new encoder is saved."""
    import rgsd_agents.pretraining.loop as loop

    cfg = PretrainConfig(motions="demo", hidden=(32,), steps=2, eval_every=1, seed=5, target_alignment=None)
    pretrain(cfg, tmp_path, progress=False)
    before = _folder(tmp_path)
    assert {CONFIG_FILE, "encoder.pt"} <= before.keys() and any(k.startswith(f"{TB_DIR}/events.") for k in before)
    train_step = loop.train_step
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return train_step(*args, **kwargs)

    monkeypatch.setattr(loop, "train_step", interrupted)
    again = PretrainConfig(motions="demo", hidden=(64, 64), steps=100, eval_every=1, kappa=5.0, target_alignment=None)
    with pytest.raises(KeyboardInterrupt):
        pretrain(again, tmp_path, progress=False)
    assert len(calls) == 3 and _folder(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({k.split("/")[0] for k in before})
    calls.clear()
    with pytest.raises(KeyboardInterrupt):  # a new folder: nothing stays
        pretrain(again, tmp_path / "new", progress=False)
    assert not (tmp_path / "new").exists()


def test_ctrl_c_during_rgsd_pretrain_exits_130_and_leaves_the_earlier_pretraining(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "pre"
    command = [sys.executable, "-m", "rgsd_agents.cli", "pretrain", "--motions", "demo", "--out", str(out)]
    first = subprocess.run([*command, "--steps", "3", "--hidden", "32", "--no-progress"], capture_output=True)
    assert first.returncode == 0, first.stderr
    before = _folder(out)
    slow = [*command, "--steps", "100000", "--hidden", "64", "64", "--kappa", "5", "--target-alignment", "-1"]
    # a test worker may run with SIGINT ignored (pytest-xdist's do), which a child would inherit: Ctrl-C's default
    child = subprocess.Popen(
        [*slow, "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=os.environ,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    started = lambda: list(tmp_path.glob(f".{out.name}.*.partial/{TB_DIR}/events.out.tfevents.*"))  # noqa: E731
    while not started() and time.monotonic() < deadline:
        time.sleep(0.2)  # training has started once its curves have a file (in the stage beside the folder)
    assert started(), "the pretraining wrote no curves in 120 s"
    time.sleep(1.0)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 130, err
    assert _folder(out) == before and [p.name for p in tmp_path.iterdir()] == [out.name]
    assert yaml.safe_load((out / CONFIG_FILE).read_text())["hidden"] == [32]


def test_early_stop_at_the_target_alignment(tmp_path):
    cfg = PretrainConfig(motions="demo", hidden=(64,), lr=1e-3, steps=400, eval_every=5, target_alignment=0.97)
    r = pretrain(cfg, tmp_path, progress=False)
    assert r.reached_target and r.alignment >= 0.97
    assert r.steps < cfg.steps and r.steps % cfg.eval_every == 0


def test_a_target_the_untrained_encoder_meets_is_said_in_a_warning(tmp_path, caplog):
    """Random weights map every state near one direction, so a low target is met before any step: the encoder
    saved is untrained, and a warning says so."""
    cfg = PretrainConfig(motions="demo", hidden=(32,), steps=50, eval_every=5, target_alignment=0.1)
    with caplog.at_level(logging.WARNING, logger="rgsd_agents.pretraining.loop"):
        r = pretrain(cfg, tmp_path, progress=False)
    assert r.steps == 0 and r.reached_target
    said = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.WARNING]
    assert len(said) == 1 and "met by the untrained encoder" in said[0] and "no step taken" in said[0]


# -- command line ----------------------------------------------------------------------
def rgsd_pretrain(argv: list[str]) -> int:
    """Run ``rgsd pretrain ARGV`` through its subcommand module."""
    parser = argparse.ArgumentParser(prog="rgsd")
    pretrain_cmd.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["pretrain", *argv])
    return args.func(args)


def test_cli_writes_encoder_plot_tensorboard_and_config(tmp_path, capsys):
    out = tmp_path / "run"
    cfg_file = tmp_path / "pretrain.yaml"
    cfg_file.write_text(yaml.safe_dump({"kappa": 8.0, "batch_size": 64, "eval_every": 2}))
    argv = ["--motions", "demo", "--out", str(out), "--config", str(cfg_file), "--steps", "6", "--hidden", "32", "16"]
    assert rgsd_pretrain([*argv, "--seed", "3", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "alignment" in printed and str(out / ENCODER_FILE) in printed
    assert load_encoder(out / ENCODER_FILE).hidden == (32, 16)
    assert (out / PLOT_FILE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / COSINE_PLOT_FILE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    events = list((out / TB_DIR).glob("events.out.tfevents.*"))
    assert events, "no TensorBoard event file"
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(out / TB_DIR))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    for tag in ("losses/infonce", "charts/alignment", "charts/nearest_other_clip_cos", "charts/steps_per_second"):
        assert tag in tags
    saved = load_yaml(PretrainConfig, out / CONFIG_FILE)
    assert (saved.kappa, saved.batch_size, saved.steps, saved.seed, saved.hidden) == (8.0, 64, 6, 3, (32, 16))
    assert "sim_twin" in printed  # the sharpness table's column
    assert f"cosines:    {out / COSINE_PLOT_FILE}" in printed


def test_missing_motions_folder_is_a_clear_error(tmp_path):
    missing = tmp_path / "no_such_clips"
    with pytest.raises(InputFileError, match=r"no_such_clips.*'motions'.*no such motion"):
        rgsd_pretrain(["--motions", str(missing), "--out", str(tmp_path / "run"), "--no-progress"])
    assert not (tmp_path / "run" / ENCODER_FILE).exists()


def test_unknown_config_key_is_a_clear_error(tmp_path):
    cfg_file = tmp_path / "bad.yaml"
    cfg_file.write_text("learning_rate: 0.1\n")
    with pytest.raises(InputFileError, match=r"bad.yaml.*'learning_rate'.*unknown key"):
        rgsd_pretrain(["--config", str(cfg_file), "--out", str(tmp_path / "run")])


def test_bad_values_and_single_clip_are_clear_errors(tmp_path, capsys, demo_clips):
    with pytest.raises(ValueError, match="lr"):
        PretrainConfig(lr=-1.0)
    one = tmp_path / "one"
    one.mkdir()
    demo_clips[0].save(one / "walk.npz")
    assert rgsd_pretrain(["--motions", str(one), "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    assert "at least 2 reference clips" in capsys.readouterr().err


def test_motion_paths_are_recorded_absolute(tmp_path, monkeypatch):
    (tmp_path / "clips").mkdir()
    monkeypatch.chdir(tmp_path)
    assert resolve_motions("demo") == "demo"
    assert resolve_motions(["demo", "clips"]) == ["demo", str(tmp_path.resolve() / "clips")]
    with pytest.raises(InputFileError, match="'motions'"):
        resolve_motions(["demo", "missing"])
    with pytest.raises(InputFileError, match="no reference motions"):
        resolve_motions([])


def test_paper_preset_is_the_papers_schedule():
    cfg = PretrainConfig.paper()
    assert (cfg.hidden, cfg.batch_size, cfg.lr, cfg.steps, cfg.kappa) == (
        (1024, 1024, 1024, 512),
        256,
        1e-4,
        3000,
        10.0,
    )
    assert cfg.target_alignment is None and not cfg.symmetric
