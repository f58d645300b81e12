"""The report folder of ``rgsd eval``: written beside ``--out``, then put in its place whole (``staged_folder``).

An evaluation writes into a hidden folder beside ``--out`` and, once every file is written, renames it onto
``--out``. An earlier report there is replaced whole, so no run subfolder of it stays behind (its
``clip_latents.json`` would read as this report's for ``rgsd play --latents`` and ``rgsd downstream``), and an
evaluation that fails or is interrupted leaves ``--out`` as it was: the earlier report intact, or no folder where
there was none. A folder holding anything an evaluation did not write is refused before any rollout: replacing it
would delete those files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from rgsd_envs.utils.files import LOCK_NAME, InputFileError, file_on_path
from rgsd_eval.report import REPORT_FORMAT

REPORT_FILES = frozenset(
    {"report.md", "metrics.json", "metrics.csv", "eval_config.yaml", "spread.png", "comparison.png", LOCK_NAME}
)
"""The files an evaluation writes at the top of its folder (beside one subfolder per run; ``pipeline``), and the
lock ``rgsd reproduce`` leaves in a folder it cleared."""


def check_output(out: str | os.PathLike, runs: Sequence[str | os.PathLike] = ()) -> list[str]:
    """The run labels of the earlier report in ``out`` that the evaluation will replace ([] for a new or empty
    folder); an InputFileError naming ``--out`` when it is a file, holds files an evaluation did not write, or holds
    one of the ``runs`` evaluated."""
    out = Path(out)
    if (blocker := file_on_path(out)) is not None:
        reason = "is not a folder" if blocker == out else f"lies under {blocker}, a file"
        raise InputFileError(out, f"output path exists and {reason}; give a folder for the report with --out")
    if not out.exists():
        return []
    inside = [str(r) for r in runs if Path(r).resolve().is_relative_to(out.resolve())]
    if inside:
        raise InputFileError(out, f"--out holds the run folder {inside[0]} (the report replaces it); choose another")
    entries = sorted(p.name for p in out.iterdir())
    labels = _report_runs(out)
    foreign = [name for name in entries if name not in REPORT_FILES and name not in labels]
    if foreign:
        what = "an earlier report and files it did not write" if labels else "files that are not an rgsd eval report"
        raise InputFileError(
            out,
            f"--out holds {what} ({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}); choose a new or "
            "empty folder (a folder holding only an earlier report is replaced whole)",
        )
    return labels


def _report_runs(out: Path) -> list[str]:
    """The run labels of the report in ``out`` ([] when its metrics.json is missing or not a report's)."""
    try:
        doc = json.loads((out / "metrics.json").read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(doc, dict) or doc.get("format") != REPORT_FORMAT or not isinstance(doc.get("runs"), dict):
        return []
    return [str(label) for label in doc["runs"]]
