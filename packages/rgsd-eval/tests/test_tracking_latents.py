"""Per-step latents (Meta Motivo's tracking inference): the rotation that carries a vMF draw along a track, the
rollouts changing a world's skill every step, and a run whose method.json has latent_choice "tracking"."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.observations import FRAME_DIM
from rgsd_envs.envs.torch_env import RGSDTorchEnv
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.runs.run_dir import load_tracking_latents, save_tracking_latents
from rgsd_envs.utils.files import InputFileError
from rgsd_eval.latents import LatentMode
from rgsd_eval.rollouts import RolloutJobs, SkillTracks, eval_env_config, run_rollouts, steer_tracks, track_centres


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


TRACKING_METHOD = {
    "name": "fb_cpr",
    "latent_choice": "tracking",
    "tracking_latents": "tracking_latents.npz",
    "clip_latents": "clip_latents.json",
}
"""The method.json of a Meta Motivo run: per-step latents, and one per clip beside them."""


def test_steering_a_track_turns_its_centre_onto_the_skill_and_keeps_its_angles():
    rng = np.random.default_rng(0)
    track = _unit(rng.standard_normal((2, 5, 16)))
    centre, skill = _unit(rng.standard_normal((2, 16))), _unit(rng.standard_normal((2, 16)))
    turned = steer_tracks(np.concatenate([track, centre[:, None]], 1), centre, skill)
    np.testing.assert_allclose(turned[:, -1], skill, atol=1e-12)  # the centre goes onto the skill
    gram = np.einsum("mtd,msd->mts", track, track)
    np.testing.assert_allclose(np.einsum("mtd,msd->mts", turned[:, :5], turned[:, :5]), gram, atol=1e-12)
    np.testing.assert_array_equal(steer_tracks(track, centre, centre), track)  # the centre itself: unturned
    # a rotation in the plane of (centre, skill): a direction orthogonal to both stays where it is
    e = _unit(np.linalg.svd(np.stack([centre[0], skill[0]]))[2][2])
    np.testing.assert_allclose(steer_tracks(e[None, None], centre[:1], skill[:1])[0, 0], e, atol=1e-12)


class _Recorder:
    """A policy that stands still and records the skill slice of every observation it acts on."""

    def __init__(self) -> None:
        self.skills: list[np.ndarray] = []

    def act(self, obs: torch.Tensor) -> torch.Tensor:
        self.skills.append(obs[:, FRAME_DIM:].cpu().double().numpy())
        return torch.zeros(obs.shape[0], 69)


def test_rollouts_give_each_world_its_clips_latent_of_the_step(tmp_path):
    lib = MotionLib("demo")
    rng = np.random.default_rng(1)
    latents = [_unit(rng.standard_normal((int(n) - 1, 16))) for n in lib.num_frames]
    tracks = SkillTracks(latents, track_centres(latents))
    cfg, _ = eval_env_config(EnvConfig())
    env = RGSDTorchEnv(3, config=cfg, motions=lib, encoder_reward=False)
    other = _unit(rng.standard_normal(16))
    jobs = RolloutJobs([0, 1, 1], np.stack([tracks.centres[0], tracks.centres[1], other]), 0, False)
    policy = _Recorder()
    try:
        run_rollouts(env, policy, jobs, features=False, max_frames=12, skill_tracks=tracks)
    finally:
        env.close()
    seen = np.stack(policy.skills)  # (11 steps, 3 worlds, 16): the step from frame t acts with row t
    np.testing.assert_allclose(seen[:, 0], latents[0][:11], atol=1e-6)
    np.testing.assert_allclose(seen[:, 1], latents[1][:11], atol=1e-6)
    turned = steer_tracks(latents[1][None, :11], tracks.centres[1:2], other[None])[0]
    np.testing.assert_allclose(seen[:, 2], turned, atol=1e-6)
    with pytest.raises(ValueError, match="frames - 1 latents per clip"):
        run_rollouts(env, policy, jobs, skill_tracks=SkillTracks(latents[:-1], tracks.centres[:-1]))


def test_a_run_with_tracking_latents_is_evaluated_with_them_and_its_whole_clip_latents_stay_reachable(tmp_path):
    from rgsd_eval.config import EvalConfig
    from rgsd_eval.evaluate import ReferenceFeatures, evaluate_run
    from rgsd_eval.runs import load_run
    from rgsd_eval.testing import make_fake_run

    run = make_fake_run(tmp_path / "fb", p_imitation=0.0, encoder_hidden=None, method=TRACKING_METHOD)
    lib = MotionLib("demo")
    rng = np.random.default_rng(0)
    per_step = {name: torch.nn.functional.normalize(torch.randn(int(n) - 1, 16), dim=-1)
                for name, n in zip(lib.names, lib.num_frames)}  # fmt: skip
    save_tracking_latents(run / "tracking_latents.npz", per_step)
    (run / "clip_latents.json").write_text(json.dumps({n: rng.standard_normal(16).tolist() for n in lib.names}))
    loaded = load_run(run)
    assert loaded.latent == LatentMode("tracking") and loaded.tracking_latents == run / "tracking_latents.npz"
    assert load_run(run, latent="stored").clip_latents == run / "clip_latents.json"  # the whole-clip average
    back = load_tracking_latents(run / "tracking_latents.npz", list(lib.names), lib.num_frames.tolist())
    for name, z in zip(lib.names, back):
        np.testing.assert_allclose(z, per_step[name].numpy(), atol=1e-7)
    cfg = EvalConfig(rollouts=2, kappas=(20.0,), video=False, progress=False, trajectory_rollouts=2, sweep_clips=1)
    ev = evaluate_run(loaded, lib, ReferenceFeatures.of(lib, cfg.fid_window), cfg)
    assert ev.metrics["latent"] == "tracking"
    centres = track_centres(back)
    for c, name in enumerate(lib.names):
        np.testing.assert_allclose(ev.metrics["clip_latents"][name], centres[c], atol=1e-12)
    with pytest.raises(InputFileError, match="frames needs"):
        load_tracking_latents(run / "tracking_latents.npz", list(lib.names), (lib.num_frames + 1).tolist())
    with pytest.raises(InputFileError, match="latent_choice tracking"):
        load_run(make_fake_run(tmp_path / "ase", p_imitation=0.0), latent="tracking")


def test_the_paper_protocol_scores_a_per_step_run_with_its_one_latent_per_motion(tmp_path):
    """Paper Section 5.1 scores every method with one latent per motion: under the paper protocol "auto" gives a
    tracking run its stored clip latent (B averaged over the clip); the quick protocol keeps the per-step track."""
    from rgsd_eval.config import EvalConfig
    from rgsd_eval.runs import load_run
    from rgsd_eval.testing import make_fake_run

    run = make_fake_run(tmp_path / "fb", p_imitation=0.0, encoder_hidden=None, method=TRACKING_METHOD)
    lib = MotionLib("demo")
    save_tracking_latents(
        run / "tracking_latents.npz", {n: torch.ones(int(f) - 1, 16) / 4.0 for n, f in zip(lib.names, lib.num_frames)}
    )
    (run / "clip_latents.json").write_text(json.dumps({n: [0.25] * 16 for n in lib.names}))
    paper, quick = EvalConfig.for_protocol("paper"), EvalConfig.for_protocol("quick")
    assert not paper.per_step_latents and quick.per_step_latents and paper.overrides() == {}
    one = load_run(run, paper.latent, per_step=paper.per_step_latents)
    assert one.latent == LatentMode("stored") and one.clip_latents == run / "clip_latents.json"
    assert load_run(run, quick.latent, per_step=quick.per_step_latents).latent == LatentMode("tracking")
    assert load_run(run, "tracking", per_step=False).latent == LatentMode("tracking")  # asked for: kept
    # another method's choice is not touched
    calm = make_fake_run(
        tmp_path / "calm",
        p_imitation=0.0,
        encoder_hidden=None,
        method={"name": "calm", "latent_choice": "clip_latents", "clip_latents": "clip_latents.json"},
    )
    (calm / "clip_latents.json").write_text((run / "clip_latents.json").read_text())
    assert load_run(calm, per_step=False).latent == LatentMode("stored")
    (run / "method.json").write_text(json.dumps({k: v for k, v in TRACKING_METHOD.items() if k != "clip_latents"}))
    with pytest.raises(InputFileError, match="one latent per motion"):
        load_run(run, per_step=False)


def test_run_evaluation_hands_the_protocol_s_latent_rule_to_each_run(tmp_path, monkeypatch):
    """``rgsd eval --protocol paper`` loads runs with per_step False (the pipeline passes the setting through)."""
    from rgsd_eval import pipeline
    from rgsd_eval.config import EvalConfig

    seen = []

    def fake_load_run(*args, **kwargs):
        seen.append(kwargs.get("per_step"))
        raise RuntimeError("stop")

    monkeypatch.setattr(pipeline, "load_run", fake_load_run)
    monkeypatch.setattr(pipeline.RunDir, "check_kind", lambda *a, **k: None)
    for name, expected in (("paper", False), ("quick", True)):
        with pytest.raises(RuntimeError, match="stop"):
            pipeline.run_evaluation([str(tmp_path / "r")], "demo", tmp_path / "out", EvalConfig.for_protocol(name))
        assert seen[-1] is expected
