"""Temporaries a killed writer left beside its target are removed by the next write of that target, and only those."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from rgsd_envs.utils.files import atomic_path, remove_stale_temps, staged_folder

pytest.importorskip("fcntl")


def _killed_writer(code: str) -> None:
    """Run ``code`` (which writes a temporary, then sleeps) in a child and SIGKILL it once it says 'ready'."""
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)


def test_a_file_write_killed_outright_leaves_a_temporary_that_the_next_write_of_that_file_removes(tmp_path):
    target = tmp_path / "iter_000005.pt"
    _killed_writer(f"""
        import time
        from rgsd_envs.utils.files import atomic_path
        with atomic_path({str(target)!r}) as tmp:
            tmp.write_bytes(b"x" * 1000)
            print("ready", flush=True)
            time.sleep(60)
    """)
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(".iter_000005.pt.") and left[0].endswith(".tmp")
    keep = [".iter_000006.pt.abcdefgh.tmp", ".iter_000005.pt.notours", "iter_000005.pt.abcdefgh.tmp", "notes.tmp"]
    for name in keep:  # another target's temporary, and names not of the temporary pattern
        (tmp_path / name).write_text("keep")
    with atomic_path(target) as tmp:
        tmp.write_text("new")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*keep, "iter_000005.pt"])
    assert target.read_text() == "new"


def test_a_stage_killed_outright_is_removed_by_the_next_stage_of_that_folder_only(tmp_path):
    out = tmp_path / "evk" / "rep"
    out.parent.mkdir()
    _killed_writer(f"""
        import pathlib, time
        from rgsd_envs.utils.files import staged_folder
        with staged_folder({str(out)!r}) as stage:
            (stage / "metrics.json").write_text("half")
            print("ready", flush=True)
            time.sleep(60)
    """)
    left = [p.name for p in out.parent.iterdir()]
    assert len(left) == 1 and left[0].startswith(".rep.") and left[0].endswith(".partial")
    other = out.parent / ".rep2.abcdefgh.partial"  # a stage of another report
    other.mkdir()
    with staged_folder(out) as stage:
        (stage / "metrics.json").write_text("new")
    assert sorted(p.name for p in out.parent.iterdir()) == [".rep2.abcdefgh.partial", "rep"]
    assert (out / "metrics.json").read_text() == "new"


def test_a_live_writers_temporary_is_left_alone(tmp_path):
    target = tmp_path / "latest.pt"
    with atomic_path(target) as tmp:
        tmp.write_text("being written")
        assert remove_stale_temps(tmp_path, "*.pt") == []
        with atomic_path(target) as other:  # a second writer of the same file in this process
            other.write_text("second")
        assert tmp.read_text() == "being written"
    assert target.read_text() == "being written"
    with staged_folder(tmp_path / "rep") as stage:
        assert remove_stale_temps(tmp_path, "rep") == [] and stage.is_dir()
    assert sorted(os.listdir(tmp_path)) == ["latest.pt", "rep"]


def test_a_glob_removes_every_dead_temporary_of_the_targets_it_names(tmp_path):
    for name in (".iter_000005.pt.abcdefgh.tmp", ".latest.pt.a1b2c3d4.tmp", ".policy.onnx.abcdefgh.tmp"):
        (tmp_path / name).write_text("dead")
    removed = remove_stale_temps(tmp_path, "*.pt")
    assert sorted(p.name for p in removed) == [".iter_000005.pt.abcdefgh.tmp", ".latest.pt.a1b2c3d4.tmp"]
    assert os.listdir(tmp_path) == [".policy.onnx.abcdefgh.tmp"]


def test_an_earlier_folder_moved_aside_by_a_killed_replacement_is_put_back_not_deleted(tmp_path):
    """Killed between moving the earlier report aside and renaming the new one in: the aside copy is the only one."""
    aside = tmp_path / ".report.abcdefgh.old"
    (aside / "report").mkdir(parents=True)
    (aside / "report" / "report.md").write_text("earlier")
    (tmp_path / ".report.ijklmnop.partial").mkdir()  # the new one, never renamed in
    remove_stale_temps(tmp_path, "report")
    assert (tmp_path / "report" / "report.md").read_text() == "earlier"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]


def test_writes_go_on_where_the_file_system_refuses_locks(tmp_path, monkeypatch):
    import fcntl

    def refuse(fd, op):
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(fcntl, "flock", refuse)
    with atomic_path(tmp_path / "a.json") as tmp:
        tmp.write_text("{}")
    with staged_folder(tmp_path / "out") as stage:
        (stage / "x").write_text("1")
    assert (tmp_path / "a.json").read_text() == "{}" and (tmp_path / "out" / "x").read_text() == "1"
