"""``rgsd demo``: the first run on a fresh machine: pretrain, train, evaluate, all on the built-in demo motions.

1. pretrains an encoder on the five demo clips (``<out>/pretrain``, under a minute);
2. trains with the ``demo`` preset (a time budget of ``--minutes``; 2 CPU cores are enough);
3. evaluates the run with ``rgsd eval`` (``<out>/report``).

``rgsd demo --out`` a demo that was stopped (Ctrl-C, SIGTERM) continues it: the training from its checkpoint, then
the evaluation. A demo holds its folder while it runs: a second ``rgsd demo --out`` the same folder is refused.

The closing summary quotes ``rgsd eval``'s numbers (per clip ERR, falls, pelvis
travel); the training probe follows, labelled as such.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rgsd_agents.commands import add_device_argument, add_set_argument, holds_run, run_overrides
from rgsd_envs.utils.command import BAD_INPUT, print_error
from rgsd_envs.utils.config import number_type
from rgsd_envs.utils.signals import INTERRUPTED

if TYPE_CHECKING:
    from rgsd_agents.training.runner import Runner

DEFAULT_MINUTES = 15.0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``rgsd demo`` to the CLI."""
    p = subparsers.add_parser(
        "demo",
        help="pretrain, train and evaluate on the built-in demo motions (about 18 minutes on 2 cores)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", default="runs/demo", help="run folder (default: runs/demo); a demo stopped there continues")
    p.add_argument(
        "--minutes",
        type=number_type(float, 0.0, True, "a positive number of minutes"),
        help=f"training time budget (default {DEFAULT_MINUTES:g}; a continued demo keeps its own unless given)",
    )
    add_set_argument(p, "override a value of the demo preset (repeatable), as in rgsd train")
    add_device_argument(p)
    p.add_argument("--no-eval", action="store_true", help="skip the evaluation step")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def _q(path: object) -> str:
    """A path as the copy-paste commands print it (quoted for the shell where it holds a space)."""
    return shlex.quote(str(path))


def eval_available() -> bool:
    """Whether ``rgsd eval`` is provided (rgsd-eval installed)."""
    from rgsd_agents.cli import _plugins

    return "eval" in _plugins()


def eval_summary(metrics: Path) -> str:
    """Per-clip lines of ``rgsd eval``'s metrics.json: ERR (cm), fall rate and pelvis travel against the reference."""
    doc = json.loads(metrics.read_text())
    lines = [f"rgsd eval ({metrics.parent}/report.md): imitation of each clip, z = z_m, no early termination"]
    for label, run in doc["runs"].items():
        im = run["imitation"]
        lines.append(f"  {label}: all clips ERR {_cm(im['all']['err_cm'])}, falls {_share(im['all']['fall_rate'])}")
        for name, c in im["clips"].items():
            travel = ""
            if c.get("travel_m") is not None:
                travel = pelvis_travel(c["travel_m"], c["ref_travel_m"])
            lines.append(f"    {name:<16} ERR {_cm(c['err_cm'])}, falls {_share(c['fall_rate'])}{travel}")
    return "\n".join(lines)


IN_PLACE_M = 0.1
"""A reference whose pelvis ends within this distance (m) of its start stays in place (the demo punch): its
rollouts' travel is drift, not a share of the reference's."""


def pelvis_travel(travel_m: float, ref_travel_m: float) -> str:
    """The summary's travel of a clip's rollouts against its reference's (an in-place reference: the drift)."""
    if ref_travel_m < IN_PLACE_M:
        return f", pelvis drifts {travel_m:.2f} m (the reference stays in place)"
    return f", pelvis travels {travel_m:.2f} of {ref_travel_m:.2f} m"


def _cm(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f} cm"


