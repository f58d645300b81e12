"""``rgsd export --onnx``: the ONNX policy matches the torch policy in onnxruntime and carries its metadata."""

from __future__ import annotations

import builtins
import re

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
    assert meta["clip_embeddings_from"] == "encoder z_m (encoder.pt)"


def test_export_fails_when_the_graph_s_pd_target_is_wrong_though_its_action_is_right(tmp_path, monkeypatch, capsys):
    """The check compares pd_target too: a graph that dropped the action scale exits 1 and says so."""
    from rgsd_envs.runs import onnx_export
    from rgsd_eval.testing import make_fake_run

    pytest.importorskip("onnxruntime", reason="the export extra: pip install rgsd-envs[export]")
    right = onnx_export.ExportedPolicy.forward

    def unscaled(self, obs):
        action, _ = right(self, obs)
        return action, self.offset + action.clamp(-1.0, 1.0)

    monkeypatch.setattr(onnx_export.ExportedPolicy, "forward", unscaled)
    run = make_fake_run(tmp_path / "run")
    assert rgsd(["export", str(run), "--onnx", str(tmp_path / "p.onnx")]) == 1
    line = capsys.readouterr().out.splitlines()[-1]
    diffs = dict(re.findall(r"(action|pd_target) ([0-9.e+-]+)", line))
    assert line.startswith("onnxruntime DIFFERS from the torch policy")
    assert float(diffs["action"]) <= 1e-5 < 0.1 < float(diffs["pd_target"])


def test_the_onnx_check_feeds_observations_far_beyond_the_normaliser_s_clip(tmp_path, monkeypatch):
    """Half the check's rows lie far outside the training statistics, so a graph without the clip fails it."""
    from rgsd_envs.runs import onnx_export
    from rgsd_envs.runs.run_dir import RunDir
    from rgsd_eval.testing import make_fake_run

    pytest.importorskip("onnxruntime", reason="the export extra: pip install rgsd-envs[export]")
    run = make_fake_run(tmp_path / "run")
    policy = RunDir(run).load_policy()
    seen = []
    act = policy.act
    monkeypatch.setattr(policy, "act", lambda obs: (seen.append(obs), act(obs))[1])

    def unclipped(self, obs):
        action = self.net((obs - self.mean) / self.std)
        return action, self.offset + self.scale * action.clamp(-1.0, 1.0)

    with monkeypatch.context() as m:
        m.setattr(onnx_export.ExportedPolicy, "forward", unclipped)
        onnx_export.export_onnx(run, tmp_path / "unclipped.onnx")
    onnx_export.export_onnx(run, tmp_path / "right.onnx")
    right = onnx_export.check_onnx(tmp_path / "right.onnx", policy, num=64)
    assert max(right.values()) <= 1e-5
    z = (seen[0] - policy.normalizer.mean) / (policy.normalizer.var + policy.normalizer.eps).sqrt()
    beyond = (z.abs() > policy.normalizer.clip).double().mean(dim=1)
    assert seen[0].shape == (64, 375) and (beyond > 0.5).sum() == 32  # 20 sigma: most entries clipped in half the rows
    assert onnx_export.check_onnx(tmp_path / "unclipped.onnx", policy, num=64)["action"] > 0.5


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


def _demo_latents(seed: int) -> dict[str, list[float]]:
    """Distinct unit latents for the demo clips, none of them an encoder's."""
    from rgsd_envs.motion.library import MotionLib

    return {n: np.eye(16)[(i + seed) % 16].tolist() for i, n in enumerate(MotionLib("demo").names)}


def test_a_calm_run_exports_the_clip_latents_it_stored_not_its_unused_encoder(tmp_path):
    """CALM's method.json names its clip_latents.json: the metadata's skills are those, as rgsd play commands."""
    import json

    from rgsd_agents.play import play_rollout
    from rgsd_eval.testing import make_fake_run

    method = {"name": "calm", "latent_choice": "clip_latents", "clip_latents": "clip_latents.json"}
    run = make_fake_run(tmp_path / "calm", p_imitation=0.0, method=method)  # with a random encoder.pt
    latents = _demo_latents(2)
    (run / "clip_latents.json").write_text(json.dumps(latents))
    out = tmp_path / "calm.onnx"
    assert rgsd(["export", str(run), "--onnx", str(out), "--no-check"]) == 0
    meta = read_metadata(out)
    z = np.asarray(meta["clip_embeddings"])
    np.testing.assert_allclose(z, [latents[n] for n in meta["clip_names"]], atol=1e-9)
    np.testing.assert_allclose(z[1], play_rollout(run, meta["clip_names"][1], frames=1).skill, atol=1e-9)
    assert meta["clip_embeddings_from"].startswith("clip_latents.json")


def test_a_meta_motivo_run_exports_the_mean_of_each_clip_s_tracking_latents(tmp_path):
    import torch

    from rgsd_envs.motion.library import MotionLib
    from rgsd_envs.runs.run_dir import save_tracking_latents
    from rgsd_eval.rollouts import track_centres
    from rgsd_eval.testing import make_fake_run

    method = {"name": "fb_cpr", "latent_choice": "tracking", "tracking_latents": "tracking.npz"}
    run = make_fake_run(tmp_path / "fb", p_imitation=0.0, method=method)
    lib = MotionLib("demo")
    torch.manual_seed(0)
    per_step = {n: torch.nn.functional.normalize(torch.randn(int(f) - 1, 16), dim=-1)
                for n, f in zip(lib.names, lib.num_frames)}  # fmt: skip
    save_tracking_latents(run / "tracking.npz", per_step)
    out = tmp_path / "fb.onnx"
    assert rgsd(["export", str(run), "--onnx", str(out), "--no-check"]) == 0
    meta = read_metadata(out)
    centres = track_centres([per_step[n].double().numpy() for n in meta["clip_names"]])
    np.testing.assert_allclose(meta["clip_embeddings"], centres, atol=1e-8)
    assert meta["clip_embeddings_from"].startswith("tracking.npz")


