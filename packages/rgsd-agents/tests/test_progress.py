"""Progress bars follow the run's budget: a clock under a time budget, an iteration counter otherwise."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

from rgsd_agents.rl.loop import TrainingLoop
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils import progress
from rgsd_envs.utils.progress import ProgressBar, StatusBar, clock


def test_clock_formats_minutes_and_hours():
    assert clock(0) == "00:00"
    assert clock(322) == "05:22"
    assert clock(15 * 60) == "15:00"
    assert clock(3600 + 62) == "1:01:02"
    assert clock(float("inf")) == "--:--"


def test_time_budget_makes_the_bar_a_clock_not_an_iteration_count():
    """A demo run stopped by its time budget: 272 of 100000 iterations after 5:22 of a 15-minute budget."""
    bar = ProgressBar("train", 100000, 15 * 60, file=io.StringIO())
    bar.update(272, 322.0, "sps=1234")
    frac, text = bar.status()
    bar.close()
    assert abs(frac - 322 / 900) < 1e-9
    assert text.startswith("05:22/15:00 used, 09:38 left")
    assert "272 it, 0.84 it/s" in text
    line = bar.render()
    assert " 36%|" in line and "05:22/15:00" in line and "sps=1234" in line
    assert "100000" not in line and "31:05" not in line


def test_iterations_bound_the_bar_when_they_end_the_run_first():
    bar = ProgressBar("train", 100, 15 * 60, file=io.StringIO())
    bar.update(40, 80.0)  # 0.5 it/s: 60 more iterations take 2:00, well inside the 15 minutes
    frac, text = bar.status()
    bar.close()
    assert frac == 0.4
    assert text == "40/100 it, 01:20 elapsed, 02:00 left, 0.50 it/s"


def test_without_a_budget_the_bar_counts_iterations():
    bar = ProgressBar("pretrain", 3000, None, unit="step", file=io.StringIO())
    bar.update(300, 30.0)
    frac, text = bar.status()
    bar.close()
    assert frac == 0.1
    assert text == "300/3000 step, 00:30 elapsed, 04:30 left, 10.00 step/s"


def test_a_resumed_run_takes_its_rate_from_this_session():
    """Earlier sessions' time counts against the budget but not in the rate."""
    bar = ProgressBar("train", 1000, 600.0, initial=100, elapsed=500.0, file=io.StringIO())
    bar.update(110, 520.0)  # 10 it in 20 s this session
    _, text = bar.status()
    bar.close()
    assert text.startswith("08:40/10:00 used, 01:20 left | 110 it, 0.50 it/s")


def _wall_clock_at(monkeypatch, seconds: list[float]) -> None:
    """The bars' wall clock reads ``seconds[0]`` (a test moves it on)."""
    monkeypatch.setattr(progress, "wall_clock", lambda: seconds[0])


def test_the_time_left_is_wall_time_when_more_than_the_counted_time_passes(monkeypatch):
    """A trainer counting 1 s per iteration that spends another second between iterations (probes, checkpoints):
    half of its 60 s budget used after 31 iterations and 62 s, so about 60 s of wall time are left, not 29."""
    now = [0.0]
    _wall_clock_at(monkeypatch, now)
    bar = ProgressBar("train", 100000, 60.0, file=io.StringIO())
    for i in range(1, 32):
        now[0] = 2.0 * i
        bar.update(i, float(i))
    frac, text = bar.status()
    bar.close()
    assert bar.counted_share() == 0.5  # 30 counted seconds in the 60 s since the first update
    assert abs(frac - 31 / 60) < 1e-9
    assert text == "00:31/01:00 used, 00:58 left | 31 it, 0.50 it/s"


def test_the_iteration_eta_is_wall_time_too(monkeypatch):
    now = [0.0]
    _wall_clock_at(monkeypatch, now)
    bar = ProgressBar("train", 100, None, file=io.StringIO())
    for i in range(1, 41):
        now[0] = 4.0 * i  # 2 s counted, 2 s more between iterations
        bar.update(i, 2.0 * i)
    _, text = bar.status()
    bar.close()
    assert text == "40/100 it, 01:20 elapsed, 04:00 left, 0.25 it/s"


def test_before_a_rate_the_bar_gives_no_time_left():
    """A run resumed at 58 of 80 iterations with 22 s of a 2.5 h budget used: its first line cannot tell which limit
    ends it, so it gives no time left (not the budget's 2:29:38)."""
    log = io.StringIO()
    bar = ProgressBar("train", 80, 9000.0, initial=58, elapsed=22.0, file=log)
    first = log.getvalue().splitlines()[0]
    assert first.endswith("| 00:22/2:30:00 used | 58 it, -- it/s") and "left" not in first
    bar.update(59, 23.0)
    _, text = bar.status()
    bar.close()
    assert text == "59/80 it, 00:23 elapsed, 00:21 left, 1.00 it/s"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_file_gets_whole_lines_not_redraws():
    """``nohup rgsd train > log``: one line at the start and one at the end of a fast run, no carriage returns."""
    log = io.StringIO()
    bar = ProgressBar("train", 1000, None, file=log)
    for i in range(1, 1001):
        bar.update(i, i / 100.0)
    bar.close()
    out = log.getvalue()
    assert "\r" not in out
    lines = out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("train:   0%|") and lines[1].startswith("train: 100%|")
    assert "1000/1000 it, 00:10 elapsed" in lines[1]


