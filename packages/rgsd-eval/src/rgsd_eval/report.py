"""The evaluation report: ``report.md`` (tables, figures, videos), ``metrics.json`` and ``metrics.csv``.

``metrics.json`` holds every number (``runs.<label>`` is ``RunEvaluation.metrics``);
``metrics.csv`` holds the same numbers in long form (one value per row); the
Markdown tables print them rounded (errors in cm 1 decimal, rates and FID 2).
The paper's ERR stands beside ours with each row's frame and rollout count; its
FID only as an order of methods (``rgsd_eval.paper``); a box lists how the run
differs from the paper's setup.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rgsd_envs.motion.clip import CLIP_FPS
from rgsd_envs.motion.fid_window import min_fid_frames
from rgsd_envs.motion.selection import SPREAD_RULE
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.config import to_dict
from rgsd_envs.utils.files import atomic_path
from rgsd_envs.utils.provenance import provenance, provenance_text
from rgsd_eval.config import EvalConfig
from rgsd_eval.evaluate import FID_WINDOWS, RunEvaluation
from rgsd_eval.features import FEATURE_BODIES, FEATURE_DIM
from rgsd_eval.latents import latent_rule
from rgsd_eval.metrics import DEFINITIONS, DEVIATION_THRESHOLD_M
from rgsd_eval.paper import (
    FID_NOT_COMPARABLE,
    PAPER_CATEGORIES,
    PAPER_ERR_FRAME,
    PAPER_LABELS,
    PAPER_ROLLOUTS,
    PAPER_SETUP,
    PAPER_SOURCE,
    paper_err,
    paper_fid_ranks,
    paper_key,
    rank,
)
from rgsd_eval.protocol import POLICY_NOISE

REPORT_FORMAT = "rgsd-eval-report"
REPORT_VERSION = 2
ERR_DECIMALS, FID_DECIMALS = 1, 2
CSV_COLUMNS = ("run", "section", "kappa", "scope", "name", "category", "metric", "value")
FID_WINDOWS_DEFINITION = (
    "Feature windows of the rollouts the FID beside it was fitted to. An FID's finite-sample bias falls as its "
    "independent samples grow (two samples of one Gaussian score above 0), and windows sliding by one frame overlap, "
    "so they hold far fewer independent samples than their count; FIDs of different window counts (rollout counts, "
    "clip lengths) do not compare."
)
OUR_ERR_FRAME = "world"
"""The frame of our ERR: body positions as simulated, pelvis translation included."""
ERR_FRAME_TEXT = (
    f"{OUR_ERR_FRAME}; no termination (a fall keeps accruing error); beside it ERR to fall, each rollout's error up "
    "to its first fall, and ERR to deviation, up to its first frame past training's deviation threshold"
)
"""Our side of the box's "ERR frame" row."""
TRACKING_COLUMNS = (
    ("err_cm", "ERR, world (cm)", ERR_DECIMALS),
    ("mpjpe_cm", "MPJPE (cm)", ERR_DECIMALS),
    ("global_mpjpe_succ_cm", "Global MPJPE, successful (cm)", ERR_DECIMALS),
    ("success_rate", "Success rate", 2),
    ("fall_rate", "Fall rate", 2),
    ("played_before_fall", "Played before a fall", 2),
)
"""The tracking metrics of every report table (``metrics.DEFINITIONS``): field, column, decimals."""
IMITATION_COLUMNS = (
    ("err_cm", "ERR", ERR_DECIMALS),
    ("err_until_fall_cm", "ERR to fall", ERR_DECIMALS),
    ("err_until_deviation_cm", "ERR to deviation", ERR_DECIMALS),
    ("fid", "FID", FID_DECIMALS),
)
"""The paper-style imitation table's numbers, per category and over all clips (``metrics.DEFINITIONS``): field,
column, decimals."""
LATER_FIELDS = frozenset({"err_until_fall_cm", "err_until_deviation_cm"})
"""Imitation fields a metrics.json written before they existed lacks: shown as n/a."""
VIDEO_ADVICE = (
    "For videos install libegl1 (MUJOCO_GL=egl) or libosmesa6 (MUJOCO_GL=osmesa, software) and evaluate again; "
    "--no-video skips them"
)
"""What to do when the videos cannot render (the warning and the report say it)."""
SIMULATORS = {"mujoco": "MuJoCo", "warp": "MuJoCo Warp"}


