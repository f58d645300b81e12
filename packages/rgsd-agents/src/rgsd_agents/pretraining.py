"""Contrastive encoder pretraining (SPEC §4, paper "Pretraining").

The encoder ``mu_phi`` (``rgsd_envs.rewards.encoders.MLPEncoder``) maps a reference
state ``s_t`` (5 stacked frames, 1795-D) to a unit vector in R^16. It is trained
with InfoNCE at temperature ``T = 1/kappa``: a minibatch holds ``batch_size``
(anchor, positive) pairs, each from one clip drawn uniformly (the two states
drawn uniformly and independently inside it); every anchor scores its own
positive against the positives of the other pairs. Positives of pairs from the
*same* clip are masked out: they are not negatives (the paper draws negatives
from other motions only). With ``symmetric`` the positives are also scored as
anchors against the anchors (the same logits transposed, no extra forward pass).

After training, ``z_m`` is the normalised mean of clip m's state embeddings and
the within-motion alignment is the mean over clips of the mean cosine between
each state's embedding and ``z_m`` (``rgsd_envs.rewards.encoders``). Training stops at
``steps``, at ``max_seconds`` of wall time, or as soon as the alignment reaches
``target_alignment`` (checked every ``eval_every`` steps), whichever comes first.

Outputs in ``out_dir``: ``encoder.pt`` (with ``clip_names``, ``clip_categories``,
``clip_embeddings``, ``alignment``, ``separation``, ``config``), ``pretrain.yaml``
(the resolved config), ``embeddings.png`` (3-D PCA of the embeddings),
``reward_sharpness.json`` (how the reward falls off the reference:
``rgsd_agents.reward_sharpness``) and ``tb/`` (TensorBoard scalars).

``negatives = "hard"`` adds negatives per anchor built from a random frame
of its own clip (held still, phase +0.5, reversed: ``rgsd_agents.negatives.HARD_NEGATIVES``).
On the 5 demo clips ([256, 256], lr 3e-4) this took the
held-still cosine from 0.91-1.00 to about -0.3..0.6 and the reversed one from
0.97-0.99 to about -0.2..0.16, at alignment 0.97 instead of 0.999, and a step
costs about 2.2x (4 forward passes per pair instead of 2). A run is deterministic for a seed unless the
wall-clock budget stops it.

Defaults: the paper's network, minibatch, optimiser and loss (Adam 1e-4, 256
pairs), at most 3000 steps, stopping early at alignment 0.999, on one torch
thread. On the 13 demo + real clips, on 2 CPU cores shared with other jobs,
this reaches 0.999 in 270-300 steps, 41-47 s (0.15 s/step; seeds 0-2), max
cosine between clips -0.03..+0.02; lr 3e-4 needs 110-130 steps (~20 s) but
leaves the clips less spread (+0.04..+0.07). Two torch threads ran at 0.75 s/step there
(OpenMP regions waiting for a descheduled thread). See ``benchmarks/pretrain.py``.
``PretrainConfig.paper()`` runs all 3000 steps (no early stop).

Input standardisation uses the reference states' mean and std, each std floored
at ``STD_FLOOR`` times the median std of its feature group: the built-in demo
clips leave some joints still, and a plain (1e-3-floored) std amplified the
simulator's jitter in those dims so much that a state one PD step away from the
reference scored like another clip.
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import IO, Any

import torch
import torch.nn.functional as F

from rgsd_agents.negatives import frame_features_of, hard_negative_inputs
from rgsd_agents.precision import configure_tf32
from rgsd_agents.reward_sharpness import SHARPNESS_FILE, reward_sharpness, write_report
from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.observations import FRAME_DIM, FRAME_LAYOUT, HISTORY_LEN, reference_encoder_inputs
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.rewards.encoders import PAPER_HIDDEN, MLPEncoder, embed
from rgsd_envs.utils.config import save_yaml, to_dict
from rgsd_envs.utils.device import resolve_device
from rgsd_envs.utils.files import InputFileError

Tensor = torch.Tensor
log = logging.getLogger(__name__)

NEGATIVES = ("infonce", "hard")
ENCODER_FILE = "encoder.pt"
CONFIG_FILE = "pretrain.yaml"
PLOT_FILE = "embeddings.png"
COSINE_PLOT_FILE = "embeddings_cosine.png"
"""Beside the PCA: the clip-by-clip cosine matrix of z_m (rgsd_eval.plots.plot_clip_cosine)."""
TB_DIR = "tb"
STD_FLOOR = 0.5
"""Input standardisation: each dim's std is floored at this fraction of its feature group's median std."""


@dataclass
class PretrainOptions:
    """How the encoder is pretrained: network, loss, optimiser and stopping rule (``pretrain:`` of a training
    config, which pretrains on its own ``env.motions`` with its seed and device)."""

    hidden: tuple[int, ...] = PAPER_HIDDEN
    """Encoder MLP hidden sizes (paper: 1024, 1024, 1024, 512)."""
    kappa: float = 10.0
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
    ``rgsd_agents.negatives``), so the reward falls off the reference within a clip. Hard negatives hold
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
        checks = {
            "hidden": all(h > 0 for h in self.hidden),
            "kappa": self.kappa > 0,
            "batch_size": self.batch_size >= 2,
            "lr": self.lr > 0,
            "steps": self.steps >= 0,
            "eval_every": self.eval_every >= 1,
            "target_alignment": self.target_alignment is None or -1.0 <= self.target_alignment <= 1.0,
            "num_threads": self.num_threads is None or self.num_threads >= 1,
            "negatives": self.negatives in NEGATIVES,
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"invalid {bad[0]} = {getattr(self, bad[0])!r} (see PretrainConfig's field docs)")
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

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (self.max_seconds is None or self.max_seconds > 0):
            raise ValueError(f"invalid max_seconds = {self.max_seconds!r} (see PretrainConfig's field docs)")

    @classmethod
    def paper(cls, **overrides: Any) -> PretrainConfig:
        """The paper's schedule: all 3000 steps, no early stop at the target alignment."""
        return replace(cls(target_alignment=None), **overrides)

    @classmethod
    def of_run(cls, options: PretrainOptions, motions: str | list[str], seed: int, device: str) -> PretrainConfig:
        """The pretraining of a training run: its ``pretrain:`` options on its clips, seed and device."""
        return cls(
            **{f.name: getattr(options, f.name) for f in fields(PretrainOptions)},
            motions=motions,
            seed=seed,
            device=device,
        )


