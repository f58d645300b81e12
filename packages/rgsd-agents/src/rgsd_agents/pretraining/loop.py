"""Contrastive encoder pretraining (paper "Pretraining"; docs/training.md).

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

Outputs in ``out_dir``: ``encoder.pt`` (with ``clip_names``, ``clip_frames``, ``clip_categories``,
``clip_embeddings``, ``alignment``, ``separation``, ``config``), ``pretrain.yaml``
(the resolved config), ``embeddings.png`` (3-D PCA of the embeddings),
``reward_sharpness.json`` (how the reward falls off the reference:
``rgsd_agents.pretraining.reward_sharpness``) and ``tb/`` (TensorBoard scalars).

``negatives = "hard"`` adds negatives per anchor built from a random frame
of its own clip (held still, phase +0.5, reversed: ``rgsd_agents.pretraining.negatives.HARD_NEGATIVES``).
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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

import torch

from rgsd_agents.pretraining.config import (
    CONFIG_FILE,
    COSINE_PLOT_FILE,
    ENCODER_FILE,
    PLOT_FILE,
    TB_DIR,
    PretrainConfig,
)
from rgsd_agents.pretraining.encoder import build_encoder
from rgsd_agents.pretraining.loss import info_nce_loss
from rgsd_agents.pretraining.negatives import frame_features_of, hard_negative_inputs
from rgsd_agents.pretraining.pairs import sample_pairs
from rgsd_agents.pretraining.reference import load_reference, resolve_motions
from rgsd_agents.pretraining.reward_sharpness import SHARPNESS_FILE, reward_sharpness, write_report
from rgsd_agents.pretraining.statistics import alignment_from_embeddings, separation_stats
from rgsd_agents.rl.precision import configure_tf32
from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.rewards.encoders import MLPEncoder, embed
from rgsd_envs.utils.config import save_yaml, to_dict
from rgsd_envs.utils.device import resolve_device
from rgsd_envs.utils.files import LOCK_NAME, InputFileError, remove_stale_temps, staged_folder
from rgsd_envs.utils.listing import first_few

Tensor = torch.Tensor
log = logging.getLogger(__name__)


@dataclass
class PretrainResult:
    """What ``pretrain`` produced and how it ended."""

    encoder_path: Path
    alignment: float
    """Within-motion alignment of the saved encoder: the mean over clips of the mean cosine of each state's
    embedding to the clip's z_m."""
    separation: float
    """Max cosine between different clips' z_m (lower is better separated)."""
    seconds: float
    """Wall time of the training loop (data preparation and outputs excluded)."""
    steps: int
    loss: float
    """Mean InfoNCE loss of the last logged steps."""
    reached_target: bool
    clip_names: list[str] = field(default_factory=list)
    clip_categories: list[str] = field(default_factory=list)
    config_path: Path | None = None
    plot_path: Path | None = None
    """``embeddings.png``; None where it could not be drawn (a warning said why)."""
    cosine_path: Path | None = None
    """``embeddings_cosine.png``; None where it could not be drawn."""
    tb_dir: Path | None = None
    sharpness: dict[str, Any] = field(default_factory=dict)
    """Reward-sharpness report of the saved encoder (``rgsd_agents.pretraining.reward_sharpness``)."""
    sharpness_path: Path | None = None


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
    """Pretrain the encoder with InfoNCE on ``cfg.motions``; write encoder.pt, pretrain.yaml, embeddings.png, tb/
    and the reward report into ``out_dir``, replacing it whole once they are all written (``check_out``).

    ``env_cfg``: the simulator settings of the reward report's simulated twins (default ``EnvConfig()``)."""
    from rgsd_envs.utils.progress import ProgressBar

    out = Path(out_dir)
    device = resolve_device(cfg.device)  # before any file is written
    configure_tf32(device)
    check_out(out)
    cfg = replace(cfg, motions=resolve_motions(cfg.motions))  # the saved config works from any folder
    lib, inputs = load_reference(cfg)
    cof = lib.clip_of_frame.cpu()
    threads = torch.get_num_threads()
    if cfg.num_threads is not None:
        torch.set_num_threads(cfg.num_threads)
    encoder = build_encoder(cfg, inputs)
    opt = torch.optim.Adam(encoder.parameters(), lr=cfg.lr)
    gen = torch.Generator(device=device).manual_seed(cfg.seed)

    def reached(alignment: float) -> bool:
        return cfg.target_alignment is not None and alignment >= cfg.target_alignment

    # every output (encoder.pt, pretrain.yaml, tb/, figures, reward report) is written into a stage beside ``out``
    # that replaces it whole once complete: a stop or a failure at any point, the swap included, leaves the earlier
    # pretraining as it was (or no folder where there was none), never its curves beside a new encoder
    with staged_folder(out) as stage:
        monitor = _Monitor(stage / TB_DIR, encoder, inputs, cof, lib.num_clips)
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
            if step == 0 and reached(alignment):
                # an untrained encoder maps every state near one direction: high alignment, clips not told apart
                log.warning(
                    "target_alignment %g is met by the untrained encoder (alignment %.3f): no step taken, the encoder "
                    "does not tell the clips apart; give a higher target, or -1 to run every step",
                    cfg.target_alignment,
                    alignment,
                )
        finally:
            bar.close()
            monitor.writer.close()
            torch.set_num_threads(threads)
        saved = _save_encoder(cfg, stage, encoder.cpu().eval(), lib, inputs.cpu(), step)
        result = _write_outputs(cfg, stage, out, saved, lib, step, seconds, losses, env_cfg)
    return result


