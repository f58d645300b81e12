"""The steps of ``rgsd reproduce``, what each runs, what it depends on, and how long the whole plan should take.

Steps, in order (``<out>`` is the command's folder)::

    pretrain/<m>/seed<k>          <out>/pretrain/<m>_seed<k>/     the frozen encoder of a method that imitates (RGSD)
    train/<m>/seed<k>             <out>/runs/<m>_seed<k>/         rgsd train --config <preset of m> (+ the scale's --set)
    eval/<m>                      <out>/eval/<m>/                 rgsd eval --protocol paper (scaled) on m's finished runs
    downstream/<style>/<m>/seed<k> <out>/downstream/<style>/<m>_seed<k>/  rgsd downstream on run (m, k)
    aggregate                     <out>/downstream/seeds/         rgsd downstream --seeds (mean and spread over seeds)
    report                        <out>/report.md                 the paper's tables and figures (``report``)

Dependencies: a step's ``needs`` must have finished successfully, else it is skipped; its ``after`` must have
finished in any way (the evaluation takes the runs that trained, the aggregation the downstream runs that
finished, the report whatever there is).

A folder holds the methods of every command run into it: the methods a command names (``--methods``) run, and
those of the folder it does not name are *kept*: their steps stay in the plan, their finished results feed the
aggregation and the report, and they do not run (``Step.kept``). Each method's evaluation is its own step, so
adding a method evaluates that method's runs only.

A step's fingerprint (``step_fingerprint``) covers its arguments, what they do not show (the resolved config a
training runs with: its preset file after ``base:`` inheritance and every ``--set``), the rgsd packages' versions,
and the fingerprint and end time of every step it reads: an edited preset retrains that method and reruns what
reads its runs, and nothing else.

RGSD pretrains its encoder once per seed (its own step, on the plan's clips with the seed's settings) rather than sharing
one: the paper's seeds repeat the whole method, and the encoder's initialisation and minibatches are part of what
a seed varies (a shared encoder would hide that part of the spread). The cost is small next to the trainings: the
scales' stated times (estimates) are 1.5 minutes against 8 hours per seed at the full budget and 2.5 against 26 at
the cpu one, and on 2 cores and 13 clips one took 26 s against 26 minutes
(docs/results/reproduce_cpu/report.md).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rgsd_agents.downstream.report import NEUTRAL_START, start_label
from rgsd_agents.reproduce.scale import ReproduceScale
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.provenance import RGSD_PACKAGES, installed_versions

PRETRAIN, TRAIN, EVAL, DOWNSTREAM, AGGREGATE, REPORT = "pretrain", "train", "eval", "downstream", "aggregate", "report"
KINDS = (PRETRAIN, TRAIN, EVAL, DOWNSTREAM, AGGREGATE, REPORT)
TRAIN_SETUP_MINUTES = 0.8
"""Set-up a training with a minutes budget takes beside it (simulator, networks, the last checkpoint): the least
margin a built-in scale's stated time leaves beside its own minutes (the ``gpu`` and ``cpu`` scale files)."""
DOWNSTREAM_SETUP_MINUTES = 0.2
"""Set-up a downstream training with a minutes budget takes beside it (its low-level policy, arena): the least
margin a built-in scale's stated time leaves beside its own minutes (the ``gpu`` and ``cpu`` scale files)."""
EVAL_SETTINGS = "eval_settings.yaml"
"""``<out>/eval_settings.yaml``: the scale's evaluation settings, given to ``rgsd eval --config``."""
PACKAGES = tuple(dist for dist, _ in RGSD_PACKAGES)


def budgeted_seconds(stated_minutes: float, max_minutes: float | None, setup_minutes: float) -> float:
    """A training's stated seconds: the scale's stated time, or where longer its ``max_minutes`` plus set-up. A
    lower bound when the minutes end the run: they count its iterations only, and its probes and checkpoints come on
    top (and an overestimate when its iterations end it first; the ETA then corrects it by the measured times)."""
    if max_minutes is None:
        return 60.0 * stated_minutes
    return 60.0 * max(stated_minutes, max_minutes + setup_minutes)


def eval_id(method: str) -> str:
    """The id of ``method``'s evaluation step."""
    return f"{EVAL}/{method}"


