"""The repository's promises: two set-up commands, CI runs the test one, one-way dependencies, no licensed data."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]


def _setup_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Set-up on a fresh machine", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [b.strip() for b in blocks]


def test_readme_has_exactly_two_one_line_setup_commands():
    cmds = _setup_commands()
    assert len(cmds) == 2 and all("\n" not in c for c in cmds), cmds
    install_and_demo, tests = cmds
    assert "rgsd demo" in install_and_demo and "pytest" in tests
    for c in cmds:
        assert c.startswith("pip install torch==2.13.0 "), "CPU torch must be pinned first (never a CUDA build)"


def test_ci_runs_the_readmes_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert _setup_commands()[1] in ci.splitlines()


def _deps(pkg: str) -> list[str]:
    data = tomllib.loads((ROOT / "packages" / pkg / "pyproject.toml").read_text())
    return [re.split(r"[<>=\[ ]", d)[0] for d in data["project"]["dependencies"]]


def test_dependencies_point_one_way():
    assert not {"rgsd-agents", "rgsd-eval"} & set(_deps("rgsd-envs"))
    assert "rgsd-envs" in _deps("rgsd-agents") and "rgsd-eval" not in _deps("rgsd-agents")
    assert "rgsd-envs" in _deps("rgsd-eval") and "rgsd-agents" not in _deps("rgsd-eval")
    forbidden = {
        "rgsd-envs": ("rgsd_agents", "rgsd_eval"),
        "rgsd-agents": ("rgsd_eval",),
        "rgsd-eval": ("rgsd_agents",),
    }
    for pkg, names in forbidden.items():
        for src in (ROOT / "packages" / pkg / "src").rglob("*.py"):
            text = src.read_text()
            for name in names:
                assert not re.search(rf"^\s*(from|import) {name}\b", text, flags=re.M), f"{src} imports {name}"


def test_no_licensed_data_or_shared_files_are_tracked():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    bad = [f for f in files if re.search(r"(_poses|_stageii)\.npz$|SMPL_(NEUTRAL|MALE|FEMALE)|\.pkl$|^shared/", f)]
    assert not bad, bad
