"""Which low-level policy a downstream run drives: the sha256 of its ``policy.pt``, recorded when the run starts
(``DownstreamConfig.low_level_sha256``), lets a resumed run take the low-level run folder where it is now
(``--low-level NEW``) once its policy is shown to be byte for byte the one the run trained over."""

from __future__ import annotations

import logging
import shlex
from pathlib import Path
from typing import Any

from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.files import InputFileError, file_sha256

log = logging.getLogger(__name__)

SHA_KEY = "low_level_sha256"
"""The downstream config's key of the low-level policy's sha256."""


def low_level_sha256(low: RunDir) -> str:
    """The sha256 of a low-level run's ``policy.pt``."""
    return file_sha256(low.policy_path)


def other_sha256(low: RunDir, recorded: str | None) -> str | None:
    """The sha256 of ``low``'s ``policy.pt`` where it is not ``recorded``; None where it is, where nothing is recorded
    or where the file is missing (the low level's loading says so)."""
    if recorded is None or not low.policy_path.is_file():
        return None
    found = low_level_sha256(low)
    return None if found == recorded else found


def check_resumed_low_level(run: RunDir, saved: dict[str, Any], given: str | None) -> None:
    """One line unless the low-level run a resumed downstream ``run`` names (``given``: ``--low-level``, else its
    saved config's ``low_level``) is there and holds the policy the run recorded; a folder that moved is accepted
    only when its ``policy.pt`` has the recorded sha256."""
    old = str(saved.get(RunDir.LOW_LEVEL_KEY, ""))
    recorded = saved.get(SHA_KEY)
    where = shlex.quote(str(run.path))
    if given is None:
        low = RunDir(old)
        if not low.path.is_dir():
            raise InputFileError(
                run.config_path,
                f"low-level run folder not found: {old}; if it moved, continue with: rgsd downstream --resume "
                f"{where} --low-level NEW_FOLDER",
                RunDir.LOW_LEVEL_KEY,
            )
    else:
        low = RunDir(given)
        if low.path.resolve() != Path(old).resolve() and recorded is None:
            restart = f"rgsd downstream --config {shlex.quote(str(run.config_path))} --low-level {shlex.quote(given)}"
            raise InputFileError(
                run.config_path,
                f"records no sha256 of its low-level policy.pt ({SHA_KEY}), so {given} cannot be shown to hold the "
                f"policy it trained over; start it again over that folder: {restart} --out NEW_RUN",
                SHA_KEY,
            )
    found = other_sha256(low, recorded)
    if found is not None:
        raise InputFileError(
            low.policy_path,
            f"not the low-level policy this downstream run trained over (sha256 {found[:12]}..., {run.config_path} "
            f"records {recorded[:12]}...); resume over the run folder that holds that policy.pt, or train a new "
            "downstream run over this one",
        )


def warn_other_low_level(run: RunDir, low: RunDir, recorded: str | None) -> None:
    """Log one warning when the low level's ``policy.pt`` is not the one the downstream ``run`` recorded
    (``recorded``: its ``low_level_sha256``): the high level then plays over a policy it never trained with. A run
    that records no sha256, or a missing policy.pt (refused where it loads), passes silently."""
    found = other_sha256(low, recorded)
    if found is not None:
        log.warning(
            "%s (sha256 %s...) is not the low-level policy this downstream run trained over (%s records %s %s...): "
            "the high level plays over another low level",
            low.policy_path, found[:12], run.config_path, SHA_KEY, recorded[:12],
        )  # fmt: skip
