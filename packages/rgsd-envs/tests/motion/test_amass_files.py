"""Real AMASS files: full SMPL-X stage-ii key sets, SMPL+H extras, shape files and broken files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rgsd_envs.motion.amass import ShapeFileError, amass_to_clip, read_amass
from rgsd_envs.motion.importer import file_jobs, import_motions
from rgsd_envs.motion.kinematics import KinematicModel
from rgsd_envs.utils.files import InputFileError, read_npz


def smplx_stageii(walk: dict) -> dict:
    """Every key a real AMASS SMPL-X ``*_stageii.npz`` carries, with the walk's body motion."""
    n = walk["poses"].shape[0]
    rng = np.random.default_rng(0)
    poses = np.concatenate([walk["poses"][:, :66], rng.normal(scale=0.1, size=(n, 165 - 66))], 1)
    k = 53
    return {
        "gender": np.array("male"),
        "surface_model_type": np.array("smplx"),
        "mocap_frame_rate": np.array(30.0),
        "mocap_time_length": np.array(n / 30.0),
        "markers_latent": rng.normal(size=(k, 3)),
        "latent_labels": np.array([f"M{i:02d}" for i in range(k)]),
        "markers_latent_vids": np.array({f"M{i:02d}": i for i in range(k)}, dtype=object),
        "trans": walk["trans"],
        "poses": poses,
        "betas": rng.normal(size=16),
        "num_betas": np.array(16),
        "root_orient": poses[:, :3],
        "pose_body": poses[:, 3:66],
        "pose_hand": poses[:, 75:165],
        "pose_jaw": poses[:, 66:69],
        "pose_eye": poses[:, 69:75],
    }


@pytest.fixture
def stageii_file(walk_raw, tmp_path) -> Path:
    """A SMPL-X stage-ii file with the full real key set, pickled object array included."""
    path = tmp_path / "B10 - walk_stageii.npz"
    np.savez(path, **smplx_stageii(walk_raw))
    return path


@pytest.fixture
def smplh_file(walk_raw, tmp_path) -> Path:
    """A SMPL+H file with ``dmpls`` and ``gender`` stored as bytes."""
    path = tmp_path / "B11 - walk_poses.npz"
    np.savez(path, **{**walk_raw, "gender": np.array(b"female"), "dmpls": np.zeros((walk_raw["poses"].shape[0], 8))})
    return path


def test_full_smplx_stageii_file_imports_without_unpickling(stageii_file, real_clips):
    motion = read_amass(stageii_file)
    assert (motion.model, motion.fps, motion.gender, motion.betas.shape) == ("SMPL-X", 30.0, "male", (16,))
    clip = amass_to_clip(motion, kinematics=KinematicModel())
    walk = next(c for c in real_clips if c.name == "walk")
    assert clip.name == "b10_walk"
    np.testing.assert_allclose(clip.body_pos, walk.body_pos, atol=1e-9)


def test_smplh_file_with_dmpls_and_bytes_gender_imports(smplh_file):
    motion = read_amass(smplh_file)
    assert (motion.model, motion.gender, motion.poses.shape) == ("SMPL+H", "female", (39, 66))


def test_read_npz_reads_only_the_asked_keys(stageii_file):
    arrays = read_npz(stageii_file, ["poses", "gender", "no_such_key"])
    assert sorted(arrays) == ["gender", "poses"]
    assert "markers_latent_vids" in arrays.files


def test_object_array_in_a_needed_key_is_named(walk_raw, tmp_path):
    path = tmp_path / "x_stageii.npz"
    np.savez(path, **{**smplx_stageii(walk_raw), "gender": np.array({"g": "male"}, dtype=object)})
    with pytest.raises(InputFileError, match=r"field 'gender': stored as an object \(pickled\) array") as err:
        read_amass(path)
    assert err.value.path == str(path) and err.value.field == "gender"
    assert "truncated" not in str(err.value)


def test_truncated_stageii_file_still_gets_the_corrupt_file_error(stageii_file):
    data = stageii_file.read_bytes()
    stageii_file.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputFileError, match="truncated or corrupt"):
        read_amass(stageii_file)


def test_corrupt_member_is_reported_as_corrupt_not_as_a_pickle(walk_raw, tmp_path):
    path = tmp_path / "c_poses.npz"
    np.savez_compressed(path, poses=walk_raw["poses"], trans=walk_raw["trans"], mocap_framerate=np.array(30.0))
    data = bytearray(path.read_bytes())
    data[200:260] = bytes(b ^ 0xFF for b in data[200:260])
    path.write_bytes(bytes(data))
    with pytest.raises(InputFileError, match="truncated or corrupt"):
        read_amass(path)


@pytest.mark.parametrize("name", ["shape.npz", "B10_stagei.npz", "betas_only.npz"])
def test_shape_files_are_recognised_without_reading_their_arrays(tmp_path, name):
    path = tmp_path / name
    np.savez(path, betas=np.zeros(16), gender=np.array({"g": "male"}, dtype=object))
    with pytest.raises(ShapeFileError, match="body-shape file"):
        read_amass(path)


def test_import_counts_shape_files_as_skipped_not_errors(stageii_file, smplh_file, tmp_path):
    src = stageii_file.parent
    np.savez(src / "shape.npz", betas=np.zeros(16), gender=np.array(b"male"))
    np.savez(src / "S1_stagei.npz", betas=np.zeros(16), gender=np.array("male"), markers_latent=np.zeros((4, 3)))
    (src / "broken_poses.npz").write_bytes(smplh_file.read_bytes()[:100])
    report = import_motions(file_jobs([src]), tmp_path / "out", progress=False)
    assert report.counts() == {"kept": 2, "skipped": 2, "rejected": 1}
    assert report.summary().startswith("kept 2, skipped 2 shape file(s), rejected 1; worst joint residual 0.00 deg")
