"""Batch import of AMASS files into rgsd clips, with progress and atomic writes."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
from tqdm import tqdm

from rgsd_envs.motion.amass import (
    DEFAULT_CATEGORY,
    ShapeFileError,
    amass_to_clip_and_fit,
    clip_name_from_path,
    find_amass_files,
    is_rgsd_clip,
    read_amass,
)
from rgsd_envs.motion.clip_names import Job, clip_names, distinct_sources, inside, same_file_key
from rgsd_envs.motion.fid_window import SHORT_EXAMPLES, short_clip_warning, short_clips_summary
from rgsd_envs.motion.import_checks import import_warnings
from rgsd_envs.motion.kinematics import KinematicModel
from rgsd_envs.motion.paper_set import PAPER_CLIPS, find_paper_clips
from rgsd_envs.utils.files import InputFileError, atomic_path, output_folder

log = logging.getLogger(__name__)

REPORT_NAME = "import_report.json"
"""Written beside the clips by every import."""
RESIDUAL_WARN_DEG = 10.0
"""A joint residual larger than this (degrees) is worth a look: a joint range or the source is off."""
RENAME_EXAMPLES = 3
"""Renamed clips ``rgsd-motions import`` names one by one; past it, it counts them and shows this many."""


@dataclass
class FileResult:
    """What became of one input file."""

    source: str
    status: str
    """``kept``, ``skipped`` (a body-shape file, not a motion) or ``rejected`` (unreadable)."""
    reason: str = ""
    clip: str | None = None
    """The written clip file (kept files only)."""
    name: str | None = None
    category: str | None = None
    source_fps: float | None = None
    frames_in: int | None = None
    seconds_in: float | None = None
    frames_out: int | None = None
    seconds_out: float | None = None
    cycles: int = 1
    """How many times the file's motion was repeated as a cycle (``--cycles``)."""
    max_residual_deg: float | None = None
    """Largest residual of any joint over the clip, degrees: the geodesic angle between the rotation the
    joint's in-range hinge angles make and the source rotation (0 where the ranges allow it exactly)."""
    max_residual_joint: str | None = None
    residual_deg: dict[str, dict[str, float]] | None = None
    """Per joint, ``{"max": deg, "mean": deg}`` of that residual over the clip's frames."""
    renamed_from: str | None = None
    """The clip name the file asked for (from its file name, or the paper set's) where another source file has it,
    in this import or in the output folder, or had it when an earlier import named this file's clip (which keeps
    that name); the clip is named by its parent folder(s) instead and ``reason`` names the other file(s)."""
    warnings: list[str] = field(default_factory=list)
    """What to look at in the clip (``import_checks``): a file that looks Y-up, a turn ``--cycles`` undoes, hinge
    angles that jump in one frame."""
    discontinuities: dict[str, list[int]] = field(default_factory=dict)
    """Per joint, the clip frames (30 Hz) where one of its hinge angles changed by more than
    ``import_checks.JUMP_WARN_DEG`` since the frame before."""


