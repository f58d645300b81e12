"""Data-parallel training: 2 gloo processes launched by torchrun through ``rgsd train`` (about a minute).

Each rank records SHA-256 digests of the actor, critic, discovery encoder and both normalisers after every
update (``distributed_worker.py``). The ranks must hold identical learners after every update while stepping
different worlds, rank 0 alone writes the run folder, and a run resumed from its iteration-2 checkpoint must
reproduce iterations 3 and 4 of the uninterrupted run on both ranks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rgsd_agents.testing import tiny_encoder_file, tiny_train_config
from rgsd_envs.utils.config import save_yaml

WORKER = Path(__file__).with_name("distributed_worker.py")
LEARNERS = ("actor", "critic", "method.discovery_encoder", "obs_normalizer", "value_normalizer")

pytestmark = pytest.mark.skipif(
    not (torch.distributed.is_available() and torch.distributed.is_gloo_available()), reason="needs gloo"
)


def torchrun(record: Path, *train_args: str, code: int = 0, **env: str) -> list[list[dict]]:
    """Run ``rgsd train`` on 2 CPU ranks (``env``: more environment variables; ``code``: the exit status each
    rank must end with); each rank's records, one dict per iteration."""
    record.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    cmd += [str(WORKER), str(record), "--", "train", *train_args, "--device", "cpu", "--no-progress"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", **env}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    out = proc.stdout[-3000:] + proc.stderr[-3000:]
    if code:  # torchrun fails when a rank does, and names each rank's exit status
        assert proc.returncode != 0 and out.count(f"exitcode  : {code}") == 2, out
    else:
        assert proc.returncode == 0, out
    return [[json.loads(line) for line in (record / f"rank{r}.jsonl").read_text().splitlines()] for r in (0, 1)]


def test_two_gloo_ranks_stay_identical_and_resume_exactly(tmp_path):
    encoder = tiny_encoder_file(tmp_path / "encoder.pt")
    config = save_yaml(tiny_train_config(encoder, iterations=4, checkpoint_every=2), tmp_path / "tiny.yaml")
    straight = tmp_path / "straight"
    rank0, rank1 = torchrun(tmp_path / "rec_straight", "--config", str(config), "--out", str(straight))

    assert [r["iteration"] for r in rank0] == [r["iteration"] for r in rank1] == [1, 2, 3, 4]
    assert all(r["world_size"] == 2 for r in rank0 + rank1)
    for a, b in zip(rank0, rank1):
        assert {k: a[k] for k in LEARNERS} == {k: b[k] for k in LEARNERS}, f"ranks differ after update {a['iteration']}"
    assert len({r["actor"] for r in rank0}) == 4  # the learners do change
    for r in rank0:  # the observation statistics count both ranks' rows: 2 x 4 worlds x (reset + 8 steps per it)
        assert r["obs_count"] == pytest.approx(2 * 4 * (1 + 8 * r["iteration"]), abs=1e-6)
    assert any(a["policy_loss"] != b["policy_loss"] for a, b in zip(rank0, rank1)), "ranks should see their own worlds"
    # world i of a rank draws the episodes of seed world_seed + i: the ranks' 4 worlds share no stream
    assert (rank0[0]["world_seed"], rank1[0]["world_seed"]) == (0, 4)

    ckpts = straight / "checkpoints"
    assert sorted(p.name for p in ckpts.iterdir()) == ["iter_000002.pt", "iter_000004.pt", "latest.pt"]
    assert (straight / "policy.pt").is_file() and any((straight / "tb").iterdir())
    state = torch.load(ckpts / "latest.pt", map_location="cpu", weights_only=True)
    assert state["global_step"] == 4 * 2 * 4 * 8  # iterations x ranks x worlds x horizon
    assert len(state["rank_states"]) == 2 and state["rank_states"][1]["env"] is not None

    resumed = tmp_path / "resumed"  # the run as it stood after iteration 2
    resumed.mkdir()
    for name in ("config.yaml", "encoder.pt"):
        shutil.copy(straight / name, resumed / name)
    (resumed / "checkpoints").mkdir()
    shutil.copy(ckpts / "iter_000002.pt", resumed / "checkpoints" / "latest.pt")
    again0, again1 = torchrun(tmp_path / "rec_resumed", "--resume", str(resumed))

    assert [r["iteration"] for r in again0] == [r["iteration"] for r in again1] == [3, 4]
    assert again0 == rank0[2:] and again1 == rank1[2:]  # learners and each rank's losses


def test_sigterm_to_one_rank_stops_both_at_the_same_iteration_with_a_checkpoint(tmp_path):
    encoder = tiny_encoder_file(tmp_path / "encoder.pt")
    config = save_yaml(tiny_train_config(encoder, iterations=50, checkpoint_every=100), tmp_path / "tiny.yaml")
    out = tmp_path / "run"
    rank0, rank1 = torchrun(
        tmp_path / "rec", "--config", str(config), "--out", str(out), code=130, RGSD_TEST_SIGTERM="1:2"
    )
    assert [r["iteration"] for r in rank0] == [r["iteration"] for r in rank1] == [1, 2]
    state = torch.load(out / "checkpoints" / "latest.pt", map_location="cpu", weights_only=True)
    assert state["iteration"] == 2 and len(state["rank_states"]) == 2


BASELINES = {
    "ase": ({"hidden": [16, 8], "resample": True, "latent_steps_max": 4}, ("net",)),
    "calm": ({"encoder_hidden": [16], "disc_hidden": [16], "window": 8}, ("encoder", "disc")),
}
"""Tiny options of the baselines with a discriminator, and the method's networks the ranks must share."""


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_two_gloo_ranks_train_a_baseline_s_networks_identically_and_resume_exactly(tmp_path, name):
    from rgsd_agents.config import MethodConfig

    options, modules = BASELINES[name]
    cfg = tiny_train_config(None, iterations=4, checkpoint_every=2, method=MethodConfig(name, options))
    config = save_yaml(cfg, tmp_path / f"{name}.yaml")
    straight = tmp_path / "straight"
    rank0, rank1 = torchrun(tmp_path / "rec_straight", "--config", str(config), "--out", str(straight))
    keys = ["actor", *(f"method.{m}" for m in modules)]
    for a, b in zip(rank0, rank1):
        assert {k: a[k] for k in keys} == {k: b[k] for k in keys}, f"ranks differ at {a['iteration']}"
    for key in keys:  # the discriminator (and CALM's encoder, through PPO's loss) does train
        assert len({r[key] for r in rank0}) == 4, key
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    for name in ("config.yaml", "encoder.pt"):
        shutil.copy(straight / name, resumed / name)
    (resumed / "checkpoints").mkdir()
    shutil.copy(straight / "checkpoints" / "iter_000002.pt", resumed / "checkpoints" / "latest.pt")
    again0, again1 = torchrun(tmp_path / "rec_resumed", "--resume", str(resumed))
    assert again0 == rank0[2:] and again1 == rank1[2:]  # each rank's latents and worlds continue exactly


@pytest.mark.parametrize("argv", [["demo"], ["pretrain", "--out", "{out}"], ["downstream", "--low-level", "x"]])
def test_commands_other_than_train_refuse_several_torchrun_processes(monkeypatch, tmp_path, capsys, argv):
    from rgsd_agents.cli import main

    monkeypatch.setenv("WORLD_SIZE", "2")
    out = tmp_path / "out"
    assert main([a.format(out=out) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "only `rgsd train` runs data-parallel" in err
    assert not out.exists()


def test_a_rank_that_left_its_group_ends_at_once_with_its_code_and_its_output_flushed():
    """``end_rank`` returns the code in a process that never joined a group; after ``shutdown`` it exits there."""
    from rgsd_agents.rl import distributed

    assert distributed.end_rank(7) == 7  # this process never joined a group
    script = (
        "import atexit, sys, logging\n"
        "from rgsd_agents.rl import distributed\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "atexit.register(lambda: print('teardown ran'))\n"
        "distributed._left_group = True\n"
        "print('summary', end='')\n"
        "logging.getLogger('x').info('logged')\n"
        "distributed.end_rank(130)\n"
        "print('after')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 130
    assert proc.stdout == "summary"  # flushed, and nothing after: no code and no interpreter teardown ran
    assert "logged" in proc.stderr
