"""Which code wrote a result: rgsd's version (with its git commit when it runs from a checkout, or from a source tree
packed with ``COMMIT_FILE`` in place of its ``.git``) and the versions of the libraries its numbers depend on, for the
reports of ``rgsd eval``, ``rgsd reproduce`` and ``benchmarks/gpu_check.py``.

A report compared months later, or against a rerun, must say what made it: the rgsd packages keep one version
number between releases, so the commit is what tells two runs of the same version apart.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

RGSD_PACKAGES = (("rgsd-envs", "rgsd_envs"), ("rgsd-agents", "rgsd_agents"), ("rgsd-eval", "rgsd_eval"))
"""(distribution, module) of each rgsd package."""
LIBRARIES = ("torch", "mujoco", "mujoco-warp", "warp-lang", "numpy")
"""The libraries whose versions can change a result (mujoco-warp and warp-lang only where installed)."""
GIT_TIMEOUT_S = 5.0
ABBREV = 12
"""Hex digits of a commit as reports show it (``git describe --abbrev``)."""
COMMIT_FILE = "COMMIT.json"
"""At the root of a source tree that travels without its ``.git`` (a GPU bundle's repository copy, written by
``benchmarks/gpu_bundle.py``): {"commit": the commit it was packed from, "dirty": whether its files differ from it}."""
GIT = "git"
"""``rgsd_version()["commit_from"]`` of a commit that the checkout's git described."""


def installed_versions(names: tuple[str, ...]) -> dict[str, str]:
    """name -> installed version of each distribution in ``names`` that is installed (the others left out)."""
    out = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out


def _git(folder: Path, *args: str) -> str | None:
    """The stripped output of ``git -C folder args``, None where git is missing or fails."""
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_describe(module_file: Path) -> str | None:
    """``git describe --always --dirty --tags`` of the checkout that holds ``module_file``, None unless the file is
    tracked there (an installed copy in a virtual environment inside a checkout is not that checkout's code)."""
    folder = module_file.parent
    if _git(folder, "ls-files", "--error-unmatch", module_file.name) is None:
        return None
    return _git(folder, "describe", "--always", "--dirty", "--tags", f"--abbrev={ABBREV}")


def source_root(module_file: Path, dist: str) -> Path | None:
    """The repository whose ``packages/<dist>/src/<module>/`` holds ``module_file`` (a package's ``__init__.py``), None
    for a copy installed elsewhere (site-packages)."""
    src = module_file.parent.parent
    if src.name != "src" or src.parent.name != dist or src.parent.parent.name != "packages":
        return None
    return src.parents[2]


def packed_commit(root: Path) -> str | None:
    """The commit in ``root``'s ``COMMIT_FILE`` as ``git describe`` writes it (``ABBREV`` hex digits, "-dirty" where the
    packed files differed from it); None where there is no such file or it names no commit."""
    try:
        doc = json.loads((root / COMMIT_FILE).read_text())
    except (OSError, ValueError):
        return None
    commit = doc.get("commit") if isinstance(doc, dict) else None
    if not isinstance(commit, str) or not commit:
        return None
    return commit[:ABBREV] + ("-dirty" if doc.get("dirty") else "")


def code_commit(module_file: Path, dist: str) -> tuple[str, str] | None:
    """(commit, where it was read: ``GIT`` or ``COMMIT_FILE``) of the package ``dist`` whose ``__init__.py`` is
    ``module_file``: its checkout's ``git describe``, else the ``COMMIT_FILE`` of the source tree it lies in (a GPU
    bundle's, which carries no ``.git``); None for neither."""
    described = git_describe(module_file)
    if described is not None:
        return described, GIT
    root = source_root(module_file, dist)
    packed = packed_commit(root) if root is not None else None
    return (packed, COMMIT_FILE) if packed is not None else None


PYPROJECT_VERSION = re.compile(r'^version\s*=\s*"([^"]+)"', re.M)


def source_version(module_file: Path, dist: str) -> str | None:
    """The version in the ``pyproject.toml`` of the source tree that holds ``module_file`` (code run from a GPU
    bundle's copy, on ``PYTHONPATH`` and not installed), None outside such a tree."""
    root = source_root(module_file, dist)
    try:
        found = PYPROJECT_VERSION.search((root / "packages" / dist / "pyproject.toml").read_text()) if root else None
    except OSError:
        return None
    return found.group(1) if found else None


@functools.cache
def rgsd_version() -> dict[str, Any]:
    """{"version": the rgsd packages' installed version(s) (``source_version``'s for a package run uninstalled from
    a source tree), "git": their commit (``code_commit``; None when neither a checkout nor a ``COMMIT_FILE`` names it;
    several joined by ", " when the packages come from different trees), "commit_from": where it was read, ``GIT`` or
    ``COMMIT_FILE`` (None without a commit)}."""
    versions = installed_versions(tuple(dist for dist, _ in RGSD_PACKAGES))
    found = []
    for dist, module in RGSD_PACKAGES:
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.origin is not None:
            found.append(code_commit(Path(spec.origin), dist))
            if dist not in versions and (tree := source_version(Path(spec.origin), dist)) is not None:
                versions[dist] = f"{tree} (source tree)"
    commits = [c for c in dict.fromkeys(found) if c is not None]
    return {
        "version": ", ".join(dict.fromkeys(versions.values())) or "not installed",
        "git": ", ".join(c for c, _ in commits) or None,
        "commit_from": ", ".join(dict.fromkeys(where for _, where in commits)) or None,
    }


def provenance() -> dict[str, Any]:
    """What a report records of the code that wrote it: {"rgsd": ``rgsd_version()``, "packages": the rgsd packages'
    and ``LIBRARIES``' installed versions}."""
    names = (*(dist for dist, _ in RGSD_PACKAGES), *LIBRARIES)
    return {"rgsd": rgsd_version(), "packages": installed_versions(names)}


def commit_text(rgsd: dict[str, Any]) -> str:
    """The commit of an ``rgsd_version()`` record as reports show it: "git 0123456789ab-dirty", with ", from
    COMMIT.json" where a packed tree's file named it, else "not a git checkout" (", no COMMIT.json" where the record
    says it looked for one)."""
    if rgsd.get("git"):
        where = rgsd.get("commit_from")
        return f"git {rgsd['git']}" + (f", from {where}" if where and where != GIT else "")
    return "not a git checkout" + (f", no {COMMIT_FILE}" if "commit_from" in rgsd else "")


def provenance_text(doc: dict[str, Any] | None) -> str:
    """One line of a ``provenance()`` record for a report ("not recorded" for None: a file written before reports
    carried it)."""
    if not doc:
        return "not recorded"
    rgsd = doc.get("rgsd", {})
    code = f"rgsd {rgsd.get('version', '?')} ({commit_text(rgsd)})"
    libs = ", ".join(f"{k} {v}" for k, v in doc.get("packages", {}).items() if k in LIBRARIES)
    return f"{code}; {libs}" if libs else code