@dataclass
class ImportReport:
    """Per input file: kept, skipped or rejected, and why; saved as ``import_report.json``."""

    files: list[FileResult] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    """Paper-set clips that were not found under the AMASS root."""
    output_clips: list[str] = field(default_factory=list)
    """Inputs that are rgsd clips inside the output folder (an earlier import's own output): skipped, and left
    out of the saved report."""

    @classmethod
    def load(cls, path: str | os.PathLike) -> ImportReport:
        """Read a saved ``import_report.json``; an unreadable one is an InputFileError naming it."""
        known = {f.name for f in fields(FileResult)}
        try:
            data = json.loads(Path(path).read_text())
            files = [FileResult(**{k: v for k, v in entry.items() if k in known}) for entry in data["files"]]
            return cls(files, [str(m) for m in data.get("missing", [])])
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as err:
            raise InputFileError(
                path, f"not a readable import report ({err}); move it out of the folder to start a new one"
            ) from None

    @property
    def written(self) -> list[Path]:
        """The clip files written."""
        return [Path(f.clip) for f in self.files if f.status == "kept" and f.clip]

    @property
    def failed(self) -> dict[Path, str]:
        """Rejected input files and why."""
        return {Path(f.source): f.reason for f in self.files if f.status == "rejected"}

    def counts(self) -> dict[str, int]:
        """How many files were kept, skipped (shape files) and rejected."""
        return {s: sum(f.status == s for f in self.files) for s in ("kept", "skipped", "rejected")}

    def summary(self) -> str:
        """One line: ``kept N, skipped N shape file(s), rejected N; worst joint residual D deg (JOINT in CLIP)``
        (``skipped N shape file(s) and M clip(s) already in the output folder`` where inputs held its clips)."""
        c = self.counts()
        skipped = f"skipped {c['skipped']} shape file(s)"
        if self.output_clips:
            skipped += f" and {len(self.output_clips)} clip(s) already in the output folder"
        line = f"kept {c['kept']}, {skipped}, rejected {c['rejected']}"
        kept = [f for f in self.files if f.status == "kept"]
        if kept:
            worst = max(kept, key=lambda f: f.max_residual_deg or 0.0)
            line += (
                f"; worst joint residual {worst.max_residual_deg:.2f} deg ({worst.max_residual_joint} in {worst.name})"
            )
        return line

    def residual_warnings(self, threshold_deg: float = RESIDUAL_WARN_DEG) -> list[str]:
        """One line per kept clip whose largest joint residual exceeds ``threshold_deg``."""
        return [
            f"warning: {f.name}: {f.max_residual_joint} residual {f.max_residual_deg:.1f} deg (> {threshold_deg:g}): "
            "no hinge angles within its joint ranges reproduce the captured rotation"
            for f in self.files
            if f.status == "kept" and (f.max_residual_deg or 0.0) > threshold_deg
        ]

    def short_warnings(self) -> list[str]:
        """One line per kept clip too short for ``rgsd eval``'s motion FID (``fid_window.short_clip_warning``), with
        the frames and rate it was read at; past ``SHORT_EXAMPLES`` such clips one line that counts them, names the
        first few and points to the report."""
        lines, names = [], []
        for f in self.files:
            if f.status == "kept" and f.frames_out is not None:
                line = short_clip_warning(f.name or "", f.frames_out)
                if line:
                    names.append(f.name or "")
                    lines.append(f"{line} (read from {f.frames_in} frames at {f.source_fps:g} Hz in {f.source})")
        if len(lines) <= SHORT_EXAMPLES:
            return lines
        return [short_clips_summary(names, f"each clip's frames are in {REPORT_NAME} (frames_out, frames_in)")]

    def rename_notes(self, examples: int = RENAME_EXAMPLES) -> list[str]:
        """The kept clips named by their folder(s) because another source file has the name they asked for: a line
        each (with the other files) up to ``examples`` of them; past it one line that counts them and ``examples``
        indented ``SOURCE -> NAME`` lines, the other files being in the report."""
        renamed = [f for f in self.files if f.status == "kept" and f.renamed_from]
        if len(renamed) <= examples:
            return [f"note: {f.source} imported as {f.name}: {f.reason}" for f in renamed]
        head = (
            f"note: {len(renamed)} clips renamed after their folders because their file names repeat; each new name "
            f"and the other files of its old one are in {REPORT_NAME} (renamed_from, reason), e.g.:"
        )
        return [head] + [f"  {f.source} -> {f.name}" for f in renamed[:examples]]

    def clip_sources(self, out: Path) -> dict[str, str]:
        """Clip name -> source file of the kept entries whose clip file is in ``out``."""
        return {
            Path(f.clip).stem: f.source
            for f in self.files
            if f.status == "kept" and f.clip and (out / Path(f.clip).name).is_file()
        }

    def names_given(self, out: Path) -> dict[tuple[str, str], str]:
        """(source's ``same_file_key``, clip name it asked for) -> the clip name it was given, of the kept entries
        whose clip file is in ``out``."""
        return {
            (same_file_key(f.source), f.renamed_from or Path(f.clip).stem): Path(f.clip).stem
            for f in self.files
            if f.status == "kept" and f.clip and (out / Path(f.clip).name).is_file()
        }

    def merged(self, earlier: ImportReport, out: Path, keep_missing: bool) -> ImportReport:
        """This import's entries over ``earlier``'s (the report already in ``out``).

        An earlier kept entry stays while its clip is in ``out`` and this import did not write that clip again; an
        earlier skipped or rejected entry stays unless this import read its source again. ``keep_missing``: this
        was not a paper-set import, so the earlier list of paper clips not found stays.
        """
        rewritten = {Path(f.clip).name for f in self.files if f.status == "kept" and f.clip}
        reread = {same_file_key(f.source) for f in self.files}
        on_disk = earlier.clip_sources(out)

        def stays(f: FileResult) -> bool:
            if same_file_key(f.source) in reread:  # this import's entry for the file replaces it
                return False
            clip = Path(f.clip or "")
            return f.status != "kept" or (on_disk.get(clip.stem) == f.source and clip.name not in rewritten)

        files = [f for f in earlier.files if stays(f)] + self.files
        return ImportReport(files, earlier.missing if keep_missing else list(self.missing))

    def to_dict(self) -> dict:
        """The report as JSON-ready data."""
        return {**self.counts(), "files": [asdict(f) for f in self.files], "missing": list(self.missing)}

    def save(self, path: str | os.PathLike) -> Path:
        """Write the report as JSON, atomically; returns the path."""
        with atomic_path(path) as tmp:
            tmp.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        return Path(path)


