"""``rgsd train``: train a skill-conditioned policy (imitation + discovery) into a run folder."""

from __future__ import annotations

import argparse
import contextlib
import logging
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rgsd_agents.commands import add_run_arguments, out_taken, run_overrides
from rgsd_envs.utils.command import BAD_INPUT, print_error
from rgsd_envs.utils.signals import INTERRUPTED

if TYPE_CHECKING:
    from rgsd_agents.rl.distributed import DataParallel


LOOP_WORDS = {"on_policy": "on the PPO runner", "off_policy": "on the off-policy runner"}
"""How the help names each ``SkillMethod.LOOP``."""


def preset_help() -> str:
    """What ``--config`` takes: a file or a preset (the methods' from the registry, the others from the folder)."""
    from rgsd_agents.config import preset_names
    from rgsd_agents.methods import method_names

    methods = method_names()
    others = [p for p in preset_names() if p not in methods and p.removesuffix("_paper") not in methods]
    return f"a YAML file or a preset name (<method> or <method>_paper for {', '.join(methods)}; {', '.join(others)})"


def methods_by_loop() -> str:
    """The registry's methods grouped by the loop they train in, e.g. "rgsd, ase on the PPO runner; fb_cpr ..."."""
    from rgsd_agents.methods import METHODS

    loops: dict[str, list[str]] = {}
    for name, cls in METHODS.items():
        loops.setdefault(cls.LOOP, []).append(name)
    return "; ".join(f"{', '.join(names)} {LOOP_WORDS.get(loop, loop)}" for loop, names in loops.items())


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``rgsd train`` to the CLI."""
    p = subparsers.add_parser(
        "train",
        help="train a skill-conditioned policy with one of the methods into a run folder",
        description=f"Train a skill-conditioned policy with the config's method ({methods_by_loop()}). Writes "
        "<out>/config.yaml, policy.pt, method.json and the method's files, checkpoints/ and tb/ (TensorBoard). RGSD without an encoder in the config pretrains one first into "
        "<out>/pretrain/.",
        epilog="examples:\n  rgsd train --config cpu --device cpu\n  rgsd train --config paper --device cuda\n"
        "  rgsd train --config paper --device cuda --set env.backend=warp --set env.device=cuda"
        '   (simulator on the GPU too; needs pip install "rgsd-envs[warp]")\n'
        "  torchrun --nproc-per-node 4 -m rgsd_agents.cli train --config paper   (one rank per GPU)\n"
        "  rgsd train --resume runs/cpu_x --set max_minutes=180 --set env.deviation.adaptive=true"
        "   (go on with a tighter deviation rule: the env.deviation.* keys may change on resume, the change is"
        " recorded in config_changes.yaml)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", help=preset_help() + "; not needed with --resume")
    p.add_argument("--out", help="run folder (default: runs/<config name>_<date-time>)")
    add_run_arguments(p, "override a config value, e.g. --set ppo.epochs=3 --set env.motions=motions/ (repeatable)")
    p.set_defaults(func=run)


def default_out(config: str) -> Path:
    """``runs/<config stem>_<YYYYmmdd-HHMMSS>``."""
    return Path("runs") / f"{Path(config).stem}_{time.strftime('%Y%m%d-%H%M%S')}"


def run(args: argparse.Namespace) -> int:
    """Entry point of ``rgsd train`` (also one rank of ``torchrun ... -m rgsd_agents.cli train``)."""
    with contextlib.ExitStack() as stack:  # holds the run folder's lock while the run writes into it
        return _train(args, stack)


def _train(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    """``rgsd train`` with the run folder held in ``stack``."""
    from rgsd_agents.config import load_config
    from rgsd_agents.rl.distributed import init_distributed, shutdown
    from rgsd_agents.training.trainers import saved_method, trainer_class
    from rgsd_envs.runs.run_dir import RunDir
    from rgsd_envs.sim import check_backend
    from rgsd_envs.utils.device import resolve_device

    overrides = run_overrides(args)
    if args.resume:
        if args.config or args.out:
            print_error("--resume continues a run with its saved config; leave out --config and --out")
            return BAD_INPUT
        saved = RunDir(args.resume)
        saved.check_kind(RunDir.SKILL_RUN, "rgsd train --resume")
        device = overrides.get("device") or (
            saved.config().get("device", "auto") if saved.config_path.is_file() else "auto"
        )
        resolve_device(device)  # a bad device ends here
        trainer = trainer_class(saved_method(args.resume))
        dp = init_distributed(device)
        _quiet_other_ranks(dp)
        extra = _parallel(trainer, dp)
        if extra is None:
            return BAD_INPUT
        hold(stack, dp, args.resume, create=False)
        runner = trainer.resume(args.resume, overrides, progress=not args.no_progress, **extra)
    else:
        if not args.config:
            print_error("give --config (" + preset_help() + ") or --resume RUN")
            return BAD_INPUT
        cfg = load_config(args.config, overrides)
        resolve_device(cfg.device)  # a bad device ends here, before any folder exists
        check_backend(cfg.env.backend)  # so does backend "warp" without its extra
        trainer = trainer_class(cfg.method.name)
        dp = init_distributed(cfg.device)
        _quiet_other_ranks(dp)
        extra = _parallel(trainer, dp)
        if extra is None:
            return BAD_INPUT
        out = Path(args.out) if args.out else default_out(args.config)
        taken = new_run_taken(out, args.config)
        if dp is not None:  # rank 0 decides: the clock and the file system may differ between ranks
            out, taken = dp.main_value((out, taken))
        if taken:
            print_error(taken)
            shutdown(dp)
            return BAD_INPUT
        hold(stack, dp, out)
        try:
            runner = trainer(cfg, out, progress=not args.no_progress, **extra)
        except KeyboardInterrupt as err:  # e.g. during its pretraining: no checkpoint yet
            raise KeyboardInterrupt(
                f"{str(err) or 'interrupted'} before the run's first checkpoint: nothing to resume; run the same "
                "command again to start it anew"
            ) from None
    if args.resume and runner.budget_reached():  # every rank loaded the same checkpoint: they agree
        runner.close()
        shutdown(dp)
        if runner.is_main:
            print(runner.budget_message())
        return 0
    try:
        history = runner.learn()
    except BaseException:
        runner.close()
        shutdown(dp, wait=False)  # the other ranks may never arrive
        raise
    runner.close()
    shutdown(dp)
    if runner.is_main:
        with contextlib.suppress(OSError):  # stopped by SIGHUP: the terminal may be gone
            print(summary(runner.run.path, history, getattr(runner, "initial_probe", None)))
            if runner.stopped_by:
                print(runner.stop_message(), file=sys.stderr)
    return INTERRUPTED if runner.stopped_by else 0


def new_run_taken(out: Path, config: str) -> str | None:
    """Why a new skill-policy run (of preset or file ``config``) cannot start in ``out``, in one line: it holds
    another run, a run to continue, a report, clips, a policy or an encoder (``out_taken``, ``holds_outputs``);
    None: it can."""
    from rgsd_envs.runs.run_dir import RunDir

    return out_taken(out, RunDir.SKILL_RUN) or holds_outputs(out, config)


def holds_outputs(out: Path, config: str) -> str | None:
    """One line when ``out`` holds a policy, or an encoder but no run of ``rgsd train`` (``rgsd pretrain``'s output
    folder, say): a training into it would write over them (pretraining again over its encoder.pt) and mix its own
    files in. None otherwise (a run of ``rgsd train`` stopped before its first checkpoint starts again)."""
    from rgsd_envs.runs.run_dir import RunDir

    run = RunDir(out)
    if run.policy_path.is_file():
        return f"{out} holds a trained policy (policy.pt) but no checkpoint to continue; train into another --out"
    if run.encoder_path.is_file() and run.kind() is None:
        encoder = shlex.quote(str(run.encoder_path))
        return (
            f"{out} holds an encoder (encoder.pt) but no training run; to train with it, into a new folder: "
            f"rgsd train --config {shlex.quote(config)} --set encoder={encoder} --out NEW_FOLDER"
        )
    return None


def hold(
    stack: contextlib.ExitStack,
    dp: DataParallel | None,
    folder: str | Path,
    create: bool = True,
    command: str = "rgsd train",
) -> None:
    """Rank 0 holds the run folder until ``stack`` closes (``folder_lock``): a second ``rgsd train`` (or ``rgsd demo``)
    on it stops. A folder this call creates is removed again if the run fails before writing more than its config and
    encoder."""
    from rgsd_envs.runs.run_dir import RunDir
    from rgsd_envs.utils.files import folder_lock

    if dp is None or dp.rank == 0:
        stack.enter_context(folder_lock(folder, command, create, setup_files=(RunDir.CONFIG, RunDir.ENCODER)))


def _parallel(trainer: type, dp: DataParallel | None) -> dict | None:
    """The data-parallel argument of ``trainer`` (None after an error: a loop that trains in one process only)."""
    from rgsd_agents.rl.distributed import shutdown

    if trainer.DATA_PARALLEL:
        return {"dp": dp}
    if dp is not None:
        print_error(f"{trainer.__name__} trains in one process; run it without torchrun")
        shutdown(dp)
        return None
    return {}


def _quiet_other_ranks(dp: DataParallel | None) -> None:
    """Only rank 0 logs below warnings (the ranks would repeat each other)."""
    if dp is not None and not dp.is_main:
        logging.getLogger().setLevel(logging.WARNING)


SUMMARY_ROWS = (
    ("rollout/imitation_reward", "imitation reward / step", 1.0, ""),
    ("episodes/imitation_length", "imitation episode length", 1.0, " steps"),
    ("rollout/imitation_cartesian_error", "imitation Cartesian error (training episodes)", 100.0, " cm"),
    ("rollout/discovery_reward", "discovery reward / step", 1.0, ""),
    ("method/reward", "the method's own reward / step", 1.0, ""),
    ("method/fb_loss", "FB loss (Meta Motivo)", 1.0, ""),
    ("method/disc_loss", "discriminator loss (ASE, CALM, Meta Motivo)", 1.0, ""),
)
"""The training summary's early-against-late rows: (metric, label, scale, unit); a row shows where both windows
have its metric."""


def summary(run: Path, history: list[dict[str, float]], initial_probe: dict[str, float] | None = None) -> str:
    """A few lines on how the session went (early vs late iterations, probe before vs after) and where its files are."""
    lines = [f"run folder: {run}"]
    if history:
        # windows of ~10% of the iterations; the first iteration is skipped: only episodes shorter than one
        # rollout can end in it, which biases its episode statistics low
        w = max(1, min(50, len(history) // 10))
        first = _mean(history[1 : 1 + w] if len(history) > w + 1 else history[:w])
        last = _mean(history[-w:])
        span = f"iterations 2-{1 + w}" if len(history) > w + 1 else "first iterations"
        rows = [
            f"    {label}: {scale * first[key]:.2f}{unit} -> {scale * last[key]:.2f}{unit}"
            for key, label, scale, unit in SUMMARY_ROWS
            if key in first and key in last
        ]
        if rows:  # none: e.g. Meta Motivo's random-action phase filled the first window
            lines += [f"  mean over {span} -> last {w}:", *rows]
        probes = [h for h in history if "probe/cartesian_error_cm" in h]
        # a fresh run compares with the untrained policy; a resumed session with its own first probe, if it had two
        if probes and (initial_probe or len(probes) > 1):
            before, after = initial_probe or probes[0], probes[-1]
            since = "untrained" if initial_probe else f"iteration {before.get('charts/iteration', 0):.0f}"
            lines.append(
                "  probe (fixed starts of every clip, mean action, no early termination; "
                f"{since} -> iteration {after.get('charts/iteration', 0):.0f}): Cartesian error "
                f"{before['probe/cartesian_error_cm']:.1f} cm -> {after['probe/cartesian_error_cm']:.1f} cm, frames within "
                f"the deviation threshold {100 * before['probe/frames_within_threshold']:.0f}% -> "
                f"{100 * after['probe/frames_within_threshold']:.0f}%"
            )
            clips = [k for k in before if k.startswith("probe_clips/") and k in after]
            if clips:
                per_clip = ", ".join(
                    f"{k[len('probe_clips/') : -len('_cm')]} {before[k]:.0f} -> {after[k]:.0f}" for k in clips
                )
                lines.append(f"    per clip (cm): {per_clip}")
        sps = sum(h["charts/SPS"] for h in history) / len(history)
        lines.append(f"  {len(history)} iterations this session, mean {sps:.0f} samples/s")
    lines.append(f"  policy: {run / 'policy.pt'}   TensorBoard: tensorboard --logdir {shlex.quote(str(run / 'tb'))}")
    return "\n".join(lines)


def _mean(history: list[dict[str, float]]) -> dict[str, float]:
    """Per-key mean over iterations (keys missing in some iterations are averaged where present)."""
    keys = {k for h in history for k in h}
    return {k: sum(h[k] for h in history if k in h) / sum(k in h for h in history) for k in keys}
