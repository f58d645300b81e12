"""The off-policy loop's schedule (``OffPolicyConfig``), apart from the loop so that a method's config can hold it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class OffPolicyConfig:
    """The off-policy loop (see the module docstring for the schedule and its defaults)."""

    steps_per_iteration: int = 10
    """Steps of all worlds per iteration."""
    updates_per_iteration: int = 50
    """Gradient steps after them."""
    random_steps: int = 50_000
    """Transitions (all worlds together) with uniformly random actions before the first update (paper: 1000
    steps of its 50 worlds)."""
    replay_capacity: int = 1_000_000
    """Transitions the replay buffer holds, allocated at the start (3.2 KB each: 1 M is ~3.2 GB, which a CPU
    machine holds; the paper's 5 M, ~16 GB, is for a GPU learner)."""
    replay_checkpoint_max_gb: float = 1.0
    """Checkpoints hold the replay rows while they take at most this (exact resume); beyond it a resumed run
    refills the buffer (not bit-identical)."""

    def gradient_steps(self, iterations: int, num_envs: int, batch_size: int) -> int:
        """Gradient steps of ``iterations`` iterations of ``num_envs`` worlds: ``OffPolicyRunner.iterate`` updates
        once more than ``random_steps`` transitions are collected and the buffer holds ``batch_size`` of them."""
        per_iteration = self.steps_per_iteration * num_envs
        if self.replay_capacity < batch_size:
            return 0
        first = max(self.random_steps // per_iteration + 1, -(-batch_size // per_iteration))
        return self.updates_per_iteration * max(0, iterations - first + 1)

    def __post_init__(self) -> None:
        for name in ("steps_per_iteration", "updates_per_iteration", "replay_capacity"):
            if getattr(self, name) < 1:
                raise ValueError(f"loop.{name} must be >= 1, got {getattr(self, name)}")
        if self.random_steps < 0 or self.replay_checkpoint_max_gb < 0:
            raise ValueError("loop.random_steps and loop.replay_checkpoint_max_gb must be >= 0")