def import_motions(
    jobs: Iterable[Job],
    out_dir: str | os.PathLike,
    offsets: np.ndarray | None = None,
    pelvis_rest: np.ndarray | None = None,
    progress: bool = True,
    keep_going: bool = True,
    missing: Iterable[str] | None = None,
    cycles: int = 1,
) -> ImportReport:
    """Convert (source file, clip name, category) jobs into clips under out_dir; returns this import's report.

    Each clip is written atomically, so an interrupted import leaves only whole
    files. Body-shape files are skipped, and so are rgsd clips inside out_dir (an
    earlier import's output found again while walking the inputs). With ``keep_going``, unreadable files are
    reported and skipped; otherwise the first error is raised. No clip of another source file is overwritten:
    sources asking for a name that another one has are named by their folders (``clip_names``). The report is
    merged into ``out_dir/import_report.json`` (``ImportReport.merged``), with ``missing`` (paper-set clips not
    found; None: not a paper-set import) listed in it. ``cycles`` > 1 repeats each file's motion as one cycle of a
    looping motion (DeepMimic's ``Loop: wrap``; ``rgsd_envs.motion.cycles``).
    """
    out = Path(out_dir)
    output_folder(out)
    report_path = out / REPORT_NAME
    earlier = ImportReport.load(report_path) if report_path.exists() else ImportReport()
    report = ImportReport(missing=list(missing or ()))
    todo: list[Job] = []
    # sources as absolute paths: the report and the clips name their file wherever the next import runs from
    for job in distinct_sources((Path(os.path.abspath(src)), name, category) for src, name, category in jobs):
        if inside(job[0], out) and is_rgsd_clip(job[0]):
            report.output_clips.append(str(job[0]))
        else:
            todo.append(job)
    names = clip_names(todo, out, earlier.clip_sources(out), earlier.names_given(out))
    km = KinematicModel(offsets)
    for (src, asked, category), (name, others) in tqdm(
        list(zip(todo, names)), desc="import", unit="clip", disable=not progress
    ):
        try:
            motion = read_amass(src)
            clip, fit = amass_to_clip_and_fit(motion, name, category, offsets, pelvis_rest, km, cycles)
        except ShapeFileError as err:
            report.files.append(FileResult(str(src), "skipped", err.without_path(src)))
            continue
        except InputFileError as err:
            if not keep_going:
                raise
            report.files.append(FileResult(str(src), "rejected", err.without_path(src)))  # the report names src
            continue
        n_in = motion.poses.shape[0]
        warnings, jumps = import_warnings(motion, clip, cycles)
        for line in warnings:
            log.warning("clip %s (%s): %s", name, src, line)
        report.files.append(
            FileResult(
                source=str(src),
                status="kept",
                reason=_rename_reason(asked, name, others),
                clip=str(clip.save(out / f"{name}.npz")),
                name=name,
                category=category,
                source_fps=motion.fps,
                frames_in=n_in,
                seconds_in=(n_in - 1) / motion.fps,
                frames_out=clip.num_frames,
                seconds_out=clip.duration,
                cycles=cycles,
                max_residual_deg=round(fit.worst_deg, 3),
                max_residual_joint=fit.worst_joint,
                residual_deg=fit.per_joint(),
                renamed_from=asked if name != asked else None,
                warnings=warnings,
                discontinuities=jumps,
            )
        )
    report.merged(earlier, out, keep_missing=missing is None).save(report_path)
    return report


def _rename_reason(asked: str, name: str, others: list[str]) -> str:
    """Why a clip is not named ``asked`` ("" where it is)."""
    if others:
        return f"{asked!r} is also the name of {' and '.join(others)}"
    return f"an earlier import named this file's clip {name}; it keeps that name" if name != asked else ""


def file_jobs(paths: list[str | os.PathLike], category: str = DEFAULT_CATEGORY) -> list[Job]:
    """Import jobs for AMASS files and folders, one clip per file."""
    files = find_amass_files(paths)
    if not files:
        raise InputFileError(paths[0] if paths else ".", "no .npz files found")
    return [(f, clip_name_from_path(f), category) for f in files]


def paper_set_jobs(root: str | os.PathLike) -> tuple[list[Job], list[str]]:
    """Import jobs for the paper's 20 clips under an AMASS root, and the names not found."""
    found, missing = find_paper_clips(root)
    jobs = [(found[c], c.clip_name, c.category) for c in PAPER_CLIPS if c in found]
    return jobs, [f"{c.subject}/{c.take}" for c in missing]
