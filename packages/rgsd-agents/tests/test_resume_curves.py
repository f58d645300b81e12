"""A resumed run's TensorBoard curves read as one run's: every iteration once, none lost at the resume point."""

from __future__ import annotations

import signal

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rgsd_agents.testing import tiny_encoder_file, tiny_train_config
from rgsd_agents.training.runner import Runner

BATCH = 4 * 8
"""Samples per iteration of the tiny config (4 worlds x 8 steps): the TensorBoard step of iteration i is i x BATCH."""
PROBE_TAG = "probe/cartesian_error_cm"


@pytest.fixture(scope="module")
def encoder(tmp_path_factory) -> str:
    return str(tiny_encoder_file(tmp_path_factory.mktemp("enc") / "encoder.pt"))


def _train(encoder: str, run, iterations: int, stop_at: int | None = None) -> None:
    """A tiny run logging every iteration and probing every second one; ``stop_at``: a Ctrl-C after that iteration."""
    cfg = tiny_train_config(encoder, iterations=iterations, checkpoint_every=2, log_every=1, probe_every=2)
    runner = Runner(cfg, run, progress=False)
    if stop_at is not None:
        iterate = runner.iterate

        def iterate_then_ctrl_c():
            metrics = iterate()
            if runner.iteration == stop_at:
                signal.raise_signal(signal.SIGINT)
            return metrics

        runner.iterate = iterate_then_ctrl_c
    runner.learn()
    runner.close()


def _resume(run, iterations: int) -> None:
    runner = Runner.resume(run, {"iterations": iterations}, progress=False)
    runner.learn()
    runner.close()


def _curves(run) -> dict[str, list[tuple[int, float]]]:
    """(step, value) of the iteration counter and the probe as TensorBoard's own loader reads the run's tb/."""
    acc = EventAccumulator(str(run / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in ("charts/iteration", PROBE_TAG)}


def _assert_one_run(run, iterations: int) -> None:
    curves = _curves(run)
    assert curves["charts/iteration"] == [(i * BATCH, float(i)) for i in range(1, iterations + 1)]
    assert [step for step, _ in curves[PROBE_TAG]] == [i * BATCH for i in range(0, iterations + 1, 2)]


def test_a_resumed_run_keeps_the_iteration_it_resumed_from(tmp_path, encoder):
    run = tmp_path / "run"
    _train(encoder, run, iterations=4)
    _resume(run, 6)
    _assert_one_run(run, 6)


def test_a_run_stopped_by_ctrl_c_and_resumed_logs_every_iteration_once(tmp_path, encoder):
    run = tmp_path / "run"
    _train(encoder, run, iterations=50, stop_at=3)  # checkpointed after iteration 3, off the checkpoint_every grid
    _resume(run, 6)
    _assert_one_run(run, 6)


def test_what_was_logged_after_the_checkpoint_resumed_from_is_logged_again_once(tmp_path, encoder):
    """Killed after iteration 3 was logged but before its checkpoint lasted: the resume from iteration 2 trains 3
    again, and TensorBoard shows that one, not both."""
    run = tmp_path / "run"
    _train(encoder, run, iterations=3)
    for name in ("latest.pt", "iter_000003.pt"):
        (run / "checkpoints" / name).unlink()
    _resume(run, 4)
    _assert_one_run(run, 4)
