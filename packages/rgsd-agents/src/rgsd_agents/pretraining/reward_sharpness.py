"""How sharply an encoder's imitation reward falls off the reference.

For every clip m, the mean of cos(mu(s), z_m) (and of the reward C + kappa cos)
over its reference frames, for these states (``rgsd_agents.pretraining.negatives``):

==============  ================================================================
column          states scored against z_m
==============  ================================================================
reference       the reference stacks s_t of clip m
sim_twin        the simulated twins of its frames: a PD-driven body tracking
                the reference open loop for 4 control steps
                (``rgsd_agents.pretraining.sim_twins``), what a policy's states near the
                reference look like
held_still      each frame's pose held still (5 equal frames, zero velocities,
                phase advancing)
start_held      the clip's first pose held still, phase advancing
phase_shift     the reference stacks with the phase moved by +0.5
reversed        the reference stacks in reverse time order
slowed, ...     every other variant of ``rgsd_agents.pretraining.negatives.VARIANTS``
                (``legs_held``: legs frozen to a sliding pelvis; ``sinking``:
                the pelvis 5-25 cm lower, as in a body sitting down)
other_clips     the reference stacks of every other clip
==============  ================================================================

z_m is the normalised mean embedding of clip m's reference states (as
pretraining stores it). A reward that only separates clips shows ``held_still``
and ``reversed`` close to ``reference``: standing still then earns most of the
walking reward. A ``sim_twin`` far below ``reference`` is a reward that does not
pay a policy for getting close (the demo preset's encoder paid the twins of the
backward walk 0.38, its references 0.97).
``rgsd pretrain`` prints this table and writes it to
``reward_sharpness.json`` beside ``encoder.pt``; ``rgsd train`` logs it to
TensorBoard (``reward_sharpness/``) when a run starts.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from rgsd_agents.pretraining.negatives import VARIANTS, frame_features_of, variant_stacks
from rgsd_agents.pretraining.sim_twins import simulated_twins
from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.observations import reference_encoder_inputs
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.rewards.encoders import EncoderLike, embed
from rgsd_envs.utils.files import atomic_path
from rgsd_envs.utils.listing import first_few

Tensor = torch.Tensor

SHARPNESS_FILE = "reward_sharpness.json"
COLUMNS = ("reference", "sim_twin", *VARIANTS, "other_clips")
"""Columns of the report, in order."""


def other_clips_cos(embeddings: Tensor, clip_of_frame: Tensor, z: Tensor) -> Tensor:
    """(M,) for each clip m, the mean cos(mu(s), z_m) over the reference states s of every other clip (nan with one
    clip); from per-clip sums of the embeddings, (M, d), never a frames x clips matrix."""
    m = z.shape[0]
    if m < 2:
        return torch.full((m,), math.nan, dtype=z.dtype)
    sums = torch.zeros(m, embeddings.shape[1], dtype=torch.float64).index_add_(0, clip_of_frame, embeddings.double())
    others = sums.sum(0) - sums  # (M, d): the summed embeddings of every clip but m
    counts = torch.bincount(clip_of_frame, minlength=m)
    return ((others * z.double()).sum(-1) / (counts.sum() - counts).clamp_min(1)).to(z.dtype)


@torch.no_grad()
def reward_sharpness(
    encoder: EncoderLike,
    lib: MotionLib,
    kappa: float,
    constant: float | None = None,
    inputs: Tensor | None = None,
    max_frames: int = 20000,
    env_cfg: EnvConfig | None = None,
    max_twins: int = 2000,
) -> dict[str, Any]:
    """Per clip mean cos(mu(s), z_m) of each column of ``COLUMNS``; JSON-ready (reward = C + kappa cos).

    ``inputs`` are the reference encoder inputs (computed if None); at most
    ``max_frames`` evenly spaced frames are scored per variant, and up to ``max_twins`` simulated twins
    (``rgsd_agents.pretraining.sim_twins``, 4 steps on ``env_cfg``'s simulator, whatever the encoder was trained on).
    """
    ref = (inputs if inputs is not None else reference_encoder_inputs(lib)).cpu()
    cof = lib.clip_of_frame.cpu()
    m = lib.num_clips
    e_ref = embed(encoder, ref).cpu()
    z = F.normalize(torch.zeros(m, e_ref.shape[1], dtype=e_ref.dtype).index_add_(0, cof, e_ref), dim=-1)

    def per_clip(cos: Tensor, clips: Tensor) -> Tensor:
        total = torch.zeros(m, dtype=cos.dtype).index_add_(0, clips, cos)
        return total / torch.bincount(clips, minlength=m).to(cos.dtype)  # nan where a clip has no frame

    table = {"reference": per_clip((e_ref * z[cof]).sum(-1), cof), "other_clips": other_clips_cos(e_ref, cof, z)}

    stride = max(1, math.ceil(lib.total_frames / max_frames))
    frames = torch.arange(0, lib.total_frames, stride)
    clips = cof[frames]
    stacks = variant_stacks(frame_features_of(ref), frames, lib.starts.cpu()[clips], VARIANTS)
    e_var = embed(encoder, stacks.flatten(0, 1)).cpu().reshape(len(frames), len(VARIANTS), -1)
    cos_var = (e_var * z[clips].unsqueeze(1)).sum(-1)
    for k, name in enumerate(VARIANTS):
        table[name] = per_clip(cos_var[:, k], clips)

    twin_inputs, twin_frames, _ = simulated_twins(lib, env_cfg, steps=4, max_twins=max_twins)
    twin_clips = cof[twin_frames.cpu()]
    e_twin = embed(encoder, twin_inputs).cpu()
    table["sim_twin"] = per_clip((e_twin * z[twin_clips]).sum(-1), twin_clips)

    c = float(kappa if constant is None else constant)
    clips_out = {name: {col: _number(table[col][i]) for col in COLUMNS} for i, name in enumerate(lib.names)}
    mean = {col: _number(torch.nanmean(table[col])) for col in COLUMNS}
    return {
        "kappa": float(kappa),
        "constant": c,
        "reward": "C + kappa * cos(mu(s), z_m)",
        "columns": list(COLUMNS),
        "frames_scored": len(frames),
        "cos": clips_out,
        "mean_cos": mean,
        "mean_reward": {col: None if v is None else c + float(kappa) * v for col, v in mean.items()},
    }


def _number(value: Tensor) -> float | None:
    """A cell of the report: None where no state was scored (strict JSON has no NaN: it is written as null)."""
    v = float(value)
    return v if math.isfinite(v) else None


TABLE_CLIPS = 30
"""``format_table`` prints a row per clip up to this many clips, a row per category past it."""
NOT_SCORED = "-"
"""A table cell where none of a clip's states was scored in that column (a nan in the report)."""


def format_table(report: dict[str, Any], categories: Sequence[str] | None = None) -> str:
    """The report as a plain-text table of mean cosines per clip, with the mean and its reward; past
    ``TABLE_CLIPS`` clips one row per category of ``categories`` (one per clip, in the report's order; the first
    ``TABLE_CLIPS`` clips without them), the full table being in ``SHARPNESS_FILE``. A column where no state of a
    clip was scored reads ``NOT_SCORED``, with a note saying why."""
    cols = report["columns"]
    clips = report["cos"]
    grouped = len(clips) > TABLE_CLIPS and categories is not None
    if grouped:
        rows, label = _category_rows(report, categories), "category (clips)"
    else:
        rows, label = [(n, [row[c] for c in cols]) for n, row in list(clips.items())[:TABLE_CLIPS]], "clip"
    width = max([len("mean reward"), len(label)] + [len(n) for n, _ in rows])
    per = "per category" if grouped else "per clip"
    lines = [
        f"reward sharpness: mean cos(mu(s), z_m) {per} (reward = {report['constant']:g} + {report['kappa']:g} cos)",
        f"{label:<{width}}  " + "  ".join(f"{c:>11}" for c in cols),
    ]
    lines += [f"{name:<{width}}  " + "  ".join(_cell(v, 3) for v in values) for name, values in rows]
    if len(clips) > len(rows) and not grouped:
        lines.append(f"... and {len(clips) - len(rows)} more clips")
    lines.append(f"{'mean':<{width}}  " + "  ".join(_cell(report["mean_cos"][c], 3) for c in cols))
    lines.append(f"{'mean reward':<{width}}  " + "  ".join(_cell(report["mean_reward"][c], 2) for c in cols))
    lines += _notes(report, len(clips) > TABLE_CLIPS, grouped)
    return "\n".join(lines)


def _cell(value: float | None, decimals: int) -> str:
    ok = value is not None and math.isfinite(value)
    return f"{value:>11.{decimals}f}" if ok else f"{NOT_SCORED:>11}"


def _category_rows(report: dict[str, Any], categories: Sequence[str]) -> list[tuple[str, list[float]]]:
    """Per category (in order of first appearance), each column's mean over its clips with a number."""
    cols = report["columns"]
    members: dict[str, list[dict[str, float]]] = {}
    for row, category in zip(report["cos"].values(), categories, strict=True):
        members.setdefault(category, []).append(row)
    out = []
    for category, rows in members.items():
        values = [[r[c] for r in rows if r[c] is not None and math.isfinite(r[c])] for c in cols]
        out.append((f"{category} ({len(rows)})", [sum(v) / len(v) if v else math.nan for v in values]))
    return out


def _columns_text(columns: list[str]) -> str:
    return ", ".join(columns) if len(columns) <= 3 else f"{len(columns)} columns"


def _notes(report: dict[str, Any], summarised: bool, grouped: bool) -> list[str]:
    """Why cells read ``NOT_SCORED`` (naming the clips, or counting them past a few) and where the full table is."""
    cols = report["columns"]
    missing = {
        name: [c for c in cols if row[c] is None or not math.isfinite(row[c])] for name, row in report["cos"].items()
    }
    missing = {name: c for name, c in missing.items() if c}
    lines = []
    if summarised:
        lines.append(f"every clip's row: {SHARPNESS_FILE}")
    if missing:
        which = first_few([f"{n} ({_columns_text(c)})" for n, c in missing.items()], 5)
        mark = "left out of the category means" if grouped else f"'{NOT_SCORED}'"
        lines.append(
            f"{mark}: {len(missing)} clip(s) with no state scored in some columns: {which}. The report scores evenly "
            "spaced frames of all clips together; a clip shorter than their spacing gets none (sim_twin also needs a "
            "clip of 3 or more frames, other_clips another clip)"
        )
    return lines


def write_report(report: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write the report as strict JSON (atomically): a cell where no state was scored is null, never NaN."""
    with atomic_path(path) as tmp:
        Path(tmp).write_text(json.dumps(_strict(report), indent=2, allow_nan=False) + "\n")
    return Path(path)


def _strict(value: Any) -> Any:
    """``value`` with every non-finite float as None (a report built by hand, or by an older version, may hold NaN)."""
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def tensorboard_scalars(report: dict[str, Any], max_clips: int = 32) -> dict[str, float]:
    """TensorBoard tags of a report: the mean cos of each column, and per clip for up to ``max_clips`` clips; a cell
    with no state scored (null) has no tag."""
    out = {f"reward_sharpness/mean_{c}_cos": v for c, v in report["mean_cos"].items()}
    if len(report["cos"]) <= max_clips:
        for name, row in report["cos"].items():
            out.update({f"reward_sharpness_clips/{name}_{c}_cos": v for c, v in row.items()})
    return {k: float(v) for k, v in out.items() if v is not None and math.isfinite(v)}
