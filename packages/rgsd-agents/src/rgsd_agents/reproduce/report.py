"""``<out>/report.md`` of ``rgsd reproduce``: the paper's Section 5 from this folder's runs, beside its numbers.

Sections: how this folder's setup differs from the paper's, Table 1 (ERR and FID per category and method, mean
and std over seeds, beside the paper's ERR and its order of methods by FID; then the tracking metrics: ERR, MPJPE,
global MPJPE over successful rollouts, success and fall rates), the discovery figure
(top-view pelvis paths at the discovery kappa, one panel per method and category, beside the references),
FID per category under sampled latents, the kappa sweep on three motions, the downstream curves (success rate
and style FID against training steps, mean and spread over seeds, one panel per style), and every step's
status. The paper's numbers come from ``rgsd_eval.paper`` and are labelled as quoted; its FID values are not
printed (its feature is not ours), only its ranking of methods. Every number is also in
``report.json`` and, one value per row, ``report.csv``; figures are PNG under ``figures/``.

The report covers every method with finished steps in its folder, or in several folders (``merge_reports``: methods
run on two machines, one report), each method from the one folder that holds it.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shlex
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rgsd_agents.downstream.report import NEUTRAL_START, SEED_METRICS, start_label
from rgsd_agents.reproduce.downstream_setup import downstream_setup
from rgsd_agents.reproduce.plan import AGGREGATE, DOWNSTREAM, KINDS, Plan, Step, eval_id
from rgsd_envs.utils.files import LOCK_NAME, InputFileError, atomic_path, folder_lock, staged_folder
from rgsd_envs.utils.listing import first_few
from rgsd_envs.utils.provenance import provenance, provenance_text
from rgsd_eval.metrics import DEFINITIONS
from rgsd_eval.paper import (
    FID_NOT_COMPARABLE,
    PAPER_CATEGORIES,
    PAPER_DISCOVERY_KAPPA,
    PAPER_DISCOVERY_NOTE,
    PAPER_DOWNSTREAM_SETUP,
    PAPER_ERR_FRAME,
    PAPER_ROLLOUTS,
    PAPER_SETUP,
    PAPER_SOURCE,
    paper_err,
    paper_fid_ranks,
    rank,
)
from rgsd_eval.report import (
    ERR_FRAME_TEXT,
    IMITATION_COLUMNS,
    OUR_ERR_FRAME,
    TRACKING_COLUMNS,
    clip_latent_text,
    clips_text,
    differences_table,
    discovery_text,
    link_target,
    markdown_table,
    noise_text,
    samples_text,
    simulators_text,
)

REPORT_FORMAT = "rgsd-reproduce-report"
REPORT_VERSION = 2
CSV_COLUMNS = ("section", "method", "category", "kappa", "style", "clip", "metric", "stat", "value", "source")
MEASURED, QUOTED = "measured", "paper (quoted)"
FIGURES = "figures"
DOWNSTREAM_DECIMALS = 2
"""Decimals of the downstream table's success rates and style FIDs (``downstream.report.SEED_METRICS``)."""
KAPPA_DIM_NOTE = (
    "One κ is a wider neighbourhood on a larger sphere (κ 50: a mean angle near 30° at 16-D, near 79° at 256-D), so "
    "methods of different skill dims compare by latent angle, not by κ."
)
IMITATION_KEYS = (
    *(key for key, _, _ in IMITATION_COLUMNS),
    *(key for key, _, _ in TRACKING_COLUMNS if key != "err_cm"),
)
"""The imitation numbers summarised over seeds per method and category (Table 1 and its tracking metrics)."""
REPORT_SETUP = {**PAPER_SETUP, **PAPER_DOWNSTREAM_SETUP}
"""The items of a reproduce report's "How this run differs from the paper" box: the imitation's and the downstream
task's."""


def with_clip_latents_rule(method: str, metrics: dict[str, Any]) -> dict[str, Any]:
    """A run's metrics with ``clip_latents_rule`` the method's own (``SkillMethod.CLIP_LATENTS_RULE``) where its
    method.json predates the rule (evaluation recorded none)."""
    from rgsd_agents.methods import METHODS

    if metrics.get("clip_latents_rule") or method not in METHODS:
        return metrics
    return {**metrics, "clip_latents_rule": METHODS[method].CLIP_LATENTS_RULE}


def summarise(values: Iterable[float | None]) -> dict[str, Any]:
    """Mean, standard deviation over seeds (ddof 1; 0 for one seed) and count of the finite values (None kept in
    ``values``)."""
    vals = [None if v is None or not math.isfinite(v) else float(v) for v in values]
    x = np.array([v for v in vals if v is not None], dtype=np.float64)
    if x.size == 0:
        return {"mean": None, "std": None, "n": 0, "values": vals}
    std = float(x.std(ddof=1)) if x.size > 1 else 0.0
    return {"mean": float(x.mean()), "std": std, "n": int(x.size), "values": vals}


def _pm(s: dict[str, Any] | None, decimals: int) -> str:
    if not s or s["mean"] is None:
        return "n/a"
    return f"{s['mean']:.{decimals}f} ± {s['std']:.{decimals}f}" if s["n"] > 1 else f"{s['mean']:.{decimals}f}"


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else None


