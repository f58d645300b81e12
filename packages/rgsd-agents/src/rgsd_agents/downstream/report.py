"""The downstream run's report (learning curves, top views of goal-reaching episodes) and the curves of
several seeds together (``aggregate_seeds``: mean and spread against training steps, as the paper plots them)."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from rgsd_envs.envs.goal_reaching_v0 import GoalReachingConfig
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.config import read_yaml
from rgsd_envs.utils.files import InputFileError, atomic_path, output_folder
from rgsd_eval.plots import plot_goal_trajectories, save_figure

EVALUATIONS = "evaluations.jsonl"
"""Per downstream run folder: one JSON line per evaluation (written by ``DownstreamRunner.evaluate``)."""
SEED_METRICS = (("eval/success_rate", "success rate"), ("eval/style_fid", "style FID"))
"""The paper's downstream curves (its Figure 5): success rate and, for sidestep and backward, style FID."""
NEUTRAL_START = "zero"
"""The protocol's ``init_skill`` (``DownstreamConfig``'s default): runs from it are named by their method alone."""
EVAL_EPISODES = 16
"""``DownstreamConfig.eval_episodes``'s default: a run's config.yaml that leaves it out evaluated this many."""


def plot_curves(
    history: list[dict[str, float]], initial: dict[str, float], out: Path, iteration: int | None = None
) -> Path:
    """Success rate (training episodes and evaluations), reward and style FID against iterations; ``history``: the
    session's iterations, the last of them ``iteration`` (None: ``len(history)``, a session from the start)."""
    keys = [("episodes/success_rate", "success (training episodes)"), ("eval/success_rate", "success (evaluation)"),
            ("rollout/reward", "reward / step"), ("eval/style_fid", "style FID (evaluation)")]  # fmt: skip
    keys = [(k, label) for k, label in keys if any(k in h for h in history) or k in initial]
    fig = Figure(figsize=(4 * len(keys), 3.2), layout="constrained")
    for i, (k, label) in enumerate(keys):
        ax = fig.add_subplot(1, len(keys), i + 1)
        first = (len(history) if iteration is None else iteration) - len(history) + 1
        pts = [(0, initial[k])] if k in initial else []
        pts += [(first + i, h[k]) for i, h in enumerate(history) if k in h]
        if pts:
            x, y = zip(*pts)
            ax.plot(x, y, marker="." if len(pts) < 60 else None)
        ax.set_title(label)
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)
    return save_figure(fig, out)


def write_downstream_report(
    run_dir: str | os.PathLike,
    cfg: Any,
    history: list[dict[str, float]],
    initial: dict[str, float],
    final: dict[str, float],
    trajectories: list[dict[str, Any]],
    iteration: int | None = None,
) -> Path:
    """Write ``<run>/report.md``, ``trajectories.png`` and ``curves.png``; returns the report path. ``final`` and
    ``trajectories``: the evaluation of the policy after ``iteration`` iterations in all (None: ``len(history)``,
    a session from the start); ``history``: this session's iterations."""
    iteration = len(history) if iteration is None else iteration
    run = Path(run_dir)
    style = cfg.task.style
    plot_goal_trajectories(
        trajectories, cfg.task.arena_size, f"{style}: {len(trajectories)} evaluation episodes after {iteration} "
        "iterations", run / "trajectories.png"
    )  # fmt: skip
    plot_curves(history, initial, run / "curves.png", iteration)
    rows = [("success rate", "eval/success_rate", "{:.2f}"), ("final distance to goal (m)", "eval/final_distance", "{:.2f}"),
            ("start distance to goal (m; staying at the start ends here)", "eval/start_distance", "{:.2f}"),
            ("fall rate", "eval/fall_rate", "{:.2f}"), ("style FID", "eval/style_fid", "{:.2f}"),
            ("cosine(z, nearest style clip)", "eval/style_cosine", "{:.3f}")]  # fmt: skip
    table = [f"| | untrained (iteration 0) | trained (iteration {iteration}) |", "|---|---|---|"]
    for label, key, fmt in rows:
        if key in initial or key in final:
            a = fmt.format(initial[key]) if key in initial else "-"
            b = fmt.format(final[key]) if key in final else "-"
            table.append(f"| {label} | {a} | {b} |")
    t = cfg.task
    style_fid = (
        f"Style FID: motion features of the evaluation episodes against the `{style}` reference clips (lower is "
        "closer), every frame of an episode counted, those after the goal is reached included (episodes do not stop "
        "at the goal).\n"
        if "eval/style_fid" in initial or "eval/style_fid" in final
        else ""
    )
    text = f"""# Goal reaching with style: {style}

Low-level policy: `{cfg.low_level}` (frozen). High-level policy: this run's `policy.pt`,
trained with PPO for {trained_for(iteration, len(history), f"{cfg.num_envs} worlds x {cfg.horizon} high-level steps")}.

Task: {t.arena_size:g} x {t.arena_size:g} m arena, start at its centre with a random heading, goal uniform in the arena
(at least {t.min_goal_distance:g} m away); {t.episode_seconds:g} s episodes; the skill is held for {t.low_level_steps}
control steps (30 Hz). **Success**: the pelvis is within {t.success_radius:g} m of the goal at a decision (tested every
{t.low_level_steps} control steps: a path that only grazes the disc between two decisions does not count).
{style_fid}
Evaluation: {cfg.eval_episodes} deterministic episodes (mean skill of the policy) of the untrained policy and of
`policy.pt`, the policy after iteration {iteration}, the same starts and goals for both. The start distance is the
final distance of a humanoid that stays where it starts: a policy moves towards the goals only where its final
distance is below it.

{chr(10).join(table)}

![learning curves](curves.png)

![goal-reaching trajectories (green: reached)](trajectories.png)
"""
    out = run / "report.md"
    with atomic_path(out) as tmp:
        Path(tmp).write_text(text)
    return out


