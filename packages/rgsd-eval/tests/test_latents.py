"""Latent selection: parsing the mode, the automatic choice, best-of-N picking and reproducible sampling."""

from __future__ import annotations

import numpy as np
import pytest

from rgsd_eval.latents import (
    LatentMode,
    auto_latent_mode,
    parse_latent_mode,
    search_candidates,
    select_best,
    vmf_samples,
)


def test_parse_latent_mode():
    assert parse_latent_mode("auto") == LatentMode("auto")
    assert parse_latent_mode("Encoder") == LatentMode("encoder")
    assert parse_latent_mode("best-of-500") == LatentMode("best-of", 500)
    assert str(parse_latent_mode("best-of-7")) == "best-of-7"
    for bad in ("best-of-0", "best-of", "best", "zm", "best-of--3"):
        with pytest.raises(ValueError, match="best-of-N"):
            parse_latent_mode(bad)


def test_auto_mode_picks_best_of_n_for_runs_without_a_grounded_encoder():
    assert auto_latent_mode(0.7, "pretrained", True) == LatentMode("encoder")
    assert auto_latent_mode(0.7, None, True) == LatentMode("encoder")
    assert auto_latent_mode(0.0, "pretrained", True, n=9) == LatentMode("best-of", 9)  # no imitation episodes
    assert auto_latent_mode(0.7, "random", True).kind == "best-of"  # DIAYN ablation encoder
    assert auto_latent_mode(0.7, "pretrained", False).kind == "best-of"  # no encoder file


def test_select_best_takes_the_lowest_finite_error_per_clip():
    cand = np.arange(2 * 3 * 16, dtype=float).reshape(2, 3, 16)
    err = np.array([[0.5, 0.2, 0.9], [np.nan, 0.7, 0.3]])
    best, idx = select_best(cand, err)
    np.testing.assert_array_equal(idx, [1, 2])
    np.testing.assert_array_equal(best, cand[[0, 1], [1, 2]])


