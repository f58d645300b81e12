"""The report folder: an earlier report is replaced whole, an interrupted evaluation leaves it intact, and a folder
holding anything else is refused before any rollout."""

from __future__ import annotations

import json

import pytest

from rgsd_envs.motion.library import MotionLib
from rgsd_envs.utils.files import InputFileError
from rgsd_eval import pipeline
from rgsd_eval.config import EvalConfig
from rgsd_eval.pipeline import run_evaluation
from rgsd_eval.testing import make_fake_run

QUICK = EvalConfig(rollouts=1, kappas=(20.0,), video=False, progress=False)


def _ctrl_c(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.fixture(scope="module")
def walk_clip(tmp_path_factory):
    """One demo clip as a file: the shortest motion set an evaluation runs on."""
    return MotionLib("demo").clips[0].save(tmp_path_factory.mktemp("clips") / "walk.npz")


def test_an_earlier_report_is_replaced_whole_and_an_interrupted_one_leaves_it_intact(walk_clip, tmp_path, monkeypatch):
    first, second = make_fake_run(tmp_path / "r1"), make_fake_run(tmp_path / "r2", seed=1)
    out = tmp_path / "e2"
    run_evaluation([first], walk_clip, out, QUICK)
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert (out / "r1" / "clip_latents.json").is_file()
    monkeypatch.setattr(pipeline, "write_report", _ctrl_c)  # Ctrl-C after r2's figures were drawn
    with pytest.raises(KeyboardInterrupt):
        run_evaluation([second], walk_clip, out, QUICK)
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e2", "r1", "r2"]  # no half-written folder beside it

    monkeypatch.undo()
    paths = run_evaluation([second], walk_clip, out, QUICK)
    assert paths["report"] == out / "report.md" and paths["config"] == out / "eval_config.yaml"
    assert list(json.loads((out / "metrics.json").read_text())["runs"]) == ["r2"]
    assert not (out / "r1").exists()  # the earlier run's clip_latents.json is gone with its report
    assert (out / "r2" / "clip_latents.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e2", "r1", "r2"]


def test_an_interrupted_first_evaluation_leaves_no_folder(walk_clip, tmp_path, monkeypatch):
    run = make_fake_run(tmp_path / "r1")
    monkeypatch.setattr(pipeline, "write_report", _ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        run_evaluation([run], walk_clip, tmp_path / "new" / "e1", QUICK)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r1"]


def test_a_folder_holding_other_files_is_refused_before_any_rollout(walk_clip, tmp_path, monkeypatch):
    run = make_fake_run(tmp_path / "r1")
    monkeypatch.setattr(pipeline, "evaluate_run", lambda *a, **k: pytest.fail("evaluated"))
    notes = tmp_path / "results"
    notes.mkdir()
    (notes / "notes.txt").write_text("mine")
    with pytest.raises(InputFileError, match=r"--out holds files that are not an rgsd eval report \(notes\.txt\)"):
        run_evaluation([run], walk_clip, notes, QUICK)
    assert (notes / "notes.txt").read_text() == "mine"
    with pytest.raises(InputFileError, match=r"--out holds the run folder .*r1"):
        run_evaluation([run], walk_clip, tmp_path, QUICK)  # it would be replaced with the report
    with pytest.raises(InputFileError, match="not a folder"):
        run_evaluation([run], walk_clip, notes / "notes.txt", QUICK)


def test_an_empty_folder_or_one_reproduce_cleared_is_written_into(walk_clip, tmp_path):
    run = make_fake_run(tmp_path / "r1")
    out = tmp_path / "eval"
    out.mkdir()
    (out / ".lock").write_text("")  # what `rgsd reproduce` leaves in a step folder it cleared
    run_evaluation([run], walk_clip, out, QUICK)
    assert (out / "report.md").is_file() and not (out / ".lock").exists()
