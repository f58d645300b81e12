"""Inputs of an evaluation, checked before any work starts: run folders and the motion set."""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rgsd_envs.envs.config import CPU_MUJOCO, EnvConfig
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.rewards.encoders import read_encoder_file
from rgsd_envs.runs.policy import DEFAULT_LOG_STD, FB_CPR_ACTOR_STD, PolicyMLP, check_policy_fits
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.device import env_device, resolve_device
from rgsd_envs.utils.files import InputFileError
from rgsd_eval.latents import LatentMode, auto_latent_mode, parse_latent_mode
from rgsd_eval.rollouts import eval_env_config

log = logging.getLogger(__name__)


AUTO_MODES = {
    "encoder": LatentMode("encoder"),
    "clip_latents": LatentMode("stored"),
    "tracking": LatentMode("tracking"),
}
"""``--latent auto`` for a run's ``method.json`` ``latent_choice`` (others: best-of-N; "tracking" without
``per_step``: ``ONE_PER_MOTION``)."""
ONE_PER_MOTION = LatentMode("stored")
"""``--latent auto`` for a per-step ("tracking") run when every method gets one latent per motion (the paper
protocol): the latent per clip it stored."""


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
    """The encoder whose clip embeddings are z_m: the frozen encoder, or the method's motion encoder
    (``method.json``); None when the run has none (the env's default encoder)."""
    latent: LatentMode
    method: str = "rgsd"
    """The run's skill method (``method.json``; older runs: rgsd, or diayn with a random encoder)."""
    clip_latents: Path | None = None
    """The run's stored per-clip latents (``method.json``'s ``clip_latents``), read by the "stored" mode."""
    tracking_latents: Path | None = None
    """The run's stored per-step latents (``method.json``'s ``tracking_latents``), read by the "tracking" mode."""
    action_std: np.ndarray = field(default_factory=lambda: np.full(sk.NUM_DOFS, math.exp(DEFAULT_LOG_STD)))
    """(act_dim,) the std of the run's own action distribution (``action_std``)."""
    action_std_source: str = "default"
    """Where ``action_std`` was read (the report states it)."""
    training_samples: int | None = None
    """Environment transitions the run trained on (``policy.pt``'s ``global_step``; None if not recorded)."""
    clip_latents_rule: str | None = None
    """What the run's stored clip latent is, in words (``method.json``'s ``clip_latents_rule``; None if it does not
    say)."""
    policy_provenance: dict[str, Any] | None = None
    """The code that wrote the run's ``policy.pt`` (its ``provenance``; None for a policy written before policies
    carried it)."""


def action_std(policy: PolicyMLP, config: dict[str, Any], method: str) -> tuple[np.ndarray, str]:
    """(act_dim,) std of the run's own Gaussian action distribution and where it was read: the exported actor's
    ``action_std`` (the trainer writes its log_std's exp, or FB-CPR's fixed std), else the run config's
    ``method.options.actor_std`` for FB-CPR (default 0.2) or ``networks.init_log_std`` (exp), else exp(-2.9)."""
    n = policy.act_dim
    stored = getattr(policy, "meta", {}).get("action_std")
    if stored is not None:
        std = np.broadcast_to(np.asarray(stored, dtype=np.float64), (n,)).copy()
        return std, "policy.pt action_std"
    if method == "fb_cpr":
        options = (config.get("method") or {}).get("options") or {}
        value = float(options.get("actor_std", FB_CPR_ACTOR_STD))
        return np.full(n, value), "config.yaml method.options.actor_std, FB-CPR's default 0.2"
    log_std = (config.get("networks") or {}).get("init_log_std")
    if log_std is not None:
        return np.full(n, math.exp(float(log_std))), "config.yaml networks.init_log_std"
    return np.full(
        n, math.exp(DEFAULT_LOG_STD)
    ), f"the trainer's default exp({DEFAULT_LOG_STD:g}): the run records no std"