def test_a_best_of_n_run_exports_only_with_the_latents_rgsd_eval_chose(tmp_path, capsys):
    """DIAYN has no latent of its own for a clip: export refuses with rgsd play's line, and --latents gives them."""
    import json

    from rgsd_eval.testing import make_fake_run

    method = {"name": "diayn", "latent_choice": "best_of_n"}
    run = make_fake_run(tmp_path / "diayn", p_imitation=0.0, encoder_init="random", method=method)
    out = tmp_path / "diayn.onnx"
    assert rgsd(["play", str(run), "--frames", "2"]) == 2
    play_err = capsys.readouterr().err.strip()
    assert rgsd(["export", str(run), "--onnx", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == play_err and "\n" not in err and "--latents <report>/diayn/clip_latents.json" in err
    assert not out.exists()
    latents = _demo_latents(5)
    given = tmp_path / "clip_latents.json"
    given.write_text(json.dumps(latents))
    assert rgsd(["export", str(run), "--onnx", str(out), "--latents", str(given), "--no-check"]) == 0
    meta = read_metadata(out)
    np.testing.assert_allclose(meta["clip_embeddings"], [latents[n] for n in meta["clip_names"]], atol=1e-9)
    assert meta["clip_embeddings_from"] == f"{given} (given)"
    assert f"from {given} (given)" in capsys.readouterr().out


def test_the_library_export_of_a_run_whose_method_commands_other_latents_needs_them(tmp_path):
    import json

    from rgsd_envs.runs.onnx_export import ClipSkills, export_onnx
    from rgsd_envs.utils.files import InputFileError
    from rgsd_eval.testing import make_fake_run

    method = {"name": "calm", "latent_choice": "clip_latents", "clip_latents": "clip_latents.json"}
    run = make_fake_run(tmp_path / "calm", p_imitation=0.0, method=method)
    latents = _demo_latents(1)
    (run / "clip_latents.json").write_text(json.dumps(latents))
    with pytest.raises(InputFileError, match=r"latent_choice.*rgsd export"):
        export_onnx(run, tmp_path / "p.onnx")
    names = list(latents)[::-1]  # any order: the metadata follows the run's clips
    skills = ClipSkills(names, np.array([latents[n] for n in names]), "mine")
    meta = read_metadata(export_onnx(run, tmp_path / "p.onnx", skills))
    np.testing.assert_allclose(meta["clip_embeddings"], [latents[n] for n in meta["clip_names"]], atol=1e-9)
    assert meta["clip_embeddings_from"] == "mine"


def test_export_builds_no_env_and_commands_the_clip_embeddings_its_encoder_stores(demo_run, tmp_path, monkeypatch):
    from rgsd_envs.envs import core
    from rgsd_envs.rewards import encoders

    def refused(*args, **kwargs):
        raise AssertionError("the export built an env or embedded the reference frames")

    # building worlds and embedding every reference frame grew with the square of the frames (the default encoder)
    monkeypatch.setattr(core.RGSDCore, "__init__", refused)
    monkeypatch.setattr(encoders, "clip_embeddings", refused)
    out = tmp_path / "policy.onnx"
    assert rgsd(["export", str(demo_run), "--onnx", str(out), "--no-check"]) == 0
    meta = read_metadata(out)
    payload = encoders.read_encoder_file(demo_run / "encoder.pt")
    assert meta["clip_names"] == payload["clip_names"]
    np.testing.assert_allclose(meta["clip_embeddings"], payload["clip_embeddings"].numpy(), atol=1e-8)
    np.testing.assert_allclose(meta["body_offsets"], sk.REST_OFFSETS, atol=1e-8)


def test_a_run_whose_clips_moved_exports_with_motions(tmp_path, capsys):
    """A moved run's config.yaml names clips that are gone: --motions gives them where they are now."""
    from rgsd_agents.commands.export import run_clip_skills
    from rgsd_envs.motion.demo import write_demo_clips
    from rgsd_envs.utils.files import InputFileError
    from rgsd_eval.testing import make_fake_run

    run = make_fake_run(tmp_path / "run", motions=str(tmp_path / "gone"))
    clips = tmp_path / "moved_clips"
    write_demo_clips(clips)
    with pytest.raises(InputFileError, match=r"field 'env\.motions'.*give the clips with --motions PATH"):
        run_clip_skills(str(run))
    skills = run_clip_skills(str(run), motions=str(clips))
    assert sorted(skills.names) == sorted(p.stem for p in clips.glob("*.npz")) and skills.latents.shape[1] == 16
    pytest.importorskip("onnx", reason="the export extra: pip install rgsd-envs[export]")
    pytest.importorskip("onnxscript", reason="the export extra: pip install rgsd-envs[export]")
    out = tmp_path / "p.onnx"
    assert rgsd(["export", str(run), "--onnx", str(out), "--no-check"]) == 2
    assert "--motions PATH" in capsys.readouterr().err
    assert rgsd(["export", str(run), "--onnx", str(out), "--motions", str(clips), "--no-check"]) == 0
    assert sorted(read_metadata(out)["clip_names"]) == sorted(skills.names)
