"""The window of ``rgsd eval``'s motion FID and the shortest clip it can score.

One fact for the evaluation (rgsd-eval imports it from here) and for the clip tools: ``rgsd-motions import`` and
``info`` warn about clips too short for it, before any training is spent on them. A clip shorter than that still
trains and its Cartesian error is still measured; only its FID is not (``rgsd eval`` says which clips, and why, in
its report).
"""

from __future__ import annotations

from collections.abc import Sequence

from rgsd_envs.motion.clip import CLIP_FPS
from rgsd_envs.utils.listing import first_few

FID_WINDOW = 15
"""Frames per motion-FID feature window (0.5 s at 30 Hz): the default of ``rgsd eval``'s ``fid_window``."""
SHORT_EXAMPLES = 3
"""Up to this many clips too short for the FID get a warning line each; past it one line counts them."""


def min_fid_frames(window: int = FID_WINDOW) -> int:
    """Fewest frames of a clip whose FID can be measured: two windows of ``window`` frames (stride 1), the fewest a
    covariance is fitted from."""
    return window + 1


def short_clip_warning(name: str, num_frames: int, window: int = FID_WINDOW) -> str | None:
    """A one-line warning for a clip too short for the evaluation's FID (None when it is long enough)."""
    need = min_fid_frames(window)
    if num_frames >= need:
        return None
    return (
        f"warning: {name}: {num_frames} frames ({(num_frames - 1) / CLIP_FPS:.2f} s) is shorter than the {need} frames "
        f"({(need - 1) / CLIP_FPS:.2f} s) rgsd eval needs for its motion FID (fid_window = {window}); the clip trains "
        "and its tracking error is measured, but not its FID"
    )


def short_clips_summary(names: Sequence[str], where: str, window: int = FID_WINDOW) -> str:
    """One warning line for many clips too short for the evaluation's FID: their count, the first
    ``SHORT_EXAMPLES`` names and ``where`` the full list is."""
    need = min_fid_frames(window)
    shown = first_few(names, SHORT_EXAMPLES)
    return (
        f"warning: {len(names)} clips are shorter than the {need} frames ({(need - 1) / CLIP_FPS:.2f} s) rgsd eval "
        f"needs for its motion FID (fid_window = {window}): {shown}; they train and their tracking error is measured, "
        f"but not their FID; {where}"
    )
