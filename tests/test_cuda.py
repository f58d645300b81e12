"""Training on a GPU with the MuJoCo Warp backend: exact resumption, no synchronisation in a rollout, flat memory.

Marked ``cuda``: ``pytest -m cuda`` runs these on a GPU machine (``benchmarks/gpu_check.py`` does); without
CUDA they are skipped. The warp kernels compile on first use (minutes on a fresh machine, then cached).
"""

from __future__ import annotations

import contextlib
import os
import traceback
import warnings

# cuBLAS picks reduction orders per workspace; a fixed workspace makes its matmuls repeat bit for bit. It is
# read when CUDA starts, so it is set at import (pytest imports every module before running any test).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from rgsd_agents.cli import main as rgsd
from rgsd_agents.testing import tiny_encoder_file, tiny_train_config
from rgsd_agents.training.runner import Runner
from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.testing import warp_without_constraints
from rgsd_envs.utils.host_reads import count_host_reads
from rgsd_envs.utils.syncs import find_syncs

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available() is False)"),
]

DETERMINISTIC_ENV = "RGSD_WARP_DETERMINISTIC"
"""rgsd_envs.sim.warp_backend.DETERMINISTIC_ENV (spelled out: importing the backend needs the warp extra)."""
TINY = [
    "num_envs=64", "horizon=8", "max_minutes=null", "probe_every=0", "checkpoint_every=5",
    "networks.actor_hidden=[64]", "networks.critic_hidden=[64]",
    "ppo.minibatch_size=128", "method.options.minibatch_size=128",
]  # fmt: skip


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory) -> str:
    return str(tiny_encoder_file(tmp_path_factory.mktemp("enc") / "encoder.pt"))


def _sets(items: list[str]) -> list[str]:
    return [a for kv in items for a in ("--set", kv)]