def trained_for(iteration: int, session: int, each: str) -> str:
    """How long the policy trained: the run's iterations of ``each``, and this session's part after a resume."""
    total = f"{iteration} iteration{'s' if iteration != 1 else ''} of {each}"
    return (
        total if session == iteration else f"{total} ({session} in this session, resumed after {iteration - session})"
    )


def read_evaluations(run_dir: str | os.PathLike) -> dict[int, dict[str, float]]:
    """A downstream run's evaluations by training step (high-level samples): ``evaluations.jsonl`` (the last line
    of an iteration wins, as a resumed run repeats iterations past its checkpoint), else the ``eval/*`` scalars
    of its TensorBoard files (runs from before the file)."""
    run = Path(run_dir)
    path = run / EVALUATIONS
    out: dict[int, dict[str, float]] = {}
    if path.is_file():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                out[int(row["step"])] = {k: float(v) for k, v in row.items() if k.startswith("eval/")}
            except (ValueError, KeyError, TypeError) as err:
                raise InputFileError(path, f"line {n} is not an evaluation row: {err}") from None
        return dict(sorted(out.items()))
    tb = RunDir(run).tensorboard_dir
    if tb.is_dir():
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        acc = EventAccumulator(str(tb), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags().get("scalars", []):
            if tag.startswith("eval/"):
                for event in acc.Scalars(tag):
                    out.setdefault(int(event.step), {})[tag] = float(event.value)
    if not out:
        raise InputFileError(
            run, f"no evaluations: neither {EVALUATIONS} nor eval/* scalars in tb/ (a downstream run?)"
        )
    return dict(sorted(out.items()))


@dataclass
class SeedCurves:
    """Evaluation curves of several seeds of one style, method and start (``init_skill``), on the training steps they
    share."""

    style: str
    method: str
    start: str
    """The high level's ``init_skill`` (``zero``, the protocol's neutral start; ``mean``; ``style``)."""
    runs: list[str]
    seeds: list[int]
    steps: dict[str, np.ndarray]
    """metric -> (S,) training steps (high-level samples) where every seed was evaluated."""
    values: dict[str, np.ndarray]
    """metric -> (seeds, S) the seeds' values."""

    @property
    def label(self) -> str:
        """The method, with its start when that is not the protocol's neutral one."""
        return start_label(self.method, self.start)

    def summary(self, metric: str) -> dict[str, np.ndarray]:
        """Mean, standard deviation over seeds (ddof 1; 0 for one seed), min and max per step."""
        v = self.values[metric]
        std = v.std(axis=0, ddof=1) if v.shape[0] > 1 else np.zeros(v.shape[1])
        return {"mean": v.mean(axis=0), "std": std, "min": v.min(axis=0), "max": v.max(axis=0)}


def start_label(method: str, start: str) -> str:
    """A downstream curve's name: the method, with its start (``init_skill``) when that is not the neutral one."""
    return method if start == NEUTRAL_START else f"{method}, {start} start"


def _run_config(run_dir: Path) -> dict[str, Any]:
    """A downstream run folder's config.yaml, checked to be one."""
    path = run_dir / "config.yaml"
    if not path.is_file():
        raise InputFileError(path, "missing: not a downstream run folder (rgsd downstream writes config.yaml)")
    RunDir(run_dir).check_kind(RunDir.DOWNSTREAM_RUN, "rgsd downstream --seeds")  # a skill run has no seed curves
    return read_yaml(path) or {}


def _run_identity(run_dir: Path) -> tuple[str, str, str, int]:
    """(style, method, start, seed) of a downstream run folder; the method is its low-level run's, the start its
    ``init_skill``."""
    cfg = _run_config(run_dir)
    style = str((cfg.get("task") or {}).get("style", "freestyle"))
    start = str(cfg.get("init_skill", NEUTRAL_START))
    return style, low_level_method(cfg.get("low_level")), start, int(cfg.get("seed", 0))


NOT_TASK_SETTINGS = ("device", "num_threads", "clip_latents")
"""``task`` fields seeds of one curve may differ in: where and how fast the worlds run, and the clip-latents file of
each seed's own low-level run (a best-of-N method's, one per low-level seed)."""


def task_settings(run_dir: Path) -> dict[str, Any]:
    """What a downstream run's evaluations measure, beside its style, method and start: its ``task`` fields (but
    ``NOT_TASK_SETTINGS``) and ``eval_episodes``, defaults filled in."""
    cfg = _run_config(run_dir)
    task = {**dataclasses.asdict(GoalReachingConfig()), **(cfg.get("task") or {})}
    out = {f"task.{k}": v for k, v in task.items() if k not in NOT_TASK_SETTINGS}
    out["eval_episodes"] = cfg.get("eval_episodes", EVAL_EPISODES)
    return out


def low_level_method(path: str | None) -> str:
    """The skill method of a low-level run folder (``method.json``; older runs: diayn with a random encoder, else
    rgsd); the folder's name when it is gone."""
    if not path:
        return "unknown"
    low = RunDir(path)
    if not low.config_path.is_file():
        return low.path.name  # the low-level folder has moved: its name stands in
    info = low.method()
    if info is not None:
        return str(info["name"])
    return "diayn" if (low.config() or {}).get("encoder_init") == "random" else "rgsd"


def seed_curves(run_dirs: Sequence[str | os.PathLike]) -> SeedCurves:
    """The evaluation curves of downstream runs that differ only in their seed (one style, method and start, and the
    same ``task_settings``; a run that differs is refused naming the field)."""
    runs = [Path(r) for r in run_dirs]
    if not runs:
        raise ValueError("give at least one downstream run folder")
    ids = [_run_identity(r) for r in runs]
    settings = [task_settings(r) for r in runs]
    for r, (style, method, start, _), setting in zip(runs, ids, settings):
        if (style, method, start) != ids[0][:3]:
            raise InputFileError(
                r, f"style {style!r}, method {method!r}, init_skill {start!r}; {runs[0]} has {ids[0][0]!r}, "
                f"{ids[0][1]!r}, {ids[0][2]!r}: group seeds of one style, method and start (aggregate_seeds groups "
                "them for you)"
            )  # fmt: skip
        for key, value in setting.items():
            if value != settings[0][key]:
                raise InputFileError(
                    r / "config.yaml", f"{value!r}; {runs[0]} has {settings[0][key]!r}: seeds of one curve must "
                    "measure the same task (train them with the same settings, or leave this run out)", key
                )  # fmt: skip
    seeds = [i[3] for i in ids]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"runs repeat a seed ({seeds}): {', '.join(map(str, runs))}")
    evals = [read_evaluations(r) for r in runs]
    steps: dict[str, np.ndarray] = {}
    values: dict[str, np.ndarray] = {}
    for metric, _ in SEED_METRICS:
        have = [{s for s, row in e.items() if metric in row} for e in evals]
        if not all(have):
            continue
        common = sorted(set.intersection(*have))
        if not common:
            raise ValueError(
                f"{metric}: the seeds share no evaluation step; give runs with the same num_envs, horizon and eval_every"
            )
        steps[metric] = np.array(common, dtype=np.int64)
        values[metric] = np.array([[e[s][metric] for s in common] for e in evals])
    return SeedCurves(ids[0][0], ids[0][1], ids[0][2], [str(r) for r in runs], seeds, steps, values)


