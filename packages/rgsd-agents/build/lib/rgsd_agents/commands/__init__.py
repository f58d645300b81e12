"""The built-in ``rgsd`` subcommands, one module each (``register(subparsers)``)."""

from __future__ import annotations

import argparse


def add_set_argument(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--set KEY=VALUE`` (repeatable) into ``args.overrides``: dotted config keys, YAML values."""
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=help_text)


def add_run_arguments(parser: argparse.ArgumentParser, set_help: str) -> None:
    """Arguments every training command shares: --resume, --set, --seed, --no-progress."""
    parser.add_argument("--resume", metavar="RUN", help="continue the run in this folder from checkpoints/latest.pt")
    add_set_argument(parser, set_help)
    parser.add_argument("--seed", type=int, help="shorthand for --set seed=N")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
