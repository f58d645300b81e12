"""``rgsd play``: watch a trained policy perform one clip's skill, as an mp4 or in the MuJoCo viewer.

The humanoid starts in the clip's first frame and runs the policy's mean action
with z = z_m (the clip's latent as the run's method picks it: the encoder's embedding, CALM's stored latent,
Meta Motivo's per-step track) or, with --kappa, one z ~ vMF(z_m, kappa), to the clip's end (no early
termination); the camera follows the pelvis. A run that picks latents by best-of-N (DIAYN, ASE, METRA) plays
the ones rgsd eval chose: --latents <report>/<run>/clip_latents.json.

Examples::

    rgsd play runs/demo                                   # walk, else the first clip -> runs/demo/play_<clip>.mp4
    rgsd play runs/demo --clip demo_run --reference       # beside the reference clip
    rgsd play runs/demo --clip demo_walk --kappa 20 --seed 3 --out walk_k20.mp4
    rgsd play runs/demo --clip demo_punch --viewer        # interactive window (needs a display)
    rgsd play --pretrained --clip walk --reference        # the shipped policy, no training -> play_walk.mp4
    rgsd play runs/diayn --latents reports/demo/diayn/clip_latents.json   # a best-of-N baseline

--pretrained plays the policy rgsd ships (RGSD on the repository's 13 openly licensed clips, trained on 2 CPU
cores; its card.json states its error on each clip); its folder is printed, for rgsd eval --run or downstream.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from rgsd_agents.commands import add_doc_parser
from rgsd_agents.run_skills import DEFAULT_CLIP
from rgsd_envs.utils.command import BAD_INPUT, print_error
from rgsd_envs.utils.config import seed_type


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``rgsd play`` to the CLI."""
    p = add_doc_parser(
        subparsers, "play", "render a trained policy performing a clip's skill (mp4, or the MuJoCo viewer)", __doc__
    )
    p.add_argument("run", metavar="RUN", nargs="?", help="run folder (config.yaml, policy.pt, encoder.pt)")
    p.add_argument("--pretrained", action="store_true", help="the policy rgsd ships instead of a RUN folder")
    p.add_argument(
        "--clip",
        help=f"clip name (default: {DEFAULT_CLIP} where the clips have it, else the first; an unknown name lists them)",
    )
    p.add_argument(
        "--kappa", type=float, help="sample z ~ vMF(z_m, kappa) instead of z = z_m (20: varied, 1000: close)"
    )
    p.add_argument("--seed", type=seed_type, default=0, help="seed of the vMF sample (default 0)")
    p.add_argument("--frames", type=int, help="render only the first N frames (default and at most: the whole clip)")
    p.add_argument(
        "--latents",
        help="a clip_latents.json (rgsd eval's <report>/<run>/) instead of the run's own; needed for a best-of-N run",
    )
    p.add_argument("--motions", help='clips to choose from: "demo", a clip file or folder (default: the run\'s own)')
    p.add_argument("--out", help="mp4 path (default: <run>/play_<clip>[_k<kappa>].mp4; --pretrained: ./play_<clip>...)")
    p.add_argument("--size", type=int, nargs=2, default=(640, 480), metavar=("W", "H"), help="video size (even)")
    p.add_argument("--reference", action="store_true", help="show the reference clip beside the policy")
    p.add_argument("--viewer", action="store_true", help="replay in mujoco.viewer instead of writing an mp4")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``rgsd play``."""
    from rgsd_agents.play import NoDisplayError, has_display, label, play_rollout, view, write_play_video
    from rgsd_envs.render import RenderBackendError, check_rendering, check_video_output

    if (args.run is None) == (not args.pretrained):
        print_error("give a RUN folder or --pretrained (one of them)")
        return BAD_INPUT
    if args.pretrained:
        from rgsd_agents.pretrained import pretrained_run
        from rgsd_envs.utils.files import InputFileError

        try:
            args.run = str(pretrained_run())
        except InputFileError as err:
            print_error(f"this install has no pretrained policy: {err}")
            return BAD_INPUT
        print(f"pretrained policy: {args.run}")
    from rgsd_envs.runs.run_dir import RunDir

    RunDir(args.run).check_kind(RunDir.SKILL_RUN, "rgsd play")  # a downstream run: named, with its skill policy
    if args.viewer and not has_display():  # before the rollout: say it at once
        print_error(
            "--viewer needs a display (neither DISPLAY nor WAYLAND_DISPLAY is set); "
            f"write a video instead: rgsd play {shlex.quote(args.run)} --out play.mp4"
        )
        return BAD_INPUT
    try:
        if not args.viewer:  # before the rollout: an odd size, a path that is not .mp4, no rendering: said at once
            check_video_output(args.out or "play.mp4", *args.size)
            check_rendering()
        played = play_rollout(
            args.run, args.clip, args.kappa, args.frames, args.motions, args.seed, latents=args.latents
        )
    except ValueError as err:  # InputFileError (unknown clip, incomplete run) is a ValueError too
        print_error(err)
        return BAD_INPUT
    except RenderBackendError as err:
        print_error(no_rendering(err, "--pretrained" if args.pretrained else args.run))
        return BAD_INPUT
    fell = ", fell" if played.fell else ""
    print(f"{label(played)}: {len(played.qpos)} frames; over the clip: Cartesian error {played.error_cm:.1f} cm{fell}")
    if args.viewer:
        try:
            view(played)
        except NoDisplayError as err:
            print_error(err)
            return BAD_INPUT
        return 0
    from rgsd_envs.motion.clip import clip_file_stem

    kappa = "" if args.kappa is None else f"_k{args.kappa:g}"
    default_dir = Path(".") if args.pretrained else Path(args.run)  # never into the installed package
    out = Path(args.out) if args.out else default_dir / f"play_{clip_file_stem(played.clip)}{kappa}.mp4"
    try:
        write_play_video(played, out, tuple(args.size), args.reference)
    except ValueError as err:  # odd size, not .mp4
        print_error(err)
        return BAD_INPUT
    except RenderBackendError as err:  # the GL backend is selected but does not start
        print_error(no_rendering(err, "--pretrained" if args.pretrained else args.run))
        return BAD_INPUT
    print(f"video: {out}")
    return 0


def no_rendering(err: Exception, run: str) -> str:
    """The one-line error of ``rgsd play`` without offscreen rendering: why, how to get it, what works without."""
    return (
        f"{err} Without rendering, `rgsd view {run}` shows the policy in a browser (pip install 'rgsd-agents[viewer]')."
    )
