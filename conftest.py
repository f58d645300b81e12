"""Fixtures shared by every package's tests."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import torch

# MuJoCo picks its GL backend at first import; whichever test imports it first, `import rgsd_envs` has
# selected it (EGL, or disabled where libEGL does not load) so offscreen rendering works.
import rgsd_envs  # noqa: F401

if os.environ.get("PYTEST_XDIST_WORKER"):
    # the README's test command runs one worker per core: a worker that also spread its ops over every core
    # would make the two contend for both
    torch.set_num_threads(1)

REPO_ROOT = Path(__file__).resolve().parent
REAL_MOTIONS_DIR = REPO_ROOT / "motions" / "deepmimic-smpl"
"""The eight MIT-licensed DeepMimic clips in AMASS SMPL+H layout that ship with the repository (motions/README.md)."""


@pytest.fixture(scope="session")
def real_motion_files() -> list[Path]:
    """The real AMASS-format (SMPL+H) mocap files in motions/deepmimic-smpl."""
    files = sorted(REAL_MOTIONS_DIR.glob("*_poses.npz"))
    assert len(files) == 8, f"expected the eight DeepMimic clips in {REAL_MOTIONS_DIR}, found {len(files)}"
    return files


@pytest.fixture(scope="session")
def walk_raw(real_motion_files) -> dict:
    """The arrays of the real SMPL+H walk file (30 Hz, 39 frames); tests copy before changing them."""
    import numpy as np

    src = next(f for f in real_motion_files if f.name == "walk_poses.npz")
    with np.load(src) as data:
        return {k: data[k] for k in data.files}


@pytest.fixture(scope="session")
def real_clips(real_motion_files):
    """The real clips imported with rgsd's AMASS importer (once per session)."""
    from rgsd_envs.motion.amass import amass_to_clip, read_amass
    from rgsd_envs.motion.kinematics import KinematicModel

    logging.getLogger("rgsd_envs").setLevel(logging.ERROR)
    km = KinematicModel()
    return [amass_to_clip(read_amass(f), kinematics=km) for f in real_motion_files]


@pytest.fixture(scope="session")
def demo_clips():
    """The built-in demo clips."""
    from rgsd_envs.motion.demo import demo_clips as make

    return make()


@pytest.fixture(scope="session")
def real_clip_dir(tmp_path_factory, real_clips) -> str:
    """A folder of rgsd clip files made from the real mocap (for env tests)."""
    out = tmp_path_factory.mktemp("real_clips")
    for clip in real_clips:
        clip.save(out / f"{clip.name}.npz")
    return str(out)


SHORT_DEMO = [
    "iterations=3", "num_envs=16", "horizon=8", "max_minutes=null",
    "pretrain.steps=30", "pretrain.hidden=[32]",
    "networks.actor_hidden=[32]", "networks.critic_hidden=[32]",
    "ppo.minibatch_size=64", "method.options.minibatch_size=64",
]  # fmt: skip
"""A few seconds of ``rgsd train --config demo``: a real (barely trained) run folder."""


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """A run folder from a very short ``rgsd train --config demo`` (for eval and downstream tests)."""
    from rgsd_agents.cli import main as rgsd

    out = tmp_path_factory.mktemp("train") / "demo_run"
    sets = [a for kv in SHORT_DEMO for a in ("--set", kv)]
    assert rgsd(["train", "--config", "demo", "--out", str(out), "--no-progress", *sets]) == 0
    for name in ("config.yaml", "policy.pt", "encoder.pt"):
        assert (out / name).is_file(), name
    return out


def load_script_module(path: Path, name: str | None = None):
    """The script at ``path`` (a benchmark, an example, the docs hook: scripts, not a package) as a module named
    ``name`` (default: the file's stem), registered in sys.modules so that its dataclasses can look their module up."""
    import importlib.util
    import sys

    name = name or path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_benchmark_module(name: str):
    """The module ``benchmarks/<name>.py``."""
    return load_script_module(REPO_ROOT / "benchmarks" / f"{name}.py")


@pytest.fixture(scope="session")
def load_benchmark():
    """``load_benchmark("learning_curves")``: a benchmark script as a module (``load_benchmark_module``)."""
    return load_benchmark_module


@pytest.fixture(scope="session")
def load_script():
    """``load_script(path, name=None)``: any script of the repository as a module (``load_script_module``)."""
    return load_script_module
