"""``rgsd``: pretrain encoders, train skill policies, run the demo pipeline, downstream tasks, watch and export policies.

Subcommands live in ``rgsd_agents.commands.<name>`` (each exposes
``register(subparsers)``). Other packages add subcommands through the
``rgsd.commands`` entry-point group (rgsd-eval adds ``rgsd eval``), so the CLI
is one tool while the packages stay independent.
"""

from __future__ import annotations

import os

# Before torch is imported: idle OpenMP workers sleep instead of spinning on the
# cores the simulator steps on (see rgsd_envs.utils.threads).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import importlib
import logging
import sys
from importlib.metadata import entry_points

BUILTIN_COMMANDS = ("pretrain", "train", "demo", "downstream", "play", "view", "export", "reproduce")
"""Modules under rgsd_agents.commands, in help order."""
PLUGIN_GROUP = "rgsd.commands"
KNOWN_PLUGINS = {"eval": ("rgsd_eval.cli:register", "rgsd-eval")}
"""The sibling packages' subcommands (name -> entry point, package), found by import where no entry point is
installed."""


def _plugins() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group=PLUGIN_GROUP)}


def build_parser() -> argparse.ArgumentParser:
    """The ``rgsd`` argument parser with built-in and plugin subcommands."""
    parser = argparse.ArgumentParser(prog="rgsd", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in BUILTIN_COMMANDS:
        importlib.import_module(f"rgsd_agents.commands.{name}").register(sub)
    for name, target in sorted(_plugins().items()):
        if name in BUILTIN_COMMANDS:
            continue
        module, _, func = target.partition(":")
        getattr(importlib.import_module(module), func or "register")(sub)
    for name, (target, package) in KNOWN_PLUGINS.items():
        if name in sub.choices:
            continue
        module, _, func = target.partition(":")
        try:  # importable without its entry point: sources on PYTHONPATH (an offline GPU node's bundle)
            register = getattr(importlib.import_module(module), func)
        except ModuleNotFoundError as err:
            if err.name is None or not module.startswith(err.name):
                raise  # the package is there but one of its own imports is missing: say which
            p = sub.add_parser(name, help=f"(needs {package}: pip install {package})")
            p.set_defaults(func=lambda args, name=name, package=package: _missing(name, package))
        else:
            register(sub)
    return parser


def _missing(command: str, package: str) -> int:
    from rgsd_envs.utils.command import BAD_INPUT, print_error

    print_error(f"`rgsd {command}` is provided by {package}; install it with: pip install {package}")
    return BAD_INPUT


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``rgsd``."""
    from rgsd_agents.rl.distributed import end_rank
    from rgsd_envs.utils.command import run_as_command

    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    code = run_as_command(lambda: args.func(args))  # SIGTERM and SIGHUP end a command as Ctrl-C does
    return end_rank(code)  # a torchrun rank that has left its process group ends here, its files closed


if __name__ == "__main__":
    sys.exit(main())