def fid_feature_doc(window: int) -> str:
    """The FID feature in words for feature windows of ``window`` frames (``EvalConfig.fid_window``)."""
    n = len(FEATURE_BODIES)
    return (
        f"Frechet distance between Gaussians fitted to {window / CLIP_FPS:g} s windows ({window} frames, stride 1) "
        "of heading- and position-invariant features computed from body positions alone: the heading is "
        "perpendicular to the hip axis; per window the mean root height, the mean and std of "
        f"{n} bodies' positions relative to the root in the heading frame, the mean root velocity in the heading "
        f"frame, the std of the {n} bodies' velocities in the heading frame and the mean yaw rate ({FEATURE_DIM} "
        "numbers; m, m/s, rad/s, not standardised). Covariances get eps*I on the diagonal; the matrix square root "
        "is the symmetric PSD one (eigh)."
    )


@dataclass
class RunArtifacts:
    """Files written for one run, relative to the report folder."""

    figures: dict[str, str] = field(default_factory=dict)
    videos: list[tuple[str, str]] = field(default_factory=list)
    replays: list[tuple[str, str]] = field(default_factory=list)
    """(caption, path) of the HTML replays (open from disk in a browser)."""


@dataclass
class ReportInputs:
    """Everything the report shows."""

    motions: str | list[str]
    """The motion source, or the list of them (``--motions a b``, a run's ``env.motions`` list)."""
    clips: list[dict[str, Any]]
    """name, category, frames of each clip."""
    categories: list[str]
    config: EvalConfig
    runs: list[RunEvaluation]
    artifacts: dict[str, RunArtifacts]
    figures: dict[str, str] = field(default_factory=dict)
    """Figures over all runs (spread, comparison)."""
    videos_skipped: str = ""
    """Why the mp4 videos were not rendered although ``config.video`` asked for them ("": they were, or not asked)."""
    provenance: dict[str, Any] = field(default_factory=provenance)
    """The code that made the evaluation (``rgsd_envs.utils.provenance``)."""
    unscored_fid: list[dict[str, Any]] = field(default_factory=list)
    """name, frames and file of each clip too short for an FID (``evaluate.ReferenceFeatures.short``)."""
    clips_selected: dict[str, Any] | None = None
    """clips (evaluated), of (in the motion set) and rule (how they were picked; ``clips_selection``); None: every
    clip of ``clips``."""


def clips_selection(evaluated: int, of: int) -> dict[str, Any]:
    """metrics.json's ``clips_selected``: ``evaluated`` of the motion set's ``of`` clips and the rule that picked
    them (``EvalConfig.max_clips``)."""
    return {"clips": evaluated, "of": of, "rule": SPREAD_RULE if evaluated < of else "every clip"}


def selection_text(selected: dict[str, Any]) -> str:
    """The sentence saying how many of the motion set's clips were evaluated ("" when every one was)."""
    if selected["clips"] >= selected["of"]:
        return ""
    return (
        f"This evaluation covers {selected['clips']} of the motion set's {selected['of']} clips (max_clips = "
        f"{selected['clips']}: {selected['rule']}); every number below is over these clips only."
    )


def link_target(path: str) -> str:
    """``path`` as a Markdown link or image destination: in angle brackets when it holds a space or a parenthesis,
    where CommonMark would otherwise end the link."""
    return f"<{path}>" if any(c in path for c in " ()") else path


