"""The downstream task's settings as a reproduce report states them: the goal-reaching rows of its "How this run
differs from the paper" box (keys of ``rgsd_eval.paper.PAPER_DOWNSTREAM_SETUP``), read from the config.yaml of every
downstream run the report covers, so that a report of a small arena and short budget says so beside its success
rates."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rgsd_envs.humanoid.mjcf import CONTROL_HZ
from rgsd_envs.utils.config import read_yaml
from rgsd_eval.paper import PAPER_DOWNSTREAM_SETUP

BUDGET_KEYS = ("max_minutes", "iterations", "num_envs", "horizon")
"""The ``DownstreamConfig`` fields that size a downstream training."""
NO_RUN = "no finished downstream run's config.yaml found"
"""Each row where the report reads no downstream run (none finished, or their folders are on another machine)."""


def run_settings(run_dir: Path) -> dict[str, Any]:
    """A downstream run's task settings, ``eval_episodes`` and training budget (``BUDGET_KEYS``) from its
    config.yaml, defaults filled in where an older run left a field out."""
    from rgsd_agents.downstream.report import task_settings
    from rgsd_agents.downstream.runner import DownstreamConfig

    cfg = read_yaml(run_dir / "config.yaml") or {}
    default = DownstreamConfig()
    return {**task_settings(run_dir), **{k: cfg.get(k, getattr(default, k)) for k in BUDGET_KEYS}}


def settings_text(s: dict[str, Any]) -> dict[str, str]:
    """One run's settings in words, per item of ``PAPER_DOWNSTREAM_SETUP``."""
    size, every = s["task.arena_size"], s["task.low_level_steps"]
    minutes = s["max_minutes"]
    budget = f"{s['iterations']} iterations" if minutes is None else f"{minutes:g} min (`max_minutes`; at most {s['iterations']} iterations)"  # fmt: skip
    return {
        "goal-reaching arena": f"{size:g} x {size:g} m (`task.arena_size`), start at its centre, the goal at least "
        f"{s['task.min_goal_distance']:g} m away",
        "goal-reaching episode": f"{s['task.episode_seconds']:g} s (`task.episode_seconds`); a decision every {every} "
        f"control steps ({CONTROL_HZ / every:g} Hz)",
        "goal-reaching success": f"within {s['task.success_radius']:g} m of the goal at a decision "
        f"(`task.success_radius`, tested every {every} control steps)",
        "goal-reaching training": f"{budget} of {s['num_envs']} worlds x {s['horizon']} decisions per run: per "
        "style, method and seed",
        "goal-reaching evaluation": f"{s['eval_episodes']} deterministic episodes (`eval_episodes`) per evaluation",
    }


def downstream_setup(run_dirs: Sequence[Path]) -> dict[str, str]:
    """The goal-reaching rows of the box over ``run_dirs`` (those with a config.yaml): each item's words, or each
    distinct one with how many runs it holds for where the runs differ."""
    texts = [settings_text(run_settings(r)) for r in run_dirs if (r / "config.yaml").is_file()]
    if not texts:
        return dict.fromkeys(PAPER_DOWNSTREAM_SETUP, NO_RUN)
    out = {}
    for item in PAPER_DOWNSTREAM_SETUP:
        counts = Counter(t[item] for t in texts)
        out[item] = (
            next(iter(counts))
            if len(counts) == 1
            else "; ".join(f"{text} ({n} run{'s' if n > 1 else ''})" for text, n in counts.items())
        )
    return out
