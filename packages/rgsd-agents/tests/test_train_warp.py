"""``rgsd train`` with the MuJoCo Warp backend (on a CPU warp device, as CI runs it) and its bad inputs."""

from __future__ import annotations

import sys

import torch

from rgsd_agents.cli import main
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.sim import WARP_INSTALL

TINY = [
    "num_envs=4", "iterations=2", "horizon=8", "max_minutes=null", "probe_every=0", "checkpoint_every=1",
    "pretrain.steps=30", "pretrain.hidden=[32]", "networks.actor_hidden=[32]", "networks.critic_hidden=[32]",
    "ppo.minibatch_size=16", "method.options.minibatch_size=16",
]  # fmt: skip


def _sets(items: list[str]) -> list[str]:
    return [a for kv in items for a in ("--set", kv)]


def test_train_with_the_warp_backend_runs_and_resumes(tmp_path):
    out = tmp_path / "run"
    argv = ["train", "--config", "demo", "--device", "cpu", "--set", "env.backend=warp", *_sets(TINY)]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 0
    run = RunDir(out)
    assert run.config()["env"]["backend"] == "warp"
    first = torch.load(out / "checkpoints" / "latest.pt", weights_only=True)
    assert main(["train", "--resume", str(out), "--set", "iterations=3", "--no-progress"]) == 0
    resumed = torch.load(out / "checkpoints" / "latest.pt", weights_only=True)
    assert first["iteration"] == 2 and resumed["iteration"] == 3


def test_backend_warp_without_the_extra_is_one_line_and_leaves_no_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco_warp", None)  # `import mujoco_warp` now fails
    out = tmp_path / "run"
    code = main(["train", "--config", "demo", "--device", "cpu", "--set", "env.backend=warp", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("error: ") and WARP_INSTALL in err
    assert not out.exists()


def test_an_unknown_backend_names_the_field_and_the_choices(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["train", "--config", "demo", "--device", "cpu", "--set", "env.backend=mjx", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "env" in err and "mujoco, warp" in err and "'mjx'" in err
    assert not out.exists()


def test_a_training_with_masked_restarts_equals_one_with_host_restarts(tmp_path):
    """CUDA's default (finished worlds restarted by masked device ops before the step's read) trains what restarts by
    host index train: two runners, the same seed, warp worlds on the CPU, every rollout and parameter equal."""
    from rgsd_agents.testing import tiny_encoder_file, tiny_train_config
    from rgsd_agents.training.runner import Runner
    from rgsd_envs.envs.config import EnvConfig

    encoder = tiny_encoder_file(tmp_path / "encoder.pt")
    cfg = tiny_train_config(encoder, num_envs=8, env=EnvConfig(backend="warp"))
    runners = [Runner(cfg, tmp_path / name, progress=False) for name in ("host", "masked")]
    runners[1].env.env.masked_restarts = True  # the env inside the method's skill-choosing wrapper
    try:
        ended = 0
        for it in range(3):
            for r in runners:
                r.iterate()
            a, b = (r.storage for r in runners)
            for name in ("obs", "actions", "rewards", "dones", "tasks", "skills", "encoder_inputs"):
                assert torch.equal(getattr(a, name), getattr(b, name)), f"iteration {it}: {name}"
            ended += int(a.dones.sum())
            params = [dict(r.ac.named_parameters()) for r in runners]
            assert all(torch.equal(params[0][k], params[1][k]) for k in params[0]), f"iteration {it}"
        assert ended > 0, "no episode ended: nothing restarted"
    finally:
        for r in runners:
            r.close()