def load_run(
    path: str | os.PathLike,
    latent: str = "auto",
    best_of: int = 64,
    label: str | None = None,
    device: str = "cpu",
    per_step: bool = True,
) -> LoadedRun:
    """Check a run folder (config.yaml, policy.pt, encoder.pt when needed) and load what evaluation needs;
    the policy goes to ``device`` ("auto", "cpu", "cuda", "cuda:N"); ``per_step`` False: "auto" gives a run with
    per-step latents its one stored latent per clip (``EvalConfig.per_step_latents``)."""
    run = RunDir(path)
    run.check(RunDir.CONFIG, RunDir.POLICY)
    policy = run.load_policy().to(resolve_device(device))
    base = run.env_config()
    check_policy_fits(policy, run.policy_path, base.layout)
    raw = run.config()
    info = run.method()
    latent_encoder = run.latent_encoder_path()
    mode = parse_latent_mode(latent)
    one_per_motion = False
    if mode.kind == "auto" and info is not None:  # the run's method says how its paper picks a clip's latent
        mode = AUTO_MODES.get(info["latent_choice"], LatentMode("best-of", best_of))
        one_per_motion = mode.kind == "tracking" and not per_step
        mode = ONE_PER_MOTION if one_per_motion else mode
    elif mode.kind == "auto":
        mode = auto_latent_mode(base.p_imitation, raw.get("encoder_init"), latent_encoder is not None, best_of)
    if mode.kind == "encoder" and latent_encoder is None and run.encoder_path.is_file():
        latent_encoder = run.encoder_path  # asked for explicitly: the run's frozen encoder, as before method.json
        if info is not None:  # a method that picks its latents otherwise: encoder.pt is its random initial encoder
            log.warning(
                "%s: --latent encoder evaluates the clip embeddings of %s, which %s's training does not use for its "
                "clip latents (method.json latent_choice %s); --latent auto evaluates the method's own",
                run.name,
                run.encoder_path,
                info["name"],
                info["latent_choice"],
            )
    if mode.kind == "encoder" and latent_encoder is None:
        raise InputFileError(
            run.encoder_path, "missing: --latent encoder needs the run's frozen encoder; use --latent best-of-N instead"
        )
    stored = run.clip_latents_path()
    if one_per_motion and stored is None:
        raise InputFileError(
            run.file(RunDir.METHOD),
            "names per-step latents but no clip_latents: this protocol scores one latent per motion; evaluate with "
            "--set per_step_latents=true or --latent tracking",
            "clip_latents",
        )
    if mode.kind == "stored" and stored is None:
        raise InputFileError(
            run.file(RunDir.METHOD), "--latent stored needs a run whose method.json names clip_latents", "clip_latents"
        )
    tracking = run.tracking_latents_path()
    if mode.kind == "tracking" and tracking is None:
        raise InputFileError(
            run.file(RunDir.METHOD),
            "--latent tracking needs a run whose method.json has latent_choice tracking (Meta Motivo)",
            "tracking_latents",
        )
    encoder = latent_encoder or (run.encoder_path if run.encoder_path.is_file() else None)
    if encoder is not None:  # a corrupt file or one of another skill space: said before any run is evaluated
        read_encoder_file(encoder, base.skill_dim)
    env_config, fall_height = eval_env_config(base)
    # a warp run's config names the CPU; its env follows the policy's device as it followed the learner's in training
    env_config = dataclasses.replace(
        env_config, device=env_device(env_config.backend, env_config.device, resolve_device(device))
    )
    method = info["name"] if info is not None else ("diayn" if raw.get("encoder_init") == "random" else "rgsd")
    std, source = action_std(policy, raw, method)
    meta = getattr(policy, "meta", {})
    samples = meta.get("global_step")
    return LoadedRun(
        run, label or run.name, policy, env_config, fall_height, encoder, mode, method, stored, tracking, std, source,
        None if samples is None else int(samples), None if info is None else info.get("clip_latents_rule"),
        meta.get("provenance"),
    )  # fmt: skip


def on_cpu_mujoco(loaded: LoadedRun) -> LoadedRun:
    """``loaded`` with its env on native MuJoCo on the CPU (``CPU_MUJOCO``), whichever backend trained it: how
    ``rgsd view`` and ``rgsd play`` run a policy on any machine."""
    return dataclasses.replace(loaded, env_config=dataclasses.replace(loaded.env_config, **CPU_MUJOCO))


def best_of_latents_needed(loaded: LoadedRun) -> InputFileError:
    """The refusal of a command that plays a best-of-N run (DIAYN, ASE, METRA) without the clip latents ``rgsd
    eval`` chose for it: the run stores none of its own."""
    return InputFileError(
        loaded.run.path,
        f"this {loaded.method} run picks each clip's latent by best-of-N; give the ones rgsd eval chose: "
        f"--latents <report>/{loaded.run.name}/clip_latents.json (its folder is {loaded.run.name}-2, "
        f"{loaded.run.name}-3, ... in a report that evaluated it after runs of the same name)",
    )


def unique_labels(names: list[str]) -> list[str]:
    """Names made unique by numbering repeats (two runs called "run" become "run" and "run-2")."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n}-{seen[n]}")
    return out


def representative_clips(lib: MotionLib, n: int) -> list[int]:
    """Up to n clip indices: the first clip of each category first, then the others in order."""
    firsts = [lib.categories.index(c) for c in dict.fromkeys(lib.categories)]
    rest = [i for i in range(lib.num_clips) if i not in firsts]
    return (firsts + rest)[:n]
