"""The signals that stop an ``rgsd`` command as Ctrl-C does, and the exit status of a stopped command.

SIGTERM (``kill``, SLURM's preemption and time limit, ``docker stop``) and SIGHUP (the terminal closed) stop a
command the way Ctrl-C does: a training loop finishes its iteration and writes a checkpoint
(``rgsd_agents.rl.loop.deferred_interrupt``), ``rgsd reproduce`` asks its steps to, any other command ends
as on KeyboardInterrupt. A signal the process was started ignoring (``nohup`` ignores SIGHUP) stays ignored.
Whichever signal stopped it, the command exits with ``INTERRUPTED``.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

STOP_SIGNALS = ("SIGTERM", "SIGHUP")
"""Signals that stop a command as Ctrl-C does (SIGHUP: the terminal closed; not where it is ignored, as by nohup)."""
INTERRUPTED = 130
"""Exit status of a command stopped by Ctrl-C, SIGTERM or SIGHUP (128 + SIGINT, as a shell reports Ctrl-C)."""

Handler = Callable[[int, Any], None]


def raise_interrupt(signum: int, frame: Any) -> None:
    """A handler that raises KeyboardInterrupt, as Python's own does for Ctrl-C."""
    raise KeyboardInterrupt


def on_stop_signals(handler: Handler, names: tuple[str, ...] = STOP_SIGNALS) -> dict[int, Any]:
    """Install ``handler`` for the signals ``names`` that this platform has and that are not ignored; returns the
    previous handlers for ``restore_signals`` (nothing outside the main thread, where Python allows no handler)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous = {}
    for name in names:
        sig = getattr(signal, name, None)
        if sig is None or signal.getsignal(sig) == signal.SIG_IGN:  # no such signal here, or nohup
            continue
        previous[sig] = signal.signal(sig, handler)
    return previous


def restore_signals(previous: dict[int, Any]) -> bool:
    """Put back the handlers ``on_stop_signals`` replaced, every one of them; True when a stop signal arrived
    meanwhile: its KeyboardInterrupt is not raised (the command is ending already, and a traceback would follow)."""
    interrupted = False
    pending = list(previous.items())
    while pending:
        sig, handler = pending[0]
        try:
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
            pending.pop(0)
        except KeyboardInterrupt:  # raised by the handler being replaced; putting it back again is harmless
            interrupted = True
    return interrupted


def signal_name(signum: int) -> str:
    """``Ctrl-C`` for SIGINT, else the signal's name (``SIGTERM``)."""
    if signum == signal.SIGINT:
        return "Ctrl-C"
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
