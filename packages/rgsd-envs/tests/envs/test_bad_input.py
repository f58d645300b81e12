"""Bad input files give clear errors (file, field, what to do); imports never leave partial files."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import numpy as np
import pytest

from rgsd_envs.motion.amass import read_amass
from rgsd_envs.motion.cli import main
from rgsd_envs.motion.clip import load_clip
from rgsd_envs.motion.importer import file_jobs, import_motions
from rgsd_envs.testing import raise_stop_signal, stop_signals_as_in_a_terminal
from rgsd_envs.utils.command import BAD_INPUT
from rgsd_envs.utils.files import InputFileError
from rgsd_envs.utils.signals import INTERRUPTED

DROP = object()
"""Marks a key to leave out of a written file."""


@pytest.fixture(scope="module")
def amass_base(walk_raw) -> dict:
    """The first 6 frames of the real walk, as the arrays of an SMPL+H file."""
    raw = dict(walk_raw)
    for key in ("poses", "trans", "dmpls"):
        raw[key] = raw[key][:6]
    return raw


def write_npz(path, base: dict, **changes) -> str:
    """Write base with keys replaced (or dropped with DROP) as an .npz; returns the path."""
    arrays = {k: v for k, v in {**base, **changes}.items() if v is not DROP}
    np.savez(path, **arrays)
    return str(path)


@pytest.fixture(scope="module")
def rgsd_base(real_clips, tmp_path_factory) -> dict:
    """The arrays of a real rgsd clip file."""
    path = real_clips[0].save(tmp_path_factory.mktemp("clip") / "clip.npz")
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def truncate(path) -> None:
    """Cut a file to half its size."""
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: len(data) // 2])


# --- AMASS files -------------------------------------------------------------


def test_amass_truncated_file_is_named_as_unreadable(amass_base, tmp_path):
    path = write_npz(tmp_path / "a_poses.npz", amass_base)
    truncate(path)
    with pytest.raises(InputFileError, match="truncated or corrupt") as err:
        read_amass(path)
    assert err.value.path == path


def test_a_text_file_is_named_as_not_an_archive_not_as_pickled_data(tmp_path):
    path = tmp_path / "notes_poses.npz"
    path.write_text("walk, 30 fps\n")
    with pytest.raises(InputFileError, match=r"not an \.npz archive") as err:
        read_amass(path)
    assert "pickle" not in str(err.value) and err.value.path == str(path)


def test_amass_corrupt_member_is_named_as_unreadable(amass_base, tmp_path):
    path = tmp_path / "a_poses.npz"
    np.savez_compressed(path, **amass_base)
    data = bytearray(path.read_bytes())
    data[200:260] = bytes(b ^ 0xFF for b in data[200:260])
    path.write_bytes(bytes(data))
    with pytest.raises(InputFileError, match="truncated or corrupt") as err:
        read_amass(path)
    assert err.value.path == str(path)


def test_amass_missing_file_is_named(tmp_path):
    with pytest.raises(InputFileError, match="no such file") as err:
        read_amass(tmp_path / "nope_poses.npz")
    assert err.value.path == str(tmp_path / "nope_poses.npz")


@pytest.mark.parametrize("key", ["poses", "trans"])
def test_amass_missing_key_names_the_key(amass_base, tmp_path, key):
    path = write_npz(tmp_path / "a_poses.npz", amass_base, **{key: DROP})
    with pytest.raises(InputFileError, match="missing") as err:
        read_amass(path)
    assert (err.value.path, err.value.field) == (path, key)


def test_amass_wrong_poses_width_lists_the_accepted_widths(amass_base, tmp_path):
    path = write_npz(tmp_path / "a_poses.npz", amass_base, poses=amass_base["poses"][:, :72])
    with pytest.raises(InputFileError, match=r"156 \(SMPL\+H\) or 165 \(SMPL-X\)\), got \(6, 72\)") as err:
        read_amass(path)
    assert (err.value.path, err.value.field) == (path, "poses")


def test_amass_nan_pose_names_the_field_and_first_frame(amass_base, tmp_path):
    poses = amass_base["poses"].copy()
    poses[3, 10] = np.nan
    path = write_npz(tmp_path / "a_poses.npz", amass_base, poses=poses)
    with pytest.raises(InputFileError, match=r"NaN or inf.*frame 3") as err:
        read_amass(path)
    assert (err.value.path, err.value.field) == (path, "poses")


def test_amass_inf_translation_names_the_field(amass_base, tmp_path):
    trans = amass_base["trans"].copy()
    trans[2, 0] = np.inf
    path = write_npz(tmp_path / "a_poses.npz", amass_base, trans=trans)
    with pytest.raises(InputFileError, match="frame 2") as err:
        read_amass(path)
    assert (err.value.path, err.value.field) == (path, "trans")


def test_amass_zero_frames_are_refused(amass_base, tmp_path):
    path = write_npz(tmp_path / "a_poses.npz", amass_base, poses=np.zeros((0, 156)), trans=np.zeros((0, 3)))
    with pytest.raises(InputFileError, match="zero frames") as err:
        read_amass(path)
    assert (err.value.path, err.value.field) == (path, "poses")


def test_amass_single_frame_is_refused(amass_base, tmp_path):
    path = write_npz(tmp_path / "a_poses.npz", amass_base, poses=amass_base["poses"][:1], trans=amass_base["trans"][:1])
    with pytest.raises(InputFileError, match="single frame") as err:
        read_amass(path)
    assert err.value.field == "poses"


def test_amass_trans_length_must_match_poses(amass_base, tmp_path):
    path = write_npz(tmp_path / "a_poses.npz", amass_base, trans=amass_base["trans"][:4])
    with pytest.raises(InputFileError, match=r"\(6, 3\) to match 'poses', got \(4, 3\)") as err:
        read_amass(path)
    assert err.value.field == "trans"


def test_amass_missing_frame_rate_names_both_spellings(amass_base, tmp_path):
    path = write_npz(tmp_path / "a_poses.npz", amass_base, mocap_framerate=DROP)
    with pytest.raises(InputFileError, match=r"'mocap_framerate' .* 'mocap_frame_rate'") as err:
        read_amass(path)
    assert (err.value.path, err.value.field) == (path, "mocap_framerate")


@pytest.mark.parametrize("rate", [0.0, -30.0, np.nan])
def test_amass_non_positive_frame_rate_is_refused(amass_base, tmp_path, rate):
    path = write_npz(tmp_path / "a_poses.npz", amass_base, mocap_framerate=np.float64(rate))
    with pytest.raises(InputFileError, match="positive frame rate") as err:
        read_amass(path)
    assert err.value.field == "mocap_framerate"


def test_rgsd_clip_given_to_the_amass_reader_says_what_it_is(rgsd_base, tmp_path):
    path = write_npz(tmp_path / "clip.npz", rgsd_base)
    with pytest.raises(InputFileError, match=r"already an rgsd clip.*load_clip") as err:
        read_amass(path)
    assert err.value.path == path


# --- rgsd clip files -----------------------------------------------------------


def test_clip_truncated_file_is_named_as_unreadable(rgsd_base, tmp_path):
    path = write_npz(tmp_path / "clip.npz", rgsd_base)
    truncate(path)
    with pytest.raises(InputFileError, match="truncated or corrupt") as err:
        load_clip(path)
    assert err.value.path == path


@pytest.mark.parametrize("key", ["dof_pos", "body_offsets", "category"])
def test_clip_missing_key_names_the_key(rgsd_base, tmp_path, key):
    path = write_npz(tmp_path / "clip.npz", rgsd_base, **{key: DROP})
    with pytest.raises(InputFileError, match="missing required key") as err:
        load_clip(path)
    assert (err.value.path, err.value.field) == (path, key)


def test_clip_wrong_dof_width_names_the_expected_shape(rgsd_base, tmp_path):
    path = write_npz(tmp_path / "clip.npz", rgsd_base, dof_pos=rgsd_base["dof_pos"][:, :68])
    n = rgsd_base["dof_pos"].shape[0]
    with pytest.raises(InputFileError, match=rf"expected shape \({n}, 69\), got \({n}, 68\)") as err:
        load_clip(path)
    assert (err.value.path, err.value.field) == (path, "dof_pos")


def test_clip_nan_body_position_names_the_field_and_first_frame(rgsd_base, tmp_path):
    body_pos = rgsd_base["body_pos"].copy()
    body_pos[2, 5, 1] = np.nan
    path = write_npz(tmp_path / "clip.npz", rgsd_base, body_pos=body_pos)
    with pytest.raises(InputFileError, match=r"NaN or inf.*frame 2") as err:
        load_clip(path)
    assert (err.value.path, err.value.field) == (path, "body_pos")


def test_clip_zero_frames_are_refused(rgsd_base, tmp_path):
    empty = {k: v[:0] for k, v in rgsd_base.items() if v.ndim > 1 and k != "body_offsets"}
    path = write_npz(tmp_path / "clip.npz", rgsd_base, **empty)
    with pytest.raises(InputFileError, match="at least 2 frames, got 0") as err:
        load_clip(path)
    assert (err.value.path, err.value.field) == (path, "root_pos")


def test_clip_missing_frame_rate_names_the_field(rgsd_base, tmp_path):
    path = write_npz(tmp_path / "clip.npz", rgsd_base, fps=DROP)
    with pytest.raises(InputFileError, match="missing required key") as err:
        load_clip(path)
    assert (err.value.path, err.value.field) == (path, "fps")


def test_clip_name_that_climbs_out_of_a_folder_is_refused_naming_the_file(rgsd_base, tmp_path):
    path = write_npz(tmp_path / "esc.npz", rgsd_base, name=np.asarray("../../../ESCAPED"))
    with pytest.raises(InputFileError, match="path separator") as err:
        load_clip(path)
    assert (err.value.path, err.value.field) == (path, "name")


def test_import_names_clips_validly_whatever_the_source_file_is_called(amass_base, tmp_path):
    src = write_npz(tmp_path / "We ird..Name (2)_poses.npz", amass_base)
    out = tmp_path / "out"
    import_motions(file_jobs([src]), out, progress=False)
    [clip_file] = out.glob("*.npz")
    assert load_clip(clip_file).name == clip_file.stem == "we_ird_name_2"


def test_clip_at_another_frame_rate_is_refused(rgsd_base, tmp_path):
    path = write_npz(tmp_path / "clip.npz", rgsd_base, fps=np.float64(60.0))
    with pytest.raises(InputFileError, match="stored at 30 Hz, got 60") as err:
        load_clip(path)
    assert (err.value.path, err.value.field) == (path, "fps")


def test_clip_non_unit_quaternion_is_refused(rgsd_base, tmp_path):
    path = write_npz(tmp_path / "clip.npz", rgsd_base, root_rot=2.0 * rgsd_base["root_rot"])
    with pytest.raises(InputFileError, match="unit norm") as err:
        load_clip(path)
    assert err.value.field == "root_rot"


def test_amass_file_given_to_the_clip_loader_says_to_import_it(amass_base, tmp_path):
    path = write_npz(tmp_path / "a_poses.npz", amass_base)
    with pytest.raises(InputFileError, match=r"AMASS file.*rgsd-motions import") as err:
        load_clip(path)
    assert err.value.path == path


# --- interrupted imports --------------------------------------------------------


def interrupt_savez(monkeypatch, after: int = 0, signum: int | None = None) -> None:
    """Make np.savez_compressed write some bytes then raise KeyboardInterrupt (or send this process ``signum``, as
    from outside), after `after` good calls."""
    real = np.savez_compressed
    calls = {"n": 0}

    def fake(file, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] <= after:
            return real(file, *args, **kwargs)
        file.write(b"PK\x03\x04 half a clip")
        if signum is not None:
            raise_stop_signal(signum)
            raise AssertionError("the import went on after the signal")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez_compressed", fake)


def test_interrupted_import_leaves_no_partial_or_temp_file(amass_base, tmp_path, monkeypatch):
    src = write_npz(tmp_path / "a_poses.npz", amass_base)
    out = tmp_path / "out"
    interrupt_savez(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        import_motions(file_jobs([src]), out, progress=False)
    assert list(out.iterdir()) == []


def test_interrupted_import_keeps_the_previous_clip_file_intact(amass_base, tmp_path, monkeypatch):
    src = write_npz(tmp_path / "a_poses.npz", amass_base)
    out = tmp_path / "out"
    import_motions(file_jobs([src]), out, progress=False)
    before = (out / "a.npz").read_bytes()
    interrupt_savez(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        import_motions(file_jobs([src]), out, progress=False)
    # the report is the first import's: the interrupted one wrote none
    assert sorted(p.name for p in out.iterdir()) == ["a.npz", "import_report.json"]
    assert (out / "a.npz").read_bytes() == before


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_cli_import_stopped_by_a_signal_says_so_in_one_line_exits_130_with_only_whole_clips(
    name, amass_base, tmp_path, monkeypatch, capsys
):
    """Ctrl-C, SIGTERM (kill, a batch system's time limit) and SIGHUP (the terminal closed) stop rgsd-motions as
    they stop rgsd: one line, exit status INTERRUPTED, the clip being written left out, its handlers put back."""
    srcs = [write_npz(tmp_path / f"{n}_poses.npz", amass_base) for n in ("a", "b")]
    out = tmp_path / "out"
    interrupt_savez(monkeypatch, after=1, signum=getattr(signal, name))
    before = signal.getsignal(signal.SIGTERM)
    try:
        with stop_signals_as_in_a_terminal():
            code = main(["import", *srcs, "--out", str(out), "--quiet"])
    except KeyboardInterrupt:  # a failure of this test, not a stop of the test run
        pytest.fail("the stop escaped the command: a traceback, not one line")
    assert (code, capsys.readouterr().err) == (INTERRUPTED, "interrupted\n")
    assert [p.name for p in out.iterdir()] == ["a.npz"]  # no half-written b.npz, no temporary file, no report
    assert load_clip(out / "a.npz").num_frames == 6
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["import", "--out", "{out}"], "give AMASS files or folders, or --paper-set <AMASS root>"),
        (["demo", "--out", "{out}", "--seed", "3"], "--seed chooses the variants; give --variants N too"),
        (["demo", "--out", "{out}", "--variants", "0"], "--variants must be >= 1, got 0"),
    ],
    ids=["import-no-inputs", "demo-seed", "demo-variants"],
)
def test_cli_refuses_bad_flags_in_one_error_line_with_exit_status_bad_input(args, message, tmp_path, capsys):
    out = tmp_path / "out"
    assert main([a.format(out=out) for a in args]) == BAD_INPUT
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"error: {message}\n")
    assert not out.exists()


# --- the CLI with a bad file among good ones -----------------------------------


@pytest.fixture
def mixed_inputs(amass_base, tmp_path) -> tuple[list[str], str]:
    """A good file, a bad one (NaN pose) and another good one; returns (files, bad file)."""
    poses = amass_base["poses"].copy()
    poses[1, 4] = np.nan
    good1 = write_npz(tmp_path / "a_poses.npz", amass_base)
    bad = write_npz(tmp_path / "b_poses.npz", amass_base, poses=poses)
    good2 = write_npz(tmp_path / "c_poses.npz", amass_base)
    return [good1, bad, good2], bad


def test_cli_strict_stops_at_a_bad_file_with_exit_2_and_names_it(mixed_inputs, tmp_path, capsys):
    files, bad = mixed_inputs
    assert main(["import", *files, "--out", str(tmp_path / "out"), "--strict", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad}: field 'poses': contains NaN")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.npz"]


def test_cli_without_strict_rejects_a_bad_file_with_exit_1(mixed_inputs, tmp_path, capsys):
    files, bad = mixed_inputs
    assert main(["import", *files, "--out", str(tmp_path / "out"), "--quiet"]) == 1
    out, err = capsys.readouterr()
    line = next(x for x in err.splitlines() if x.startswith("rejected "))
    assert line.startswith(f"rejected {bad}: field 'poses': contains NaN") and line.count(str(bad)) == 1, line
    assert out.startswith("kept 2, skipped 0 shape file(s), rejected 1")
    report = json.loads((tmp_path / "out" / "import_report.json").read_text())
    entry = next(f for f in report["files"] if f["status"] == "rejected")
    assert entry["source"] == str(bad) and entry["reason"].startswith("field 'poses': contains NaN")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.npz", "c.npz", "import_report.json"]


def test_cli_missing_input_exits_2_naming_it(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    assert main(["import", str(missing), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    assert capsys.readouterr().err.startswith(f"error: {missing}: no such file or folder")
