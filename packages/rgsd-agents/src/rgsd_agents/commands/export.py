"""``rgsd export``: write a trained policy as ONNX, runnable without Python or rgsd.

The file maps the flat observation ``obs`` (batch, 359 + skill size: 375 for 16-D
skills) to the mean ``action`` and the joint PD targets ``pd_target`` (batch, 69);
the observation normaliser is inside the graph. Its metadata
(``metadata_props["rgsd"]``, JSON) holds the observation layout, action offset and
scale, joint order, PD gains, control dt, skill size and the skills to command: each
clip's latent as the run's method picks it, the same as rgsd play and rgsd view
command (the encoder's z_m, CALM's stored latents, the mean of Meta Motivo's
per-step latents), with the clip names and where the latents came from. A run that
picks latents by best-of-N (DIAYN, ASE, METRA) exports the ones rgsd eval chose:
--latents <report>/<run>/clip_latents.json. After writing, the file's action and
pd_target are checked against the torch policy in onnxruntime (when installed), on
observations near the training statistics and far beyond the normaliser's clip.

Needs the export extra: pip install rgsd-envs[export]  (onnx, onnxscript, onnxruntime)

Examples::

    rgsd export runs/demo                          # -> runs/demo/policy.onnx
    rgsd export runs/demo --onnx deploy/walker.onnx
    rgsd export runs/diayn --latents reports/demo/diayn/clip_latents.json   # a best-of-N baseline
    rgsd export moved/demo --motions moved/clips   # a run whose clips are no longer where its config says
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rgsd_agents.commands import add_doc_parser, add_run_folder_argument
from rgsd_envs.utils.command import BAD_INPUT, print_error

if TYPE_CHECKING:
    from rgsd_envs.runs.onnx_export import ClipSkills

CHECK_OBSERVATIONS = 256
"""Random observations on which the exported file is compared with the torch policy."""
CHECK_TOLERANCE = 1e-5
"""Largest |difference| of either output (action, pd_target in radians) that counts as a match."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``rgsd export`` to the CLI."""
    p = add_doc_parser(
        subparsers, "export", "export a trained policy (with its observation normaliser and metadata) to ONNX", __doc__
    )
    add_run_folder_argument(p)
    p.add_argument("--onnx", metavar="FILE", help="output file (default: <run>/policy.onnx)")
    p.add_argument(
        "--latents",
        help="a clip_latents.json (rgsd eval's <report>/<run>/) instead of the run's own; needed for a best-of-N run",
    )
    p.add_argument(
        "--motions",
        help='the clips the run trained on, where they are now: "demo", a clip file or folder (default: the run\'s '
        "own, as its config.yaml names them; give it for a run whose clips moved)",
    )
    p.add_argument("--no-check", action="store_true", help="skip the onnxruntime comparison with the torch policy")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``rgsd export``."""
    from rgsd_envs.runs.onnx_export import (
        CHECK_SIGMAS,
        MissingExportDependency,
        check_onnx,
        export_onnx,
        read_metadata,
        require,
    )
    from rgsd_envs.runs.run_dir import RunDir

    RunDir(args.run).check_kind(RunDir.SKILL_RUN, "rgsd export")
    out = Path(args.onnx) if args.onnx else RunDir(args.run).path / "policy.onnx"
    try:
        require("onnx", "onnxscript")  # before the clip latents are chosen: a missing extra is said at once
        path = export_onnx(args.run, out, run_clip_skills(args.run, args.latents, args.motions), args.motions)
    except MissingExportDependency as err:
        print_error(err)
        return BAD_INPUT
    except ValueError as err:  # InputFileError too: incomplete run, wrong policy shape, not .onnx
        print_error(err)
        return BAD_INPUT
    meta = read_metadata(path)
    print(
        f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB): obs (batch, {meta['observation']['dim']}) -> "
        f"action, pd_target (batch, {meta['action']['dim']}); {len(meta['clip_names'])} clip skills in the metadata "
        f"from {meta['clip_embeddings_from']}"
    )
    if args.no_check:
        return 0
    try:
        diffs = check_onnx(path, RunDir(args.run).load_policy(), CHECK_OBSERVATIONS)
    except MissingExportDependency as err:
        print(f"not checked: {err}")
        return 0
    worst = max(diffs.values())
    verdict = "matches the torch policy" if worst <= CHECK_TOLERANCE else "DIFFERS from the torch policy"
    print(
        f"onnxruntime {verdict}: max |difference| "
        + ", ".join(f"{name} {d:.1e}" for name, d in diffs.items())
        + f" on {CHECK_OBSERVATIONS} random observations ("
        + " and ".join(f"{s:g}" for s in CHECK_SIGMAS)
        + f" standard deviations around the training mean; tolerance {CHECK_TOLERANCE:.0e})"
    )
    return 0 if worst <= CHECK_TOLERANCE else 1


def run_clip_skills(run: str, latents: str | None = None, motions: str | None = None) -> ClipSkills:
    """The skills the export's metadata gives to command: the run's clip latents as rgsd play and rgsd view pick
    them (``run_skills.choose_latents``; ``latents``: a clip_latents.json instead), over ``motions`` (None: the
    run's own clips)."""
    from rgsd_agents.run_skills import choose_latents
    from rgsd_envs.motion.library import MotionLib
    from rgsd_envs.runs.onnx_export import ClipSkills
    from rgsd_eval.runs import load_run

    loaded = load_run(run)
    lib = MotionLib(motions or loaded.run.training_motions())
    chosen = choose_latents(loaded, lib, latents_file=latents)
    return ClipSkills(list(lib.names), chosen.centres, chosen.source)
