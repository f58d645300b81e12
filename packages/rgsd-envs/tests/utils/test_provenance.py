"""``provenance``: the rgsd commit a report was written by (for code tracked in a checkout, or in a source tree packed
with a ``COMMIT.json`` in place of its ``.git``) and the versions of the libraries its numbers depend on."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace

import pytest

import rgsd_envs
from rgsd_envs.utils import provenance as module
from rgsd_envs.utils.provenance import (
    COMMIT_FILE,
    code_commit,
    commit_text,
    git_describe,
    provenance,
    provenance_text,
    rgsd_version,
)

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


SHA = "0123456789abcdef" * 2 + "01234567"


def _packed_tree(root: Path, commit: dict | None) -> dict[str, Path]:
    """A source tree laid out as a GPU bundle's repository copy (``<root>/packages/<dist>/src/<module>/``, no
    ``.git``) with ``commit`` as its ``COMMIT_FILE`` (none for None): module -> its ``__init__.py``."""
    files = {}
    for dist, name in module.RGSD_PACKAGES:
        files[name] = root / "packages" / dist / "src" / name / "__init__.py"
        files[name].parent.mkdir(parents=True)
        files[name].write_text("")
        (root / "packages" / dist / "pyproject.toml").write_text(f'[project]\nname = "{dist}"\nversion = "9.8.7"\n')
    if commit is not None:
        (root / COMMIT_FILE).write_text(json.dumps(commit))
    return files


def test_a_tree_packed_without_git_gives_the_commit_of_its_commit_file(tmp_path):
    init = _packed_tree(tmp_path / "rgsd", {"commit": SHA, "dirty": True})["rgsd_envs"]
    assert code_commit(init, "rgsd-envs") == ("0123456789ab-dirty", COMMIT_FILE)
    (tmp_path / "rgsd" / COMMIT_FILE).write_text(json.dumps({"commit": SHA, "dirty": False}))
    assert code_commit(init, "rgsd-envs") == ("0123456789ab", COMMIT_FILE)
    (tmp_path / "rgsd" / COMMIT_FILE).write_text(json.dumps({"commit": None, "dirty": None}))  # packed without git
    assert code_commit(init, "rgsd-envs") is None
    (tmp_path / "rgsd" / COMMIT_FILE).write_text("{not json")
    assert code_commit(init, "rgsd-envs") is None
    # an installed copy is no source tree: a COMMIT.json above its site-packages is not its commit
    installed = tmp_path / "venv" / "site-packages" / "rgsd_envs" / "__init__.py"
    installed.parent.mkdir(parents=True)
    installed.write_text("")
    (tmp_path / "venv" / COMMIT_FILE).write_text(json.dumps({"commit": SHA, "dirty": False}))
    assert code_commit(installed, "rgsd-envs") is None


@pytest.mark.parametrize("packed", [True, False])
def test_the_record_of_code_run_from_a_packed_tree_carries_its_commit_and_says_where_it_came_from(
    tmp_path, monkeypatch, packed
):
    files = _packed_tree(tmp_path / "rgsd", {"commit": SHA, "dirty": False} if packed else None)
    find_spec = {name: SimpleNamespace(origin=str(path)) for name, path in files.items()}.get
    monkeypatch.setattr(module, "importlib", SimpleNamespace(util=SimpleNamespace(find_spec=find_spec)))
    monkeypatch.setattr(module, "installed_versions", lambda names: {})  # run from the tree, not installed
    rgsd_version.cache_clear()
    try:
        rgsd = rgsd_version()
    finally:
        rgsd_version.cache_clear()
    assert rgsd["version"] == "9.8.7 (source tree)"  # not "not installed": the tree's pyproject.toml names it
    if packed:
        assert (rgsd["git"], rgsd["commit_from"]) == ("0123456789ab", COMMIT_FILE)
        assert commit_text(rgsd) == "git 0123456789ab, from COMMIT.json"
        assert provenance_text({"rgsd": rgsd}) == f"rgsd {rgsd['version']} (git 0123456789ab, from COMMIT.json)"
    else:
        assert (rgsd["git"], rgsd["commit_from"]) == (None, None)
        assert commit_text(rgsd) == "not a git checkout, no COMMIT.json"


def test_the_record_names_the_libraries_as_installed_and_rgsd_s_version():
    doc = provenance()
    for name in ("torch", "mujoco", "numpy", "rgsd-envs", "rgsd-eval"):
        assert doc["packages"][name] == version(name)
    assert doc["rgsd"]["version"] == version("rgsd-envs")
    checkout_file = Path(rgsd_envs.__file__)
    if shutil.which("git") is not None:
        assert doc["rgsd"]["git"] == git_describe(checkout_file)
        assert doc["rgsd"]["commit_from"] == (module.GIT if doc["rgsd"]["git"] else None)


def test_the_report_line_shows_the_commit_and_the_libraries_and_says_when_nothing_was_recorded():
    doc = {
        "rgsd": {"version": "0.1.0", "git": "abc123-dirty"},
        "packages": {"rgsd-envs": "0.1.0", "torch": "2.5.0", "mujoco": "3.3.0", "numpy": "2.1.0"},
    }
    assert provenance_text(doc) == "rgsd 0.1.0 (git abc123-dirty); torch 2.5.0, mujoco 3.3.0, numpy 2.1.0"
    doc["rgsd"]["commit_from"] = module.GIT
    assert provenance_text(doc).startswith("rgsd 0.1.0 (git abc123-dirty); torch")
    doc["rgsd"]["git"] = None  # a record written before the commit file was read: no claim that there was none
    del doc["rgsd"]["commit_from"]
    assert provenance_text(doc).startswith("rgsd 0.1.0 (not a git checkout); torch 2.5.0")
    assert provenance_text(None) == "not recorded"
