"""``rgsd eval`` (plugin of the ``rgsd`` CLI) and the stand-alone ``rgsd-eval``: the same arguments.

Example::

    rgsd eval --run runs/rgsd --run runs/diayn --motions demo --out reports/demo
    rgsd eval --run runs/rgsd --out reports/rgsd --protocol paper --set rollouts=50 --set video_clips=2

Settings come from the protocol, then the --config file, then ``--set KEY=VALUE`` (any EvalConfig field, checked
and typed as in ``rgsd train``), then the flags.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from typing import Any

import rgsd_envs  # noqa: F401  (before torch: sets OMP_WAIT_POLICY and MUJOCO_GL)
from rgsd_envs.utils.command import BAD_INPUT, print_error, run_as_command
from rgsd_envs.utils.config import (
    add_set_argument,
    from_dict_with_overrides,
    not_a_config_file,
    number_type,
    read_yaml,
    seed_type,
    set_overrides,
    to_dict,
)
from rgsd_envs.utils.files import InputFileError
from rgsd_eval.config import EvalConfig
from rgsd_eval.latents import parse_latent_mode
from rgsd_eval.protocol import PAPER, POLICY_NOISE, PROTOCOLS, QUICK

DESCRIPTION = (
    "Evaluate trained runs: Cartesian error and motion FID per category, vMF diversity, figures, videos, report."
)


_positive_int = number_type(int, 0, True, "a positive integer")
_positive_float = number_type(float, 0.0, True, "a positive number")
_nonnegative_int = number_type(int, 0, False, "a whole number >= 0")


def _yaml_settings(path: str) -> dict[str, Any]:
    """The settings a --config file sets (a mapping), or a clear error naming the file."""
    try:
        data = read_yaml(path) or {}
    except (FileNotFoundError, IsADirectoryError):
        raise InputFileError(path, not_a_config_file(path)) from None
    if not isinstance(data, dict):
        raise InputFileError(path, f"expected a mapping of EvalConfig fields, got {type(data).__name__}")
    return data


def _action_noise(text: str) -> float | str:
    """``--action-noise``: "policy" or a std >= 0."""
    if text == POLICY_NOISE:
        return POLICY_NOISE
    return _nonnegative_float(text)


_nonnegative_float = number_type(float, 0.0, False, f"a number >= 0 or '{POLICY_NOISE}'")


def _latent(text: str) -> str:
    try:
        return str(parse_latent_mode(text))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _number(x: float | str | None) -> str:
    """A protocol's setting as the help shows it: 50.0 as 50, None as none."""
    return "none" if x is None else f"{x:g}" if isinstance(x, float) else str(x)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of ``rgsd eval`` / ``rgsd-eval``."""
    p.add_argument(
        "--run", action="append", required=True, metavar="DIR", help="run folder (repeat to compare runs side by side)"
    )
    p.add_argument(
        "--motions",
        nargs="+",
        default=None,
        help="reference clips: 'demo', clip files or folders of clips (default: the clips the first run trained on, "
        "every source of them)",
    )
    p.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="report folder (report.md, metrics.json, metrics.csv, figures, videos): a new or empty folder, or an "
        "earlier report's, which is replaced whole once this one is written",
    )
    p.add_argument(
        "--config",
        default=None,
        metavar="YAML",
        help="evaluation settings (EvalConfig fields); --set and the flags below override it",
    )
    add_set_argument(p, "set an EvalConfig field, e.g. --set rollouts=50 --set video=false (repeatable)")
    p.add_argument(
        "--protocol",
        choices=list(PROTOCOLS),
        default=None,
        help=f"settings to start from: {QUICK.name} (default; minutes on 2 cores) or {PAPER.name} (the paper's, see the "
        f"Evaluation page of the docs: {PAPER.rollouts} stochastic rollouts per clip, best-of-{PAPER.best_of}, "
        f"discovery at kappa {_number(PAPER.discovery_kappa)}, the kappa sweep on {PAPER.sweep_clips} motions); "
        "--config and the flags below override its settings one by one",
    )
    p.add_argument(
        "--rollouts",
        type=_positive_int,
        default=None,
        help=f"rollouts per clip and kappa (quick {QUICK.rollouts}, paper {PAPER.rollouts})",
    )
    p.add_argument(
        "--kappas",
        type=_positive_float,
        nargs="+",
        default=None,
        help=f"vMF concentrations of the sweep ({' '.join(_number(k) for k in EvalConfig.kappas)})",
    )
    p.add_argument(
        "--discovery-kappa",
        type=_positive_float,
        default=None,
        help="kappa of the discovery evaluation on every clip, FID per category "
        f"(quick: {_number(QUICK.discovery_kappa)}, paper: {_number(PAPER.discovery_kappa)})",
    )
    p.add_argument(
        "--trajectory-kappa",
        type=_positive_float,
        default=None,
        help="kappa of the top-view trajectory figure (default: the discovery kappa, else the middle of --kappas); "
        "rolled out on every clip if the sweep does not",
    )
    p.add_argument(
        "--trajectory-rollouts",
        type=_nonnegative_int,
        default=None,
        help=f"most vMF paths drawn per clip in the top views ({EvalConfig.trajectory_rollouts})",
    )
    p.add_argument(
        "--sweep-clips",
        type=_positive_int,
        default=None,
        help=f"clips of the kappa sweep (quick {QUICK.sweep_clips}, paper {PAPER.sweep_clips})",
    )
    p.add_argument(
        "--latent",
        type=_latent,
        default=None,
        help=f"auto | encoder | stored | tracking | best-of-N (default {EvalConfig.latent})",
    )
    p.add_argument(
        "--best-of",
        type=_positive_int,
        default=None,
        help=f"N when --latent auto picks best-of-N (quick {QUICK.best_of}, paper {PAPER.best_of})",
    )
    p.add_argument(
        "--action-noise",
        type=_action_noise,
        default=None,
        metavar="STD|policy",
        help=f"std of Gaussian action noise for every run, or '{POLICY_NOISE}': each run's own policy std (quick "
        f"{_number(QUICK.action_noise)}: deterministic, one imitation rollout per clip; paper: {PAPER.action_noise})",
    )
    p.add_argument(
        "--seed",
        type=seed_type,
        default=None,
        help=f"seed of the best-of-N candidates, the vMF samples and the rollouts (default {EvalConfig.seed})",
    )
    p.add_argument(
        "--device",
        default=None,
        help=f"torch device of the policy: {EvalConfig.device} (default; cuda when available), cpu, cuda:N",
    )
    p.add_argument(
        "--max-clips",
        type=_positive_int,
        default=None,
        metavar="N",
        help="evaluate at most N clips, spread over the categories (default: every clip)",
    )
    p.add_argument(
        "--batch-size",
        type=_positive_int,
        default=None,
        help=f"worlds stepped at once (default {EvalConfig.batch_size})",
    )
    p.add_argument("--no-video", action="store_true", help="skip the mp4 videos and their HTML replays")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def config_from_args(args: argparse.Namespace) -> EvalConfig:
    """EvalConfig of the protocol (--protocol, else --set protocol=, else the --config file's ``protocol``, else
    quick), then the --config file's settings, then --set, then the flags."""
    data = _yaml_settings(args.config) if args.config else {}
    sets = set_overrides(EvalConfig, getattr(args, "overrides", None))
    name = args.protocol or sets.get("protocol") or data.get("protocol") or QUICK.name
    if name not in PROTOCOLS:
        where, field = ("--set protocol", None) if "protocol" in sets else (args.config, "protocol")
        raise InputFileError(where, f"unknown protocol {name!r}; choose one of: {', '.join(PROTOCOLS)}", field)
    merged = {**to_dict(EvalConfig.for_protocol(name)), **data, "protocol": name}
    sets = {k: v for k, v in sets.items() if k != "protocol"}  # chosen above
    cfg = from_dict_with_overrides(EvalConfig, merged, str(args.config or "--protocol"), sets)
    flags: dict[str, Any] = {
        "rollouts": args.rollouts,
        "kappas": None if args.kappas is None else tuple(args.kappas),
        "discovery_kappa": args.discovery_kappa,
        "trajectory_kappa": args.trajectory_kappa,
        "trajectory_rollouts": args.trajectory_rollouts,
        "sweep_clips": args.sweep_clips,
        "latent": args.latent,
        "best_of": args.best_of,
        "action_noise": args.action_noise,
        "seed": args.seed,
        "device": args.device,
        "max_clips": args.max_clips,
        "batch_size": args.batch_size,
    }
    changes = {k: v for k, v in flags.items() if v is not None}
    if args.no_video:
        changes["video"] = False
    if args.no_progress:
        changes["progress"] = False
    return dataclasses.replace(cfg, **changes)


