"""What a Python must already hold to run rgsd and the GPU check, and one line saying what it lacks.

    python benchmarks/prerequisites.py                 # names what this Python lacks (exit 1); silent when complete
    python benchmarks/prerequisites.py --python 3.12   # also: whether it is the Python a bundle was packed for

The list is read from the rgsd packages' ``pyproject.toml`` (their dependencies and rgsd-envs' ``warp`` extra, less
``NOT_NEEDED``) and from ``requirements-test.txt`` (``TEST_TOOLS``: the check's ``cuda_tests`` step runs pytest). A
distribution counts as present when ``importlib.metadata`` finds it on this Python's path, ``PYTHONPATH`` included
(a GPU bundle's ``site`` folder). ``gpu_check.py`` runs this before its first step; a GPU bundle's ``unpack.sh``
and ``env.sh`` run it on the unpacked repository. Only the standard library is imported here: this runs where
numpy may be missing.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = ("rgsd-envs", "rgsd-eval", "rgsd-agents")
"""The rgsd packages under ``packages/`` (each other's dependencies: never looked up)."""
EXTRAS = {"rgsd-envs": ("warp",)}
"""The optional dependencies the check uses: warp worlds."""
TEST_TOOLS = ("pytest",)
"""What the ``cuda_tests`` step needs of ``requirements-test.txt`` (the other test tools are for CI)."""
NOT_NEEDED = {"imageio-ffmpeg": "it writes videos, and the check writes none"}
"""Dependencies the check and training never import, so a Python may lack them: why."""
BUNDLE_PYTHON_ENV = "RGSD_BUNDLE_PYTHON"
"""Set by a GPU bundle's ``env.sh``: the Python (major.minor) its wheels were packed for."""
NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def canonical(name: str) -> str:
    """A distribution name as pip and PyPI compare them (PEP 503: lower case, runs of -_. as one -)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _toml(path: Path) -> dict | None:
    """A TOML file's table; None on a Python 3.10 without tomli (whose requirements then go unchecked)."""
    try:
        import tomllib
    except ModuleNotFoundError:
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            return None
    return tomllib.loads(path.read_text())


def _merge(requirements: list[str]) -> list[str]:
    """One requirement per distribution (named as first written, the specifiers of every mention joined), in
    first-mention order."""
    named: dict[str, str] = {}
    specs: dict[str, list[str]] = {}
    for req in requirements:
        name = NAME.match(req).group(1)  # type: ignore[union-attr]
        key, spec = canonical(name), req[len(name) :].strip()
        named.setdefault(key, name)
        specs.setdefault(key, [])
        if spec and spec not in specs[key]:
            specs[key].append(spec)
    return [named[key] + ",".join(spec) for key, spec in specs.items()]


def runtime_requirements(repo: Path = REPO) -> list[str]:
    """rgsd's own dependencies and the extras the check uses, as pip requirements (``numpy>=1.26``), without the
    rgsd packages themselves and ``NOT_NEEDED`` (none on a Python 3.10 without tomli, which cannot read them)."""
    found = []
    for folder in PACKAGE_DIRS:
        doc = _toml(repo / "packages" / folder / "pyproject.toml")
        if doc is None:
            return []
        project = doc["project"]
        found += project.get("dependencies", [])
        for extra in EXTRAS.get(folder, ()):
            found += project["optional-dependencies"][extra]
    ours = {canonical(f) for f in PACKAGE_DIRS}
    return [r for r in _merge(found) if canonical(NAME.match(r).group(1)) not in ours | set(NOT_NEEDED)]  # type: ignore[union-attr]


def tool_requirements(repo: Path = REPO) -> list[str]:
    """``TEST_TOOLS`` as ``requirements-test.txt`` pins them."""
    lines = (repo / "requirements-test.txt").read_text().splitlines()
    reqs = [ln.split("#")[0].strip() for ln in lines if NAME.match(ln) and not ln.lstrip().startswith("#")]
    return [r for r in reqs if canonical(NAME.match(r).group(1)) in TEST_TOOLS]  # type: ignore[union-attr]


def missing(requirements: list[str]) -> list[str]:
    """The distributions of ``requirements`` that this Python does not find (names as written)."""
    out = []
    for req in requirements:
        name = NAME.match(req).group(1)  # type: ignore[union-attr]
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            out.append(name)
    return out


def _this_python() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def python_problem(bundle_python: str | None) -> str | None:
    """One line when this Python is not the one a bundle was packed for (its wheels would not load), else None."""
    if not bundle_python or bundle_python == _this_python():
        return None
    return (
        f"this bundle is for Python {bundle_python}, this Python ({sys.executable}) is {_this_python()}: "
        f"pack it with `benchmarks/gpu_bundle.py --python {_this_python()}`, or put a Python {bundle_python} first "
        "on PATH"
    )


def missing_problem(names: list[str], requirements: list[str]) -> str | None:
    """One line naming the missing distributions ``names`` (of ``requirements``) and how to get them, else None."""
    if not names:
        return None
    others = [
        r for r in requirements if NAME.match(r).group(1) in names and canonical(NAME.match(r).group(1)) != "torch"
    ]  # type: ignore[union-attr]
    advice = []
    if others:
        advice.append(
            "pack the GPU bundle with `benchmarks/gpu_bundle.py --with-base`, or install them: "
            f"pip install {' '.join(map(shlex.quote, others))}"
        )
    if len(others) < len(names):
        advice.append("install a CUDA build of torch (no bundle carries it)")
    return f"this Python ({_this_python()}, {sys.executable}) lacks {', '.join(names)}: {'; '.join(advice)}"


def problems(bundle_python: str | None = None, tests: bool = True, repo: Path = REPO) -> list[str]:
    """What stops rgsd (and, with ``tests``, the ``cuda_tests`` step) on this Python, one line each: the bundle's
    Python (``bundle_python``, default ``$RGSD_BUNDLE_PYTHON``) when it is another, and the missing distributions."""
    reqs = runtime_requirements(repo) + (tool_requirements(repo) if tests else [])
    bundle_python = bundle_python if bundle_python is not None else os.environ.get(BUNDLE_PYTHON_ENV)
    lines = [python_problem(bundle_python), missing_problem(missing(reqs), reqs)]
    return [line for line in lines if line]


def main(argv: list[str] | None = None) -> int:
    """Print each problem of this Python on one line (stderr); exit status 1 when there is one."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=None, help=f"the bundle's Python (default ${BUNDLE_PYTHON_ENV})")
    parser.add_argument("--no-tests", action="store_true", help="leave out the test tools (pytest)")
    parser.add_argument("--prefix", default="rgsd", help="the word each line starts with (default rgsd)")
    args = parser.parse_args(argv)
    found = problems(args.python, tests=not args.no_tests)
    for line in found:
        print(f"{args.prefix}: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
