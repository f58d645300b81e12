"""benchmarks/clip_failures.py: per-clip failures per episode and per step under a run's rule."""

from __future__ import annotations

import pytest


def test_a_tighter_rule_fails_more_per_step_and_every_step_is_counted(load_benchmark, demo_run):
    cf = load_benchmark("clip_failures")
    worlds, steps = 16, 40
    loose = cf.clip_failures(demo_run, worlds, steps, {"deviation_metric": "max", "deviation_threshold": "5.0"})
    tight = cf.clip_failures(
        demo_run,
        worlds,
        steps,
        {"deviation_metric": "max", "deviation_threshold": "0.05", "deviation_adaptive": "false"},
    )
    for rows in (loose, tight):
        assert sum(r["steps"] for r in rows.values()) == worlds * steps
        for r in rows.values():
            assert 0.0 <= r["failures_per_step"] <= r["failures_per_episode"] <= 1.0
    per_step = lambda rows: sum(r["failures_per_step"] * r["steps"] for r in rows.values()) / (worlds * steps)  # noqa: E731
    assert per_step(tight) > per_step(loose) + 0.05
    # episodes end sooner under the tight rule
    played = [c for c in tight if tight[c]["steps"] > 0 and loose[c]["steps"] > 0]
    assert sum(tight[c]["episode_length"] for c in played) < sum(loose[c]["episode_length"] for c in played)


def test_bad_setting_names_the_field(load_benchmark, demo_run):
    cf = load_benchmark("clip_failures")
    with pytest.raises(ValueError, match="deviation_metric"):
        cf.clip_failures(demo_run, 4, 2, {"deviation_metric": "median"})