@functools.cache
def package_versions() -> dict[str, str]:
    """The installed version of each rgsd package (in every fingerprint: an upgrade reruns what it may change)."""
    installed = installed_versions(PACKAGES)
    return {name: installed.get(name, "not installed") for name in PACKAGES}


class NothingToDo(Exception):
    """A step has no input left (e.g. no training finished): it is skipped with this reason."""


@dataclass
class Step:
    """One step of the plan (see the module docstring)."""

    id: str
    kind: str
    title: str
    budget: str
    """The step's budget in words (a training's: ``TrainingBudget.describe``; iterations, minutes, rollouts)."""
    estimate_s: float
    """Stated wall time: the scale's estimate for this kind of step; a training or downstream training at least its
    minutes budget plus set-up (``budgeted_seconds``), an evaluation at least its world steps on the plan's clips."""
    needs: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    method: str | None = None
    seed: int | None = None
    style: str | None = None
    output: Path | None = None
    """The folder the step writes; cleared before a fresh (not resumed) start."""
    checkpoint: Path | None = None
    """When this file exists, an unfinished step resumes with ``resume_command`` instead of starting afresh."""
    command: Callable[[set[str]], list[str]] | None = None
    """The ``rgsd`` arguments of the step, given the ids of the steps done so far (``NothingToDo`` if none fit)."""
    resume_command: Callable[[], list[str]] | None = None
    func: Callable[[set[str]], None] | None = None
    """An in-process step (the report), given the ids of the steps done so far."""
    prepare: Callable[[], None] | None = None
    """Writes the files the command reads (a settings file), just before the step starts."""
    extra: Any = None
    """What else the step reads that its arguments do not show (a training's resolved config, a settings file's
    content): in its fingerprint."""
    kept: bool = False
    """A step of a method the folder holds but this command does not name (``--methods``): its finished result is
    used as it is, and it does not run."""

    def inputs(self, done: set[str]) -> list[str]:
        """What the step's fingerprint covers: its arguments (in-process steps: the done steps it reads)."""
        if self.command is not None:
            return self.command(done)
        return sorted(d for d in done if d in self.after or d in self.needs)


