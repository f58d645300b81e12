"""``folder_lock``: one process at a time writes into a run folder; the lock leaves with the process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rgsd_envs.utils.files import LOCK_NAME, FolderInUse, InputFileError, atomic_path, folder_lock, output_folder


def test_a_second_holder_is_refused_with_the_first_one_named(tmp_path):
    run = tmp_path / "run"
    in_use = rf"run: in use by pid {os.getpid()} \(rgsd train\)"
    with folder_lock(run, "rgsd train"):
        with pytest.raises(FolderInUse, match=in_use) as err, folder_lock(run, "rgsd train"):
            pass
        assert err.value.path == str(run)
        (run / "config.yaml").write_text("seed: 0\n")
    with folder_lock(run, "rgsd train --resume"):  # released on exit: the next command gets it
        assert (run / LOCK_NAME).read_text() == f"pid {os.getpid()} (rgsd train --resume)"
    assert (run / "config.yaml").is_file()


def test_a_folder_created_for_nothing_is_removed_and_an_existing_one_kept(tmp_path):
    with pytest.raises(RuntimeError), folder_lock(tmp_path / "new", "rgsd train"):
        raise RuntimeError("the trainer failed before writing anything")
    assert not (tmp_path / "new").exists()
    (tmp_path / "old").mkdir()
    with folder_lock(tmp_path / "old", "rgsd train"):
        pass
    assert (tmp_path / "old").is_dir()
    with folder_lock(tmp_path / "missing", "rgsd train --resume", create=False) as path:
        assert not path.exists()


def test_the_lock_of_a_killed_process_is_gone(tmp_path):
    run = tmp_path / "run"
    code = (
        "import sys, os; from rgsd_envs.utils.files import folder_lock\n"
        f"with folder_lock({str(run)!r}, 'rgsd train'):\n"
        "    print('held', flush=True); os.kill(os.getpid(), 9)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "held" and proc.returncode == -9
    with folder_lock(run, "rgsd train --resume"):  # the system dropped the dead process's lock
        pass


SETUP = ("config.yaml", "encoder.pt")


def test_a_failed_run_is_removed_while_it_holds_only_its_setup_files(tmp_path):
    def fail(name: str, writes: list[str], error: type[BaseException] = RuntimeError) -> None:
        with pytest.raises(error), folder_lock(tmp_path / name, "rgsd train", setup_files=SETUP) as run:
            for file in writes:
                (run / file).parent.mkdir(parents=True, exist_ok=True)
                (run / file).write_text("x")
            raise error

    fail("setup", ["config.yaml", "encoder.pt"])  # the env failed to build: nothing to resume
    assert not (tmp_path / "setup").exists()
    fail("logs", ["config.yaml", "tb/events"])  # a failure during training: its logs are kept
    fail("pretrained", ["config.yaml", "pretrain/encoder.pt"], KeyboardInterrupt)  # a reusable pretraining
    fail("checkpointed", ["config.yaml", "checkpoints/latest.pt"], KeyboardInterrupt)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpointed", "logs", "pretrained"]
    (tmp_path / "mine").mkdir()
    with pytest.raises(RuntimeError), folder_lock(tmp_path / "mine", "rgsd train", setup_files=SETUP) as run:
        (run / "config.yaml").write_text("x")
        raise RuntimeError("a folder the user made is never removed")
    assert (tmp_path / "mine" / "config.yaml").is_file()
    with folder_lock(tmp_path / "done", "rgsd train", setup_files=SETUP) as run:
        (run / "config.yaml").write_text("x")
    assert (tmp_path / "done" / "config.yaml").is_file()  # no failure: kept


def test_an_output_path_that_is_a_file_or_lies_under_one_is_named_not_a_traceback(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("hi")
    with pytest.raises(InputFileError, match=r"afile: output path exists and is not a folder"):
        output_folder(afile)
    with (
        pytest.raises(InputFileError, match=r"afile/run: cannot create this folder: .*afile is a file"),
        folder_lock(afile / "run", "rgsd train"),
    ):
        pass
    with (
        pytest.raises(InputFileError, match=r"afile/x\.onnx: cannot write here: .*afile is a file, not a folder"),
        atomic_path(afile / "x.onnx"),
    ):
        pass
    (tmp_path / "v.mp4").mkdir()
    with (
        pytest.raises(InputFileError, match=r"v\.mp4: output path is a folder; give a file name"),
        atomic_path(tmp_path / "v.mp4"),
    ):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "v.mp4"]  # nothing else written
    assert output_folder(tmp_path / "a" / "b") and not output_folder(tmp_path / "a" / "b")  # created, then kept