def _share(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def run(args: argparse.Namespace) -> int:
    """Entry point of ``rgsd demo``."""
    from rgsd_agents.commands import refuse_torchrun

    if (code := refuse_torchrun("demo")) is not None:
        return code
    from rgsd_agents.commands.train import hold, new_run_taken
    from rgsd_agents.config import load_config
    from rgsd_agents.training.runner import Runner
    from rgsd_envs.utils.device import resolve_device

    out = Path(args.out)
    with contextlib.ExitStack() as stack:  # holds the demo's folder while it trains and is evaluated
        if holds_run(out):
            runner = continued(out, args, stack)
            if isinstance(runner, str):
                print_error(runner)
                return BAD_INPUT
        else:
            minutes = DEFAULT_MINUTES if args.minutes is None else args.minutes
            overrides = {"max_minutes": minutes, **run_overrides(args)}
            cfg = load_config("demo", overrides)
            resolve_device(cfg.device)  # a bad device ends here, before any folder exists
            if (taken := new_run_taken(out, "demo")) is not None:  # a report, a policy, an encoder: not a demo's
                print_error(taken)
                return BAD_INPUT
            hold(stack, None, out, command="rgsd demo")  # a second demo into it, still pretraining, stops here
            print(
                f"[1/3] pretraining the encoder and [2/3] training ({cfg.max_minutes:g} min budget) into {out}",
                flush=True,
            )
            runner = Runner(cfg, out, progress=not args.no_progress)
        return _train_and_evaluate(runner, out, args)


def continued(out: Path, args: argparse.Namespace, stack: contextlib.ExitStack) -> Runner | str:
    """The demo run in ``out`` loaded to go on from its newest checkpoint (``--minutes``, ``--set`` and ``--device``
    as ``rgsd train --resume`` takes them), its folder held in ``stack``; or one line on why it cannot continue: a
    run on other clips, or a demo with nothing left to do."""
    from rgsd_agents.training.runner import Runner
    from rgsd_envs.runs.run_dir import RunDir
    from rgsd_envs.utils.files import folder_lock

    saved = RunDir(out)
    saved.check_kind(RunDir.SKILL_RUN, "rgsd demo --out")
    motions = saved.config().get("env", {}).get("motions")
    if motions != "demo":
        return (
            f"{out} holds a run on other clips than the demo's (env.motions: {motions}); continue it with "
            f"rgsd train --resume {_q(out)} or choose another --out"
        )
    stack.enter_context(folder_lock(out, "rgsd demo", create=False))
    overrides = run_overrides(args)
    if args.minutes is not None:
        overrides["max_minutes"] = args.minutes
    runner = Runner.resume(out, overrides, progress=not args.no_progress)
    reached = runner.budget_reached()
    if reached and (args.no_eval or (out / "report" / "metrics.json").is_file()):
        runner.close()
        return (
            f"{out} holds a finished demo ({reached}"
            + ("" if args.no_eval else f"; its report: {out / 'report' / 'report.md'}")
            + f"); choose another --out, or train it on with rgsd train --resume {_q(out)} "
            f"--set {reached.partition('=')[0]}=N"
        )
    if reached:
        print(f"[2/3] the training in {out} is finished ({reached}): on to the evaluation", flush=True)
    else:
        print(
            f"[2/3] continuing the training in {out} from iteration {runner.iteration} "
            f"({runner.elapsed / 60:.1f} of {runner.cfg.max_minutes:g} min budget trained)",
            flush=True,
        )
    return runner


def _train_and_evaluate(runner: Runner, out: Path, args: argparse.Namespace) -> int:
    """Train ``runner`` to its budget (a finished one: not at all), then evaluate it and print the results."""
    from rgsd_agents.commands.train import summary

    runner.continue_command = f"rgsd demo --out {_q(out)}"
    cfg = runner.cfg
    try:
        history = [] if runner.budget_reached() else runner.learn()
    finally:
        runner.close()
    training = summary(out, history, runner.initial_probe)
    print(training, flush=True)
    if runner.stopped_by:  # no evaluation of a run cut short
        print(runner.stop_message(), file=sys.stderr)
        return INTERRUPTED
    report = out / "report"
    if args.no_eval:
        print("[3/3] evaluation skipped (--no-eval)")
    elif not eval_available():
        print("[3/3] evaluation skipped: `rgsd eval` needs rgsd-eval (pip install -e packages/rgsd-eval)")
    else:
        from rgsd_agents.cli import main

        print(f"[3/3] evaluating into {report}", flush=True)
        code = main(
            ["eval", "--run", str(out), "--motions", "demo", "--out", str(report), "--device", cfg.device]
            + (["--no-progress"] if args.no_progress else [])
        )
        if code == INTERRUPTED:  # rgsd eval has said "interrupted"; say how to finish
            print(f"the evaluation was stopped; rgsd demo --out {_q(out)} evaluates the trained run", file=sys.stderr)
            return code
        if code:
            print(f"evaluation failed (exit code {code}); the trained run is in {out}", file=sys.stderr)
            return code
    if (report / "metrics.json").exists():
        print("\n" + eval_summary(report / "metrics.json"))
        print(
            "\ntraining probe (deterministic policy from fixed starts during training; rgsd eval above is the result):"
        )
        print(training)
    print("\nresults:")
    print(f"  run folder      {out}  (config.yaml, policy.pt, encoder.pt, discovery_encoder.pt, checkpoints/)")
    print(f"  pretraining     {out / 'pretrain'}  (embeddings.png: the grounded latent space)")
    print(f"  training curves tensorboard --logdir {_q(out / 'tb')}")
    if report.exists():
        print(f"  evaluation      {report}")
    replays = sorted(report.glob("*/videos/*_replay.html"))
    if replays:
        print(f"  3D replays      {replays[0]}  (and the other *_replay.html: open in a browser, no server)")
    print(f"  explore live    rgsd view {_q(out)}   (a page in your browser: clip, blend, kappa, variants)")
    print(f"  watch a skill   rgsd play {_q(out)} --clip demo_walk --reference   (or --viewer with a display)")
    print(f"  ONNX export     rgsd export {_q(out)} --onnx {_q(out / 'policy.onnx')}")
    return 0
