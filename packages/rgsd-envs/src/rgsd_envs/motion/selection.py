"""A deterministic subset of a motion set's clips, spread over its categories (the training probe's clips, a
limited ``rgsd eval``)."""

from __future__ import annotations

from collections.abc import Sequence

SPREAD_RULE = "round-robin over the categories in order of first appearance, each category's clips in library order"
"""How ``spread_clips`` picks its clips, in words (for reports and metrics.json)."""


def spread_clips(categories: Sequence[str], most: int) -> list[int]:
    """Up to ``most`` clip indices spread over the categories, ascending: round-robin over the categories (in order
    of first appearance), each category's clips in library order (every clip when there are at most ``most``)."""
    by_category: dict[str, list[int]] = {}
    for i, c in enumerate(categories):
        by_category.setdefault(c, []).append(i)
    queues = list(by_category.values())
    chosen: list[int] = []
    for rank in range(max((len(q) for q in queues), default=0)):
        chosen += [q[rank] for q in queues if rank < len(q)][: most - len(chosen)]
        if len(chosen) >= most:
            break
    return sorted(chosen)
