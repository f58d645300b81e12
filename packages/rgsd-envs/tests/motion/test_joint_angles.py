"""Hinge angles by best fit within the joint ranges: exact where the ranges allow, continuous from frame
to frame (no 2 pi jumps, no flips between the two Euler solutions), else the nearest in-range rotation."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion import joint_fit as jf
from rgsd_envs.motion.cli import main
from rgsd_envs.motion.importer import REPORT_NAME
from rgsd_envs.motion.kinematics import joint_rot_from_dof
from rgsd_envs.utils import rotations as rot


def hinge_track(**angles_deg: np.ndarray) -> np.ndarray:
    """Hinge angles (T, 69), radians, with the named hinges (e.g. ``L_Shoulder_x=...``) set, others 0."""
    n = len(next(iter(angles_deg.values())))
    dof = np.zeros((n, sk.NUM_DOFS))
    for name, deg in angles_deg.items():
        dof[:, sk.DOF_NAMES.index(name)] = np.deg2rad(deg)
    return dof


def write_amass_file(path, dof: np.ndarray, fps: float, spin_turns: np.ndarray | None = None) -> str:
    """An SMPL+H AMASS file whose local joint rotations are those of hinge angles ``dof`` (T, 69).

    With ``spin_turns`` (T,), each joint's axis-angle is written with that many extra turns of 2 pi,
    as mocap solvers that unwrap twists leave it (the rotation is the same).
    """
    local = torch.as_tensor(joint_rot_from_dof(dof))  # (T, 23, 4), our frame
    aa = rot.quat_to_axis_angle(local).numpy()
    if spin_turns is not None:
        norm = np.linalg.norm(aa, axis=-1, keepdims=True)
        aa = aa * np.where(norm > 0, (norm + 2 * np.pi * spin_turns[:, None, None]) / np.maximum(norm, 1e-12), 1.0)
    poses = np.zeros((len(dof), 156))
    poses[:, 0] = np.pi / 2  # SMPL's y-up rest pose stood up in AMASS's z-up world
    # joint axis-angles in SMPL's frame: aa_smpl = C^T aa_ours; bodies 1..21 carry a pose
    poses[:, 3:66] = (aa[:, :21] @ sk.WORLD_FROM_SMPL).reshape(len(dof), -1)
    np.savez(
        path,
        poses=poses,
        trans=np.zeros((len(dof), 3)),
        mocap_framerate=np.array(fps),
        betas=np.zeros(16),
        gender=np.array("neutral"),
    )
    return str(path)


def import_one(path: str, out, capsys) -> tuple[dict, np.ndarray, str, str]:
    """Import one file with the CLI: its report entry, the clip's hinge angles, stdout and stderr."""
    assert main(["import", path, "--out", str(out), "--quiet"]) == 0
    printed, err = capsys.readouterr()
    entry = json.loads((out / REPORT_NAME).read_text())["files"][0]
    with np.load(entry["clip"]) as clip:
        return entry, clip["dof_pos"], printed, err


def cols(body: str) -> list[int]:
    """qpos columns of a body's three hinges."""
    return [sk.DOF_NAMES.index(f"{body}_{a}") for a in sk.hinge_order(body)]


# --- tracks that the ranges allow: exact and continuous ------------------------------------


def test_a_track_already_in_range_is_reproduced_exactly():
    rng = np.random.default_rng(0)
    lo, hi = sk.DOF_RANGES[:, 0], sk.DOF_RANGES[:, 1]
    dof = lo + (hi - lo) * rng.uniform(0.05, 0.95, size=(20, sk.NUM_DOFS))
    fitted, fit = jf.fit_hinge_angles(joint_rot_from_dof(dof))
    np.testing.assert_allclose(fitted, dof, atol=1e-9)
    assert fit.worst_deg < 1e-6