@dataclass
class PretrainResult:
    """What ``pretrain`` produced and how it ended."""

    encoder_path: Path
    alignment: float
    """Within-motion alignment of the saved encoder (SPEC §4)."""
    separation: float
    """Max cosine between different clips' z_m (lower is better separated)."""
    seconds: float
    """Wall time of the training loop (data preparation and outputs excluded)."""
    steps: int
    loss: float
    """Mean InfoNCE loss of the last logged steps."""
    reached_target: bool
    clip_names: list[str] = field(default_factory=list)
    config_path: Path | None = None
    plot_path: Path | None = None
    tb_dir: Path | None = None
    sharpness: dict[str, Any] = field(default_factory=dict)
    """Reward-sharpness report of the saved encoder (``rgsd_agents.reward_sharpness``)."""
    sharpness_path: Path | None = None


def info_nce_loss(
    anchor: Tensor,
    positive: Tensor,
    clip_ids: Tensor,
    kappa: float,
    symmetric: bool = False,
    hard: Tensor | None = None,
) -> Tensor:
    """InfoNCE (T = 1/kappa) of unit (B, d) anchors vs in-batch positives; same-clip candidates masked.

    ``hard`` (B, K, d): extra negatives of each anchor only (``negatives = "hard"``); the symmetric term
    scores positives against the anchors alone.
    """
    if anchor.shape != positive.shape or anchor.dim() != 2 or clip_ids.shape != anchor.shape[:1]:
        raise ValueError(
            f"info_nce_loss needs anchor and positive (B, d) and clip_ids (B,); got {tuple(anchor.shape)}, "
            f"{tuple(positive.shape)}, {tuple(clip_ids.shape)}"
        )
    b = anchor.shape[0]
    logits = kappa * anchor @ positive.T  # (B, B): anchor i vs positive j
    eye = torch.eye(b, dtype=torch.bool, device=anchor.device)
    other_same_clip = (clip_ids.unsqueeze(0) == clip_ids.unsqueeze(1)) & ~eye
    logits = logits.masked_fill(other_same_clip, float("-inf"))
    target = torch.arange(b, device=anchor.device)
    if hard is not None:
        if hard.dim() != 3 or hard.shape[0] != b or hard.shape[2] != anchor.shape[1]:
            raise ValueError(f"info_nce_loss needs hard negatives (B, K, d); got {tuple(hard.shape)}")
        own = kappa * torch.einsum("bd,bkd->bk", anchor, hard)
        loss = F.cross_entropy(torch.cat((logits, own), dim=1), target)
    else:
        loss = F.cross_entropy(logits, target)
    if symmetric:  # mask is symmetric, so the transpose scores positives against anchors
        loss = 0.5 * (loss + F.cross_entropy(logits.T, target))
    return loss


