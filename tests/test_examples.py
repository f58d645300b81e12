"""The documented examples run."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_cleanrl_style_ppo_example_runs_and_logs(load_script, real_clip_dir, tmp_path):
    ex = load_script(EXAMPLES / "cleanrl_style_ppo.py")
    stats = ex.train(
        ex.Args(num_envs=4, total_steps=4 * 16 * 3, num_steps=16, motions=real_clip_dir, logdir=str(tmp_path / "tb"))
    )
    assert np.isfinite(stats["reward"]) and np.isfinite(stats["value_loss"]) and stats["sps"] > 0
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))


def test_cleanrl_style_ppo_bootstraps_truncated_worlds_only(load_script):
    ex = load_script(EXAMPLES / "cleanrl_style_ppo.py")
    term = np.array([True, False, True, False])
    trunc = np.array([False, True, True, False])  # world 2 reports both: termination wins, nothing to bootstrap
    final_obs = np.full(4, None, dtype=object)
    final_obs[[0, 1, 2]] = [np.full(3, 1.0, np.float32), np.full(3, 2.0, np.float32), np.full(3, 3.0, np.float32)]
    reward = ex.bootstrap_truncated(torch.ones(4), term, trunc, {"final_obs": final_obs}, lambda x: x.sum(-1), 0.5)
    assert reward.tolist() == [1.0, 1.0 + 0.5 * 6.0, 1.0, 1.0]


class _EveryStepTruncated:
    """Two worlds whose every step earns 1 and ends by truncation: the env's reward is 1, the value target is not."""

    num_envs = 2
    single_observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    single_action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def reset(self, seed=None):
        return np.zeros((2, 3), np.float32), {}

    def step(self, actions):
        obs = np.ones((2, 3), np.float32)
        return obs, np.ones(2), np.zeros(2, bool), np.ones(2, bool), {"final_obs": obs}

    def close(self):
        pass


def test_cleanrl_style_ppo_logs_the_env_reward_not_the_bootstrapped_target(load_script, monkeypatch):
    ex = load_script(EXAMPLES / "cleanrl_style_ppo.py")
    monkeypatch.setattr(ex.gym, "make_vec", lambda *args, **kwargs: _EveryStepTruncated())
    stats = ex.train(ex.Args(num_envs=2, total_steps=2 * 4 * 2, num_steps=4, epochs=1, minibatches=2, hidden=8))
    assert stats["reward"] == 1.0  # r, not r + gamma V(final_obs), whatever the critic says


def test_cleanrl_style_ppo_flags_carry_the_args_field_docs_as_help(load_script):
    ex = load_script(EXAMPLES / "cleanrl_style_ppo.py")
    actions = {a.dest: a for a in ex.make_parser()._actions if a.dest != "help"}
    assert set(actions) == {f.name for f in dataclasses.fields(ex.Args)}
    assert all(a.help for a in actions.values()), [d for d, a in actions.items() if not a.help]
    assert actions["num_envs"].help == "parallel worlds in the native vector env"
    assert actions["gamma"].help == "discount factor"
    assert "parallel worlds in the native vector env" in ex.make_parser().format_help()


def test_real_mocap_script_imports_the_eight_clips_with_their_categories(real_motion_files, tmp_path):
    import os
    import subprocess

    from rgsd_envs.motion.library import MotionLib

    run = tmp_path / "cpu_mit"
    env = {**os.environ, "STEPS": "import"}
    script = EXAMPLES / "real_mocap_cpu.sh"
    subprocess.run(["bash", str(script), str(real_motion_files[0].parent), str(run)], check=True, env=env)
    lib = MotionLib(str(tmp_path / "cpu_mit_clips"))
    expected = ["jog", "kick", "punch", "run", "spinkick", "stealthy_walk", "walk", "zombie_walk"]
    assert sorted(lib.names) == expected
    assert dict(zip(lib.names, lib.categories)) == {c: c for c in expected}
    # one import per clip: the folder's report keeps every call's entry
    report = json.loads((tmp_path / "cpu_mit_clips" / "import_report.json").read_text())
    assert {f["name"]: (f["status"], f["category"]) for f in report["files"]} == {c: ("kept", c) for c in expected}
    assert not run.exists()  # no training was started


