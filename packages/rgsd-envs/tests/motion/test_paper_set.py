"""The paper's 20 ACCAD clips: finding them in an AMASS tree and importing them with categories."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.cli import main
from rgsd_envs.motion.clip import load_clip
from rgsd_envs.motion.paper_set import PAPER_CLIPS, PaperClip, find_paper_clips, normalise

CATEGORY_COUNTS = {"walk": 5, "run": 6, "sidestep": 2, "backward": 3, "punch": 4}
"""Clips per category in the paper's appendix list of reference motions."""
SMPLX_SUBJECTS = ("Male2Running_c3d",)
"""Subjects written in the SMPL-X release's naming; the others in SMPL+H naming."""
DECOYS = (
    "Male2Walking_c3d/B14 -  Walk turn right 45_poses.npz",  # the paper wants the t2 take
    "Male2Walking_c3d/B10 -  Walk turn left 45 t2_poses.npz",
    "Male2Walking_c3d/shape.npz",
    "Female1Walking_c3d/B10 -  Walk turn left 45_poses.npz",  # right take, wrong subject
    "Male2Running_c3d/C12 - run turn left 45_stageii.npz.bak",
)


def amass_file_name(clip: PaperClip) -> str:
    """The file name the AMASS release uses for a paper clip."""
    human = clip.take.replace("____", " -  ").replace("___", " - ").replace("_", " ")
    if clip.subject in SMPLX_SUBJECTS:
        return human.replace(" ", "_") + "_stageii.npz"
    return human + "_poses.npz"


def write_tiny_amass(path: Path, marker: float, smplx: bool) -> None:
    """A valid 9-frame 120 Hz AMASS file standing upright, its trans x set to marker."""
    poses = np.zeros((9, 165 if smplx else 156))
    poses[:, 0] = np.pi / 2
    trans = np.zeros((9, 3))
    trans[:, 0] = marker
    rate_key = "mocap_frame_rate" if smplx else "mocap_framerate"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, poses=poses, trans=trans, betas=np.zeros(16), gender="neutral", **{rate_key: np.float64(120.0)})


def build_tree(root: Path) -> dict[PaperClip, Path]:
    """A fake AMASS tree under root/ACCAD with all 20 paper clips and decoys; returns where each clip is."""
    where = {}
    for i, clip in enumerate(PAPER_CLIPS):
        path = root / "ACCAD" / clip.subject / amass_file_name(clip)
        write_tiny_amass(path, marker=float(i), smplx=clip.subject in SMPLX_SUBJECTS)
        where[clip] = path
    for j, name in enumerate(DECOYS):
        write_tiny_amass(root / "ACCAD" / name, marker=100.0 + j, smplx=False)
    return where


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> tuple[Path, dict[PaperClip, Path]]:
    """A complete fake AMASS root and the path of each paper clip in it."""
    root = tmp_path_factory.mktemp("amass")
    return root, build_tree(root)


def test_paper_set_has_20_clips_in_the_spec_categories():
    assert len(PAPER_CLIPS) == 20
    assert Counter(c.category for c in PAPER_CLIPS) == CATEGORY_COUNTS


def test_paper_clip_names_are_unique():
    assert len({c.clip_name for c in PAPER_CLIPS}) == 20


def test_clip_name_joins_subject_and_take():
    clip = PaperClip("Male2Walking_c3d", "B10____Walk_turn_left_45", "walk")
    assert clip.clip_name == "male2walking_b10_walk_turn_left_45"


@pytest.mark.parametrize(
    "name",
    ["B10 -  Walk turn left 45_poses.npz", "B10_-__Walk_turn_left_45_stageii.npz", "B10____Walk_turn_left_45"],
)
def test_normalise_matches_every_release_spelling(name):
    assert normalise(name) == "b10 walk turn left 45"


def test_find_paper_clips_finds_all_20_in_a_complete_tree(tree):
    root, _ = tree
    found, missing = find_paper_clips(root)
    assert missing == []
    assert Counter(c.category for c in found) == CATEGORY_COUNTS


