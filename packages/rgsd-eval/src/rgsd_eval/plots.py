"""Report figures (PNG, matplotlib without pyplot): top views (of clips and of goal-reaching episodes), the kappa sweep, spreads, the embedding
sphere and the clip-by-clip cosine matrix of the clip embeddings.

Top views show pelvis trajectories on the ground (metres, world frame): the
reference in black (a dot marks its start), imitation rollouts in blue, vMF
rollouts in red. Every figure is written atomically.

The embedding figures stay the same size whatever the clip count: up to ``LEGEND_CLIPS`` clips each clip has its
own colour and legend entry, past it each category; up to ``LABELLED_CLIPS`` the cosine matrix names every clip,
past it the clips are ordered by category, the axes name the categories, and a second panel shows the mean cosine
between categories.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from rgsd_envs.utils.files import atomic_path
from rgsd_eval.evaluate import RunEvaluation
from rgsd_eval.topviews import TopViews

REF_STYLE = {"color": "black", "lw": 2.0, "zorder": 5}
IMITATION_STYLE = {"color": "tab:blue", "lw": 1.5, "alpha": 0.9, "zorder": 4}
VARIANT_STYLE = {"color": "tab:red", "lw": 0.6, "alpha": 0.35, "zorder": 3}
LEGEND_CLIPS = 20
"""Embedding scatters colour and name each clip up to this many clips, each category past it."""
LABELLED_CLIPS = 60
"""The cosine matrix names every clip up to this many clips (its rows are about 0.3 in tall then), each category
past it."""
ANNOTATED_CLIPS = 30
"""The cosine matrix prints each cosine up to this many clips."""
MAX_FIGURE_INCHES = 20.0
"""Largest side of the cosine figure (2000 px at 100 dpi): its memory stays bounded whatever the clip count."""
MAX_SCATTER_POINTS = 20000
"""State embeddings drawn at most (evenly spaced frames; the PCA uses every frame)."""

log = logging.getLogger(__name__)


def save_figure(fig: Figure, path: str | os.PathLike) -> Path:
    """Write a figure as PNG atomically; returns the path."""
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100, bbox_inches="tight")
    return path


def figure_or_warning(
    draw: Callable[[], Path | None], path: str | os.PathLike, shown_as: str | os.PathLike | None = None
) -> Path | None:
    """``draw()`` (a figure written to ``path``), or None with a warning naming ``path`` (or ``shown_as``, where the
    figure is drawn into a staging folder: the path the user will look at) where it fails: a figure illustrates
    outputs already saved, and a failure to draw it should not end the command that made them. ``save_figure``
    leaves no partial file; an earlier figure at ``path`` is removed, so that it is not taken for this one."""
    try:
        return draw()
    except Exception as err:  # any failure of matplotlib or of the disk: the figure alone is lost
        with contextlib.suppress(OSError):
            Path(path).unlink(missing_ok=True)
        named = path if shown_as is None else shown_as
        log.warning("%s not written (%s: %s); the other outputs are complete", named, type(err).__name__, err)
        return None


def _square_limits(ax: Axes, xy: np.ndarray, margin: float = 0.3) -> None:
    """Equal-aspect limits around the finite points (N, 2)."""
    p = xy[np.isfinite(xy).all(axis=-1)]
    if p.size == 0:
        return
    lo, hi = p.min(0), p.max(0)
    centre, half = (lo + hi) / 2, max(float((hi - lo).max()) / 2 + margin, 0.5)
    ax.set_xlim(centre[0] - half, centre[0] + half)
    ax.set_ylim(centre[1] - half, centre[1] + half)
    ax.set_aspect("equal")


def draw_top_view(
    ax: Axes,
    ref: np.ndarray,
    imitation: np.ndarray | None,
    variants: np.ndarray | None,
    title: str,
    max_variants: int = 150,
) -> None:
    """Pelvis paths on the ground: reference (T, 3), imitation (K, T, 3) and vMF variants (K, T, 3)."""
    pts = [ref[:, :2]]
    if variants is not None and len(variants) and max_variants > 0:
        for v in variants[:max_variants]:
            ax.plot(v[:, 0], v[:, 1], **VARIANT_STYLE)
        pts.append(variants[:max_variants, :, :2].reshape(-1, 2))
    if imitation is not None:
        for v in imitation:
            ax.plot(v[:, 0], v[:, 1], **IMITATION_STYLE)
        pts.append(imitation[:, :, :2].reshape(-1, 2))
    ax.plot(ref[:, 0], ref[:, 1], **REF_STYLE)
    ax.plot(ref[0, 0], ref[0, 1], "o", color="black", ms=4, zorder=6)
    _square_limits(ax, np.concatenate(pts))
    ax.set_title(title, fontsize=9)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)


def _grid(n: int, ncols: int, size: float = 3.0) -> tuple[Figure, list[Axes]]:
    cols = max(1, min(ncols, n))
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(size * cols, size * rows + 0.4), layout="constrained")
    axes = [fig.add_subplot(rows, cols, i + 1) for i in range(n)]
    return fig, axes


def top_view_variants(ev: RunEvaluation, kappa: float, clips: Sequence[int]) -> list[np.ndarray]:
    """The vMF(kappa) pelvis paths of ``clips``; an error naming ``--trajectory-kappa`` and the kappas that were
    rolled out on those clips if this one was not (a top view without them would show no variants)."""
    have = [k for k, roots in ev.kappa_root.items() if all(len(roots[c]) for c in clips)]
    if kappa not in have:
        raise ValueError(
            f"--trajectory-kappa {kappa:g}: {ev.label} has no vMF rollouts at this kappa on every clip drawn; "
            f"kappas rolled out there: {', '.join(f'{k:g}' for k in sorted(have)) or 'none'}"
        )
    return [ev.kappa_root[kappa][c] for c in clips]


MAX_TOP_VIEW_PANELS = 40
"""Clips drawn in one run's top-view figure: 8 rows of 5 panels; past that the figure would grow with the clip
count (1000 clips: 60,000 pixels tall), and every clip's paths are in ``top_views.npz`` beside it."""


