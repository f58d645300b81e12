"""The built-in ``rgsd`` subcommands, one module each (``register(subparsers)``)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.config import add_set_argument, seed_type


def add_doc_parser(subparsers: Any, name: str, help_text: str, doc: str) -> argparse.ArgumentParser:
    """Subcommand ``name`` whose ``--help`` shows ``doc`` (a command module's docstring): its first line as the
    description, the rest (the examples) as the epilog, line breaks kept."""
    lines = doc.splitlines()
    return subparsers.add_parser(
        name,
        help=help_text,
        description=lines[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(lines[2:]),
    )


def add_run_folder_argument(parser: argparse.ArgumentParser) -> None:
    """The positional ``RUN`` folder of a trained policy into ``args.run``."""
    parser.add_argument("run", metavar="RUN", help="run folder (config.yaml, policy.pt, encoder.pt)")


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    """``--device {auto,cpu,cuda,cuda:N}`` into ``args.device`` (None: the config's, default auto)."""
    from rgsd_envs.utils.device import device_argument

    parser.add_argument(
        "--device",
        metavar="DEVICE",
        type=device_argument,
        help="torch device of the networks and updates: auto (cuda when available; the default), cpu, cuda or "
        "cuda:N; the mujoco simulator stays on the CPU cores",
    )


def add_run_arguments(parser: argparse.ArgumentParser, set_help: str) -> None:
    """Arguments every training command shares: --resume, --set, --seed, --device, --no-progress."""
    parser.add_argument(
        "--resume",
        metavar="RUN",
        help="continue the run in this folder from checkpoints/latest.pt (if unreadable, the newest readable iter_*.pt)",
    )
    add_set_argument(parser, set_help)
    parser.add_argument("--seed", type=seed_type, help="shorthand for --set seed=N")
    add_device_argument(parser)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def refuse_torchrun(command: str) -> int | None:
    """``BAD_INPUT`` (after one line on stderr) when launched as several torchrun processes: only ``rgsd train``
    runs data-parallel; None otherwise."""
    from rgsd_envs.utils.command import BAD_INPUT, print_error

    if int(os.environ.get("WORLD_SIZE", 1)) > 1:
        print_error(
            f"`rgsd {command}` runs in one process; only `rgsd train` runs data-parallel under torchrun "
            "(launch this command without torchrun)"
        )
        return BAD_INPUT
    return None


def run_overrides(args: argparse.Namespace) -> dict:
    """The ``--set`` overrides with ``--seed`` and ``--device`` folded in."""
    from rgsd_agents.config import parse_set

    overrides = parse_set(args.overrides)
    if getattr(args, "seed", None) is not None:
        overrides["seed"] = args.seed
    if getattr(args, "device", None) is not None:
        overrides["device"] = args.device
    return overrides


def holds_run(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` holds a run's checkpoint: a run to continue with ``--resume``, not to start again."""
    from rgsd_envs.runs.run_dir import RunDir

    return RunDir(folder).has_checkpoint()


RUN_NPZ_FILES = (RunDir.TRACKING_LATENTS,)
"""The .npz files a run folder holds itself (``RunDir``); any other at the top of a folder is a motion clip."""
REPORT_MARKERS = (("report.json", "an rgsd reproduce report"), ("seeds.json", "an rgsd downstream --seeds report"))
"""A file at the top of a report folder that its command writes, and how messages name the report (before an
rgsd eval report, whose report.md a reproduce folder has too)."""


def holds_other_outputs(folder: str | os.PathLike) -> str | None:
    """What ``folder`` holds that no run or encoder writes, in a few words: motion clips or a report (rgsd eval,
    rgsd reproduce, rgsd downstream --seeds), which a command writing its files there would mix with; None: none."""
    from pathlib import Path

    from rgsd_envs.utils.files import LOCK_NAME
    from rgsd_eval.output import REPORT_FILES

    path = Path(folder)
    if not path.is_dir():
        return None
    clips = sorted(f.name for f in path.glob("*.npz") if f.name not in RUN_NPZ_FILES)
    if clips:
        return f"motion clips ({', '.join(clips[:3])}{', ...' if len(clips) > 3 else ''})"
    for marker, what in REPORT_MARKERS:
        if (path / marker).is_file():
            return what
    if any((path / name).is_file() for name in REPORT_FILES - {LOCK_NAME}):  # a run folder has a lock too
        return "an rgsd eval report"
    return None


def out_taken(out: str | os.PathLike, kind: str) -> str | None:
    """Why a new run of ``kind`` (``RunDir.KINDS``) cannot start in ``out``, in one line: it
    holds a run of the other kind, a run to continue, or no run but clips or a report (``holds_other_outputs``);
    None: it can (also a run of ``kind`` that never reached its first checkpoint, which starts again)."""
    import shlex

    from rgsd_envs.runs.run_dir import RunDir

    run = RunDir(out)
    found = run.kind()
    if found is not None and found != kind:
        what, by, _ = RunDir.KINDS[found]
        return f"{out} holds {what} ({by}); choose another --out"
    if found is None and (other := holds_other_outputs(out)) is not None:
        return f"{out} holds {other}, not a run; choose another --out"
    if run.has_checkpoint():
        resume = f"{RunDir.KINDS[kind][2]} --resume {shlex.quote(str(out))}"
        return f"{out} already holds a run; continue it with {resume} or choose another --out"
    return None
