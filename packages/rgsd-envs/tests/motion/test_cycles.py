"""A one-cycle motion repeated (``--cycles``): closed seams, each cycle moved on, the capture kept before the blend."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from rgsd_envs.motion.cli import main
from rgsd_envs.motion.clip import load_clip
from rgsd_envs.motion.cycles import BLEND_FRACTION, tile_cycles
from rgsd_envs.motion.importer import REPORT_NAME
from rgsd_envs.utils import rotations as rot

T, PSI = 11, math.radians(20.0)


def _angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Geodesic angle (rad) between quaternion arrays."""
    return np.asarray(
        rot.quat_to_axis_angle(rot.quat_mul(torch.as_tensor(a), rot.quat_conj(torch.as_tensor(b)))).norm(dim=-1)
    )


@pytest.fixture
def cycle() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A one-cycle walk that turns 20 deg, with a 0.2 rad joint and 3 cm height mismatch at its seam."""
    t = np.arange(T, dtype=np.float64)
    yaw = PSI * t / (T - 1)
    step = np.stack((np.cos(yaw), np.sin(yaw)), -1) * 0.1
    xy = np.concatenate(([[0.0, 0.0]], np.cumsum(step[:-1], 0)))
    z = 0.9 + 0.02 * np.sin(2 * np.pi * t / (T - 1)) + 0.03 * t / (T - 1)
    root_pos = np.concatenate((xy + [1.0, 2.0], z[:, None]), -1)
    tilt = rot.quat_from_axis_angle(torch.tensor([[0.05, 0.0, 0.0]], dtype=torch.float64)).expand(T, 4)
    root_rot = rot.quat_mul(rot.yaw_quat(torch.as_tensor(yaw)), tilt).numpy()
    angle = np.sin(2 * np.pi * t / (T - 1)) + 0.2 * t / (T - 1)
    aa = np.zeros((T, 3, 3))
    aa[:, :, 0] = angle[:, None] * np.array([1.0, 0.5, -0.3])
    return root_pos, root_rot, rot.quat_from_axis_angle(torch.as_tensor(aa)).numpy()


def test_three_cycles_close_their_seams_and_keep_three_quarters_of_each_cycle_as_captured(cycle):
    p, r, q = tile_cycles(*cycle, 3)
    assert p.shape == (3 * (T - 1) + 1, 3) and r.shape == (31, 4) and q.shape == (31, 3, 4)
    kept = int((T - 1) * (1 - BLEND_FRACTION)) + 1  # frames before the blend starts
    np.testing.assert_allclose(p[:kept], cycle[0][:kept])
    assert _angle(r[:kept], cycle[1][:kept]).max() < 1e-9 and _angle(q[:kept], cycle[2][:kept]).max() < 1e-9
    # every cycle's joints are the same closed cycle, and the step over a seam is the cycle's first step
    for k in (1, 2):
        assert _angle(q[k * (T - 1) : (k + 1) * (T - 1) + 1], q[:T]).max() < 1e-9
    np.testing.assert_allclose(_angle(q[T], q[T - 1]), _angle(q[1], q[0]), atol=1e-9)
    # the input's own seam jumps by its mismatch (0.2 rad x 1, 0.5, 0.3 per joint) on top of that
    np.testing.assert_allclose(_angle(cycle[2][0], cycle[2][-1]), [0.2, 0.1, 0.06], atol=1e-9)


def test_each_cycle_moves_on_by_the_cycles_displacement_with_its_start_rotation_and_height(cycle):
    p, r, _ = tile_cycles(*cycle, 3)
    d0 = cycle[0][-1, :2] - cycle[0][0, :2]
    for k in range(3):  # moved on as DeepMimic does (no turn added), whatever the pelvis heading does in a cycle
        np.testing.assert_allclose(p[(k + 1) * (T - 1), :2] - p[k * (T - 1), :2], d0, atol=1e-12)
    np.testing.assert_allclose(p[:: T - 1, 2], p[0, 2])  # the height mismatch is closed at every seam
    assert _angle(r[:: T - 1], np.tile(r[0], (4, 1))).max() < 1e-9  # so is the root's rotation
    assert _angle(cycle[1][-1], cycle[1][0]) == pytest.approx(PSI)  # which the capture turned by 20 deg


def test_one_cycle_is_the_motion_unchanged_and_bad_counts_are_refused(cycle):
    p, _, _ = tile_cycles(*cycle, 1)
    np.testing.assert_array_equal(p, cycle[0])
    with pytest.raises(ValueError, match="cycles must be a whole number >= 1"):
        tile_cycles(*cycle, 0)
    with pytest.raises(ValueError, match="at least 3 frames"):
        tile_cycles(*(a[:2] for a in cycle), 2)


def test_cli_loops_the_real_run_three_times(real_motion_files, tmp_path, capsys):
    run = next(f for f in real_motion_files if f.name == "run_poses.npz")
    assert main(["import", str(run), "--out", str(tmp_path / "once"), "--quiet", "--category", "run"]) == 0
    assert (
        main(["import", str(run), "--out", str(tmp_path / "three"), "--quiet", "--category", "run", "--cycles", "3"])
        == 0
    )
    once, three = load_clip(tmp_path / "once" / "run.npz"), load_clip(tmp_path / "three" / "run.npz")
    assert three.num_frames == 3 * (once.num_frames - 1) + 1
    travel = lambda c: np.linalg.norm(c.root_pos[-1, :2] - c.root_pos[0, :2])  # noqa: E731
    assert travel(three) == pytest.approx(3 * travel(once), rel=0.02)
    # no jump at the seams: the largest hinge-angle step across one is within the steps inside a cycle
    step = np.abs(np.diff(three.dof_pos, axis=0)).max(1)
    n = once.num_frames - 1
    assert max(step[n - 1], step[n], step[2 * n - 1], step[2 * n]) <= step[:n].max()
    report = json.loads((tmp_path / "three" / REPORT_NAME).read_text())
    assert report["files"][0]["cycles"] == 3
    assert main(["import", str(run), "--out", str(tmp_path / "bad"), "--cycles", "0"]) == 2
    assert "--cycles must be >= 1" in capsys.readouterr().err


def test_a_two_frame_file_imports_as_captured_and_is_rejected_by_name_with_cycles(walk_raw, tmp_path, capsys):
    two = {**walk_raw, "poses": walk_raw["poses"][:2], "trans": walk_raw["trans"][:2]}
    np.savez(tmp_path / "two_poses.npz", **{k: v for k, v in two.items() if k != "dmpls"})
    assert main(["import", str(tmp_path / "two_poses.npz"), "--out", str(tmp_path / "once"), "--quiet"]) == 0
    assert load_clip(tmp_path / "once" / "two.npz").num_frames >= 2
    capsys.readouterr()
    assert (
        main(["import", str(tmp_path / "two_poses.npz"), "--out", str(tmp_path / "three"), "--quiet", "--cycles", "3"])
        == 1
    )
    err = capsys.readouterr().err
    assert "two_poses.npz: field 'poses': --cycles 3 needs a cycle of at least 3 frames, got 2" in err
