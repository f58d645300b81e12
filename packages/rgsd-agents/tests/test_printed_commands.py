"""Commands printed for copy and paste stay one shell word per path, spaces and all."""

from __future__ import annotations

from pathlib import Path

from rgsd_agents.commands.train import summary


def test_the_training_summary_quotes_the_tensorboard_folder():
    assert summary(Path("runs/my run"), []).endswith("tensorboard --logdir 'runs/my run/tb'")
