"""A folder replaced whole: written beside its place, renamed onto it, the earlier one intact on any failure."""

from __future__ import annotations

import os

import pytest

from rgsd_envs.utils import files
from rgsd_envs.utils.files import InputFileError, staged_folder


def _tree(folder):
    return {str(p.relative_to(folder)): p.read_text() for p in folder.rglob("*") if p.is_file()}


def test_the_new_folder_replaces_the_earlier_one_whole_and_leaves_nothing_beside_it(tmp_path):
    out = tmp_path / "report"
    (out / "old_run").mkdir(parents=True)
    (out / "old_run" / "latents.json").write_text("old")
    with staged_folder(out) as stage:
        assert stage.parent == tmp_path and not stage.name.startswith("report")
        (stage / "metrics.json").write_text("new")
    assert _tree(out) == {"metrics.json": "new"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]


def test_an_error_or_an_interrupt_leaves_the_earlier_folder_and_no_stage(tmp_path):
    out = tmp_path / "report"
    out.mkdir()
    (out / "metrics.json").write_text("old")
    for error in (ValueError, KeyboardInterrupt):
        with pytest.raises(error), staged_folder(out) as stage:
            (stage / "metrics.json").write_text("half")
            raise error
        assert _tree(out) == {"metrics.json": "old"}
        assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]


def test_a_failed_rename_puts_the_earlier_folder_back(tmp_path, monkeypatch):
    out = tmp_path / "report"
    out.mkdir()
    (out / "metrics.json").write_text("old")
    rename = os.rename

    def rename_stage_fails(src, dst):
        if str(src).endswith(".partial"):
            raise OSError(28, "No space left on device")
        rename(src, dst)

    monkeypatch.setattr(files.os, "rename", rename_stage_fails)
    with pytest.raises(OSError, match="No space"), staged_folder(out) as stage:
        (stage / "metrics.json").write_text("new")
    assert _tree(out) == {"metrics.json": "old"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]


def test_parents_are_made_only_once_the_folder_is_whole_and_its_mode_follows_the_umask(tmp_path):
    out = tmp_path / "a" / "b" / "report"
    with pytest.raises(RuntimeError), staged_folder(out):
        raise RuntimeError
    assert list(tmp_path.iterdir()) == []
    umask = os.umask(0o027)
    try:
        with staged_folder(out) as stage:
            (stage / "card.json").write_text("{}")
    finally:
        os.umask(umask)
    assert _tree(out) == {"card.json": "{}"}
    assert out.stat().st_mode & 0o777 == 0o750


def test_a_folder_that_cannot_be_written_beside_is_named(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(InputFileError, match="cannot write here"), staged_folder(tmp_path / "file" / "report"):
        pass


@pytest.mark.parametrize("inside", ["", "sub"])
def test_the_working_folder_or_one_holding_it_is_refused_and_left_as_it_was(tmp_path, monkeypatch, inside):
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    (out / "keep.txt").write_text("mine")
    before = _tree(out)
    monkeypatch.chdir(out / inside)
    with pytest.raises(InputFileError, match="is the working folder or holds it"), staged_folder(out) as stage:
        (stage / "new.txt").write_text("new")
    assert _tree(out) == before == {"keep.txt": "mine"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no stage left beside it
