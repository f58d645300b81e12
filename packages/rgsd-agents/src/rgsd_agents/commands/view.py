"""``rgsd view``: explore a trained run's skills live in a browser: clip, blend, reference ghost, kappa, variants.

Serves a page on this machine (viser) and simulates the policy on the CPU at real time: choose a clip, watch
the policy beside its translucent reference with the live Cartesian error, blend its skill toward a second
clip's (a slider along the great circle between their latents, live), move kappa and draw new variants
z ~ vMF(z, kappa), pause, step, change the speed, reset, let the camera follow. Each run's clip latent is its
method's own (encoder z_m, stored clip latents, Meta Motivo's per-step latents; best-of-N runs: --latents with
the clip_latents.json rgsd eval wrote). A downstream run (rgsd downstream's folder) plays its goal-reaching
policy instead: click the floor to move the goal, with the distance to it shown live. On a remote machine,
forward the port and open the URL on your laptop.

Examples::

    rgsd view --pretrained                                # the shipped policy -> http://localhost:8080
    rgsd view runs/demo --clip demo_run --kappa 10 --variants 4
    rgsd view runs/diayn --latents reports/paper/diayn/clip_latents.json
    rgsd view runs/downstream_sidestep                    # goal reaching: click the floor to set the goal
    ssh -L 8080:localhost:8080 gpu-box                    # on your laptop, then open http://localhost:8080
    rgsd view --pretrained --host 0.0.0.0                 # open to the network: prints the address to open

Needs viser: pip install 'rgsd-agents[viewer]'.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from rgsd_agents.commands import add_doc_parser
from rgsd_agents.run_skills import DEFAULT_CLIP
from rgsd_agents.viewer.app import ServeConfig
from rgsd_agents.viewer.limits import KAPPA_RANGE, PORT_RANGE, SPEED_RANGE
from rgsd_agents.viewer.session import SessionConfig
from rgsd_envs.utils.command import BAD_INPUT, print_error
from rgsd_envs.utils.config import number_type, seed_type
from rgsd_envs.utils.signals import on_stop_signals, restore_signals, signal_name


def range_type(kind: type, bounds: tuple[float, float], what: str, note: str = "") -> Callable[[str], Any]:
    """An argparse type: ``kind`` within ``bounds`` (ends included), else ``expected <what> <low>-<high> <note>``."""
    low, high = bounds
    return number_type(kind, low, False, f"{what} {low:g}-{high:g}{note}", maximum=high)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``rgsd view`` to the CLI."""
    p = add_doc_parser(
        subparsers, "view", "explore a run's skills live in a browser (clip, blend, kappa, variants)", __doc__
    )
    p.add_argument(
        "run", metavar="RUN", nargs="?", help="run folder (config.yaml, policy.pt, encoder.pt) or a downstream run"
    )
    p.add_argument("--pretrained", action="store_true", help="the policy rgsd ships instead of a RUN folder")
    p.add_argument(
        "--clip",
        help=f"clip to start on (default: {DEFAULT_CLIP} where the clips have it, else the first; an unknown name lists "
        "them)",
    )
    p.add_argument(
        "--kappa",
        type=range_type(float, KAPPA_RANGE, "a concentration"),
        default=SessionConfig.kappa,
        help=f"initial vMF concentration of the variants, {KAPPA_RANGE[0]:g}-{KAPPA_RANGE[1]:g} "
        f"(default {SessionConfig.kappa:g})",
    )
    p.add_argument(
        "--variants",
        type=number_type(int, 0, False, "a whole number >= 0"),
        default=SessionConfig.variants,
        help=f"variants beside the policy (default {SessionConfig.variants})",
    )
    p.add_argument("--latents", help="a clip_latents.json (rgsd eval's <report>/<run>/) instead of the run's own")
    p.add_argument("--motions", help='clips to choose from: "demo", a clip file or folder (default: the run\'s own)')
    p.add_argument(
        "--seed",
        type=seed_type,
        default=SessionConfig.seed,
        help=f"seed of the first variants or episode (default {SessionConfig.seed})",
    )
    p.add_argument(
        "--host",
        default=ServeConfig.host,
        help=f"interface to serve on (default {ServeConfig.host}: SSH-forward it; 0.0.0.0: every interface, open to "
        "the network)",
    )
    p.add_argument(
        "--port",
        type=range_type(int, PORT_RANGE, "a port", " (0: any free port)"),
        default=ServeConfig.port,
        help=f"port (default {ServeConfig.port}; the next free one if taken; 0: any free port)",
    )
    p.add_argument(
        "--speed",
        type=range_type(float, SPEED_RANGE, "a speed"),
        default=ServeConfig.speed,
        help=f"simulated seconds per second, {SPEED_RANGE[0]:g}-{SPEED_RANGE[1]:g} (default {ServeConfig.speed:g})",
    )
    p.add_argument(
        "--seconds",
        type=number_type(float, 0.0, False, "a number of seconds >= 0"),
        help="serve this long, then exit (default: until Ctrl-C)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``rgsd view``."""
    if (args.run is None) == (not args.pretrained):
        print_error("give a RUN folder or --pretrained (one of them)")
        return BAD_INPUT
    try:
        import viser  # noqa: F401
    except ModuleNotFoundError:
        print_error("rgsd view needs viser: pip install 'rgsd-agents[viewer]'")
        return BAD_INPUT
    from rgsd_agents.viewer.app import open_viewer, remote_access_line
    from rgsd_agents.viewer.server import ServerStartError

    if args.pretrained:
        from rgsd_agents.pretrained import pretrained_run

        args.run = str(pretrained_run())
        print(f"pretrained policy: {args.run}")
    try:
        session = SessionConfig(variants=args.variants, kappa=args.kappa, seed=args.seed)
        app = open_viewer(
            args.run,
            clip=args.clip,
            motions=args.motions,
            latents=args.latents,
            session=session,
            serve=ServeConfig(host=args.host, port=args.port, speed=args.speed),
        )
    except (ValueError, ServerStartError) as err:  # InputFileError (not a run, a bad latents file) is a ValueError too
        print_error(err)
        return BAD_INPUT
    print(f"rgsd view: {app.url}  {app.summary}; Ctrl-C stops")
    print(f"from another machine: {remote_access_line(args.host, app.port)}", flush=True)
    app.start()
    try:
        _serve(args.seconds)
    finally:
        app.close()
    return 0


def _serve(seconds: float | None) -> None:
    """Wait ``seconds`` (None: until stopped). Ctrl-C ends the session as it should end (exit status 0); SIGTERM
    and SIGHUP stop it as they stop any command (a KeyboardInterrupt naming the signal: one line, exit status 130)."""
    stopped_by: list[int] = []

    def stop(signum: int, frame: Any) -> None:
        stopped_by.append(signum)
        raise KeyboardInterrupt

    previous = on_stop_signals(stop)
    try:
        if seconds is not None:
            time.sleep(seconds)
        else:
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        pass  # Ctrl-C, or a stop signal: told apart below
    finally:
        restore_signals(previous)  # a stop signal arriving meanwhile is in stopped_by too
    if stopped_by:
        raise KeyboardInterrupt(f"stopped by {signal_name(stopped_by[0])}")
