"""rgsd-eval on a trained checkpoint: a very short ``rgsd train --config demo`` run, then ``rgsd eval``."""

from __future__ import annotations

import json

import pytest
import yaml

from rgsd_agents.cli import main as rgsd
from rgsd_envs.utils.provenance import provenance, provenance_text
from rgsd_eval.config import EvalConfig
from rgsd_eval.pipeline import run_evaluation

pytestmark = pytest.mark.slow


def test_vmf_spread_falls_as_kappa_grows_on_a_trained_demo_checkpoint(demo_run, tmp_path):
    cfg = EvalConfig(rollouts=16, kappas=(20.0, 100.0, 1000.0), video=False, progress=False)
    paths = run_evaluation([demo_run], "demo", tmp_path / "report", cfg)
    run = json.loads(paths["json"].read_text())["runs"]["demo_run"]
    assert run["latent"] == "encoder"
    mean = {k: run["diversity"][k]["mean"] for k in ("20", "100", "1000")}
    angle = [mean[k]["latent_angle_deg"] for k in ("20", "100", "1000")]
    path = [mean[k]["path_spread_m"] for k in ("20", "100", "1000")]
    assert angle[0] > angle[1] > angle[2]
    assert path[0] > path[1] > path[2] > 0, path
    assert mean["20"]["root_spread_m"] > mean["1000"]["root_spread_m"]
    assert mean["20"]["pose_spread"] > mean["1000"]["pose_spread"]


def test_a_report_renders_from_a_short_demo_run(demo_run, tmp_path):
    settings = tmp_path / "eval.yaml"
    settings.write_text(
        yaml.safe_dump(
            {"video_clips": 1, "video_variants": 2, "video_frame_step": 6, "video_size": [96, 72], "progress": False}
        )
    )
    out = tmp_path / "report"
    assert rgsd(["eval", "--run", str(demo_run), "--motions", "demo", "--out", str(out), "--config", str(settings),
                 "--rollouts", "2", "--kappas", "20", "1000"]) == 0  # fmt: skip
    md = (out / "report.md").read_text()
    assert "| demo_run |" in md and "Walk ERR" in md and "Punch FID" in md
    doc = json.loads((out / "metrics.json").read_text())
    im = doc["runs"]["demo_run"]["imitation"]
    assert set(im["categories"]) == {"walk", "run", "sidestep", "backward", "punch"}
    assert all(v["err_cm"] > 0 and v["fid"] >= 0 for v in im["categories"].values())
    assert doc["runs"]["demo_run"]["within_motion_alignment"] > 0.5  # the pretrained encoder groups each clip's states
    # the code that trained the policy is reported beside the code that evaluated it
    assert doc["runs"]["demo_run"]["policy_provenance"] == doc["provenance"] == provenance()
    assert f"- Policy of demo_run written by: {provenance_text(provenance())} (`policy_provenance`;" in md
    for f in ("spread.png", "demo_run/trajectories.png", "demo_run/kappa_sweep.png", "demo_run/embedding.png",
              "demo_run/videos/demo_walk_imitation.mp4", "demo_run/videos/demo_walk_variants_k20.mp4"):  # fmt: skip
        assert (out / f).stat().st_size > 0, f
