"""Training curves of run folders: the imitation probe that ``rgsd train`` logs to TensorBoard, read back and plotted.

``read_curves(run)`` reads a run's ``tb/`` scalars. Their step is ``global_step`` (samples); a resumed
run's writer purges what the earlier one logged after the checkpoint it resumed from, so a step keeps
the value of the last writer that reached it. The learning curve is the imitation probe (the
deterministic policy from fixed starts of each clip to its end, no early termination):
``probe/cartesian_error_cm`` overall and ``probe_clips/<clip>_cm`` per clip. Training minutes are the
summed ``perf/iteration_seconds`` (rollouts and updates; probes excluded).

``plot_curves`` draws several runs on common axes: one panel per clip category (the mean over its
clips), samples on x in the top row and training minutes in the bottom row.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.files import atomic_path

PROBE_TAG = "probe/cartesian_error_cm"
CLIP_PREFIX, CLIP_SUFFIX = "probe_clips/", "_cm"
SECONDS_TAG = "perf/iteration_seconds"
ITERATION_TAG = "charts/iteration"
EVENTS_GLOB = "events.out.tfevents.*"

Scalars = dict[str, list[tuple[int, float]]]
"""tag -> [(step, value)], ascending steps, one value per step."""


def _event_files(tb_dir: Path) -> list[Path]:
    """Event files in the order they were written (the creation time is the name's fourth field)."""

    def key(path: Path) -> tuple[int, str]:
        parts = path.name.split(".")
        return (int(parts[3]) if len(parts) > 3 and parts[3].isdigit() else 0, path.name)

    return sorted(tb_dir.glob(EVENTS_GLOB), key=key)


def read_scalars(tb_dir: str | os.PathLike) -> Scalars:
    """Every scalar of a TensorBoard folder; a later file's purge step (a resumed run) drops earlier values after it."""
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader
    from tensorboard.compat.proto.event_pb2 import SessionLog
    from tensorboard.util.tensor_util import make_ndarray

    series: dict[str, dict[int, float]] = {}
    for path in _event_files(Path(tb_dir)):
        for event in LegacyEventFileLoader(str(path)).Load():
            kind = event.WhichOneof("what")
            if kind == "session_log" and event.session_log.status == SessionLog.START:
                # rgsd train's purge step is its checkpoint's step, whose values were logged before that
                # checkpoint was saved: only later steps are orphans
                for values in series.values():
                    for step in [s for s in values if s > event.step]:
                        del values[step]
            elif kind == "summary":
                for value in event.summary.value:
                    which = value.WhichOneof("value")
                    if which == "simple_value":
                        number = float(value.simple_value)
                    elif which == "tensor" and value.tensor.dtype:
                        number = float(make_ndarray(value.tensor).reshape(-1)[0])
                    else:  # images, histograms: not curves
                        continue
                    series.setdefault(value.tag, {})[int(event.step)] = number
    return {tag: sorted(values.items()) for tag, values in series.items() if values}


def training_minutes(scalars: Scalars, steps: list[int]) -> list[float]:
    """Training minutes at each of ``steps``: iteration seconds summed up to it, NaN without timings.

    A logged iteration stands for every iteration since the previous log (``log_every``): the
    ``charts/iteration`` counter says how many, else the samples since then over the first log's."""
    seconds = scalars.get(SECONDS_TAG, [])
    if not seconds:
        return [math.nan] * len(steps)
    iterations = dict(scalars.get(ITERATION_TAG, []))
    cumulative, total, prev_step, prev_it = [], 0.0, 0, 0.0
    for step, sec in seconds:
        if step in iterations:
            count = iterations[step] - prev_it
            prev_it = iterations[step]
        else:
            count = (step - prev_step) / seconds[0][0]
        total += sec * max(count, 0.0)
        prev_step = step
        cumulative.append((step, total))
    out = []
    for s in steps:
        done = [t for st, t in cumulative if st <= s]
        out.append((done[-1] if done else 0.0) / 60.0)
    return out


def clip_categories(run: str | os.PathLike, names: list[str]) -> dict[str, str]:
    """Category of each clip: from the run's encoder file, else its training motions, else the clip's own name."""
    import logging

    from rgsd_envs.rewards.encoders import read_encoder_file

    rd = RunDir(run)
    try:
        payload = read_encoder_file(rd.encoder_path)
        known = dict(zip(payload.get("clip_names") or [], payload.get("clip_categories") or []))
        if set(names) <= set(known):
            return {n: known[n] or n for n in names}
    except ValueError:  # no encoder file (a method without one): the motions tell
        pass
    try:
        from rgsd_envs.motion.library import MotionLib

        lib = MotionLib(rd.config()["env"]["motions"])
        known = dict(zip(lib.names, lib.categories))
    except Exception as err:  # a moved motion folder must not stop a plot: one panel per clip
        logging.getLogger(__name__).warning("%s: clip categories unavailable (%s); one panel per clip", run, err)
        known = {}
    return {n: known.get(n) or n for n in names}


def _nanmean(values: list[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return sum(finite) / len(finite) if finite else math.nan


@dataclass
class RunCurves:
    """The probe curves of one run: errors in cm at each probed sample count."""

    run: str
    samples: list[int]
    minutes: list[float]
    """Training minutes at each probe (NaN where the run logged no timings)."""
    overall_cm: list[float]
    clips_cm: dict[str, list[float]]
    categories: dict[str, str]
    """clip -> category."""

    @property
    def categories_cm(self) -> dict[str, list[float]]:
        """Mean error over each category's clips at each probe."""
        out = {}
        for cat in sorted(set(self.categories.values())):
            rows = [v for name, v in self.clips_cm.items() if self.categories[name] == cat]
            out[cat] = [_nanmean([r[i] for r in rows]) for i in range(len(self.samples))]
        return out

    @property
    def final_cm(self) -> dict[str, float]:
        """Each clip's error at the last probe."""
        return {name: v[-1] for name, v in self.clips_cm.items()} if self.samples else {}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (NaN as null)."""

        def clean(x: Any) -> Any:
            if isinstance(x, float) and math.isnan(x):
                return None
            if isinstance(x, dict):
                return {k: clean(v) for k, v in x.items()}
            if isinstance(x, list):
                return [clean(v) for v in x]
            return x

        return clean(
            {
                "run": self.run,
                "samples": self.samples,
                "minutes": self.minutes,
                "overall_cm": self.overall_cm,
                "clips_cm": self.clips_cm,
                "clip_categories": self.categories,
                "categories_cm": self.categories_cm,
                "final_cm": self.final_cm,
            }
        )


def read_curves(run: str | os.PathLike) -> RunCurves:
    """The probe curves of a run folder; FileNotFoundError when it has no TensorBoard folder yet."""
    rd = RunDir(run)
    if not rd.tensorboard_dir.is_dir():
        raise FileNotFoundError(f"{rd.path}: no {RunDir.TENSORBOARD}/ folder (not an rgsd train run, or not started)")
    scalars = read_scalars(rd.tensorboard_dir)
    overall = scalars.get(PROBE_TAG, [])
    steps = [s for s, _ in overall]
    clips = {
        tag[len(CLIP_PREFIX) : -len(CLIP_SUFFIX)]: dict(values)
        for tag, values in scalars.items()
        if tag.startswith(CLIP_PREFIX) and tag.endswith(CLIP_SUFFIX)
    }
    clips_cm = {name: [values.get(s, math.nan) for s in steps] for name, values in sorted(clips.items())}
    return RunCurves(
        run=str(rd.path),
        samples=steps,
        minutes=training_minutes(scalars, steps),
        overall_cm=[v for _, v in overall],
        clips_cm=clips_cm,
        categories=clip_categories(rd.path, list(clips_cm)),
    )


def plot_curves(
    curves: Mapping[str, RunCurves],
    path: str | os.PathLike,
    xmax: tuple[float | None, float | None] = (None, None),
    legend_title: str = "run",
) -> Path:
    """One panel per clip category, one line per run: error against samples (top) and training minutes (bottom);
    ``xmax`` gives the axes' right ends (millions of samples, minutes; None: all the data)."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    cats = sorted({c for rc in curves.values() for c in rc.categories.values()}) or ["(no probe data)"]
    fig = Figure(figsize=(4.2 * len(cats), 7.5))
    axes = fig.subplots(2, len(cats), squeeze=False)
    colours = colormaps["tab10" if len(curves) <= 10 else "tab20"]
    for k, (name, rc) in enumerate(curves.items()):
        per_cat = rc.categories_cm
        for j, cat in enumerate(cats):
            if not per_cat.get(cat):
                continue
            for row, xs in ((0, [s / 1e6 for s in rc.samples]), (1, rc.minutes)):
                axes[row, j].plot(xs, per_cat[cat], color=colours(k % colours.N), label=name, marker=".", ms=3)
    for j, cat in enumerate(cats):
        axes[0, j].set_title(cat)
        axes[0, j].set_xlabel("samples (millions)")
        axes[1, j].set_xlabel("training minutes (rollouts + updates)")
        for row in (0, 1):
            ax = axes[row, j]
            ax.set_ylabel("Cartesian error (cm)")
            ax.set_ylim(bottom=0)
            if xmax[row] is not None:
                ax.set_xlim(0, xmax[row])
            ax.grid(alpha=0.3)
    if curves:
        axes[0, -1].legend(title=legend_title, fontsize=8)
    fig.suptitle(
        "Imitation probe: deterministic policy from fixed starts of each clip to its end, no early termination"
    )
    fig.tight_layout()
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    return path
