"""``rgsd-motions import`` loses no clip: one name from two source files, imports into a folder that has clips."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rgsd_envs.motion.cli import main
from rgsd_envs.motion.clip import load_clip
from rgsd_envs.motion.importer import RENAME_EXAMPLES, REPORT_NAME, file_jobs, import_motions
from rgsd_envs.motion.library import load_motions


def amass_file(path: Path, walk_raw: dict, frames: int) -> Path:
    """The first ``frames`` frames of the real walk as an SMPL+H file (frames tell the files apart)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **{**walk_raw, **{k: walk_raw[k][:frames] for k in ("poses", "trans", "dmpls")}})
    return path


def report_of(out: Path) -> dict:
    return json.loads((out / REPORT_NAME).read_text())


def kept(out: Path) -> dict[str, tuple[str, str]]:
    """Clip name -> (source file name with its folder, category) of the report's kept entries."""
    return {
        f["name"]: (f"{Path(f['source']).parent.name}/{Path(f['source']).name}", f["category"])
        for f in report_of(out)["files"]
        if f["status"] == "kept"
    }


def run(*args: str | Path) -> int:
    return main(["import", *map(str, args), "--quiet"])


# --- one name, two source files ------------------------------------------------


def test_files_of_one_name_in_two_folders_become_two_clips_named_by_their_folders(walk_raw, tmp_path, capsys):
    a = amass_file(tmp_path / "a" / "walk_poses.npz", walk_raw, 6)
    b = amass_file(tmp_path / "b" / "walk_poses.npz", walk_raw, 8)
    out = tmp_path / "out"
    assert run(tmp_path / "a", tmp_path / "b", "--out", out) == 0
    _, err = capsys.readouterr()
    assert sorted(p.name for p in out.iterdir()) == ["a_walk.npz", "b_walk.npz", REPORT_NAME]
    assert [(c.name, c.num_frames) for c in load_motions(out)] == [("a_walk", 6), ("b_walk", 8)]
    assert f"note: {a} imported as a_walk: 'walk' is also the name of {b}" in err
    entries = {f["name"]: f for f in report_of(out)["files"]}
    assert entries["b_walk"]["renamed_from"] == "walk" and str(a) in entries["b_walk"]["reason"]


def test_many_renamed_files_get_one_counting_note_and_a_few_examples(walk_raw, tmp_path, capsys):
    """A line per renamed file, each naming every other file of its name, grows as the square of the files."""
    folders = [f"subj{i:02d}" for i in range(6)]
    for folder in folders:
        for take in ("walk", "run"):
            amass_file(tmp_path / folder / f"{take}_poses.npz", walk_raw, 6)
    out = tmp_path / "out"
    assert run(*(tmp_path / f for f in folders), "--out", out) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith(("note:", "  "))]
    assert notes[0].startswith("note: 12 clips renamed after their folders because their file names repeat")
    assert REPORT_NAME in notes[0] and len(notes) == 1 + RENAME_EXAMPLES
    assert notes[1] == f"  {tmp_path / 'subj00' / 'run_poses.npz'} -> subj00_run"
    renamed = [f for f in report_of(out)["files"] if f["renamed_from"]]
    assert len(renamed) == 12 and all(str(tmp_path / "subj05") in f["reason"] for f in renamed[:4])


def test_parent_folders_of_one_name_are_told_apart_by_the_folders_above(walk_raw, tmp_path):
    for subject in ("x", "y"):
        amass_file(tmp_path / subject / "s1" / "walk_poses.npz", walk_raw, 6)
    amass_file(tmp_path / "x" / "s1" / "run_poses.npz", walk_raw, 6)
    import_motions(file_jobs([tmp_path / "x", tmp_path / "y"]), tmp_path / "out", progress=False)
    assert sorted(p.stem for p in (tmp_path / "out").glob("*.npz")) == ["run", "x_s1_walk", "y_s1_walk"]


def test_files_of_one_folder_that_ask_for_one_name_are_numbered(walk_raw, tmp_path):
    amass_file(tmp_path / "a" / "walk_poses.npz", walk_raw, 6)
    amass_file(tmp_path / "a" / "walk.npz", walk_raw, 8)
    import_motions(file_jobs([tmp_path / "a"]), tmp_path / "out", progress=False)
    frames = {c.name: c.num_frames for c in load_motions(tmp_path / "out")}
    assert frames == {"a_walk": 8, "a_walk_2": 6}  # walk.npz sorts first


def test_a_file_given_twice_is_imported_once_under_its_own_name(walk_raw, tmp_path):
    a = amass_file(tmp_path / "a" / "walk_poses.npz", walk_raw, 6)
    assert run(tmp_path / "a", a, "--out", tmp_path / "out") == 0
    assert kept(tmp_path / "out") == {"walk": ("a/walk_poses.npz", "unlabelled")}


# --- one call per clip into one folder ------------------------------------------


