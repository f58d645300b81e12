"""The policy rgsd ships: RGSD trained on the repository's openly licensed clips, for ``rgsd play --pretrained``.

``rgsd_cpu/`` is a run folder (``rgsd_envs.runs.run_dir``: config.yaml, policy.pt with its observation
normaliser, encoder.pt, method.json) that carries its clips (``clips/*.npz``: the 5 demo clips and the 8
DeepMimic clips of ``motions/deepmimic-smpl``, MIT licence, notice in ``clips/LICENSE``) and ``card.json``: how
it was trained, with the commands, and the error it measured on every clip. Its config names the clips by a path
relative to the folder, so the folder works wherever it is installed. ``examples/pretrained_cpu.sh`` rebuilds it
(``python -m rgsd_agents.pretrained RUN --motions DIR``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import yaml

from rgsd_envs.envs.config import CPU_MUJOCO
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.files import InputFileError, staged_folder
from rgsd_envs.utils.listing import first_few

PRETRAINED_DIR = Path(__file__).parent / "rgsd_cpu"
"""The shipped run folder."""
CARD = "card.json"
CLIPS = "clips"
CARD_FORMAT = "rgsd-pretrained-card"


def pretrained_run() -> Path:
    """The shipped run folder (an error naming the missing file if this install lacks it)."""
    RunDir(PRETRAINED_DIR).check(RunDir.CONFIG, RunDir.POLICY, CARD, CLIPS)
    return PRETRAINED_DIR


def pretrained_card(folder: str | os.PathLike = PRETRAINED_DIR) -> dict[str, Any]:
    """The card of a shipped run folder: what it is, the commands that made it, its error per clip."""
    path = Path(folder) / CARD
    try:
        card = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise InputFileError(path, f"not a readable card: {err}") from None
    if card.get("format") != CARD_FORMAT:
        raise InputFileError(path, f"format must be {CARD_FORMAT!r}", "format")
    return card


def check_out(run: Path, out: Path) -> None:
    """An InputFileError naming ``--out`` unless it is a new or empty folder, or one this builder made (its card):
    the folder is replaced whole, so anything else in it would be lost, and the run it copies must lie apart."""
    target, source = out.resolve(), run.resolve()
    where = "--out " + str(out)
    if target == source or source.is_relative_to(target):
        what = "is" if target == source else "holds"
        raise InputFileError(
            where, f"{what} the run it copies ({run}), which the new folder would replace; give another"
        )
    if target.is_relative_to(source):
        raise InputFileError(where, f"lies inside the run it copies ({run}); give a folder outside it")
    if not out.exists():
        return
    if not out.is_dir():
        raise InputFileError(where, "exists and is not a folder; give a new or empty folder")
    entries = sorted(p.name + ("/" if p.is_dir() else "") for p in out.iterdir())
    if not entries:
        return
    try:
        pretrained_card(out)
    except InputFileError:
        raise InputFileError(
            where,
            f"holds {first_few(entries, 3)} but no {CARD} of a folder this command built, and would be replaced "
            "whole; give a new or empty folder",
        ) from None


GIVEN_LATENTS = RunDir.CLIP_LATENTS
"""Where a built folder keeps the clip latents given for a best-of-N run (``build_pretrained``'s ``latents``)."""


def build_pretrained(
    run: str | os.PathLike,
    motions: str | os.PathLike,
    out: str | os.PathLike = PRETRAINED_DIR,
    about: dict[str, Any] | None = None,
    latents: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Copy a trained run's policy, encoder, config, method.json with every file it names, and clips into a
    relocatable run folder ``out``, measure the card (every clip's error under z = z_m, mean action, the whole clip;
    the policy's iterations and samples) and return it. ``latents``: a clip_latents.json (``rgsd eval``'s
    ``<report>/<run>/clip_latents.json``) whose latents the card's rollouts command, copied into the folder as
    ``GIVEN_LATENTS``; a best-of-N run (ASE, DIAYN, METRA) has no latents of its own and needs it. The inputs are
    checked before anything is written, so errors name them; ``out`` (``check_out``: new, empty or an earlier
    folder of this builder) is replaced whole once the new folder is complete; a failure leaves it as it was."""
    from rgsd_agents.play import play_rollout
    from rgsd_envs.motion.library import MotionLib
    from rgsd_envs.runs.policy import load_policy
    from rgsd_envs.runs.run_dir import load_clip_latents

    src, out = RunDir(run), Path(out)
    src.check(RunDir.CONFIG, RunDir.POLICY)
    check_out(src.path, out)
    info = src.method()  # checked here, where a bad method.json is the user's file, not the copy's
    method_files = src.method_files()
    if info is None:  # a run written before methods existed: its encoder gives the clip latents
        src.check(RunDir.ENCODER)
    clip_files = sorted(Path(motions).glob("*.npz"))
    if not clip_files:
        raise InputFileError(motions, "no clip files (*.npz): give the folder the run trained on")
    names = list(MotionLib([str(f) for f in clip_files]).names)
    if latents is not None:
        if src.file(GIVEN_LATENTS) in method_files:
            raise InputFileError(
                src.path / RunDir.METHOD,
                f"this {info['name']} run stores its own {GIVEN_LATENTS}, which the folder keeps and its card "
                "commands: leave out --latents",
                "clip_latents",
            )
        load_clip_latents(latents, names, skill_dim=src.env_config().skill_dim, run=src.path)
    elif info is not None and info["latent_choice"] == "best_of_n":
        raise InputFileError(
            src.path / RunDir.METHOD,
            f"this {info['name']} run picks each clip's latent as the best of N and stores none: give the ones rgsd "
            "eval chose with --latents <report>/<run>/clip_latents.json (the folder keeps them for its card)",
            "latent_choice",
        )
    with staged_folder(out) as tmp:
        config = src.config()
        # the clips relative to the folder, played on native MuJoCo on the CPU
        config["env"] = {**config.get("env", {}), "motions": CLIPS, **CPU_MUJOCO}
        config["device"] = "cpu"
        (tmp / RunDir.CONFIG).write_text(yaml.safe_dump(config, sort_keys=False))
        copies = [src.file(n) for n in (RunDir.POLICY, RunDir.ENCODER, RunDir.METHOD) if src.file(n).is_file()]
        for f in dict.fromkeys(copies + method_files):
            target = tmp / f.relative_to(src.path)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, target)
        given = None
        if latents is not None:
            given = tmp / GIVEN_LATENTS
            shutil.copyfile(latents, given)
        (tmp / CLIPS).mkdir()
        for f in clip_files:
            shutil.copyfile(f, tmp / CLIPS / f.name)
        for notice in Path(motions).glob("LICENSE*"):
            shutil.copyfile(notice, tmp / CLIPS / notice.name)
        clips = {}
        for name in names:
            played = play_rollout(tmp, name, latents=given)
            clips[name] = {"error_cm": round(played.error_cm, 2), "fell": played.fell, "frames": len(played.qpos)}
        errors = [c["error_cm"] for c in clips.values()]
        meta = load_policy(tmp / RunDir.POLICY).meta
        card = {
            "format": CARD_FORMAT,
            **(about or {}),
            **{
                k: int(meta[key]) for k, key in (("iterations", "iteration"), ("samples", "global_step")) if key in meta
            },
            "method": (info or {}).get("name", "rgsd"),
            **({} if given is None else {"clip_latents": GIVEN_LATENTS}),
            "measured": "mean Cartesian error over each whole clip: z = z_m, the policy's mean action, no early "
            "termination (rgsd play" + ("" if given is None else f" --latents {GIVEN_LATENTS}") + ")",
            "mean_error_cm": round(sum(errors) / len(errors), 2),
            "clips": clips,
        }
        (tmp / CARD).write_text(json.dumps(card, indent=1) + "\n")
    return card
