"""The layout of a training run folder: written by rgsd-agents, read by everyone.

::

    <run>/
      config.yaml             resolved training config; its ``env:`` section is an EnvConfig
      encoder.pt              frozen pretrained encoder (rgsd-encoder)
      discovery_encoder.pt    trainable discovery encoder, latest (rgsd-encoder)
      policy.pt               latest exported policy (rgsd-policy)
      method.json             the skill method and how it picks a clip's latent at evaluation (``RunDir.method``)
      clip_latents.json       each clip's latent, {clip name: [16 floats]} (CALM's encoding of the clip's first
                              window, its latent_choice "clip_latents"; Meta Motivo's B averaged over the clip, the
                              one latent per clip that downstream and ``rgsd eval --latent stored`` take)
      tracking_latents.npz    one latent per step of each clip (latent_choice "tracking": Meta Motivo's tracking
                              inference; ``save_tracking_latents``)
      checkpoints/            full trainer states for --resume (iter_XXXXXX.pt, latest.pt)
      tb/                     TensorBoard event files
      pretrain/               pretraining outputs when the run pretrained its own encoder

A downstream run (``rgsd downstream``) has the same config.yaml, policy.pt (the high-level actor), checkpoints/ and
tb/; its config.yaml names the skill-policy run it drives (``low_level``), which tells the two kinds apart
(``RunDir.kind``). Evaluation and downstream tasks need only this file's ``RunDir`` and rgsd-envs.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from rgsd_envs.envs.config import EnvConfig, missing_motion
from rgsd_envs.envs.observations import SKILL_DIM
from rgsd_envs.utils.config import read_yaml
from rgsd_envs.utils.files import InputFileError

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from rgsd_envs.rewards.encoders import MLPEncoder
    from rgsd_envs.runs.policy import PolicyMLP


class RunDir:
    """Paths and loaders of one run folder (see the module docstring)."""

    SKILL_RUN = "skill"
    DOWNSTREAM_RUN = "downstream"
    KINDS = {
        SKILL_RUN: ("a skill-policy run", "rgsd train, rgsd demo", "rgsd train"),
        DOWNSTREAM_RUN: ("a downstream run", "rgsd downstream", "rgsd downstream"),
    }
    """Each kind of run folder (``kind``): how messages name it, the commands that write it, and the one that
    starts or continues it (``<command> --resume RUN``)."""
    LOW_LEVEL_KEY = "low_level"
    """The config.yaml key that only a downstream run has: the skill-policy run it drives."""

    CONFIG = "config.yaml"
    ENCODER = "encoder.pt"
    DISCOVERY_ENCODER = "discovery_encoder.pt"
    POLICY = "policy.pt"
    CHECKPOINTS = "checkpoints"
    LATEST = "latest.pt"
    """The newest checkpoint in ``checkpoints/`` (a copy of the newest ``iter_XXXXXX.pt``)."""
    TENSORBOARD = "tb"
    METHOD = "method.json"
    CLIP_LATENTS = "clip_latents.json"
    """Each clip's unit latent, ``{clip name: [16 floats]}``: a run's own (CALM, Meta Motivo; method.json's
    ``clip_latents``), the latents a report's run folder was evaluated with, or those a pretrained folder was given."""
    TRACKING_LATENTS = "tracking_latents.npz"
    """Each clip's unit latents, one per step (``save_tracking_latents``; method.json's ``tracking_latents``)."""
    LATENT_CHOICES = ("encoder", "best_of_n", "clip_latents", "tracking")
    """``method.json``'s ``latent_choice``: a motion encoder's clip embedding (the file named by ``encoder``), the
    best of N sampled latents by Cartesian error, latents stored per clip by the run (the JSON file named by
    ``clip_latents``, ``{clip name: [16 floats]}``), or a latent per step of each clip stored by the run (the file
    named by ``tracking_latents``, ``load_tracking_latents``)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    @property
    def name(self) -> str:
        """The run's folder name (used as its label in reports)."""
        return self.path.resolve().name

    def file(self, name: str) -> Path:
        """Path of a file of the run."""
        return self.path / name

    @property
    def config_path(self) -> Path:
        return self.path / self.CONFIG

    @property
    def encoder_path(self) -> Path:
        return self.path / self.ENCODER

    @property
    def discovery_encoder_path(self) -> Path:
        return self.path / self.DISCOVERY_ENCODER

    @property
    def policy_path(self) -> Path:
        return self.path / self.POLICY

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / self.CHECKPOINTS

    @property
    def tensorboard_dir(self) -> Path:
        return self.path / self.TENSORBOARD

    def has_checkpoint(self) -> bool:
        """Whether ``checkpoints/`` holds a checkpoint (``latest.pt`` or an ``iter_XXXXXX.pt``) to resume from."""
        ckpts = self.checkpoints_dir
        return (ckpts / self.LATEST).is_file() or any(ckpts.glob("iter_*.pt"))

    def never_checkpointed(self) -> bool:
        """Whether the folder holds a run's config.yaml but neither a checkpoint nor the policy that comes with one:
        a run stopped before its first checkpoint (during its pretraining, say), which cannot be resumed, only
        started again (a policy without checkpoints is a run shipped without them)."""
        return self.config_path.is_file() and not self.has_checkpoint() and not self.policy_path.exists()

    def restart_command(self) -> str:
        """The command that starts this run again from its saved config.yaml, into the same folder."""
        command = self.KINDS[self.kind() or self.SKILL_RUN][2]
        return f"{command} --config {shlex.quote(str(self.config_path))} --out {shlex.quote(str(self.path))}"

    def not_started(self) -> str:
        """Why a run that ``never_checkpointed`` has nothing to resume, and the command that starts it again."""
        return f"the run never reached its first checkpoint; start it again with: {self.restart_command()}"

    def check(self, *required: str) -> None:
        """Raise a clear error unless the folder exists and holds the required files."""
        if not self.path.is_dir():
            raise InputFileError(self.path, "run folder not found (train one with `rgsd train --config ...`)")
        missing = [r for r in (required or (self.CONFIG, self.POLICY)) if not (self.path / r).exists()]
        if missing:
            why = f"not a complete run folder: missing {', '.join(missing)}"
            if self.never_checkpointed():  # its files come with the set-up and the first checkpoint
                why += f": {self.not_started()}"
            raise InputFileError(self.path, why, missing[0])

    def kind(self) -> str | None:
        """``DOWNSTREAM_RUN`` when config.yaml names a ``low_level`` run, else ``SKILL_RUN``; None without a
        readable config.yaml mapping (the loaders say what is wrong with it)."""
        if not self.config_path.is_file():
            return None
        try:
            data = self.config()
        except InputFileError:
            return None
        return self.DOWNSTREAM_RUN if self.LOW_LEVEL_KEY in data else self.SKILL_RUN

    def check_kind(self, expected: str, command: str) -> None:
        """One line unless the folder is a run of kind ``expected`` (or no run yet) for ``command``, the words that
        took it (``rgsd eval --run``, ``rgsd train --resume``): the folder's kind and the command to use instead."""
        found = self.kind()
        if found is None or found == expected:
            return
        (what, by, found_command), (wanted, wanted_by, wanted_command) = self.KINDS[found], self.KINDS[expected]
        run = shlex.quote(str(self.path))
        if command == f"{wanted_command} --resume":
            fix = f"continue it with {found_command} --resume {run}"
            if found == self.SKILL_RUN:
                fix += f", or train a downstream policy over it with rgsd downstream --low-level {run}"
        elif found == self.DOWNSTREAM_RUN:
            low = shlex.quote(str(self.config()[self.LOW_LEVEL_KEY]))
            fix = f"its skill policy is the run {low}: {command} {low}"
        else:
            fix = f"give {wanted} ({wanted_by})"
        raise InputFileError(self.path, f"{what} ({by}), but {command} takes {wanted} ({wanted_by}); {fix}")

    def config(self) -> dict[str, Any]:
        """The resolved training config as a dict."""
        self.check(self.CONFIG)
        data = read_yaml(self.config_path) or {}
        if not isinstance(data, dict):
            raise InputFileError(self.config_path, "expected a mapping")
        return data

    def env_config(self, **overrides: Any) -> EnvConfig:
        """The EnvConfig the run trained with (``env:`` section), with overrides. A relative ``env.motions`` that
        names a file or folder inside the run folder is read from there (a shipped run carries its clips)."""
        from rgsd_envs.utils.config import from_dict

        data = dict(self.config().get("env", {}))
        if "motions" in data:
            data["motions"] = self.motions_in_folder(data["motions"])
        data.update(overrides)
        return from_dict(EnvConfig, data, str(self.config_path), "env.")

    def motions_in_folder(self, motions: Any) -> Any:
        """A config's ``env.motions`` as this run reads it: a relative path that names a file or folder inside the
        run folder made absolute (a shipped run carries its clips); anything else as given."""
        if isinstance(motions, str) and not Path(motions).is_absolute() and (self.path / motions).exists():
            return str((self.path / motions).resolve())
        return motions

    MOTIONS_FLAG_FIX = "give the clips with --motions PATH"
    """What a command that takes ``--motions`` tells the user to do when the run's clips are gone."""

    def training_motions(self, fix: str = MOTIONS_FLAG_FIX, role: str = "this run") -> Any:
        """The motions the run trained on (``env.motions`` of config.yaml, as ``env_config`` reads it); an error
        naming that field when a file or folder it names is gone (moved or renamed), which says what the caller
        calls the run (``role``) and how to go on (``fix``: by default the ``--motions`` flag of the commands that
        have one)."""
        motions = self.env_config().motions
        missing = missing_motion(motions)
        if missing is not None:
            raise InputFileError(
                self.config_path,
                f"motions not found: {missing} (the clips {role} trained on, as its config names them; moved or "
                f"renamed?); {fix}",
                "env.motions",
            )
        return motions

    def load_policy(self) -> PolicyMLP:
        """The exported policy (``rgsd_envs.runs.policy.PolicyMLP``)."""
        from rgsd_envs.runs.policy import load_policy

        self.check(self.POLICY)
        return load_policy(self.policy_path)

    def load_encoder(self, discovery: bool = False) -> MLPEncoder:
        """The frozen (or, with ``discovery``, the trained discovery) encoder."""
        from rgsd_envs.rewards.encoders import load_encoder

        path = self.discovery_encoder_path if discovery else self.encoder_path
        self.check(path.name)
        return load_encoder(path)

    def method(self) -> dict[str, Any] | None:
        """``method.json`` checked: ``name``, ``latent_choice`` and, for "encoder", ``encoder`` (a file of the
        run); None for runs written before methods existed."""
        path = self.path / self.METHOD
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise InputFileError(path, f"not valid JSON: {err}") from None
        choice = data.get("latent_choice") if isinstance(data, dict) else None
        if choice not in self.LATENT_CHOICES:
            raise InputFileError(
                path, f"latent_choice must be one of {', '.join(self.LATENT_CHOICES)}", "latent_choice"
            )
        key = {"encoder": "encoder", "clip_latents": "clip_latents", "tracking": "tracking_latents"}.get(choice)
        if key is not None and not (self.path / str(data.get(key, ""))).is_file():
            raise InputFileError(path, f"latent_choice {choice!r} needs {key!r}: a file of the run folder", key)
        return data

    METHOD_FILE_KEYS = ("encoder", "clip_latents", "tracking_latents")
    """The keys of ``method.json`` whose values are files of the run folder."""

    def method_files(self) -> list[Path]:
        """The run-folder files ``method.json`` names (its encoder, clip latents, tracking latents), checked to
        exist; none for runs without ``method.json``."""
        info = self.method() or {}
        named = {k: str(info[k]) for k in self.METHOD_FILE_KEYS if info.get(k)}
        for key, name in named.items():
            if not (self.path / name).is_file():
                raise InputFileError(self.path / self.METHOD, f"names {name!r}, which is not a file of the run", key)
        return [self.path / n for n in dict.fromkeys(named.values())]

    def clip_latents_path(self) -> Path | None:
        """The run's stored per-clip latents (``method.json``'s ``clip_latents`` file, also beside per-step
        ``tracking`` latents), or None."""
        info = self.method()
        if info is None or info["latent_choice"] not in ("clip_latents", "tracking") or "clip_latents" not in info:
            return None
        return self.path / info["clip_latents"]

    def tracking_latents_path(self) -> Path | None:
        """The run's stored per-step latents (``method.json``'s ``tracking_latents`` file), or None."""
        info = self.method()
        return (
            self.path / info["tracking_latents"] if info is not None and info["latent_choice"] == "tracking" else None
        )

    def latent_encoder_path(self) -> Path | None:
        """The encoder whose clip embeddings are the run's clip latents: ``method.json``'s, else encoder.pt when
        present (runs without ``method.json``); None when the method picks the best of N latents."""
        info = self.method()
        if info is None:
            return self.encoder_path if self.encoder_path.is_file() else None
        return self.path / info["encoder"] if info["latent_choice"] == "encoder" else None