class ReportData:
    """The numbers of one or more reproduce folders, gathered from each method's evaluation and the seed
    aggregation of their downstream runs."""

    def __init__(
        self,
        parts: Sequence[tuple[Plan, set[str]]],
        out: Path,
        seeds_doc: dict[str, Any] | None,
        eval_dirs: dict[str, Path] | None = None,
    ):
        self.plan = parts[0][0]
        """The first folder's plan: the scale and motions every folder shares."""
        self.out = out
        self.seeds_doc = seeds_doc
        self.folder: dict[str, Plan] = {}
        """method -> the plan of the folder that holds it."""
        self.eval_dirs: dict[str, Path] = {}
        """method -> the folder of its evaluation the report reads and links (``eval_dirs``: copies in ``out``)."""
        self.metrics: dict[str, dict[str, Any]] = {}
        """method -> its evaluation's metrics.json."""
        for plan, done in parts:
            for m in plan.methods:
                self.folder.setdefault(m, plan)
                self.eval_dirs.setdefault(m, (eval_dirs or {}).get(m, plan.eval_dir(m)))
                doc = _read_json(self.eval_dirs[m] / "metrics.json") if eval_id(m) in done else None
                if doc is not None:
                    self.metrics[m] = doc
        self.methods = list(self.folder)
        self.runs: dict[str, dict[int, dict[str, Any]]] = {}
        """method -> seed -> the run's metrics in the evaluation."""
        for m, plan in self.folder.items():
            runs = self.metrics.get(m, {}).get("runs", {})
            self.runs[m] = {
                k: runs[plan.run_dir(m, k).name] for k in plan.seeds_of(m) if plan.run_dir(m, k).name in runs
            }
        first = next(iter(self.metrics.values()), {})
        self.categories: list[str] = list(first.get("categories", []))
        cfg = first.get("config", {})
        self.discovery_kappa: float | None = cfg.get("discovery_kappa")
        self.kappas: list[float] = [float(k) for k in cfg.get("kappas", [])]
        self.rollouts = int(cfg.get("trajectory_rollouts", 150))
        self.downstream_runs: list[Path] = [
            s.output for plan, done in parts for s in plan.steps if s.kind == DOWNSTREAM and s.id in done and s.output
        ]
        """The folders of every finished downstream training (their config.yaml states the task)."""

    def link(self, path: Path) -> str:
        """``path`` as the report links it (relative to the report's folder)."""
        return Path(os.path.relpath(path, self.out)).as_posix()

    def seeds(self) -> list[int]:
        """Every seed any method ran."""
        return sorted({k for m, plan in self.folder.items() for k in plan.seeds_of(m)})

    def imitation(self) -> dict[str, dict[str, dict[str, Any]]]:
        """method -> category (and "all") -> {err_cm, fid, the other tracking metrics: summary over seeds}."""
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for m, seeds in self.runs.items():
            if not seeds:
                continue
            out[m] = {
                c: {
                    key: summarise(r["imitation"]["categories"].get(c, {}).get(key) for r in seeds.values())
                    for key in IMITATION_KEYS
                }
                for c in self.categories
            }
            out[m]["all"] = {
                key: summarise(r["imitation"]["all"].get(key) for r in seeds.values()) for key in IMITATION_KEYS
            }
        return out

    def rollouts_per_clip(self) -> int | None:
        """Imitation rollouts per clip of the evaluation (every run has as many)."""
        for seeds in self.runs.values():
            for r in seeds.values():
                a = r["imitation"]["all"]
                return a["rollouts"] // max(a["clips"], 1)
        return None

    def setup(self) -> dict[str, str]:
        """This folder's side of the "How this run differs from the paper" box (keys of ``REPORT_SETUP``)."""
        first = {m: seeds[min(seeds)] for m, seeds in self.runs.items() if seeds}
        doc = next(iter(self.metrics.values()), {})  # every method's evaluation ran with the scale's settings
        cfg = doc.get("config", {})
        scale = self.plan.scale
        samples = {
            f"{m} seed {k}": r.get("training_samples") for m, seeds in self.runs.items() for k, r in seeds.items()
        }
        return {
            "simulator": simulators_text([r.get("simulator") for r in first.values()]) or "-",
            "clips": clips_text(self.plan.motions, doc.get("clips", []), self.categories),
            "training budget": samples_text(samples) or f"{scale.train.iterations} iterations per run (planned)",
            "rollouts per clip": f"{self.rollouts_per_clip()} per clip, "
            + noise_text(cfg.get("action_noise", 0.0), first),
            "clip latent": clip_latent_text(
                [(m, with_clip_latents_rule(m, r)) for m, seeds in self.runs.items() for r in seeds.values()]
            )
            or "-",
            "ERR frame": ERR_FRAME_TEXT,
            "FID feature": "ours: 86 numbers per 0.5 s window from 9 bodies' positions (`eval/<method>/report.md`)",
            "discovery motions": discovery_text(self.discovery_kappa),
            **downstream_setup(self.downstream_runs),
        }

    def skill_dim(self, method: str) -> int | None:
        """The latent dimension of the method's runs (its evaluation's ``skill_dim``, else its clip latents' length;
        None if not evaluated)."""
        for r in self.runs.get(method, {}).values():
            if r.get("skill_dim") is not None:
                return int(r["skill_dim"])
            latents = r.get("clip_latents") or {}
            if latents:
                return len(next(iter(latents.values())))
        return None

    def latent_angle(self, method: str, kappa: float) -> dict[str, Any]:
        """The mean angle (deg) between z ~ vMF(z_m, kappa) and z_m, summarised over the method's seeds."""
        key = f"{kappa:g}"
        seeds = self.runs.get(method, {}).values()
        return summarise((r["diversity"].get(key) or {}).get("mean", {}).get("latent_angle_deg") for r in seeds)

    def sampled_fid(self, kappa: float) -> dict[str, dict[str, dict[str, Any]]]:
        """method -> category -> FID summary over seeds under z ~ vMF(z_m, kappa)."""
        key = f"{kappa:g}"
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for m, seeds in self.runs.items():
            entries = [r["diversity"].get(key) for r in seeds.values()]
            if not seeds or any(e is None for e in entries):
                continue
            out[m] = {
                c: summarise(e.get("categories", {}).get(c, {}).get("fid") for e in entries) for c in self.categories
            }
        return out

    def sweep(self) -> tuple[list[str], dict[str, dict[str, dict[str, dict[str, Any]]]]]:
        """(sweep clips, method -> clip -> kappa -> {path_spread_m, root_spread_m, err_cm, fid, latent_angle_deg:
        summary})."""
        from rgsd_eval.plots import sweep_entries

        clips: list[str] = []
        out: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
        for m, seeds in self.runs.items():
            per_seed = [sweep_entries(r["diversity"]) for r in seeds.values()]
            if not per_seed or not per_seed[0][1]:
                continue
            clips = clips or per_seed[0][1]
            out[m] = {}
            for clip in clips:
                out[m][clip] = {}
                for i, d in enumerate(per_seed[0][0]):
                    kappa = f"{d['kappa']:g}"
                    rows = [ks[i]["clips"].get(clip, {}) for ks, _ in per_seed if i < len(ks)]
                    out[m][clip][kappa] = {
                        key: summarise(r.get(key) for r in rows)
                        for key in ("path_spread_m", "root_spread_m", "err_cm", "fid", "latent_angle_deg")
                    }
        return clips, out

    def downstream(self) -> dict[str, dict[str, dict[str, Any]]]:
        """style -> method (with its start, where not neutral) -> {metric: {step, mean, std, seeds} at the last
        common evaluation}."""
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for g in (self.seeds_doc or {}).get("groups", []):
            row: dict[str, Any] = {}
            for metric, curve in g["curves"].items():
                if curve["step"]:
                    row[metric] = {"step": curve["step"][-1], "mean": curve["mean"][-1], "std": curve["std"][-1],
                                   "seeds": len(g["seeds"])}  # fmt: skip
            out.setdefault(g["style"], {})[start_label(g["method"], g.get("init_skill", NEUTRAL_START))] = row
        return out