def top_view_clips(m: int, limit: int = MAX_TOP_VIEW_PANELS) -> list[int]:
    """The clips a top-view figure draws: all ``m`` up to ``limit``, else ``limit`` of them evenly spaced in order."""
    if m <= limit:
        return list(range(m))
    return sorted({round(float(i)) for i in np.linspace(0, m - 1, limit)})


def plot_trajectories(ev: RunEvaluation, kappa: float, path: str | os.PathLike, max_variants: int = 150) -> Path:
    """Top views of every clip (at most ``MAX_TOP_VIEW_PANELS``, evenly spaced): reference, imitation and
    vMF(kappa) rollouts of one run."""
    m = len(ev.clip_names)
    clips = top_view_clips(m)
    variants = top_view_variants(ev, kappa, clips)
    fig, axes = _grid(len(clips), 5)
    for ax, c, v in zip(axes, clips, variants):
        draw_top_view(ax, ev.ref_root[c], ev.imitation_root[c], v, ev.clip_names[c], max_variants)
    shown = "" if len(clips) == m else f"; {len(clips)} of {m} clips, every clip's paths in top_views.npz"
    fig.suptitle(
        f"{ev.label}: pelvis top view (black reference, blue imitation, red z ~ vMF(z_m, {kappa:g})){shown}",
        fontsize=10,
    )
    return save_figure(fig, path)


