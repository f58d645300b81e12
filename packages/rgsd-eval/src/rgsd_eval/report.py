"""The evaluation report: ``report.md`` (tables, figures, videos), ``metrics.json`` and ``metrics.csv``.

``metrics.json`` holds every number (``runs.<label>`` is ``RunEvaluation.metrics``);
``metrics.csv`` holds the same numbers in long form (one value per row); the
Markdown tables print them rounded (ERR 1 decimal, FID 2).
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rgsd_envs.utils.config import to_dict
from rgsd_envs.utils.files import atomic_path
from rgsd_eval.config import EvalConfig
from rgsd_eval.evaluate import RunEvaluation
from rgsd_eval.features import FEATURE_BODIES, FEATURE_DIM
from rgsd_eval.paper import PAPER_CATEGORIES, PAPER_SOURCE, paper_rows

CLIP_LATENTS = "clip_latents.json"
"""Per run folder of a report: {clip name: its latent (16 floats)}, the latent each clip was evaluated with."""
REPORT_FORMAT = "rgsd-eval-report"
REPORT_VERSION = 1
ERR_DECIMALS, FID_DECIMALS = 1, 2
CSV_COLUMNS = ("run", "section", "kappa", "scope", "name", "category", "metric", "value")
FID_FEATURE_DOC = (
    "Frechet distance between Gaussians fitted to 0.5 s windows (15 frames, stride 1) of heading- and "
    "position-invariant features computed from body positions alone: the heading is perpendicular to the "
    "hip axis; per window the mean root height, the mean and std of 9 bodies' positions relative to the "
    "root in the heading frame, the mean root velocity in the heading frame, the std of the 9 bodies' "
    "velocities in the heading frame and the mean yaw rate (86 numbers; m, m/s, rad/s, not standardised). "
    "Covariances get eps*I on the diagonal; the matrix square root is the symmetric PSD one (eigh)."
)


@dataclass
class RunArtifacts:
    """Files written for one run, relative to the report folder."""

    figures: dict[str, str] = field(default_factory=dict)
    videos: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class ReportInputs:
    """Everything the report shows."""

    motions: str
    clips: list[dict[str, Any]]
    """name, category, frames of each clip."""
    categories: list[str]
    config: EvalConfig
    runs: list[RunEvaluation]
    artifacts: dict[str, RunArtifacts]
    figures: dict[str, str] = field(default_factory=dict)
    """Figures over all runs (spread, comparison)."""


def _fmt(x: Any, decimals: int) -> str:
    return "n/a" if x is None else f"{x:.{decimals}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def imitation_table(inputs: ReportInputs) -> list[str]:
    """The paper-style table: one row per run, ERR (cm) and FID per category, then all clips."""
    cats = inputs.categories
    header = (
        ["Run", "Method"] + [f"{c.capitalize()} {k}" for c in cats for k in ("ERR", "FID")] + ["All ERR", "All FID"]
    )
    rows = []
    for ev in inputs.runs:
        im = ev.metrics["imitation"]
        cells = [ev.label, ev.metrics.get("method", "rgsd")]
        for scope in [im["categories"][c] for c in cats] + [im["all"]]:
            cells += [_fmt(scope["err_cm"], ERR_DECIMALS), _fmt(scope["fid"], FID_DECIMALS)]
        rows.append(cells)
    return _table(header, rows)


def paper_table(inputs: ReportInputs) -> list[str]:
    """The paper's own ERR/FID rows for the methods evaluated here, in the categories both tables have."""
    methods = [ev.metrics.get("method", "rgsd") for ev in inputs.runs]
    rows = paper_rows(methods)
    cats = [c for c in inputs.categories if c in PAPER_CATEGORIES]
    if not rows or not cats:
        return []
    header = ["Paper"] + [f"{c.capitalize()} {k}" for c in cats for k in ("ERR", "FID")]
    body = [[label] + [f"{x:.1f}" for c in cats for x in figures[c]] for label, figures in rows]
    return [f"Beside ours, the paper's figures ({PAPER_SOURCE}):", "", *_table(header, body), ""]


def _counts_line(inputs: ReportInputs) -> str:
    ev = inputs.runs[0]
    im = ev.metrics["imitation"]
    parts = [
        f"{c} {im['categories'][c]['clips']} clip(s) × {inputs.config.imitation_rollouts}" for c in inputs.categories
    ]
    return "Rollouts per category (clips × rollouts per clip): " + ", ".join(parts) + f"; all: {im['all']['rollouts']}."


