"""``benchmarks/gpu_check.py --smoke``: every step of the GPU check runs on the CPU and gpu_check.md has every section."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check(load_benchmark):
    return load_benchmark("gpu_check")


def _run(out: Path, *extra: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), "--smoke", *extra],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc


def _step_results(md: str) -> dict[str, str]:
    return {
        cells[1].strip(): cells[2].strip()
        for cells in (line.split("|") for line in md.split("## Steps")[1].split("## ")[0].splitlines())
        if len(cells) > 3 and cells[1].strip() not in ("step", "---")
    }


def test_gpu_check_smoke_split_over_two_commands_runs_every_step_and_reports_every_section(gpu_check, tmp_path):
    """A lent GPU machine runs 10 minutes a command: ``--steps`` splits the check, steps.json carries the results."""
    out = tmp_path / "gpu_check"
    _run(out, "--steps", "cuda_tests,demo_motions,import_motions,throughput")
    first = _step_results((out / "gpu_check.md").read_text())
    assert first["throughput"] == "pass" and first["train"] == first["eval"] == "not run"
    _run(out, "--steps", "eval,train")  # run in the check's order whatever the order given
    check_report(gpu_check, out)


def test_steps_are_checked_and_put_in_run_order(gpu_check):
    assert gpu_check.parse_steps("eval, train") == ["train", "eval"]
    with pytest.raises(argparse.ArgumentTypeError, match=r"unknown step.*'bogus'.*valid: cuda_tests"):
        gpu_check.parse_steps("train,bogus")


def check_report(gpu_check: ModuleType, out: Path) -> None:
    """What a smoke run's gpu_check.md and folder must hold."""
    md = (out / "gpu_check.md").read_text()
    headings = [line[3:] for line in md.splitlines() if line.startswith("## ")]
    assert headings == list(gpu_check.SECTIONS)
    steps = _step_results(md)
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