def _fmt(x: Any, decimals: int) -> str:
    return "n/a" if x is None else f"{x:.{decimals}f}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """The lines of a Markdown table: the header, its rule, one line per row of cells."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def imitation_table(inputs: ReportInputs) -> list[str]:
    """The paper-style table: one row per run, ERR, ERR to fall and ERR to deviation (cm) and FID per category, then
    all clips ("n/a" where a metrics.json predates a field)."""
    cats = inputs.categories
    kinds = [label for _, label, _ in IMITATION_COLUMNS]
    header = ["Run", "Method"] + [f"{c.capitalize()} {k}" for c in cats for k in kinds] + [f"All {k}" for k in kinds]
    rows = []
    for ev in inputs.runs:
        im = ev.metrics["imitation"]
        cells = [ev.label, ev.metrics.get("method", "rgsd")]
        for scope in [im["categories"][c] for c in cats] + [im["all"]]:
            cells += [_fmt(imitation_value(scope, key), d) for key, _, d in IMITATION_COLUMNS]
        rows.append(cells)
    return markdown_table(header, rows)


def imitation_value(scope: dict[str, Any], key: str) -> Any:
    """``scope[key]`` of a metrics.json's imitation numbers; None for a ``LATER_FIELDS`` field it predates."""
    return scope.get(key) if key in LATER_FIELDS else scope[key]


def tracking_table(inputs: ReportInputs) -> list[str]:
    """The tracking metrics (``TRACKING_COLUMNS``) per run and category, then over all clips."""
    rows = []
    for ev in inputs.runs:
        im = ev.metrics["imitation"]
        for name, scope in [*((c, im["categories"][c]) for c in inputs.categories), ("all", im["all"])]:
            rows.append(
                [ev.label, ev.metrics.get("method", "rgsd"), name, str(scope["rollouts"])]
                + [_fmt(scope.get(key), dec) for key, _, dec in TRACKING_COLUMNS]
            )
    return markdown_table(["Run", "Method", "Category", "Rollouts", *(col for _, col, _ in TRACKING_COLUMNS)], rows)


def noise_text(action_noise: float | str, runs: dict[str, dict[str, Any]]) -> str:
    """The rollouts' action noise in words: none, one std for every run, or each run's own std (``runs``: label ->
    its metrics, ``action_noise`` read there) and where it was read."""
    if action_noise != POLICY_NOISE and not action_noise > 0:
        return "no action noise (the policy's mean action; deterministic)"
    if action_noise != POLICY_NOISE:
        return f"action noise std {_show(action_noise)} for every run (set by action_noise)"
    parts = []
    for label, m in runs.items():
        n = m.get("action_noise") or {}
        if "std" not in n:
            parts.append(f"{label} unknown")
            continue
        std = f"{n['std']:.3g}" if n["min"] == n["max"] else f"{n['min']:.3g}-{n['max']:.3g}"
        parts.append(f"{label} {std} ({n['source']})")
    return "each run's own policy action std: " + "; ".join(parts)


def rollouts_text(cfg: EvalConfig, runs: Sequence[RunEvaluation]) -> str:
    """Imitation rollouts per clip and their noise, as the report states it on every row that needs it."""
    return f"{cfg.imitation_rollouts} per clip, {noise_text(cfg.action_noise, {ev.label: ev.metrics for ev in runs})}"


def paper_err_table(inputs: ReportInputs) -> list[str]:
    """ERR per category, ours beside the paper's for the methods evaluated here, each row with its frame and its
    rollouts per clip; in the categories both have."""
    cats = [c for c in inputs.categories if c in PAPER_CATEGORIES]
    methods = list(dict.fromkeys(ev.metrics.get("method", "rgsd") for ev in inputs.runs))
    quoted = [(m, e) for m in methods if (e := paper_err(m)) is not None]
    if not quoted or not cats:
        return []
    k = inputs.config.imitation_rollouts
    rows = [
        [f"{ev.label} (ours)", ev.metrics.get("method", "rgsd"), OUR_ERR_FRAME, str(k)]
        + [_fmt(ev.metrics["imitation"]["categories"][c]["err_cm"], ERR_DECIMALS) for c in cats]
        for ev in inputs.runs
    ]
    rows += [
        ["paper (quoted)", PAPER_LABELS[paper_key(m)], PAPER_ERR_FRAME, str(PAPER_ROLLOUTS)]
        + [f"{e[c]:.1f}" for c in cats]
        for m, e in quoted
    ]
    return [
        f"ERR (cm) beside the paper's ({PAPER_SOURCE}). Ours: {rollouts_text(inputs.config, inputs.runs)}. The "
        "paper does not state the frame of its error nor its action noise, and its setup differs (box above), so "
        "the rows are set side by side, not matched.",
        "",
        *markdown_table(
            ["Source", "Method", "Frame", "Rollouts per clip", *(f"{c.capitalize()} ERR" for c in cats)], rows
        ),
        "",
    ]


