"""Long lists in one-line messages: the first few items, the rest counted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def first_few(items: Sequence[Any], most: int) -> str:
    """Up to ``most`` of ``items`` joined by commas, and how many more ("kick, run, walk and 2 more")."""
    shown = ", ".join(str(item) for item in items[:most])
    return shown + (f" and {len(items) - most} more" if len(items) > most else "")
