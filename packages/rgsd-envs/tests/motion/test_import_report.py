"""``rgsd-motions import`` writes import_report.json and a summary; the real clips fit their joints exactly."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from rgsd_envs.motion.cli import main
from rgsd_envs.motion.importer import REPORT_NAME


@pytest.fixture(scope="module")
def mit_import(real_motion_files, tmp_path_factory) -> tuple[dict, str]:
    """The MIT clips in motions/deepmimic-smpl imported with the CLI: the report and what it printed."""
    out = tmp_path_factory.mktemp("mit")
    mit_clips = real_motion_files[0].parent
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["import", str(mit_clips), "--out", str(out), "--quiet"]) == 0
    return json.loads((out / REPORT_NAME).read_text()), buf.getvalue()


def test_mit_clips_import_with_every_joint_residual_under_a_thousandth_of_a_degree(mit_import):
    report, printed = mit_import
    assert report["kept"] == 8 and report["rejected"] == 0
    worst = max(report["files"], key=lambda f: f["max_residual_deg"])
    assert worst["max_residual_deg"] < 1e-3, worst
    assert printed.startswith("kept 8, skipped 0 shape file(s), rejected 0")


def test_report_has_rates_frames_and_seconds_before_and_after_resampling(mit_import):
    files = {Path(f["source"]).name: f for f in mit_import[0]["files"]}
    spin = files["spinkick_poses.npz"]  # 78 frames at 60 Hz
    assert (spin["status"], spin["source_fps"], spin["frames_in"], spin["frames_out"]) == ("kept", 60.0, 78, 39)
    assert spin["seconds_in"] == pytest.approx(77 / 60) and spin["seconds_out"] == pytest.approx(38 / 30)
    assert spin["category"] == "unlabelled" and Path(spin["clip"]).name == "spinkick.npz"


def test_report_lists_shape_files_as_skipped_and_bad_files_as_rejected(walk_raw, tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    np.savez(src / "a_poses.npz", **walk_raw)
    np.savez(src / "shape.npz", betas=np.zeros(16), gender=np.array("female"))
    (src / "b_poses.npz").write_bytes(b"PK\x03\x04 not really")
    assert main(["import", str(src), "--out", str(tmp_path / "out"), "--quiet", "--category", "walk"]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("kept 1, skipped 1 shape file(s), rejected 1")
    assert "truncated or corrupt" in err
    report = json.loads((tmp_path / "out" / REPORT_NAME).read_text())
    status = {Path(f["source"]).name: (f["status"], f["category"]) for f in report["files"]}
    assert status == {
        "a_poses.npz": ("kept", "walk"),
        "shape.npz": ("skipped", None),
        "b_poses.npz": ("rejected", None),
    }
    assert "body-shape file" in next(f["reason"] for f in report["files"] if f["status"] == "skipped")


def test_a_file_shorter_than_one_30_hz_step_is_rejected_and_the_rest_imported(walk_raw, tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    np.savez(src / "a_poses.npz", **walk_raw)
    short = {**walk_raw, "poses": walk_raw["poses"][:3], "trans": walk_raw["trans"][:3]}
    np.savez(src / "b_poses.npz", **{**short, "mocap_framerate": np.array(120.0)})  # 2/120 s
    out_dir = tmp_path / "out"
    assert main(["import", str(src), "--out", str(out_dir), "--quiet"]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("kept 1, skipped 0 shape file(s), rejected 1") and "b_poses.npz" in err
    report = json.loads((out_dir / REPORT_NAME).read_text())
    status = {Path(f["source"]).name: f for f in report["files"]}
    assert status["a_poses.npz"]["status"] == "kept" and (out_dir / "a.npz").is_file()
    bad = status["b_poses.npz"]
    assert bad["status"] == "rejected" and "lasts 0.01667 s" in bad["reason"]
    assert "shorter than one 30 Hz step; needs at least 1/30 s" in bad["reason"] and "'poses'" in bad["reason"]
    assert not (out_dir / "b.npz").exists()


def test_residual_above_10_degrees_is_reported_on_its_own_line(walk_raw, tmp_path, capsys):
    poses = np.zeros((4, 156))
    poses[:, 0] = np.pi / 2
    poses[:, 3 * 4] = np.deg2rad(-40.0)  # L_Knee bent 40 deg the wrong way: 20 deg past its limit
    np.savez(tmp_path / "bad_knee_poses.npz", **{**walk_raw, "poses": poses, "trans": np.zeros((4, 3))})
    out_dir = tmp_path / "out"
    assert main(["import", str(tmp_path / "bad_knee_poses.npz"), "--out", str(out_dir), "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "warning: bad_knee: L_Knee residual 20.0 deg (> 10)" in err
    assert "worst joint residual 20.00 deg (L_Knee in bad_knee)" in out
    entry = json.loads((out_dir / REPORT_NAME).read_text())["files"][0]
    assert (entry["max_residual_joint"], entry["max_residual_deg"]) == ("L_Knee", pytest.approx(20.0))


def test_help_shows_an_example(capsys):
    with pytest.raises(SystemExit):
        main(["import", "--help"])
    assert "rgsd-motions import ~/AMASS/ACCAD --out clips/" in capsys.readouterr().out


def test_a_clip_too_short_for_the_evaluation_s_fid_is_warned_about_at_import_and_by_info(walk_raw, tmp_path, capsys):
    from rgsd_envs.motion.fid_window import FID_WINDOW, min_fid_frames

    assert min_fid_frames() == FID_WINDOW + 1 == 16
    # 37 frames at 120 Hz: 0.30 s, kept as a 10-frame clip at 30 Hz
    short = {**walk_raw, "poses": walk_raw["poses"][:37], "trans": walk_raw["trans"][:37]}
    np.savez(tmp_path / "hop_poses.npz", **{**short, "dmpls": walk_raw["dmpls"][:37], "mocap_framerate": 120.0})
    np.savez(tmp_path / "walk_poses.npz", **walk_raw)  # 39 frames: long enough
    out_dir = tmp_path / "clips"
    assert main(["import", str(tmp_path / "hop_poses.npz"), str(tmp_path / "walk_poses.npz"), "--out", str(out_dir),
                 "--quiet"]) == 0  # fmt: skip
    err = capsys.readouterr().err
    warned = [line for line in err.splitlines() if "motion FID" in line]
    assert len(warned) == 1 and warned[0].startswith("warning: hop: 10 frames (0.30 s) is shorter than the 16 frames")
    assert "fid_window = 15" in warned[0] and "read from 37 frames at 120 Hz" in warned[0]
    assert str(tmp_path / "hop_poses.npz") in warned[0]
    assert main(["info", str(out_dir)]) == 0
    printed = capsys.readouterr()
    assert [line.split()[0] for line in printed.out.splitlines()] == ["hop", "walk", "total:"]
    frames = sum(int(line.split()[2]) for line in printed.out.splitlines()[:2])
    seconds = sum(float(line.split()[4]) for line in printed.out.splitlines()[:2])
    totals = printed.out.splitlines()[-1]
    assert totals == f"total: 2 clips, {frames} frames, {seconds:.1f} s; per category: unlabelled 2", totals
    assert printed.err.startswith("warning: hop: 10 frames (0.30 s)") and len(printed.err.splitlines()) == 1


def test_past_three_short_clips_one_line_counts_them_at_import_and_in_info(walk_raw, tmp_path, capsys):
    from rgsd_envs.motion.fid_window import SHORT_EXAMPLES

    short = {**walk_raw, "poses": walk_raw["poses"][:37], "trans": walk_raw["trans"][:37]}
    short = {**short, "dmpls": walk_raw["dmpls"][:37], "mocap_framerate": 120.0}  # 10 frames at 30 Hz
    for i in range(SHORT_EXAMPLES + 2):
        np.savez(tmp_path / f"hop{i}_poses.npz", **short)
    np.savez(tmp_path / "walk_poses.npz", **walk_raw)
    out_dir = tmp_path / "clips"
    assert main(["import", str(tmp_path), "--out", str(out_dir), "--quiet"]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if "motion FID" in line]
    assert len(warned) == 1, warned
    assert warned[0].startswith("warning: 5 clips are shorter than the 16 frames (0.50 s) rgsd eval needs")
    assert ": hop0, hop1, hop2 and 2 more; they train" in warned[0] and warned[0].endswith(
        f"each clip's frames are in {REPORT_NAME} (frames_out, frames_in)"
    )
    files = json.loads((out_dir / REPORT_NAME).read_text())["files"]
    assert sorted(f["name"] for f in files if f["frames_out"] < 16) == [f"hop{i}" for i in range(5)]
    assert main(["info", str(out_dir)]) == 0
    printed = capsys.readouterr()
    assert len(printed.out.splitlines()) == 7  # every clip, with its frames, and the totals
    assert len(printed.err.splitlines()) == 1 and printed.err.startswith("warning: 5 clips are shorter than the 16")
    assert "hop0, hop1, hop2 and 2 more" in printed.err and "the listing above gives each clip's frames" in printed.err
