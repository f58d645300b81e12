"""benchmarks/joint_inertia.py: armature against the links' own inertia (the design page's numbers at 1/60 s, docs/results/simulator/joint_inertia.txt)."""

from __future__ import annotations

import pytest


def test_armature_ratios_at_the_default_setting_and_four_times_less_at_1_120(load_benchmark):
    module = load_benchmark("joint_inertia")
    rows = module.table()
    default, fine = "1/60 s, c=2 (default)", "1/120 s, c=2"
    measured = {"hip": 0.2, "knee": 1.1, "ankle": 37, "toe": 765, "wrist": 48, "hand": 401}  # docs/design.md
    for joint, ratio in measured.items():
        assert rows[joint][default] == pytest.approx(ratio, rel=0.06)
        assert rows[joint][fine] == pytest.approx(rows[joint][default] / 4, rel=1e-4)  # MJCF rounds armature
    assert rows["hip"]["own"] > 1.0 > rows["toe"]["own"] * 1000
