"""Warnings in the import report: a Y-up file, a turn that ``--cycles`` undoes, hinge angles that jump."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.amass import _Q_WORLD_FROM_SMPL
from rgsd_envs.motion.importer import FileResult, import_motions
from rgsd_envs.motion.kinematics import joint_rot_from_dof
from rgsd_envs.utils import rotations as rot


def import_one(path: Path, raw: dict, out: Path, cycles: int = 1) -> FileResult:
    """``raw`` saved as an SMPL+H file at ``path`` and imported into ``out``: its report entry."""
    np.savez(path, **raw)
    (entry,) = import_motions([(path, path.stem, "walk")], out, progress=False, cycles=cycles).files
    assert entry.status == "kept", entry.reason
    return entry


def test_a_captured_walk_gets_no_warning(walk_raw, tmp_path):
    entry = import_one(tmp_path / "walk_poses.npz", walk_raw, tmp_path / "out", cycles=3)
    assert (entry.warnings, entry.discontinuities) == ([], {})


def test_a_file_lying_down_asks_whether_it_is_y_up(walk_raw, tmp_path, caplog):
    poses = walk_raw["poses"].copy()
    poses[:, :3] = 0.0  # no root rotation: SMPL's y-up body lies along AMASS's y axis
    with caplog.at_level(logging.WARNING, logger="rgsd_envs"):
        entry = import_one(tmp_path / "yup_poses.npz", {**walk_raw, "poses": poses}, tmp_path / "out")
    (line,) = entry.warnings
    assert line.startswith("the head is on average 0.0") and "m above the pelvis" in line
    assert "is this file Y-up? AMASS files are Z-up" in line
    assert f"clip yup_poses ({tmp_path / 'yup_poses.npz'}): {line}" in caplog.text


def _turning(walk_raw: dict, degrees: float) -> dict:
    """The walk with its root turned about the world's up axis from 0 to ``degrees`` over the clip."""
    n = len(walk_raw["poses"])
    yaw = torch.deg2rad(torch.linspace(0.0, degrees, n, dtype=torch.float64))
    turn = rot.yaw_quat(yaw)  # about AMASS's z, which is up
    root = rot.quat_mul(turn, rot.quat_from_axis_angle(torch.as_tensor(walk_raw["poses"][:, :3])))
    poses = walk_raw["poses"].copy()
    poses[:, :3] = rot.quat_to_axis_angle(root).numpy()
    return {**walk_raw, "poses": poses}


def test_cycles_of_a_turning_clip_warn_that_closing_the_cycle_undoes_the_turn(walk_raw, tmp_path, caplog):
    raw = _turning(walk_raw, 90.0)
    with caplog.at_level(logging.WARNING, logger="rgsd_envs"):
        entry = import_one(tmp_path / "turn_poses.npz", raw, tmp_path / "out", cycles=3)
    (line,) = entry.warnings
    assert line.startswith("the cycle turns +9") and "--cycles suits straight clips" in line
    turn = float(line.split()[3])
    assert turn == pytest.approx(90.0, abs=8.0)  # the walk's own heading moves a few degrees
    assert line in caplog.text
    assert import_one(tmp_path / "turn_poses.npz", raw, tmp_path / "out1").warnings == []  # no --cycles: kept


def test_an_out_of_range_sweep_records_the_frame_its_angles_jump(walk_raw, tmp_path):
    frames = 61
    dof = np.zeros((frames, sk.NUM_DOFS))
    dof[:, sk.DOF_NAMES.index("L_Shoulder_z")] = np.deg2rad(np.linspace(0.0, 200.0, frames))  # range -140..90
    ours = torch.as_tensor(joint_rot_from_dof(dof))
    qc = _Q_WORLD_FROM_SMPL.to(ours.dtype)
    smpl = rot.quat_mul(rot.quat_mul(rot.quat_conj(qc), ours), qc)  # the importer's change of axes, undone
    poses = np.zeros((frames, 156))
    poses[:, 0] = np.pi / 2  # upright
    poses[:, 3:66] = rot.quat_to_axis_angle(smpl[:, :21]).reshape(frames, 63).numpy()
    raw = {**walk_raw, "poses": poses, "trans": np.zeros((frames, 3))}
    entry = import_one(tmp_path / "sweep_poses.npz", raw, tmp_path / "out")
    # the nearest in-range angle is the range's end at 90 deg until 155 deg (frame 46.5), then -140 deg
    assert entry.discontinuities == {"L_Shoulder": [47]}
    (line,) = entry.warnings
    assert line.startswith("hinge angles jump by more than 90 deg in one frame (L_Shoulder at frame(s) 47)")
