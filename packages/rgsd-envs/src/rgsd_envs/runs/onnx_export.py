"""A trained policy as one ONNX file that runs without Python: the actor mean with its observation normaliser.

Graph (``rgsd export RUN --onnx policy.onnx``)::

    obs        float32 (batch, D)    the flat observation [o_t (359), z (skill_dim)]: D = 359 + skill_dim, 375 for
                                     16-D skills (layout in the metadata)
    -> action  float32 (batch, 69)   the policy's mean action (what ``PolicyMLP.act`` returns)
    -> pd_target float32 (batch, 69) offset + scale * clip(action, -1, 1): joint targets (rad) in joint order

The running observation statistics are constants of the graph
(``clip((obs - mean) / sqrt(var + eps), -c, c)``), so the file needs nothing
else. Everything a controller outside rgsd needs to build the observation and
apply the action is in the model's ``metadata_props`` under the key ``rgsd``
(one JSON object, read it with :func:`read_metadata`): observation layout,
action offset and scale, joint and body order, PD gains and torque limits,
control and physics time steps, skill size, and the skills to command: each
clip's latent with the clip names and categories, and where the latents came
from. The run's method picks them (``rgsd export`` passes them as
:class:`ClipSkills`, chosen as ``rgsd play`` chooses them); without them, a run
whose method commands its encoder's clip embeddings gets those.

Needs the ``export`` extra (``pip install rgsd-envs[export]``: onnx and
onnxscript for torch's exporter, onnxruntime to check the file).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from rgsd_envs.envs.observations import FRAME_DIM, FRAME_LAYOUT
from rgsd_envs.envs.registration import ENV_ID
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.humanoid.mjcf import CONTROL_HZ
from rgsd_envs.runs.policy import PolicyMLP, check_policy_fits
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.files import InputFileError, atomic_path

ONNX_FORMAT = "rgsd-onnx-policy"
ONNX_FORMAT_VERSION = 1
METADATA_KEY = "rgsd"
"""The ``metadata_props`` key whose value is the JSON metadata."""
INPUT_NAME = "obs"
OUTPUT_NAMES = ("action", "pd_target")
INSTALL_HINT = "pip install rgsd-envs[export]"


class MissingExportDependency(ImportError):
    """onnx, onnxscript or onnxruntime is not installed; the message says what to install."""


def require(*modules: str) -> None:
    """Import ``modules`` or raise MissingExportDependency with the pip command."""
    missing = []
    for name in modules:
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise MissingExportDependency(f"ONNX export needs {', '.join(missing)}: {INSTALL_HINT}")


class ExportedPolicy(nn.Module):
    """The graph that is exported: normalise with constant statistics, actor MLP, PD targets."""

    def __init__(self, policy: PolicyMLP):
        super().__init__()
        norm = policy.normalizer
        # The same arithmetic as ObsNormalizer.forward for float32 inputs: statistics cast after the float64 sqrt.
        self.register_buffer("mean", norm.mean.detach().to(torch.float32).clone())
        self.register_buffer("std", (norm.var + norm.eps).sqrt().detach().to(torch.float32).clone())
        self.register_buffer("offset", torch.as_tensor(sk.ACTION_OFFSET, dtype=torch.float32))
        self.register_buffer("scale", torch.as_tensor(sk.ACTION_SCALE, dtype=torch.float32))
        self.clip = float(norm.clip)
        self.net = policy.net
        self.squash = policy.output == "tanh"

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(action, pd_target) for raw observations (B, 375)."""
        action = self.net(((obs - self.mean) / self.std).clamp(-self.clip, self.clip))
        if self.squash:
            action = torch.tanh(action)
        return action, self.offset + self.scale * action.clamp(-1.0, 1.0)


@dataclass(frozen=True)
class ClipSkills:
    """Each clip's latent to command, by clip name, and where the latents came from (the metadata's
    ``clip_embeddings_from``)."""

    names: list[str]
    latents: np.ndarray
    """(clips, skill_dim) unit latents in ``names`` order."""
    source: str


def _floats(x: Any) -> list:
    return np.asarray(x, dtype=np.float64).round(9).tolist()


