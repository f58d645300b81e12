"""Episode statistics of training rollouts, kept on the env's device and read once per iteration.

``EpisodeStats`` holds each world's running return, length and the frames its
episode had left at its start, and sums per task (discovery 0, imitation 1)
over a rollout: rewards, steps, imitation Cartesian error, finished episodes,
their lengths, returns, how many reached the clip's end and how much of the
clip they covered. Every update is a fixed-shape tensor op (``index_add_`` by
task, ``torch.where`` by the done mask), so a rollout never waits for the
device; ``summary`` reads the sums in one transfer.
"""

from __future__ import annotations

from typing import Any

import torch

Tensor = torch.Tensor

ROWS = (
    "reward_sum",
    "steps",
    "error_sum",
    "ep_count",
    "ep_length",
    "ep_return",
    "ep_completed",
    "ep_completion",
)
"""The per-task sums, in the order of ``EpisodeStats.sums``' rows."""


class EpisodeStats:
    """Running per-world episode counters and per-task rollout sums (see the module docstring)."""

    def __init__(self, frames_left: Tensor):
        device = frames_left.device
        n = frames_left.shape[0]
        self.ret = torch.zeros(n, dtype=torch.float64, device=device)
        self.length = torch.zeros(n, dtype=torch.long, device=device)
        self.frames_left = frames_left.to(torch.long).clone()
        """Frames from each episode's start to its clip's end."""
        self.sums = torch.zeros(len(ROWS), 2, dtype=torch.float64, device=device)
        """(rows, task) sums over the current rollout."""

    def begin_rollout(self) -> None:
        """Zero the rollout sums (the running episodes carry on)."""
        self.sums.zero_()

    def step(
        self, reward: Tensor, task: Tensor, done: Tensor, time_outs: Tensor, error: Tensor, frames_left: Tensor
    ) -> None:
        """Account one step of all worlds: the transition's reward, task, done and time-out flags and Cartesian
        error; ``frames_left`` describes the episodes now running (new ones for done worlds)."""
        r = reward.to(torch.float64)
        d = done.to(torch.float64)
        self.ret += r
        self.length += 1
        length = self.length.to(torch.float64)
        imitation = (task == 1).to(torch.float64)
        rows = torch.stack(
            (
                r,
                torch.ones_like(r),
                error.to(torch.float64) * imitation,
                d,
                d * length,
                d * self.ret,
                d * time_outs.to(torch.float64),
                d * length / self.frames_left.clamp_min(1).to(torch.float64),
            )
        )
        self.sums.index_add_(1, task.to(torch.long), rows)
        self.ret = torch.where(done, torch.zeros_like(self.ret), self.ret)
        self.length = torch.where(done, torch.zeros_like(self.length), self.length)
        self.frames_left = torch.where(done, frames_left.to(torch.long), self.frames_left)

    def summary(self, extra: dict[str, Tensor] | None = None) -> dict[str, float]:
        """Per-step and per-episode means by task of the rollout (keys left out when there was nothing to
        average), plus the scalars ``extra`` (0-d tensors, e.g. simulator counters): one read of the device."""
        extra = extra or {}
        flat = torch.cat([self.sums.flatten(), *(v.reshape(1).to(self.sums) for v in extra.values())]).tolist()
        n = self.sums.numel()
        s = dict(zip(ROWS, (flat[2 * i : 2 * i + 2] for i in range(len(ROWS)))))
        out: dict[str, float] = {}
        for c, task in ((1, "imitation"), (0, "discovery")):
            if s["steps"][c]:
                out[f"rollout/{task}_reward"] = s["reward_sum"][c] / s["steps"][c]
            k = s["ep_count"][c]
            if k:
                out[f"episodes/{task}_length"] = s["ep_length"][c] / k
                out[f"episodes/{task}_return"] = s["ep_return"][c] / k
                out[f"episodes/{task}_completed"] = s["ep_completed"][c] / k
                out[f"episodes/{task}_completion"] = s["ep_completion"][c] / k
        if s["steps"][1]:
            out["rollout/imitation_cartesian_error"] = s["error_sum"][1] / s["steps"][1]
        out["rollout/imitation_share"] = s["steps"][1] / max(s["steps"][0] + s["steps"][1], 1)
        out.update(zip(extra, flat[n:]))
        return {k: float(v) for k, v in out.items()}

    def state_dict(self) -> dict[str, Tensor]:
        """The running per-world counters (the rollout sums restart with every rollout)."""
        return {
            "ret": self.ret.cpu().clone(),
            "length": self.length.cpu().clone(),
            "frames_left": self.frames_left.cpu().clone(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the running counters (also from checkpoints that saved them as numpy arrays)."""
        device = self.ret.device
        self.ret = torch.as_tensor(state["ret"], dtype=torch.float64).to(device).clone()
        self.length = torch.as_tensor(state["length"], dtype=torch.long).to(device).clone()
        self.frames_left = torch.as_tensor(state["frames_left"], dtype=torch.long).to(device).clone()
