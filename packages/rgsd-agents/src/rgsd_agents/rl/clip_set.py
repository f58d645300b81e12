"""The clip set a checkpoint was trained on, and the check that a resumed run loads the same one.

A run continues on the clips it trained on: its worlds, per-clip statistics and networks index clips by position,
so a clip removed, added or changed under ``env.motions`` would either crash the first step or silently train on
another set. Checkpoints record each clip's name and frame count (``clip_set``); ``clip_set_change`` compares them
with the library a resumed run loaded. Checkpoints written before they held the names are compared by their count
of clips (the env's per-clip failure rates), which is all they keep.
"""

from __future__ import annotations

from typing import Any

import torch

from rgsd_envs.motion.library import MotionLib
from rgsd_envs.utils.listing import first_few

MAX_NAMED = 3
"""Clips named per kind of change in the message; the rest are counted."""


def clip_set(lib: MotionLib) -> dict[str, list[Any]]:
    """The names and frame counts of ``lib``'s clips, in library order (plain data for a checkpoint)."""
    return {"names": list(lib.names), "frames": [int(n) for n in lib.num_frames.tolist()]}


def saved_clip_count(state: dict[str, Any]) -> int | None:
    """The number of clips a checkpoint without ``clips`` trained on (its env's per-clip failure rates); None
    when it does not say."""
    env = state.get("env")
    if isinstance(env, dict) and isinstance(env.get("core"), dict):  # an RGSDTorchEnv's state around its core's
        env = env["core"]
    rates = env.get("failure_rate") if isinstance(env, dict) else None
    return int(rates.shape[0]) if isinstance(rates, torch.Tensor) and rates.dim() == 1 else None


def _named(kind: str, names: list[str]) -> str:
    """``kind`` and up to ``MAX_NAMED`` of ``names``, the rest counted ("removed kick, run and 2 more")."""
    return f"{kind} {first_few(names, MAX_NAMED)}"


def clip_set_change(saved: dict[str, Any], lib: MotionLib) -> str | None:
    """How ``lib`` differs from a checkpoint's ``clip_set`` ("removed kick; added jump"), None when it is the same
    (the same names with the same frame counts, in the same order)."""
    now = clip_set(lib)
    if now == {"names": list(saved["names"]), "frames": [int(n) for n in saved["frames"]]}:
        return None
    before = dict(zip(saved["names"], (int(n) for n in saved["frames"])))
    after = dict(zip(now["names"], now["frames"]))
    parts = []
    if removed := [n for n in before if n not in after]:
        parts.append(_named("removed", removed))
    if added := [n for n in after if n not in before]:
        parts.append(_named("added", added))
    if changed := [f"{n} ({before[n]} -> {after[n]} frames)" for n in before if n in after and before[n] != after[n]]:
        parts.append(_named("changed", changed))
    return "; ".join(parts) or "the same clips in another order"
