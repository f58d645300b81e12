"""A quick imitation check during training: the deterministic policy tracking clips from fixed starts.

The training rollouts' Cartesian error is biased by survival (longer episodes
drift further before they end), so progress is also measured close to the way
``rgsd eval`` does (docs/evaluation.md): worlds start at fixed frames of each probed clip (its first frame
and ``starts_per_clip - 1`` more, evenly spaced, to average out single
rollouts) with z = z_m, the mean action is applied until the clip's last frame or ``PROBE_FRAMES`` steps,
whichever comes first, and no early termination cuts a rollout short (a fall stays in the average with
its large error). Up to ``MAX_PROBE_CLIPS`` clips are probed, spread over the categories
(``rgsd_envs.motion.selection.spread_clips``, the rule ``rgsd eval --max-clips`` picks with too).
``rgsd eval`` (rgsd-eval) is the full evaluation; this is a cheap
learning curve for TensorBoard. It uses its own env, so training numbers do not
depend on whether it runs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import torch

from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.torch_env import RGSDTorchEnv
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.motion.selection import spread_clips
from rgsd_envs.runs.policy import PolicyMLP

log = logging.getLogger(__name__)

PROBE_FRAMES = 300
"""Steps a probe rollout runs at most (10 s at 30 Hz; the demo clips are 3 s): long enough for a fall or a drift
to show, and a probe costs worlds x 300 steps whatever the clips' lengths (to the end of a 10-minute clip every
world would step 18,000 times)."""
MAX_PROBE_CLIPS = 32
"""Clips a probe rolls out at most (``spread_clips`` picks them)."""


class ImitationProbe:
    """Worlds at fixed starts of each probed clip; ``run(policy)`` returns Cartesian errors (overall, per clip) and
    tracking metrics."""

    def __init__(
        self,
        env_cfg: EnvConfig,
        lib: MotionLib,
        encoder: str,
        starts_per_clip: int = 4,
        max_clips: int = MAX_PROBE_CLIPS,
        candidates: int = 1,
        max_frames: int = PROBE_FRAMES,
    ):
        cfg = env_cfg.without_early_termination(p_imitation=1.0, eval_kappa=None)
        self.threshold = env_cfg.deviation.threshold
        self.clip_ids = np.asarray(spread_clips(lib.categories, max_clips), dtype=np.int64)
        """Library indices of the probed clips, ascending (the order of ``run``'s latents and per-clip numbers)."""
        frames = lib.num_frames.cpu().numpy()[self.clip_ids]
        self.shape = (len(frames), starts_per_clip, candidates)
        """Worlds are (clip, start, candidate latent), in that order."""
        self.rows = np.repeat(np.arange(len(frames)), starts_per_clip * candidates)
        """Each world's probed clip (a row of ``clip_ids``)."""
        self.clips = self.clip_ids[self.rows]
        """Each world's clip in the library."""
        k = np.tile(np.repeat(np.arange(starts_per_clip), candidates), len(frames))
        self.candidate = np.tile(np.arange(candidates), len(frames) * starts_per_clip)
        self.starts = k * (frames[self.rows] - 1) // starts_per_clip
        self.length = np.minimum(frames[self.rows] - 1 - self.starts, max_frames)
        """Steps each world is scored: from its start to its clip's last frame, at most ``max_frames``."""
        self.names = [lib.names[i] for i in self.clip_ids]
        self.env = RGSDTorchEnv(len(self.clips), config=cfg, motions=lib, encoder=encoder)

    @property
    def num_clips(self) -> int:
        """Clips probed."""
        return self.shape[0]

    @torch.no_grad()
    def run(self, policy: PolicyMLP, latents: torch.Tensor | None = None) -> dict[str, float]:
        """Roll out each start once; error in cm, share of frames within the deviation threshold, imitation reward.

        ``latents`` (probed clips, candidates, 16), in ``clip_ids`` order, replace the encoder's z_m; a clip counts with its best candidate (lowest
        error over its starts), as a best-of-N method picks a clip's latent. Latents (clips, candidates, T, 16) change
        every step: a world at its clip's frame f acts with row min(f, T - 1) (per-step tracking latents). Per-step
        rows stay on the env's device and are read once at the end."""
        env = self.env
        n = len(self.clips)
        device = policy.normalizer.mean.device
        options = {"clip": self.clips.tolist(), "start_frame": self.starts.tolist(), "task": "imitation"}
        obs, _ = env.reset(seed=0, options=options)
        per_step = latents is not None and latents.dim() == 4
        if per_step:
            table = latents.to(env.device)[self.rows, self.candidate]  # (n, T, 16)
            starts = torch.as_tensor(self.starts, device=env.device)
            rows = torch.arange(n, device=env.device)
        elif latents is not None:
            env.set_skills(np.arange(n), latents.to(env.device)[self.rows, self.candidate])
            obs = env.observations()
        alive = torch.ones(n, dtype=torch.bool, device=env.device)
        length = torch.as_tensor(self.length, device=env.device)
        sums = torch.zeros(4, n, dtype=torch.float64, device=env.device)  # error, within, reward, steps
        for t in range(int(self.length.max())):
            if per_step:
                env.set_skills(np.arange(n), table[rows, (starts + t).clamp(max=table.shape[1] - 1)])
                obs = env.observations()
            obs, reward, _, _, ex = env.step(policy(obs.to(device)).to(env.device))
            a = (alive & (t < length)).to(torch.float64)  # a world past max_frames steps stops counting
            error = ex.cartesian_error.to(torch.float64)
            sums += torch.stack((error * a, (error < self.threshold) * a, reward.to(torch.float64) * a, a))
            alive &= ~ex.done
        err_sum, within, reward_sum, steps = sums.cpu().numpy()
        steps = np.maximum(steps, 1)
        m = self.shape[0]
        per_start = (100.0 * err_sum / steps).reshape(self.shape)
        best = per_start.mean(1).argmin(1)  # (clips,) each clip's best candidate latent

        def chosen(x: np.ndarray) -> np.ndarray:  # (clips, starts) of the best candidates
            return x.reshape(self.shape)[np.arange(m), :, best]

        out = {
            "probe/cartesian_error_cm": float(chosen(per_start.reshape(-1)).mean()),
            "probe/frames_within_threshold": float(chosen(within / steps).mean()),
            "probe/imitation_reward": float(chosen(reward_sum / steps).mean()),
        }
        for c, name in enumerate(self.names):
            out[f"probe_clips/{name}_cm"] = float(chosen(per_start.reshape(-1))[c].mean())
        return out

    def close(self) -> None:
        """Release the env."""
        self.env.close()


class ProbeHooks:
    """The loop hooks of a trainer that probes imitation every ``cfg.probe_every`` iterations (rank 0 only).

    A trainer lists this class before ``TrainingLoop`` among its bases, calls ``start_probe(writer)`` from its
    ``on_start`` and says which policy and latents are probed (``probe_policy``, ``probe_candidates``)."""

    _probe: ImitationProbe | None = None
    initial_probe: dict[str, float] | None = None
    """The untrained policy's probe of a fresh run (the training summary's 'before'; None without one)."""

    def probe_policy(self) -> PolicyMLP:
        """The policy the probe rolls out (observations ``[o_t, z]`` to mean actions)."""
        raise NotImplementedError

    def probe_candidates(self, clips: Sequence[int]) -> torch.Tensor | None:
        """(len(clips), candidates, 16) latents to try for each of the library's ``clips`` (a best-of-N method),
        (len(clips), candidates, T, 16) latents per step (``ImitationProbe.run``), or None for the encoder's z_m."""
        return None

    def probe_extras(self) -> dict[str, float]:
        """The method's own statistics, logged with each probe."""
        return {}

    def start_probe(self, writer: object) -> None:
        """Build the probe's worlds and, on a fresh run, log the untrained policy's probe at step 0."""
        if not self.is_main or not self.cfg.probe_every:
            return
        latents = self.probe_candidates([0])
        candidates = 1 if latents is None else latents.shape[1]
        # candidate latents per clip (a best-of-N method) start from the clip's first frame only, as the search of
        # rgsd eval does; one latent per clip averages 4 starts
        self._probe = probe = ImitationProbe(
            self.env_cfg,
            self.env.core.lib,
            str(self.run.encoder_path),
            starts_per_clip=4 if candidates == 1 else 1,
            candidates=candidates,
        )
        log.info(
            "probing imitation every %d iterations: %d of %d clips, %d worlds, up to %d frames each",
            self.cfg.probe_every,
            probe.num_clips,
            self.env.core.lib.num_clips,
            len(probe.clips),
            int(probe.length.max()),
        )
        if self.iteration == 0:
            self.initial_probe = self.probe()
            for k, v in self.initial_probe.items():
                writer.add_scalar(k, v, 0)

    def probe(self) -> dict[str, float]:
        """Imitation probe of the current policy, with the method's own statistics."""
        assert self._probe is not None, "start_probe builds the probe"
        out = self._probe.run(self.probe_policy(), self.probe_candidates(self._probe.clip_ids.tolist()))
        out.update(self.probe_extras())
        return out

    def on_iteration(self, metrics: dict[str, float]) -> None:
        """Probe every ``probe_every`` iterations."""
        if self._probe is not None and self.iteration % self.cfg.probe_every == 0:
            metrics.update(self.probe())

    def on_finish(self) -> None:
        """Release the probe's environment."""
        if self._probe is not None:
            self._probe.close()
            self._probe = None
