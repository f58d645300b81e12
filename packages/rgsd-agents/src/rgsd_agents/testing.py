"""Tiny training settings for tests and smoke checks: a small random encoder file and a seconds-long config."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from rgsd_agents.config import MethodConfig, NetworkConfig, PPOConfig, TrainConfig
from rgsd_agents.pretraining.config import PretrainOptions

TINY_OPTIONS: dict[str, dict[str, Any]] = {
    "rgsd": {"minibatch_size": 16},
    "diayn": {"minibatch_size": 16},
    "ase": {"hidden": [16, 8]},
    "calm": {"encoder_hidden": [16], "disc_hidden": [16], "disc_latent_branch": [8], "window": 8},
    "metra": {"hidden": [16], "minibatch_size": 16},
    "fb_cpr": {
        "batch_size": 32,
        "f_hidden": 16,
        "critic_hidden": 16,
        "b_hidden": 16,
        "disc_hidden": 16,
        "z_buffer_size": 64,
        "loop": {"steps_per_iteration": 2, "updates_per_iteration": 2, "random_steps": 8, "replay_capacity": 64},
    },
}
"""Each method's ``method.options`` cut to seconds of work: 16-unit networks, small minibatches and buffers."""
MIDEPISODE_LATENTS: dict[str, dict[str, Any]] = {
    "ase": {"resample": True, "latent_steps_max": 3},
    "calm": {"resample": True, "latent_steps_min": 1, "latent_steps_max": 3},
}
"""Options that make ASE and CALM draw latents within an episode too (their schedules then run in tiny tests)."""


def tiny_options(name: str, midepisode_latents: bool = False, **overrides: Any) -> dict[str, Any]:
    """A fresh copy of ``TINY_OPTIONS[name]`` (with ``MIDEPISODE_LATENTS[name]`` if asked), ``overrides`` on top."""
    if name not in TINY_OPTIONS:
        raise KeyError(
            f"method {name!r} has no entry in rgsd_agents.testing.TINY_OPTIONS: add its method.options cut to "
            "seconds of work (small networks, minibatches and buffers; {} if it has nothing to shrink)"
        )
    options = copy.deepcopy(TINY_OPTIONS[name])
    if midepisode_latents:
        options.update(MIDEPISODE_LATENTS.get(name, {}))
    return {**options, **overrides}


def tiny_encoder_file(path: str | os.PathLike, seed: int = 0) -> Path:
    """A small random MLP encoder (hidden 32) standardised on the demo references, saved like a pretrained one."""
    from rgsd_agents.pretraining.config import PretrainConfig
    from rgsd_agents.pretraining.encoder import build_encoder
    from rgsd_agents.pretraining.reference import load_reference

    cfg = PretrainConfig(hidden=(32,), seed=seed, device="cpu")
    _, inputs = load_reference(cfg)
    return build_encoder(cfg, inputs).save(path)


def tiny_train_config(encoder: str | os.PathLike | None, **overrides: Any) -> TrainConfig:
    """RGSD on 4 worlds x 8 steps, 32-unit networks, 4 iterations (``overrides`` replace any field; ``encoder``
    None: a method with a random encoder, built at 32 units)."""
    base: dict[str, Any] = dict(
        num_envs=4,
        horizon=8,
        iterations=4,
        checkpoint_every=2,
        probe_every=0,
        encoder=None if encoder is None else str(encoder),
        pretrain=PretrainOptions(hidden=(32,)),
        networks=NetworkConfig(actor_hidden=(32,), critic_hidden=(32,), init_log_std=-1.0),
        ppo=PPOConfig(minibatch_size=16, epochs=2, actor_lr=1e-3, critic_lr=1e-3),
        method=MethodConfig("rgsd", tiny_options("rgsd", lr=1e-3)),
    )
    base.update(overrides)
    return TrainConfig(**base)


def reproducible(history: list[dict[str, float]]) -> list[dict[str, float]]:
    """The metrics of a history that must reproduce exactly (timings left out)."""
    return [{k: v for k, v in m.items() if not k.startswith("perf/") and k != "charts/SPS"} for m in history]


def split_and_resume(cfg: TrainConfig, run_dir: str | os.PathLike, total: int) -> tuple[Any, list[dict[str, float]]]:
    """Train ``cfg`` (its ``iterations``) into ``run_dir``, then resume it up to ``total`` iterations; returns the
    closed resumed runner and the reproducible metrics of its session (compare with a straight run's)."""
    from rgsd_agents.training.runner import Runner

    first = Runner(cfg, run_dir, progress=False)
    first.learn()
    first.close()
    resumed = Runner.resume(run_dir, {"iterations": total}, progress=False)
    assert resumed.iteration == cfg.iterations
    rest = reproducible(resumed.learn())
    resumed.close()
    return resumed, rest


def assert_same_tensors(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Two name -> tensor maps hold the same names and bit-identical tensors (the name of the first that differs)."""
    import torch

    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
