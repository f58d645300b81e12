"""How every rgsd command line tool ends: bad input as one line on stderr and exit status 2, a stop (Ctrl-C,
SIGTERM, SIGHUP) as one line and ``INTERRUPTED``, never a traceback. ``rgsd``, ``rgsd-eval``, ``rgsd-motions`` and
``python -m rgsd_agents.pretrained`` run their command through ``run_as_command``."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable

from rgsd_envs.utils.signals import INTERRUPTED, on_stop_signals, raise_interrupt, restore_signals

BAD_INPUT = 2
"""Exit status of a command refused for its input (a file, a flag, a device), as argparse exits for a bad flag."""


def input_errors() -> tuple[type[Exception], ...]:
    """The errors that mean bad input, reported in one line: a malformed or missing file, a device or simulator
    backend this machine lacks."""
    from rgsd_envs.sim import WarpUnavailableError  # imports torch: only once a command runs
    from rgsd_envs.utils.device import DeviceError
    from rgsd_envs.utils.files import InputFileError

    return (InputFileError, FileNotFoundError, DeviceError, WarpUnavailableError)


def print_error(message: object) -> None:
    """``error: <message>`` on stderr, the one line of a refused command."""
    print(f"error: {message}", file=sys.stderr)


def run_as_command(command: Callable[[], int | None]) -> int:
    """Run ``command`` and return its exit status: SIGTERM and SIGHUP stop it as Ctrl-C does (``signals``), a stop
    is one line on stderr and ``INTERRUPTED``, an ``input_errors`` error one line and ``BAD_INPUT``."""
    errors = input_errors()
    previous = on_stop_signals(raise_interrupt)
    try:
        code = int(command() or 0)
    except errors as err:
        print_error(err)
        code = BAD_INPUT
    except KeyboardInterrupt as err:  # one line, not a traceback (a training loop's second Ctrl-C says more)
        with contextlib.suppress(OSError):  # after SIGHUP the terminal may be gone
            print(str(err) or "interrupted", file=sys.stderr)
        code = INTERRUPTED
    finally:
        if restore_signals(previous):  # stopped while the command was ending
            code = INTERRUPTED
    return code
