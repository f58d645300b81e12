"""A quick imitation check during training: the deterministic policy tracking each clip to its end.

The training rollouts' Cartesian error is biased by survival (longer episodes
drift further before they end), so progress is also measured close to the way
SPEC §6 evaluates: worlds start at fixed frames of each clip (its first frame
and ``starts_per_clip - 1`` more, evenly spaced, to average out single
rollouts) with z = z_m, the mean action is applied until the clip's last frame,
and no early termination cuts a rollout short (a fall stays in the average with
its large error). ``rgsd eval`` (rgsd-eval) is the full evaluation; this is a cheap
learning curve for TensorBoard. It uses its own env, so training numbers do not
depend on whether it runs.
"""

from __future__ import annotations

import numpy as np
import torch

from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.torch_env import RGSDTorchEnv
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.runs.policy import PolicyMLP


class ImitationProbe:
    """Worlds at fixed starts of each clip; ``run(policy)`` returns Cartesian errors (overall, per clip) and tracking metrics."""

    def __init__(self, env_cfg: EnvConfig, lib: MotionLib, encoder: str, starts_per_clip: int = 4, max_clips: int = 32):
        cfg = env_cfg.without_early_termination(p_imitation=1.0, eval_kappa=None)
        self.threshold = env_cfg.deviation_threshold
        frames = lib.num_frames[: min(lib.num_clips, max_clips)].cpu().numpy()
        self.clips = np.repeat(np.arange(len(frames)), starts_per_clip)
        k = np.tile(np.arange(starts_per_clip), len(frames))
        self.starts = k * (frames[self.clips] - 1) // starts_per_clip
        self.length = frames[self.clips] - 1 - self.starts
        """Steps from each start to its clip's last frame."""
        self.names = list(lib.names[: len(frames)])
        self.env = RGSDTorchEnv(len(self.clips), config=cfg, motions=lib, encoder=encoder)

    @torch.no_grad()
    def run(self, policy: PolicyMLP) -> dict[str, float]:
        """Roll out each start once; error in cm, share of frames within the deviation threshold, imitation reward.

        Per-step rows stay on the env's device and are read once at the end."""
        env = self.env
        n = len(self.clips)
        device = policy.normalizer.mean.device
        options = {"clip": self.clips.tolist(), "start_frame": self.starts.tolist(), "task": "imitation"}
        obs, _ = env.reset(seed=0, options=options)
        alive = torch.ones(n, dtype=torch.bool, device=env.device)
        sums = torch.zeros(4, n, dtype=torch.float64, device=env.device)  # error, within, reward, steps
        for _ in range(int(self.length.max())):
            obs, reward, _, _, ex = env.step(policy(obs.to(device)).to(env.device))
            a = alive.to(torch.float64)
            error = ex.cartesian_error.to(torch.float64)
            sums += torch.stack((error * a, (error < self.threshold) * a, reward.to(torch.float64) * a, a))
            alive &= ~ex.done
        err_sum, within, reward_sum, steps = sums.cpu().numpy()
        steps = np.maximum(steps, 1)
        per_start = 100.0 * err_sum / steps
        out = {
            "probe/cartesian_error_cm": float(per_start.mean()),
            "probe/frames_within_threshold": float((within / steps).mean()),
            "probe/imitation_reward": float((reward_sum / steps).mean()),
        }
        for m, name in enumerate(self.names):
            out[f"probe_clips/{name}_cm"] = float(per_start[self.clips == m].mean())
        return out

    def close(self) -> None:
        """Release the env."""
        self.env.close()