def _arrays(obj: Any, prefix: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor and array inside a checkpoint, by its path."""
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, np.ndarray):
        yield prefix, torch.from_numpy(obj)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _arrays(v, f"{prefix}.{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _arrays(v, f"{prefix}[{i}]")


def _checkpoint(run: Path, name: str = "latest") -> dict:
    return torch.load(run / "checkpoints" / f"{name}.pt", map_location="cpu", weights_only=True)


def _differing(a: dict, b: dict) -> list[str]:
    """The arrays of two checkpoints' networks, optimisers, env and observation that are not bit-identical."""
    out = []
    for key in ("actor_critic", "ppo", "method", "env", "obs"):
        left, right = dict(_arrays(a[key], key)), dict(_arrays(b[key], key))
        assert left.keys() == right.keys() and left, key
        out += [name for name in left if not torch.equal(left[name], right[name])]
    return out


def test_a_warp_run_evaluates_and_drives_goal_reaching_on_cuda(tmp_path, tiny_encoder):
    """A run trained on warp worlds on the GPU is evaluated there and drives the downstream task there: its
    config names the CPU for the env, and the policy, motion library and draws must all follow the GPU."""
    run = tmp_path / "run"
    base = ["train", "--config", "demo", "--device", "cuda", "--no-progress", "--out", str(run)]
    assert rgsd([*base, *_sets(["env.backend=warp", f"encoder={tiny_encoder}", "iterations=2", *TINY])]) == 0
    evaluation = ["eval", "--run", str(run), "--out", str(tmp_path / "eval"), "--device", "cuda", "--no-video"]
    evaluation += ["--no-progress", "--motions", "demo", "--rollouts", "1", "--best-of", "2", "--kappas", "20"]
    assert rgsd(evaluation) == 0
    assert (tmp_path / "eval" / "metrics.json").is_file()
    sets = ["iterations=2", "max_minutes=null", "eval_every=2", "eval_episodes=4", "checkpoint_every=2"]
    sets += ["num_envs=8", "horizon=8", "ppo.minibatch_size=16"]  # no task.device: the warp worlds follow the GPU
    downstream = ["downstream", "--low-level", str(run), "--out", str(tmp_path / "down"), "--config", "demo"]
    assert rgsd([*downstream, "--device", "cuda", "--no-progress", *_sets(sets)]) == 0


@pytest.mark.parametrize("backend", ["mujoco", "warp"])
def test_train_on_cuda_then_resume_equals_a_straight_run(tmp_path, tiny_encoder, monkeypatch, backend):
    """A CUDA learner resumes bit for bit. With MuJoCo worlds (float64 on the host, deterministic) this checks
    the checkpoint alone; with warp worlds also the GPU physics' part of it, run where it repeats: deterministic
    atomics and no constraints (``warp_without_constraints``: mujoco-warp orders contacts and constraint rows as
    its threads run, so two identical runs with contacts part by float32 rounding; the CPU warp device's resume
    tests cover contacts)."""
    monkeypatch.setenv(DETERMINISTIC_ENV, "1")
    with warp_without_constraints() if backend == "warp" else contextlib.nullcontext():
        _resume_equals_straight(tmp_path, tiny_encoder, backend)


def _resume_equals_straight(tmp_path: Path, tiny_encoder: str, backend: str) -> None:
    base = ["train", "--config", "demo", "--device", "cuda", "--no-progress"]
    base += _sets([f"env.backend={backend}", f"encoder={tiny_encoder}", *TINY])
    straight, split = tmp_path / "straight", tmp_path / "split"
    # torch names each op that has no deterministic CUDA kernel (warn_only: the run goes on), so a difference
    # below comes with the ops that can cause it
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert rgsd([*base, "--set", "iterations=10", "--out", str(straight)]) == 0
            assert rgsd([*base, "--set", "iterations=5", "--out", str(split)]) == 0
    finally:
        torch.use_deterministic_algorithms(False)
    nondeterministic = sorted(
        {str(w.message).split(". ")[0][:160] for w in caught if "deterministic" in str(w.message)}
    )
    # before any resume both runs are the same computation: a difference here is run-to-run nondeterminism on
    # the GPU, not a state the checkpoint misses
    before = _differing(_checkpoint(straight, "iter_000005"), _checkpoint(split, "iter_000005"))
    assert not before, (
        f"two identical runs differ after 5 iterations, before any resume: {before[:5]}; "
        f"ops without a deterministic CUDA kernel: {nondeterministic or 'none reported'}"
    )
    assert rgsd(["train", "--resume", str(split), "--set", "iterations=10", "--no-progress"]) == 0
    a, b = _checkpoint(straight), _checkpoint(split)
    assert a["iteration"] == b["iteration"] == 10
    after = _differing(a, b)
    assert not after, f"the resumed run differs from the straight one after 10 iterations: {after[:5]}"


ROLLOUT_FIELDS = ("obs", "actions", "log_probs", "values", "rewards", "dones", "tasks", "skills", "encoder_inputs")


def test_two_identical_rollouts_on_cuda_with_warp_repeat_bit_for_bit(tmp_path, tiny_encoder, monkeypatch):
    """Two runners from the same seed, physics that repeats on the GPU (deterministic atomics, no constraints),
    three rollouts each with the learner's updates between them: bit for bit. A difference names the first field
    and step that differ (the simulator's observations, or the networks' outputs on equal observations)."""
    monkeypatch.setenv(DETERMINISTIC_ENV, "1")
    with warp_without_constraints():
        runners = [_runner(tmp_path / str(i), tiny_encoder) for i in range(2)]
    torch.use_deterministic_algorithms(True, warn_only=True)  # torch's deterministic kernels where it has them
    try:
        for it in range(3):
            for r in runners:
                r.rollout()
            a, b = (r.storage for r in runners)
            first = {  # each differing field's first differing step: the earliest names the culprit
                name: int((x != y).flatten(1).any(1).nonzero()[0])
                for name in ROLLOUT_FIELDS
                for x, y in [(getattr(a, name), getattr(b, name))]
                if not torch.equal(x, y)
            }
            if first:
                name = min(first, key=lambda n: (first[n], ROLLOUT_FIELDS.index(n)))
                pytest.fail(f"rollout {it}: {name} differs first, at step {first[name]}; all: {first}")
            for r in runners:
                r.ppo.update(r.storage, r.minibatch_gen, r.method)
                r.method.update(r.storage, r.minibatch_gen)
            pa, pb = (dict(r.ac.named_parameters()) for r in runners)
            differing = [k for k in pa if not torch.equal(pa[k], pb[k])]
            assert not differing, f"update {it}: equal rollouts, different parameters after it: {differing[:4]}"
    finally:
        torch.use_deterministic_algorithms(False)
        for r in runners:
            r.close()


def _caller() -> str:
    """The innermost rgsd source line on the stack (file:line and code): where a synchronising call was made."""
    for frame in reversed(traceback.extract_stack()):
        if "/rgsd_" in frame.filename and "/tests/" not in frame.filename:
            return f"{frame.filename.split('/src/')[-1]}:{frame.lineno} {frame.line}"
    return "outside rgsd"


def _runner(tmp_path: Path, encoder: str, backend: str = "warp") -> Runner:
    cfg = tiny_train_config(
        encoder, device="cuda", num_envs=64, horizon=8, iterations=100, env=EnvConfig(backend=backend)
    )
    return Runner(cfg, tmp_path / f"run_{backend}", progress=False)


def test_a_rollout_on_cuda_with_warp_synchronises_only_for_its_one_read_per_step(tmp_path, tiny_encoder):
    """torch's sync debug mode reports every synchronising call (blocking copies, stream or device syncs,
    ``.item()``, ``nonzero``): a rollout makes exactly the env's one host read per step (``done_host``) and
    no other; the CPU-side count of the same reads is rgsd-agents' test_host_reads, and its model of the
    synchronising calls (``find_syncs``, run here beside the debug mode) names the op of each."""
    caught: list[tuple[str, str]] = []
    runner = _runner(tmp_path, tiny_encoder)
    runner.iterate()  # first launches: kernel loads, graph capture, allocations
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(), count_host_reads() as reads, find_syncs(runner.device) as modelled:
            warnings.simplefilter("always")
            warnings.showwarning = lambda message, *args, **kwargs: caught.append((str(message), _caller()))
            runner.rollout()
    finally:
        torch.cuda.set_sync_debug_mode("default")
        runner.close()
    syncs = Counter(site for message, site in caught if "synchroniz" in message)
    horizon = runner.cfg.horizon
    assert dict(reads) == {"tolist": horizon}, dict(reads)
    assert sum(syncs.values()) <= horizon, (
        f"synchronising calls in {horizon} steps, by caller: {dict(syncs)}; "
        f"as find_syncs models them, by op and caller: {dict(Counter(modelled))}"
    )


@pytest.mark.parametrize("backend", ["warp", "mujoco"])
def test_gpu_memory_stays_flat_over_50_iterations(tmp_path, tiny_encoder, backend):
    """warp: everything on the GPU; mujoco: the hybrid mode (CPU worlds, GPU learner, pinned staging)."""
    runner = _runner(tmp_path, tiny_encoder, backend)
    for _ in range(3):
        runner.iterate()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    allocated = []
    for _ in range(50):
        runner.iterate()
        allocated.append(torch.cuda.memory_allocated())
    bridge = getattr(runner, "bridge", None)
    runner.close()
    mib = 1 << 20
    assert allocated[-1] - base < mib, f"{(allocated[-1] - base) / mib:.1f} MiB more after 50 iterations"
    assert max(allocated[25:]) <= max(allocated[:25]) + mib // 4, "allocated memory keeps growing"
    if bridge is not None:  # one pinned buffer per name, no larger than its largest array
        assert bridge.pinned_bytes <= 4 * runner.cfg.num_envs * 375 * 4
