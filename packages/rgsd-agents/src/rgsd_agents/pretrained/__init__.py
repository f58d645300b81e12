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

from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.files import InputFileError, staged_folder

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


def build_pretrained(
    run: str | os.PathLike,
    motions: str | os.PathLike,
    out: str | os.PathLike = PRETRAINED_DIR,
    about: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Copy a trained run's policy, encoder, config and clips into a relocatable run folder ``out``, measure the
    card (every clip's error under z = z_m, mean action, the whole clip; the policy's iterations and samples) and
    return it. ``out`` is replaced whole once the new folder is complete; a failure leaves it as it was."""
    from rgsd_agents.play import play_rollout
    from rgsd_envs.motion.library import MotionLib
    from rgsd_envs.runs.policy import load_policy

    src, out = RunDir(run), Path(out)
    src.check(RunDir.CONFIG, RunDir.POLICY, RunDir.ENCODER)
    clip_files = sorted(Path(motions).glob("*.npz"))
    if not clip_files:
        raise InputFileError(motions, "no clip files (*.npz): give the folder the run trained on")
    with staged_folder(out) as tmp:
        config = src.config()
        # the clips relative to the folder; played on native MuJoCo on the CPU whichever backend trained it (a
        # policy scores the same on both: the backend parity check)
        config["env"] = {**config.get("env", {}), "motions": CLIPS, "backend": "mujoco", "device": "cpu"}
        config["device"] = "cpu"
        (tmp / RunDir.CONFIG).write_text(yaml.safe_dump(config, sort_keys=False))
        for name in (RunDir.POLICY, RunDir.ENCODER, RunDir.METHOD):
            if src.file(name).is_file():
                shutil.copyfile(src.file(name), tmp / name)
        (tmp / CLIPS).mkdir()
        for f in clip_files:
            shutil.copyfile(f, tmp / CLIPS / f.name)
        for notice in Path(motions).glob("LICENSE*"):
            shutil.copyfile(notice, tmp / CLIPS / notice.name)
        names = list(MotionLib(str(tmp / CLIPS)).names)
        clips = {}
        for name in names:
            played = play_rollout(tmp, name)
            clips[name] = {"error_cm": round(played.error_cm, 2), "fell": played.fell, "frames": len(played.qpos)}
        errors = [c["error_cm"] for c in clips.values()]
        meta = load_policy(tmp / RunDir.POLICY).meta
        card = {
            "format": CARD_FORMAT,
            **(about or {}),
            **{
                k: int(meta[key]) for k, key in (("iterations", "iteration"), ("samples", "global_step")) if key in meta
            },
            "method": (src.method() or {}).get("name", "rgsd"),
            "measured": "mean Cartesian error over each whole clip: z = z_m, the policy's mean action, no early "
            "termination (rgsd play)",
            "mean_error_cm": round(sum(errors) / len(errors), 2),
            "clips": clips,
        }
        (tmp / CARD).write_text(json.dumps(card, indent=1) + "\n")
    return card