def test_clip_crossing_the_euler_singularity_imports_continuously_with_residual_under_1_degree(tmp_path, capsys):
    # L_Shoulder (x-y-z): the middle hinge rises through the gimbal pole at 90 degrees to 90.5 and back
    # while the outer two hinges move; from (95, 70, -95) the frame-by-frame Euler decomposition
    # flips to its twin (-85, 110, 85) and back (180-degree jumps of two hinges)
    t = np.linspace(0.0, 2.0, 241)
    x = 95 + 10 * np.sin(np.pi * t)
    y = 70 + 20.5 * np.sin(np.pi * t / 2.0)
    z = -95 + 10 * np.sin(np.pi * t + 1.0)
    dof = hinge_track(L_Shoulder_x=x, L_Shoulder_y=y, L_Shoulder_z=z)
    path = write_amass_file(tmp_path / "pole_poses.npz", dof, fps=120.0)
    entry, got, _, err = import_one(path, tmp_path / "out", capsys)
    assert entry["max_residual_joint"] == "L_Shoulder"
    assert 0.3 < entry["residual_deg"]["L_Shoulder"]["max"] < 1.0  # only the 0.5-degree overshoot is lost
    assert max(v["max"] for k, v in entry["residual_deg"].items() if k != "L_Shoulder") < 1e-6
    assert "warning" not in err
    want = dof[::4][:, cols("L_Shoulder")]
    step = np.abs(np.diff(got[:, cols("L_Shoulder")], axis=0)).max()
    assert np.rad2deg(step) < 3.0  # the true track moves at most ~1.1 degrees per 30 Hz frame
    np.testing.assert_allclose(np.rad2deg(got[:, cols("L_Shoulder")]), np.rad2deg(want), atol=1.0)


def test_gimbal_lock_frames_split_the_angle_as_the_frames_around_them():
    # the middle hinge sits exactly on the pole for several frames: any split of one angle between
    # the outer hinges is exact there; the outer angle follows the frames on either side
    y = np.concatenate([np.linspace(80, 90, 11), np.full(5, 90.0), np.linspace(90, 80, 11)])
    x = np.linspace(-20, 20, len(y))
    z = np.linspace(-60, -20, len(y))
    dof = hinge_track(R_Shoulder_x=x, R_Shoulder_y=y, R_Shoulder_z=z)
    fitted, fit = jf.fit_hinge_angles(joint_rot_from_dof(dof))
    assert fit.worst_deg < 1e-6
    np.testing.assert_allclose(fitted, dof, atol=1e-9)  # the outer angle interpolated across the lock


def test_wrist_spinning_past_2pi_imports_exactly_with_no_2pi_jump(tmp_path, capsys):
    # the hand circles 2.5 times (circumduction) with a forearm twist; the file's axis-angles gain a
    # full turn of 2 pi with every circle, as a solver that unwraps the twist writes them
    n = 361
    phi = np.linspace(0.0, 5 * np.pi, n)
    dof = hinge_track(R_Wrist_x=45 * np.cos(phi), R_Wrist_y=-15 + 25 * np.sin(phi), R_Wrist_z=45 * np.sin(phi))
    path = write_amass_file(tmp_path / "spin_poses.npz", dof, fps=120.0, spin_turns=np.floor(phi / (2 * np.pi)))
    entry, got, _, _ = import_one(path, tmp_path / "out", capsys)
    assert entry["max_residual_deg"] < 1e-4
    np.testing.assert_allclose(got[:, cols("R_Wrist")], dof[::4][:, cols("R_Wrist")], atol=1e-7)
    assert np.rad2deg(np.abs(np.diff(got, axis=0)).max()) < 10.0  # at most 7.9 degrees per frame


# --- rotations no range allows: the nearest in-range rotation, its residual reported --------


def test_best_fit_matches_a_bounded_search_for_rotations_outside_the_ranges():
    rng = np.random.default_rng(3)
    body = "L_Elbow"
    lo, hi = sk.DOF_RANGES[cols(body)].T
    e = rng.uniform(-np.pi, np.pi, size=(8, 3))
    target = jf._euler_matrix(e, sk.hinge_order(body))
    s1, s2 = (s.numpy() for s in rot.euler_branches(rot.matrix_to_quat(torch.as_tensor(target)), "xyz"))
    got = jf.refine_in_range(s1, s2, target, "xyz", np.tile(lo, (8, 1)), np.tile(hi, (8, 1)), stay_tolerance=0.0)
    assert ((got >= lo - 1e-12) & (got <= hi + 1e-12)).all()
    err = jf._matrix_angle(jf._euler_matrix(got, "xyz"), target)
    for k in range(8):

        def cost(a, m=target[k]):
            return 3.0 - np.trace(m.T @ jf._euler_matrix(a, "xyz"))

        starts = rng.uniform(lo, hi, size=(6, 3))
        best = min(
            jf._matrix_angle(jf._euler_matrix(minimize(cost, s, bounds=list(zip(lo, hi))).x, "xyz"), target[k])
            for s in starts
        )
        assert err[k] <= best + 1e-6


