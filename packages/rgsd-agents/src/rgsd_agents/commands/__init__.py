"""The built-in ``rgsd`` subcommands, one module each (``register(subparsers)``)."""

from __future__ import annotations

import argparse


def add_set_argument(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--set KEY=VALUE`` (repeatable) into ``args.overrides``: dotted config keys, YAML values."""
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=help_text)
