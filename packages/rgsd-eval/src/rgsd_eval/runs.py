"""Inputs of an evaluation, checked before any work starts: run folders and the motion set."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.observations import POLICY_OBS_DIM
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.runs.policy import PolicyMLP
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.device import resolve_device
from rgsd_envs.utils.files import InputFileError
from rgsd_eval.latents import LatentMode, auto_latent_mode, parse_latent_mode
from rgsd_eval.rollouts import eval_env_config


@dataclass
class LoadedRun:
    """A checked run folder: its policy, evaluation env config and how its clip latents are chosen."""

    run: RunDir
    label: str
    policy: PolicyMLP
    env_config: EnvConfig
    """The run's EnvConfig made for evaluation (``rollouts.eval_env_config``)."""
    fall_height: float
    """The run's own fall height, for the fall flag."""
    encoder_path: Path | None
    """The frozen encoder (None when the run has none: the env's default encoder gives z_m)."""
    latent: LatentMode


def load_run(
    path: str | os.PathLike,
    latent: str = "auto",
    best_of: int = 64,
    label: str | None = None,
    device: str = "cpu",
) -> LoadedRun:
    """Check a run folder (config.yaml, policy.pt, encoder.pt when needed) and load what evaluation needs;
    the policy goes to ``device`` ("auto", "cpu", "cuda", "cuda:N")."""
    run = RunDir(path)
    run.check(RunDir.CONFIG, RunDir.POLICY)
    policy = run.load_policy().to(resolve_device(device))
    if policy.obs_dim != POLICY_OBS_DIM or policy.act_dim != sk.NUM_DOFS:
        field = "obs_dim" if policy.obs_dim != POLICY_OBS_DIM else "act_dim"
        raise InputFileError(
            run.policy_path,
            f"policy maps {policy.obs_dim} -> {policy.act_dim}; RGSD-SMPL-v0 needs {POLICY_OBS_DIM} -> {sk.NUM_DOFS}",
            field,
        )
    base = run.env_config()
    raw = run.config()
    has_encoder = run.encoder_path.is_file()
    mode = parse_latent_mode(latent)
    if mode.kind == "auto":
        mode = auto_latent_mode(base.p_imitation, raw.get("encoder_init"), has_encoder, best_of)
    if mode.kind == "encoder" and not has_encoder:
        raise InputFileError(
            run.encoder_path, "missing: --latent encoder needs the run's frozen encoder; use --latent best-of-N instead"
        )
    env_config, fall_height = eval_env_config(base)
    return LoadedRun(
        run, label or run.name, policy, env_config, fall_height, run.encoder_path if has_encoder else None, mode
    )


def unique_labels(names: list[str]) -> list[str]:
    """Names made unique by numbering repeats (two runs called "run" become "run" and "run-2")."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n}-{seen[n]}")
    return out


def load_motions(spec: str | os.PathLike) -> MotionLib:
    """The evaluation clips: "demo", a clip file or a folder of clips; a clear error otherwise."""
    if str(spec) != "demo" and not Path(spec).exists():
        raise InputFileError(spec, "motions not found: give 'demo', an rgsd clip file (.npz) or a folder of clips")
    return MotionLib(spec)


def representative_clips(lib: MotionLib, n: int) -> list[int]:
    """Up to n clip indices: the first clip of each category first, then the others in order."""
    firsts = [lib.categories.index(c) for c in dict.fromkeys(lib.categories)]
    rest = [i for i in range(lib.num_clips) if i not in firsts]
    return (firsts + rest)[:n]