def sample_pairs(lib: MotionLib, batch_size: int, generator: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
    """Clip ids (B,) uniform over clips, and anchor and positive frame indices (B,) inside each clip."""
    clips = torch.randint(lib.num_clips, (batch_size,), generator=generator, device=lib.device)
    n = lib.num_frames[clips]
    u = torch.rand(2, batch_size, generator=generator, device=lib.device)
    frames = lib.starts[clips] + (u * n).long().clamp_max(n - 1)
    return clips, frames[0], frames[1]


def separation_stats(z: Tensor) -> tuple[float, float]:
    """(max, mean over clips of the nearest other clip's) cosine between clip embeddings (M, d)."""
    if z.shape[0] < 2:
        return float("nan"), float("nan")
    cos = z @ z.T
    cos.fill_diagonal_(float("-inf"))
    nearest = cos.max(dim=1).values
    return float(nearest.max()), float(nearest.mean())


def alignment_from_embeddings(e: Tensor, clip_of_frame: Tensor, num_clips: int) -> tuple[float, Tensor]:
    """(within-motion alignment, z_m (M, d)) from state embeddings (F, d) (SPEC §4)."""
    z = F.normalize(torch.zeros(num_clips, e.shape[1], dtype=e.dtype).index_add_(0, clip_of_frame, e), dim=-1)
    cos = (e * z[clip_of_frame]).sum(-1)
    per_clip = torch.zeros(num_clips, dtype=cos.dtype).index_add_(0, clip_of_frame, cos)
    counts = torch.bincount(clip_of_frame, minlength=num_clips).to(cos.dtype)
    return float((per_clip / counts).mean()), z


def resolve_motions(motions: str | list[str]) -> str | list[str]:
    """``motions`` with absolute paths ("demo" kept); a clear error naming the field for a missing path."""
    single = isinstance(motions, (str, os.PathLike))
    items = [motions] if single else list(motions)
    if not items:
        raise InputFileError("<config>", "no reference motions given", "motions")
    resolved = []
    for item in items:
        if str(item) == "demo":
            resolved.append("demo")
            continue
        if not Path(item).exists():
            raise InputFileError(
                item, "no such motion file or folder (give clip files, a folder of clips, or 'demo')", "motions"
            )
        resolved.append(str(Path(item).resolve()))
    return resolved[0] if single else resolved


def load_reference(cfg: PretrainConfig) -> tuple[MotionLib, Tensor]:
    """The MotionLib of ``cfg.motions`` and its encoder inputs (F, 1795)."""
    lib = MotionLib(resolve_motions(cfg.motions), device=resolve_device(cfg.device))
    if lib.num_clips < 2:
        raise ValueError(
            f"pretraining needs at least 2 reference clips (negatives come from other clips); "
            f"motions={cfg.motions!r} has {lib.num_clips}"
        )
    return lib, reference_encoder_inputs(lib)


def input_stats(inputs: Tensor, std_floor: float = STD_FLOOR) -> tuple[Tensor, Tensor]:
    """Mean and std (1795,) of encoder inputs; each std floored at ``std_floor`` x its feature group's median.

    Reference clips can hold dims that barely vary (a joint a clip set never
    moves, a structural zero): a plain std would scale the simulator's jitter in
    them by up to 1000 and make the reward of near-reference states arbitrary.
    """
    mean, std = inputs.mean(0), inputs.std(0)
    frames = std.reshape(HISTORY_LEN, FRAME_DIM)
    floor = torch.empty(FRAME_DIM, dtype=std.dtype, device=std.device)
    for sl in FRAME_LAYOUT.values():
        floor[sl] = std_floor * frames[:, sl].median()
    return mean, torch.maximum(std, floor.repeat(HISTORY_LEN))


def build_encoder(cfg: PretrainConfig, inputs: Tensor) -> MLPEncoder:
    """A freshly initialised encoder (seeded) standardising with the reference inputs' statistics."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        encoder = MLPEncoder(cfg.hidden, kappa=cfg.kappa)
    mean, std = input_stats(inputs)
    encoder.set_input_stats(mean.cpu(), std.cpu())
    return encoder.to(resolve_device(cfg.device))


def train_step(
    encoder: MLPEncoder,
    opt: torch.optim.Optimizer,
    lib: MotionLib,
    inputs: Tensor,
    cfg: PretrainConfig,
    gen: torch.Generator,
) -> float:
    """One InfoNCE update on a fresh minibatch of (anchor, positive) pairs (and hard negatives); returns the loss."""
    b = cfg.batch_size
    clips, anchors, positives = sample_pairs(lib, b, gen)
    batch = inputs[torch.cat((anchors, positives))]
    hard_negatives = cfg.negatives == "hard"
    if hard_negatives:  # (B, K, 1795): negatives from a random frame of each anchor's own clip
        n = lib.num_frames[clips]
        frames = lib.starts[clips] + (torch.rand(b, generator=gen, device=lib.device) * n).long().clamp_max(n - 1)
        negs = hard_negative_inputs(frame_features_of(inputs), frames, lib.starts[clips])
        batch = torch.cat((batch, negs.flatten(0, 1)))
    emb = encoder(batch)  # one forward pass for every part
    hard = emb[2 * b :].reshape(b, -1, emb.shape[1]) if hard_negatives else None
    loss = info_nce_loss(emb[:b], emb[b : 2 * b], clips, cfg.kappa, cfg.symmetric, hard)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    value = float(loss.detach())
    if not math.isfinite(value):
        raise FloatingPointError(f"InfoNCE loss became {value}; lower the learning rate (lr = {cfg.lr})")
    return value


class _Monitor:
    """TensorBoard scalars of a pretraining run: loss, speed, alignment and clip separation."""

    def __init__(self, tb_dir: Path, encoder: MLPEncoder, inputs: Tensor, clip_of_frame: Tensor, num_clips: int):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(tb_dir))
        self.encoder, self.inputs, self.cof, self.num_clips = encoder, inputs, clip_of_frame, num_clips
        self.last_eval_step = -1
        self.alignment = float("nan")

    def evaluate(self, step: int) -> float:
        """Alignment over all reference states (logged with the separation scalars)."""
        if step != self.last_eval_step:
            alignment, z = alignment_from_embeddings(embed(self.encoder, self.inputs).cpu(), self.cof, self.num_clips)
            worst, nearest = separation_stats(z)
            self.writer.add_scalar("charts/alignment", alignment, step)
            self.writer.add_scalar("charts/nearest_other_clip_cos", nearest, step)
            self.writer.add_scalar("charts/max_other_clip_cos", worst, step)
            self.alignment, self.last_eval_step = alignment, step
        return self.alignment

    def losses(self, step: int, mean_loss: float, steps_per_second: float) -> None:
        """Loss and speed scalars."""
        self.writer.add_scalar("losses/infonce", mean_loss, step)
        self.writer.add_scalar("charts/steps_per_second", steps_per_second, step)


def pretrain(
    cfg: PretrainConfig,
    out_dir: str | os.PathLike,
    progress: bool = True,
    progress_file: IO[str] | None = None,
    env_cfg: EnvConfig | None = None,
) -> PretrainResult:
    """Pretrain the encoder with InfoNCE on ``cfg.motions``; write encoder.pt, pretrain.yaml, embeddings.png, tb/.

    ``env_cfg``: the simulator settings of the reward report's simulated twins (default ``EnvConfig()``)."""
    from rgsd_agents.progress import ProgressBar

    out = Path(out_dir)
    device = resolve_device(cfg.device)  # before any file is written
    configure_tf32(device)
    cfg = replace(cfg, motions=resolve_motions(cfg.motions))  # the saved config works from any folder
    lib, inputs = load_reference(cfg)
    cof = lib.clip_of_frame.cpu()
    out.mkdir(parents=True, exist_ok=True)
    save_yaml(cfg, out / CONFIG_FILE)
    threads = torch.get_num_threads()
    if cfg.num_threads is not None:
        torch.set_num_threads(cfg.num_threads)
    encoder = build_encoder(cfg, inputs)
    opt = torch.optim.Adam(encoder.parameters(), lr=cfg.lr)
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    monitor = _Monitor(out / TB_DIR, encoder, inputs, cof, lib.num_clips)

    def reached(alignment: float) -> bool:
        return cfg.target_alignment is not None and alignment >= cfg.target_alignment

    step, losses = 0, []
    bar = ProgressBar("pretrain", cfg.steps, cfg.max_seconds, unit="step", disable=not progress, file=progress_file)
    try:
        alignment = monitor.evaluate(0)
        t0 = last_log = time.perf_counter()
        while step < cfg.steps and not reached(alignment):
            losses.append(train_step(encoder, opt, lib, inputs, cfg, gen))
            step += 1
            if step % cfg.eval_every == 0:
                now = time.perf_counter()
                every = cfg.eval_every
                monitor.losses(step, sum(losses[-every:]) / every, every / max(now - last_log, 1e-9))
                alignment = monitor.evaluate(step)
                last_log = time.perf_counter()
            elapsed = time.perf_counter() - t0
            bar.update(step, elapsed, f"loss={losses[-1]:.4f} align={alignment:.5f}")
            if cfg.max_seconds is not None and elapsed >= cfg.max_seconds:
                log.info("pretraining stopped by its %.0f s budget after %d steps", cfg.max_seconds, step)
                break
        seconds = time.perf_counter() - t0
        monitor.evaluate(step)
    finally:
        bar.close()
        monitor.writer.close()
        torch.set_num_threads(threads)
    return _write_outputs(cfg, out, encoder.cpu().eval(), lib, inputs.cpu(), step, seconds, losses, env_cfg)


def _write_outputs(
    cfg: PretrainConfig,
    out: Path,
    encoder: MLPEncoder,
    lib: MotionLib,
    inputs: Tensor,
    steps: int,
    seconds: float,
    losses: list[float],
    env_cfg: EnvConfig | None = None,
) -> PretrainResult:
    """Save encoder.pt (with clip embeddings and metrics), embeddings.png and embeddings_cosine.png; the result."""
    cof = lib.clip_of_frame.cpu()
    e = embed(encoder, inputs)
    alignment, z = alignment_from_embeddings(e, cof, lib.num_clips)
    separation, _ = separation_stats(z)
    tail = losses[-cfg.eval_every :]
    encoder_path = encoder.save(
        out / ENCODER_FILE,
        clip_names=list(lib.names),
        clip_categories=list(lib.categories),
        clip_embeddings=z.to(torch.float32),
        alignment=alignment,
        separation=separation,
        steps=steps,
        config=to_dict(cfg),
    )
    title = f"{lib.num_clips} clips, {steps} steps, alignment {alignment:.5f}, max cos between clips {separation:.3f}"
    from rgsd_eval.plots import plot_clip_cosine, plot_state_embeddings

    plot_path = plot_state_embeddings(e.cpu().numpy(), cof.numpy(), z.cpu().numpy(), lib.names, out / PLOT_FILE, title)
    plot_clip_cosine(
        z.detach().cpu().numpy(), list(lib.names), out / COSINE_PLOT_FILE, f"{lib.num_clips} clips, {steps} steps"
    )
    sharpness = reward_sharpness(encoder, lib, cfg.kappa, inputs=inputs, env_cfg=env_cfg)
    sharpness_path = write_report(sharpness, out / SHARPNESS_FILE)
    return PretrainResult(
        encoder_path=encoder_path,
        alignment=alignment,
        separation=separation,
        seconds=seconds,
        steps=steps,
        loss=sum(tail) / len(tail) if tail else float("nan"),
        reached_target=cfg.target_alignment is not None and alignment >= cfg.target_alignment,
        clip_names=list(lib.names),
        config_path=out / CONFIG_FILE,
        plot_path=plot_path,
        tb_dir=out / TB_DIR,
        sharpness=sharpness,
        sharpness_path=sharpness_path,
    )