def load_clip_latents(
    path: str | os.PathLike,
    names: list[str],
    device: torch.device | str = "cpu",
    skill_dim: int | None = None,
    run: str | os.PathLike | None = None,
) -> torch.Tensor:
    """(clips, d) unit latents in the library's clip order from a ``clip_latents`` JSON file (``skill_dim``: the d
    the caller needs, None: the file's, the same for every clip); ``run``: the run folder whose policy they will
    command, checked against the run ``rgsd eval`` chose them for (``latents_run``)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise InputFileError(path, f"not a readable clip-latents JSON file: {err}") from None
    if not isinstance(data, dict):
        raise InputFileError(path, "not a clip-latents file: it must map each clip name to its latent")
    missing = [n for n in names if n not in data]
    if missing:
        held = ", ".join(list(data)[:5]) + (", ..." if len(data) > 5 else "")
        selected = latents_selection(path)
        fix = (
            f"it was written by an evaluation of {selected['clips']} of {selected['of']} clips (--max-clips); "
            "evaluate every clip (rgsd eval without --max-clips) and give that report's clip_latents.json"
            if selected is not None
            else "give the motions it was made for (rgsd eval writes the latents of the clips it evaluated)"
        )
        raise InputFileError(
            path,
            f"no latent for clip {missing[0]!r} ({len(missing)} of the {len(names)} clips asked for have none; it "
            f"holds {len(data)}: {held}); {fix}",
        )
    sizes = sorted({len(data[n]) for n in names})
    if len(sizes) > 1 or (skill_dim is not None and sizes != [skill_dim]):
        want = f"{skill_dim} numbers (the env's skill_dim)" if skill_dim is not None else "the same count"
        raise InputFileError(path, f"latents must have {want}, got {', '.join(map(str, sizes))}")
    if run is not None and (chosen_for := latents_run(path)) is not None and chosen_for != Path(run).resolve():
        log.warning(
            "%s: rgsd eval chose these latents for the run %s, not for %s: give the clip_latents.json of an "
            "evaluation of this run",
            path, chosen_for, run,
        )  # fmt: skip
    z = torch.tensor([data[n] for n in names], dtype=torch.float32, device=device)
    return torch.nn.functional.normalize(z, dim=-1)


def _report_field(path: str | os.PathLike, *keys: str) -> Any:
    """The value at ``keys`` of the ``metrics.json`` of the ``rgsd eval`` report holding
    ``<report>/<run>/clip_latents.json`` at ``path``; None for a file elsewhere or a report without it."""
    path = Path(path)
    try:
        value = json.loads((path.parent.parent / "metrics.json").read_text())
        for key in keys:
            value = value[key]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return value


def latents_run(path: str | os.PathLike) -> Path | None:
    """The run folder an ``rgsd eval`` report's ``<report>/<run>/clip_latents.json`` was chosen for, read from the
    ``run_dir`` its ``metrics.json`` records; None for a file elsewhere, or when that run folder no longer exists
    (moved: nothing to compare with)."""
    record = _report_field(path, "runs", Path(path).parent.name, "run_dir")
    if record is None:
        return None
    chosen_for = Path(str(record)).resolve()
    return chosen_for if chosen_for.is_dir() else None


def latents_selection(path: str | os.PathLike) -> dict[str, Any] | None:
    """``{"clips": N, "of": M, ...}`` when an ``rgsd eval`` report's ``<report>/<run>/clip_latents.json`` holds the
    latents of only N of the motion set's M clips (``--max-clips``; its ``metrics.json``'s ``clips_selected``);
    None for a file elsewhere, or one of an evaluation of every clip."""
    selected = _report_field(path, "clips_selected")
    try:
        partial = int(selected["clips"]) < int(selected["of"])
    except (KeyError, TypeError, ValueError):
        return None
    return selected if partial else None


def save_tracking_latents(path: str | os.PathLike, latents: dict[str, torch.Tensor]) -> None:
    """Write ``{clip name: (steps, d) unit latents}`` (row t: the latent of the step from the clip's frame t) as
    an npz of ``names``, ``counts`` (steps per clip) and ``latents`` (all rows, clip after clip)."""
    names = list(latents)
    dim = next(iter(latents.values())).shape[-1] if latents else SKILL_DIM
    rows = [torch.as_tensor(latents[n], dtype=torch.float32).reshape(-1, dim).cpu() for n in names]
    with open(path, "wb") as f:
        np.savez(
            f,
            names=np.array(names, dtype=str),
            counts=np.array([r.shape[0] for r in rows], dtype=np.int64),
            latents=torch.cat(rows).numpy() if rows else np.zeros((0, dim), np.float32),
        )


def load_tracking_latents(
    path: str | os.PathLike, names: list[str], num_frames: list[int], skill_dim: int | None = None
) -> list[np.ndarray]:
    """Per clip of ``names`` (with ``num_frames`` frames each): its (num_frames - 1, d) unit latents, one per step,
    from a ``save_tracking_latents`` file (float64 of the stored float32 rows; ``skill_dim``: the d the caller
    needs, None: the file's)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            stored, counts, rows = list(data["names"]), data["counts"], data["latents"]
    except (OSError, ValueError, KeyError) as err:
        raise InputFileError(path, f"not a readable tracking-latents file: {err}") from None
    if rows.ndim != 2 or (skill_dim is not None and rows.shape[1] != skill_dim):
        want = f"{skill_dim} numbers a row (the env's skill_dim)" if skill_dim is not None else "2-D rows"
        raise InputFileError(path, f"latents must have {want}, got shape {rows.shape}")
    ends = np.cumsum(counts)
    by_name = {str(n): rows[e - c : e] for n, c, e in zip(stored, counts, ends)}
    out = []
    for name, frames in zip(names, num_frames):
        if name not in by_name:
            raise InputFileError(path, f"no latents for clip {name!r} (the clips asked for: {', '.join(names)})")
        z = by_name[name].astype(np.float64)
        if z.shape[0] != int(frames) - 1:
            raise InputFileError(
                path,
                f"clip {name!r} has {z.shape[0]} latents, one per step of its {int(frames)} frames needs {frames - 1}",
            )
        if z.size and np.abs(np.linalg.norm(z, axis=-1) - 1.0).max() > 1e-4:
            raise InputFileError(path, f"clip {name!r}: latents must be unit vectors")
        out.append(z)  # as stored: the run's own probe acted with exactly these
    return out
