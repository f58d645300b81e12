"""The downstream run's report: learning curves and top views of goal-reaching episodes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from rgsd_envs.utils.files import atomic_path


def plot_trajectories(trajectories: list[dict[str, Any]], arena: float, title: str, out: Path) -> Path:
    """Top view: each episode's pelvis path from the centre to its goal (green reached, red missed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 6))
    half = arena / 2
    ax.add_patch(plt.Rectangle((-half, -half), arena, arena, fill=False, lw=1, color="0.5"))
    for tr in trajectories:
        color = "tab:green" if tr["success"] else "tab:red"
        path = np.asarray(tr["root"])
        ax.plot(path[:, 0], path[:, 1], color=color, lw=1.2, alpha=0.8)
        ax.plot(*tr["goal"], marker="*", color=color, ms=10)
        ax.plot([path[-1, 0], tr["goal"][0]], [path[-1, 1], tr["goal"][1]], color=color, lw=0.6, ls=":")
    ax.plot(0, 0, "ko", ms=4)
    ax.set_xlim(-half - 0.5, half + 0.5)
    ax.set_ylim(-half - 0.5, half + 0.5)
    ax.set_aspect("equal")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_title(title)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out


def plot_curves(history: list[dict[str, float]], initial: dict[str, float], out: Path) -> Path:
    """Success rate (training episodes and evaluations), reward and style FID against iterations."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [("episodes/success_rate", "success (training episodes)"), ("eval/success_rate", "success (evaluation)"),
            ("rollout/reward", "reward / step"), ("eval/style_fid", "style FID (evaluation)")]  # fmt: skip
    keys = [(k, label) for k, label in keys if any(k in h for h in history) or k in initial]
    fig, axes = plt.subplots(1, len(keys), figsize=(4 * len(keys), 3.2), squeeze=False)
    for ax, (k, label) in zip(axes[0], keys):
        pts = [(0, initial[k])] if k in initial else []
        pts += [(i + 1, h[k]) for i, h in enumerate(history) if k in h]
        if pts:
            x, y = zip(*pts)
            ax.plot(x, y, marker="." if len(pts) < 60 else None)
        ax.set_title(label)
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return out


def write_downstream_report(
    run_dir: str | os.PathLike,
    cfg: Any,
    history: list[dict[str, float]],
    initial: dict[str, float],
    final: dict[str, float],
    trajectories: list[dict[str, Any]],
) -> Path:
    """Write ``<run>/report.md``, ``trajectories.png`` and ``curves.png``; returns the report path."""
    run = Path(run_dir)
    style = cfg.task.style
    plot_trajectories(
        trajectories, cfg.task.arena_size, f"{style}: {len(trajectories)} evaluation episodes", run / "trajectories.png"
    )
    plot_curves(history, initial, run / "curves.png")
    rows = [("success rate", "eval/success_rate", "{:.2f}"), ("final distance to goal (m)", "eval/final_distance", "{:.2f}"),
            ("fall rate", "eval/fall_rate", "{:.2f}"), ("style FID", "eval/style_fid", "{:.2f}"),
            ("cosine(z, nearest style clip)", "eval/style_cosine", "{:.3f}")]  # fmt: skip
    table = ["| | untrained | trained |", "|---|---|---|"]
    for label, key, fmt in rows:
        if key in initial or key in final:
            a = fmt.format(initial[key]) if key in initial else "-"
            b = fmt.format(final[key]) if key in final else "-"
            table.append(f"| {label} | {a} | {b} |")
    t = cfg.task
    text = f"""# Goal reaching with style: {style}

Low-level policy: `{cfg.low_level}` (frozen). High-level policy: this run's `policy.pt`,
trained with PPO for {len(history)} iterations in this session ({cfg.num_envs} worlds x {cfg.horizon} high-level steps).

Task: {t.arena_size:g} x {t.arena_size:g} m arena, start at its centre with a random heading, goal uniform in the arena
(at least {t.min_goal_distance:g} m away); {t.episode_seconds:g} s episodes; the skill is held for {t.low_level_steps}
control steps (30 Hz). **Success**: the pelvis comes within {t.success_radius:g} m of the goal during the episode.
Style FID: motion features of the evaluation episodes against the `{style}` reference clips (lower is closer).

Evaluation: {cfg.eval_episodes} deterministic episodes (mean skill of the policy).

{chr(10).join(table)}

![learning curves](curves.png)

![goal-reaching trajectories (green: reached)](trajectories.png)
"""
    out = run / "report.md"
    with atomic_path(out) as tmp:
        Path(tmp).write_text(text)
    return out