def test_one_call_per_clip_keeps_every_call_in_the_report(walk_raw, tmp_path):
    out = tmp_path / "out"
    assert run(amass_file(tmp_path / "walk_poses.npz", walk_raw, 6), "--out", out, "--category", "walk") == 0
    assert run(amass_file(tmp_path / "run_poses.npz", walk_raw, 8), "--out", out, "--category", "run") == 0
    assert kept(out) == {
        "walk": (f"{tmp_path.name}/walk_poses.npz", "walk"),
        "run": (f"{tmp_path.name}/run_poses.npz", "run"),
    }
    assert report_of(out)["kept"] == 2


def test_importing_a_source_again_rewrites_its_clip_and_replaces_its_entry(walk_raw, tmp_path):
    src = amass_file(tmp_path / "a" / "walk_poses.npz", walk_raw, 6)
    out = tmp_path / "out"
    assert run(src, "--out", out, "--category", "walk") == 0
    assert run(src, "--out", out, "--category", "jog") == 0
    assert kept(out) == {"walk": ("a/walk_poses.npz", "jog")} and len(report_of(out)["files"]) == 1
    assert load_clip(out / "walk.npz").category == "jog"


def test_a_name_an_earlier_call_wrote_from_another_file_stays_with_that_file(walk_raw, tmp_path, capsys):
    out = tmp_path / "out"
    a = amass_file(tmp_path / "a" / "walk_poses.npz", walk_raw, 6)
    b = amass_file(tmp_path / "b" / "walk_poses.npz", walk_raw, 8)
    assert run(a, "--out", out, "--category", "walk") == 0
    for _ in range(2):  # the second time rewrites b's own clip
        assert run(b, "--out", out, "--category", "jog") == 0
    assert f"imported as b_walk: 'walk' is also the name of {a}" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["b_walk.npz", REPORT_NAME, "walk.npz"]
    assert load_clip(out / "walk.npz").num_frames == 6 and load_clip(out / "b_walk.npz").num_frames == 8
    assert kept(out) == {"walk": ("a/walk_poses.npz", "walk"), "b_walk": ("b/walk_poses.npz", "jog")}
    # both again in one call: each keeps the clip it has in the folder
    assert run(tmp_path / "a", tmp_path / "b", "--out", out) == 0
    assert sorted(p.name for p in out.iterdir()) == ["b_walk.npz", REPORT_NAME, "walk.npz"]


def test_a_renamed_file_imported_again_alone_rewrites_its_own_clip(walk_raw, tmp_path, capsys):
    out = tmp_path / "out"
    amass_file(tmp_path / "x" / "s1" / "walk_poses.npz", walk_raw, 6)
    renamed = amass_file(tmp_path / "y" / "s1" / "walk_poses.npz", walk_raw, 8)
    amass_file(tmp_path / "y" / "s1" / "walk.npz", walk_raw, 10)
    assert run(tmp_path / "x", tmp_path / "y", "--out", out) == 0
    first = kept(out)
    assert first == {
        "x_s1_walk": ("s1/walk_poses.npz", "unlabelled"),
        "s1_walk": ("s1/walk.npz", "unlabelled"),
        "s1_walk_2": ("s1/walk_poses.npz", "unlabelled"),
    }
    capsys.readouterr()
    for category in ("jog", "run"):  # twice: the second import reads the report the first one wrote
        assert run(renamed, "--out", out, "--category", category) == 0
        assert sorted(p.stem for p in out.glob("*.npz")) == ["s1_walk", "s1_walk_2", "x_s1_walk"]
        assert load_clip(out / "s1_walk_2.npz").category == category
        assert kept(out) == {**first, "s1_walk_2": ("s1/walk_poses.npz", category)}
    assert f"note: {renamed} imported as s1_walk_2: an earlier import named this file's clip s1_walk_2" in (
        capsys.readouterr().err
    )
    entry = next(f for f in report_of(out)["files"] if f["name"] == "s1_walk_2")
    assert entry["renamed_from"] == "walk" and entry["source"] == str(renamed)
    assert run(tmp_path / "x", tmp_path / "y", "--out", out) == 0  # all again: the same three clips
    assert kept(out) == first


def test_a_clip_the_report_does_not_list_is_not_overwritten_by_another_file(walk_raw, tmp_path):
    out = tmp_path / "out"
    import_motions(file_jobs([amass_file(tmp_path / "a" / "walk_poses.npz", walk_raw, 6)]), out, progress=False)
    (out / REPORT_NAME).unlink()  # the clip's own source field names its file
    import_motions(file_jobs([amass_file(tmp_path / "b" / "walk_poses.npz", walk_raw, 8)]), out, progress=False)
    assert {c.name: c.num_frames for c in load_motions(out)} == {"walk": 6, "b_walk": 8}


def test_an_amass_file_in_the_output_folder_is_not_overwritten_by_its_clip(walk_raw, tmp_path):
    src = amass_file(tmp_path / "data" / "walk.npz", walk_raw, 6)
    before = src.read_bytes()
    import_motions(file_jobs([src]), tmp_path / "data", progress=False)
    assert src.read_bytes() == before and load_clip(tmp_path / "data" / "data_walk.npz").num_frames == 6


