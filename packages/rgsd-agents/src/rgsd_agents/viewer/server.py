"""Start the viser server, or say in one line why it cannot start.

viser binds its port in a thread of its own and waits for that thread to say it is serving; when the thread fails
(a port out of range, an address this machine does not have) it waits forever while the thread prints a traceback.
``start_server`` builds the server in a thread of its own and watches viser's: the first failure comes back to the
caller as a ``ServerStartError``, its traceback not printed.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

START_TIMEOUT_S = 60.0
"""Longest wait for the server to serve (binding takes well under a second; the limit only ends a hang)."""
POLL_S = 0.05


class ServerStartError(RuntimeError):
    """The page's server could not start; the message says where and why."""


def start_server(host: str, port: int, timeout_s: float = START_TIMEOUT_S) -> Any:
    """A ``viser.ViserServer`` serving on ``host:port`` (a taken port: the next free one); ServerStartError when its
    thread fails or it does not serve within ``timeout_s``."""
    import viser

    if host:  # "": every interface. A name that does not resolve, viser would look up again on 1000 ports
        try:
            socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError as err:
            raise ServerStartError(f"cannot serve on {host}:{port}: {err.strerror or err}") from None
    server = viser.ViserServer.__new__(viser.ViserServer)
    built: dict[str, BaseException] = {}
    failures: list[BaseException] = []
    running_before = set(threading.enumerate())
    default_hook = threading.excepthook

    def capture(args: threading.ExceptHookArgs) -> None:
        if args.thread in running_before or args.exc_value is None:
            default_hook(args)
        else:  # a thread the server started: its failure is reported by the caller, in one line
            failures.append(args.exc_value)

    def build() -> None:
        try:
            server.__init__(host=host, port=port, verbose=False)
        except BaseException as err:  # handed to the caller's thread
            built["error"] = err

    builder = threading.Thread(target=build, name="rgsd-view-server-start", daemon=True)
    threading.excepthook = capture
    try:
        builder.start()
        deadline = time.monotonic() + timeout_s
        while builder.is_alive():
            builder.join(POLL_S)
            if not builder.is_alive():
                break
            if failures or _server_thread_ended(server):
                raise ServerStartError(f"cannot serve on {host}:{port}: {_why(failures, host, port)}")
            if time.monotonic() > deadline:
                raise ServerStartError(
                    f"cannot serve on {host}:{port}: the server did not start within {timeout_s:g} s"
                )
    finally:
        threading.excepthook = default_hook
    if "error" in built:
        raise built["error"]
    return server


def _server_thread_ended(server: Any) -> bool:
    """Whether viser's serving thread has started and ended (False where this viser version names it otherwise:
    the timeout then ends the wait)."""
    thread = getattr(getattr(server, "_websock_server", None), "_server_thread", None)
    return isinstance(thread, threading.Thread) and not thread.is_alive() and thread.ident is not None


def _why(failures: list[BaseException], host: str, port: int) -> str:
    """The server thread's error, else (viser gave up on every port it tried, silently) what binding says."""
    if failures:
        return str(failures[0]) or type(failures[0]).__name__
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as s:
            s.bind(address)
    except (OSError, OverflowError) as err:
        return (err.strerror if isinstance(err, OSError) else None) or str(err)
    return f"no free port from {port} up"
