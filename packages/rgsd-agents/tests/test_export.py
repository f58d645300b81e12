"""``rgsd export --onnx``: the ONNX policy matches the torch policy in onnxruntime and carries its metadata."""

from __future__ import annotations

import builtins

import numpy as np
import pytest
import torch

from rgsd_agents.cli import main as rgsd
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.runs.onnx_export import read_metadata
from rgsd_envs.runs.policy import load_policy

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def exported(demo_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "walker.onnx"
    assert rgsd(["export", str(demo_run), "--onnx", str(out)]) == 0
    return out


def test_onnx_policy_matches_the_torch_policy_in_onnxruntime(exported, demo_run):
    import onnxruntime as ort

    policy = load_policy(demo_run / "policy.pt")
    session = ort.InferenceSession(str(exported), providers=["CPUExecutionProvider"])
    (inp,) = session.get_inputs()
    assert inp.name == "obs" and inp.shape[1] == 375 and not isinstance(inp.shape[0], int)  # dynamic batch
    assert [o.name for o in session.get_outputs()] == ["action", "pd_target"]
    gen = torch.Generator().manual_seed(1)
    std = (policy.normalizer.var + policy.normalizer.eps).sqrt().float()
    for batch in (1, 33):
        # around the training statistics, with some entries far out (the normaliser's clip is in the graph too)
        obs = policy.normalizer.mean.float() + 3.0 * std * torch.randn(batch, 375, generator=gen)
        action, pd_target = session.run(None, {"obs": obs.numpy()})
        expected = policy.act(obs).numpy()
        assert action.shape == (batch, 69)
        np.testing.assert_allclose(action, expected, atol=1e-5, rtol=0)
        target = sk.ACTION_OFFSET + sk.ACTION_SCALE * np.clip(expected, -1.0, 1.0)
        np.testing.assert_allclose(pd_target, target, atol=1e-5, rtol=0)


def test_onnx_metadata_describes_observation_action_joints_gains_and_skills(exported, demo_run):
    meta = read_metadata(exported)
    assert meta["format"] == "rgsd-onnx-policy" and meta["env_id"] == "RGSD-SMPL-v0"
    layout = meta["observation"]["layout"]
    assert meta["observation"]["dim"] == 375 and layout["phase"] == [0, 1] and layout["skill"] == [359, 375]
    assert layout["body_ang_vel"] == [287, 359]
    assert meta["joint_order"] == list(sk.DOF_NAMES) and len(meta["joint_order"]) == 69
    np.testing.assert_allclose(meta["action"]["offset"], sk.ACTION_OFFSET, atol=1e-8)
    np.testing.assert_allclose(meta["action"]["scale"], sk.ACTION_SCALE, atol=1e-8)
    np.testing.assert_allclose(meta["pd_gains"]["kp"], sk.KP)
    np.testing.assert_allclose(meta["pd_gains"]["kd"], sk.KD)
    assert meta["control_dt"] == pytest.approx(1 / 30) and 0 < meta["physics_timestep"] < meta["control_dt"]
    assert meta["skill_dim"] == 16
    assert meta["clip_names"] == ["demo_walk", "demo_run", "demo_sidestep", "demo_backward", "demo_punch"]
    z = np.asarray(meta["clip_embeddings"])
    assert z.shape == (5, 16)
    np.testing.assert_allclose(np.linalg.norm(z, axis=1), 1.0, atol=1e-6)
    # the skills are the ones `rgsd play` commands (the run's encoder over its clips)
    from rgsd_agents.play import play_rollout

    np.testing.assert_allclose(z[2], play_rollout(demo_run, "demo_sidestep", frames=1).skill, atol=1e-6)


def test_export_without_onnx_says_which_extra_to_install(demo_run, tmp_path, monkeypatch, capsys):
    real_import = builtins.__import__

    def no_onnx(name, *args, **kwargs):
        if name.split(".")[0] in ("onnx", "onnxscript"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_onnx)
    out = tmp_path / "p.onnx"
    assert rgsd(["export", str(demo_run), "--onnx", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "pip install rgsd-envs[export]" in err
    assert not out.exists() and not list(tmp_path.iterdir())


def test_export_of_a_missing_run_names_the_folder(tmp_path, capsys):
    assert rgsd(["export", str(tmp_path / "nope"), "--onnx", str(tmp_path / "p.onnx")]) == 2
    assert "run folder not found" in capsys.readouterr().err
