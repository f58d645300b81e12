"""Progress bars whose total and ETA follow a run's budget.

A run stops at ``iterations`` or at its time budget, whichever comes first.
tqdm's own counter only knows the iterations, so a 15-minute demo with
``iterations: 100000`` used to read ``272/100000 [05:22<31:05:25]``. Here the
bar follows whichever limit ends the run first, estimated from this session's
rate:

- time budget first: the bar is a clock, ``05:22/15:00 used, 09:38 left | 272 it, 0.84 it/s``;
- iterations first (or no time budget): ``40/100 it, 05:22 elapsed, 08:03 left``;
- both limits, before this session's first iteration gives a rate: the clock without a time left
  (``00:22/2:30:00 used | 58 it, -- it/s``), as which limit comes first is not known yet.

Elapsed time is the trainer's own (it may include earlier sessions of a
resumed run and is what the budget is checked against), passed to ``update``;
a training loop counts its iterations' time only, so its probes, checkpoints
and start report come on top. The time left and the rate are wall-clock time:
the trainer's time left divided by the share of this session's wall time that
its counted time took (measured from the first update on, so what runs between
iterations is in it and a set-up before the first is not).

On a terminal the bar is redrawn in place; on anything else (the log file of a
``nohup`` run, a pipe) it is written as a whole line at most every
``LOG_INTERVAL`` seconds and once at the end, so a long run's log reads as
lines, not one line of carriage-return redraws.

``CountBar`` is the same bar for a loop without a time budget that counts its
own units (an evaluation's rollout steps and video frames).
"""

from __future__ import annotations

import io
import math
import sys
import time
from typing import IO, Any, TypeVar

from tqdm import tqdm

RESOLUTION = 1000
"""Steps of the underlying tqdm bar (the bar shows a fraction, not tqdm's own counter)."""
SEPARATOR = " | "
MIN_INTERVAL = 0.2
"""Seconds between redraws on a terminal (the last state is drawn on close)."""
LOG_INTERVAL = 60.0
"""Seconds between lines when the bar's stream is not a terminal."""
BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {status}"


def wall_clock() -> float:
    """Seconds of a monotonic wall clock (a function of its own, so that tests can set the time)."""
    return time.monotonic()


def clock(seconds: float) -> str:
    """``mm:ss`` (``h:mm:ss`` from an hour on) of a number of seconds."""
    if not math.isfinite(seconds):
        return "--:--"
    total = max(0, round(seconds))
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class _Bar(tqdm):
    """tqdm with a ``{status}`` field for the bar format (tqdm's own ``{postfix}`` starts with a comma)."""

    status = ""

    @property
    def format_dict(self) -> dict[str, Any]:
        """tqdm's fields plus ``status``."""
        return {**super().format_dict, "status": self.status}


def is_terminal(stream: IO[str]) -> bool:
    """Whether ``stream`` is a terminal (a bar is redrawn in place there, written as lines elsewhere)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(callable(isatty) and isatty())
    except ValueError:  # a closed stream
        return False


class StatusBar:
    """A fraction and a status text on one bar: redrawn in place at most every ``min_interval`` seconds on a
    terminal, written as a line at most every ``LOG_INTERVAL`` seconds on any other stream (see the module
    docstring). ``file`` defaults to stderr; a disabled bar draws nothing and writes its lines to stdout."""

    def __init__(self, desc: str, *, disable: bool = False, file: IO[str] | None = None, min_interval: float = 0.0):
        self.stream = sys.stderr if file is None else file
        self.disable = disable
        self.lines = not disable and not is_terminal(self.stream)
        """Written as lines (a log file), not redrawn in place."""
        self.interval = LOG_INTERVAL if self.lines else min_interval
        self._drawn_at = -math.inf
        self._written = ""
        self._bar = _Bar(
            total=RESOLUTION, desc=desc, bar_format=BAR_FORMAT, disable=disable, dynamic_ncols=not self.lines,
            file=io.StringIO() if self.lines else file,  # the lines are written here, from the bar's text
        )  # fmt: skip

    def show(self, frac: float, status: str, force: bool = False) -> None:
        """Set the fraction done and the status; draw if the interval has passed (or ``force``)."""
        self._bar.n = round(min(max(frac, 0.0), 1.0) * RESOLUTION)
        self._bar.status = status
        now = time.monotonic()
        if force or now - self._drawn_at >= self.interval:
            self._draw()
            self._drawn_at = now

    def _draw(self) -> None:
        if not self.lines:
            self._bar.refresh()
            return
        line = str(self._bar)
        if line != self._written:
            print(line, file=self.stream, flush=True)
            self._written = line

    def render(self) -> str:
        """The bar's current line (as drawn)."""
        return str(self._bar)

    def write(self, line: str) -> None:
        """A line above the bar (or plainly, without one)."""
        if self.disable:
            print(line, flush=True)
        elif self.lines:
            print(line, file=self.stream, flush=True)
        else:
            self._bar.write(line, file=self.stream)

    def close(self) -> None:
        """Draw the last state and end the bar's line."""
        if not self.disable:
            self._draw()
        self._bar.close()


