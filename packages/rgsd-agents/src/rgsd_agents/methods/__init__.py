"""Skill-discovery methods on the shared PPO runner: one module per method (see ``base.SkillMethod``).

=========  =====================================  ==========================================
method     module                                 latent of a clip at evaluation
=========  =====================================  ==========================================
rgsd       ``rgsd_agents.runner`` / ``discovery``  the frozen encoder's clip embedding
diayn      rgsd with ``encoder_init: random``     the (random) encoder's clip embedding
ase        ``methods.ase``                        best of N sampled latents
calm       ``methods.calm``                       the motion encoder's clip embedding
metra      ``methods.metra``                      best of N sampled latents
=========  =====================================  ==========================================

RGSD and its DIAYN ablation are the runner's built-in path (the env scores the
encoder reward itself and ``discovery.DiscoveryTrainer`` updates the discovery
encoder); the baselines plug in through ``SkillMethod``. Meta Motivo (FB-CPR)
is not included: it would be one more module here whose ``relabel`` writes the
forward-backward reward F(s, a, z)^T z from its own networks and whose latents
come from B(s) of reference windows (like CALM's encoder).
"""

from __future__ import annotations

from typing import Any

from rgsd_agents.methods.ase import ASE
from rgsd_agents.methods.base import MethodContext, SkillMethod
from rgsd_agents.methods.calm import CALM
from rgsd_agents.methods.metra import METRA
from rgsd_envs.utils.config import from_dict

METHODS: dict[str, type[SkillMethod]] = {m.NAME: m for m in (ASE, CALM, METRA)}
"""The plug-in methods by name (``method.name`` of a training config)."""
BUILTIN = "rgsd"
"""The runner's own method (RGSD, and DIAYN with a random encoder)."""


def method_names() -> list[str]:
    """Every valid ``method.name``."""
    return [BUILTIN, *METHODS]


def method_config(name: str, options: dict[str, Any], source: str = "<config>") -> Any:
    """The method's config dataclass from ``method.options`` (unknown keys are errors naming the key)."""
    if name not in METHODS:
        raise ValueError(f"method.name must be one of {', '.join(method_names())}, got {name!r}")
    return from_dict(METHODS[name].CONFIG, dict(options or {}), source, "method.options.")


def build_method(name: str, options: dict[str, Any], ctx: MethodContext, source: str = "<config>") -> SkillMethod:
    """An instance of method ``name`` with its options."""
    return METHODS[name](method_config(name, options, source), ctx)


__all__ = ["BUILTIN", "METHODS", "MethodContext", "SkillMethod", "build_method", "method_names"]
