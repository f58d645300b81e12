"""Scales of ``rgsd reproduce``: how big each step is, as a YAML file a user can copy and edit.

A scale names the training preset of every method (``{method}`` stands for the method's name), the budget of
each training (minutes or iterations, worlds) and ``--set`` overrides by method family, the evaluation's
changes to the paper protocol, the downstream preset and budget, seeds, device and how many steps run at once
(at most two). Each step kind states its expected minutes: the plan's expected time and the progress bar's
ETA are built from them (and corrected by the measured durations as steps finish).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from rgsd_agents.config import check_max_minutes, load_config
from rgsd_envs.utils.files import InputFileError

SCALE_FOLDER = "reproduce"
"""Scales live in ``rgsd_agents/presets/reproduce/<name>.yaml``."""
SCALE_ALIASES = {"paper": "full"}
"""Former names that ``--scale`` still accepts: the ``full`` scale was called ``paper``, but the paper states no
total budget (no iterations, worlds or downstream budget), so its budgets are ours."""
MAX_PARALLEL = 2
"""Trainings at a time at most (two share a GPU or two cores well; more would only slow each down)."""
FAMILY_ALL = "all"
LOOP_FAMILIES = ("on_policy", "off_policy")
"""Method families by training loop (``SkillMethod.LOOP``): a scale's ``sets`` apply "all", then the family, then
the method's own."""


def budget_sets(minutes: float | None, iterations: int | None, worlds: int | None) -> list[str]:
    """The ``--set`` items of a training's budget (``max_minutes``, ``iterations``, ``num_envs``) that are given."""
    budget = (("max_minutes", minutes), ("iterations", iterations), ("num_envs", worlds))
    return [f"{key}={value}" for key, value in budget if value is not None]


@dataclass
class TrainBudget:
    """Every method's training (``rgsd train``) and RGSD's encoder pretraining."""

    preset: str = "{method}"
    """Training preset of each method, ``{method}`` replaced by its name ("{method}": the 2-core presets,
    "{method}_paper": the GPU-scale ones)."""
    minutes: float | None = None
    """``max_minutes`` of every training (None: the preset's)."""
    iterations: int | None = None
    """``iterations`` of every training (None: the preset's)."""
    worlds: int | None = None
    """``num_envs`` of every training (None: the preset's)."""
    sets: dict[str, list[str]] = field(default_factory=dict)
    """``--set KEY=VALUE`` overrides by family, applied in this order: "all", the method's loop ("on_policy",
    "off_policy"), the method's name. ``pretrain.*`` keys also shape RGSD's pretraining."""
    estimate_minutes: float = 10.0
    """Stated wall time of one training (with ``minutes``: that plus its set-up). The plan states the longer of this
    and the training's ``max_minutes`` plus set-up (``rgsd_agents.reproduce.plan.budgeted_seconds``)."""
    pretrain_estimate_minutes: float = 2.0
    """Stated wall time of one encoder pretraining."""

    def overrides(self, method: str, loop: str) -> list[str]:
        """The ``--set`` items of ``method`` (whose training loop is ``loop``), budgets last."""
        items = [*self.sets.get(FAMILY_ALL, []), *self.sets.get(loop, []), *self.sets.get(method, [])]
        return items + budget_sets(self.minutes, self.iterations, self.worlds)


