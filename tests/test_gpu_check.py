"""``benchmarks/gpu_check.py --smoke``: every step of the GPU check runs on the CPU and gpu_check.md has every section."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "gpu_check.py"


def _gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gpu_check", module)  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_gpu_check_smoke_runs_every_step_and_reports_every_section(tmp_path):
    out = tmp_path / "gpu_check"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), "--smoke"],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    check_report(out)


def check_report(out: Path) -> None:
    """What a smoke run's gpu_check.md and folder must hold."""
    md = (out / "gpu_check.md").read_text()
    headings = [line[3:] for line in md.splitlines() if line.startswith("## ")]
    assert headings == list(_gpu_check().SECTIONS)
    steps = {
        cells[1].strip(): cells[2].strip()
        for cells in (line.split("|") for line in md.split("## Steps")[1].split("## ")[0].splitlines())
        if len(cells) > 3 and cells[1].strip() not in ("step", "---")
    }
    assert steps == {
        "cuda_tests": "skipped",  # CI has no GPU: every cuda test skipped, cleanly
        "demo_motions": "pass",
        "import_motions": "pass",
        "throughput": "pass",
        "train": "pass",
        "eval": "pass",
    }
    assert "10 skipped" in md or "0 failed" in md
    section = {h: md.split(f"## {h}\n")[1].split("\n## ")[0] for h in headings}
    assert "| 8 | env (" in section["Throughput"] and "| 8 | train (" in section["Throughput"]
    assert "| median_sps |" in section["Training"] and "| iterations | 2 |" in section["Training"]
    assert "| walk |" in section["Evaluation"]
    assert "not judged (--smoke: CPU)" in section["Goals"]
    assert (out / "logs" / "train.log").is_file() and (out / "eval" / "metrics.json").is_file()