def test_earlier_skipped_and_rejected_entries_stay_until_their_file_is_read_again(walk_raw, tmp_path):
    out = tmp_path / "out"
    bad = tmp_path / "bad_poses.npz"
    bad.write_bytes(b"PK\x03\x04 not really")
    assert run(bad, "--out", out) == 1
    assert run(amass_file(tmp_path / "walk_poses.npz", walk_raw, 6), "--out", out) == 0
    assert {f["status"] for f in report_of(out)["files"]} == {"kept", "rejected"}
    amass_file(bad, walk_raw, 6)
    assert run(bad, "--out", out) == 0
    assert sorted(kept(out)) == ["bad", "walk"] and report_of(out)["rejected"] == 0


def test_a_deleted_clip_leaves_the_report(walk_raw, tmp_path):
    out = tmp_path / "out"
    assert run(amass_file(tmp_path / "walk_poses.npz", walk_raw, 6), "--out", out) == 0
    (out / "walk.npz").unlink()
    assert run(amass_file(tmp_path / "run_poses.npz", walk_raw, 6), "--out", out) == 0
    assert sorted(kept(out)) == ["run"]


def test_paper_clips_not_found_stay_listed_until_a_paper_set_import(walk_raw, tmp_path):
    out = tmp_path / "out"
    jobs = file_jobs([amass_file(tmp_path / "walk_poses.npz", walk_raw, 6)])
    import_motions(jobs, out, progress=False, missing=["Male2Walking_c3d/B9____Walk_turn_left_90"])
    import_motions(jobs, out, progress=False)
    assert report_of(out)["missing"] == ["Male2Walking_c3d/B9____Walk_turn_left_90"]
    import_motions(jobs, out, progress=False, missing=[])
    assert report_of(out)["missing"] == []


def test_an_unreadable_report_in_the_output_folder_is_an_error_naming_it(walk_raw, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / REPORT_NAME).write_text("{not json")
    assert run(amass_file(tmp_path / "walk_poses.npz", walk_raw, 6), "--out", out) == 2
    assert capsys.readouterr().err.startswith(f"error: {out / REPORT_NAME}: not a readable import report")
    assert sorted(p.name for p in out.iterdir()) == [REPORT_NAME]


# --- the output folder inside an input folder -----------------------------------


def test_a_second_import_skips_the_clips_of_its_output_folder_inside_the_input(walk_raw, tmp_path, capsys):
    data = tmp_path / "my data"
    amass_file(data / "walk_poses.npz", walk_raw, 6)
    amass_file(data / "run_poses.npz", walk_raw, 8)
    out = data / "clips"
    assert run(data, "--out", out) == 0
    capsys.readouterr()
    assert run(data, "--out", out) == 0
    printed, err = capsys.readouterr()
    assert printed.startswith("kept 2, skipped 0 shape file(s) and 2 clip(s) already in the output folder, rejected 0")
    assert "rejected" not in err and "note:" not in err
    assert sorted(p.name for p in out.iterdir()) == [REPORT_NAME, "run.npz", "walk.npz"]
    assert sorted(kept(out)) == ["run", "walk"] and len(report_of(out)["files"]) == 2


def test_an_rgsd_clip_outside_the_output_folder_is_still_rejected(walk_raw, tmp_path, capsys):
    import_motions(file_jobs([amass_file(tmp_path / "walk_poses.npz", walk_raw, 6)]), tmp_path / "a", progress=False)
    assert run(tmp_path / "a" / "walk.npz", "--out", tmp_path / "b") == 1
    assert "already an rgsd clip" in capsys.readouterr().err


def test_import_help_says_how_clips_are_named_and_the_report_merged(capsys):
    with pytest.raises(SystemExit):
        main(["import", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "named by their parent folder" in text and "merged" in text and "already in the output folder" in text


def test_a_file_imported_again_from_another_working_directory_rewrites_its_own_clip(walk_raw, tmp_path, monkeypatch):
    """The report and the clip name their source by its absolute path, so the file is known from anywhere."""
    amass_file(tmp_path / "data" / "walk_poses.npz", walk_raw, 6)
    monkeypatch.chdir(tmp_path)
    assert run("data/walk_poses.npz", "--out", "clips") == 0
    monkeypatch.chdir(tmp_path / "data")
    assert run("walk_poses.npz", "--out", "../clips") == 0
    assert sorted(p.name for p in (tmp_path / "clips").iterdir()) == [REPORT_NAME, "walk.npz"]
    entries = report_of(tmp_path / "clips")["files"]
    assert [e["source"] for e in entries] == [str(tmp_path / "data" / "walk_poses.npz")]
    assert load_clip(tmp_path / "clips" / "walk.npz").source == str(tmp_path / "data" / "walk_poses.npz")


def test_a_file_imported_again_and_rejected_has_one_entry(walk_raw, tmp_path):
    src = amass_file(tmp_path / "data" / "walk_poses.npz", walk_raw, 6)
    out = tmp_path / "clips"
    assert run(src, "--out", out) == 0
    src.write_bytes(b"not an npz")
    run(src, "--out", out)
    entries = report_of(out)["files"]
    assert [(e["source"], e["status"]) for e in entries] == [(str(src), "rejected")]
