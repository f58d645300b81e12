"""Batch import of AMASS files into rgsd clips, with progress and atomic writes."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from rgsd_envs.motion.amass import amass_to_clip, clip_name_from_path, find_amass_files, read_amass
from rgsd_envs.motion.kinematics import KinematicModel
from rgsd_envs.motion.paper_set import PAPER_CLIPS, find_paper_clips
from rgsd_envs.utils.files import InputFileError


@dataclass
class ImportReport:
    """What an import wrote and what it could not read."""

    written: list[Path] = field(default_factory=list)
    failed: dict[Path, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)


def import_motions(
    jobs: Iterable[tuple[Path, str, str]],
    out_dir: str | os.PathLike,
    offsets: np.ndarray | None = None,
    pelvis_rest: np.ndarray | None = None,
    progress: bool = True,
    keep_going: bool = True,
) -> ImportReport:
    """Convert (source file, clip name, category) jobs into clips under out_dir.

    Each clip is written atomically, so an interrupted import leaves only whole
    files. With ``keep_going``, unreadable files are reported and skipped;
    otherwise the first error is raised.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    jobs = list(jobs)
    km = KinematicModel(offsets)
    report = ImportReport()
    for src, name, category in tqdm(jobs, desc="import", unit="clip", disable=not progress):
        try:
            clip = amass_to_clip(
                read_amass(src), name=name, category=category, offsets=offsets, pelvis_rest=pelvis_rest, kinematics=km
            )
        except InputFileError as err:
            if not keep_going:
                raise
            report.failed[Path(src)] = str(err)
            continue
        report.written.append(clip.save(out / f"{name}.npz"))
    return report


def file_jobs(paths: list[str | os.PathLike], category: str = "unlabelled") -> list[tuple[Path, str, str]]:
    """Import jobs for AMASS files and folders, one clip per file."""
    files = find_amass_files(paths)
    if not files:
        raise InputFileError(paths[0] if paths else ".", "no .npz files found")
    return [(f, clip_name_from_path(f), category) for f in files]


def paper_set_jobs(root: str | os.PathLike) -> tuple[list[tuple[Path, str, str]], list[str]]:
    """Import jobs for the paper's 20 clips under an AMASS root, and the names not found."""
    found, missing = find_paper_clips(root)
    jobs = [(found[c], c.clip_name, c.category) for c in PAPER_CLIPS if c in found]
    return jobs, [f"{c.subject}/{c.take}" for c in missing]
