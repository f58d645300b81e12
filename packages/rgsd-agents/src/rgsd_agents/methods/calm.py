"""CALM: Conditional Adversarial Latent Models (Tessler et al. 2023) on the shared PPO runner.

* Motion encoder E: a window of ``window`` reference frames ending at a frame of
  a clip (CALM: 60 frames = 2 s at 30 Hz) -> a unit latent. Each frame of the
  window is its standardised per-frame features (``window_features``: "full",
  the 358 frame features without the phase; "compact", 76: root height, body
  positions, the root's linear and angular velocity); frames before the clip's
  first are zeros, so a clip shorter than the window is zero-padded, as the RGSD
  paper encoded its clips. A window is named by the index of its last frame.
* Latents: an episode starts with E of a reference window drawn uniformly (a
  clip, then the end of a window that fits in it; a shorter clip's one window is
  the whole clip). Each world remembers its window, and the rollout remembers
  it per step. One latent per episode by default; ``resample: true`` draws a new
  window after ``latent_steps_min`` .. ``latent_steps_max`` steps (CALM's code:
  10..150).
* The encoder learns through the POLICY's PPO loss, as in CALM's code. In every
  PPO minibatch step ``policy_inputs`` re-encodes each sample's window with
  gradient and puts the latent, through the observation normaliser (which
  normalises the skill slice like every other input), into the actor's and
  critic's input. PPO's backward leaves its loss's gradient on E, and
  ``after_policy_step`` adds CALM's regulariser ``encoder_reg x (alignment +
  uniformity_weight x uniformity)`` (CALM: 0.1 x (align + 0.5 x uniform), Wang &
  Isola 2020: windows of a clip at most ``align_max_offset`` frames apart, CALM
  0.5 s, map close; latents spread over the sphere) before E's optimiser steps.
* Conditional discriminator D(s, s' | z): the standardised transition features
  and z through CALM's latent branch (``disc_latent_branch``: a 512, 256 ReLU MLP
  with a tanh output of z's size), joined into a ReLU MLP. Reference samples: a
  transition inside a reference window, with the window's latent computed
  without gradient (the demo latent). Policy samples: the
  minibatch's transitions with their re-encoded latents, detached. Binary
  cross-entropy, gradient penalty on the reference transition features (not on
  the latent, as CALM), logit regulariser and weight decay (as ASE). One step
  (``lr``, CALM's 2e-5) per PPO minibatch step, on the first
  ``disc_minibatch_size`` of the minibatch's rows (CALM: 4096) and as many
  reference windows; the regulariser's alignment pairs and uniformity take the
  same windows.
* Reward ``disc_weight x -log(1 - D(s, s' | z))`` (CALM: reward scale 2), z the
  latent the policy acted with (the rollout's, encoded when its world drew the
  window), as CALM's code scores it.
* PPO and the policy are the shared runner's; the ``calm_paper`` preset sets
  them as CALM's code has them (ReLU 1024, 1024, 512 with a latent branch of
  512, 256, 6 epochs of 16,384, critic coefficient 5, one learning rate 2e-5,
  no gradient clipping, bounds at 1.0).

Evaluation and downstream take each clip's latent from ``clip_latents.json``
(``latent_choice: clip_latents``): E of the clip's first window, the motion the
policy is asked for when it starts at the clip's first frame.

Departures from CALM (besides the 16-D latent and PPO on the shared runner):

- the discriminator sees ``frames`` of rgsd's frame features (default 2: (s, s')),
  not CALM's 10 AMP frames;
- no replay buffer of older policy samples for the discriminator (the current
  rollout's);
- E and D have their own Adam (``encoder_lr``, ``lr``: both CALM's 2e-5), apart
  from PPO's; CALM steps every network with one Adam, which is the same update
  while every learning rate is 2e-5 and no gradient is clipped (``calm_paper``);
- the uniformity term is taken on the alignment pairs' first windows, which are
  also the discriminator's reference windows (CALM draws a third batch);
- every world samples its actions and every sample is in PPO's loss (CALM's
  code has some worlds act with the mean action, ``enable_eps_greedy``, and
  leaves those out of the policy loss);
- padding frames are zeros after standardisation (the references' mean frame),
  not raw zeros, which would read as a body at height 0;
- a clip's latent at evaluation is E of its first window (CALM has no per-clip
  protocol; the RGSD paper encoded whole 2-5 s clips);
- the latent enters the policy through the observation normaliser (CALM feeds it
  to the networks unnormalised), with the normaliser's current statistics, which
  already hold the rollout; the rest of a stored input keeps the rollout's.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from rgsd_agents.methods.base import MethodContext, SkillMethod
from rgsd_agents.methods.common import (
    NORM_CLIP,
    AdversarialConfig,
    LatentSchedule,
    ReferenceData,
    Standardize,
    StepStats,
    discriminator_regularizer,
    discriminator_reward,
    discriminator_stats,
    gan_loss,
    gradient_penalty,
    transition_features,
)
from rgsd_agents.rl.storage import RolloutStorage
from rgsd_envs.envs.observations import FRAME_DIM, FRAME_LAYOUT, HUMANOID_LAYOUT, SKILL_DIM, ObservationLayout
from rgsd_envs.runs.policy import mlp
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.files import atomic_path

Tensor = torch.Tensor
_ENCODE_CHUNK = 1024
"""Windows encoded at once when every reference window is encoded (bounds the gathered windows' memory)."""


def _columns(*slices: slice) -> list[int]:
    return [i for s in slices for i in range(s.start, s.stop)]


_ROOT_LIN_VEL = slice(FRAME_LAYOUT["body_lin_vel"].start, FRAME_LAYOUT["body_lin_vel"].start + 3)
_ROOT_ANG_VEL = slice(FRAME_LAYOUT["body_ang_vel"].start, FRAME_LAYOUT["body_ang_vel"].start + 3)
WINDOW_FEATURES: dict[str, list[int]] = {
    "full": _columns(slice(FRAME_LAYOUT["phase"].stop, FRAME_DIM)),
    "compact": _columns(FRAME_LAYOUT["root_height"], FRAME_LAYOUT["body_pos"], _ROOT_LIN_VEL, _ROOT_ANG_VEL),
}
"""Columns of the frame features o_t a window keeps per frame: "full" (358: all but the phase, a clock the motion
does not show) or "compact" (76: root height, body positions, the root's linear and angular velocity; a 60-frame
window of them is 4,560 numbers instead of 21,480)."""


def window_columns(features: str, layout: ObservationLayout) -> list[int]:
    """``WINDOW_FEATURES[features]`` for the humanoid; another env's "full" is every column of its frame but the
    phase (its "compact" is not defined)."""
    if dataclasses.replace(layout, skill_dim=HUMANOID_LAYOUT.skill_dim) == HUMANOID_LAYOUT:  # any skill_dim
        return WINDOW_FEATURES[features]
    if features != "full":
        raise ValueError(f"method.options.window_features {features!r} names humanoid columns; use 'full' on this env")
    phase = range(0) if layout.phase is None else range(layout.phase.start, layout.phase.stop)
    return [i for i in range(layout.frame_dim) if i not in phase]


@dataclass
class CALMConfig(AdversarialConfig):
    """CALM's motion encoder, conditional discriminator, reward and latents (defaults: CALM's values)."""

    encoder_hidden: tuple[int, ...] = (1024, 1024, 512)
    """Motion encoder's hidden sizes (CALM: 1024, 1024, 512)."""
    disc_hidden: tuple[int, ...] = (1024, 1024, 512)
    """Conditional discriminator's hidden sizes (CALM: 1024, 1024, 512)."""
    disc_latent_branch: tuple[int, ...] = (512, 256)
    """Hidden sizes of the conditional discriminator's latent branch: z passes its own ReLU MLP with a tanh output
    of z's size before it joins the transition (CALM's style MLP: 512, 256); empty: z joins as it is."""
    window: int = 60
    """Frames of a reference window the encoder reads (CALM: 60, 2 s at 30 Hz)."""
    window_features: str = "full"
    """Per-frame features of a window: "full" (358) or "compact" (76; ``WINDOW_FEATURES``)."""
    encoder_lr: float = 2e-5
    """Adam learning rate of the motion encoder (CALM: 2e-5, its one learning rate)."""
    encoder_reg: float = 0.1
    """Weight of the encoder's regulariser, alignment + ``uniformity_weight`` x uniformity (CALM: 0.1)."""
    uniformity_weight: float = 0.5
    """Weight of uniformity beside alignment in the regulariser (CALM: 0.5)."""
    uniformity_rows: int = 4096
    """Most windows the uniformity term compares pairwise (the first of the regulariser's draws, which are random):
    its memory grows with their square. CALM's code takes it over its amp_minibatch_size draws, 4096 (and so does
    ``disc_minibatch_size``)."""
    align_max_offset: int = 15
    """The alignment term's second window ends up to this many frames after the first (CALM: 0.5 s)."""
    disc_weight: float = 2.0
    """Weight of -log(1 - D) in the reward (CALM: conditional_disc_reward_scale 2)."""
    latent_steps_min: int = 10
    """With ``resample``: fewest steps a latent is held (CALM: 10)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.encoder_hidden = tuple(int(h) for h in self.encoder_hidden)
        self.disc_hidden = tuple(int(h) for h in self.disc_hidden)
        self.disc_latent_branch = tuple(int(h) for h in self.disc_latent_branch)
        if self.window_features not in WINDOW_FEATURES:
            raise ValueError(
                f"method.options.window_features must be one of {', '.join(WINDOW_FEATURES)}, "
                f"got {self.window_features!r}"
            )
        if self.window < 1 or self.align_max_offset < 0:
            raise ValueError(
                f"method.options.window must be >= 1 and align_max_offset >= 0, got {self.window}, "
                f"{self.align_max_offset}"
            )


class ReferenceWindows:
    """The reference clips' windows of ``length`` frames, each named by the index of its last frame."""

    def __init__(self, ref: ReferenceData, length: int, features: str):
        width = ref.layout.frame_dim
        frames = ref.inputs[:, -width:][:, window_columns(features, ref.layout)]  # o_t: the history's last frame
        table = ((frames - frames.mean(0)) / frames.std(0).clamp_min(1e-3)).clamp(-NORM_CLIP, NORM_CLIP)
        self.table = torch.cat([table, table.new_zeros(1, table.shape[1])])
        """(F + 1, D) standardised frames; the last row is the zero frame that pads a window before its clip."""
        self.length = length
        self.dim = length * table.shape[1]
        """Numbers in one window (the encoder's input)."""
        self.num_frames = ref.num_total
        self.clip_of_frame = ref.clip_of_frame
        self.starts = ref.starts
        self.last = ref.starts + ref.num_frames - 1
        self.first_ends = ref.starts + (ref.num_frames - 1).clamp(max=length - 1)
        """(clips,) each clip's first window: the first that fits in the clip, or the whole clip if shorter."""
        self.num_ends = self.last - self.first_ends + 1
        self._offsets = torch.arange(1 - length, 1, device=ref.inputs.device)

    def gather(self, ends: Tensor) -> Tensor:
        """(B, dim) the windows ending at frames ``ends`` (B,), oldest frame first, zeros before the clip."""
        rows = ends.unsqueeze(-1) + self._offsets
        first = self.starts[self.clip_of_frame[ends]].unsqueeze(-1)
        return self.table[torch.where(rows >= first, rows, self.num_frames)].flatten(1)

    def draw(self, n: int, generator: torch.Generator) -> Tensor:
        """(n,) ends of windows drawn uniformly: a clip, then a window that fits in it."""
        g, dev = generator, self.starts.device
        clip = torch.randint(self.starts.shape[0], (n,), generator=g, device=g.device).to(dev)
        u = torch.rand(n, generator=g, device=g.device).to(dev)
        count = self.num_ends[clip]
        return self.first_ends[clip] + torch.minimum((u * count).long(), count - 1)

    def later(self, ends: Tensor, max_offset: int, generator: torch.Generator) -> Tensor:
        """Ends of windows 0 .. ``max_offset`` frames after ``ends`` in the same clip (clamped to its last)."""
        g = generator
        off = torch.randint(max_offset + 1, ends.shape, generator=g, device=g.device).to(ends.device)
        return torch.minimum(ends + off, self.last[self.clip_of_frame[ends]])

    def frame_in(self, ends: Tensor, generator: torch.Generator) -> Tensor:
        """A frame drawn uniformly from each window's frames inside its clip."""
        g = generator
        span = (ends - self.starts[self.clip_of_frame[ends]] + 1).clamp(max=self.length)
        u = torch.rand(ends.shape, generator=g, device=g.device).to(ends.device)
        return ends - torch.minimum((u * span).long(), span - 1)


class WindowEncoder(nn.Module):
    """E: a (standardised) reference window -> ReLU MLP -> unit latent (B, skill_dim)."""

    def __init__(self, in_dim: int, hidden: tuple[int, ...], skill_dim: int = SKILL_DIM):
        super().__init__()
        self.net = mlp(in_dim, hidden, skill_dim, "relu")

    def forward(self, windows: Tensor) -> Tensor:
        """Unit latents (B, 16) of windows (B, in_dim)."""
        return F.normalize(self.net(windows), dim=-1)


def conditional_inputs(x: Tensor, z: Tensor) -> Tensor:
    """The conditional discriminator's trunk input: transition features then the latent (or its branch's output),
    (B, dim + 16)."""
    return torch.cat([x, z], dim=-1)


class ConditionalDiscriminator(nn.Module):
    """D(s, s' | z): the standardised transition and the latent, through CALM's latent branch (``branch``: a ReLU
    MLP with a tanh output of the latent's size) or as it is, into a ReLU MLP -> logit."""

    def __init__(self, in_dim: int, hidden: tuple[int, ...], branch: tuple[int, ...], skill_dim: int = SKILL_DIM):
        super().__init__()
        self.norm = Standardize(in_dim)
        """The transition's standardisation (the references' statistics); the unit latent is left as it is."""
        self.branch = mlp(skill_dim, branch, skill_dim, "relu") if branch else None
        if self.branch is not None:
            nn.init.uniform_(self.branch[-1].weight, -1.0, 1.0)  # CALM's style layer
        self.net = mlp(in_dim + skill_dim, hidden, 1, "relu")

    def from_standardized(self, x_n: Tensor, z: Tensor) -> Tensor:
        """Logits (B,) of standardised transitions (the gradient penalty is taken with respect to them)."""
        style = z if self.branch is None else torch.tanh(self.branch(z))
        return self.net(conditional_inputs(x_n, style)).squeeze(-1)

    def forward(self, x: Tensor, z: Tensor) -> Tensor:
        """Logits (B,) of transitions ``x`` with their latents ``z``."""
        return self.from_standardized(self.norm(x), z)

    def last_layer(self) -> nn.Linear:
        """The output layer (the logit regulariser acts on its weights)."""
        return self.net[-1]


def alignment_loss(a: Tensor, b: Tensor) -> Tensor:
    """mean ||a_i - b_i||^2 of positive pairs (unit rows)."""
    return (a - b).square().sum(-1).mean()


def uniformity_loss(z: Tensor, t: float = 2.0) -> Tensor:
    """log mean_{i<j} exp(-t ||z_i - z_j||^2) (Wang & Isola 2020).

    The squared distances come from inner products, not ``torch.pdist`` (CALM's): pdist's square root has no
    gradient at 0, and windows are discrete, so a batch often holds one twice."""
    n = z.shape[0]
    sq = z.square().sum(-1)
    d2 = (sq.unsqueeze(-1) + sq - 2.0 * z @ z.T).clamp_min(0.0)
    # the matrix is symmetric, so the mean over i < j is the mean over i != j: a log-sum-exp with the diagonal masked
    # out, instead of the upper triangle's two index tensors (n^2 / 2 int64 each: 8.6 GB at 32,768 rows)
    off = d2.mul(-t).masked_fill(torch.eye(n, dtype=torch.bool, device=z.device), -math.inf)
    return torch.logsumexp(off.flatten(), 0) - math.log(n * (n - 1))


def encoder_regularizer(z: Tensor, z_near: Tensor, cfg: CALMConfig) -> tuple[Tensor, dict[str, Tensor]]:
    """CALM's ``encoder_reg x (alignment(z, z_near) + uniformity_weight x uniformity(z))`` and its terms."""
    align = alignment_loss(z, z_near)
    uniform = uniformity_loss(z[: cfg.uniformity_rows])
    loss = cfg.encoder_reg * (align + cfg.uniformity_weight * uniform)
    return loss, {"alignment": align.detach(), "uniformity": uniform.detach()}


def conditional_disc_loss(
    disc: ConditionalDiscriminator, policy_x: Tensor, policy_z: Tensor, ref_x: Tensor, ref_z: Tensor, cfg: CALMConfig
) -> tuple[Tensor, dict[str, Tensor]]:
    """D's loss on policy transitions (with their latents) and reference transitions (with their window's latent):
    binary cross-entropy, gradient penalty on the standardised reference transition features, logit regulariser
    and weight decay (on every layer, the latent branch's too, as CALM's). The latents come without gradient (no
    term here trains the encoder)."""
    ref_xn = disc.norm(ref_x).detach().requires_grad_(True)
    ref_logits = disc.from_standardized(ref_xn, ref_z.detach())
    pol_logits = disc(policy_x, policy_z.detach())
    gan = gan_loss(pol_logits, ref_logits)
    gp = gradient_penalty(ref_logits, ref_xn)
    loss = gan + cfg.grad_penalty * gp + discriminator_regularizer(disc, disc.last_layer(), cfg)
    return loss, discriminator_stats(gan, gp, ref_logits, pol_logits)


class CALM(SkillMethod):
    """CALM on the shared runner (see the module docstring)."""

    NAME = "calm"
    CONFIG = CALMConfig
    LATENT_CHOICE = "clip_latents"
    CLIP_LATENTS_RULE = "the encoding of the clip's first window (the paper encodes the whole clip)"

    def __init__(self, cfg: CALMConfig, ctx: MethodContext):
        super().__init__(cfg, ctx)
        ref = ctx.reference
        self.layout = ref.layout
        self.windows = ReferenceWindows(ref, cfg.window, cfg.window_features)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(ctx.seed + 202)
            self.encoder = WindowEncoder(self.windows.dim, cfg.encoder_hidden, self.layout.skill_dim)
            self.disc = ConditionalDiscriminator(
                cfg.frames * self.layout.feature_dim, cfg.disc_hidden, cfg.disc_latent_branch, self.layout.skill_dim
            )
        self.disc.norm.fit(transition_features(ref.inputs.cpu(), cfg.frames, self.layout))
        self.encoder.to(self.device)
        self.disc.to(self.device)
        self.params = [*self.encoder.parameters(), *self.disc.parameters()]
        self.optimizer = torch.optim.Adam(
            [
                {"params": list(self.encoder.parameters()), "lr": cfg.encoder_lr},
                {"params": list(self.disc.parameters()), "lr": cfg.lr},
            ],
            fused=True,  # see ppo.PPO: no host read per step
        )
        self.schedule = LatentSchedule(ctx.num_envs, cfg.latent_steps_min, cfg.latent_steps_max, self.generator)
        self.window_end = self.windows.draw(ctx.num_envs, self.generator)
        """(N,) the window of each world's current latent."""
        self.window_latents = self._encode_windows()
        """(F, 16) E of the window ending at every reference frame under the current encoder (refreshed after
        each update: the latents worlds start with, and those relabel scores the rollout with)."""
        self._step_windows: list[Tensor] = []
        """The (N,) windows of the latents of each env step: the last rollout's and those since."""
        self._rollout: tuple[Tensor, Tensor] | None = None
        """(transition features, window ends) of the rollout's rows, cut in ``relabel`` for PPO's minibatches."""
        self._minibatch_latents: Tensor | None = None
        self.step_stats = StepStats()

    @torch.no_grad()
    def _encode_windows(self) -> Tensor:
        ends = torch.arange(self.windows.num_frames, device=self.device)
        return torch.cat([self.encoder(self.windows.gather(e)) for e in ends.split(_ENCODE_CHUNK)])

    def modules(self) -> dict[str, nn.Module]:
        return {"encoder": self.encoder, "disc": self.disc}

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"optimizer": self.optimizer}

    def choose_skills(self, started: Tensor, skills: Tensor) -> Tensor:
        started = started.to(self.device)
        self._step_windows.append(self.window_end)  # the window of the latent the step just taken used
        new = (started | self.schedule.tick(started)) if self.cfg.resample else started
        self.window_end = torch.where(new, self.windows.draw(started.shape[0], self.generator), self.window_end)
        z = self.window_latents[self.window_end].to(skills.device)
        return torch.where(new.to(skills.device).unsqueeze(-1), z, skills)

    @torch.no_grad()
    def relabel(self, storage: RolloutStorage) -> dict[str, Tensor]:
        horizon = storage.horizon
        if len(self._step_windows) < horizon:
            raise RuntimeError(
                f"CALM's relabel needs the window of every step of the rollout ({horizon}), got "
                f"{len(self._step_windows)}: call choose_skills after every env step (SkillChoosingEnv does)"
            )
        self._step_windows = self._step_windows[-horizon:]  # the rollout's steps (kept: relabel may run again)
        ends = torch.stack(self._step_windows).reshape(-1)
        x = transition_features(storage.flat("encoder_inputs"), self.cfg.frames, self.layout)
        # the latent each step was taken with (encoded when its world drew the window), as CALM's code scores it
        disc = discriminator_reward(self.disc(x, storage.flat("skills")))
        reward = self.cfg.disc_weight * disc
        storage.rewards.copy_(reward.view_as(storage.rewards))
        self._rollout = (x, ends)
        return {"disc_reward": disc.mean(), "reward": reward.mean()}

    def policy_inputs(self, ac: Any, idx: Tensor, obs_n: Tensor) -> Tensor:
        """The minibatch's inputs with each sample's latent re-encoded from its window, with gradient, normalised
        as the observation normaliser normalises the skill slice."""
        _, ends = self._rollout
        z = self.encoder(self.windows.gather(ends[idx]))
        self._minibatch_latents = z
        norm, skill = ac.obs_normalizer, self.layout.skill
        mean = norm.mean[skill].to(obs_n.dtype)
        std = (norm.var[skill] + norm.eps).sqrt().to(obs_n.dtype)
        z_n = ((z - mean) / std).clamp(-norm.clip, norm.clip)
        return torch.cat([obs_n[:, : skill.start], z_n, obs_n[:, skill.stop :]], dim=-1)

    def after_policy_step(self, idx: Tensor) -> dict[str, Tensor]:
        """E's step on the gradient PPO's backward left plus the regulariser's; D's step on the minibatch's first
        ``disc_minibatch_size`` rows (their re-encoded latents, detached) and as many reference windows (their
        latents without gradient), which the regulariser also takes."""
        cfg, g = self.cfg, self.generator
        x_all, _ = self._rollout
        idx = cfg.disc_rows(idx)
        policy_z, self._minibatch_latents = self._minibatch_latents[: idx.shape[0]], None
        ends = self.windows.draw(idx.shape[0], g)
        z = self.encoder(self.windows.gather(ends))
        z_near = self.encoder(self.windows.gather(self.windows.later(ends, cfg.align_max_offset, g)))
        reg, reg_stats = encoder_regularizer(z, z_near, cfg)
        ref_x = transition_features(self.ctx.reference.inputs[self.windows.frame_in(ends, g)], cfg.frames, self.layout)
        disc_loss, stats = conditional_disc_loss(self.disc, x_all[idx], policy_z, ref_x, z, cfg)
        (reg + disc_loss).backward()  # added to the PPO loss's gradient on E
        if self.ctx.dp is not None:
            self.ctx.dp.average_gradients(self.params)
        if cfg.max_grad_norm is not None:
            nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step_stats.add({**stats, **reg_stats})
        return {}

    def update(self, storage: RolloutStorage, generator: torch.Generator) -> dict[str, Tensor]:
        """The means of this rollout's steps (taken in ``after_policy_step``); the windows' latents refreshed."""
        self._rollout = None
        self.window_latents = self._encode_windows()
        return self.step_stats.pop_means()

    @torch.no_grad()
    def clip_latents(self) -> Tensor:
        """(clips, 16) each clip's latent: E of its first window."""
        return self.window_latents[self.windows.first_ends]

    def probe_latents(self, clips: Sequence[int]) -> Tensor:
        """(len(clips), 1, 16): each of ``clips``' latent as evaluation takes it (``clip_latents``)."""
        return self.clip_latents()[list(clips)].unsqueeze(1)

    def extra_state(self) -> dict:
        return {"schedule": self.schedule.state_dict(), "window_end": self.window_end.clone()}

    def load_extra_state(self, state: dict) -> None:
        self.schedule.load_state_dict(state["schedule"])
        self.window_end = state["window_end"].to(self.device).clone()
        self._step_windows.clear()
        self.window_latents = self._encode_windows()

    def after_load(self) -> None:
        self.window_latents = self._encode_windows()

    def export(self, run_path: Path, meta: dict | None = None) -> dict:
        """Write ``clip_latents.json`` (each clip's latent by name); method.json names it."""
        names = self.ctx.env.core.lib.names
        latents = {name: z for name, z in zip(names, self.clip_latents().cpu().tolist())}
        with atomic_path(Path(run_path) / RunDir.CLIP_LATENTS) as tmp:
            Path(tmp).write_text(json.dumps(latents, indent=1) + "\n")
        return {
            "name": self.NAME,
            "latent_choice": self.LATENT_CHOICE,
            "clip_latents": RunDir.CLIP_LATENTS,
            "clip_latents_rule": self.CLIP_LATENTS_RULE,
        }


__all__ = [
    "CALM",
    "WINDOW_FEATURES",
    "CALMConfig",
    "ConditionalDiscriminator",
    "ReferenceWindows",
    "WindowEncoder",
    "alignment_loss",
    "conditional_disc_loss",
    "conditional_inputs",
    "encoder_regularizer",
    "uniformity_loss",
]