def _skill_encoder(run: RunDir) -> Path | None:
    """The encoder whose clip embeddings the run commands (``RunDir.latent_encoder_path``; None: the env's default
    encoder); an error for a run whose method commands other latents (``method.json``): its encoder.pt is not
    what picks its skills."""
    info = run.method()
    if info is not None and info["latent_choice"] != "encoder":
        raise InputFileError(
            run.file(RunDir.METHOD),
            f"this {info['name']} run commands its {info['latent_choice']} latents, not an encoder's clip "
            "embeddings: export it with `rgsd export`, which picks them as rgsd play does (or pass clip_skills)",
            "latent_choice",
        )
    return run.latent_encoder_path()


def _ordered_skills(skills: ClipSkills, names: list[str], skill_dim: int) -> np.ndarray:
    """(clips, skill_dim) ``skills`` in the library's clip order, or an error naming what does not fit."""
    missing = [n for n in names if n not in skills.names]
    if missing:
        raise ValueError(f"the clip skills ({skills.source}) have no latent for clip {missing[0]!r}")
    z = np.asarray(skills.latents, dtype=np.float64)
    if z.ndim != 2 or z.shape != (len(skills.names), skill_dim):
        raise ValueError(f"the clip skills ({skills.source}) must be ({len(skills.names)}, {skill_dim}), got {z.shape}")
    return z[[skills.names.index(n) for n in names]]


def policy_metadata(
    run: RunDir,
    policy: PolicyMLP,
    clip_skills: ClipSkills | None = None,
    motions: str | os.PathLike | list[str] | None = None,
) -> dict[str, Any]:
    """The JSON metadata of a run's exported policy (see the module docstring); ``clip_skills``: the latents to
    command (None: the encoder's clip embeddings, for a run whose method commands those); ``motions``: the clips
    (None: the run's own, ``RunDir.training_motions``; a moved run's clips where they are now)."""
    from rgsd_envs.envs.core import library_clip_embeddings
    from rgsd_envs.motion.library import MotionLib

    env_cfg = run.env_config()
    layout = env_cfg.layout
    lib = MotionLib(motions or run.training_motions())  # clip names, categories and body offsets; no worlds
    body_offsets = lib.body_offsets
    if clip_skills is None:
        encoder = _skill_encoder(run)
        z_m = library_clip_embeddings(lib, encoder, layout.skill_dim).numpy()
        source = "encoder z_m ({})".format("the env's default encoder" if encoder is None else encoder.name)
    else:
        z_m, source = _ordered_skills(clip_skills, list(lib.names), layout.skill_dim), clip_skills.source
    return {
        "format": ONNX_FORMAT,
        "version": ONNX_FORMAT_VERSION,
        "env_id": ENV_ID,
        "source": {
            "run": str(run.path.resolve()),
            "policy": str(run.policy_path.resolve()),
            **{k: v for k, v in policy.meta.items() if isinstance(v, (int, float, str))},
        },
        "inputs": {INPUT_NAME: {"shape": ["batch", layout.policy_obs_dim], "dtype": "float32"}},
        "outputs": {name: {"shape": ["batch", sk.NUM_DOFS], "dtype": "float32"} for name in OUTPUT_NAMES},
        "observation": {
            "dim": layout.policy_obs_dim,
            "frame_dim": FRAME_DIM,
            "layout": {name: [s.start, s.stop] for name, s in {**FRAME_LAYOUT, "skill": layout.skill}.items()},
            "description": (
                "flat [o_t, z]: phase = frame index / (clip frames - 1); root height (m); positions of bodies 1..23 "
                "relative to the root; rotations of all 24 bodies as tangent-normal 6-D (x and z axes); linear and "
                "angular velocities of all 24 bodies; all in the root's heading (yaw-only) frame, bodies in "
                "body_names order; z the unit skill vector (rgsd_envs.envs.observations)"
            ),
            "normalizer": "baked into the graph: clip((obs - mean) / sqrt(var + eps), -c, c)",
            "normalizer_clip": float(policy.normalizer.clip),
        },
        "action": {
            "dim": sk.NUM_DOFS,
            "range": [-1.0, 1.0],
            "offset": _floats(sk.ACTION_OFFSET),
            "scale": _floats(sk.ACTION_SCALE),
            "pd_target": "offset + scale * clip(action, -1, 1), radians, joint_order",
        },
        "joint_order": list(sk.DOF_NAMES),
        "joint_ranges": _floats(sk.DOF_RANGES),
        "body_names": list(sk.BODY_NAMES),
        "body_offsets": _floats(body_offsets),
        "pd_gains": {"kp": _floats(sk.KP), "kd": _floats(sk.KD), "torque_limit": _floats(sk.TORQUE_LIMITS)},
        "control_dt": 1.0 / CONTROL_HZ,
        "physics_timestep": float(env_cfg.timestep),
        "skill_dim": layout.skill_dim,
        "clip_names": list(lib.names),
        "clip_categories": list(lib.categories),
        "clip_embeddings": _floats(z_m),
        "clip_embeddings_from": source,
    }


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """Hide the exporter's chatter (missing torchvision ops, deprecations) that says nothing about this model."""
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "torch._dynamo", "onnxscript", "onnx_ir")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def export_onnx(
    run_dir: str | os.PathLike,
    out_path: str | os.PathLike,
    clip_skills: ClipSkills | None = None,
    motions: str | os.PathLike | list[str] | None = None,
) -> Path:
    """Write ``run_dir``'s policy as ONNX with its metadata to ``out_path`` (atomically); returns the path.
    ``clip_skills``, ``motions``: the latents the metadata gives to command and the clips they are for (see
    ``policy_metadata``)."""
    require("onnx", "onnxscript")
    import onnx

    out_path = Path(out_path)
    if out_path.suffix.lower() != ".onnx":
        raise ValueError(f"the output path {str(out_path)!r} should end in .onnx")
    run = RunDir(run_dir)
    run.check(RunDir.CONFIG, RunDir.POLICY)
    policy = run.load_policy()
    check_policy_fits(policy, run.policy_path, run.env_config().layout)
    meta = policy_metadata(run, policy, clip_skills, motions)
    module = ExportedPolicy(policy).eval()
    example = torch.zeros(2, policy.obs_dim)
    with _quiet_exporter(), torch.no_grad():
        program = torch.onnx.export(
            module,
            (example,),
            dynamo=True,
            input_names=[INPUT_NAME],
            output_names=list(OUTPUT_NAMES),
            dynamic_shapes={INPUT_NAME: {0: torch.export.Dim("batch")}},
            verbose=False,
        )
    proto = program.model_proto
    proto.doc_string = (
        f"rgsd policy of {run.path.resolve().name}: obs (batch, {policy.obs_dim}) -> action, pd_target (batch, 69)"
    )
    entry = proto.metadata_props.add()
    entry.key, entry.value = METADATA_KEY, json.dumps(meta)
    onnx.checker.check_model(proto)
    with atomic_path(out_path) as tmp:
        onnx.save_model(proto, str(tmp))
    return out_path


