"""benchmarks/demo_seeds.py: fresh demo folders per seed, finished seeds kept, the range over seeds and its table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

CLIPS = ("demo_walk", "demo_run", "demo_sidestep", "demo_backward", "demo_punch")


@pytest.fixture(scope="module")
def ds(load_benchmark):
    return load_benchmark("demo_seeds")


def fake_demo(errors: dict[int, list[float]], calls: list[list[str]]):
    """A stand-in for the ``rgsd demo`` process: writes the eval metrics its seed's errors give."""

    def call(cmd: list[str], stdout=None, stderr=None) -> int:
        calls.append(cmd)
        out = Path(cmd[cmd.index("--out") + 1])
        seed = int(cmd[cmd.index("--set") + 1].split("=")[1])
        clips = {
            c: {"err_cm": e, "fall_rate": 1.0 if e > 50 else 0.0, "travel_m": 1.0, "ref_travel_m": 2.0}
            for c, e in zip(CLIPS, errors[seed])
        }
        (out / "report").mkdir(parents=True)
        doc = {"runs": {"demo": {"training_samples": 4_800_000 + seed, "imitation": {"clips": clips}}}}
        (out / "report" / "metrics.json").write_text(json.dumps(doc))
        return 0

    return call


def test_seeds_run_fresh_and_their_range_is_written(ds, tmp_path, monkeypatch, capsys):
    errors = {0: [27.7, 13.7, 23.2, 60.1, 7.3], 1: [23.6, 20.0, 19.0, 43.3, 8.0], 2: [30.1, 15.5, 21.0, 18.2, 6.9]}
    calls: list[list[str]] = []
    monkeypatch.setattr(ds.subprocess, "call", fake_demo(errors, calls))
    stale = tmp_path / "seeds" / "seed_1"
    stale.mkdir(parents=True)
    (stale / "half_written.pt").write_text("x")
    out = tmp_path / "demo_seeds.json"
    assert ds.main(["--seeds", "0", "1", "2", "--out", str(tmp_path / "seeds"), "--json", str(out), "--markdown"]) == 0
    assert len(calls) == 3 and all(c[c.index("--set") + 1] == f"seed={s}" for c, s in zip(calls, (0, 1, 2)))
    assert not (stale / "half_written.pt").exists(), "an unfinished seed folder starts again, fresh"
    doc = json.loads(out.read_text())
    assert doc["range"]["clips"]["demo_walk"] == {"err_cm_min": 23.6, "err_cm_max": 30.1, "falls": 0}
    assert doc["range"]["clips"]["demo_backward"] == {"err_cm_min": 18.2, "err_cm_max": 60.1, "falls": 1}
    assert doc["range"]["samples_min"] == 4_800_000 and doc["range"]["samples_max"] == 4_800_002
    table = capsys.readouterr().out
    assert "| 23.6-30.1 | 13.7-20.0 | 19.0-23.2 | 18.2-60.1 (falls in 1 of 3) | 6.9-8.0 |" in table

    calls.clear()
    assert ds.main(["--seeds", "0", "1", "2", "--out", str(tmp_path / "seeds"), "--json", str(out)]) == 0
    assert calls == [], "finished seeds are kept"


def test_a_report_without_a_clip_names_the_file(ds, tmp_path):
    report = tmp_path / "seed_0" / "report"
    report.mkdir(parents=True)
    doc = {"runs": {"demo": {"training_samples": 1, "imitation": {"clips": {"demo_walk": {"err_cm": 1.0}}}}}}
    (report / "metrics.json").write_text(json.dumps(doc))
    with pytest.raises(SystemExit, match=r"seed_0/report/metrics.json: .*'demo_run'"):
        ds.seed_entry(tmp_path / "seed_0")
