"""``rgsd pretrain``: contrastive pretraining of the frozen encoder (see the Training page of the docs, Pretraining).

Examples::

    rgsd pretrain --motions demo --out runs/enc
    rgsd pretrain --motions demo motions/accad --out runs/enc --seconds 180
    rgsd pretrain --config pretrain.yaml --out runs/enc --steps 500 --seed 1
    rgsd pretrain --motions demo --out runs/enc_hard --negatives hard --steps 4000 --lr 3e-4 --hidden 256 256
    rgsd pretrain --motions demo --out runs/enc --device cuda

    rgsd pretrain --motions motions/variants20 --out runs/enc --set eval_every=50 --set num_threads=2

``--set KEY=VALUE`` sets any PretrainConfig field, checked and typed as in ``rgsd train``; the options
above override ``--set``, which overrides the YAML config. The resolved config is written
to ``<out>/pretrain.yaml`` beside ``encoder.pt``, ``embeddings.png``, ``tb/`` and
``reward_sharpness.json``: the mean cos(mu(s), z_m) per clip of reference states,
poses held still, wrong phases, time-reversed stacks and other clips' states,
also printed as a table (a row per category past 30 clips). ``--negatives hard`` trains with negatives built from
each clip's own frames (held still, phase +0.5, reversed) and, unless
``--target-alignment`` is given, runs all ``--steps`` (no alignment early stop).
Train a policy with the encoder into another folder:
``rgsd train --config cpu --set encoder=runs/enc/encoder.pt --out runs/cpu_enc``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rgsd_agents.commands import (
    add_device_argument,
    add_doc_parser,
    add_set_argument,
    holds_other_outputs,
    holds_run,
)
from rgsd_envs.utils.command import BAD_INPUT, print_error
from rgsd_envs.utils.config import seed_type

if TYPE_CHECKING:
    from rgsd_agents.pretraining.config import PretrainConfig


def register(subparsers: Any) -> None:
    """Add ``rgsd pretrain`` to the CLI."""
    p = add_doc_parser(subparsers, "pretrain", "pretrain the state encoder with InfoNCE on reference clips", __doc__)
    p.add_argument(
        "--motions", nargs="+", help='reference clips: "demo", clip files or folders of clips (default: demo)'
    )
    p.add_argument(
        "--out",
        required=True,
        help="output folder of the encoder (encoder.pt, pretrain.yaml, plots, tb/), not a run folder: train with it "
        "into another folder with rgsd train --set encoder=OUT/encoder.pt",
    )
    p.add_argument("--config", help="YAML file of PretrainConfig fields")
    p.add_argument("--steps", type=int, help="maximum optimiser steps")
    p.add_argument("--seconds", type=float, help="wall-clock budget of the training loop")
    p.add_argument(
        "--target-alignment", type=float, help="stop when the within-motion alignment reaches this (<0: never)"
    )
    p.add_argument("--hidden", type=int, nargs="+", help="encoder hidden sizes, e.g. 1024 1024 1024 512")
    p.add_argument("--kappa", type=float, help="vMF concentration (InfoNCE temperature 1/kappa)")
    p.add_argument("--lr", type=float, help="Adam learning rate")
    p.add_argument("--batch-size", type=int, help="(anchor, positive) pairs per minibatch")
    p.add_argument("--seed", type=seed_type, help="seed of the initialisation and sampling")
    p.add_argument(
        "--negatives",
        choices=("infonce", "hard"),
        help="infonce: the paper's negatives (other clips); hard: also held-still, phase-shifted and reversed "
        "states of the anchor's own clip (implies --target-alignment -1 unless given)",
    )
    add_set_argument(p, "set a PretrainConfig field, e.g. --set eval_every=50 --set hidden=[256,256] (repeatable)")
    add_device_argument(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> PretrainConfig:
    """The PretrainConfig of a YAML file (if any) with the command-line overrides applied."""
    from rgsd_agents.pretraining.config import PretrainConfig
    from rgsd_envs.utils.config import from_dict_with_overrides, load_yaml, set_overrides

    overrides: dict[str, Any] = set_overrides(PretrainConfig, args.overrides)
    if args.motions:
        overrides["motions"] = args.motions[0] if len(args.motions) == 1 else list(args.motions)
    if args.seconds is not None:
        overrides["max_seconds"] = args.seconds
    if args.negatives is not None:
        overrides["negatives"] = args.negatives
        if args.negatives == "hard" and args.target_alignment is None:
            overrides["target_alignment"] = None  # unreachable with hard negatives: stop by steps/seconds
    if args.target_alignment is not None:
        overrides["target_alignment"] = None if args.target_alignment < 0 else args.target_alignment
    if args.hidden:
        overrides["hidden"] = list(args.hidden)
    for name in ("steps", "kappa", "lr", "batch_size", "seed", "device"):
        if getattr(args, name) is not None:
            overrides[name] = getattr(args, name)
    if args.config:
        return load_yaml(PretrainConfig, args.config, overrides, _flags(args))
    return from_dict_with_overrides(PretrainConfig, {}, "command line", overrides, flags=_flags(args))


FLAGS = {
    "motions": "motions",
    "hidden": "hidden",
    "max_seconds": "seconds",
    "target_alignment": "target_alignment",
    "negatives": "negatives",
    "steps": "steps",
    "kappa": "kappa",
    "lr": "lr",
    "batch_size": "batch_size",
    "seed": "seed",
    "device": "device",
}
"""PretrainConfig key -> the option (argparse dest) that sets it."""


def _flags(args: argparse.Namespace) -> dict[str, str]:
    """PretrainConfig key -> the option given for it as typed (``--hidden 256 0``), for errors to name."""
    given = {key: getattr(args, dest) for key, dest in FLAGS.items() if getattr(args, dest) is not None}
    return {
        key: f"--{FLAGS[key].replace('_', '-')} " + (" ".join(map(str, v)) if isinstance(v, list) else str(v))
        for key, v in given.items()
    }


def run(args: argparse.Namespace) -> int:
    """Run ``rgsd pretrain``; prints the final alignment and where the files are."""
    from rgsd_agents.commands import refuse_torchrun

    if (code := refuse_torchrun("pretrain")) is not None:
        return code
    from rgsd_agents.pretraining.loop import pretrain
    from rgsd_agents.pretraining.reward_sharpness import format_table
    from rgsd_envs.runs.run_dir import RunDir
    from rgsd_envs.utils.files import InputFileError, folder_lock

    cfg = config_from_args(args)
    out = Path(args.out)
    if (out / RunDir.POLICY).exists() or holds_run(out):
        # its encoder.pt is the one its policy was trained with: replacing it would silently change the policy's skills
        print_error(f"{out} holds a trained run; pretrain into another --out")
        return BAD_INPUT
    if RunDir(out).kind() is None and (other := holds_other_outputs(out)) is not None:
        print_error(f"{out} holds {other}, not an encoder; pretrain into another --out")
        return BAD_INPUT
    try:
        with folder_lock(out, "rgsd pretrain"):  # a second pretraining into it would interleave its files
            result = pretrain(cfg, out, progress=not args.no_progress)
    except InputFileError:
        raise  # the CLI reports it with the file and field
    except ValueError as err:  # e.g. fewer than two clips
        print_error(err)
        return BAD_INPUT
    status = "reached" if result.reached_target else "did not reach"
    target = f" ({status} the target {cfg.target_alignment})" if cfg.target_alignment is not None else ""
    print(
        f"within-motion alignment {result.alignment:.5f}{target}; max cosine between clips {result.separation:.3f}; "
        f"{result.steps} steps in {result.seconds:.1f} s on {len(result.clip_names)} clips"
    )
    print(format_table(result.sharpness, result.clip_categories))
    print(f"encoder:    {result.encoder_path}")
    print(f"config:     {result.config_path}")
    print(f"embeddings: {result.plot_path or 'not written (see the warning above)'}")
    print(f"cosines:    {result.cosine_path or 'not written (see the warning above)'}")
    print(f"sharpness:  {result.sharpness_path}")
    print(f"tensorboard: {result.tb_dir}")
    return 0