def plot_seed_curves(groups: Sequence[SeedCurves], out: Path) -> Path:
    """One column per style (rows: success rate, style FID): each method's (and start's) mean over seeds, shaded +-
    one standard deviation over seeds."""
    styles = list(dict.fromkeys(g.style for g in groups))
    fig = Figure(figsize=(4.2 * len(styles), 3.2 * len(SEED_METRICS)), layout="constrained")
    axes = fig.subplots(len(SEED_METRICS), len(styles), squeeze=False)
    labels = list(dict.fromkeys(g.label for g in groups))
    colours = {m: f"C{i}" for i, m in enumerate(labels)}
    for col, style in enumerate(styles):
        for row, (metric, label) in enumerate(SEED_METRICS):
            ax = axes[row][col]
            for g in (g for g in groups if g.style == style and metric in g.values):
                st, x = g.summary(metric), g.steps[metric]
                n = len(g.seeds)
                ax.plot(x, st["mean"], color=colours[g.label], label=f"{g.label} ({n} seed{'s' if n > 1 else ''})")
                lo, hi = st["mean"] - st["std"], st["mean"] + st["std"]
                if metric == "eval/success_rate":  # a rate: the band stays in [0, 1]
                    lo, hi = np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)
                ax.fill_between(x, lo, hi, color=colours[g.label], alpha=0.2)
            if not ax.lines:
                ax.text(0.5, 0.5, "no style term" if style == "freestyle" else "no data", ha="center",
                        va="center", transform=ax.transAxes, color="0.5")  # fmt: skip
            ax.set_title(f"{style}: {label}", fontsize=10)
            ax.set_xlabel("training steps (high-level samples)")
            ax.grid(alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=8)
    return save_figure(fig, out)