def test_knee_bent_the_wrong_way_is_reported_with_its_residual(tmp_path, capsys):
    dof = hinge_track(L_Knee_y=np.full(8, -40.0))  # 20 degrees past the knee's -20 limit
    entry, got, _, err = import_one(
        write_amass_file(tmp_path / "bad_knee_poses.npz", dof, 30.0), tmp_path / "o", capsys
    )
    assert (entry["max_residual_joint"], entry["max_residual_deg"]) == ("L_Knee", pytest.approx(20.0, abs=1e-6))
    assert entry["residual_deg"]["L_Knee"] == {
        "max": pytest.approx(20.0, abs=1e-3),
        "mean": pytest.approx(20.0, abs=1e-3),
    }
    np.testing.assert_allclose(np.rad2deg(got[:, sk.DOF_NAMES.index("L_Knee_y")]), -20.0)
    assert "warning: bad_knee: L_Knee residual 20.0 deg (> 10)" in err


def test_wrist_twisted_past_its_range_while_circling_stays_in_range_with_its_residual(tmp_path, capsys):
    # a punch's wrist twisted 100 degrees (its range ends at 80) past the gimbal pole while the hand
    # circles; frame-by-frame Euler angles flip and wind round past 2 pi there. Kept: the nearest
    # in-range rotations, every angle inside its range, the residual reported
    phi = np.linspace(0.0, 4 * np.pi, 241)
    dof = hinge_track(R_Wrist_x=30 * np.cos(phi), R_Wrist_y=np.full(241, 100.0), R_Wrist_z=30 * np.sin(phi))
    entry, got, printed, err = import_one(
        write_amass_file(tmp_path / "e8_poses.npz", dof, 120.0), tmp_path / "o", capsys
    )
    c = cols("R_Wrist")
    assert ((got[:, c] >= sk.DOF_RANGES[c, 0] - 1e-9) & (got[:, c] <= sk.DOF_RANGES[c, 1] + 1e-9)).all()
    worst = entry["residual_deg"]["R_Wrist"]["max"]
    assert entry["max_residual_joint"] == "R_Wrist" and 10.0 < worst <= 20.0 + 1e-6  # y alone at 80 leaves 20
    assert f"warning: e8: R_Wrist residual {worst:.1f} deg (> 10)" in err
    assert f"worst joint residual {entry['max_residual_deg']:.2f} deg (R_Wrist in e8)" in printed


def test_forearm_twist_and_wrist_ranges_follow_anatomy_and_mirror():
    for side, flip in (("L", 1.0), ("R", -1.0)):
        for hinge, want in (("Elbow_y", (-80.0, 50.0)), ("Wrist_y", (-70.0, 80.0)), ("Wrist_x", (-80.0, 70.0))):
            got = np.rad2deg(sk.DOF_RANGES[sk.DOF_NAMES.index(f"{side}_{hinge}")])
            np.testing.assert_allclose(got, want if flip > 0 or hinge.endswith("y") else (-want[1], -want[0]))


def test_mit_clips_import_with_no_clamp_and_report_every_joint_residual(real_motion_files, tmp_path, capsys):
    out = tmp_path / "mit"
    assert main(["import", str(real_motion_files[0].parent), "--out", str(out), "--quiet"]) == 0
    report = json.loads((out / REPORT_NAME).read_text())
    for f in report["files"]:
        assert set(f["residual_deg"]) == set(jf.JOINT_NAMES)
        assert f["max_residual_deg"] < 1e-3, (f["name"], f["max_residual_joint"])
    assert "worst joint residual 0.00 deg" in capsys.readouterr().out