def run_command(args: argparse.Namespace) -> int:
    """Run an evaluation from parsed arguments; bad input is reported in one line (exit status 2)."""
    from rgsd_envs.utils.device import resolve_device
    from rgsd_eval.pipeline import run_evaluation

    try:
        cfg = config_from_args(args)
        resolve_device(cfg.device)  # a bad device ends here, before the report folder exists
        paths = run_evaluation(args.run, args.motions, args.out, cfg)
    except (InputFileError, FileNotFoundError, ValueError) as err:
        print_error(err)
        return BAD_INPUT
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``eval`` subcommand to the ``rgsd`` CLI."""
    p = subparsers.add_parser(
        "eval", help="evaluate runs: ERR/FID table, diversity, figures, videos", description=DESCRIPTION
    )
    add_arguments(p)
    p.set_defaults(func=run_command)
    return p


def build_parser() -> argparse.ArgumentParser:
    """The stand-alone ``rgsd-eval`` parser."""
    p = argparse.ArgumentParser(prog="rgsd-eval", description=DESCRIPTION)
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    add_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``rgsd-eval``: ends as ``rgsd eval`` does (``run_as_command``: SIGTERM and SIGHUP stop it as
    Ctrl-C does, in one line and exit status 130)."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    return run_as_command(lambda: run_command(args))


if __name__ == "__main__":
    sys.exit(main())