def fid_rank_table(inputs: ReportInputs) -> list[str]:
    """The order of methods by FID per category, ours beside the paper's (never the paper's FID values): for two
    or more methods of this report that the paper has; else the reason alone."""
    cats = [c for c in inputs.categories if c in PAPER_CATEGORIES]
    by_method: dict[str, list[RunEvaluation]] = {}
    for ev in inputs.runs:
        by_method.setdefault(ev.metrics.get("method", "rgsd"), []).append(ev)
    paper = paper_fid_ranks(list(by_method))
    if len(paper) < 2 or not cats:
        return [f"{FID_NOT_COMPARABLE} This report has fewer than two of the paper's methods to order.", ""]
    ours: dict[str, dict[str, int]] = {m: {} for m in paper}
    for c in cats:
        fids = {}
        for m in paper:
            vals = [v for ev in by_method[m] if (v := ev.metrics["imitation"]["categories"][c]["fid"]) is not None]
            fids[m] = sum(vals) / len(vals) if vals else None
        for m, r in rank(fids).items():
            ours[m][c] = r
    rows = [[m, *(f"{ours[m].get(c, '-')} / {paper[m][c]}" for c in cats)] for m in paper]
    return [
        f"{FID_NOT_COMPARABLE} Rank by FID per category among the {len(paper)} methods here (1 = lowest FID; ours: "
        "the mean over the method's runs), ours / the paper's:",
        "",
        *markdown_table(["Method", *(f"{c.capitalize()} FID rank" for c in cats)], rows),
        "",
    ]


def differences_table(
    ours: dict[str, str], heading: str = "##", paper_setup: Mapping[str, str] = PAPER_SETUP
) -> list[str]:
    """The "How this run differs from the paper" box: each item of ``paper_setup`` (the imitation's
    ``PAPER_SETUP``, or more) with ours beside the paper's."""
    rows = [[item, ours.get(item, "-").replace("|", "\\|"), paper] for item, paper in paper_setup.items()]
    return [
        f"{heading} How this run differs from the paper",
        "",
        *markdown_table(["", "This report", "The paper"], rows),
        "",
    ]


def simulators_text(backends: Sequence[str | None]) -> str:
    """The simulators of some runs in words ("MuJoCo", "MuJoCo Warp")."""
    names = [SIMULATORS.get(b or "mujoco", str(b)) for b in dict.fromkeys(backends)]
    return ", ".join(names)


def motions_text(motions: str | Sequence[str]) -> str:
    """The motion source, or each of several, in code quotes."""
    return ", ".join(f"`{m}`" for m in ([motions] if isinstance(motions, str) else motions))


def clips_text(
    motions: str | Sequence[str],
    clips: Sequence[dict[str, Any]],
    categories: Sequence[str],
    selected: dict[str, Any] | None = None,
) -> str:
    """How many clips (of how many, where ``selected`` cut the set) from which source(s), per category."""
    counts = ", ".join(f"{c} {sum(1 for x in clips if x['category'] == c)}" for c in categories)
    demo = " (the built-in demo clips: made by code, not motion capture)" if motions == "demo" else ""
    of = f" of {selected['of']}" if selected and selected["clips"] < selected["of"] else ""
    return f"{len(clips)}{of} clips from {motions_text(motions)}{demo}: {counts}"


UNSCORED_EXAMPLES = 5
"""Clips without an FID that the warning and the report name; past it they count the rest (metrics.json lists all)."""


