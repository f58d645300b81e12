"""Which code wrote a result: rgsd's version (with its git commit when it runs from a checkout) and the versions of
the libraries its numbers depend on, for the reports of ``rgsd eval`` and ``rgsd reproduce``.

A report compared months later, or against a rerun, must say what made it: the rgsd packages keep one version
number between releases, so the commit is what tells two runs of the same version apart.
"""

from __future__ import annotations

import functools
import importlib.util
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

RGSD_PACKAGES = (("rgsd-envs", "rgsd_envs"), ("rgsd-agents", "rgsd_agents"), ("rgsd-eval", "rgsd_eval"))
"""(distribution, module) of each rgsd package."""
LIBRARIES = ("torch", "mujoco", "mujoco-warp", "warp-lang", "numpy")
"""The libraries whose versions can change a result (mujoco-warp and warp-lang only where installed)."""
GIT_TIMEOUT_S = 5.0


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
    return _git(folder, "describe", "--always", "--dirty", "--tags", "--abbrev=12")


@functools.cache
def rgsd_version() -> dict[str, Any]:
    """{"version": the rgsd packages' installed version(s), "git": the checkout's ``git describe`` (None when not run
    from a checkout; several joined by ", " when the packages come from different checkouts)}."""
    versions = installed_versions(tuple(dist for dist, _ in RGSD_PACKAGES))
    described = []
    for _, module in RGSD_PACKAGES:
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.origin is not None:
            described.append(git_describe(Path(spec.origin)))
    gits = [d for d in dict.fromkeys(described) if d is not None]
    return {"version": ", ".join(dict.fromkeys(versions.values())) or "not installed", "git": ", ".join(gits) or None}


def provenance() -> dict[str, Any]:
    """What a report records of the code that wrote it: {"rgsd": ``rgsd_version()``, "packages": the rgsd packages'
    and ``LIBRARIES``' installed versions}."""
    names = (*(dist for dist, _ in RGSD_PACKAGES), *LIBRARIES)
    return {"rgsd": rgsd_version(), "packages": installed_versions(names)}


def provenance_text(doc: dict[str, Any] | None) -> str:
    """One line of a ``provenance()`` record for a report ("not recorded" for None: a file written before reports
    carried it)."""
    if not doc:
        return "not recorded"
    rgsd = doc.get("rgsd", {})
    code = f"rgsd {rgsd.get('version', '?')}" + (
        f" (git {rgsd['git']})" if rgsd.get("git") else " (not a git checkout)"
    )
    libs = ", ".join(f"{k} {v}" for k, v in doc.get("packages", {}).items() if k in LIBRARIES)
    return f"{code}; {libs}" if libs else code