_Bar_T = TypeVar("_Bar_T", bound="ProgressBar")


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
        self._first: tuple[float, float] | None = None
        """Wall clock and elapsed time at this session's first update (the counted share of wall time from there)."""
        self._wall = 0.0
        """Wall-clock seconds since the first update."""
        self.text = ""
        self._bar = StatusBar(desc, disable=disable, file=file, min_interval=MIN_INTERVAL)
        self._show("", force=True)

    def rate(self) -> float | None:
        """Iterations per second in this session (None before the first update)."""
        n, s = self.done - self._start[0], self.elapsed - self._start[1]
        return n / s if n > 0 and s > 0 else None

    def counted_share(self) -> float:
        """The share of wall time since the first update that ``elapsed`` counted (1 until measured): the time left
        in wall-clock seconds is the counted time left over it."""
        if self._first is None or self._wall <= 0:
            return 1.0
        counted = self.elapsed - self._first[1]
        return min(counted / self._wall, 1.0) if counted > 0 else 1.0

    def status(self) -> tuple[float, str]:
        """The fraction done and the status text, following the limit that ends the run first (the time budget,
        without a time left, while no rate says which)."""
        rate = self.rate()
        share = self.counted_share()
        iter_frac = self.done / self.iterations if self.iterations > 0 else 1.0
        iter_left = 0.0 if self.done >= self.iterations else (self.iterations - self.done) / rate if rate else math.inf
        speed = f"{rate * share:.2f} {self.unit}/s" if rate else f"-- {self.unit}/s"
        by_iterations = (
            min(iter_frac, 1.0),
            (
                f"{self.done}/{self.iterations} {self.unit}, {clock(self.elapsed)} elapsed, "
                f"{clock(iter_left / share)} left, {speed}"
            ),
        )
        if self.max_seconds is None:
            return by_iterations
        used = f"{clock(self.elapsed)}/{clock(self.max_seconds)} used"
        time_frac = min(max(self.elapsed / self.max_seconds, 0.0), 1.0)
        time_left = max(self.max_seconds - self.elapsed, 0.0)
        if not rate and self.done < self.iterations and time_left > 0:  # no rate yet: either limit may end the run
            return time_frac, f"{used}{SEPARATOR}{self.done} {self.unit}, {speed}"
        if time_left <= iter_left:
            return time_frac, f"{used}, {clock(time_left / share)} left{SEPARATOR}{self.done} {self.unit}, {speed}"
        return by_iterations

    def update(self, done: int, elapsed: float, postfix: str = "") -> None:
        """Show ``done`` iterations after ``elapsed`` seconds, with the trainer's ``postfix`` (metrics)."""
        now = wall_clock()
        if self._first is None:
            self._first = (now, elapsed)
        self._wall = now - self._first[0]
        self.done, self.elapsed = done, elapsed
        self._show(postfix)

    def _show(self, postfix: str, force: bool = False) -> None:
        frac, text = self.status()
        self.text = text + (SEPARATOR + postfix if postfix else "")
        self._bar.show(frac, self.text, force=force)

    def render(self) -> str:
        """The bar's current line (as printed)."""
        return self._bar.render()

    def close(self) -> None:
        """Draw the last state and end the bar's line."""
        self._bar.close()

    def __enter__(self: _Bar_T) -> _Bar_T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CountBar(ProgressBar):
    """A ``ProgressBar`` over ``total`` units timed by its own clock and moved on with ``advance(n)``: the
    rollouts and videos of an evaluation, a long render."""

    def __init__(self, desc: str, total: int, *, unit: str = "it", disable: bool = False, file: IO[str] | None = None):
        super().__init__(desc, total, None, unit=unit, disable=disable, file=file)
        self._t0 = time.monotonic()

    def advance(self, n: int = 1) -> None:
        """``n`` more units done."""
        self.update(self.done + n, time.monotonic() - self._t0)