def render_markdown(inputs: ReportInputs) -> str:
    """The text of report.md."""
    cfg = inputs.config
    lines = ["# RGSD evaluation report", ""]
    cat_counts = ", ".join(f"{c} {sum(1 for x in inputs.clips if x['category'] == c)}" for c in inputs.categories)
    lines += [
        protocol_line(cfg),
        "",
        f"Motions: `{inputs.motions}` ({len(inputs.clips)} clips: {cat_counts}).",
        "Runs: "
        + ", ".join(f"**{ev.label}** (latent: {ev.metrics['latent']}, `{ev.metrics['run_dir']}`)" for ev in inputs.runs)
        + ".",
        "",
        "## Imitation: Cartesian error (cm) and motion FID",
        "",
        "Each clip starts from its first reference frame with its latent and runs to the clip's end "
        "(no early termination). ERR: mean over frames and bodies of the distance between simulated and "
        "reference body positions, averaged over rollouts, then over the category's clips. FID: pooled "
        "feature windows of the category's rollouts against its reference clips. Lower is better.",
        "",
        *imitation_table(inputs),
        "",
        *paper_table(inputs),
        _counts_line(inputs)
        + (
            " The policy acts with its mean action and the simulator is deterministic, so one rollout per clip "
            "stands for all (use --action-noise for stochastic rollouts)."
            if cfg.action_noise == 0
            else f" Action noise std {cfg.action_noise:g}."
        ),
        "",
        "### Per clip",
        "",
    ]
    rows = []
    for ev in inputs.runs:
        for name, c in ev.metrics["imitation"]["clips"].items():
            rows.append(
                [
                    ev.label,
                    name,
                    c["category"],
                    str(c["rollouts"]),
                    _fmt(c["err_cm"], ERR_DECIMALS),
                    _fmt(c["err_cm_std"], ERR_DECIMALS),
                    _fmt(c["fid"], FID_DECIMALS),
                    _fmt(c["fall_rate"], 2),
                    f"{_fmt(c.get('travel_m'), 2)} / {_fmt(c.get('ref_travel_m'), 2)}",
                    str(c["unstable"]),
                ]
            )
    lines += _table(
        [
            "Run",
            "Clip",
            "Category",
            "Rollouts",
            "ERR (cm)",
            "ERR std",
            "FID",
            "Fall rate",
            "Pelvis travel / reference (m)",
            "Unstable",
        ],
        rows,
    )
    lines += [
        "",
        "## Diversity: z ~ vMF(z_m, κ)",
        "",
        f"{cfg.rollouts} rollouts per clip and κ (means over the κ's clips), centred on the clip's latent (z_m, or "
        "the best-of-N pick). Latent angle: mean angle between z and that centre. Final pelvis spread: RMS distance "
        "of the final pelvis positions (start-heading frame) from their mean (m). Path spread: the same for the "
        "pelvis positions at each frame, averaged over frames (m). Pose spread: RMS distance of the rollouts' mean "
        "FID features from their mean. Spreads should fall as κ grows. Role: sweep (the κ sweep"
        + ("" if cfg.sweep_all_clips else ", on the sweep's clips only")
        + "), discovery (every clip), trajectories (the top views), video.",
        "",
    ]
    rows = []
    for ev in inputs.runs:
        for d in sorted(ev.metrics["diversity"].values(), key=lambda d: d["kappa"]):
            mm = d["mean"]
            rows.append(
                [
                    ev.label,
                    f"{d['kappa']:g}",
                    ", ".join(d.get("roles", [])),
                    str(mm.get("clips", len(d["clips"]))),
                    str(mm["rollouts"]),
                    _fmt(mm["latent_angle_deg"], 1),
                    _fmt(mm["root_spread_m"], 3),
                    _fmt(mm["path_spread_m"], 3),
                    _fmt(mm["pose_spread"], 3),
                    _fmt(mm["err_cm"], ERR_DECIMALS),
                    _fmt(mm["fid"], FID_DECIMALS),
                    _fmt(mm["fall_rate"], 2),
                ]
            )
    lines += _table(
        [
            "Run",
            "κ",
            "Role",
            "Clips",
            "Rollouts",
            "Latent angle (deg)",
            "Final pelvis spread (m)",
            "Path spread (m)",
            "Pose spread",
            "ERR (cm)",
            "FID",
            "Fall rate",
        ],
        rows,
    )
    lines += ["", *sampled_fid_table(inputs), ""]
    if "spread" in inputs.figures:
        lines += [f"![spread against kappa]({inputs.figures['spread']})", ""]
    for ev in inputs.runs:
        art = inputs.artifacts[ev.label]
        if "kappa_sweep" in art.figures:
            lines += [f"![{ev.label} kappa sweep]({art.figures['kappa_sweep']})", ""]
    lines += [
        "## Top-view trajectories",
        "",
        f"Pelvis paths: reference black, imitation blue, z ~ vMF(z_m, {cfg.trajectory_kappa_value:g}) red "
        f"(up to {cfg.trajectory_rollouts} per clip).",
        "",
    ]
    if "comparison" in inputs.figures:
        lines += [f"![runs side by side]({inputs.figures['comparison']})", ""]
    for ev in inputs.runs:
        art = inputs.artifacts[ev.label]
        if "trajectories" in art.figures:
            lines += [f"![{ev.label} trajectories]({art.figures['trajectories']})", ""]
    searches = [ev for ev in inputs.runs if "search" in ev.metrics]
    if searches:
        lines += [
            "## Latent selection (best of N)",
            "",
            "Runs without a grounded encoder: per clip, N latents uniform on the sphere are rolled out and the "
            "lowest-error one stands in for z_m (also as the centre of the vMF samples).",
            "",
        ]
        rows = [
            [
                ev.label,
                name,
                str(s["candidates"]),
                _fmt(s["best_err_cm"], ERR_DECIMALS),
                _fmt(s["median_err_cm"], ERR_DECIMALS),
            ]
            for ev in searches
            for name, s in ev.metrics["search"].items()
        ]
        lines += _table(["Run", "Clip", "N", "Best ERR (cm)", "Median ERR (cm)"], rows) + [""]
    lines += ["## Embeddings", ""]
    for ev in inputs.runs:
        art = inputs.artifacts[ev.label]
        a = ev.metrics["within_motion_alignment"]
        if "embedding" in art.figures:
            lines += [
                f"**{ev.label}**: within-motion alignment {a:.5f}.",
                "",
                f"![{ev.label} embedding]({art.figures['embedding']})",
                "",
            ]
            if "embedding_cosine" in art.figures:
                lines += [
                    "Cosine between the clip embeddings z_m, clip by clip (1: the same skill, 0: orthogonal):",
                    "",
                    f"![{ev.label} clip cosine matrix]({art.figures['embedding_cosine']})",
                    "",
                ]
        else:
            lines += [f"**{ev.label}**: no encoder.pt, no embedding figure.", ""]
    videos = [(ev.label, v) for ev in inputs.runs for v in inputs.artifacts[ev.label].videos]
    if videos:
        lines += ["## Videos", ""] + [f"- {label}: [{cap}]({path})" for label, (cap, path) in videos] + [""]
    lines += [
        "## Method",
        "",
        "- Evaluation environment: the run's env config with deviation and fall termination off and NextStep "
        "autoreset, so every rollout reaches the clip's end; a fall (pelvis below the run's fall height or a "
        "non-foot body on the floor) is counted in the fall rate. Only simulator instability ends a rollout early.",
        f"- FID feature: {FID_FEATURE_DOC}",
        f"- Settings: `{json.dumps(to_dict(cfg))}`.",
        "- Every number is in `metrics.json` and `metrics.csv`; `eval_config.yaml` repeats the settings (`--config`).",
        "",
    ]
    return "\n".join(lines)


