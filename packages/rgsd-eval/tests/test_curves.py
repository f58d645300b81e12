"""Training curves read back from a run folder's TensorBoard log, and plotted for several runs."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pytest
import yaml

from rgsd_eval.curves import plot_curves, read_curves, read_scalars, training_minutes

BATCH = 100
"""Samples per iteration of the fake runs."""


def fake_run(path: Path, walk_cm: list[float], punch_cm: list[float], seconds: float = 2.0) -> Path:
    """A run folder whose tb/ holds what ``rgsd train`` logs: four iterations of ``seconds`` each and
    probes at steps 0, 200 and 400; its encoder file names the clips' categories."""
    from torch.utils.tensorboard import SummaryWriter

    from rgsd_envs.rewards.encoders import MLPEncoder

    path.mkdir(parents=True)
    (path / "config.yaml").write_text(yaml.safe_dump({"env": {"motions": "demo"}}))
    MLPEncoder((4,)).save(
        path / "encoder.pt", clip_names=["demo_walk", "demo_punch"], clip_categories=["walk", "punch"]
    )
    w = SummaryWriter(str(path / "tb"))
    for it in range(1, 5):
        w.add_scalar("perf/iteration_seconds", seconds, it * BATCH)
        w.add_scalar("charts/iteration", float(it), it * BATCH)
    for k, step in enumerate((0, 2 * BATCH, 4 * BATCH)):
        w.add_scalar("probe_clips/demo_walk_cm", walk_cm[k], step)
        w.add_scalar("probe_clips/demo_punch_cm", punch_cm[k], step)
        w.add_scalar("probe/cartesian_error_cm", (walk_cm[k] + punch_cm[k]) / 2, step)
    w.close()
    return path


def test_probe_curves_samples_minutes_and_categories_read_back(tmp_path):
    rc = read_curves(fake_run(tmp_path / "a", [60.0, 40.0, 20.0], [10.0, 9.0, 8.0]))
    assert rc.samples == [0, 200, 400]
    assert rc.minutes == pytest.approx([0.0, 4.0 / 60, 8.0 / 60])  # 2 s per iteration, 2 iterations per probe
    assert rc.overall_cm == [35.0, 24.5, 14.0]
    assert rc.clips_cm == {"demo_punch": [10.0, 9.0, 8.0], "demo_walk": [60.0, 40.0, 20.0]}
    assert rc.categories == {"demo_punch": "punch", "demo_walk": "walk"}
    assert rc.categories_cm == {"punch": [10.0, 9.0, 8.0], "walk": [60.0, 40.0, 20.0]}
    assert rc.final_cm == {"demo_punch": 8.0, "demo_walk": 20.0}
    assert json.loads(json.dumps(rc.to_dict()))["categories_cm"]["walk"] == [60.0, 40.0, 20.0]


def test_a_resumed_run_replaces_the_values_logged_after_its_checkpoint(tmp_path):
    """The first writer logged to step 400; the run resumed from its checkpoint at 200 and logged again."""
    from torch.utils.tensorboard import SummaryWriter

    run = fake_run(tmp_path / "r", [60.0, 40.0, 20.0], [10.0, 9.0, 8.0])
    first = next((run / "tb").glob("events.out.tfevents.*"))
    later = first.name.split(".")
    later[3] = str(int(later[3]) + 1)  # a later creation time, whatever the clock says
    w = SummaryWriter(str(run / "tb"), purge_step=2 * BATCH, filename_suffix=".resumed")
    w.add_scalar("probe/cartesian_error_cm", 30.0, 3 * BATCH)
    w.close()
    written = next(p for p in (run / "tb").glob("*.resumed"))
    written.rename(run / "tb" / ".".join(later))
    overall = read_scalars(run / "tb")["probe/cartesian_error_cm"]
    # 400 was logged after the checkpoint (purged); 200 before it was saved (kept)
    assert overall == [(0, 35.0), (2 * BATCH, 24.5), (3 * BATCH, 30.0)]


def test_minutes_count_every_iteration_between_sparse_logs():
    """With log_every 2 each logged iteration time stands for two iterations."""
    scalars = {"perf/iteration_seconds": [(200, 3.0), (400, 5.0)], "charts/iteration": [(200, 2.0), (400, 4.0)]}
    assert training_minutes(scalars, [0, 200, 300, 400]) == pytest.approx([0.0, 0.1, 0.1, (6.0 + 10.0) / 60])
    assert all(math.isnan(m) for m in training_minutes({}, [0, 100]))


def test_a_folder_without_a_log_is_refused_by_name(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"empty.*tb/"):
        read_curves(tmp_path / "empty")


def test_curves_of_several_runs_plot_on_one_figure(tmp_path):
    curves = {
        "sharp": read_curves(fake_run(tmp_path / "a", [60.0, 40.0, 20.0], [10.0, 9.0, 8.0])),
        "plain": read_curves(fake_run(tmp_path / "b", [60.0, 55.0, 50.0], [10.0, 10.0, 10.0], seconds=4.0)),
    }
    assert curves["plain"].minutes[-1] == pytest.approx(16.0 / 60)
    path = plot_curves(curves, tmp_path / "curves.png", xmax=(0.5, None))
    width, height = struct.unpack(">II", path.read_bytes()[16:24])  # the PNG's IHDR chunk
    assert (width, height) == (840, 750)  # two category panels of 4.2 in, 2 rows, at 100 dpi
    assert not list(tmp_path.glob("*.tmp*"))
