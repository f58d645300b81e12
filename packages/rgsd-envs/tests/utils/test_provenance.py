"""``provenance``: the rgsd commit a report was written by (only for code tracked in a checkout) and the versions of
the libraries its numbers depend on."""

from __future__ import annotations

import os
import shutil
import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest

import rgsd_envs
from rgsd_envs.utils.provenance import git_describe, provenance, provenance_text

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(folder: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True, env=env)
    return done.stdout.strip()


@needs_git
def test_a_tracked_file_gives_its_checkout_s_commit_and_an_untracked_or_outside_one_none(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    module = repo / "module.py"
    module.write_text("x = 1\n")
    assert git_describe(module) is None  # untracked: e.g. a package installed into a venv inside the checkout
    _git(repo, "add", "module.py")
    _git(repo, "commit", "-q", "-m", "one")
    commit = _git(repo, "rev-parse", "HEAD")
    described = git_describe(module)
    assert described is not None and commit.startswith(described)
    module.write_text("x = 2\n")
    assert git_describe(module) == described + "-dirty"
    outside = tmp_path / "elsewhere" / "module.py"
    outside.parent.mkdir()
    outside.write_text("x = 1\n")
    assert git_describe(outside) is None


def test_the_record_names_the_libraries_as_installed_and_rgsd_s_version():
    doc = provenance()
    for name in ("torch", "mujoco", "numpy", "rgsd-envs", "rgsd-eval"):
        assert doc["packages"][name] == version(name)
    assert doc["rgsd"]["version"] == version("rgsd-envs")
    checkout_file = Path(rgsd_envs.__file__)
    if shutil.which("git") is not None:
        assert doc["rgsd"]["git"] == git_describe(checkout_file)


def test_the_report_line_shows_the_commit_and_the_libraries_and_says_when_nothing_was_recorded():
    doc = {
        "rgsd": {"version": "0.1.0", "git": "abc123-dirty"},
        "packages": {"rgsd-envs": "0.1.0", "torch": "2.5.0", "mujoco": "3.3.0", "numpy": "2.1.0"},
    }
    assert provenance_text(doc) == "rgsd 0.1.0 (git abc123-dirty); torch 2.5.0, mujoco 3.3.0, numpy 2.1.0"
    doc["rgsd"]["git"] = None
    assert provenance_text(doc).startswith("rgsd 0.1.0 (not a git checkout); torch 2.5.0")
    assert provenance_text(None) == "not recorded"
