"""Reading a clip_latents.json: every clip asked for, and a warning when rgsd eval chose it for another run."""

from __future__ import annotations

import json
import logging

import pytest
import torch

from rgsd_envs.runs.run_dir import latents_run, load_clip_latents
from rgsd_envs.utils.files import InputFileError


def _report(tmp_path, run_dir, names=("walk", "run")):
    """An rgsd eval report folder holding one run's clip_latents.json; returns that file."""
    report = tmp_path / "report"
    (report / "r1").mkdir(parents=True, exist_ok=True)
    (report / "metrics.json").write_text(json.dumps({"runs": {"r1": {"run_dir": str(run_dir)}}}))
    latents = report / "r1" / "clip_latents.json"
    latents.write_text(json.dumps({n: [3.0, 4.0] for n in names}))
    return latents


def test_latents_read_in_the_library_s_order_as_unit_vectors(tmp_path):
    path = tmp_path / "clip_latents.json"
    path.write_text(json.dumps({"run": [0.0, 2.0], "walk": [3.0, 4.0]}))
    z = load_clip_latents(path, ["walk", "run"])
    assert torch.allclose(z, torch.tensor([[0.6, 0.8], [0.0, 1.0]]))


def test_a_missing_clip_is_named_with_a_count_not_every_clip_asked_for(tmp_path):
    path = tmp_path / "clip_latents.json"
    path.write_text(json.dumps({f"c{i}": [1.0, 0.0] for i in range(3)}))
    names = [f"c{i}" for i in range(500)]
    with pytest.raises(InputFileError, match=r"no latent for clip 'c3' \(497 of the 500 clips asked for have none; it "
                       r"holds 3: c0, c1, c2\); give the motions it was made for") as err:  # fmt: skip
        load_clip_latents(path, names)
    assert "c499" not in str(err.value)
    path.write_text("[1, 2]")
    with pytest.raises(InputFileError, match="must map each clip name to its latent"):
        load_clip_latents(path, ["c0"])


def test_a_missing_clip_of_a_max_clips_report_says_to_evaluate_every_clip(tmp_path):
    latents = _report(tmp_path, tmp_path / "runs" / "diayn")  # the latents of walk and run only
    metrics = latents.parent.parent / "metrics.json"
    names = ["walk", "run", "kick", "jog"]
    for evaluated, of in ((2, 4), (4, 4), (None, None)):
        doc = {"runs": {}, **({"clips_selected": {"clips": evaluated, "of": of}} if evaluated else {})}
        metrics.write_text(json.dumps(doc))
        with pytest.raises(InputFileError, match=r"no latent for clip 'kick' \(2 of the 4 clips asked for") as err:
            load_clip_latents(latents, names)
        partial = "it was written by an evaluation of 2 of 4 clips (--max-clips); evaluate every clip"
        assert (partial in str(err.value)) == (evaluated == 2), str(err.value)
        assert ("give the motions it was made for" in str(err.value)) == (evaluated != 2)


def test_latents_chosen_for_another_run_warn_and_the_same_run_does_not(tmp_path, caplog):
    ran, other = tmp_path / "runs" / "diayn", tmp_path / "runs" / "metra"
    ran.mkdir(parents=True), other.mkdir()
    latents = _report(tmp_path, ran)
    assert latents_run(latents) == ran.resolve()
    with caplog.at_level(logging.WARNING, logger="rgsd_envs.runs.run_dir"):
        load_clip_latents(latents, ["walk"], run=ran)
        assert caplog.records == []
        load_clip_latents(latents, ["walk"], run=other)
    (record,) = caplog.records
    assert f"chose these latents for the run {ran.resolve()}, not for {other}" in record.getMessage()


def test_a_file_outside_a_report_or_of_a_moved_run_is_not_checked(tmp_path, caplog):
    loose = tmp_path / "clip_latents.json"
    loose.write_text(json.dumps({"walk": [1.0, 0.0]}))
    assert latents_run(loose) is None
    moved = _report(tmp_path, tmp_path / "moved_away")
    assert latents_run(moved) is None  # nothing left to compare with
    with caplog.at_level(logging.WARNING):
        load_clip_latents(moved, ["walk"], run=tmp_path)
    assert caplog.records == []