def protocol_line(cfg: EvalConfig) -> str:
    """Which protocol made the report and what was changed from it."""
    changed = cfg.overrides()
    text = (
        "; changed: " + ", ".join(f"{k} = {_show(v)}" for k, v in changed.items())
        if changed
        else " (its settings unchanged)"
    )
    imitation = (
        f"{cfg.imitation_rollouts} stochastic imitation rollouts per clip (action noise {cfg.action_noise:g})"
        if cfg.action_noise > 0
        else "1 deterministic imitation rollout per clip"
    )
    discovery = "none" if cfg.discovery_kappa is None else f"κ = {cfg.discovery_kappa:g} on every clip"
    sweep = "every clip" if cfg.sweep_all_clips else f"{cfg.sweep_clips} clips"
    return (
        f"Protocol: **{cfg.protocol}**{text}. {imitation}; {cfg.rollouts} vMF rollouts per clip and κ; best-of-"
        f"{cfg.best_of} latents where the method has no motion encoder; discovery: {discovery}; κ sweep "
        f"{', '.join(f'{k:g}' for k in cfg.kappas)} on {sweep}; top views at κ = {cfg.trajectory_kappa_value:g}."
    )


def _show(v: Any) -> str:
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(_show(x) for x in v) + "]"
    return f"{v:g}" if isinstance(v, float) else str(v)


