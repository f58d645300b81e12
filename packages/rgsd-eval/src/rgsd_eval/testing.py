"""Fabricated run folders for tests and smoke checks: small random policy and encoder, a config.yaml."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import yaml

from rgsd_envs.envs.observations import FRAME_DIM, SKILL_DIM
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.rewards.encoders import MLPEncoder
from rgsd_envs.runs.policy import PolicyMLP


def make_fake_run(
    path: str | os.PathLike,
    *,
    motions: str = "demo",
    hidden: Sequence[int] = (32, 32),
    encoder_hidden: Sequence[int] | None = (32,),
    p_imitation: float = 0.7,
    encoder_init: str = "pretrained",
    seed: int = 0,
    env: dict[str, Any] | None = None,
    method: dict[str, Any] | None = None,
    skill_dim: int = SKILL_DIM,
) -> Path:
    """A run folder (config.yaml, policy.pt, encoder.pt unless encoder_hidden is None) with random weights;
    ``method`` is written as method.json (an ``encoder`` it names is written as a random encoder too); skills of
    ``skill_dim`` (written as ``env.skill_dim`` when not the default)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    config = {
        "seed": seed,
        "encoder_init": encoder_init,
        "env": {
            "motions": motions,
            "p_imitation": p_imitation,
            **({} if skill_dim == SKILL_DIM else {"skill_dim": skill_dim}),
            **(env or {}),
        },
    }
    (path / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    PolicyMLP(FRAME_DIM + skill_dim, sk.NUM_DOFS, hidden).save(path / "policy.pt", fabricated=True)
    if encoder_hidden is not None:
        MLPEncoder(encoder_hidden, out_dim=skill_dim).save(path / "encoder.pt")
    if method is not None:
        if method.get("encoder"):
            MLPEncoder((16,), out_dim=skill_dim).save(path / method["encoder"])
        (path / "method.json").write_text(json.dumps(method))
    return path


def make_fake_tracking_run(path: Path, seed: int = 0) -> tuple[Path, dict[str, torch.Tensor]]:
    """A fake Meta Motivo run at ``path`` (``latent_choice`` "tracking") whose tracking latents are random unit rows,
    one per step of each demo clip; the run folder and those latents by clip name."""
    from rgsd_envs.motion.library import MotionLib
    from rgsd_envs.runs.run_dir import save_tracking_latents

    method = {"name": "fb_cpr", "latent_choice": "tracking", "tracking_latents": "tracking.npz"}
    run = make_fake_run(path, p_imitation=0.0, encoder_hidden=None, method=method)
    lib = MotionLib("demo")
    gen = torch.Generator().manual_seed(seed)
    per_step = {
        n: torch.nn.functional.normalize(torch.randn(int(f) - 1, SKILL_DIM, generator=gen), dim=-1)
        for n, f in zip(lib.names, lib.num_frames)
    }
    save_tracking_latents(run / "tracking.npz", per_step)
    return run, per_step