def read_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The rgsd metadata of an exported ONNX file (needs the onnx package)."""
    require("onnx")
    import onnx

    path = Path(path)
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as err:
        raise InputFileError(path, f"not a readable ONNX file: {err}") from None
    props = {p.key: p.value for p in model.metadata_props}
    if METADATA_KEY not in props:
        raise InputFileError(path, "no rgsd metadata (not written by rgsd export)", f"metadata_props[{METADATA_KEY}]")
    return json.loads(props[METADATA_KEY])


CHECK_SIGMAS = (2.0, 20.0)
"""Spreads of ``check_onnx``'s observations, in standard deviations of the training statistics: near them, and far
beyond the normaliser's clip, so that the graph's clip is exercised too."""


def check_onnx(path: str | os.PathLike, policy: PolicyMLP, num: int = 256, seed: int = 0) -> dict[str, float]:
    """Largest |difference| between onnxruntime's outputs and the torch policy's, per output (``action``:
    ``PolicyMLP.act``; ``pd_target``: ACTION_OFFSET + ACTION_SCALE * clip(action, -1, 1)), on ``num`` random
    observations around the training statistics, a share of them at each spread of ``CHECK_SIGMAS``."""
    require("onnxruntime")
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    gen = torch.Generator().manual_seed(seed)
    norm = policy.normalizer
    std = (norm.var + norm.eps).sqrt().to(torch.float32)
    sigmas = torch.tensor(CHECK_SIGMAS).repeat_interleave(-(-num // len(CHECK_SIGMAS)))[:num, None]
    obs = norm.mean.to(torch.float32) + std * torch.randn(num, policy.obs_dim, generator=gen) * sigmas
    got = dict(zip(OUTPUT_NAMES, session.run(list(OUTPUT_NAMES), {INPUT_NAME: obs.numpy()})))
    action = policy.act(obs).numpy()
    expected = {"action": action, "pd_target": sk.ACTION_OFFSET + sk.ACTION_SCALE * np.clip(action, -1.0, 1.0)}
    return {name: float(np.abs(got[name] - expected[name]).max()) for name in OUTPUT_NAMES}
