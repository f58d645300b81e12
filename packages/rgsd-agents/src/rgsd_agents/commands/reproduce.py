"""Run the paper's whole experiment: train every method and seed, evaluate, downstream, one report.

Examples::

    rgsd reproduce --motions demo --out runs/repro_smoke --scale smoke            # every step, minutes on 2 cores
    rgsd reproduce --motions motions/paper --out runs/repro --scale cpu           # about 8 hours on 2 cores, estimated
    rgsd reproduce --motions motions/paper --out runs/repro_gpu --scale gpu       # ~25 minutes on one H100, estimated
    rgsd reproduce --motions motions/paper --out runs/repro_full --scale full     # our full budget (the paper has none)
    rgsd reproduce --motions demo --out runs/repro --scale smoke --methods rgsd ase --seeds 2
    rgsd reproduce --motions demo --out runs/repro --scale my_scale.yaml          # a scale file (base: smoke, ...)
    rgsd reproduce --motions demo --out runs/repro --scale smoke --plan-only      # print the plan, run nothing
    rgsd reproduce --motions demo --out runs/repro --scale smoke --methods calm   # add a method to the folder
    rgsd reproduce --report-only --from runs/repro_a --from runs/repro_b --out runs/repro_ab   # one report, 2 folders
    rgsd reproduce --motions demo --out runs/repro --scale smoke --set eval.settings.rollouts=2 --set seeds=1

Steps: RGSD's encoder pretraining (per seed), `rgsd train` of every method and seed on its preset for the scale,
`rgsd eval --protocol paper` (scaled down by the scale) on each method's runs, `rgsd downstream` for freestyle,
sidestep and backward on every run, the downstream seed aggregation, then <out>/report.md (Table 1, the
discovery figure, FID under sampled latents, the kappa sweep, the downstream curves, beside the paper's numbers).
Run the same command again to skip finished steps, resume interrupted ones from their checkpoints and retry
failed ones; <out>/steps.json holds each step's state, <out>/logs/ its output. The plan states each training's
budget in its own loop's terms (iterations, worlds x steps per iteration, transitions, gradient steps). The `full`
scale was called `paper`, a name --scale still accepts: the paper states no total budget. A step reruns when what
it runs with changed: its arguments, its preset's contents, the rgsd version, or a step it reads. --methods adds
methods to a folder: the folder's other methods are kept as they are and the report covers them all.
``--set KEY=VALUE`` changes a field of the scale (ReproduceScale, checked and typed as in ``rgsd train``); the
scale as run is saved as <out>/scale.yaml. A scale file may start from a built-in scale with ``base: <name>``
and set only what it changes.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from typing import TYPE_CHECKING, Any

from rgsd_agents.commands import add_doc_parser, add_set_argument
from rgsd_envs.utils.command import BAD_INPUT, print_error
from rgsd_envs.utils.signals import INTERRUPTED

if TYPE_CHECKING:
    from pathlib import Path

    from rgsd_agents.reproduce.plan import Plan, Step
    from rgsd_agents.reproduce.scale import ReproduceScale
    from rgsd_agents.reproduce.steps import StepsFile, StepState


def register(subparsers: Any) -> None:
    """Add ``rgsd reproduce`` to the CLI."""
    p = add_doc_parser(subparsers, "reproduce", "run the paper's whole experiment into one report", __doc__)
    p.add_argument(
        "--motions", help='reference clips: "demo" or a folder of clips (the paper: 20); required unless --report-only'
    )
    p.add_argument("--out", required=True, help="folder of every run, the report and steps.json")
    p.add_argument(
        "--scale",
        default="smoke",
        help="a built-in scale (smoke, cpu, gpu, full; `paper` is full's former name: rgsd_agents/presets/reproduce) "
        "or a YAML file (default smoke)",
    )
    p.add_argument(
        "--methods",
        nargs="+",
        help="methods to run (default: the scale's, else every method); the folder's other methods are kept and "
        "stay in its report",
    )
    add_set_argument(
        p, "set a field of the scale, e.g. --set train.minutes=2 --set eval.settings.rollouts=4 (repeatable)"
    )
    p.add_argument("--seeds", type=int, help="seeds per method (default: the scale's)")
    p.add_argument("--plan-only", action="store_true", help="print the plan and its expected time, run nothing")
    p.add_argument("--no-progress", action="store_true", help="a line per step instead of the progress bar")
    p.add_argument(
        "--report-only",
        action="store_true",
        help="run no step: rewrite --out's report from its finished steps, or with --from, write one report into "
        "--out from several folders",
    )
    p.add_argument(
        "--from",
        dest="sources",
        action="append",
        metavar="DIR",
        help="with --report-only: a reproduce folder whose methods the report takes (repeat it: methods run on two "
        "machines, one report; the folders must share the scale and clips)",
    )
    p.set_defaults(func=run)


def format_plan(plan: Plan, state: StepsFile, parallel: int) -> str:
    """The plan as printed: each step with its budget, stated time and state, then the expected total."""
    from rgsd_agents.reproduce.plan import plan_seconds
    from rgsd_agents.reproduce.steps import DONE, format_seconds, pending_steps, stale

    todo = set(pending_steps(plan, state))
    done = {k for k, v in state.steps.items() if v.status == DONE}
    width = max(len(s.id) for s in plan.steps)
    kept = plan.kept
    ran = [m for m in plan.methods if m not in kept]
    lines = [
        f"plan: {len(plan.steps)} steps into {plan.out} (scale {plan.scale_file}; methods {', '.join(ran)}; "
        f"seeds {len(plan.seeds)}; {parallel} at a time; {plan.clips} clips, {plan.frames} frames)"
    ]
    if kept:
        lines.append(
            f"kept: {', '.join(kept)} (in this folder, not in --methods: not run; their finished steps stay in the "
            "downstream aggregation and the report)"
        )
    for s in plan.steps:
        st = state.steps.get(s.id)
        if s.kept:
            status = "pending" if st is None else st.status
            mark = "kept" + (", inputs changed" if stale(s, state) else "") if status == DONE else f"{status}, kept"
        elif s.id not in todo:
            mark = "done, skipped"
        elif st is not None and st.status not in (DONE, "pending"):
            mark = st.status + (" -> resume" if _resumes(s, st, state, done) else " -> rerun")
        elif st is not None and st.status == DONE:
            mark = "inputs changed -> rerun"
        else:
            mark = "to run"
        lines.append(f"  {s.id:<{width}}  {format_seconds(s.estimate_s):>8}  {mark:<22} {s.budget}")
        if st is not None and st.error and s.id in todo:
            lines.append(f"  {'':<{width}}  last time: {st.error}")
    total = plan_seconds(plan, parallel, skip={s.id for s in plan.steps if s.kept})
    left = plan_seconds(plan, parallel, skip={s.id for s in plan.steps if s.id not in todo})
    lines.append(
        f"expected time (the scale's stated per-step estimates; trainings with a minutes budget at least that plus "
        f"set-up, their probes and checkpoints on top; the evaluations' at least their world steps on these "
        f"{plan.clips} clips at the measured rate; {parallel} at a time): {format_seconds(left)} left "
        f"of {format_seconds(total)} for the whole plan"
    )
    return "\n".join(lines)


def _resumes(step: Step, st: StepState, state: StepsFile, done: set[str]) -> bool:
    """Whether the run would resume ``step`` from its checkpoint (its inputs as the run will judge them now)."""
    from rgsd_agents.reproduce.plan import NothingToDo
    from rgsd_agents.reproduce.steps import resumes

    try:
        return resumes(step, st, state.fingerprint(step, done))
    except NothingToDo:
        return False


def run(args: argparse.Namespace) -> int:
    """Entry point of ``rgsd reproduce``."""
    from rgsd_agents.commands import refuse_torchrun

    if (code := refuse_torchrun("reproduce")) is not None:
        return code
    from pathlib import Path

    from rgsd_agents.reproduce.plan import build_plan
    from rgsd_agents.reproduce.report import report_step
    from rgsd_agents.reproduce.scale import ReproduceScale, load_scale
    from rgsd_agents.reproduce.steps import StepsFile
    from rgsd_envs.utils.config import set_overrides
    from rgsd_envs.utils.files import InputFileError, folder_lock

    if args.report_only:
        return _report_only(args)
    if args.sources:
        print_error("--from goes with --report-only (it runs no step)")
        return BAD_INPUT
    if args.motions is None:
        print_error("--motions is required (unless --report-only)")
        return BAD_INPUT
    if args.seeds is not None and args.seeds < 1:
        print_error("--seeds must be >= 1")
        return BAD_INPUT
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        print_error(f"{out} exists and is not a folder")
        return BAD_INPUT
    try:
        state = StepsFile.load(out)
        scale, scale_file = load_scale(args.scale, set_overrides(ReproduceScale, args.overrides))
        plan = build_plan(
            scale, scale_file, args.motions, out, args.methods, args.seeds, report=report_step, kept=state.methods()
        )
        _check_kept_motions(plan, state)
    except (InputFileError, ValueError) as err:
        print_error(err)
        return BAD_INPUT
    for method, reason in plan.dropped_methods.items():
        print(f"warning: method {method!r} left out of the plan: {reason}", file=sys.stderr)
    for style, reason in plan.dropped_styles.items():
        print(f"warning: downstream style {style!r} left out of the plan: {reason}", file=sys.stderr)
    if args.plan_only:
        print(format_plan(plan, state, scale.parallel), flush=True)
        return 0
    with folder_lock(out, "rgsd reproduce"):  # a second command on this folder stops here, before the plan
        return _run_plan(args, plan, scale, scale_file)


def _check_kept_motions(plan: Plan, state: StepsFile) -> None:
    """A ``ValueError`` when the folder's kept methods ran on other clips than this command's: one report would
    compare methods measured on different motions."""
    from pathlib import Path

    recorded = state.info.get("motions")
    if not plan.kept or recorded is None:
        return

    def same(a: str, b: str) -> bool:
        return a == b or ("demo" not in (a, b) and Path(a).resolve() == Path(b).resolve())

    if not same(str(recorded), plan.motions):
        raise ValueError(
            f"{plan.out} holds {', '.join(plan.kept)} run on --motions {recorded}: give the same --motions to add "
            "methods to it, or another --out"
        )


def _report_only(args: argparse.Namespace) -> int:
    """``--report-only``: the report of --out from its finished steps, or with --from, of several folders."""
    from pathlib import Path

    from rgsd_agents.reproduce.plan import AGGREGATE
    from rgsd_agents.reproduce.report import merge_reports, recorded_plan, write_report
    from rgsd_envs.utils.files import InputFileError, folder_lock

    out = Path(args.out)
    try:
        if not args.sources or [Path(s).resolve() for s in args.sources] == [out.resolve()]:
            plan, done = recorded_plan(out)
            with folder_lock(out, "rgsd reproduce --report-only"):
                paths = write_report([(plan, done)], plan.out, plan.seeds_dir if AGGREGATE in done else None, False)
        else:
            paths = merge_reports(args.sources, out)
    except (InputFileError, ValueError) as err:
        print_error(err)
        return BAD_INPUT
    print(f"report: {paths['report']}")
    return 0


def _run_plan(args: argparse.Namespace, plan: Plan, scale: ReproduceScale, scale_file: Path) -> int:
    """Print the plan, run its steps (skipping finished ones) and say what became of each."""
    from rgsd_agents.config import config_chain
    from rgsd_agents.reproduce.scale import SCALE_FOLDER
    from rgsd_agents.reproduce.steps import DONE, StepsFile, run_plan, stale
    from rgsd_envs.utils.config import save_yaml
    from rgsd_envs.utils.files import atomic_path

    out = plan.out
    state = StepsFile.load(out)
    print(format_plan(plan, state, scale.parallel), flush=True)
    if args.overrides or len(config_chain(scale_file, SCALE_FOLDER)) > 1:  # as run: its --set and base: applied
        save_yaml(scale, out / "scale.yaml")
    else:  # whole or not at all: a later --report-only trusts it (recorded_plan, merge_reports)
        with atomic_path(out / "scale.yaml") as tmp:
            shutil.copyfile(scale_file, tmp)
    state.info = {
        "scale": str(scale_file),
        "motions": args.motions,
        "methods": plan.methods,
        "seeds": len(plan.seeds),
        "dropped_styles": plan.dropped_styles,
        "dropped_methods": plan.dropped_methods,
    }
    if args.overrides:
        state.info["sets"] = list(args.overrides)
    state.save()
    outcome = run_plan(plan, state, parallel=scale.parallel, progress=not args.no_progress)
    counts: dict[str, int] = {}
    for step_id, status in outcome.statuses.items():
        if step_id not in outcome.kept:
            counts[status] = counts.get(status, 0) + 1
    print("steps: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) + f" ({len(outcome.ran)} ran now)")
    for step_id, status in outcome.statuses.items():
        if status != DONE and step_id not in outcome.kept:
            err = state.steps[step_id].error if step_id in state.steps else None
            print(f"  {status}: {step_id}" + (f": {err}" if err else ""))
    if plan.kept:
        changed = [s.id for s in plan.steps if s.kept and stale(s, state)]
        print(
            f"kept as they are: {', '.join(plan.kept)}"
            + (
                f" ({len(changed)} steps ran with other inputs: run with --methods {' '.join(plan.kept)} to redo them)"
                if changed
                else ""
            )
        )
    report = plan.out / "report.md"
    if report.is_file():
        print(f"report: {report}")
    if outcome.interrupted:
        print("interrupted: run the same command again to resume", file=sys.stderr)
        return INTERRUPTED
    return 0 if outcome.ok else 1