def fingerprint(inputs: Sequence[str], extra: Any = None) -> str:
    """A short hash of a step's inputs and the rgsd packages' versions: a finished step whose inputs changed runs
    again."""
    text = json.dumps([list(inputs), extra, package_versions()], sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def step_fingerprint(step: Step, done: set[str], upstream: Mapping[str, tuple[str, str | None]]) -> str:
    """The fingerprint a step runs with now: its inputs (``NothingToDo`` if none), its extra, and the (fingerprint,
    end time) in ``upstream`` of each done step it reads, so a step reruns after what it reads ran again."""
    read = {d: upstream.get(d) for d in sorted({*step.needs, *step.after}) if d in done}
    return fingerprint(step.inputs(done), [step.extra, read])


@dataclass
class Plan:
    """The steps of one ``rgsd reproduce`` folder."""

    out: Path
    motions: str
    scale: ReproduceScale
    scale_file: Path
    methods: list[str]
    """Every method of the folder (those this command runs and those it keeps), in the order the folder got them."""
    seeds: list[int]
    """The seeds of the methods this command runs."""
    steps: list[Step] = field(default_factory=list)
    method_seeds: dict[str, list[int]] = field(default_factory=dict)
    """The seeds of each method where they differ from ``seeds`` (a kept method's, as they ran)."""
    dropped_styles: dict[str, str] = field(default_factory=dict)
    """Downstream styles of the scale left out of the plan, with why (the motions lack the style's category)."""
    dropped_methods: dict[str, str] = field(default_factory=dict)
    """Methods of the registry left out of the plan, with why (no training preset at this scale)."""
    clips: int = 0
    """Clips of the plan's motions."""
    frames: int = 0
    """Their frames, all clips together."""

    def step(self, step_id: str) -> Step:
        """The step called ``step_id``."""
        return next(s for s in self.steps if s.id == step_id)

    def seeds_of(self, method: str) -> list[int]:
        """The seeds of ``method`` in this folder."""
        return self.method_seeds.get(method, self.seeds)

    @property
    def kept(self) -> list[str]:
        """The folder's methods this command keeps as they are."""
        return [m for m in self.methods if all(s.kept for s in self.steps if s.method == m)]

    def run_dir(self, method: str, seed: int) -> Path:
        """The training run folder of (method, seed)."""
        return self.out / "runs" / f"{method}_seed{seed}"

    def downstream_dir(self, style: str, method: str, seed: int, start: str = NEUTRAL_START) -> Path:
        """The downstream run folder of (style, method, seed) from the neutral start (or ``start``: ``init_skill``)."""
        variant = "" if start == NEUTRAL_START else f"_{start}_start"
        return self.out / "downstream" / style / f"{method}{variant}_seed{seed}"

    def eval_dir(self, method: str) -> Path:
        """The evaluation report folder of ``method``'s runs (``rgsd eval --out``)."""
        return self.out / "eval" / method

    @property
    def seeds_dir(self) -> Path:
        """The downstream seed aggregation folder."""
        return self.out / "downstream" / "seeds"


def step_label(step_id: str) -> str:
    """A file-name-safe form of a step id (its log file's name)."""
    return step_id.replace("/", "__")


def _motions_value(motions: str) -> str:
    """``env.motions`` for ``--set``: "demo", or the folder's absolute path as a quoted YAML string."""
    return motions if motions == "demo" else json.dumps(str(Path(motions).resolve()))


def _sets(items: Sequence[str]) -> list[str]:
    return [a for kv in items for a in ("--set", kv)]


def build_plan(
    scale: ReproduceScale,
    scale_file: str | os.PathLike,
    motions: str,
    out: str | os.PathLike,
    methods: Sequence[str] | None = None,
    seeds: int | None = None,
    report: Callable[[Plan, set[str]], None] | None = None,
    kept: Mapping[str, Sequence[int]] | None = None,
) -> Plan:
    """The plan of a scale on ``motions`` into ``out`` (methods: ``--methods``, else the scale's, else every method
    of ``METHODS``; seeds: ``--seeds``, else the scale's). ``kept``: the folder's other methods and their seeds, whose
    steps join the plan as kept (``Step.kept``). Every training and downstream config is loaded here, so a bad preset
    or ``--set`` ends before anything runs."""
    from rgsd_agents.config import load_config, parse_set, resolve
    from rgsd_agents.downstream.runner import DownstreamConfig
    from rgsd_agents.methods import method_class, method_names
    from rgsd_agents.training.budget import training_budget
    from rgsd_envs.motion.library import clip_files
    from rgsd_envs.utils.config import to_dict

    if motions != "demo":
        clip_files(motions)  # a missing or empty folder ends here, before anything runs
    out = Path(out).resolve()
    known = method_names()
    chosen = list(scale.methods or known) if methods is None else list(dict.fromkeys(methods))
    bad = [m for m in chosen if m not in known]
    if bad:
        raise ValueError(f"--methods: unknown method {bad[0]!r}; methods: {', '.join(known)}")
    named = "--methods" if methods is not None else f"{scale_file}: methods" if scale.methods else None
    chosen, dropped_methods = _methods_with_preset(chosen, scale.train.preset, named)
    others = {m: list(k) for m, k in (kept or {}).items() if m not in chosen}
    bad = [m for m in others if m not in known]
    if bad:
        raise ValueError(f"{out}: the folder holds method {bad[0]!r}, which this rgsd does not know; use another --out")
    order = list(dict.fromkeys([*(kept or {}), *chosen]))  # the folder's methods first, as they were run
    plan = Plan(out, motions, scale, Path(scale_file), order, list(range(seeds or scale.seeds)))
    plan.method_seeds = others
    plan.dropped_methods = dropped_methods
    t, dev = scale.train, scale.device
    motion_set = f"env.motions={_motions_value(motions)}"
    train_ids: dict[str, list[str]] = {}

    for method in plan.methods:
        cls = method_class(method)
        keep = method in others
        preset = t.preset.format(method=method)
        items = [motion_set, f"device={dev}", *t.overrides(method, cls.LOOP)]
        cfg = load_config(preset, parse_set(items))  # checks the preset and every override now
        budget = training_budget(cfg).describe()  # in the method's loop's terms (Meta Motivo: steps and updates)
        train_s = budgeted_seconds(t.estimate_minutes, cfg.max_minutes, TRAIN_SETUP_MINUTES)
        pretrained = cls.ENCODER == "pretrained" and cfg.encoder is None
        for seed in plan.seeds_of(method):
            run = plan.run_dir(method, seed)
            needs: tuple[str, ...] = ()
            encoder_set: list[str] = []
            if pretrained:
                pre_dir = out / "pretrain" / f"{method}_seed{seed}"
                pre_cfg = resolve(load_config(preset, {**parse_set(items), "seed": seed}))
                # the whole pretraining (the run's clips, seed, device and skill size), not only its ``pretrain:``
                # options: the file is all ``rgsd pretrain`` reads, and its defaults are the demo clips and seed 0
                pcfg = pre_cfg.pretrain_config()
                pid = f"{PRETRAIN}/{method}/seed{seed}"
                plan.steps.append(
                    Step(
                        pid, PRETRAIN, f"pretrain {method}'s encoder, seed {seed}",
                        f"{pcfg.steps} steps, hidden {list(pcfg.hidden)}",
                        60.0 * t.pretrain_estimate_minutes, method=method, seed=seed, output=pre_dir,
                        command=_pretrain_command(pre_dir, dev), extra=to_dict(pcfg), kept=keep,
                        prepare=_write_yaml(to_dict(pcfg), pre_dir.parent / f"{pre_dir.name}.yaml"),
                    )
                )  # fmt: skip
                needs = (pid,)
                encoder_set = [f"encoder={pre_dir / 'encoder.pt'}"]
            tid = f"{TRAIN}/{method}/seed{seed}"
            argv = ["train", "--config", preset, "--out", str(run), "--seed", str(seed), *_sets(items + encoder_set)]
            # what the training runs with: the preset file's contents after its base:, every --set, the seed
            resolved = to_dict(load_config(preset, {**parse_set(items + encoder_set), "seed": seed}))
            plan.steps.append(
                Step(
                    tid, TRAIN, f"train {method}, seed {seed} ({preset})", budget, train_s,
                    needs=needs, method=method, seed=seed, output=run,
                    checkpoint=run / "checkpoints" / "latest.pt",
                    command=lambda done, argv=argv: list(argv),
                    resume_command=lambda run=run: ["train", "--resume", str(run)],
                    extra=resolved, kept=keep,
                )
            )  # fmt: skip
            train_ids.setdefault(method, []).append(tid)

    e = scale.eval
    settings = {"protocol": e.protocol, **e.settings}
    per_run = _eval_seconds_per_run(plan, e.protocol, e.settings, 60.0 * e.estimate_minutes_per_run)
    for method in plan.methods:
        n_runs = len(train_ids[method])
        plan.steps.append(
            Step(
                eval_id(method), EVAL, f"rgsd eval --protocol {e.protocol} on {method}'s runs",
                f"{n_runs} runs; " + (", ".join(f"{k} {v}" for k, v in e.settings.items()) or "the protocol's settings"),
                per_run * n_runs, after=tuple(train_ids[method]), method=method,
                output=plan.eval_dir(method), command=_eval_command(plan, method, dev), extra=settings,
                prepare=_write_yaml(settings, plan.out / EVAL_SETTINGS), kept=method in others,
            )
        )  # fmt: skip

    d = scale.downstream
    ds_items = d.overrides()
    ds_cfg = load_config(d.preset, parse_set(ds_items), cls=DownstreamConfig, presets="downstream")
    ds_budget = f"{ds_cfg.iterations} it" + (f" or {ds_cfg.max_minutes:g} min" if ds_cfg.max_minutes else "")
    ds_budget += f", {ds_cfg.num_envs} worlds x {ds_cfg.horizon}"
    ds_s = budgeted_seconds(d.estimate_minutes, ds_cfg.max_minutes, DOWNSTREAM_SETUP_MINUTES)
    ds_ids: list[str] = []
    methods_ = plan.methods
    starts = [(method, NEUTRAL_START) for method in methods_] + [(m, "style") for m in d.style_start if m in methods_]
    styles, plan.dropped_styles = runnable_styles(d.styles, motions)
    for style in styles:
        for method, start in starts:
            best_of_n = method_class(method).LATENT_CHOICE == "best_of_n"
            neutral = start == NEUTRAL_START
            name = method if neutral else f"{method}-{start}-start"
            for seed in plan.seeds_of(method):
                run, target = plan.run_dir(method, seed), plan.downstream_dir(style, method, seed, start)
                latents = (
                    [f"task.clip_latents={plan.eval_dir(method) / run.name / RunDir.CLIP_LATENTS}"] if best_of_n else []
                )
                start_set = [] if neutral else [f"init_skill={start}"]
                argv = ["downstream", "--config", d.preset, "--low-level", str(run), "--style", style,
                        "--out", str(target), "--seed", str(seed), "--device", dev,
                        *_sets(ds_items + latents + start_set)]  # fmt: skip
                sid = f"{DOWNSTREAM}/{style}/{name}/seed{seed}"
                needs = (f"{TRAIN}/{method}/seed{seed}",) + ((eval_id(method),) if best_of_n else ())
                # what the downstream training runs with: its preset file's contents and every --set
                resolved = to_dict(
                    load_config(d.preset, parse_set(ds_items + latents + start_set), DownstreamConfig, "downstream")
                )
                plan.steps.append(
                    Step(
                        sid, DOWNSTREAM, f"downstream {style}, {start_label(method, start)}, seed {seed}", ds_budget,
                        ds_s, needs=needs, method=method, seed=seed, style=style, output=target,
                        checkpoint=target / "checkpoints" / "latest.pt",
                        command=lambda done, argv=argv: list(argv),
                        resume_command=lambda target=target: ["downstream", "--resume", str(target)],
                        extra=resolved, kept=method in others,
                    )
                )  # fmt: skip
                ds_ids.append(sid)

    if ds_ids:  # a scale without downstream styles has nothing to aggregate
        plan.steps.append(
            Step(
                AGGREGATE, AGGREGATE, "mean and spread over seeds of the downstream curves", f"{len(ds_ids)} runs",
                60.0 * scale.aggregate_estimate_minutes, after=tuple(ds_ids), output=plan.seeds_dir,
                command=_aggregate_command(plan, ds_ids),
            )
        )  # fmt: skip
    plan.steps.append(
        Step(
            REPORT, REPORT, "report.md: Table 1, figures, downstream, beside the paper", "-",
            60.0 * scale.report_estimate_minutes, after=tuple(s.id for s in plan.steps),
            func=None if report is None else (lambda done: report(plan, done)),
        )
    )  # fmt: skip
    return plan


def _eval_seconds_per_run(plan: Plan, protocol: str, settings: Mapping[str, Any], stated: float) -> float:
    """One run's evaluation time on the plan's clips: the scale's stated time, or where longer the evaluation's own
    estimate (``rgsd_eval.evaluate.eval_plan``: its world steps at the measured rate, from the settings and the clips'
    frame counts; no rollouts, no environment). Sets ``plan.clips`` and ``plan.frames``."""
    from rgsd_envs.motion.library import MotionLib
    from rgsd_eval.config import EvalConfig
    from rgsd_eval.evaluate import eval_plan

    lib = MotionLib(plan.motions)
    plan.clips, plan.frames = lib.num_clips, int(lib.num_frames.sum())
    cfg = EvalConfig.for_protocol(protocol, **settings)
    evaluated = lib.subset(cfg.evaluated_clip_ids(lib.categories))  # the clips a max_clips setting keeps
    return max(stated, eval_plan(evaluated, cfg, best_of=0, render=cfg.video).seconds())


def _methods_with_preset(methods: list[str], preset: str, named: str | None) -> tuple[list[str], dict[str, str]]:
    """The methods that have the scale's training preset (``preset`` with ``{method}`` filled in) and, for each
    other, why it is left out. Methods a command or scale names (``named``: where) must all have it: a
    ``ValueError`` names the first that has not. Every method by default: one without it is left out, as a style
    the motions cannot ground is, so the other methods still run and the plan and report say which was not."""
    from rgsd_agents.config import config_missing

    missing = {m: why for m in methods if (why := config_missing(preset.format(method=m))) is not None}
    where = f"training config at this scale (train.preset {preset!r})"
    if missing and named is not None:
        method, why = next(iter(missing.items()))
        raise ValueError(f"{named}: method {method!r} has no {where}: {why}; or leave {method} out")
    ready = [m for m in methods if m not in missing]
    if not ready:
        raise ValueError(f"no method has a {where}: {next(iter(missing.values()))}")
    return ready, {m: f"no {where}: {why}" for m, why in missing.items()}


def runnable_styles(styles: Sequence[str], motions: str) -> tuple[list[str], dict[str, str]]:
    """The downstream styles the motions can ground (a style other than freestyle needs clips of its category) and,
    for each other style, why it is left out."""
    from rgsd_envs.envs.goal_reaching_v0 import style_without_clips
    from rgsd_envs.motion.library import motion_categories

    categories = motion_categories(motions)
    kept = [s for s in styles if s == "freestyle" or s in categories]
    dropped = {s: style_without_clips(s, categories) for s in styles if s not in kept}
    return kept, dropped


def _pretrain_command(out: Path, device: str) -> Callable[[set[str]], list[str]]:
    """``rgsd pretrain --config <out>.yaml`` (the file: ``_write_yaml`` of the seed's resolved ``pretrain``)."""

    def command(done: set[str]) -> list[str]:
        path = out.parent / f"{out.name}.yaml"
        return ["pretrain", "--config", str(path), "--out", str(out), "--device", device]

    return command


def _write_yaml(data: dict[str, Any], path: Path) -> Callable[[], None]:
    """Writes ``data`` as YAML to ``path`` when called."""

    def write() -> None:
        import yaml

        from rgsd_envs.utils.files import atomic_path

        with atomic_path(path) as tmp:  # a step that runs beside this one may be reading it
            tmp.write_text(yaml.safe_dump(data, sort_keys=False))

    return write


def _eval_command(plan: Plan, method: str, device: str) -> Callable[[set[str]], list[str]]:
    """``rgsd eval`` on ``method``'s runs that trained, with the scale's settings file (``EVAL_SETTINGS``)."""

    def command(done: set[str]) -> list[str]:
        runs = [
            str(plan.run_dir(s.method, s.seed))
            for s in plan.steps
            if s.kind == TRAIN and s.method == method and s.id in done
        ]
        if not runs:
            raise NothingToDo(f"no training of {method} finished")
        argv = ["eval", *(a for r in runs for a in ("--run", r)), "--motions", plan.motions]
        argv += ["--out", str(plan.eval_dir(method)), "--config", str(plan.out / EVAL_SETTINGS)]
        return [*argv, "--device", device]

    return command


def _aggregate_command(plan: Plan, ds_ids: list[str]) -> Callable[[set[str]], list[str]]:
    """``rgsd downstream --seeds`` on the downstream runs that finished."""

    def command(done: set[str]) -> list[str]:
        runs = [str(plan.step(s).output) for s in ds_ids if s in done]
        if not runs:
            raise NothingToDo("no downstream training finished")
        return ["downstream", "--seeds", *runs, "--out", str(plan.seeds_dir)]

    return command


def makespan(
    order: Sequence[str],
    deps: dict[str, set[str]],
    remaining: dict[str, float],
    parallel: int,
    running: Sequence[str] = (),
) -> float:
    """Seconds until every step of ``order`` has run: ``running`` steps first, then the others in order as their
    ``deps`` (within ``order``) finish, ``parallel`` at a time; ``remaining`` is each step's time left."""
    active = [(remaining[s], s) for s in running]
    pending = [s for s in order if s not in set(running)]
    inside = set(order)
    finished: set[str] = set()
    t = 0.0
    while pending or active:
        while len(active) < parallel:
            ready = next((s for s in pending if all(d in finished or d not in inside for d in deps.get(s, ()))), None)
            if ready is None:
                break
            pending.remove(ready)
            active.append((t + remaining[ready], ready))
        if not active:
            break  # the rest waits on steps outside the plan
        active.sort()
        t, done = active.pop(0)
        finished.add(done)
    return t


def plan_seconds(plan: Plan, parallel: int, skip: set[str] = frozenset()) -> float:
    """Expected wall time of the plan's steps not in ``skip`` (the scale's estimates, ``parallel`` at a time)."""
    order = [s.id for s in plan.steps if s.id not in skip]
    deps = {s.id: set(s.needs) | set(s.after) for s in plan.steps}
    return makespan(order, deps, {s.id: s.estimate_s for s in plan.steps}, parallel)
