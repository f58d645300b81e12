"""Progress bars whose total and ETA follow a run's budget.

A run stops at ``iterations`` or at its time budget, whichever comes first.
tqdm's own counter only knows the iterations, so a 15-minute demo with
``iterations: 100000`` used to read ``272/100000 [05:22<31:05:25]``. Here the
bar follows whichever limit ends the run first, estimated from this session's
rate:

- time budget first: the bar is a clock, ``05:22/15:00, 09:38 left | 272 it, 0.84 it/s``;
- iterations first (or no time budget): ``40/100 it, 05:22 elapsed, 08:03 left``.

Elapsed time is the trainer's own (it may include earlier sessions of a
resumed run and is what the budget is checked against), passed to ``update``.
"""

from __future__ import annotations

import math
import time
from typing import IO, Any

from tqdm import tqdm

RESOLUTION = 1000
"""Steps of the underlying tqdm bar (the bar shows a fraction, not tqdm's own counter)."""
SEPARATOR = " | "
MIN_INTERVAL = 0.2
"""Seconds between redraws (the last state is drawn on close)."""


def clock(seconds: float) -> str:
    """``mm:ss`` (``h:mm:ss`` from an hour on) of a number of seconds."""
    if not math.isfinite(seconds):
        return "--:--"
    total = max(0, round(seconds))
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class _Bar(tqdm):
    """tqdm with a ``{status}`` field for the bar format."""

    status = ""

    @property
    def format_dict(self) -> dict[str, Any]:
        """tqdm's fields plus ``status``."""
        d = super().format_dict
        d["status"] = self.status
        return d


class ProgressBar:
    """A progress bar for a loop bounded by ``iterations`` and optionally ``max_seconds`` (see the module docstring)."""

    def __init__(
        self,
        desc: str,
        iterations: int,
        max_seconds: float | None = None,
        *,
        unit: str = "it",
        initial: int = 0,
        elapsed: float = 0.0,
        disable: bool = False,
        file: IO[str] | None = None,
    ):
        self.iterations = iterations
        self.max_seconds = max_seconds
        self.unit = unit
        self._start = (initial, elapsed)
        """Iterations and seconds when this session began (its rate excludes earlier sessions)."""
        self.done, self.elapsed = initial, elapsed
        self.text = ""
        self._drawn_at = -math.inf
        self._bar = _Bar(
            total=RESOLUTION,
            desc=desc,
            bar_format="{desc}: {percentage:3.0f}%|{bar}| {status}",
            disable=disable,
            dynamic_ncols=True,
            file=file,
        )
        self._show("", force=True)

    def rate(self) -> float | None:
        """Iterations per second in this session (None before the first update)."""
        n, s = self.done - self._start[0], self.elapsed - self._start[1]
        return n / s if n > 0 and s > 0 else None

    def status(self) -> tuple[float, str]:
        """The fraction done and the status text, following the limit that ends the run first."""
        rate = self.rate()
        iter_left = (self.iterations - self.done) / rate if rate else math.inf
        time_left = math.inf if self.max_seconds is None else max(self.max_seconds - self.elapsed, 0.0)
        speed = f"{rate:.2f} {self.unit}/s" if rate else f"-- {self.unit}/s"
        if self.max_seconds is not None and time_left <= iter_left:
            frac = self.elapsed / self.max_seconds
            text = (
                f"{clock(self.elapsed)}/{clock(self.max_seconds)}, {clock(time_left)} left"
                f"{SEPARATOR}{self.done} {self.unit}, {speed}"
            )
        else:
            frac = self.done / self.iterations if self.iterations > 0 else 1.0
            text = (
                f"{self.done}/{self.iterations} {self.unit}, {clock(self.elapsed)} elapsed, "
                f"{clock(iter_left)} left, {speed}"
            )
        return min(max(frac, 0.0), 1.0), text

    def update(self, done: int, elapsed: float, postfix: str = "") -> None:
        """Show ``done`` iterations after ``elapsed`` seconds, with the trainer's ``postfix`` (metrics)."""
        self.done, self.elapsed = done, elapsed
        self._show(postfix)

    def _show(self, postfix: str, force: bool = False) -> None:
        frac, text = self.status()
        self.text = text + (SEPARATOR + postfix if postfix else "")
        self._bar.status = self.text
        self._bar.n = round(frac * RESOLUTION)
        now = time.monotonic()
        if force or now - self._drawn_at >= MIN_INTERVAL:
            self._bar.refresh()
            self._drawn_at = now

    def render(self) -> str:
        """The bar's current line (as printed)."""
        return str(self._bar)

    def close(self) -> None:
        """Draw the last state and end the bar's line."""
        self._bar.refresh()
        self._bar.close()

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
