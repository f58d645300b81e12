"""What pretraining is asked to do (``pretrain:`` of a training config, ``rgsd pretrain --config``) and the
names of the files it writes: light to import (no torch work, no plots)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from rgsd_envs.envs.config import check_motions_given
from rgsd_envs.envs.observations import SKILL_DIM
from rgsd_envs.rewards.encoders import DEFAULT_KAPPA, PAPER_HIDDEN
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.config import UNNAMED, shown_value
from rgsd_envs.utils.device import check_device_name
from rgsd_envs.utils.files import InputFileError

NEGATIVES = ("infonce", "hard")
ENCODER_FILE = RunDir.ENCODER
CONFIG_FILE = "pretrain.yaml"
PLOT_FILE = "embeddings.png"
COSINE_PLOT_FILE = "embeddings_cosine.png"
"""Beside the PCA: the clip-by-clip cosine matrix of z_m (rgsd_eval.plots.plot_clip_cosine)."""
TB_DIR = RunDir.TENSORBOARD


@dataclass
class PretrainOptions:
    """How the encoder is pretrained: network, loss, optimiser and stopping rule (``pretrain:`` of a training
    config, which pretrains on its own ``env.motions`` with its seed and device)."""

    hidden: tuple[int, ...] = PAPER_HIDDEN
    """Encoder MLP hidden sizes (paper: 1024, 1024, 1024, 512)."""
    kappa: float = DEFAULT_KAPPA
    """vMF concentration; InfoNCE temperature T = 1/kappa; stored in the encoder for the reward."""
    batch_size: int = 256
    """(anchor, positive) pairs per minibatch (paper: 256)."""
    lr: float = 1e-4
    """Adam learning rate (paper: 1e-4; 3e-4 reaches the target in ~40% of the steps, less spread)."""
    symmetric: bool = False
    """Also score each positive as an anchor against the anchors (free: same logits transposed; paper: no)."""
    negatives: str = "infonce"
    """"infonce": the paper's loss (negatives are other clips' positives); "hard": each anchor also scores
    states built from a random frame of its own clip (held still, phase +0.5, reversed stack;
    ``rgsd_agents.pretraining.negatives``), so the reward falls off the reference within a clip. Hard negatives hold
    the alignment near 0.97, so they need ``target_alignment: null`` (stop by ``steps``)."""
    steps: int = 3000
    """Maximum optimiser steps."""
    target_alignment: float | None = 0.999
    """Stop as soon as the within-motion alignment reaches this (None: run all steps)."""
    eval_every: int = 10
    """Steps between alignment evaluations (over all reference states) and TensorBoard loss/speed scalars."""
    num_threads: int | None = 1
    """torch intra-op threads while training (None: torch's default, one per core). On 2 cores shared with
    other jobs one thread ran the paper's network at 0.15 s/step and two at 0.8 s/step (OpenMP waits)."""

    def __post_init__(self) -> None:
        self.hidden = tuple(int(h) for h in self.hidden)
        rules = {  # field: (whether it holds, the rule an error states)
            "hidden": (len(self.hidden) >= 1 and all(h > 0 for h in self.hidden), "must be one or more sizes > 0"),
            "kappa": (self.kappa > 0, "must be > 0"),
            "batch_size": (self.batch_size >= 2, "must be >= 2 (the other pairs are the negatives)"),
            "lr": (self.lr > 0, "must be > 0"),
            "steps": (self.steps >= 0, "must be >= 0"),
            "eval_every": (self.eval_every >= 1, "must be >= 1"),
            "target_alignment": (
                self.target_alignment is None or -1.0 <= self.target_alignment <= 1.0,
                "must be in [-1, 1] or null",
            ),
            "num_threads": (self.num_threads is None or self.num_threads >= 1, "must be >= 1 or null"),
            "negatives": (self.negatives in NEGATIVES, f"must be one of {', '.join(NEGATIVES)}"),
        }
        bad = next((k for k, (ok, _) in rules.items() if not ok), None)
        if bad is not None:
            raise InputFileError(UNNAMED, f"{rules[bad][1]}, got {shown_value(getattr(self, bad))}", bad)
        if self.negatives == "hard" and self.target_alignment is not None:
            raise ValueError(
                f"negatives 'hard' with target_alignment {self.target_alignment}: hard negatives keep the "
                "within-motion alignment near 0.97, so the early stop would be unreachable or arbitrary; set "
                "target_alignment: null (rgsd train: --set pretrain.target_alignment=null) and stop by steps "
                "or max_seconds"
            )


@dataclass
class PretrainConfig(PretrainOptions):
    """A standalone pretraining (``rgsd pretrain --config``): the options, the clips, the seed, the device and
    an optional wall-clock budget."""

    motions: str | list[str] = "demo"
    """Reference clips: "demo", a clip file, a folder of clips, or a list of these (relative paths: to the cwd;
    pretrain.yaml and encoder.pt record them absolute)."""
    seed: int = 0
    """Seeds the network initialisation and the minibatch sampling."""
    device: str = "auto"
    """Torch device of the training: "auto" (cuda when available), "cpu", "cuda" or "cuda:N"."""
    max_seconds: float | None = None
    """Wall-clock budget of the training loop (None: no budget). Makes a run non-deterministic, so a training
    run's pretraining has none."""
    skill_dim: int = SKILL_DIM
    """Size of the embeddings (the skill space's dimension; a training run's ``env.skill_dim``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_motions_given(self.motions)
        check_device_name(self.device)
        if self.seed < 0:
            raise InputFileError(UNNAMED, f"must be >= 0, got {self.seed!r}", "seed")
        if not (self.max_seconds is None or self.max_seconds > 0):
            raise InputFileError(UNNAMED, f"must be > 0 or null, got {self.max_seconds!r}", "max_seconds")
        if self.skill_dim < 2:
            raise InputFileError(
                UNNAMED,
                f"must be >= 2 (a skill space needs at least 2 dimensions), got {self.skill_dim!r}",
                "skill_dim",
            )

    @classmethod
    def paper(cls, **overrides: Any) -> PretrainConfig:
        """The paper's schedule: all 3000 steps, no early stop at the target alignment."""
        return replace(cls(target_alignment=None), **overrides)

    @classmethod
    def of_run(
        cls, options: PretrainOptions, motions: str | list[str], seed: int, device: str, skill_dim: int = SKILL_DIM
    ) -> PretrainConfig:
        """The pretraining of a training run: its ``pretrain:`` options on its clips, seed, device and skill space."""
        return cls(
            **{f.name: getattr(options, f.name) for f in fields(PretrainOptions)},
            motions=motions,
            seed=seed,
            device=device,
            skill_dim=skill_dim,
        )