def test_real_mocap_script_loops_the_locomotion_cycles_with_cycles_3(real_motion_files, tmp_path):
    import os
    import subprocess

    from rgsd_envs.motion.library import MotionLib

    run = tmp_path / "looped"
    env = {**os.environ, "STEPS": "import", "CYCLES": "3"}
    subprocess.run(
        ["bash", str(EXAMPLES / "real_mocap_cpu.sh"), str(real_motion_files[0].parent), str(run)], check=True, env=env
    )
    looped = MotionLib(str(tmp_path / "looped_clips"))
    frames = dict(zip(looped.names, looped.num_frames.tolist()))
    # one cycle of 39 / 25 / 26 frames (walk / run / jog at 30 Hz) -> 3 (n - 1) + 1; the kicks and punch as captured
    assert (frames["walk"], frames["run"], frames["jog"]) == (115, 73, 76)
    assert (frames["punch"], frames["kick"], frames["stealthy_walk"]) == (65, 47, 121)


def _clip_commands(script: str, run: Path, bin_dir: Path) -> list[str]:
    """The rgsd-motions calls that ``STEPS=clips examples/<script> run`` makes (recorded by a stub, nothing run)."""
    import os
    import shutil
    import subprocess

    log = bin_dir / f"{script}.log"
    stub = bin_dir / "rgsd-motions"
    # the stub takes the GPU script's `python -m rgsd_envs.motion.cli ...` too, and makes --out as the real one does
    stub.write_text(
        '#!/usr/bin/env bash\n[ "$1" = -m ] && shift 2\necho "$*" >> "$LOG"\n'
        'while [ $# -gt 0 ]; do [ "$1" = --out ] && mkdir -p "$2"; shift; done\n'
    )
    stub.chmod(0o755)
    shutil.rmtree(f"{run}_clips", ignore_errors=True)
    env = {
        **os.environ,
        "STEPS": "clips",
        "LOG": str(log),
        "PYTHON": str(stub),
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
    }
    subprocess.run(["bash", str(EXAMPLES / script), str(run)], check=True, env=env, cwd=EXAMPLES.parent)
    assert not run.exists()  # no training was started
    return log.read_text().splitlines()


def test_both_pretrained_scripts_build_their_clips_with_the_same_commands(tmp_path):
    run = tmp_path / "run"
    cpu = _clip_commands("pretrained_cpu.sh", run, tmp_path)
    gpu = _clip_commands("pretrained_gpu.sh", run, tmp_path)
    assert cpu == gpu
    imports = [c for c in cpu if c.startswith("import ")]
    assert cpu[0] == f"demo --out {run}_clips" and len(imports) == 8
    # every DeepMimic clip with its own category, the looping locomotion clips as 3 cycles
    assert f"import motions/deepmimic-smpl/walk_poses.npz --out {run}_clips --category walk --cycles 3 --quiet" in cpu
    assert f"import motions/deepmimic-smpl/kick_poses.npz --out {run}_clips --category kick --cycles 1 --quiet" in cpu
    assert all("--category unlabelled" not in c and "--category" in c for c in imports)


def test_the_gpu_script_trains_on_the_shipped_cards_clips(tmp_path):
    import os
    import subprocess
    import sys

    from rgsd_agents.pretrained import pretrained_card
    from rgsd_envs.motion.library import MotionLib

    run = tmp_path / "gpu"
    env = {**os.environ, "STEPS": "clips", "PYTHON": sys.executable}
    subprocess.run(["bash", str(EXAMPLES / "pretrained_gpu.sh"), str(run)], check=True, env=env, cwd=EXAMPLES.parent)
    lib = MotionLib(str(tmp_path / "gpu_clips"))
    card = pretrained_card()
    assert dict(zip(lib.names, lib.num_frames.tolist())) == {n: c["frames"] for n, c in card["clips"].items()}
    categories = dict(zip(lib.names, lib.categories))
    assert categories["walk"] == "walk" and categories["zombie_walk"] == "zombie_walk"
    assert categories["demo_backward"] == "backward" and "unlabelled" not in categories.values()
    assert (tmp_path / "gpu_clips" / "LICENSE").is_file() and not run.exists()