def imitation_section(data: ReportData, table: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """Table 1: ours (mean ± std over seeds) with the paper's row under each method: its ERR, and its FID only as a
    rank among the methods here; each row states its frame and rollouts per clip. Then the tracking metrics."""
    cats = data.categories
    ranks = paper_fid_ranks(list(table))
    ours = {c: rank({m: table[m][c]["fid"]["mean"] for m in ranks}) for c in cats} if len(ranks) > 1 else {}
    k = data.rollouts_per_clip()
    labels = [label for _, label, _ in IMITATION_COLUMNS]  # ERR first, FID last (the paper's row: ERR, FID rank)
    header = (
        ["Method", "Source", "Frame", "Rollouts per clip"]
        + [f"{c.capitalize()} {x}" for c in cats for x in labels]
        + ["All " + " / ".join([labels[0], *(x.removeprefix("ERR ") for x in labels[1:])])]
    )
    rows = []
    for m, per in table.items():
        n = max((per[c]["err_cm"]["n"] for c in cats), default=0)
        cells = [m, f"ours ({n} seed{'s' if n != 1 else ''})", OUR_ERR_FRAME, str(k)]
        for c in cats:
            r = ours.get(c, {}).get(m)
            cells += [_pm(per[c][key], d) for key, _, d in IMITATION_COLUMNS]  # n/a: an evaluation older than a field
            cells[-1] += "" if r is None else f", rank {r}"
        rows.append([*cells, " / ".join(_pm(per["all"][key], d) for key, _, d in IMITATION_COLUMNS)])
        err = paper_err(m)
        if err is not None:
            cells = ["", "paper (quoted)", PAPER_ERR_FRAME, str(PAPER_ROLLOUTS)]
            between = ["-"] * (len(labels) - 2)  # the paper gives no ERR to fall or to deviation
            for c in cats:
                r = ranks.get(m, {}).get(c)
                cells += [f"{err[c]:.1f}", *between, f"rank {r} of {len(ranks)}"] if c in err else ["-"] * len(labels)
            rows.append([*cells, ""])
    missing = [m for m in data.methods if m not in table]
    if not rows:
        return ["No evaluation: see the steps below.", ""]
    rows += [[m, "no evaluated run: see the steps below", *["-"] * (len(labels) * len(cats) + 3)] for m in missing]
    seeds = len(data.seeds())  # every seed any method ran (a --report-only plan has none of its own)
    tracking = [
        [m, c, *(_pm(per[c][key], dec) for key, _, dec in TRACKING_COLUMNS)]
        for m, per in table.items()
        for c in [*cats, "all"]
    ]
    return [
        f"ERR (cm, world frame) and our motion FID per category, each method's mean ± standard deviation over its "
        f"{seeds} seed{'s' if seeds != 1 else ''} (one evaluation per seed, `eval/<method>/metrics.json`), each under the "
        f"paper's row ({PAPER_SOURCE}): its ERR, and in the FID columns the rank of its FID among the "
        f"{len(ranks)} method{'s' if len(ranks) != 1 else ''} here (1 = lowest; ours: the rank of our mean FID). "
        f"{DEFINITIONS['err_until_fall_cm']} {DEFINITIONS['err_until_deviation_cm']} {FID_NOT_COMPARABLE} "
        "Lower is better.",
        "",
        *markdown_table(header, rows),
        "",
        "### Tracking metrics",
        "",
        "Per method and category (mean ± std over seeds): "
        + " ".join(DEFINITIONS[key] for key, _, _ in TRACKING_COLUMNS),
        "",
        *markdown_table(["Method", "Category", *(col for _, col, _ in TRACKING_COLUMNS)], tracking),
        "",
    ]


def sampled_section(data: ReportData, fid: dict[str, dict[str, dict[str, Any]]], kappa: float) -> list[str]:
    """FID per category under z ~ vMF(z_m, kappa); at the paper's discovery kappa, what the paper says of it."""
    cats = data.categories
    rows = [
        [m, _dim(data.skill_dim(m)), _pm(data.latent_angle(m, kappa), 1), *(_pm(per[c], 2) for c in cats)]
        for m, per in fid.items()
    ]
    if not rows:
        return []
    note = f" {PAPER_DISCOVERY_NOTE}" if kappa == PAPER_DISCOVERY_KAPPA else ""
    return [
        f"Our motion FID of each category's rollouts with z ~ vMF(z_m, {kappa:g}) against its references (mean ± std "
        f"over seeds); compare with the FID at z_m in Table 1: a method whose skills stay in style keeps it.{note} "
        f"{KAPPA_DIM_NOTE}",
        "",
        *markdown_table(["Method", "Skill dim", "Latent angle (deg)", *(f"{c.capitalize()} FID" for c in cats)], rows),
        "",
    ]


def _dim(dim: int | None) -> str:
    return "n/a" if dim is None else str(dim)


def plot_sweep(clips: list[str], sweep: dict[str, Any], path: Path) -> Path:
    """Pelvis path spread against kappa (log axis) per sweep clip: each method's mean over seeds ± one std."""
    from matplotlib.figure import Figure

    from rgsd_eval.plots import save_figure

    fig = Figure(figsize=(4.2 * max(1, len(clips)), 3.4), layout="constrained")
    for i, clip in enumerate(clips):
        ax = fig.add_subplot(1, max(1, len(clips)), i + 1)
        for m, per in sweep.items():
            ks = sorted(per[clip], key=float)
            x = np.array([float(k) for k in ks])
            mean = np.array([np.nan if per[clip][k]["path_spread_m"]["mean"] is None else per[clip][k]["path_spread_m"]["mean"] for k in ks])  # fmt: skip
            std = np.array([per[clip][k]["path_spread_m"]["std"] or 0.0 for k in ks])
            (line,) = ax.plot(x, mean, "o-", label=m)
            ax.fill_between(x, mean - std, mean + std, color=line.get_color(), alpha=0.2)
        ax.set_xscale("log")
        ax.set_xlabel("κ")
        ax.set_ylabel("pelvis path spread (m)")
        ax.set_title(clip, fontsize=10)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    fig.suptitle("diversity control: z ~ vMF(z_m, κ), spread over seeds shaded; it should fall as κ grows", fontsize=10)
    return save_figure(fig, path)


def sweep_section(data: ReportData, clips: list[str], sweep: dict[str, Any], figure: str | None) -> list[str]:
    """The kappa sweep: its figure, a table of spreads, and each method's top views at every kappa (seed 0)."""
    if not sweep:
        return []
    kappas = sorted({k for per in sweep.values() for k in per[clips[0]]}, key=float)
    rows = [
        [
            m,
            _dim(data.skill_dim(m)),
            clip,
            *(f"{_pm(per[clip][k]['path_spread_m'], 3)} ({_pm(per[clip][k]['latent_angle_deg'], 0)}°)" for k in kappas),
        ]
        for m, per in sweep.items()
        for clip in clips
    ]
    lines = [
        f"z ~ vMF(z_m, κ) for κ in {{{', '.join(kappas)}}} on {len(clips)} motions ({', '.join(clips)}): the "
        "pelvis path spread (RMS distance of the rollouts' pelvis positions from their mean, averaged over frames; "
        "m), mean ± std over seeds, and in brackets the mean angle between z and z_m. The paper shows this "
        f"experiment as top views only (no numbers to quote): larger κ, tighter skills. {KAPPA_DIM_NOTE}",
        "",
    ]
    if figure:
        lines += [f"![kappa sweep]({figure})", ""]
    lines += [*markdown_table(["Method", "Skill dim", "Clip", *(f"κ={k}" for k in kappas)], rows), ""]
    tops = []
    for m in sweep:
        seed = min(data.runs[m])
        plan = data.folder[m]
        png = data.eval_dirs[m] / plan.run_dir(m, seed).name / "kappa_sweep.png"
        if png.is_file():
            tops.append(f"- {m} (seed {seed}): [top views at every κ]({link_target(data.link(png))})")
    return lines + tops + ([""] if tops else [])


def downstream_section(data: ReportData, final: dict[str, dict[str, dict[str, Any]]], figure: str | None) -> list[str]:
    """The downstream curves and the last evaluation's numbers per style and method."""
    dropped = [f"- {style}: not run: {reason}." for style, reason in data.plan.dropped_styles.items()]
    return _downstream_lines(data, final, figure) + (dropped + [""] if dropped else [])


def _downstream_lines(data: ReportData, final: dict[str, dict[str, dict[str, Any]]], figure: str | None) -> list[str]:
    if not final:
        return ["No downstream aggregation: see the steps below.", ""]
    rows, dec = [], DOWNSTREAM_DECIMALS
    for style, per in final.items():
        for m, row in per.items():
            cells = [style, m]
            for metric, _ in SEED_METRICS:
                r = row.get(metric)
                cells.append(
                    "-" if r is None else
                    (f"{r['mean']:.{dec}f} ± {r['std']:.{dec}f}" if r["seeds"] > 1 else f"{r['mean']:.{dec}f}")
                )  # fmt: skip
            step = max((r["step"] for r in row.values()), default=0)
            seeds = max((r["seeds"] for r in row.values()), default=0)
            rows.append([*cells, str(step), str(seeds)])
    ds = data.plan.scale.downstream
    lines = [
        f"Goal reaching with a style (`rgsd downstream --config {ds.preset}`) over every method's and seed's frozen "
        "policy: success rate and style FID (sidestep, backward) against training steps, mean and ± one standard "
        "deviation over seeds, one column per style. The paper plots these curves (its Figure 5) without numbers "
        "to quote. These runs' arena, episodes, success test and budget are the goal-reaching rows of the box at "
        "the top, beside the paper's.",
        "",
    ]
    if ds.style_start:
        lines += [
            f"Every method's high level starts neutral (`init_skill: zero`, the protocol's start). "
            f"{', '.join(ds.style_start)} also ran from its style clip's latent (`init_skill: style`, rows and curves "
            '"style start"): the head start that start gives, measured beside the neutral one.',
            "",
        ]
    if figure:
        lines += [f"![downstream curves]({figure})", ""]
    lines += [
        "At the last evaluation all seeds share:",
        "",
        *markdown_table(["Style", "Method", "Success rate", "Style FID", "Training step", "Seeds"], rows),
        "",
    ]
    return lines + unequal_training(final)


def unequal_training(final: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """A paragraph where the methods' last common evaluations of one style came at different training steps: then
    the downstream table compares unequal training."""
    spans = {}
    for style, per in final.items():
        steps = {max((r["step"] for r in row.values()), default=0) for row in per.values() if row}
        if len(steps) > 1:
            spans[style] = f"{style} {min(steps)} to {max(steps)}"
    if not spans:
        return []
    return [
        "**This table compares unequal training**: the methods' runs of a style stopped at different training "
        f"steps (high-level samples: {', '.join(spans.values())}), so a method's row reflects how far its run got "
        "as well as its skills.",
        "",
    ]


def code_section(data: ReportData, report: dict[str, Any]) -> list[str]:
    """The code that wrote this report, each method's evaluation (its ``metrics.json``'s ``provenance``) and each
    run's policy (``policy_provenance``); "not recorded" where an older rgsd wrote it."""
    rows = [["this report", provenance_text(report)]]
    rows += [[f"`eval/{m}`", provenance_text(doc.get("provenance"))] for m, doc in data.metrics.items()]
    rows += [
        [f"{m} seed {k}'s policy", provenance_text(r.get("policy_provenance"))]
        for m, seeds in data.runs.items()
        for k, r in seeds.items()
    ]
    return [
        "A step that was kept or not rerun may come from older code than the report (`steps.json` has each step's "
        "end time); a resumed training's policy names its last session's code.",
        "",
        *markdown_table(["Written by", "Code"], rows),
        "",
    ]


def steps_section(plan: Plan, this_report: bool = True) -> list[str]:
    """Every step's status, time and error (``steps.json``); ``this_report``: the report step is this one."""
    from rgsd_agents.reproduce.steps import StepsFile, format_seconds

    state = StepsFile.load(plan.out)
    rows = []
    for s in plan.steps:
        st = state.steps.get(s.id)
        if st is None:
            rows.append([f"`{s.id}`", "pending", s.budget, "-", "", ""])
            continue
        status = "running (this report)" if s.kind == "report" and this_report else st.status
        if s.kept:
            status += " (an earlier command's)"
        rows.append(
            [f"`{s.id}`", status, s.budget, format_seconds(st.seconds) if st.seconds else "-", str(st.attempts),
             (st.error or "").replace("|", "\\|")]
        )  # fmt: skip
    return [*markdown_table(["Step", "Status", "Budget", "Time", "Attempts", "Error"], rows), ""]


def paper_imitation(methods: list[str]) -> dict[str, dict[str, dict[str, float | int]]]:
    """method -> paper category -> {err_cm: the paper's ERR, fid_rank: its FID's rank among ``methods``} for the
    methods the paper has (never its FID values: ``rgsd_eval.paper``)."""
    ranks = paper_fid_ranks(methods)
    return {
        m: {c: {"err_cm": e[c], "fid_rank": ranks[m][c]} for c in PAPER_CATEGORIES}
        for m in methods
        if (e := paper_err(m)) is not None
    }


def _csv_rows(doc: dict[str, Any]) -> Iterable[dict[str, Any]]:
    """One row per number of ``report.json`` (see CSV_COLUMNS)."""

    def stats(base: dict[str, Any], s: dict[str, Any]) -> Iterable[dict[str, Any]]:
        for stat in ("mean", "std", "n"):
            yield {**base, "stat": stat, "value": "" if s[stat] is None else s[stat], "source": MEASURED}
        for seed, v in zip(doc["seeds"], s["values"]):
            yield {**base, "stat": f"seed{seed}", "value": "" if v is None else v, "source": MEASURED}

    for m, per in doc["imitation"].items():
        for c, metrics in per.items():
            for key, s in metrics.items():
                yield from stats({"section": "imitation", "method": m, "category": c, "metric": key}, s)
    for m, per in doc["paper_imitation"].items():
        for c, values in per.items():
            base = {"section": "imitation", "method": m, "category": c, "stat": "value", "source": QUOTED}
            for metric, v in values.items():
                yield {**base, "metric": metric, "value": v}
    kappa = doc["discovery"]["kappa"]
    for m, per in doc["discovery"]["fid"].items():
        for c, s in per.items():
            yield from stats({"section": "discovery", "method": m, "category": c, "kappa": kappa, "metric": "fid"}, s)
    for m, per in doc["kappa_sweep"]["spread"].items():
        for clip, ks in per.items():
            for k, metrics in ks.items():
                for key, s in metrics.items():
                    yield from stats(
                        {"section": "kappa_sweep", "method": m, "clip": clip, "kappa": k, "metric": key}, s
                    )
    for style, per in doc["downstream"]["final"].items():
        for m, row in per.items():
            for metric, r in row.items():
                base = {"section": "downstream", "method": m, "style": style, "metric": metric, "source": MEASURED}
                for stat in ("mean", "std", "step", "seeds"):
                    yield {**base, "stat": stat, "value": r[stat]}


def write_report(
    parts: Sequence[tuple[Plan, set[str]]],
    out: Path,
    seeds_dir: Path | None = None,
    this_report: bool = True,
    eval_dirs: dict[str, Path] | None = None,
) -> dict[str, Path]:
    """Write report.md, report.json, report.csv and the figures into ``out`` from ``parts`` (each folder's plan and
    its done steps; the first folder's scale and motions stand for all), the seed aggregation in ``seeds_dir`` and
    the evaluations (``eval_dirs``: method -> its folder, else the plan's); returns their paths."""
    from rgsd_eval.plots import plot_discovery_grid
    from rgsd_eval.topviews import TOP_VIEWS, load_top_views

    figures_dir = out / FIGURES
    figures_dir.mkdir(parents=True, exist_ok=True)
    seeds_doc = _read_json(seeds_dir / "seeds.json") if seeds_dir is not None else None
    data = ReportData(parts, out, seeds_doc, eval_dirs)
    plan = data.plan
    figures: dict[str, str] = {}

    table = data.imitation()
    views = {
        m: [
            load_top_views(p)
            for k in seeds
            if (p := data.eval_dirs[m] / data.folder[m].run_dir(m, k).name / TOP_VIEWS).is_file()
        ]
        for m, seeds in data.runs.items()
    }
    views = {m: v for m, v in views.items() if v}
    if views:
        plot_discovery_grid(views, data.categories, figures_dir / "discovery.png", data.rollouts)
        figures["discovery"] = f"{FIGURES}/discovery.png"
    kappa = data.discovery_kappa
    sampled = data.sampled_fid(kappa) if kappa is not None else {}
    clips, sweep = data.sweep()
    if sweep:
        plot_sweep(clips, sweep, figures_dir / "kappa_sweep.png")
        figures["kappa_sweep"] = f"{FIGURES}/kappa_sweep.png"
    final = data.downstream()
    seeds_png = None if seeds_dir is None else seeds_dir / "seeds.png"
    if seeds_doc is not None and seeds_png is not None and seeds_png.is_file():
        with atomic_path(figures_dir / "downstream.png") as tmp:
            shutil.copyfile(seeds_png, tmp)
        figures["downstream"] = f"{FIGURES}/downstream.png"

    scale = plan.scale
    seeds = data.seeds()
    if len(parts) == 1:
        command = (
            f"`rgsd reproduce --motions {shlex.quote(plan.motions)} --scale {plan.scale_file.stem}` (scale file "
            f"`{plan.scale_file}`, copied to `scale.yaml`)"
        )
    else:
        froms = " ".join(f"--from {shlex.quote(data.link(p.out))}" for p, _ in parts)
        command = (
            f"`rgsd reproduce --report-only {froms}`: {len(parts)} folders run with `--motions {shlex.quote(plan.motions)}` and one "
            f"scale (`scale.yaml` in each)"
        )
    left_out = {m: why for p, _ in parts for m, why in p.dropped_methods.items() if m not in data.methods}
    setup = data.setup()
    lines = [
        "# Reproducing the RGSD paper's experiments",
        "",
        f"{command}: methods {', '.join(data.methods)}; {len(seeds)} seed(s); device {scale.device}.",
        "",
        *[f"- {m}: not run: {why}." for m, why in left_out.items()],
        *([""] if left_out else []),
        f"> {scale.description.strip()}" if scale.description.strip() else "",
        "",
        *differences_table(setup, paper_setup=REPORT_SETUP),
        "## Table 1: imitation",
        "",
        *imitation_section(data, table),
        "## Discovered skills",
        "",
    ]
    if "discovery" in figures:
        k = views[next(iter(views))][0].kappa
        lines += [
            f"Top-view pelvis paths with z ~ vMF(z_m, {k:g}) (red; every seed's rollouts pooled, up to the "
            "evaluation's `trajectory_rollouts` per clip) beside the references (black), one panel per method and "
            "category (every clip of the category in it). The paper's figure (150 paths per method) has no numbers.",
            "",
            f"![discovery]({figures['discovery']})",
            "",
        ]
    if kappa is not None:
        lines += [
            f"### FID per category under sampled latents (κ = {kappa:g})",
            "",
            *sampled_section(data, sampled, kappa),
        ]
    lines += ["## Diversity control: the κ sweep", "", *sweep_section(data, clips, sweep, figures.get("kappa_sweep"))]
    lines += [
        "## Downstream: goal reaching with a style",
        "",
        *downstream_section(data, final, figures.get("downstream")),
    ]
    code = provenance()
    lines += ["## Code", "", *code_section(data, code)]
    lines += [
        "## Steps",
        "",
        "Each step's state is in `steps.json`, its output in `logs/`; run the same command again to retry failed "
        "steps and resume interrupted ones.",
        "",
    ]
    if len(parts) == 1:
        lines += steps_section(plan, this_report)
    else:
        for p, _ in parts:
            lines += [f"### `{data.link(p.out)}`", "", *steps_section(p, this_report=False)]
    lines += [
        "Files: `eval/<method>/report.md` (each method's full evaluation: per clip, every κ, embeddings), "
        "`downstream/<style>/` (each downstream run's own report), `report.json` and `report.csv` (every number "
        "here).",
        "",
    ]

    doc = {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "motions": plan.motions,
        "scale": str(plan.scale_file),
        "folders": [data.link(p.out) for p, _ in parts],
        "methods": data.methods,
        "methods_left_out": left_out,
        "seeds": seeds,
        "categories": data.categories,
        "metric_definitions": DEFINITIONS,
        "setup": {"ours": setup, "paper": REPORT_SETUP},
        "imitation": table,
        "paper_imitation": paper_imitation(list(data.methods)),
        "paper_source": PAPER_SOURCE,
        "paper_fid_note": FID_NOT_COMPARABLE,
        "discovery": {
            "kappa": kappa,
            "fid": sampled,
            "paper_note": PAPER_DISCOVERY_NOTE if kappa == PAPER_DISCOVERY_KAPPA else None,
        },
        "kappa_sweep": {"clips": clips, "spread": sweep},
        "training_samples": {
            m: {str(k): r.get("training_samples") for k, r in seeds.items()} for m, seeds in data.runs.items()
        },
        "latents": {m: {str(k): r.get("latent") for k, r in seeds.items()} for m, seeds in data.runs.items()},
        "downstream": {"final": final, "curves": (data.seeds_doc or {}).get("groups", [])},
        "figures": figures,
        "provenance": {
            "report": code,
            "evaluations": {m: doc.get("provenance") for m, doc in data.metrics.items()},
            "policies": {
                m: {str(k): r.get("policy_provenance") for k, r in seeds.items()} for m, seeds in data.runs.items()
            },
        },
    }
    paths = {"report": out / "report.md", "json": out / "report.json", "csv": out / "report.csv"}
    with atomic_path(paths["json"]) as tmp:
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
    with atomic_path(paths["csv"]) as tmp, open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS, restval="")
        writer.writeheader()
        writer.writerows(_csv_rows(doc))
    with atomic_path(paths["report"]) as tmp:
        tmp.write_text("\n".join(lines))
    return {**paths, **{k: out / v for k, v in figures.items()}}


def report_step(plan: Plan, done: set[str]) -> None:
    """The plan's report step (``build_plan(report=...)``): the folder's report."""
    write_report([(plan, done)], plan.out, plan.seeds_dir if AGGREGATE in done else None)


def _step_of(step_id: str, out: Path, budget: str | None, output: str | None) -> Step:
    """A recorded step as far as a report reads it (kind, method, seed, style, folder) from its id."""
    parts = step_id.split("/")
    kind = parts[0] if parts[0] in KINDS else step_id
    seed = int(parts[-1][4:]) if parts[-1].startswith("seed") and parts[-1][4:].isdigit() else None
    method = style = None
    if kind == DOWNSTREAM and len(parts) == 4:
        style, method = parts[1], parts[2].split("-", 1)[0]
    elif kind != DOWNSTREAM and len(parts) >= 2:
        method = parts[1]
    return Step(
        step_id, kind, step_id, budget or "-", 0.0, method=method, seed=seed, style=style,
        output=None if output is None else out / output,
    )  # fmt: skip


def recorded_plan(folder: str | os.PathLike) -> tuple[Plan, set[str]]:
    """A reproduce folder as its ``steps.json`` and ``scale.yaml`` record it (no preset or clip read: the folder may
    come from another machine), and its done steps."""
    from rgsd_agents.reproduce.scale import load_scale
    from rgsd_agents.reproduce.steps import STEPS_FILE, StepsFile

    out = Path(folder).resolve()
    state = StepsFile.load(out)
    if not state.path.is_file():
        raise InputFileError(out / STEPS_FILE, "not found: not an `rgsd reproduce` folder")
    methods = state.methods()
    if not methods:
        raise InputFileError(state.path, "records no training: nothing to report")
    scale, _ = load_scale(out / "scale.yaml")
    motions = str(state.info.get("motions", "?"))
    steps = [_step_of(k, out, v.budget, v.output) for k, v in state.steps.items()]
    scale_file = Path(state.info.get("scale", out / "scale.yaml"))  # as the command named it (the report says so)
    plan = Plan(out, motions, scale, scale_file, list(methods), [], steps, method_seeds=methods)
    plan.dropped_styles = dict(state.info.get("dropped_styles", {}))
    plan.dropped_methods = dict(state.info.get("dropped_methods", {}))
    return plan, state.done()


def merge_reports(folders: Sequence[str | os.PathLike], out: str | os.PathLike) -> dict[str, Path]:
    """One report in ``out`` over the methods of several reproduce folders (each method from the one folder that
    holds it): their evaluations, copied into ``out/eval/<method>`` so that the folder holds every file its report
    links, and the seed aggregation of all their downstream runs redone in ``out``. The folders must share one scale
    and one clip set, so the report compares methods measured alike."""
    from rgsd_agents.downstream.report import aggregate_seeds

    out = Path(out).resolve()
    parts = [recorded_plan(f) for f in folders]
    if len({p.out for p, _ in parts}) < len(parts):
        raise ValueError("--from: the same folder twice")
    if out in {p.out for p, _ in parts}:
        raise ValueError(f"--out {out}: give a new folder for the combined report, not one of the --from folders")
    check_merge_out(out)
    first, _ = parts[0]
    owner: dict[str, Path] = {}
    for plan, _ in parts:
        for m in plan.methods:
            if m in owner:
                raise ValueError(
                    f"method {m!r} is in both {owner[m]} and {plan.out}: a report takes each method from one folder"
                )
            owner[m] = plan.out
        if yaml_data(plan.out / "scale.yaml") != yaml_data(first.out / "scale.yaml"):
            raise ValueError(
                f"{plan.out} ran another scale than {first.out} (their scale.yaml differ): a report compares methods "
                "run alike"
            )
    clips = {p.out: c for p, done in parts if (c := _clips(p, done)) is not None}
    if len({json.dumps(c) for c in clips.values()}) > 1:
        a, b = list(clips)[:2]
        raise ValueError(f"{a} and {b} were evaluated on different clips: a report compares methods measured alike")
    with folder_lock(out, "rgsd reproduce --report-only"):
        runs = [
            str(s.output) for p, done in parts for s in p.steps if s.kind == DOWNSTREAM and s.id in done and s.output
        ]
        seeds_dir = None
        if runs:
            seeds_dir = out / "downstream" / "seeds"
            aggregate_seeds(runs, seeds_dir)
        eval_dirs = {}
        for plan, done in parts:
            for m in plan.methods:
                if eval_id(m) in done and plan.eval_dir(m).is_dir():
                    eval_dirs[m] = out / "eval" / m  # where a reproduce folder keeps it (Plan.eval_dir)
                    with staged_folder(eval_dirs[m]) as stage:  # an earlier merge's copy replaced whole
                        shutil.copytree(plan.eval_dir(m), stage, dirs_exist_ok=True)
        return write_report(parts, out, seeds_dir, this_report=False, eval_dirs=eval_dirs)


MERGE_OUTPUTS = frozenset({"report.md", "report.json", "report.csv", FIGURES, "eval", "downstream", LOCK_NAME})
"""What ``merge_reports`` writes at the top of its folder (its evaluations' copies in ``eval/``, the seed aggregation
in ``downstream/seeds``)."""


def check_merge_out(out: Path) -> None:
    """A ValueError naming ``--out`` unless it is new, empty or an earlier combined report (``MERGE_OUTPUTS`` only):
    a merge writes over the report and the ``eval/<method>`` folders there, which in another reproduce folder
    (``steps.json``) or any other report are not its own."""
    from rgsd_agents.reproduce.steps import STEPS_FILE

    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: exists and is not a folder; give a new folder for the combined report")
    entries = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    if STEPS_FILE in entries:
        raise ValueError(
            f"--out {out}: holds an rgsd reproduce folder ({STEPS_FILE}), whose report and evaluations the combined "
            "report would write over; give a new folder"
        )
    foreign = [name for name in entries if name not in MERGE_OUTPUTS]
    if foreign:
        raise ValueError(
            f"--out {out}: holds {first_few(foreign, 3)}, which a combined report does not write; give a new or empty "
            "folder (one holding only an earlier combined report is written over)"
        )


def yaml_data(path: Path) -> Any:
    """The data of a YAML file (comments and layout aside)."""
    import yaml

    return yaml.safe_load(path.read_text())


def _clips(plan: Plan, done: set[str]) -> list[Any] | None:
    """The clips (name, category, frames) of the folder's first finished evaluation."""
    for m in plan.methods:
        doc = _read_json(plan.eval_dir(m) / "metrics.json") if eval_id(m) in done else None
        if doc is not None:
            return doc.get("clips")
    return None