def plot_goal_trajectories(
    episodes: Sequence[Mapping[str, Any]], arena: float, title: str, path: str | os.PathLike
) -> Path:
    """Top view of goal-reaching episodes in a square arena centred on the origin: each episode's pelvis path
    (``root`` (T, 2+)) from the centre to its ``goal`` (x, y), green where ``success`` is true, red otherwise."""
    fig = Figure(figsize=(6, 6), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    half = arena / 2
    ax.add_patch(Rectangle((-half, -half), arena, arena, fill=False, lw=1, color="0.5"))
    for ep in episodes:
        color = "tab:green" if ep["success"] else "tab:red"
        root = np.asarray(ep["root"])
        ax.plot(root[:, 0], root[:, 1], color=color, lw=1.2, alpha=0.8)
        ax.plot(*ep["goal"], marker="*", color=color, ms=10)
        ax.plot([root[-1, 0], ep["goal"][0]], [root[-1, 1], ep["goal"][1]], color=color, lw=0.6, ls=":")
    ax.plot(0, 0, "ko", ms=4)
    ax.set_xlim(-half - 0.5, half + 0.5)
    ax.set_ylim(-half - 0.5, half + 0.5)
    ax.set_aspect("equal")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_title(title)
    return save_figure(fig, path)


def plot_trajectory_comparison(
    evs: Sequence[RunEvaluation], clips: Sequence[int], kappa: float, path: str | os.PathLike, max_variants: int = 150
) -> Path:
    """Top views of several runs side by side: one row per run, one column per clip."""
    rows, cols = len(evs), len(clips)
    variants = [top_view_variants(ev, kappa, clips) for ev in evs]
    fig = Figure(figsize=(3.0 * cols, 3.0 * rows + 0.4), layout="constrained")
    for r, ev in enumerate(evs):
        for k, c in enumerate(clips):
            ax = fig.add_subplot(rows, cols, r * cols + k + 1)
            draw_top_view(
                ax,
                ev.ref_root[c],
                ev.imitation_root[c],
                variants[r][k],
                f"{ev.label}: {ev.clip_names[c]}",
                max_variants,
            )
    fig.suptitle(f"pelvis top views, z ~ vMF(z_m, {kappa:g}) in red", fontsize=10)
    return save_figure(fig, path)


def plot_discovery_grid(
    views: Mapping[str, Sequence[TopViews]],
    categories: Sequence[str],
    path: str | os.PathLike,
    max_variants: int = 150,
) -> Path:
    """The paper's discovery figure: one row per method (its seeds' vMF pelvis paths pooled, red) under a row of
    the references alone (black), one column per category (every clip of the category in one panel); the
    panels of a column share their limits so the methods compare by eye."""
    rows = ["references", *views]
    cols = list(categories)
    first = next(iter(views.values()))[0] if views else None
    fig = Figure(figsize=(3.0 * len(cols), 3.0 * len(rows) + 0.5), layout="constrained")
    columns: list[list[Axes]] = [[] for _ in cols]
    for r, name in enumerate(rows):
        for k, cat in enumerate(cols):
            ax = fig.add_subplot(len(rows), len(cols), r * len(cols) + k + 1)
            pts: list[np.ndarray] = []
            seeds = views.get(name, [])
            for tv in seeds:
                per_clip = max(1, max_variants // max(1, len(seeds)))
                for c in tv.clips_of(cat):
                    for v in tv.variants[c][:per_clip]:
                        ax.plot(v[:, 0], v[:, 1], **VARIANT_STYLE)
                        pts.append(v)
            refs = seeds[0] if seeds else first
            if refs is not None:
                for c in refs.clips_of(cat):
                    ref = refs.ref[c]
                    ax.plot(ref[:, 0], ref[:, 1], **REF_STYLE)
                    ax.plot(ref[0, 0], ref[0, 1], "o", color="black", ms=4, zorder=6)
                    pts.append(ref)
            if pts:
                _square_limits(ax, np.concatenate(pts))
            else:
                ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="0.5")
            ax.set_title(f"{name}: {cat}", fontsize=9)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
            columns[k].append(ax)
    for axes in columns:
        _share_limits(axes)
    kappa = f"{first.kappa:g}" if first is not None else "?"
    fig.suptitle(f"pelvis top views: references (black) and z ~ vMF(z_m, {kappa}) rollouts (red)", fontsize=10)
    return save_figure(fig, path)


def plot_kappa_sweep(
    ev: RunEvaluation,
    clips: Sequence[int],
    path: str | os.PathLike,
    max_variants: int = 150,
    kappas: Sequence[float] | None = None,
) -> Path:
    """Rows of clips, columns of kappas (default: every kappa rolled out on all of ``clips``): vMF rollouts
    around the reference, with their final-root spread."""
    kappas = sorted(
        kappas if kappas is not None else [k for k in ev.kappa_root if all(len(ev.kappa_root[k][c]) for c in clips)]
    )
    for kappa in kappas:
        top_view_variants(ev, kappa, clips)
    fig = Figure(figsize=(3.0 * len(kappas), 3.0 * len(clips) + 0.4), layout="constrained")
    div = ev.metrics["diversity"]
    for r, c in enumerate(clips):
        name = ev.clip_names[c]
        axes = []
        for k, kappa in enumerate(kappas):
            ax = fig.add_subplot(len(clips), len(kappas), r * len(kappas) + k + 1)
            spread = div[f"{kappa:g}"]["clips"][name]["root_spread_m"]
            label = "n/a" if spread is None else f"{spread:.2f} m"
            draw_top_view(
                ax, ev.ref_root[c], None, ev.kappa_root[kappa][c], f"κ={kappa:g}: spread {label}", max_variants
            )
            if k == 0:
                ax.set_ylabel(name, fontsize=9)
            axes.append(ax)
        _share_limits(axes)
    fig.suptitle(f"{ev.label}: z ~ vMF(z_m, κ); larger κ, tighter skills", fontsize=10)
    return save_figure(fig, path)


def _share_limits(axes: list[Axes]) -> None:
    """Give a row of equal-aspect axes the union of their limits (so spreads compare by eye)."""
    xs = [a.get_xlim() for a in axes]
    ys = [a.get_ylim() for a in axes]
    half = max(max(x[1] - x[0] for x in xs), max(y[1] - y[0] for y in ys)) / 2
    cx = (min(x[0] for x in xs) + max(x[1] for x in xs)) / 2
    cy = (min(y[0] for y in ys) + max(y[1] for y in ys)) / 2
    for a in axes:
        a.set_xlim(cx - half, cx + half)
        a.set_ylim(cy - half, cy + half)


def plot_spread(evs: Sequence[RunEvaluation], path: str | os.PathLike) -> Path:
    """Latent angle and the pelvis and pose spreads against kappa (log axis): mean over clips (thick) and per clip."""
    keys = (
        ("latent_angle_deg", "latent angle to z_m (deg)"),
        ("root_spread_m", "final pelvis spread (m)"),
        ("path_spread_m", "pelvis path spread (m)"),
        ("pose_spread", "pose-feature spread"),
    )
    fig = Figure(figsize=(15, 3.6), layout="constrained")
    for i, (key, title) in enumerate(keys):
        ax = fig.add_subplot(1, len(keys), i + 1)
        for ev in evs:
            ks, names = sweep_entries(ev.metrics["diversity"])
            x = [d["kappa"] for d in ks]
            per_clip = np.array([[_value(d["clips"][n][key]) for d in ks] for n in names]).reshape(len(names), len(ks))
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # a clip set without a number: a gap, not a warning
                y = np.nanmean(per_clip, axis=0)
            ax.plot(x, y, "o-", lw=2, label=ev.label)
            for yc in per_clip:
                ax.plot(x, yc, "-", lw=0.7, alpha=0.4, color=ax.lines[-1].get_color())
        ax.set_xscale("log")
        ax.set_xlabel("κ")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    fig.axes[0].legend(fontsize=8)
    fig.suptitle("diversity under z ~ vMF(z_m, κ) (thick: mean over the sweep's clips, thin: clips)", fontsize=10)
    return save_figure(fig, path)


def sweep_entries(diversity: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The diversity entries of the sweep's kappas (by kappa) and the clips all of them were rolled out on, so
    that means compare across kappas (a discovery or top-view kappa on more clips is left out)."""
    ks = sorted((d for d in diversity.values() if "sweep" in d.get("roles", ["sweep"])), key=lambda d: d["kappa"])
    names = [n for n in (ks[0]["clips"] if ks else {}) if all(n in d["clips"] for d in ks)]
    return ks, names


def _value(x: float | None) -> float:
    return np.nan if x is None else float(x)


def project_3d(vectors: np.ndarray, basis_from: np.ndarray) -> np.ndarray:
    """Coordinates (N, 3) of vectors on the top three principal axes (uncentred) of ``basis_from``."""
    _, _, vt = np.linalg.svd(np.asarray(basis_from, dtype=np.float64), full_matrices=False)
    basis = vt[:3]
    if basis.shape[0] < 3:
        basis = np.vstack([basis, np.zeros((3 - basis.shape[0], basis.shape[1]))])
    return np.asarray(vectors, dtype=np.float64) @ basis.T


@dataclass(frozen=True)
class ClipGroups:
    """How an embedding figure colours and names clips: each clip, or each category past ``LEGEND_CLIPS`` clips."""

    labels: list[str]
    """Legend label of each group."""
    of_clip: np.ndarray
    """(M,) the group of each clip."""
    title: str
    """Legend title."""
    per_clip: bool


def clip_groups(names: Sequence[str], categories: Sequence[str] | None = None, limit: int = LEGEND_CLIPS) -> ClipGroups:
    """One group per clip up to ``limit`` clips; past it one per category (in order of first appearance, labelled
    with its clip count), or a single group without ``categories``."""
    m = len(names)
    if m <= limit:
        return ClipGroups(list(names), np.arange(m), "clip", True)
    cats = list(categories) if categories is not None else ["all"] * m
    order = list(dict.fromkeys(cats))
    index = {c: i for i, c in enumerate(order)}
    of_clip = np.array([index[c] for c in cats], dtype=np.int64)
    counts = np.bincount(of_clip, minlength=len(order))
    return ClipGroups([f"{c} ({n} clips)" for c, n in zip(order, counts)], of_clip, "category", False)


def _shown_frames(num_frames: int, limit: int = MAX_SCATTER_POINTS) -> np.ndarray:
    """Evenly spaced frame indices, at most ``limit`` (all frames when there are no more)."""
    if num_frames <= limit:
        return np.arange(num_frames)
    return np.unique(np.linspace(0, num_frames - 1, limit).round().astype(np.int64))


def _scatter_groups(
    ax: Axes, states: np.ndarray, clip_of_frame: np.ndarray, stars: np.ndarray, groups: ClipGroups, dot: float
) -> int:
    """Dots of (evenly spaced) states and a star per clip embedding, coloured by group; returns the dots drawn."""
    shown = _shown_frames(len(states))
    group_of_dot = groups.of_clip[np.asarray(clip_of_frame)[shown]]
    star = 160 if groups.per_clip else 50
    for g, (label, colour) in enumerate(zip(groups.labels, _colours(len(groups.labels)))):
        d = states[shown[group_of_dot == g]]
        ax.scatter(d[:, 0], d[:, 1], d[:, 2], s=dot, color=colour, alpha=0.6, label=label)
        z = stars[groups.of_clip == g]
        ax.scatter(z[:, 0], z[:, 1], z[:, 2], s=star, color=colour, marker="*", edgecolors="k", linewidths=0.6)
    return len(shown)


def _group_legend(ax: Axes, groups: ClipGroups, **kwargs: Any) -> None:
    """The groups' legend, left out past ``LEGEND_CLIPS`` groups (it would be taller than the figure)."""
    if len(groups.labels) <= LEGEND_CLIPS:
        ax.legend(fontsize=7, markerscale=2, title=groups.title, **kwargs)


def _drawn_note(drawn: int, total: int) -> str:
    return f"; {drawn} of {total} states drawn" if drawn < total else ""


def plot_state_embeddings(
    embeddings: np.ndarray,
    clip_of_frame: np.ndarray,
    z: np.ndarray,
    names: Sequence[str],
    path: str | os.PathLike,
    title: str = "",
    categories: Sequence[str] | None = None,
) -> Path:
    """3-D PCA scatter of an encoder's state embeddings (F, D), one colour per clip (``clip_of_frame`` (F,)), or per
    category of ``categories`` past ``LEGEND_CLIPS`` clips, with each clip's embedding z_m (M, D) as a star: what
    pretraining draws of its encoder."""
    e = np.asarray(embeddings, dtype=np.float64)
    mean = e.mean(0)
    _, s, vh = np.linalg.svd(e - mean, full_matrices=False)
    k = min(3, vh.shape[0])
    basis = vh[:k].T
    explained = float((s[:k] ** 2).sum() / max(float((s**2).sum()), 1e-12))
    pe = (e - mean) @ basis
    pz = (np.asarray(z, dtype=np.float64) - mean) @ basis
    if k < 3:  # fewer frames than 3 dims: pad so the 3-D axes still work
        pe = np.pad(pe, ((0, 0), (0, 3 - k)))
        pz = np.pad(pz, ((0, 0), (0, 3 - k)))
    fig = Figure(figsize=(8, 7), layout="constrained")
    ax = fig.add_subplot(1, 1, 1, projection="3d")
    groups = clip_groups(names, categories)
    drawn = _scatter_groups(ax, pe, clip_of_frame, pz, groups, 6)
    ax.set_xlabel("PC 1")
    ax.set_ylabel("PC 2")
    ax.set_zlabel("PC 3")
    heading = f"State embeddings: PCA of the encoder outputs (first 3 PCs, {100 * explained:.0f}% of variance)"
    stars = f"(stars: clip embeddings z_m; colours: {groups.title}{_drawn_note(drawn, len(e))})"
    ax.set_title(heading + ("\n" + title if title else "") + "\n" + stars, fontsize=9)
    _group_legend(ax, groups, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return save_figure(fig, path)


def plot_embedding(ev: RunEvaluation, path: str | os.PathLike, categories: Sequence[str] | None = None) -> Path | None:
    """Reference state embeddings (dots, one colour per clip, or per category of ``categories`` past
    ``LEGEND_CLIPS`` clips), clip embeddings z_m (stars) and the latents evaluated (crosses) on the top three
    principal axes, with the unit sphere; None without an encoder."""
    emb = ev.embedding
    if emb is None:
        return None
    fig = Figure(figsize=(7, 6), layout="constrained")
    ax = fig.add_subplot(1, 1, 1, projection="3d")
    u, v = np.mgrid[0 : 2 * np.pi : 24j, 0 : np.pi : 12j]
    ax.plot_wireframe(np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v), color="0.85", lw=0.4)
    basis = np.vstack([emb.states, emb.clip_embeddings])
    states, zm, lat = (project_3d(x, basis) for x in (emb.states, emb.clip_embeddings, emb.latents))
    groups = clip_groups(ev.clip_names, categories)
    drawn = _scatter_groups(ax, states, emb.clip_of_frame, zm, groups, 4)
    moved = ~np.isclose(emb.latents, emb.clip_embeddings).all(axis=1)
    if moved.any():
        colours = np.array(_colours(len(groups.labels)))[groups.of_clip[moved]]
        x = lat[moved]
        ax.scatter(x[:, 0], x[:, 1], x[:, 2], s=60, marker="X", color=colours, edgecolors="black", linewidths=0.6)
    ax.set_box_aspect((1, 1, 1))
    ax.set_xlim(-1, 1)
    ax.set_ylim(-1, 1)
    ax.set_zlim(-1, 1)
    _group_legend(ax, groups, loc="upper left")
    ax.set_title(
        f"{ev.label}: encoder embeddings of reference states (dots), z_m (stars)\n"
        f"within-motion alignment {emb.alignment:.4f}; top-3 principal axes of the 16-D sphere"
        f"{_drawn_note(drawn, len(states))}",
        fontsize=9,
    )
    return save_figure(fig, path)


def clip_cosine_matrix(z: np.ndarray) -> np.ndarray:
    """(M, M) cosine similarity between the rows of ``z`` (M, D); a zero row has cosine 0 with everything."""
    z = np.asarray(z, dtype=np.float64)
    norm = np.linalg.norm(z, axis=-1, keepdims=True)
    u = np.divide(z, norm, out=np.zeros_like(z), where=norm > 1e-12)
    return np.clip(u @ u.T, -1.0, 1.0)


def draw_cosine_matrix(ax: Axes, cos: np.ndarray, names: Sequence[str], annotate: bool = True) -> object:
    """A clip-by-clip cosine heat map (-1 blue .. 1 red) with the clip names on both axes; returns the image."""
    m = len(names)
    image = ax.imshow(cos, cmap="RdBu_r", vmin=-1.0, vmax=1.0, interpolation="nearest")
    ax.set_xticks(range(m), labels=list(names), rotation=90, fontsize=8)
    ax.set_yticks(range(m), labels=list(names), fontsize=8)
    ax.set_xticks(np.arange(m + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(m + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", lw=0.5)
    ax.tick_params(which="minor", length=0)
    if annotate:
        _annotate(ax, cos, 6.5 if m > 12 else 8)
    return image


def _annotate(ax: Axes, values: np.ndarray, fontsize: float) -> None:
    """Each value of a cosine heat map printed in its cell ("n/a" where there is none)."""
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            x = float(values[i, j])
            text = "n/a" if not math.isfinite(x) else f"{round(x, 2) + 0.0:.2f}"
            colour = "white" if math.isfinite(x) and abs(x) > 0.6 else "black"
            ax.text(j, i, text, ha="center", va="center", fontsize=fontsize, color=colour)


def category_blocks(categories: Sequence[str]) -> tuple[np.ndarray, list[tuple[str, int, int]]]:
    """The clip order that puts each category's clips together (categories in order of first appearance, clips in
    their order inside), and each category's (name, first row, end row) in that order."""
    cats = list(categories)
    names = list(dict.fromkeys(cats))
    order = np.array(sorted(range(len(cats)), key=lambda i: names.index(cats[i])), dtype=np.int64)
    blocks, first = [], 0
    for name in names:
        n = cats.count(name)
        blocks.append((name, first, first + n))
        first += n
    return order, blocks


def category_mean_cosine(cos: np.ndarray, categories: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The categories (in order of first appearance) and the (K, K) mean cosine between the clips of two of them;
    the diagonal is over pairs of different clips of one category (nan for a category of one clip)."""
    cats = np.asarray(list(categories))
    names = list(dict.fromkeys(cats.tolist()))
    out = np.full((len(names), len(names)), np.nan)
    for a, ca in enumerate(names):
        rows = np.flatnonzero(cats == ca)
        for b, cb in enumerate(names):
            block = cos[np.ix_(rows, np.flatnonzero(cats == cb))]
            if a == b:
                n = len(rows)
                if n > 1:
                    out[a, b] = (block.sum() - np.trace(block)) / (n * (n - 1))
            else:
                out[a, b] = block.mean()
    return names, out


def _most_similar_pair(cos: np.ndarray, names: Sequence[str], named: bool) -> str:
    """The title's note of the two different clips with the highest cosine ("" for one clip)."""
    m = len(names)
    if m < 2:
        return ""
    off = np.where(np.eye(m, dtype=bool), -np.inf, cos)
    i, j = np.unravel_index(int(np.argmax(off)), off.shape)
    pair = f" ({names[i]}, {names[j]})" if named else ""
    return f"; most similar pair {off[i, j]:.2f}{pair}"


def plot_clip_cosine(
    z: np.ndarray,
    names: Sequence[str],
    path: str | os.PathLike,
    title: str = "",
    categories: Sequence[str] | None = None,
) -> Path:
    """The clip-by-clip cosine matrix of clip embeddings ``z`` (M, 16), at most ``MAX_FIGURE_INCHES`` a side.

    Up to ``LABELLED_CLIPS`` clips every row is named (and up to ``ANNOTATED_CLIPS`` every cosine printed); past it
    the rows are ordered by ``categories`` with each category named once, beside the category-by-category mean."""
    cos = clip_cosine_matrix(z)
    m = len(names)
    prefix = f"{title}: " if title else ""
    if m <= LABELLED_CLIPS:
        side = min(MAX_FIGURE_INCHES, max(5.0, 0.42 * m + 2.5))
        fig = Figure(figsize=(min(side + 1.0, MAX_FIGURE_INCHES), side), layout="constrained")
        ax = fig.add_subplot(1, 1, 1)
        image = draw_cosine_matrix(ax, cos, names, annotate=m <= ANNOTATED_CLIPS)
        fig.colorbar(image, ax=ax, shrink=0.8, label="cos(z_i, z_j)")
        heading = f"cosine between clip embeddings z_m{_most_similar_pair(cos, names, named=False)}"
        ax.set_title(prefix + heading, fontsize=10)
        return save_figure(fig, path)
    cats = list(categories) if categories is not None else ["all clips"] * m
    order, blocks = category_blocks(cats)
    two = len(blocks) > 1
    half = MAX_FIGURE_INCHES / 2
    fig = Figure(figsize=(MAX_FIGURE_INCHES if two else half + 1.0, half), layout="constrained")
    ax = fig.add_subplot(1, 2 if two else 1, 1)
    image = ax.imshow(cos[np.ix_(order, order)], cmap="RdBu_r", vmin=-1.0, vmax=1.0, interpolation="antialiased")
    _category_ticks(ax, blocks)
    ax.set_title(f"{m} clips, ordered by category", fontsize=9)
    if two:
        labels, means = category_mean_cosine(cos, cats)
        k = len(labels)
        right = fig.add_subplot(1, 2, 2)
        right.imshow(means, cmap="RdBu_r", vmin=-1.0, vmax=1.0, interpolation="nearest")
        if k <= LABELLED_CLIPS:
            right.set_xticks(range(k), labels=labels, rotation=90, fontsize=8)
            right.set_yticks(range(k), labels=labels, fontsize=8)
        if k <= ANNOTATED_CLIPS:
            _annotate(right, means, 8 if k <= 12 else 6.5)
        right.set_title("mean cosine between categories (diagonal: between a category's clips)", fontsize=9)
    fig.colorbar(image, ax=fig.axes, shrink=0.8, label="cos(z_i, z_j)")
    heading = f"cosine between clip embeddings z_m{_most_similar_pair(cos, names, named=True)}"
    fig.suptitle(prefix + heading, fontsize=10)
    return save_figure(fig, path)


def _category_ticks(ax: Axes, blocks: list[tuple[str, int, int]]) -> None:
    """Name each category's block of rows and columns once (up to ``LABELLED_CLIPS`` of them) and draw its edges."""
    edges = [first - 0.5 for _, first, _ in blocks[1:]]
    for x in edges:
        ax.axhline(x, color="black", lw=0.6)
        ax.axvline(x, color="black", lw=0.6)
    if len(blocks) > LABELLED_CLIPS:
        ax.set_xticks([])
        ax.set_yticks([])
        return
    centres = [(first + end - 1) / 2 for _, first, end in blocks]
    labels = [f"{name} ({end - first})" for name, first, end in blocks]
    ax.set_xticks(centres, labels=labels, rotation=90, fontsize=8)
    ax.set_yticks(centres, labels=labels, fontsize=8)
    ax.tick_params(length=0)


def plot_embedding_cosine(
    ev: RunEvaluation, path: str | os.PathLike, categories: Sequence[str] | None = None
) -> Path | None:
    """``plot_clip_cosine`` of a run's clip embeddings z_m; None without an encoder."""
    if ev.embedding is None:
        return None
    return plot_clip_cosine(ev.embedding.clip_embeddings, ev.clip_names, path, ev.label, categories)


def _colours(n: int) -> list[tuple[float, ...]]:
    """``n`` distinct colours: the qualitative tab10 or tab20 up to 20, evenly spaced along turbo past it."""
    from matplotlib import colormaps

    if n <= 20:
        cmap = colormaps["tab10" if n <= 10 else "tab20"]
        return [cmap(i) for i in range(n)]
    return [tuple(c) for c in colormaps["turbo"](np.linspace(0.0, 1.0, n))]
