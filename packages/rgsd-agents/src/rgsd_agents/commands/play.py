"""``rgsd play``: watch a trained policy perform one clip's skill, as an mp4 or in the MuJoCo viewer.

The humanoid starts in the clip's first frame and runs the policy's mean action
with z = z_m (the clip's embedding) or, with --kappa, one z ~ vMF(z_m, kappa),
to the clip's end (no early termination); the camera follows the pelvis.

Examples::

    rgsd play runs/demo                                   # first clip -> runs/demo/play_<clip>.mp4
    rgsd play runs/demo --clip demo_run --reference       # beside the reference clip
    rgsd play runs/demo --clip demo_walk --kappa 20 --seed 3 --out walk_k20.mp4
    rgsd play runs/demo --clip demo_punch --viewer        # interactive window (needs a display)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rgsd_agents.commands import add_doc_parser, add_run_folder_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``rgsd play`` to the CLI."""
    p = add_doc_parser(
        subparsers, "play", "render a trained policy performing a clip's skill (mp4, or the MuJoCo viewer)", __doc__
    )
    add_run_folder_argument(p)
    p.add_argument("--clip", help="clip name (default: the first clip; an unknown name lists them)")
    p.add_argument(
        "--kappa", type=float, help="sample z ~ vMF(z_m, kappa) instead of z = z_m (20: varied, 1000: close)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the vMF sample (default 0)")
    p.add_argument("--frames", type=int, help="render only the first N frames (default and at most: the whole clip)")
    p.add_argument("--motions", help='clips to choose from: "demo", a clip file or folder (default: the run\'s own)')
    p.add_argument("--out", help="mp4 path (default: <run>/play_<clip>[_k<kappa>].mp4)")
    p.add_argument("--size", type=int, nargs=2, default=(640, 480), metavar=("W", "H"), help="video size (even)")
    p.add_argument("--reference", action="store_true", help="show the reference clip beside the policy")
    p.add_argument("--viewer", action="store_true", help="replay in mujoco.viewer instead of writing an mp4")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``rgsd play``."""
    from rgsd_agents.play import NoDisplayError, has_display, label, play_rollout, view, write_play_video

    if args.viewer and not has_display():  # before the rollout: say it at once
        print(
            "error: --viewer needs a display (neither DISPLAY nor WAYLAND_DISPLAY is set); "
            f"write a video instead: rgsd play {args.run} --out play.mp4",
            file=sys.stderr,
        )
        return 2
    try:
        played = play_rollout(args.run, args.clip, args.kappa, args.frames, args.motions, args.seed)
    except ValueError as err:  # InputFileError (unknown clip, incomplete run) is a ValueError too
        print(f"error: {err}", file=sys.stderr)
        return 2
    fell = ", fell" if played.fell else ""
    print(f"{label(played)}: {len(played.qpos)} frames; over the clip: Cartesian error {played.error_cm:.1f} cm{fell}")
    if args.viewer:
        try:
            view(played)
        except NoDisplayError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        return 0
    kappa = "" if args.kappa is None else f"_k{args.kappa:g}"
    out = Path(args.out) if args.out else Path(args.run) / f"play_{played.clip}{kappa}.mp4"
    try:
        write_play_video(played, out, tuple(args.size), args.reference)
    except ValueError as err:  # odd size, not .mp4
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"video: {out}")
    return 0
