"""``python -m rgsd_agents.pretrained RUN --motions DIR [--out DIR] [--latents FILE] [--about JSON]``: (re)build the
shipped policy folder, or make such a folder from any run."""

from __future__ import annotations

import argparse
import json
import sys

from rgsd_agents.pretrained import PRETRAINED_DIR, build_pretrained
from rgsd_envs.utils.command import BAD_INPUT, print_error, run_as_command
from rgsd_envs.utils.files import InputFileError


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m rgsd_agents.pretrained`` (the command reference is generated from it)."""
    p = argparse.ArgumentParser(
        prog="python -m rgsd_agents.pretrained",
        description="Make a self-contained policy folder (the policy, its clips, a card of its errors) from a "
        "trained run; rebuilds the shipped one by default.",
    )
    p.add_argument("run", help="the trained run folder")
    p.add_argument(
        "--motions", metavar="DIR", required=True, help="the clip folder the run trained on (copied beside the policy)"
    )
    # no default here: the package's path differs from install to install, and the reference shows defaults
    p.add_argument(
        "--out",
        metavar="DIR",
        help="where to write it: a new or empty folder, or one this command built, which is replaced whole; not the "
        "run's folder, nor inside or above it (default: the shipped folder, rgsd_agents/pretrained/rgsd_cpu)",
    )
    p.add_argument(
        "--latents",
        metavar="FILE",
        help="a clip_latents.json (rgsd eval's <report>/<run>/) whose latents the card's rollouts command, kept in the "
        "folder; needed for a best-of-N run (ASE, DIAYN, METRA)",
    )
    p.add_argument(
        "--about",
        metavar="JSON",
        default="{}",
        help='a JSON object whose keys are added to the card (card.json), e.g. \'{"trained": "rgsd train --config cpu, '
        '60 minutes", "command": "examples/pretrained_cpu.sh"}\'',
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Build the shipped run folder from a trained run and print its card; ends as an ``rgsd`` command does
    (``run_as_command``: a stop is one line and exit status 130, nothing half-written left)."""
    p = build_parser()
    args = p.parse_args(argv)
    try:
        about = json.loads(args.about)
    except ValueError as err:
        p.error(f"--about: not JSON ({err})")
    if not isinstance(about, dict):
        p.error(f"--about: a JSON object ({{...}}) is needed, got {type(about).__name__}")
    return run_as_command(lambda: _build(args, about))


def _build(args: argparse.Namespace, about: dict) -> int:
    """Build the folder and print its card; bad input is one line and exit status 2."""
    try:
        out = args.out or str(PRETRAINED_DIR)
        card = build_pretrained(args.run, args.motions, out, about, args.latents)
    except (InputFileError, ValueError) as err:
        print_error(err)
        return BAD_INPUT
    for name, c in card["clips"].items():
        print(f"{name:<16} {c['error_cm']:6.1f} cm" + (" (fell)" if c["fell"] else ""))
    print(f"mean {card['mean_error_cm']:.1f} cm over {len(card['clips'])} clips -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