def unscored_fid_text(clips: Sequence[dict[str, Any]], window: int) -> str:
    """Which clips have no FID (up to ``UNSCORED_EXAMPLES`` named, the rest counted), why, and what to change
    (``clips``: name, frames, file of each): the warning before the rollouts and the report's note."""
    each = "; ".join(f"{c['name']} ({c['frames']} frames, {c['file']})" for c in clips[:UNSCORED_EXAMPLES])
    if len(clips) > UNSCORED_EXAMPLES:
        each += f"; and {len(clips) - UNSCORED_EXAMPLES} more (every one in metrics.json, fid_feature.unscored_clips)"
    return (
        f"FID not measured on {len(clips)} clip(s) shorter than {min_fid_frames(window)} frames (two windows of "
        f"fid_window = {window} frames): {each}. Their ERR and tracking metrics are measured; the FIDs of their "
        "categories and of all clips pool the other clips' windows. To score them, evaluate with a shorter window "
        "(--set fid_window=N, N + 1 at most their frames; FIDs of different windows do not compare) or use longer "
        "clips"
    )


def samples_text(runs: dict[str, int | None]) -> str:
    """Training samples (environment transitions) per run label."""
    return "; ".join(f"{label}: " + ("not recorded" if n is None else f"{n:,} samples") for label, n in runs.items())


def discovery_text(kappa: float | None) -> str:
    """Our side of the box's "discovery motions" row: where the discovery kappa was rolled out and scored."""
    if kappa is None:
        return "none (no discovery_kappa)"
    return f"every clip, FID per clip and category at κ = {kappa:g}"


def our_setup(inputs: ReportInputs) -> dict[str, str]:
    """This report's side of the differences box (keys of ``PAPER_SETUP``)."""
    return {
        "simulator": simulators_text([ev.metrics.get("simulator") for ev in inputs.runs]),
        "clips": clips_text(inputs.motions, inputs.clips, inputs.categories, inputs.clips_selected),
        "training budget": samples_text({ev.label: ev.metrics.get("training_samples") for ev in inputs.runs}),
        "rollouts per clip": rollouts_text(inputs.config, inputs.runs),
        "clip latent": clip_latent_text([(ev.metrics.get("method", "rgsd"), ev.metrics) for ev in inputs.runs]),
        "ERR frame": ERR_FRAME_TEXT,
        "FID feature": "ours: 86 numbers per 0.5 s window from 9 bodies' positions (Method below)",
        "discovery motions": discovery_text(inputs.config.discovery_kappa),
    }


