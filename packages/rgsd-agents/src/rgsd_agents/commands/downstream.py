"""``rgsd downstream``: train a high-level goal-reaching policy over a frozen skill policy."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

from rgsd_agents.commands import add_run_arguments, out_taken, run_overrides
from rgsd_envs.envs.goal_reaching_v0 import STYLES
from rgsd_envs.utils.command import BAD_INPUT, print_error
from rgsd_envs.utils.signals import INTERRUPTED

DEFAULT_CONFIG = "default"
"""The downstream preset a new run starts from without --config."""
FLAGS = {
    "--low-level": "low_level",
    "--resume": "resume",
    "--config": "config",
    "--style": "style",
    "--set": "overrides",
    "--seed": "seed",
    "--device": "device",
    "--out": "out",
}
"""The flags that a mode of ``rgsd downstream`` may not use, and where argparse puts them."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``rgsd downstream`` to the CLI."""
    p = subparsers.add_parser(
        "downstream",
        help="train a goal-reaching policy with a style command on top of a trained skill policy",
        description="Train pi_high(z | s, g) with PPO on RGSD-SMPL-GoalReaching-v0 (see the Downstream page of the "
        "docs). Writes <out>/config.yaml, policy.pt (the high-level actor), checkpoints/, tb/ and report.md (success "
        "rate, style FID, top views).",
    )
    p.add_argument(
        "--low-level",
        help="run folder of the frozen low-level policy (rgsd train / rgsd demo; default: the config's); with "
        "--resume: where the run's low-level run folder moved (its policy.pt must be the one the run trained over)",
    )
    p.add_argument("--style", choices=STYLES, help="style command (default: the config's, freestyle)")
    p.add_argument(
        "--config",
        help=f"a YAML file or a downstream preset name (default: {DEFAULT_CONFIG}); not needed with --resume",
    )
    p.add_argument("--out", help="run folder (default: runs/downstream_<style>_<date-time>)")
    p.add_argument(
        "--seeds",
        nargs="+",
        metavar="RUN",
        help="instead of training: the mean and spread over seeds of finished runs' success rate and style FID "
        "against training steps, grouped by style, method and start (init_skill), into --out (seeds.png, seeds.csv, seeds.json)",
    )
    add_run_arguments(p, "override a config value, e.g. --set task.arena_size=8 (repeatable)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``rgsd downstream``."""
    from rgsd_agents.commands import refuse_torchrun

    if (code := refuse_torchrun("downstream")) is not None:
        return code
    if args.seeds:
        return _aggregate(args)
    with contextlib.ExitStack() as stack:  # holds the run folder's lock while the run writes into it
        return _train(args, stack)


def _train(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    """``rgsd downstream`` of one style with the run folder held in ``stack``."""
    from rgsd_agents.config import load_config
    from rgsd_agents.downstream.runner import DownstreamConfig, DownstreamRunner
    from rgsd_envs.runs.run_dir import RunDir
    from rgsd_envs.utils.device import resolve_device
    from rgsd_envs.utils.files import folder_lock

    overrides = run_overrides(args)
    if args.resume:
        if ignored := _given(args, "--config", "--style", "--out"):
            print_error(f"--resume continues a run with its saved config; leave out {', '.join(ignored)}")
            return BAD_INPUT
        if args.low_level:  # the low-level run folder moved: checked to hold the policy the run trained over
            overrides["low_level"] = args.low_level
        RunDir(args.resume).check_kind(RunDir.DOWNSTREAM_RUN, "rgsd downstream --resume")
        stack.enter_context(folder_lock(args.resume, "rgsd downstream", create=False))
        runner = DownstreamRunner.resume(args.resume, overrides, progress=not args.no_progress)
    else:
        if args.low_level:
            overrides["low_level"] = args.low_level
        if args.style:
            overrides["task.style"] = args.style
        cfg = load_config(args.config or DEFAULT_CONFIG, overrides, cls=DownstreamConfig, presets="downstream")
        if not cfg.low_level:  # a config file may name it (a run's saved config.yaml does)
            print_error("give --low-level RUN (a trained skill policy) or --resume RUN")
            return BAD_INPUT
        resolve_device(cfg.device)  # a bad device ends here, before any folder exists
        out = (
            Path(args.out)
            if args.out
            else Path("runs") / f"downstream_{cfg.task.style}_{time.strftime('%Y%m%d-%H%M%S')}"
        )
        taken = out_taken(out, RunDir.DOWNSTREAM_RUN)
        if taken:
            print_error(taken)
            return BAD_INPUT
        stack.enter_context(folder_lock(out, "rgsd downstream", setup_files=(RunDir.CONFIG,)))
        runner = DownstreamRunner(cfg, out, progress=not args.no_progress)
    if args.resume and runner.budget_reached():  # a fresh run of 0 iterations still writes its files
        print(runner.budget_message())
        runner.close()
        return 0
    try:
        runner.learn()
        # a stopped run writes no report: that takes evaluation episodes, and a stop signal asks to end soon
        report = None if runner.stopped_by else runner.write_report()
    finally:
        runner.close()
    if report is None:
        print(runner.stop_message(), file=sys.stderr)
        return INTERRUPTED
    before, after = runner.initial_eval, runner.last_eval
    print(f"run folder: {runner.run.path}\nreport: {report}")
    print(f"evaluation: untrained (iteration 0) -> policy.pt (iteration {runner.last_eval_iteration})")
    for key, label in (
        ("eval/success_rate", "success rate"),
        ("eval/style_fid", "style FID"),
        ("eval/final_distance", "final distance (m)"),
    ):
        if key in after:
            prev = f"{before[key]:.3f} -> " if key in before else ""
            print(f"  {label}: {prev}{after[key]:.3f}")
    if "eval/start_distance" in after:  # every evaluation plays the same episodes: one figure
        print(f"  start distance (m; staying at the start ends here): {after['eval/start_distance']:.3f}")
    return 0


def _aggregate(args: argparse.Namespace) -> int:
    """``rgsd downstream --seeds RUN ... --out DIR``."""
    from rgsd_agents.downstream.report import aggregate_seeds
    from rgsd_envs.utils.files import InputFileError

    if not args.out:
        print_error("--seeds RUN ... needs --out DIR (the report folder)")
        return BAD_INPUT
    if ignored := _given(args, *(f for f in FLAGS if f != "--out")):
        print_error(f"--seeds RUN ... reads finished runs and trains nothing; leave out {', '.join(ignored)}")
        return BAD_INPUT
    try:
        paths = aggregate_seeds(args.seeds, args.out)
    except (InputFileError, ValueError) as err:
        print_error(err)
        return BAD_INPUT
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0


def _given(args: argparse.Namespace, *flags: str) -> list[str]:
    """Those of ``flags`` (``FLAGS``) given on the command line."""
    return [f for f in flags if getattr(args, FLAGS[f]) not in (None, [])]  # a --seed 0 counts: 0 is not None
