"""benchmarks/joint_inertia.py: armature against the links' own inertia (EVIDENCE.md's numbers at 1/60 s)."""

from __future__ import annotations

import pytest


def test_armature_ratios_at_today_setting_and_four_times_less_at_1_120(load_benchmark):
    module = load_benchmark("joint_inertia")
    rows = module.table()
    today, fine = "1/60 s, c=2 (today)", "1/120 s, c=2"
    measured = {"hip": 0.2, "knee": 1.1, "ankle": 37, "toe": 765, "wrist": 48, "hand": 401}  # EVIDENCE.md
    for joint, ratio in measured.items():
        assert rows[joint][today] == pytest.approx(ratio, rel=0.06)
        assert rows[joint][fine] == pytest.approx(rows[joint][today] / 4, rel=1e-4)  # MJCF rounds armature
    assert rows["hip"]["own"] > 1.0 > rows["toe"]["own"] * 1000
