"""Evaluation protocols: the numbers that make an evaluation "quick" or "the paper's", in one place.

``rgsd eval --protocol NAME`` starts from one of these (``EvalConfig.for_protocol``);
``--config`` and the flags then override its settings one by one, and the report
names the protocol and every setting that differs from it.

The paper's protocol (paper Sections 5.1-5.3; docs/evaluation.md, Protocols):

- Imitation: 500 stochastic trajectories per motion from its first frame with its
  latent. The paper does not state the action noise; each run acts with its own
  policy's action distribution (``POLICY_NOISE``: the std its trainer sampled with,
  ``runs.action_std``: the PPO actors' exp(log_std), 0.055 in the presets; Meta
  Motivo's fixed 0.2), so no method is scored under another's exploration noise.
  Methods without a motion encoder take the best of 500 uniform latents by ERR.
  Every method is scored with one latent per motion (paper Section 5.1: CALM and
  Meta Motivo take theirs from their motion encoders), so a run whose method picks
  a latent per step (Meta Motivo's tracking inference) is scored with the one latent
  per clip it stored (B averaged over the clip; ``per_step_latents``).
- Discovery: z ~ vMF(z_m, 50) on every motion, ERR and FID per motion category under
  those latents, and top views of up to 150 pelvis trajectories per clip beside the
  references (the paper shows 150 per method, not saying how they split over motions).
- Diversity control: kappa in {20, 100, 1000} on three motions. paper.tex does not name
  the three (its appendix figure has no labels). We take the first clip of ``run``,
  ``sidestep`` and ``backward``: the locomotion styles that its Figure 3 shows as
  skills sampled near a motion embedding (running, backward, sidestepping; punching,
  the fourth, barely moves the pelvis, so its top view shows little spread) and that
  the downstream task commands. A motion set without one of these categories gets
  the first clip of another category (library order) instead (``sweep_clip_ids``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal

from rgsd_eval.latents import DEFAULT_BEST_OF
from rgsd_eval.paper import PAPER_DISCOVERY_KAPPA, PAPER_ROLLOUTS

PAPER_KAPPAS = (20.0, 100.0, 1000.0)
"""The paper's diversity sweep."""
POLICY_NOISE: Literal["policy"] = "policy"
"""``action_noise`` value: each run's own policy std (``runs.action_std``), the paper protocol's choice."""


@dataclass(frozen=True)
class EvalProtocol:
    """The settings a protocol fixes (each an ``EvalConfig`` field of the same name; see its docs)."""

    name: str
    rollouts: int
    action_noise: float | Literal["policy"]
    best_of: int
    kappas: tuple[float, ...]
    discovery_kappa: float | None
    trajectory_kappa: float | None
    trajectory_rollouts: int
    sweep_clips: int
    sweep_categories: tuple[str, ...]
    sweep_all_clips: bool
    per_step_latents: bool

    def settings(self) -> dict[str, Any]:
        """The EvalConfig fields this protocol sets, the name included as ``protocol``."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "name"}
        return {"protocol": self.name, **out}


QUICK = EvalProtocol(
    name="quick",
    rollouts=16,
    action_noise=0.0,
    best_of=DEFAULT_BEST_OF,
    kappas=PAPER_KAPPAS,
    discovery_kappa=None,
    trajectory_kappa=None,
    trajectory_rollouts=150,
    sweep_clips=5,
    sweep_categories=(),
    sweep_all_clips=True,
    per_step_latents=True,
)
"""Minutes on 2 cores: deterministic imitation (one rollout per clip), 16 vMF rollouts per clip and kappa,
best-of-64 latents, the kappa sweep on every clip (five shown)."""

PAPER = EvalProtocol(
    name="paper",
    rollouts=PAPER_ROLLOUTS,
    action_noise=POLICY_NOISE,
    best_of=PAPER_ROLLOUTS,
    kappas=PAPER_KAPPAS,
    discovery_kappa=PAPER_DISCOVERY_KAPPA,
    trajectory_kappa=None,
    trajectory_rollouts=150,
    sweep_clips=3,
    sweep_categories=("run", "sidestep", "backward"),
    sweep_all_clips=False,
    per_step_latents=False,
)
"""The paper's protocol (see the module docstring): 500 stochastic rollouts per clip, best-of-500, discovery at kappa 50
with FID per category and 150 top-view trajectories, the sweep {20, 100, 1000} on three motions, one latent per
motion for every method."""

PROTOCOLS = {p.name: p for p in (QUICK, PAPER)}


def get_protocol(name: str) -> EvalProtocol:
    """The protocol called ``name``, or an error naming the choices."""
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown evaluation protocol {name!r}; choose one of: {', '.join(PROTOCOLS)}") from None


def sweep_clip_ids(categories: Sequence[str], n: int, prefer: Sequence[str] = ()) -> list[int]:
    """Up to n clip indices for the kappa sweep: the first clip of each preferred category present (in
    ``prefer``'s order), then the first clip of every other category, then the remaining clips, in order."""
    firsts = {c: categories.index(c) for c in dict.fromkeys(categories)}
    chosen = [firsts[c] for c in prefer if c in firsts]
    chosen += [i for i in firsts.values() if i not in chosen]
    chosen += [i for i in range(len(categories)) if i not in chosen]
    return chosen[:n]