@dataclass
class EvalBudget:
    """The evaluation of all runs together (``rgsd eval``)."""

    protocol: str = "paper"
    """The protocol the settings start from (``rgsd_eval.protocol``)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """EvalConfig fields changed from the protocol (rollouts, best_of, trajectory_rollouts, sweep_clips, video,
    ...): the report names each change."""
    estimate_minutes_per_run: float = 1.0
    """Stated evaluation time per trained run."""


@dataclass
class DownstreamBudget:
    """Goal reaching with a style (``rgsd downstream``) on every method's and seed's policy."""

    preset: str = "default"
    """Downstream preset (``presets/downstream``): "default" is the paper's 20 x 20 m arena (docs/downstream.md),
    "demo" a 4 x 4 m one for low-level policies that barely travel."""
    styles: list[str] = field(default_factory=lambda: ["freestyle", "sidestep", "backward"])
    """Style commands, each trained on every method's and seed's policy (empty: no downstream steps)."""
    minutes: float | None = None
    """``max_minutes`` of every downstream training (None: the preset's)."""
    iterations: int | None = None
    """``iterations`` of every downstream training (None: the preset's)."""
    worlds: int | None = None
    """``num_envs`` (None: the preset's)."""
    sets: list[str] = field(default_factory=list)
    """``--set KEY=VALUE`` overrides of every downstream training."""
    style_start: list[str] = field(default_factory=list)
    """Methods that also run every style and seed from ``init_skill: style`` (the high level starts at the style
    clip's latent) beside the protocol's neutral start: the head start's measured effect. Their curves are labelled
    "<method>, style start"; a method not run is left out."""
    estimate_minutes: float = 5.0
    """Stated wall time of one downstream training (with ``minutes``: that plus its set-up). The plan states the
    longer of this and its ``max_minutes`` plus set-up (``rgsd_agents.reproduce.plan.budgeted_seconds``)."""

    def overrides(self) -> list[str]:
        """The ``--set`` items, budgets last."""
        return list(self.sets) + budget_sets(self.minutes, self.iterations, self.worlds)


@dataclass
class ReproduceScale:
    """One scale of ``rgsd reproduce`` (see the module docstring)."""

    description: str = ""
    """What the scale is for, what it can and cannot show, and its stated time (quoted in the report)."""
    seeds: int = 3
    """Seeds of every method (training, evaluation and downstream each); the paper uses 3."""
    device: str = "auto"
    """``--device`` of every step: auto, cpu, cuda or cuda:N."""
    parallel: int = 1
    """Steps run at once, 1 or 2 (two trainings at a time at most)."""
    methods: list[str] | None = None
    """Methods to run (None: every method of ``rgsd_agents.methods.METHODS``); ``--methods`` overrides."""
    train: TrainBudget = field(default_factory=TrainBudget)
    eval: EvalBudget = field(default_factory=EvalBudget)
    downstream: DownstreamBudget = field(default_factory=DownstreamBudget)
    aggregate_estimate_minutes: float = 0.2
    """Stated time of the downstream seed aggregation."""
    report_estimate_minutes: float = 0.2
    """Stated time of the final report."""

    def __post_init__(self) -> None:
        if self.seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {self.seeds}")
        if not 1 <= self.parallel <= MAX_PARALLEL:
            raise ValueError(
                f"parallel must be 1 or {MAX_PARALLEL} (two trainings at a time at most), got {self.parallel}"
            )
        for name, value in self.estimates().items():
            if not value >= 0:
                raise ValueError(f"{name} must be >= 0 minutes, got {value}")
        check_max_minutes(self.train.minutes, "train.minutes")
        check_max_minutes(self.downstream.minutes, "downstream.minutes")
        for key, items in self.train.sets.items():
            if not isinstance(items, list) or not all(isinstance(i, str) and "=" in i for i in items):
                raise ValueError(f"train.sets.{key} must be a list of KEY=VALUE strings, got {items!r}")
        if not all(isinstance(i, str) and "=" in i for i in self.downstream.sets):
            raise ValueError(f"downstream.sets must be a list of KEY=VALUE strings, got {self.downstream.sets!r}")

    def estimates(self) -> dict[str, float]:
        """Every stated estimate (minutes) by its field name."""
        return {
            "train.estimate_minutes": self.train.estimate_minutes,
            "train.pretrain_estimate_minutes": self.train.pretrain_estimate_minutes,
            "eval.estimate_minutes_per_run": self.eval.estimate_minutes_per_run,
            "downstream.estimate_minutes": self.downstream.estimate_minutes,
            "aggregate_estimate_minutes": self.aggregate_estimate_minutes,
            "report_estimate_minutes": self.report_estimate_minutes,
        }

    def check_methods(self, known: list[str], source: str) -> None:
        """A clear error for a ``train.sets`` family that is neither all, a loop family nor a known method, and for an
        unknown method in ``methods`` or ``downstream.style_start``."""
        valid = [FAMILY_ALL, *LOOP_FAMILIES, *known]
        for key in self.train.sets:
            if key not in valid:
                raise InputFileError(
                    source, f"unknown family {key!r}; use one of {', '.join(valid)}", f"train.sets.{key}"
                )
        for field_name, names in (("methods", self.methods), ("downstream.style_start", self.downstream.style_start)):
            for m in names or []:
                if m not in known:
                    raise InputFileError(source, f"unknown method {m!r}; methods: {', '.join(known)}", field_name)


def scale_names() -> list[str]:
    """Names of the built-in scales."""
    files = resources.files("rgsd_agents") / "presets" / SCALE_FOLDER
    return sorted(p.name[: -len(".yaml")] for p in files.iterdir() if p.name.endswith(".yaml"))


def scale_path(spec: str | os.PathLike) -> Path:
    """The file of a scale: a YAML path, or a built-in scale's name (or a former name, ``SCALE_ALIASES``)."""
    path = Path(spec)
    if path.is_file():
        return path
    if path.suffix or os.sep in str(spec):
        raise InputFileError(path, f"scale file not found (or give a built-in scale: {', '.join(scale_names())})")
    name = SCALE_ALIASES.get(str(spec), str(spec))
    builtin = Path(str(resources.files("rgsd_agents") / "presets" / SCALE_FOLDER / f"{name}.yaml"))
    if not builtin.is_file():
        raise InputFileError(spec, f"no such scale file or built-in scale; scales: {', '.join(scale_names())}")
    return builtin


def load_scale(spec: str | os.PathLike, overrides: dict[str, Any] | None = None) -> tuple[ReproduceScale, Path]:
    """A scale (built-in name or YAML path; its ``base:`` a built-in scale or a file beside it) and its file, with
    dotted-key overrides (``--set``, checked by ``set_overrides``) on top; errors name the file and the field."""
    path = scale_path(spec)
    scale = load_config(path, overrides, cls=ReproduceScale, presets=SCALE_FOLDER)  # a file's base: merged under it
    from rgsd_agents.methods import method_names

    scale.check_methods(method_names(), str(path))
    return scale, path
