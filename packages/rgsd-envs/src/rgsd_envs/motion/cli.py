"""``rgsd-motions``: import AMASS files, write the demo clips, inspect and play clips."""

from __future__ import annotations

import argparse
import logging
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rgsd_envs.motion.amass import DEFAULT_CATEGORY
from rgsd_envs.utils.command import BAD_INPUT, print_error, run_as_command
from rgsd_envs.utils.config import seed_type

if TYPE_CHECKING:
    from rgsd_envs.motion.clip import MotionClip


def _cmd_import(args: argparse.Namespace) -> int:
    from rgsd_envs.motion.importer import REPORT_NAME, file_jobs, import_motions, paper_set_jobs

    offsets = pelvis = None
    if args.betas is not None and not args.smpl_model:
        print_error("--betas needs --smpl-model DIR (the SMPL model the betas belong to)")
        return BAD_INPUT
    if args.smpl_model:
        from rgsd_envs.humanoid.body_shape import body_from_smpl

        try:
            offsets, pelvis = body_from_smpl(args.smpl_model, betas=args.betas, gender=args.gender)
        except (ImportError, ValueError) as err:  # smplx missing, bad betas, bad model file
            print_error(err)
            return BAD_INPUT
    if args.cycles < 1:
        print_error(f"--cycles must be >= 1, got {args.cycles}")
        return BAD_INPUT
    missing: list[str] = []
    if args.paper_set and (args.inputs or args.category is not None):
        given = " and ".join(
            [f"input(s) {' '.join(args.inputs)}"] * bool(args.inputs)
            + [f"--category {args.category}"] * (args.category is not None)
        )
        print_error(
            f"--paper-set imports the paper's 20 clips with their own categories; it takes no {given}: "
            "import other files in a separate call"
        )
        return BAD_INPUT
    if args.paper_set:
        jobs, missing = paper_set_jobs(args.paper_set)
        if not jobs:
            print_error(f"none of the paper's 20 clips found under {args.paper_set}")
            return BAD_INPUT
    else:
        if not args.inputs:
            print_error("give AMASS files or folders, or --paper-set <AMASS root>")
            return BAD_INPUT
        jobs = file_jobs(args.inputs, category=args.category or DEFAULT_CATEGORY)
    report = import_motions(
        jobs,
        args.out,
        offsets=offsets,
        pelvis_rest=pelvis,
        progress=not args.quiet,
        keep_going=not args.strict,
        missing=missing if args.paper_set else None,
        cycles=args.cycles,
    )
    for path, err in report.failed.items():
        print(f"rejected {path}: {err}", file=sys.stderr)
    for line in report.rename_notes():
        print(line, file=sys.stderr)
    for name in missing:
        print(f"not found: {name}", file=sys.stderr)
    for line in report.residual_warnings() + report.short_warnings():
        print(line, file=sys.stderr)
    print(f"{report.summary()}; clips and {REPORT_NAME} in {args.out}")
    return 1 if (report.failed or missing) else 0


def _cmd_demo(args: argparse.Namespace) -> int:
    if args.variants is None:
        if args.seed is not None:
            print_error("--seed chooses the variants; give --variants N too")
            return BAD_INPUT
        from rgsd_envs.motion.demo import write_demo_clips

        paths = write_demo_clips(args.out)
        print(f"wrote {len(paths)} demo clip(s) to {args.out}")
        return 0
    if args.variants < 1:
        print_error(f"--variants must be >= 1, got {args.variants}")
        return BAD_INPUT
    from rgsd_envs.motion.variants import write_demo_variants

    seed = 0 if args.seed is None else args.seed
    paths = write_demo_variants(args.out, args.variants, seed)
    print(f"wrote {len(paths)} demo variant clip(s) (seed {seed}) to {args.out}")
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    from rgsd_envs.motion.fid_window import SHORT_EXAMPLES, short_clip_warning, short_clips_summary
    from rgsd_envs.motion.library import load_motions

    clips = load_motions(args.clips)
    for clip in clips:
        print(
            f"{clip.name:32s} {clip.category:10s} {clip.num_frames:5d} frames  {clip.duration:6.2f} s  source {clip.source_fps:g} Hz  {clip.source}"
        )
    print(totals_line(clips))
    short = [(clip.name, line) for clip in clips if (line := short_clip_warning(clip.name, clip.num_frames))]
    if len(short) > SHORT_EXAMPLES:
        where = "the listing above gives each clip's frames (its third column)"
        short = [("", short_clips_summary([name for name, _ in short], where))]
    for _, line in short:
        print(line, file=sys.stderr)
    return 0


