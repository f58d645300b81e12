"""Every command past the 16 skill dimensions: 17, 20 and 100 generated clips (``rgsd-motions demo --variants``).

With more clips than skill dimensions the clips' directions are optimised rather than orthonormal; the commands
build them under ``torch.no_grad()``. Tiny budgets: this checks that each command runs and writes its files.
"""

from __future__ import annotations

import json
import logging

import pytest

from rgsd_agents.cli import main as rgsd
from rgsd_agents.methods import METHODS
from rgsd_agents.testing import tiny_options
from rgsd_envs.motion.cli import main as rgsd_motions

pytestmark = pytest.mark.slow

TINY_TRAIN = [
    "num_envs=4", "horizon=8", "iterations=1", "probe_every=0", "checkpoint_every=1", "max_minutes=null",
    "networks.actor_hidden=[16]", "networks.critic_hidden=[16]", "ppo.minibatch_size=16",
    "pretrain.hidden=[16]", "pretrain.steps=3", "pretrain.batch_size=16", "pretrain.target_alignment=null",
]  # fmt: skip
"""Every training preset cut to one iteration of 4 worlds (the method's own sizes are ``TINY_OPTIONS``)."""
TINY_DOWNSTREAM = [
    "iterations=2", "num_envs=4", "horizon=4", "eval_episodes=2", "eval_every=2", "checkpoint_every=2",
    "task.episode_seconds=1.0", "networks.actor_hidden=[16]", "networks.critic_hidden=[16]", "ppo.minibatch_size=8",
]  # fmt: skip
FEW_ROLLOUTS = ["--rollouts", "2", "--best-of", "2", "--trajectory-rollouts", "2", "--no-video", "--no-progress"]
SMALL_REPRODUCE = [
    "downstream.styles=[sidestep]", "downstream.style_start=[]",
    "eval.settings.rollouts=2", "eval.settings.best_of=2", "eval.settings.trajectory_rollouts=2",
]  # fmt: skip
"""The smoke scale cut further with ``--set``: one downstream style, 2 rollouts per clip."""


def _sets(items: list[str]) -> list[str]:
    return [a for kv in items for a in ("--set", kv)]


def _variants(folder, count: int) -> str:
    assert rgsd_motions(["demo", "--variants", str(count), "--out", str(folder)]) == 0
    assert len(list(folder.glob("*.npz"))) == count
    return str(folder)


@pytest.fixture(scope="module")
def clips17(tmp_path_factory) -> str:
    return _variants(tmp_path_factory.mktemp("clips") / "c17", 17)


@pytest.fixture(scope="module")
def rgsd_run(clips17, tmp_path_factory):
    """``rgsd train --config rgsd`` on the 17 clips, pretraining its own encoder first."""
    out = tmp_path_factory.mktemp("runs") / "rgsd"
    method = [f"method.options.{k}={json.dumps(v)}" for k, v in tiny_options("rgsd").items()]
    args = ["train", "--config", "rgsd", "--out", str(out), "--device", "cpu", "--no-progress"]
    assert rgsd([*args, *_sets([*TINY_TRAIN, f"env.motions={clips17}", *method])]) == 0
    return out


def test_pretrain_on_17_clips(clips17, tmp_path, capsys):
    out = tmp_path / "enc"
    args = ["pretrain", "--motions", clips17, "--out", str(out), "--steps", "3", "--hidden", "16", "--no-progress"]
    assert rgsd([*args, "--batch-size", "16", "--set", "eval_every=3", "--set", "target_alignment=null"]) == 0
    assert "on 17 clips" in capsys.readouterr().out
    sharpness = json.loads((out / "reward_sharpness.json").read_text())
    assert len(sharpness["cos"]) == 17  # a row per clip
    assert (out / "encoder.pt").is_file()


@pytest.mark.parametrize("method", [m for m in METHODS if m != "rgsd"])
def test_train_every_other_method_on_17_clips(method, clips17, tmp_path):
    import dataclasses

    from rgsd_agents.methods import method_config

    known = {f.name for f in dataclasses.fields(type(method_config(method, {})))}
    options = [f"method.options.{k}={json.dumps(v)}" for k, v in tiny_options(method).items() if k in known]
    out = tmp_path / method
    args = ["train", "--config", method, "--out", str(out), "--device", "cpu", "--no-progress"]
    assert rgsd([*args, *_sets([*TINY_TRAIN, f"env.motions={clips17}", *options])]) == 0
    assert (out / "policy.pt").is_file()


def test_train_rgsd_on_17_clips(rgsd_run):
    for name in ("policy.pt", "encoder.pt", "config.yaml", "pretrain/reward_sharpness.json"):
        assert (rgsd_run / name).is_file(), name


