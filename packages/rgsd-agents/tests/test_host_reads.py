"""Host reads of a training iteration: on the warp path a rollout reads the device once per env step.

Counted as ``Tensor.numpy/.cpu/.item/.tolist/__bool__`` calls in this process
(``rgsd_envs.utils.host_reads``), over whole iterations after a warm-up one. Before the torch interface the
warp path made about 38 per step (16.7 numpy, 16.8 cpu, 1.7 item, 3.0 bool). The reads torch makes inside
its ops on a GPU (a boolean mask's nonzero, a blocking upload) are found by ``rgsd_envs.utils.syncs``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rgsd_agents.testing import tiny_encoder_file, tiny_options, tiny_train_config
from rgsd_agents.training.runner import Runner
from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.utils.host_reads import count_host_reads, read_host_flags
from rgsd_envs.utils.syncs import Sync, find_syncs

HORIZON = 8
STEP_READ = "rgsd_envs/utils/host_reads.py"
"""Where the env's one read per step is made (``read_host_flags``)."""


def _unintended(found: list[Sync]) -> list[Sync]:
    """The calls that would synchronise a GPU other than the env's step reads."""
    return [s for s in found if not (s.op == "Tensor.tolist" and s.site.startswith(STEP_READ))]


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory) -> str:
    return str(tiny_encoder_file(tmp_path_factory.mktemp("enc") / "encoder.pt"))


@pytest.fixture(scope="module")
def warp_runner(tmp_path_factory, tiny_encoder):
    env = EnvConfig(backend="warp", clip_sampling={"mode": "failure_weighted"}, deviation={"threshold": 0.05})
    cfg = tiny_train_config(tiny_encoder, horizon=HORIZON, env=env)
    runner = Runner(cfg, tmp_path_factory.mktemp("reads") / "run", progress=False)
    runner.iterate()  # warm-up: kernels, first-touch allocations
    yield runner
    runner.close()


def test_a_warp_rollout_reads_the_device_once_per_env_step(warp_runner):
    with count_host_reads() as counts:
        warp_runner.rollout()
    # the env's packed flags, one tolist() per step; nothing else (no .cpu(), no mask.any(), no .item())
    assert dict(counts) == {"tolist": HORIZON}


def test_a_warp_rollout_makes_no_call_that_would_synchronise_a_gpu_but_its_step_reads(warp_runner):
    """Nor do torch's ops: no boolean-mask indexing, no ``x[ids] = 0.0`` (a blocking upload of the 0), no
    ``torch.tensor(data, device=...)`` (what the GPU test's sync debug mode would count)."""
    with find_syncs() as found:
        warp_runner.rollout()
    assert len(found) - len(_unintended(found)) == HORIZON
    assert _unintended(found) == []


def test_a_whole_warp_iteration_synchronises_only_for_its_reads(warp_runner):
    with find_syncs() as found:
        warp_runner.iterate()
    assert [s.op for s in found] == ["Tensor.tolist"] * (HORIZON + 3), _unintended(found)


def test_a_whole_warp_iteration_adds_one_read_per_statistics_block(warp_runner):
    with count_host_reads() as counts:
        metrics = [warp_runner.iterate() for _ in range(2)]
    # per iteration: HORIZON step reads + one each for the PPO, discovery and episode statistics
    assert sum(counts.values()) == 2 * (HORIZON + 3), dict(counts)
    # and episodes did end (deviation 5 cm): the reads stay flat however many worlds restart
    assert any(m.get("episodes/imitation_length", 0) > 0 for m in metrics)
    # the warp solver's iteration-limit counter is logged, riding on the statistics' read
    assert all(m["sim/solver_limit_hits"] >= 0 for m in metrics)


@pytest.mark.parametrize("method", ["ase", "calm", "metra"])
def test_a_baseline_s_latents_rewards_and_updates_add_one_read_per_iteration(tmp_path, tiny_encoder, method):
    from rgsd_agents.config import MethodConfig

    cfg = tiny_train_config(
        None,
        horizon=HORIZON,
        env=EnvConfig(backend="warp", p_imitation=0.0, deviation={"threshold": 0.05}),
        method=MethodConfig(method, tiny_options(method, midepisode_latents=True)),
    )
    runner = Runner(cfg, tmp_path / "run", progress=False)
    runner.iterate()
    with count_host_reads() as rollout_reads, find_syncs() as found:
        runner.rollout()  # latents resampled through set_skills and rewards relabelled: no extra read
    with count_host_reads() as counts:
        runner.iterate()
    runner.close()
    assert dict(rollout_reads) == {"tolist": HORIZON}
    assert _unintended(found) == []  # nor any that torch would make inside its ops on a GPU
    # per iteration: HORIZON step reads + one each for the PPO, method and episode statistics
    assert sum(counts.values()) == HORIZON + 3, dict(counts)


def test_the_counter_sees_each_kind_of_read_and_restores_torch():
    t = torch.ones(3)
    with count_host_reads() as counts:
        t.numpy(), t.cpu(), t[0].item(), t.tolist(), bool(t[0])
    assert dict(counts) == {"numpy": 1, "cpu": 1, "item": 1, "tolist": 1, "__bool__": 1}
    with count_host_reads() as again:
        pass
    t.numpy()
    assert sum(again.values()) == 0


def test_host_flags_are_read_in_one_call():
    flags = torch.tensor([[True, False, True], [False, False, True]])
    with count_host_reads() as counts:
        out = read_host_flags(flags)
    assert sum(counts.values()) == 1
    np.testing.assert_array_equal(out, flags.numpy())
    assert out.dtype == bool