def test_find_paper_clips_picks_the_paper_takes_not_the_decoys(tree):
    root, where = tree
    found, _ = find_paper_clips(root)
    assert found == where


def test_find_paper_clips_reads_smplx_file_names(tree):
    root, _ = tree
    found, _ = find_paper_clips(root)
    running = [p for c, p in found.items() if c.subject == "Male2Running_c3d"]
    assert len(running) == 7 and all(p.name.endswith("_stageii.npz") for p in running)


def test_find_paper_clips_reports_the_missing_ones(tmp_path):
    where = build_tree(tmp_path)
    gone = [PAPER_CLIPS[1], PAPER_CLIPS[16]]
    for clip in gone:
        where[clip].unlink()
    found, missing = find_paper_clips(tmp_path)
    assert missing == gone
    assert len(found) == 18


def test_find_paper_clips_refuses_a_missing_root(tmp_path):
    with pytest.raises(FileNotFoundError, match="AMASS root folder not found"):
        find_paper_clips(tmp_path / "nowhere")


@pytest.fixture(scope="module")
def imported(tree, tmp_path_factory) -> tuple[int, Path]:
    """`rgsd-motions import --paper-set` on the complete tree: (exit code, output folder)."""
    root, _ = tree
    out = tmp_path_factory.mktemp("clips")
    return main(["import", "--paper-set", str(root), "--out", str(out), "--quiet"]), out


def test_cli_paper_set_import_writes_the_20_clips(imported):
    rc, out = imported
    assert rc == 0
    assert sorted(p.stem for p in out.glob("*.npz")) == sorted(c.clip_name for c in PAPER_CLIPS)


def test_cli_paper_set_import_tags_each_clip_with_its_category(imported):
    _, out = imported
    for clip in PAPER_CLIPS:
        assert load_clip(out / f"{clip.clip_name}.npz").category == clip.category, clip.clip_name


def test_cli_paper_set_import_converts_the_right_source_file(imported, tree):
    _, out = imported
    _, where = tree
    for i, clip in enumerate(PAPER_CLIPS):
        loaded = load_clip(out / f"{clip.clip_name}.npz")
        assert loaded.source == str(where[clip])
        np.testing.assert_allclose(loaded.root_pos[:, 0], i + sk.SMPL_NEUTRAL_PELVIS_REST[0], atol=1e-12)
        assert (loaded.source_fps, loaded.num_frames) == (120.0, 3)


def test_cli_paper_set_with_missing_clips_imports_the_rest_and_exits_1(tmp_path, capsys):
    where = build_tree(tmp_path / "amass")
    where[PAPER_CLIPS[1]].unlink()
    out = tmp_path / "clips"
    assert main(["import", "--paper-set", str(tmp_path / "amass"), "--out", str(out), "--quiet"]) == 1
    assert "not found: Male2Walking_c3d/B9____Walk_turn_left_90" in capsys.readouterr().err
    assert len(list(out.glob("*.npz"))) == 19


def test_cli_paper_set_with_no_clips_exits_2(tmp_path, capsys):
    (tmp_path / "ACCAD").mkdir()
    assert main(["import", "--paper-set", str(tmp_path), "--out", str(tmp_path / "clips"), "--quiet"]) == 2
    assert "none of the paper's 20 clips" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["more.npz"], "it takes no input(s) more.npz:"),
        (["--category", "walk"], "it takes no --category walk:"),
        (["a.npz", "--category", "run"], "it takes no input(s) a.npz and --category run:"),
    ],
)
def test_cli_paper_set_with_inputs_or_a_category_exits_2_naming_them(tmp_path, capsys, extra, named):
    build_tree(tmp_path / "amass")
    out = tmp_path / "clips"
    assert main(["import", "--paper-set", str(tmp_path / "amass"), "--out", str(out), "--quiet", *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --paper-set imports the paper's 20 clips with their own categories; ")
    assert named in err and not out.exists()