def clip_latent_text(runs: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """Each method's clip latent in words, from its runs' recorded latent rule (``runs``: (method, the run's metrics
    with ``latent`` and ``clip_latents_rule``)); a method whose runs differ lists each rule once."""
    rules: dict[str, list[str]] = {}
    for method, m in runs:
        text = latent_rule(m["latent"], m.get("clip_latents_rule"))
        if text not in rules.setdefault(method, []):
            rules[method].append(text)
    return "; ".join(f"{method}: {' / '.join(texts)}" for method, texts in rules.items())


def unstable_text(runs: Sequence[RunEvaluation]) -> str:
    """The imitation rollouts that simulator instability ended early, per run ("": none did)."""
    parts = []
    for ev in runs:
        a = ev.metrics["imitation"]["all"]
        if a.get("unstable"):
            parts.append(f"{ev.label} {a['rollouts'] - a['unstable']}/{a['rollouts']}")
    if not parts:
        return ""
    return (
        "Rollouts scored on the whole clip (the others ended early by simulator instability): "
        + ", ".join(parts)
        + ". An unstable rollout is scored on its frames before the blow-up; one unstable at its first step has none "
        "and drops out of the means (the per-clip table's Unstable column counts them)."
    )


def _counts_line(inputs: ReportInputs) -> str:
    ev = inputs.runs[0]
    im = ev.metrics["imitation"]
    parts = [
        f"{c} {im['categories'][c]['clips']} clip(s) × {inputs.config.imitation_rollouts}" for c in inputs.categories
    ]
    return "Rollouts per category (clips × rollouts per clip): " + ", ".join(parts) + f"; all: {im['all']['rollouts']}."


def _selected(inputs: ReportInputs) -> dict[str, Any]:
    """The report's ``clips_selected`` (every clip where the pipeline gave none)."""
    return inputs.clips_selected or clips_selection(len(inputs.clips), len(inputs.clips))


def render_markdown(inputs: ReportInputs) -> str:
    """The text of report.md."""
    cfg = inputs.config
    lines = ["# RGSD evaluation report", ""]
    cat_counts = ", ".join(f"{c} {sum(1 for x in inputs.clips if x['category'] == c)}" for c in inputs.categories)
    lines += [
        protocol_line(cfg, [c["category"] for c in inputs.clips]),
        "",
        f"Motions: {motions_text(inputs.motions)} ({len(inputs.clips)} clips: {cat_counts}).",
        *[t for t in [selection_text(_selected(inputs))] if t],
        "Runs: "
        + ", ".join(f"**{ev.label}** (latent: {ev.metrics['latent']}, `{ev.metrics['run_dir']}`)" for ev in inputs.runs)
        + ".",
        "",
        *differences_table(our_setup(inputs)),
        "## Imitation: tracking error and motion FID",
        "",
        "Each clip starts from its first reference frame with its latent (tracking: a latent per step) and runs to "
        "the clip's end "
        "(no early termination). ERR: mean over frames and bodies of the world-frame distance between simulated and "
        "reference body positions, averaged over rollouts, then over the category's clips. ERR to fall: the same "
        "over each rollout's frames up to its first fall, that frame included (all frames if it never falls): the "
        "error of episodes that end at a fall. ERR to deviation: the same up to the first frame whose error exceeds "
        f"{DEVIATION_THRESHOLD_M:g} m, training's deviation threshold. FID: ours, pooled feature windows of the category's rollouts against "
        "its reference clips. Lower is better.",
        "",
        *imitation_table(inputs),
        "",
        _counts_line(inputs)
        + (
            " The policy acts with its mean action and the simulator is deterministic, so one rollout per clip "
            "stands for all (use --action-noise or --protocol paper for stochastic rollouts)."
            if not cfg.stochastic
            else f" Action noise: {noise_text(cfg.action_noise, {ev.label: ev.metrics for ev in inputs.runs})}."
        ),
        "",
        *([f"{unscored_fid_text(inputs.unscored_fid, cfg.fid_window)}.", ""] if inputs.unscored_fid else []),
        *([unstable_text(inputs.runs), ""] if unstable_text(inputs.runs) else []),
        "### Tracking metrics",
        "",
        "ERR (world frame), MPJPE (root-relative), global MPJPE over the successful rollouts, success rate (no frame "
        "with a mean body distance above 0.5 m) and fall rate, per category and over all clips; definitions under "
        "Method below.",
        "",
        *tracking_table(inputs),
        "",
        "### Beside the paper",
        "",
        *paper_err_table(inputs),
        *fid_rank_table(inputs),
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
                    "-" if c["err_cm_std"] is None else _fmt(c["err_cm_std"], ERR_DECIMALS),  # one rollout
                    _fmt(c.get("mpjpe_cm"), ERR_DECIMALS),
                    _fmt(c.get("global_mpjpe_succ_cm"), ERR_DECIMALS),
                    _fmt(c.get("success_rate"), 2),
                    _fmt(c["fid"], FID_DECIMALS),
                    _fmt(c["fall_rate"], 2),
                    f"{_fmt(c.get('travel_m'), 2)} / {_fmt(c.get('ref_travel_m'), 2)}",
                    str(c["unstable"]),
                ]
            )
    lines += markdown_table(
        [
            "Run",
            "Clip",
            "Category",
            "Rollouts",
            "ERR, world (cm)",
            "ERR std",
            "MPJPE (cm)",
            "Global MPJPE, successful (cm)",
            "Success rate",
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
        "the best-of-N pick; tracking: the mean of the clip's per-step latents, the track turned with z). Latent angle: mean "
        "angle between z and that centre; one κ is a wider angle on a larger sphere (skill dim), so runs of different "
        "dims compare by angle, not κ. Final pelvis spread: RMS distance "
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
                    str(ev.metrics.get("skill_dim", "n/a")),
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
    lines += markdown_table(
        [
            "Run",
            "Skill dim",
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
        lines += [f"![spread against kappa]({link_target(inputs.figures['spread'])})", ""]
    for ev in inputs.runs:
        art = inputs.artifacts[ev.label]
        if "kappa_sweep" in art.figures:
            lines += [f"![{ev.label} kappa sweep]({link_target(art.figures['kappa_sweep'])})", ""]
    lines += [
        "## Top-view trajectories",
        "",
        f"Pelvis paths: reference black, imitation blue, z ~ vMF(z_m, {cfg.trajectory_kappa_value:g}) red "
        f"(up to {cfg.trajectory_rollouts} per clip).",
        "",
    ]
    if "comparison" in inputs.figures:
        lines += [f"![runs side by side]({link_target(inputs.figures['comparison'])})", ""]
    for ev in inputs.runs:
        art = inputs.artifacts[ev.label]
        if "trajectories" in art.figures:
            lines += [f"![{ev.label} trajectories]({link_target(art.figures['trajectories'])})", ""]
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
        lines += markdown_table(["Run", "Clip", "N", "Best ERR (cm)", "Median ERR (cm)"], rows) + [""]
    lines += ["## Embeddings", ""]
    for ev in inputs.runs:
        art = inputs.artifacts[ev.label]
        a = ev.metrics["within_motion_alignment"]
        if "embedding" in art.figures:
            lines += [
                f"**{ev.label}**: within-motion alignment {a:.5f}.",
                "",
                f"![{ev.label} embedding]({link_target(art.figures['embedding'])})",
                "",
            ]
            if "embedding_cosine" in art.figures:
                lines += [
                    "Cosine between the clip embeddings z_m, clip by clip (1: the same skill, 0: orthogonal):",
                    "",
                    f"![{ev.label} clip cosine matrix]({link_target(art.figures['embedding_cosine'])})",
                    "",
                ]
        else:
            lines += [f"**{ev.label}**: no encoder.pt, no embedding figure.", ""]
    videos = [(ev.label, v) for ev in inputs.runs for v in inputs.artifacts[ev.label].videos]
    if videos:
        lines += (
            ["## Videos", ""] + [f"- {label}: [{cap}]({link_target(path)})" for label, (cap, path) in videos] + [""]
        )
    if inputs.videos_skipped:
        lines += ["## Videos", "", f"Not rendered: {inputs.videos_skipped}. {VIDEO_ADVICE}", ""]
    replays = [(ev.label, r) for ev in inputs.runs for r in inputs.artifacts[ev.label].replays]
    if replays:
        lines += (
            [
                "## Replays",
                "",
                "Each page opens from disk in a browser, with no server and no network: play, scrub, drag to orbit.",
                "",
            ]
            + [f"- {label}: [{cap}]({link_target(path)})" for label, (cap, path) in replays]
            + [""]
        )
    lines += [
        "## Method",
        "",
        "- Evaluation environment: the run's env config with deviation and fall termination off and NextStep "
        "autoreset, so every rollout reaches the clip's end; a fall (pelvis below the run's fall height or a "
        "non-foot body on the floor) is counted in the fall rate. Only simulator instability ends a rollout early.",
        *(f"- {text}" for text in DEFINITIONS.values()),
        "- Sources of the conventions: PHC (`phc/learning/im_amp_players.py`, `smpl_sim` `compute_metrics_lite`: "
        "0.5 m termination, mpjpe_g, mpjpe_l, errors over all and over successful motions), ProtoMotions "
        "(`gt_err` and the `max(gt_err) > 0.5` failure), HumEnv (`success_phc_mean`). ERR over every rollout is "
        "ProtoMotions' gt_err and PHC's all-motion mpjpe_g by formula, so it is printed once; the global MPJPE "
        "column is PHC's figure over successful rollouts.",
        f"- FID feature: {fid_feature_doc(cfg.fid_window)}",
        f"- Settings: `{json.dumps(to_dict(cfg))}`.",
        f"- Code: {provenance_text(inputs.provenance)} (`provenance` in `metrics.json`).",
        *(
            f"- Policy of {ev.label} written by: {provenance_text(ev.metrics.get('policy_provenance'))} "
            "(`policy_provenance`; a resumed run's names its last session's code)."
            for ev in inputs.runs
        ),
        "- Every number is in `metrics.json` and `metrics.csv`; `eval_config.yaml` repeats the settings (`--config`).",
        "",
    ]
    return "\n".join(lines)


def protocol_line(cfg: EvalConfig, categories: list[str] | None = None) -> str:
    """Which protocol made the report and what was changed from it (``categories``: each clip's, to count the
    sweep's clips as run)."""
    changed = cfg.overrides()
    text = (
        "; changed: " + ", ".join(f"{k} = {_show(v)}" for k, v in changed.items())
        if changed
        else " (its settings unchanged)"
    )
    noise = "each run's policy std" if cfg.action_noise == POLICY_NOISE else f"std {_show(cfg.action_noise)}"
    imitation = (
        f"{cfg.imitation_rollouts} stochastic imitation rollouts per clip (action noise: {noise})"
        if cfg.stochastic
        else "1 deterministic imitation rollout per clip"
    )
    discovery = "none" if cfg.discovery_kappa is None else f"κ = {cfg.discovery_kappa:g} on every clip"
    shown = cfg.sweep_clips if categories is None else len(cfg.sweep_clip_ids(categories))
    sweep = "every clip" if cfg.sweep_all_clips else f"{shown} clip{'s' * (shown != 1)}"
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
        *markdown_table(["Run", "κ", *(f"{c.capitalize()} FID" for c in cats), "All FID"], rows),
    ]


def metrics_document(inputs: ReportInputs) -> dict[str, Any]:
    """The content of metrics.json."""
    return {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "motions": inputs.motions,
        "clips": inputs.clips,
        "clips_selected": _selected(inputs),
        "categories": inputs.categories,
        "protocol": {"name": inputs.config.protocol, "changed": to_dict_values(inputs.config.overrides())},
        "config": to_dict(inputs.config),
        "metric_definitions": {
            **DEFINITIONS,
            "fid": "our motion FID; feature: fid_feature",
            FID_WINDOWS: FID_WINDOWS_DEFINITION,
        },
        "paper": paper_document([ev.metrics.get("method", "rgsd") for ev in inputs.runs]),
        "fid_feature": {
            "definition": fid_feature_doc(inputs.config.fid_window),
            "dim": FEATURE_DIM,
            "bodies": list(FEATURE_BODIES),
            "window": inputs.config.fid_window,
            "unscored_clips": inputs.unscored_fid,
        },
        "runs": {ev.label: ev.metrics for ev in inputs.runs},
        "figures": {"all": inputs.figures, **{k: a.figures for k, a in inputs.artifacts.items()}},
        "videos": {k: [{"caption": c, "path": p} for c, p in a.videos] for k, a in inputs.artifacts.items()},
        "replays": {k: [{"caption": c, "path": p} for c, p in a.replays] for k, a in inputs.artifacts.items()},
        "videos_skipped": inputs.videos_skipped,
        "provenance": inputs.provenance,
    }


def paper_document(methods: Sequence[str]) -> dict[str, Any]:
    """The paper's side for ``methods``: its ERR per category (frame and rollouts stated) and its FID only as an order
    of these methods, with the reason."""
    return {
        "source": PAPER_SOURCE,
        "err_frame": PAPER_ERR_FRAME,
        "rollouts_per_clip": PAPER_ROLLOUTS,
        "err_cm": {m: e for m in dict.fromkeys(methods) if (e := paper_err(m)) is not None},
        "fid_rank": paper_fid_ranks(methods),
        "fid_note": FID_NOT_COMPARABLE,
        "setup": PAPER_SETUP,
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
            {
                **{
                    k: v
                    for k, v in m.items()
                    if k in ("within_motion_alignment", "rollout_seconds", "training_samples")
                },
                "action_noise_std": (m.get("action_noise") or {}).get("std"),
            },
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
        with atomic_path(out / ev.label / RunDir.CLIP_LATENTS) as tmp:
            tmp.write_text(json.dumps(ev.metrics["clip_latents"], indent=1) + "\n")
    return paths
