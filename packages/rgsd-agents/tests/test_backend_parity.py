"""Backend parity of the shipped policy: its per-clip error on native MuJoCo and on MuJoCo Warp agree.

The CPU test runs warp on its CPU warp device, as CI does: 9 s on 2 cores with the warp kernels cached, 67 s
when it is the first warp user of a machine and compiles them. The CUDA test runs the same comparison with warp on
a GPU (``pytest -m cuda``). Both roll out all 13 clips to their ends and hold every clip to
``rgsd_eval.parity.clip_tolerance_cm``.
"""

from __future__ import annotations

import pytest
import torch

from rgsd_agents.pretrained import pretrained_run
from rgsd_eval.parity import BACKENDS, ParityReport, backend_parity


def _check(report: ParityReport) -> None:
    print(report.markdown())
    assert len(report.clips) == 13
    assert any(c.compared == "error" for c in report.clips), "every clip fell: no error was compared"
    bad = [c for c in report.clips if not c.ok]
    assert not bad, "\n".join(f"{c.clip}: {c.error_cm} (fell {c.fell}), tolerance {c.tolerance_cm:.2f} cm" for c in bad)


def test_the_shipped_policy_scores_the_same_error_per_clip_on_warp_as_on_mujoco():
    report = backend_parity(pretrained_run(), device="cpu")
    _check(report)
    # measured: the largest gap 0.13 cm (demo_run, 85 frames); none above 0.01 cm in the first 60 frames
    assert report.gaps()["max_gap_cm"] < 0.5
    assert set(report.seconds) == set(BACKENDS)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
def test_the_shipped_policy_scores_the_same_error_per_clip_on_warp_on_cuda():
    _check(backend_parity(pretrained_run(), device="cuda"))