def test_sampling_is_unit_norm_and_reproducible_per_clip():
    a = search_candidates(3, 50, seed=4)
    np.testing.assert_allclose(np.linalg.norm(a, axis=-1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(search_candidates(5, 50, seed=4)[:3], a)  # clip c's draws do not depend on M
    assert not np.allclose(search_candidates(3, 50, seed=5), a)
    mu = np.eye(16)[0]
    np.testing.assert_array_equal(vmf_samples(mu, 100.0, 8, 0, 2), vmf_samples(mu, 100.0, 8, 0, 2))
    assert not np.allclose(vmf_samples(mu, 100.0, 8, 0, 2), vmf_samples(mu, 100.0, 8, 0, 3))


def test_a_kappa_draws_the_same_latents_whichever_kappas_are_evaluated_beside_it():
    """vMF samples are seeded by the kappa's value, not its place in the plan: adding a kappa to --kappas leaves
    the others' latents (and so their rollouts) the same."""
    from types import SimpleNamespace

    from rgsd_eval.config import EvalConfig
    from rgsd_eval.evaluate import _eval_jobs

    lib = SimpleNamespace(num_clips=3)
    latents = search_candidates(3, 1, seed=0)[:, 0]
    skills = {}
    for kappas in ((100.0,), (20.0, 100.0)):
        cfg = EvalConfig(kappas=kappas, rollouts=5, video=False)
        plan = cfg.kappa_plan(["walk", "run", "punch"], [])
        jobs = _eval_jobs(lib, latents, cfg, plan)
        skills[kappas] = jobs.skill[jobs.group == 1 + list(plan).index(100.0)]
    assert skills[(100.0,)].shape == (3 * 5, 16)
    np.testing.assert_array_equal(skills[(20.0, 100.0)], skills[(100.0,)])


def test_auto_mode_follows_the_run_s_method_json(tmp_path):
    from rgsd_envs.utils.files import InputFileError
    from rgsd_eval.runs import load_run
    from rgsd_eval.testing import make_fake_run

    calm = make_fake_run(
        tmp_path / "calm", p_imitation=0.0, method={"name": "calm", "latent_choice": "encoder", "encoder": "calm.pt"}
    )
    loaded = load_run(calm, best_of=8)
    assert loaded.latent == LatentMode("encoder") and loaded.encoder_path == calm / "calm.pt"
    assert loaded.method == "calm"
    ase = make_fake_run(tmp_path / "ase", p_imitation=0.0, method={"name": "ase", "latent_choice": "best_of_n"})
    loaded = load_run(ase, best_of=8)
    assert loaded.latent == LatentMode("best-of", 8) and loaded.method == "ase"
    # a run written before method.json: the old rule, and the method is read from the config
    assert load_run(make_fake_run(tmp_path / "old"), best_of=8).method == "rgsd"
    (ase / "method.json").write_text('{"name": "ase", "latent_choice": "nearest"}')
    with pytest.raises(InputFileError, match="latent_choice"):
        load_run(ase)


def test_latent_encoder_on_a_method_that_picks_latents_otherwise_warns(tmp_path, caplog):
    """Every baseline's run folder has an encoder.pt (the random initial encoder); --latent encoder evaluates it
    and says that the method does not use it for its clip latents. RGSD's own encoder: no warning."""
    import logging

    from rgsd_eval.runs import load_run
    from rgsd_eval.testing import make_fake_run

    ase = make_fake_run(tmp_path / "ase", p_imitation=0.0, method={"name": "ase", "latent_choice": "best_of_n"})
    rgsd = make_fake_run(
        tmp_path / "rgsd", method={"name": "rgsd", "latent_choice": "encoder", "encoder": "encoder.pt"}
    )
    with caplog.at_level(logging.WARNING, logger="rgsd_eval.runs"):
        assert load_run(rgsd, latent="encoder").encoder_path == rgsd / "encoder.pt"
        assert not caplog.records
        assert load_run(ase, latent="encoder").encoder_path == ase / "encoder.pt"
    [record] = caplog.records
    assert "ase's training does not use for its clip latents" in record.getMessage()
    assert "latent_choice best_of_n" in record.getMessage()


def test_auto_mode_evaluates_the_clip_latents_a_run_stored(tmp_path):
    """A run whose method.json has latent_choice "clip_latents" (FB-CPR) is evaluated with its stored latents."""
    import json

    from rgsd_envs.motion.library import MotionLib
    from rgsd_envs.utils.files import InputFileError
    from rgsd_eval.config import EvalConfig
    from rgsd_eval.evaluate import ReferenceFeatures, evaluate_run
    from rgsd_eval.runs import load_run
    from rgsd_eval.testing import make_fake_run

    method = {"name": "fb_cpr", "latent_choice": "clip_latents", "clip_latents": "latents.json"}
    run = make_fake_run(tmp_path / "fb", p_imitation=0.0, encoder_hidden=None, method=method)
    lib = MotionLib("demo")
    rng = np.random.default_rng(0)
    stored = {name: (3.0 * rng.standard_normal(16)).tolist() for name in lib.names}  # any norm: normalised on read
    (run / "latents.json").write_text(json.dumps(stored))
    loaded = load_run(run, best_of=8)
    assert loaded.latent == LatentMode("stored") and loaded.clip_latents == run / "latents.json"
    assert load_run(run, latent="stored").latent == LatentMode("stored")
    cfg = EvalConfig(rollouts=2, kappas=(20.0,), video=False, progress=False, trajectory_rollouts=2, sweep_clips=1)
    ev = evaluate_run(loaded, lib, ReferenceFeatures.of(lib, cfg.fid_window), cfg)
    assert ev.metrics["latent"] == "stored" and "search" not in ev.metrics
    for name, z in stored.items():
        np.testing.assert_allclose(ev.metrics["clip_latents"][name], np.asarray(z) / np.linalg.norm(z), atol=1e-6)
    with pytest.raises(InputFileError, match="clip_latents"):
        load_run(make_fake_run(tmp_path / "ase", p_imitation=0.0), latent="stored")  # a run without stored latents
    (run / "latents.json").unlink()
    with pytest.raises(InputFileError, match="clip_latents"):
        load_run(run)
