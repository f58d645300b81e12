"""``python -m rgsd_agents.pretrained RUN --motions DIR [--out DIR] [--latents FILE]``: (re)build the shipped policy
folder, or make such a folder from any run."""

from __future__ import annotations

import argparse
import json
import sys

from rgsd_agents.pretrained import PRETRAINED_DIR, build_pretrained
from rgsd_envs.utils.files import InputFileError


def main(argv: list[str] | None = None) -> int:
    """Build the shipped run folder from a trained run and print its card."""
    p = argparse.ArgumentParser(prog="python -m rgsd_agents.pretrained", description=__doc__)
    p.add_argument("run", help="the trained run folder")
    p.add_argument("--motions", required=True, help="the clip folder the run trained on (copied beside the policy)")
    p.add_argument("--out", default=str(PRETRAINED_DIR), help="where to write it (default: the package's)")
    p.add_argument(
        "--latents",
        metavar="FILE",
        help="a clip_latents.json (rgsd eval's <report>/<run>/) whose latents the card's rollouts command, kept in the "
        "folder; needed for a best-of-N run (ASE, DIAYN, METRA)",
    )
    p.add_argument("--about", default="{}", help="JSON merged into the card: how it was trained, the commands")
    args = p.parse_args(argv)
    try:
        card = build_pretrained(args.run, args.motions, args.out, json.loads(args.about), args.latents)
    except (InputFileError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for name, c in card["clips"].items():
        print(f"{name:<16} {c['error_cm']:6.1f} cm" + (" (fell)" if c["fell"] else ""))
    print(f"mean {card['mean_error_cm']:.1f} cm over {len(card['clips'])} clips -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
