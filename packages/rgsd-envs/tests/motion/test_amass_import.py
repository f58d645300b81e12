"""AMASS import: SMPL conventions, resampling, SMPL-X files, grounding, names and joint ranges."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from scipy.spatial.transform import Rotation, Slerp

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.amass import amass_to_clip, clip_name_from_path, read_amass
from rgsd_envs.motion.kinematics import KinematicModel

SMPL_OFFSETS = sk.REST_OFFSETS @ sk.WORLD_FROM_SMPL
"""The table's offsets in SMPL's own frame (rows are WORLD_FROM_SMPL.T @ offset)."""
ATOL = 1e-9


@pytest.fixture(scope="module")
def km() -> KinematicModel:
    """One kinematic model for every import in this module."""
    return KinematicModel()


@pytest.fixture(scope="module")
def walk_clip(real_clips):
    """The real walk, imported."""
    return next(c for c in real_clips if c.name == "walk")


def smpl_fk(poses: np.ndarray, trans: np.ndarray) -> np.ndarray:
    """Joint positions (T, 24, 3) in the AMASS world by a direct SMPL FK with scipy."""
    n = poses.shape[0]
    local = [Rotation.from_rotvec(poses[:, 3 * j : 3 * j + 3]) for j in range(22)]
    local += [Rotation.identity(n)] * 2
    glob = [local[0]]
    pos = np.zeros((n, sk.NUM_BODIES, 3))
    pos[:, 0] = trans + sk.SMPL_NEUTRAL_PELVIS_REST
    for j in range(1, sk.NUM_BODIES):
        p = sk.PARENTS[j]
        pos[:, j] = pos[:, p] + glob[p].apply(SMPL_OFFSETS[j])
        glob.append(glob[p] * local[j])
    return pos


def write_amass(path, raw: dict, **changes) -> str:
    """Write AMASS arrays with some keys replaced; returns the path."""
    np.savez(path, **{**raw, **changes})
    return str(path)


# --- conventions -----------------------------------------------------------------


def test_offsets_in_smpl_frame_read_y_z_x_of_the_table():
    np.testing.assert_array_equal(SMPL_OFFSETS, sk.REST_OFFSETS[:, [1, 2, 0]])


def test_body_positions_equal_a_direct_smpl_fk_up_to_the_grounding_shift(walk_raw, walk_clip):
    fk = smpl_fk(walk_raw["poses"], walk_raw["trans"])
    diff = walk_clip.body_pos - fk
    np.testing.assert_allclose(diff[..., :2], 0.0, atol=ATOL)
    np.testing.assert_allclose(diff[..., 2], diff[0, 0, 2], atol=ATOL)


def test_pelvis_is_trans_plus_the_rest_pelvis_joint(walk_raw, walk_clip):
    want = walk_raw["trans"] + sk.SMPL_NEUTRAL_PELVIS_REST
    np.testing.assert_allclose(walk_clip.root_pos[:, :2], want[:, :2], atol=ATOL)


def test_upright_amass_rest_pose_faces_smpl_forward_with_z_up(walk_raw, tmp_path, km):
    poses = np.zeros((4, 156))
    poses[:, 0] = np.pi / 2  # AMASS's usual root: SMPL's y-up body stood up in the z-up world
    path = write_amass(tmp_path / "rest_poses.npz", walk_raw, poses=poses, trans=np.zeros((4, 3)))
    clip = amass_to_clip(read_amass(path), kinematics=km)
    root = Rotation.from_quat(np.roll(clip.root_rot[0], -1)).as_matrix()
    # SMPL faces +z; R_x(90 deg) turns that to -y, and our pelvis x axis is forward
    np.testing.assert_allclose(root, [[0, 1, 0], [-1, 0, 0], [0, 0, 1]], atol=ATOL)
    np.testing.assert_allclose(clip.dof_pos, 0.0, atol=ATOL)


# --- frame rates and SMPL-X ----------------------------------------------------


@pytest.fixture(scope="module")
def walk_60hz(walk_raw, tmp_path_factory) -> str:
    """The walk upsampled to 60 Hz (every other frame is an original one)."""
    n = walk_raw["poses"].shape[0]
    t = np.arange(2 * n - 1) / 2.0
    poses = np.zeros((t.size, 156))
    for j in range(22):
        cols = slice(3 * j, 3 * j + 3)
        poses[:, cols] = Slerp(np.arange(n), Rotation.from_rotvec(walk_raw["poses"][:, cols]))(t).as_rotvec()
    trans = np.stack([np.interp(t, np.arange(n), walk_raw["trans"][:, k]) for k in range(3)], 1)
    path = tmp_path_factory.mktemp("amass60") / "walk_poses.npz"
    return write_amass(
        path, walk_raw, poses=poses, trans=trans, dmpls=np.zeros((t.size, 8)), mocap_framerate=np.float64(60)
    )


def test_60hz_file_becomes_30hz_with_the_same_duration(walk_60hz, walk_clip, km):
    clip = amass_to_clip(read_amass(walk_60hz), kinematics=km)
    assert (clip.fps, clip.source_fps, clip.num_frames) == (30.0, 60.0, walk_clip.num_frames)
    assert clip.duration == pytest.approx(walk_clip.duration, abs=1e-12)


def test_60hz_file_keeps_the_original_poses_at_30hz_frames(walk_60hz, walk_clip, km):
    clip = amass_to_clip(read_amass(walk_60hz), kinematics=km)
    np.testing.assert_allclose(clip.body_pos, walk_clip.body_pos, atol=1e-9)
    np.testing.assert_allclose(clip.dof_pos, walk_clip.dof_pos, atol=1e-9)


def test_120hz_file_of_odd_length_keeps_whole_30hz_frames(walk_raw, tmp_path, km):
    raw = {**walk_raw, "mocap_framerate": np.float64(120.0)}
    path = write_amass(tmp_path / "fast_poses.npz", raw)  # 39 frames at 120 Hz: 0.3167 s
    clip = amass_to_clip(read_amass(path), kinematics=km)
    assert clip.num_frames == 10  # frames at 0, 1/30, ..., 9/30 s; 10/30 s is past the end
    np.testing.assert_allclose(clip.root_pos[:, :2], (walk_raw["trans"] + sk.SMPL_NEUTRAL_PELVIS_REST)[::4, :2][:10])


def test_smplx_file_imports_like_the_smplh_file_of_the_same_motion(walk_raw, walk_clip, tmp_path, km):
    n = walk_raw["poses"].shape[0]
    rest = np.random.default_rng(0).normal(size=(n, 165 - 66))  # jaw, eyes, hands: ignored
    smplx_poses = np.concatenate([walk_raw["poses"][:, :66], rest], 1)
    raw = {k: v for k, v in walk_raw.items() if k != "mocap_framerate"}
    path = write_amass(tmp_path / "walk_stageii.npz", raw, poses=smplx_poses, mocap_frame_rate=np.float64(30.0))
    motion = read_amass(path)
    clip = amass_to_clip(motion, kinematics=km)
    assert (motion.model, clip.name) == ("SMPL-X", "walk")
    for key in ("root_pos", "root_rot", "dof_pos", "body_pos", "body_lin_vel"):
        np.testing.assert_array_equal(getattr(clip, key), getattr(walk_clip, key), err_msg=key)


# --- grounding, names, joint ranges ---------------------------------------------


def test_clip_is_grounded_so_the_lowest_foot_point_touches_the_floor(real_clips, km):
    feet = list(sk.FOOT_BODY_IDS)
    for clip in real_clips:
        _, _, lowest = km.forward(clip.qpos)
        assert lowest[:, feet].min() == pytest.approx(0.0, abs=1e-9), clip.name


def test_grounding_keeps_the_clip_shape(walk_raw, walk_clip):
    fk = smpl_fk(walk_raw["poses"], walk_raw["trans"])
    shift = walk_clip.body_pos[..., 2] - fk[..., 2]
    assert np.ptp(shift) < 1e-9


def test_lowest_foot_point_is_the_bottom_of_the_sole_box(walk_clip, km):
    km.forward(walk_clip.qpos[:1])
    data, model = km.data, km.model
    sole = [g for g in range(model.ngeom) if model.geom(g).name in ("L_Ankle_geom", "R_Ankle_geom")]
    z = [data.geom_xpos[g, 2] - np.abs(data.geom_xmat[g].reshape(3, 3)[2]) @ model.geom_size[g] for g in sole]
    feet = km.lowest_per_body()[list(sk.FOOT_BODY_IDS)]
    assert min(z) == pytest.approx(min(feet[:2]), abs=1e-12)


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("ACCAD/Male2Walking_c3d/B10 -  Walk turn left 45_poses.npz", "b10_walk_turn_left_45"),
        ("ACCAD/Male2Running_c3d/C7 - run backwards t2_stageii.npz", "c7_run_backwards_t2"),
        ("walk.npz", "walk"),
    ],
)
def test_clip_name_comes_from_the_file_name(name, want):
    assert clip_name_from_path(name) == want


def test_name_category_and_source_are_recorded(walk_raw, tmp_path, km):
    path = write_amass(tmp_path / "B5 - walk backwards_poses.npz", walk_raw)
    clip = amass_to_clip(read_amass(path), category="backward", kinematics=km)
    assert (clip.name, clip.category, clip.source) == ("b5_walk_backwards", "backward", path)


def test_real_clips_import_within_the_joint_ranges_exactly(real_motion_files, km, caplog):
    caplog.set_level(logging.WARNING, logger="rgsd_envs")
    clips = [amass_to_clip(read_amass(f), kinematics=km) for f in real_motion_files]
    assert [r.getMessage() for r in caplog.records] == []
    for clip in clips:
        assert (clip.dof_pos >= sk.DOF_RANGES[:, 0]).all() and (clip.dof_pos <= sk.DOF_RANGES[:, 1]).all()


def test_hyperextended_knee_keeps_its_nearest_in_range_angle_and_logs_the_residual(walk_raw, tmp_path, km, caplog):
    caplog.set_level(logging.WARNING, logger="rgsd_envs")
    poses = np.zeros((4, 156))
    poses[:, 0] = np.pi / 2
    poses[:, 3 * 4] = np.deg2rad(-40.0)  # L_Knee about SMPL x = our y: bent 40 degrees the wrong way
    path = write_amass(tmp_path / "bad_knee_poses.npz", walk_raw, poses=poses, trans=np.zeros((4, 3)))
    clip = amass_to_clip(read_amass(path), kinematics=km)
    knee = sk.DOF_NAMES.index("L_Knee_y")
    np.testing.assert_allclose(clip.dof_pos[:, knee], sk.DOF_RANGES[knee, 0])
    assert any("L_Knee 20.0 deg" in r.getMessage() for r in caplog.records)
