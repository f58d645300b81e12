"""The paper's 20 reference clips (AMASS, ACCAD subset, listed in its appendix) and how to find them.

AMASS file names differ between releases ("B10 -  Walk turn left 45_poses.npz"
in SMPL+H, "..._stageii.npz" in SMPL-X; the paper writes underscores), so clips
are matched by subject folder and a normalised name: lower case, runs of
non-alphanumerics collapsed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PaperClip:
    """One clip of the paper's set."""

    subject: str
    """AMASS subject folder, e.g. "Male2Walking_c3d"."""
    take: str
    """Take name as the paper lists it (underscores for spaces)."""
    category: str

    @property
    def key(self) -> str:
        """Normalised take name used for matching."""
        return normalise(self.take)

    @property
    def clip_name(self) -> str:
        """Name of the imported rgsd clip."""
        subject = normalise(self.subject.replace("_c3d", "")).replace(" ", "")
        return f"{subject}_{self.key.replace(' ', '_')}"


def normalise(name: str) -> str:
    """Lower case, AMASS suffixes dropped, non-alphanumeric runs to one space."""
    name = re.sub(r"_(poses|stageii)$", "", Path(name).stem if name.endswith(".npz") else name)
    return re.sub(r"[^0-9a-z]+", " ", name.lower()).strip()


PAPER_CLIPS: tuple[PaperClip, ...] = (
    PaperClip("Male2Walking_c3d", "B10____Walk_turn_left_45", "walk"),
    PaperClip("Male2Walking_c3d", "B9____Walk_turn_left_90", "walk"),
    PaperClip("Male2Walking_c3d", "B11____Walk_turn_left_135", "walk"),
    PaperClip("Male2Walking_c3d", "B14____Walk_turn_right_45_t2", "walk"),
    PaperClip("Male2Walking_c3d", "B13____Walk_turn_right_90", "walk"),
    PaperClip("Female1Walking_c3d", "B22___side_step_left", "sidestep"),
    PaperClip("Female1Walking_c3d", "B23___side_step_right", "sidestep"),
    PaperClip("Male2Running_c3d", "C12___run_turn_left_45", "run"),
    PaperClip("Male2Running_c3d", "C11___run_turn_left_90", "run"),
    PaperClip("Male2Running_c3d", "C13___run_turn_left_135", "run"),
    PaperClip("Male2Running_c3d", "C15___run_turn_right_45", "run"),
    PaperClip("Male2Running_c3d", "C14___run_turn_right_90", "run"),
    PaperClip("Male2Running_c3d", "C16___run_turn_right_135", "run"),
    PaperClip("Male2Running_c3d", "C7___run_backwards_t2", "backward"),
    PaperClip("Female1Walking_c3d", "B5___walk_backwards", "backward"),
    PaperClip("Male2Walking_c3d", "B5____Walk_backwards", "backward"),
    PaperClip("Male2MartialArtsPunches_c3d", "E3____cross_left", "punch"),
    PaperClip("Male2MartialArtsPunches_c3d", "E4____cross_right", "punch"),
    PaperClip("Male2MartialArtsPunches_c3d", "E7___uppercut_left", "punch"),
    PaperClip("Male2MartialArtsPunches_c3d", "E8___uppercut_right", "punch"),
)
"""The 20 clips: walk 5, run 6, sidestep 2, backward 3, punch 4."""


def find_paper_clips(root: str | os.PathLike) -> tuple[dict[PaperClip, Path], list[PaperClip]]:
    """Locate the paper's clips under an AMASS root; returns (found, missing)."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: AMASS root folder not found")
    by_subject: dict[str, dict[str, Path]] = {}
    for f in sorted(root.rglob("*.npz")):
        subject = f.parent.name.lower()
        by_subject.setdefault(subject, {}).setdefault(normalise(f.name), f)
    found: dict[PaperClip, Path] = {}
    missing: list[PaperClip] = []
    for clip in PAPER_CLIPS:
        path = by_subject.get(clip.subject.lower(), {}).get(clip.key)
        if path is None:
            missing.append(clip)
        else:
            found[clip] = path
    return found, missing
