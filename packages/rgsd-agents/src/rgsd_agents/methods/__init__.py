"""Skill-discovery methods: one module per method behind one interface (``base.SkillMethod``).

``METHODS`` holds every method by name. Each class says the loop it trains in (``LOOP``: the PPO runner or the
off-policy runner) and how evaluation picks a clip's latent (``LATENT_CHOICE``); docs/methods.md tabulates them
with each method's reward.

A training config names its method (``method.name``) and its options
(``method.options``, the method's ``CONFIG`` dataclass); the training command
resolves the class here and the loop it names (``rgsd_agents.training.trainers``:
the PPO runner or the off-policy runner). A new method is one more module
with a ``SkillMethod`` subclass and a line in ``METHODS``, plus its presets and test settings
(docs/methods.md, "Adding a method").
"""

from __future__ import annotations

from typing import Any

from rgsd_agents.methods.ase import ASE
from rgsd_agents.methods.base import MethodContext, SkillMethod
from rgsd_agents.methods.calm import CALM
from rgsd_agents.methods.fb_cpr import FBCPR
from rgsd_agents.methods.metra import METRA
from rgsd_agents.methods.rgsd import DIAYN, RGSD
from rgsd_envs.utils.config import UNNAMED, from_dict

METHODS: dict[str, type[SkillMethod]] = {m.NAME: m for m in (RGSD, DIAYN, ASE, CALM, METRA, FBCPR)}
"""Every method by name (``method.name`` of a training config)."""


def method_names() -> list[str]:
    """Every valid ``method.name``."""
    return list(METHODS)


def method_class(name: str) -> type[SkillMethod]:
    """The method class of ``name``, or a clear error listing the methods."""
    if name not in METHODS:
        raise ValueError(f"method.name must be one of {', '.join(method_names())}, got {name!r}")
    return METHODS[name]


def method_config(name: str, options: dict[str, Any], source: str = UNNAMED) -> Any:
    """The method's config dataclass from ``method.options`` (unknown keys are errors naming the key)."""
    return from_dict(method_class(name).CONFIG, dict(options or {}), source, "method.options.")


def build_method(name: str, options: dict[str, Any], ctx: MethodContext, source: str = UNNAMED) -> SkillMethod:
    """An instance of method ``name`` with its options."""
    return method_class(name)(method_config(name, options, source), ctx)


__all__ = ["METHODS", "MethodContext", "SkillMethod", "build_method", "method_class", "method_names"]
