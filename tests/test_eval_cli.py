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


def test_rgsd_eval_is_found_by_import_where_no_entry_point_is_installed(monkeypatch):
    """Sources on PYTHONPATH (an offline GPU node's bundle) have no entry points: ``rgsd eval`` is still there."""
    import rgsd_agents.cli as cli

    monkeypatch.setattr(cli, "_plugins", lambda: {})
    args = cli.build_parser().parse_args(["eval", "--run", "a", "--out", "o"])
    assert args.func is eval_cli.run_command and args.run == ["a"]


def test_a_sibling_package_that_is_not_there_gets_a_command_saying_what_to_install(monkeypatch, capsys):
    import rgsd_agents.cli as cli

    monkeypatch.setattr(cli, "_plugins", lambda: {})
    monkeypatch.setattr(cli, "KNOWN_PLUGINS", {"eval": ("rgsd_not_installed.cli:register", "rgsd-not-installed")})
    args = cli.build_parser().parse_args(["eval"])
    assert args.func(args) == 2 and "pip install rgsd-not-installed" in capsys.readouterr().err
