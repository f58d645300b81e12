"""The baselines on the shared runner: the presets train, PPO sees the method's reward, resume is exact."""

from __future__ import annotations

import argparse
import json
import math

import pytest
import torch

from rgsd_agents.config import MethodConfig, resolve
from rgsd_agents.testing import (
    assert_same_tensors,
    reproducible,
    split_and_resume,
    tiny_encoder_file,
    tiny_options,
    tiny_train_config,
)
from rgsd_agents.training.runner import Runner
from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.runs.run_dir import RunDir, load_clip_latents

TINY = {name: tiny_options(name, midepisode_latents=True) for name in ("ase", "calm", "metra")}
"""Tiny networks; ASE and CALM draw latents mid-episode too, so resume must restore their schedules."""
METHODS = sorted(TINY)


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory) -> str:
    return str(tiny_encoder_file(tmp_path_factory.mktemp("enc") / "encoder.pt"))


def method_config(encoder: str, name: str, **kw):
    return tiny_train_config(None, method=MethodConfig(name, dict(TINY[name])), **kw)


def _params(runner: Runner) -> dict[str, torch.Tensor]:
    state = {f"ac.{k}": v for k, v in runner.ac.state_dict().items()}
    for name, module in runner.method.modules().items():
        state.update({f"{name}.{k}": v for k, v in module.state_dict().items()})
    return state


@pytest.mark.parametrize("name", METHODS)
def test_the_preset_trains_two_seeded_iterations_from_the_cli(name, tmp_path):
    from rgsd_agents.commands import train

    parser = argparse.ArgumentParser()
    train.register(parser.add_subparsers())
    tiny = ["num_envs=4", "horizon=8", "iterations=2", "probe_every=2", "networks.actor_hidden=[16]",
            "networks.critic_hidden=[16]", "ppo.minibatch_size=16", "pretrain.hidden=[16]"]  # fmt: skip
    tiny += [f"method.options.{k}={json.dumps(v)}" for k, v in TINY[name].items()]
    out = tmp_path / "run"
    args = parser.parse_args(
        ["train", "--config", name, "--out", str(out), "--no-progress"] + [a for kv in tiny for a in ("--set", kv)]
    )
    assert args.func(args) == 0
    run = RunDir(out)
    saved = run.config()
    assert saved["method"]["name"] == name and saved["env"]["p_imitation"] == 0.0
    options = saved["method"]["options"]
    assert "lr" in options and all(options[k] == v for k, v in TINY[name].items())  # defaults beside the overrides
    info = run.method()
    assert info["name"] == name
    assert info["latent_choice"] == ("clip_latents" if name == "calm" else "best_of_n")
    if name == "calm":  # each clip's latent, stored for rgsd eval and downstream
        names = list(MotionLib(saved["env"]["motions"]).names)
        z = load_clip_latents(run.clip_latents_path(), names)
        assert z.shape == (len(names), 16) and z.std(0).sum() > 0
        assert info["clip_latents_rule"] == "the encoding of the clip's first window (the paper encodes the whole clip)"
    assert (out / "checkpoints" / "iter_000002.pt").exists() and any(run.tensorboard_dir.iterdir())


@pytest.mark.parametrize("name", METHODS)
def test_ppo_learns_from_the_method_s_reward_and_resume_is_exact(name, tmp_path, tiny_encoder):
    straight = Runner(method_config(tiny_encoder, name, iterations=4), tmp_path / "straight", progress=False)
    full = reproducible(straight.learn())
    for m in full:
        assert "method/reward" in m and all(math.isfinite(v) for v in m.values())
        assert "rollout/discovery_reward" not in m  # the env's encoder reward is not the method's
    straight.close()
    # the rewards PPO learns from are the method's (bootstrapped steps aside), not the env's encoder reward
    check = Runner(method_config(tiny_encoder, name, iterations=1), tmp_path / "check", progress=False)
    env_rewards = []
    step = check.env.step

    def recording_step(actions):
        out = step(actions)
        env_rewards.append(out[1].clone())
        return out

    check.env.step = recording_step
    check.rollout()
    storage = check.storage
    seen = storage.rewards.clone()
    check.method.relabel(storage)
    steady = storage.dones == 0
    assert torch.equal(seen[steady], storage.rewards[steady])
    assert not torch.equal(seen[steady], torch.stack(env_rewards)[steady])
    check.close()

    resumed, rest = split_and_resume(method_config(tiny_encoder, name, iterations=2), tmp_path / "split", 4)
    assert rest == full[2:]
    assert_same_tensors(_params(straight), _params(resumed))


def test_ase_s_optional_diversity_loss_joins_the_ppo_update(tmp_path, tiny_encoder):
    cfg = method_config(tiny_encoder, "ase", iterations=1)
    cfg.method.options["diversity_coef"] = 0.01
    runner = Runner(cfg, tmp_path / "run", progress=False)
    history = runner.learn()
    runner.close()
    assert math.isfinite(history[0]["losses/diversity_loss"]) and history[0]["losses/diversity_loss"] > 0


@pytest.mark.parametrize("name", ["diayn", *METHODS])
def test_a_method_without_imitation_trains_on_discovery_episodes_only(name):
    cfg = resolve(tiny_train_config(None, env=EnvConfig(p_imitation=0.7), method=MethodConfig(name, {})))
    assert cfg.env.p_imitation == 0.0


@pytest.mark.parametrize("name", ["diayn", *METHODS])
def test_a_method_with_a_random_encoder_refuses_an_encoder_file(name, tiny_encoder):
    with pytest.raises(ValueError, match="random encoder: leave encoder unset"):
        tiny_train_config(tiny_encoder, method=MethodConfig(name, {}))
