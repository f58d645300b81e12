"""Every method's presets (``<method>`` and ``<method>_paper``) train two seeded iterations from the CLI, shrunk."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from rgsd_agents.cli import main as rgsd
from rgsd_agents.methods import METHODS
from rgsd_agents.testing import TINY_OPTIONS, tiny_options
from rgsd_envs.runs.run_dir import RunDir

SHRINK = [
    "num_envs=4", "horizon=8", "iterations=2", "probe_every=0", "checkpoint_every=1", "max_minutes=null",
    "networks.actor_hidden=[16]", "networks.critic_hidden=[16]", "ppo.minibatch_size=16",
    "pretrain.hidden=[16]", "pretrain.steps=5", "pretrain.batch_size=16", "pretrain.target_alignment=null",
]  # fmt: skip
"""Every preset's sizes cut to seconds of work (the method's own sizes are ``TINY_OPTIONS``)."""
PAPER_SCHEDULES = {"ase": {"minibatch_size": 16}, "calm": {"minibatch_size": 16}, "metra": {"phi_steps": 2}}
"""On top of ``TINY_OPTIONS``: the paper presets' larger minibatches and METRA's extra encoder steps, cut too."""
PRESETS = [name for method in METHODS for name in (method, f"{method}_paper")]


def test_every_method_has_shrink_options():
    missing = sorted(set(METHODS) - set(TINY_OPTIONS))
    assert not missing, f"add {missing} to rgsd_agents.testing.TINY_OPTIONS (docs/methods.md, Adding a method)"
    assert set(TINY_OPTIONS) == set(METHODS), "TINY_OPTIONS names a method that METHODS has not"


def test_a_method_without_shrink_options_is_named_with_what_to_add():
    with pytest.raises(KeyError, match=r"method 'unlisted' has no entry in rgsd_agents.testing.TINY_OPTIONS: add its"):
        tiny_options("unlisted")


def test_every_method_has_its_two_presets():
    from rgsd_agents.config import config_missing

    missing = [why for m in METHODS for name in (m, f"{m}_paper") if (why := config_missing(name)) is not None]
    assert not missing, "every method needs a <method> and a <method>_paper preset: " + "; ".join(missing)


def _sets(method: str) -> list[str]:
    from rgsd_agents.methods import method_config

    options = tiny_options(method, **PAPER_SCHEDULES.get(method, {}))
    known = {f.name for f in dataclasses.fields(type(method_config(method, {})))}
    sets = SHRINK + [f"method.options.{k}={json.dumps(v)}" for k, v in options.items() if k in known]
    return [a for kv in sets for a in ("--set", kv)]


@pytest.mark.parametrize("preset", PRESETS)
def test_the_preset_trains_two_seeded_iterations_and_resumes(preset, tmp_path):
    method = preset.removesuffix("_paper")
    out = tmp_path / "run"
    args = ["train", "--config", preset, "--out", str(out), "--device", "cpu", "--no-progress", "--seed", "3"]
    assert rgsd([*args, *_sets(method)]) == 0
    run = RunDir(out)
    saved = run.config()
    assert saved["method"]["name"] == method and saved["seed"] == 3
    assert saved["env"]["p_imitation"] == (0.0 if not METHODS[method].IMITATION else saved["env"]["p_imitation"])
    assert run.method()["name"] == method and run.policy_path.is_file()
    latest = torch.load(out / "checkpoints" / "latest.pt", weights_only=True)
    assert latest["iteration"] == 2
    assert rgsd(["train", "--resume", str(out), "--set", "iterations=3", "--no-progress"]) == 0
    assert torch.load(out / "checkpoints" / "latest.pt", weights_only=True)["iteration"] == 3
