"""Run the paper's whole experiment: train every method and seed, evaluate, downstream, one report.

Examples::

    rgsd reproduce --motions demo --out runs/repro_smoke --scale smoke            # every step, minutes on 2 cores
    rgsd reproduce --motions motions/paper --out runs/repro --scale cpu           # about 8 hours on 2 cores
    rgsd reproduce --motions motions/paper --out runs/repro_gpu --scale gpu       # one H100, about 25 minutes
    rgsd reproduce --motions motions/paper --out runs/repro_paper --scale paper   # the paper's budgets
    rgsd reproduce --motions demo --out runs/repro --scale smoke --methods rgsd ase --seeds 2
    rgsd reproduce --motions demo --out runs/repro --scale my_scale.yaml          # a copied, edited scale
    rgsd reproduce --motions demo --out runs/repro --scale smoke --plan-only      # print the plan, run nothing
    rgsd reproduce --motions demo --out runs/repro --scale smoke --set eval.settings.rollouts=2 --set seeds=1

Steps: RGSD's encoder pretraining (per seed), `rgsd train` of every method and seed on its preset for the scale,
`rgsd eval --protocol paper` (scaled down by the scale) on all runs together, `rgsd downstream` for freestyle,
sidestep and backward on every run, the downstream seed aggregation, then <out>/report.md (Table 1, the
discovery figure, FID under sampled latents, the kappa sweep, the downstream curves, beside the paper's numbers).
``--set KEY=VALUE`` changes a field of the scale (ReproduceScale, checked and typed as in ``rgsd train``); the
scale as run is saved as <out>/scale.yaml. Run the same command again to skip finished steps, resume interrupted
ones from their checkpoints and retry failed ones; <out>/steps.json holds each step's state, <out>/logs/ its output.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from typing import TYPE_CHECKING, Any

from rgsd_agents.commands import add_doc_parser, add_set_argument

if TYPE_CHECKING:
    from pathlib import Path

    from rgsd_agents.reproduce.plan import Plan, Step
    from rgsd_agents.reproduce.scale import ReproduceScale
    from rgsd_agents.reproduce.steps import StepsFile, StepState


def register(subparsers: Any) -> None:
    """Add ``rgsd reproduce`` to the CLI."""
    p = add_doc_parser(subparsers, "reproduce", "run the paper's whole experiment into one report", __doc__)
    p.add_argument("--motions", required=True, help='reference clips: "demo" or a folder of clips (the paper: 20)')
    p.add_argument("--out", required=True, help="folder of every run, the report and steps.json")
    p.add_argument(
        "--scale",
        default="smoke",
        help="a built-in scale (smoke, cpu, gpu, paper: rgsd_agents/presets/reproduce) or a YAML file (default smoke)",
    )
    add_set_argument(
        p, "set a field of the scale, e.g. --set train.minutes=2 --set eval.settings.rollouts=4 (repeatable)"
    )
    p.add_argument("--methods", nargs="+", help="methods to run (default: the scale's, else every method)")
    p.add_argument("--seeds", type=int, help="seeds per method (default: the scale's)")
    p.add_argument("--plan-only", action="store_true", help="print the plan and its expected time, run nothing")
    p.add_argument("--no-progress", action="store_true", help="a line per step instead of the progress bar")
    p.set_defaults(func=run)


def format_plan(plan: Plan, state: StepsFile, parallel: int) -> str:
    """The plan as printed: each step with its budget, stated time and state, then the expected total."""
    from rgsd_agents.reproduce.plan import plan_seconds
    from rgsd_agents.reproduce.steps import DONE, format_seconds, pending_steps

    todo = set(pending_steps(plan, state))
    done = {k for k, v in state.steps.items() if v.status == DONE}
    width = max(len(s.id) for s in plan.steps)
    lines = [
        f"plan: {len(plan.steps)} steps into {plan.out} (scale {plan.scale_file}; methods {', '.join(plan.methods)}; "
        f"seeds {len(plan.seeds)}; {parallel} at a time)"
    ]
    for s in plan.steps:
        st = state.steps.get(s.id)
        if s.id not in todo:
            mark = "done, skipped"
        elif st is not None and st.status not in (DONE, "pending"):
            mark = st.status + (" -> resume" if _resumes(s, st, done) else " -> rerun")
        elif st is not None and st.status == DONE:
            mark = "inputs changed -> rerun"
        else:
            mark = "to run"
        lines.append(f"  {s.id:<{width}}  {format_seconds(s.estimate_s):>8}  {mark:<22} {s.budget}")
        if st is not None and st.error and s.id in todo:
            lines.append(f"  {'':<{width}}  last time: {st.error}")
    total = plan_seconds(plan, parallel)
    left = plan_seconds(plan, parallel, skip={s.id for s in plan.steps if s.id not in todo})
    lines.append(
        f"expected time (the scale's stated per-step estimates, {parallel} at a time): {format_seconds(left)} left "
        f"of {format_seconds(total)} for the whole plan"
    )
    return "\n".join(lines)


def _resumes(step: Step, st: StepState, done: set[str]) -> bool:
    """Whether the run would resume ``step`` from its checkpoint (its inputs as the run will judge them now)."""
    from rgsd_agents.reproduce.plan import NothingToDo, fingerprint
    from rgsd_agents.reproduce.steps import resumes

    try:
        return resumes(step, st, fingerprint(step.inputs(done), step.extra))
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

    if args.seeds is not None and args.seeds < 1:
        print("error: --seeds must be >= 1", file=sys.stderr)
        return 2
    try:
        scale, scale_file = load_scale(args.scale, set_overrides(ReproduceScale, args.overrides))
        plan = build_plan(scale, scale_file, args.motions, args.out, args.methods, args.seeds, report=report_step)
    except (InputFileError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        print(f"error: {out} exists and is not a folder", file=sys.stderr)
        return 2
    if args.plan_only:
        print(format_plan(plan, StepsFile.load(out), scale.parallel), flush=True)
        return 0
    with folder_lock(out, "rgsd reproduce"):  # a second command on this folder stops here, before the plan
        return _run_plan(args, plan, scale, scale_file)


def _run_plan(args: argparse.Namespace, plan: Plan, scale: ReproduceScale, scale_file: Path) -> int:
    """Print the plan, run its steps (skipping finished ones) and say what became of each."""
    from rgsd_agents.reproduce.steps import StepsFile, run_plan
    from rgsd_envs.utils.config import save_yaml

    out = plan.out
    state = StepsFile.load(out)
    print(format_plan(plan, state, scale.parallel), flush=True)
    if args.overrides:  # the scale as run, its --set applied
        save_yaml(scale, out / "scale.yaml")
    else:
        shutil.copyfile(scale_file, out / "scale.yaml")
    state.info = {"scale": str(scale_file), "motions": args.motions, "methods": plan.methods, "seeds": len(plan.seeds)}
    if args.overrides:
        state.info["sets"] = list(args.overrides)
    state.save()
    outcome = run_plan(plan, state, parallel=scale.parallel, progress=not args.no_progress)
    counts: dict[str, int] = {}
    for status in outcome.statuses.values():
        counts[status] = counts.get(status, 0) + 1
    print("steps: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) + f" ({len(outcome.ran)} ran now)")
    for step_id, status in outcome.statuses.items():
        if status not in ("done",):
            err = state.steps[step_id].error if step_id in state.steps else None
            print(f"  {status}: {step_id}" + (f": {err}" if err else ""))
    report = plan.out / "report.md"
    if report.is_file():
        print(f"report: {report}")
    if outcome.interrupted:
        print("interrupted: run the same command again to resume", file=sys.stderr)
        return 130
    return 0 if outcome.ok else 1
