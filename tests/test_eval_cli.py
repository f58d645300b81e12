"""``rgsd eval`` is the rgsd-eval plugin of the rgsd CLI (entry point ``rgsd.commands``)."""

from __future__ import annotations

import subprocess
import sys

from rgsd_agents.cli import build_parser
from rgsd_eval import cli as eval_cli


def test_rgsd_eval_is_registered_by_the_plugin():
    args = build_parser().parse_args(["eval", "--run", "a", "--run", "b", "--out", "o", "--latent", "best-of-9"])
    assert args.func is eval_cli.run_command
    assert args.run == ["a", "b"] and args.latent == "best-of-9"


def test_rgsd_eval_reports_a_missing_run_in_one_line(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "rgsd_agents.cli", "eval", "--run", str(tmp_path / "missing"), "--out", str(tmp_path / "o")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr.strip().startswith("error: ") and "run folder not found" in out.stderr