def sampled_fid_table(inputs: ReportInputs) -> list[str]:
    """FID per category under z ~ vMF(z_m, κ), one row per run and κ (categories the κ was not rolled out on: -)."""
    cats = inputs.categories
    rows = []
    for ev in inputs.runs:
        for d in sorted(ev.metrics["diversity"].values(), key=lambda d: d["kappa"]):
            per = d.get("categories", {})
            cells = [_fmt(per[c]["fid"], FID_DECIMALS) if c in per else "-" for c in cats]
            rows.append([ev.label, f"{d['kappa']:g}", *cells, _fmt(d["mean"]["fid"], FID_DECIMALS)])
    return [
        "### FID per category under sampled latents",
        "",
        "Motion FID of the vMF rollouts of each category's clips (pooled windows) against those clips' references; "
        "All: the κ's clips pooled. Compare with the imitation table's FID at z_m (the paper's discovery "
        "evaluation uses κ = 50).",
        "",
        *_table(["Run", "κ", *(f"{c.capitalize()} FID" for c in cats), "All FID"], rows),
    ]


def metrics_document(inputs: ReportInputs) -> dict[str, Any]:
    """The content of metrics.json."""
    return {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "motions": inputs.motions,
        "clips": inputs.clips,
        "categories": inputs.categories,
        "protocol": {"name": inputs.config.protocol, "changed": to_dict_values(inputs.config.overrides())},
        "config": to_dict(inputs.config),
        "fid_feature": {
            "definition": FID_FEATURE_DOC,
            "dim": FEATURE_DIM,
            "bodies": list(FEATURE_BODIES),
            "window": inputs.config.fid_window,
        },
        "runs": {ev.label: ev.metrics for ev in inputs.runs},
        "figures": {"all": inputs.figures, **{k: a.figures for k, a in inputs.artifacts.items()}},
        "videos": {k: [{"caption": c, "path": p} for c, p in a.videos] for k, a in inputs.artifacts.items()},
    }


def to_dict_values(values: dict[str, Any]) -> dict[str, Any]:
    """JSON-ready values (tuples as lists)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}


def csv_rows(runs: dict[str, dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """One row per number of every run's metrics (see CSV_COLUMNS)."""

    def emit(
        run: str, section: str, kappa: str, scope: str, name: str, values: dict[str, Any]
    ) -> Iterator[dict[str, Any]]:
        cat = values.get("category", "")
        for metric, v in values.items():
            if isinstance(v, (int, float)) or v is None:
                if metric == "kappa":
                    continue
                yield {
                    "run": run,
                    "section": section,
                    "kappa": kappa,
                    "scope": scope,
                    "name": name,
                    "category": cat,
                    "metric": metric,
                    "value": "" if v is None else v,
                }

    for run, m in runs.items():
        yield from emit(
            run,
            "run",
            "",
            "run",
            run,
            {k: v for k, v in m.items() if k in ("within_motion_alignment", "rollout_seconds")},
        )
        im = m["imitation"]
        for name, v in im["clips"].items():
            yield from emit(run, "imitation", "", "clip", name, v)
        for name, v in im["categories"].items():
            yield from emit(run, "imitation", "", "category", name, {**v, "category": name})
        yield from emit(run, "imitation", "", "all", "all", im["all"])
        for key, d in m["diversity"].items():
            for name, v in d["clips"].items():
                yield from emit(run, "diversity", key, "clip", name, v)
            for name, v in d.get("categories", {}).items():
                yield from emit(run, "diversity", key, "category", name, {**v, "category": name})
            yield from emit(run, "diversity", key, "mean", "mean", d["mean"])
        for name, v in m.get("search", {}).items():
            yield from emit(run, "search", "", "clip", name, v)


def write_report(inputs: ReportInputs, out_dir: str | os.PathLike) -> dict[str, Path]:
    """Write report.md, metrics.json, metrics.csv and each run's clip_latents.json into out_dir (atomically);
    returns the paths of the first three."""
    out = Path(out_dir)
    paths = {"report": out / "report.md", "json": out / "metrics.json", "csv": out / "metrics.csv"}
    doc = metrics_document(inputs)
    with atomic_path(paths["json"]) as tmp:
        tmp.write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n")
    with atomic_path(paths["csv"]) as tmp, open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(csv_rows(doc["runs"]))
    with atomic_path(paths["report"]) as tmp:
        tmp.write_text(render_markdown(inputs))
    for ev in inputs.runs:  # each clip's latent as evaluated: a best-of-N run's style latents for `rgsd downstream`
        with atomic_path(out / ev.label / CLIP_LATENTS) as tmp:
            tmp.write_text(json.dumps(ev.metrics["clip_latents"], indent=1) + "\n")
    return paths