OUTPUTS = (ENCODER_FILE, CONFIG_FILE, TB_DIR, PLOT_FILE, COSINE_PLOT_FILE, SHARPNESS_FILE)
"""What a pretraining writes into its folder, which it replaces whole (``pretrain``)."""


def check_out(out: Path) -> None:
    """An InputFileError naming ``out`` unless it is a new folder or holds an earlier pretraining's ``OUTPUTS`` only
    (and the lock of the command that holds it): the pretraining replaces the folder whole, which would delete
    anything else (``staged_folder`` refuses the working folder). Temporaries a killed writer left in it are
    removed first."""
    if out.exists() and not out.is_dir():
        raise InputFileError(out, "output path exists and is not a folder")
    if not out.exists():
        return
    remove_stale_temps(out, "*")
    others = sorted(p.name for p in out.iterdir() if p.name not in (*OUTPUTS, LOCK_NAME))
    if others:
        raise InputFileError(
            out,
            f"holds {first_few(others, 3)}, which a pretraining does not write and would delete (it replaces its "
            "folder whole); pretrain into a new or empty folder, or one that holds only an earlier pretraining",
        )


def _draw_figures(
    stage: Path, out: Path, e: Tensor, z: Tensor, lib: MotionLib, steps: int, alignment: float, separation: float
) -> tuple[Path | None, Path | None]:
    """``embeddings.png`` and ``embeddings_cosine.png`` in ``stage`` (None for one that failed, with a warning that
    names its place in ``out``: the encoder is saved before them and stays usable)."""
    from rgsd_eval.plots import figure_or_warning, plot_clip_cosine, plot_state_embeddings

    title = f"{lib.num_clips} clips, {steps} steps, alignment {alignment:.5f}, max cos between clips {separation:.3f}"
    names, categories = list(lib.names), list(lib.categories)
    e_np, cof, z_np = e.cpu().numpy(), lib.clip_of_frame.cpu().numpy(), z.detach().cpu().numpy()
    embeddings = figure_or_warning(
        lambda: plot_state_embeddings(e_np, cof, z_np, names, stage / PLOT_FILE, title, categories),
        stage / PLOT_FILE,
        out / PLOT_FILE,
    )
    cosine_title = f"{lib.num_clips} clips, {steps} steps"
    cosine = figure_or_warning(
        lambda: plot_clip_cosine(z_np, names, stage / COSINE_PLOT_FILE, cosine_title, categories),
        stage / COSINE_PLOT_FILE,
        out / COSINE_PLOT_FILE,
    )
    return embeddings, cosine


@dataclass
class _Saved:
    """A pretraining's saved encoder and what was computed for it."""

    encoder: MLPEncoder
    inputs: Tensor
    embeddings: Tensor
    clip_embeddings: Tensor
    alignment: float
    separation: float


def _save_encoder(
    cfg: PretrainConfig, out: Path, encoder: MLPEncoder, lib: MotionLib, inputs: Tensor, steps: int
) -> _Saved:
    """Save encoder.pt (with clip embeddings and metrics), then pretrain.yaml, its settings."""
    cof = lib.clip_of_frame.cpu()
    e = embed(encoder, inputs)
    alignment, z = alignment_from_embeddings(e, cof, lib.num_clips)
    separation, _ = separation_stats(z)
    encoder.save(
        out / ENCODER_FILE,
        clip_names=list(lib.names),
        clip_frames=[int(n) for n in lib.num_frames.tolist()],  # with the names, which clips z_m belongs to
        clip_categories=list(lib.categories),
        clip_embeddings=z.to(torch.float32),
        alignment=alignment,
        separation=separation,
        steps=steps,
        config=to_dict(cfg),
    )
    save_yaml(cfg, out / CONFIG_FILE)
    return _Saved(encoder, inputs, e, z, alignment, separation)


def _write_outputs(
    cfg: PretrainConfig,
    stage: Path,
    out: Path,
    saved: _Saved,
    lib: MotionLib,
    steps: int,
    seconds: float,
    losses: list[float],
    env_cfg: EnvConfig | None = None,
) -> PretrainResult:
    """Draw embeddings.png and embeddings_cosine.png and write the reward-sharpness report into ``stage``; the
    result, naming the files where they will be once the stage replaces ``out``."""
    alignment, separation, z = saved.alignment, saved.separation, saved.clip_embeddings
    tail = losses[-cfg.eval_every :]
    plot_path, cosine_path = _draw_figures(stage, out, saved.embeddings, z, lib, steps, alignment, separation)
    sharpness = reward_sharpness(saved.encoder, lib, cfg.kappa, inputs=saved.inputs, env_cfg=env_cfg)
    write_report(sharpness, stage / SHARPNESS_FILE)

    def final(path: Path | None) -> Path | None:
        return None if path is None else out / path.relative_to(stage)

    return PretrainResult(
        encoder_path=out / ENCODER_FILE,
        alignment=alignment,
        separation=separation,
        seconds=seconds,
        steps=steps,
        loss=sum(tail) / len(tail) if tail else float("nan"),
        reached_target=cfg.target_alignment is not None and alignment >= cfg.target_alignment,
        clip_names=list(lib.names),
        config_path=out / CONFIG_FILE,
        plot_path=final(plot_path),
        cosine_path=final(cosine_path),
        clip_categories=list(lib.categories),
        tb_dir=out / TB_DIR,
        sharpness=sharpness,
        sharpness_path=out / SHARPNESS_FILE,
    )