def test_a_log_file_gets_a_line_per_interval(monkeypatch):
    monkeypatch.setattr(progress, "LOG_INTERVAL", 0.0)
    log = io.StringIO()
    bar = StatusBar("reproduce", file=log)
    bar.show(0.25, "a")
    bar.show(0.25, "a")  # unchanged: not written again
    bar.write("start step")
    bar.show(0.5, "b")
    bar.close()
    lines = log.getvalue().splitlines()
    assert [ln[:16] for ln in lines] == ["reproduce:  25%|", "start step", "reproduce:  50%|"]
    assert lines[0].endswith("| a") and lines[2].endswith("| b")


def test_a_terminal_gets_the_bar_redrawn_in_place():
    term = _Terminal()
    bar = ProgressBar("train", 1000, None, file=term)
    for i in range(1, 11):
        bar.update(i, float(i))
    bar.close()
    assert term.getvalue().count("\r") >= 2 and "10/1000 it" in term.getvalue()


@dataclass
class _LoopCfg:
    iterations: int = 100000
    max_minutes: float | None = 1.0
    checkpoint_every: int = 1000
    keep_checkpoints: int = 1
    log_every: int = 1000


class _FakeTrainer(TrainingLoop):
    """Ten simulated seconds per iteration: a 1-minute budget ends after 6 iterations."""

    def __init__(self, run_dir: Any, cfg: _LoopCfg):
        super().__init__()
        self.cfg, self.run, self.progress = cfg, RunDir(run_dir), True
        self.progress_file = io.StringIO()

    def iterate(self) -> dict[str, float]:
        self.iteration += 1
        self.elapsed += 10.0
        return {"charts/SPS": 100.0}

    def trainer_state(self) -> dict[str, Any]:
        return {}

    def load_trainer_state(self, state: dict[str, Any]) -> None:
        pass


def test_training_loop_bar_follows_the_time_budget(tmp_path):
    trainer = _FakeTrainer(tmp_path / "run", _LoopCfg())
    history = trainer.learn()
    out = trainer.progress_file.getvalue()
    last = out.replace("\n", "\r").split("\r")[-2]
    assert len(history) == 6
    assert "100%|" in last and "01:00/01:00 used, 00:00 left | 6 it, 0.10 it/s | sps=100" in last
    assert "100000" not in out


class _ProbingTrainer(_FakeTrainer):
    """Ten counted seconds per iteration and ten more of wall time after each (a probe, say)."""

    def __init__(self, run_dir: Any, cfg: _LoopCfg, now: list[float]):
        super().__init__(run_dir, cfg)
        self.now = now

    def iterate(self) -> dict[str, float]:
        self.now[0] += 10.0
        return super().iterate()

    def on_iteration(self, metrics: dict[str, float]) -> None:
        self.now[0] += 10.0


def test_training_loop_lines_give_the_wall_time_left(tmp_path, monkeypatch):
    now = [0.0]
    _wall_clock_at(monkeypatch, now)
    monkeypatch.setattr(progress, "LOG_INTERVAL", 0.0)
    trainer = _ProbingTrainer(tmp_path / "run", _LoopCfg(), now)
    trainer.learn()
    lines = trainer.progress_file.getvalue().splitlines()
    # after 3 iterations: 30 s of the 60 s budget counted in 60 s of wall time since the first; the rest takes 60 s
    assert any("00:30/01:00 used, 01:00 left | 3 it, 0.05 it/s" in line for line in lines), lines


def test_pretraining_bar_follows_its_seconds_budget(tmp_path):
    from rgsd_agents.pretraining.config import PretrainConfig
    from rgsd_agents.pretraining.loop import pretrain

    buf = io.StringIO()
    cfg = PretrainConfig(hidden=(16,), steps=100000, max_seconds=1.0, target_alignment=None, batch_size=32)
    result = pretrain(cfg, tmp_path / "enc", progress=True, progress_file=buf)
    last = buf.getvalue().replace("\n", "\r").split("\r")[-2]
    assert result.steps < 100000
    assert "00:01/00:01 used, 00:00 left" in last and f"| {result.steps} step," in last and "align=" in last
    assert "100000" not in buf.getvalue()


def test_a_count_bar_writes_lines_with_the_time_left_to_a_log_file(monkeypatch):
    from rgsd_envs.utils.progress import CountBar

    monkeypatch.setattr(progress, "LOG_INTERVAL", 0.0)
    log = io.StringIO()
    with CountBar("r1: videos", 4, unit="tile", file=log) as bar:
        for _ in range(4):
            bar.advance()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and len(lines) == 5, lines
    assert lines[-1].startswith("r1: videos: 100%") and "4/4 tile" in lines[-1] and "00:00 left" in lines[-1]