def totals_line(clips: Sequence[MotionClip]) -> str:
    """``total: N clips, F frames, D; per category: walk N, run N`` (categories in order of first appearance)."""
    seconds = sum(c.duration for c in clips)
    counts = Counter(c.category for c in clips)
    per = ", ".join(f"{category} {n}" for category, n in counts.items())
    return f"total: {len(clips)} clips, {sum(c.num_frames for c in clips)} frames, {_duration(seconds)}; per category: {per}"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def _cmd_play(args: argparse.Namespace) -> int:
    from rgsd_envs.motion.clip import load_clip
    from rgsd_envs.render import (
        RenderBackendError,
        check_rendering,
        check_sheet_output,
        check_video_output,
        render_clip,
        write_contact_sheet,
    )

    clip = load_clip(args.clip)
    out = Path(args.out) if args.out else Path(args.clip).with_suffix(".mp4")
    sheet = out if out.suffix.lower() == ".png" else (out.with_suffix(".png") if args.sheet else None)
    video = None if out.suffix.lower() == ".png" else out
    try:  # both outputs checked before either is written: a bad video size leaves no sheet behind
        if sheet is not None:
            check_sheet_output(sheet, args.width, args.height, args.sheet_frames)
        if video is not None:
            check_video_output(video, args.width, args.height)
        check_rendering()  # rendering turned off here: said before anything is drawn
    except (ValueError, RenderBackendError) as err:  # odd size, no frames, not .mp4
        print_error(err)
        return BAD_INPUT
    try:
        if sheet is not None:
            write_contact_sheet(clip, sheet, num_frames=args.sheet_frames, width=args.width, height=args.height)
            print(f"wrote {sheet}")
        if video is not None:
            render_clip(clip, video, width=args.width, height=args.height)
            print(f"wrote {video}")
    except RenderBackendError as err:  # the GL backend is selected but does not start
        print_error(err)
        return BAD_INPUT
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``rgsd-motions``."""
    p = argparse.ArgumentParser(prog="rgsd-motions", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    imp = sub.add_parser(
        "import",
        help="convert AMASS SMPL+H / SMPL-X files to rgsd clips (30 Hz, grounded)",
        description="Convert AMASS SMPL+H (*_poses.npz) and SMPL-X (*_stageii.npz) files to rgsd clips (30 Hz,\n"
        "grounded), one clip per file, named by the file (walk_poses.npz: walk). Body-shape files (shape.npz,\n"
        "*_stagei.npz) and rgsd clips already in the output folder are skipped.\n\n"
        "No clip of another file is overwritten: files that ask for the same name (a/walk_poses.npz,\n"
        "b/walk_poses.npz) are named by their parent folders (a_walk, b_walk), and a name that a clip in the\n"
        "output folder has from another file stays with it; each renamed file gets a 'note:' line (past three,\n"
        "one line counts them and three examples follow). Importing a file again rewrites its own clip.\n\n"
        "import_report.json beside the clips says per input file kept/skipped/rejected and why, frame rates,\n"
        "frames and seconds before and after resampling, and per joint the residual (max and mean degrees): how\n"
        "far the in-range hinge angles kept are from the captured rotation. Each import is merged into the\n"
        "folder's report: the entries of other files stay, a file imported again replaces its own.",
        epilog="example:\n  rgsd-motions import ~/AMASS/ACCAD --out clips/ --category walk\n"
        "  rgsd-motions import --paper-set ~/AMASS --out clips/\n"
        "  rgsd-motions import run_poses.npz --out clips/ --category run --cycles 3   (a one-cycle clip, looped)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    imp.add_argument("inputs", nargs="*", help="AMASS .npz files or folders (searched recursively)")
    imp.add_argument("--out", required=True, help="output folder for the clips")
    imp.add_argument(
        "--paper-set", metavar="AMASS_ROOT", help="import the paper's 20 ACCAD clips found under this root"
    )
    imp.add_argument(  # None: not given, which --paper-set checks
        "--category", help=f"category label for imported files (default: {DEFAULT_CATEGORY}; not with --paper-set)"
    )
    imp.add_argument(
        "--smpl-model", metavar="DIR", help="SMPL model folder: use the subject's body shape (needs smplx)"
    )
    imp.add_argument("--betas", type=float, nargs="*", help="shape coefficients for --smpl-model (default: zeros)")
    imp.add_argument(
        "--gender",
        default="neutral",
        choices=("neutral", "male", "female"),
        help="which model file of --smpl-model to read (default: neutral)",
    )
    imp.add_argument(
        "--cycles",
        type=int,
        default=1,
        help="the file is one cycle of a looping motion (DeepMimic's Loop: wrap; its last frame is the next "
        "cycle's first): close the cycle and repeat it N times, each moved on by the cycle's displacement "
        "(default 1: as captured)",
    )
    imp.add_argument("--strict", action="store_true", help="stop at the first unreadable file")
    imp.add_argument("--quiet", action="store_true", help="no progress bar")
    imp.set_defaults(func=_cmd_import)

    demo = sub.add_parser(
        "demo",
        help="write the built-in demo clips (walk, run, sidestep, backward, punch), or N variants of them",
        description="Write the five built-in demo clips (demo_<kind>.npz), or with --variants N that many distinct "
        "clips made by the same generator: walks, runs, sidesteps, backward walks and punches in turn, at varied "
        "speeds, cadences, arm styles, leans, step heights and punch timings, named <kind>_v<NN> with category "
        "<kind>, the same for the same --seed.",
        epilog="example:\n  rgsd-motions demo --out motions/demo\n"
        "  rgsd-motions demo --variants 20 --out motions/variants20   (the paper's clip count)\n"
        "  rgsd-motions demo --variants 100 --seed 1 --out motions/variants100",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("--out", required=True, help="output folder for the clips")
    demo.add_argument("--variants", type=int, metavar="N", help="write N distinct variants instead of the five clips")
    demo.add_argument("--seed", type=seed_type, help="seed of the variants (default 0)")
    demo.set_defaults(func=_cmd_demo)

    info = sub.add_parser(
        "info", help="list clips (name, category, frames, duration, source), then the totals and clips per category"
    )
    info.add_argument("clips", nargs="+", help="clip files or folders, or 'demo'")
    info.set_defaults(func=_cmd_info)

    play = sub.add_parser("play", help="render a clip offscreen to mp4 (and/or a PNG contact sheet)")
    play.add_argument("clip", help="an rgsd clip file (.npz)")
    play.add_argument("--out", help="output .mp4 (or .png for a contact sheet only); default: beside the clip")
    play.add_argument("--sheet", action="store_true", help="also write a PNG contact sheet")
    play.add_argument(
        "--sheet-frames",
        type=int,
        default=8,
        help="frames of the contact sheet, evenly spaced first to last (default 8)",
    )
    play.add_argument(
        "--width",
        type=int,
        default=640,
        help="width in pixels of the video (even) and of each sheet frame (default 640)",
    )
    play.add_argument(
        "--height",
        type=int,
        default=480,
        help="height in pixels of the video (even) and of each sheet frame (default 480)",
    )
    play.set_defaults(func=_cmd_play)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``rgsd-motions``: ends as ``rgsd`` does (``run_as_command``: bad input in one line and exit
    status 2; Ctrl-C, SIGTERM and SIGHUP stop it in one line and exit status 130, every file it wrote whole)."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    args = build_parser().parse_args(argv)
    return run_as_command(lambda: args.func(args))


if __name__ == "__main__":
    sys.exit(main())