@pytest.mark.parametrize("protocol", ["quick", "paper"])
def test_eval_on_17_clips(protocol, rgsd_run, tmp_path, caplog):
    out = tmp_path / protocol
    args = ["eval", "--run", str(rgsd_run), "--out", str(out), "--protocol", protocol, *FEW_ROLLOUTS]
    with caplog.at_level(logging.INFO, logger="rgsd_eval.pipeline"):
        assert rgsd([*args, "--kappas", "50", "--set", "sweep_clips=2", "--set", "batch_size=64"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert (out / "report.md").is_file() and metrics
    # the time estimate comes before the rollouts: 17 clips x 2 rollouts x (imitation + kappa 50) in batches of 64
    estimate = [r.getMessage() for r in caplog.records if "world steps" in r.getMessage()]
    assert estimate and f"{protocol} protocol on 17 clips" in estimate[0], estimate
    imitation = 2 if protocol == "paper" else 1
    assert f"{17 * (imitation + 2)} rollouts" in estimate[0]


def test_downstream_on_17_clips(rgsd_run, tmp_path):
    out = tmp_path / "goal"
    args = ["downstream", "--low-level", str(rgsd_run), "--style", "sidestep", "--out", str(out), "--no-progress"]
    assert rgsd([*args, *_sets(TINY_DOWNSTREAM)]) == 0
    assert (out / "policy.pt").is_file() and (out / "report.md").is_file()


def test_play_on_17_clips(rgsd_run, tmp_path):
    out = tmp_path / "play.mp4"
    args = ["play", str(rgsd_run), "--clip", "punch_v02", "--frames", "3", "--size", "64", "48", "--out", str(out)]
    assert rgsd(args) == 0
    assert out.stat().st_size > 0


def test_reproduce_smoke_on_20_clips_writes_its_report(tmp_path):
    clips = _variants(tmp_path / "c20", 20)
    out = tmp_path / "repro"
    args = ["reproduce", "--motions", clips, "--out", str(out), "--scale", "smoke", "--methods", "rgsd"]
    assert rgsd([*args, "--seeds", "1", "--no-progress", *_sets(SMALL_REPRODUCE)]) == 0
    report = (out / "report.md").read_text()
    for heading in ("## Table 1", "## Discovered skills", "## Downstream"):
        assert heading in report, heading


@pytest.fixture(scope="module")
def clips100(tmp_path_factory) -> str:
    return _variants(tmp_path_factory.mktemp("clips") / "c100", 100)


def test_100_clips_build_an_env_and_pretrain(clips100, tmp_path, capsys):
    import gymnasium as gym
    import torch

    clips = clips100
    with torch.no_grad():
        env = gym.make("rgsd_envs:RGSD-SMPL-v0", motions=clips)
        env.reset(seed=0)
        env.step(env.action_space.sample())
    assert env.unwrapped.core.lib.num_clips == 100
    env.close()
    out = tmp_path / "enc"
    args = ["pretrain", "--motions", clips, "--out", str(out), "--steps", "2", "--hidden", "16", "--no-progress"]
    assert rgsd([*args, "--batch-size", "16", "--set", "eval_every=2", "--set", "target_alignment=null"]) == 0
    assert "on 100 clips" in capsys.readouterr().out


SKILL_32 = ["env.skill_dim=32"]


@pytest.fixture(scope="module")
def run32(clips100, tmp_path_factory):
    """``rgsd train --config rgsd`` on 100 clips in a 32-D skill space, pretraining its own 32-D encoder."""
    out = tmp_path_factory.mktemp("runs") / "rgsd32"
    method = [f"method.options.{k}={json.dumps(v)}" for k, v in tiny_options("rgsd").items()]
    args = ["train", "--config", "rgsd", "--out", str(out), "--device", "cpu", "--no-progress"]
    assert rgsd([*args, *_sets([*TINY_TRAIN, *SKILL_32, f"env.motions={clips100}", *method])]) == 0
    return out


def test_a_32_d_run_on_100_clips_writes_32_d_files(run32):
    from rgsd_envs.envs.observations import FRAME_DIM
    from rgsd_envs.rewards.encoders import load_encoder
    from rgsd_envs.runs.policy import load_policy

    policy = load_policy(run32 / "policy.pt")
    assert policy.meta["skill_dim"] == 32 and policy.obs_dim == FRAME_DIM + 32
    assert load_encoder(run32 / "encoder.pt").out_dim == 32
    assert load_encoder(run32 / "discovery_encoder.pt").out_dim == 32


def test_a_32_d_run_on_100_clips_evaluates_and_plays(run32, clips100, tmp_path):
    out = tmp_path / "eval"
    args = ["eval", "--run", str(run32), "--out", str(out), *FEW_ROLLOUTS, "--kappas", "50"]
    assert rgsd([*args, "--set", "sweep_clips=2", "--set", "batch_size=128"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    latents = next(iter(metrics["runs"].values()))["clip_latents"]
    assert len(latents) == 100 and {len(z) for z in latents.values()} == {32}
    video = tmp_path / "play.mp4"
    play = ["play", str(run32), "--clip", "punch_v02", "--frames", "3", "--size", "64", "48", "--out", str(video)]
    assert rgsd(play) == 0
    assert video.stat().st_size > 0


def test_a_policy_whose_skill_dim_differs_from_its_env_gets_one_clear_error(run32, tmp_path, capsys):
    import shutil

    import yaml

    edited = tmp_path / "edited"
    shutil.copytree(run32, edited)
    config = yaml.safe_load((edited / "config.yaml").read_text())
    config["env"]["skill_dim"] = 16
    (edited / "config.yaml").write_text(yaml.safe_dump(config))
    args = ["eval", "--run", str(edited), "--out", str(tmp_path / "eval"), *FEW_ROLLOUTS]
    assert rgsd(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(edited / "policy.pt") in err[0] and "field 'meta.skill_dim'" in err[0], err
    assert "trained with a 32-D skill, the environment has skill_dim 16" in err[0]


@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_trains_in_a_32_d_skill_space(method, clips17, tmp_path):
    import dataclasses

    from rgsd_agents.methods import method_config
    from rgsd_envs.runs.policy import load_policy

    known = {f.name for f in dataclasses.fields(type(method_config(method, {})))}
    options = [f"method.options.{k}={json.dumps(v)}" for k, v in tiny_options(method).items() if k in known]
    if method == "fb_cpr":  # its latent is the env's skill: both are set
        options.append("method.options.z_dim=32")
    out = tmp_path / method
    args = ["train", "--config", method, "--out", str(out), "--device", "cpu", "--no-progress"]
    assert rgsd([*args, *_sets([*TINY_TRAIN, *SKILL_32, f"env.motions={clips17}", *options])]) == 0
    assert load_policy(out / "policy.pt").meta["skill_dim"] == 32