def aggregate_seeds(run_dirs: Sequence[str | os.PathLike], out_dir: str | os.PathLike) -> dict[str, Path]:
    """Group downstream runs by style, method and start (``init_skill``) (a group's runs must share their task
    settings, ``task_settings``), and write the mean and spread over seeds
    of success rate and style FID against training steps: ``seeds.json``, ``seeds.csv`` (one row per group, metric and step) and
    ``seeds.png`` (one panel per style and metric); returns their paths."""
    runs = [Path(r) for r in run_dirs]
    by_group: dict[tuple[str, str, str], list[Path]] = {}
    for r in runs:
        style, method, start, _ = _run_identity(r)
        by_group.setdefault((style, method, start), []).append(r)
    groups = [seed_curves(rs) for rs in by_group.values()]
    out = Path(out_dir)
    output_folder(out)
    paths = {"json": out / "seeds.json", "csv": out / "seeds.csv", "figure": out / "seeds.png"}
    doc = []
    rows = []
    for g in groups:
        entry: dict[str, Any] = {
            "style": g.style, "method": g.method, "init_skill": g.start, "seeds": g.seeds, "runs": g.runs, "curves": {},
        }  # fmt: skip
        for metric in g.values:
            st = g.summary(metric)
            entry["curves"][metric] = {"step": g.steps[metric].tolist(), **{k: v.tolist() for k, v in st.items()}}
            for i, step in enumerate(g.steps[metric].tolist()):
                rows.append([g.style, g.method, g.start, metric, step, len(g.seeds), *(float(st[k][i]) for k in st)])
        doc.append(entry)
    with atomic_path(paths["json"]) as tmp:
        Path(tmp).write_text(json.dumps({"groups": doc}, indent=1) + "\n")
    with atomic_path(paths["csv"]) as tmp, open(tmp, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["style", "method", "init_skill", "metric", "step", "seeds", "mean", "std", "min", "max"])
        writer.writerows(rows)
    plot_seed_curves(groups, paths["figure"])
    return paths
