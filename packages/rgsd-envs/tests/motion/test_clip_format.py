"""The rgsd clip file: round trip, atomic writes, validation and the qpos/qvel layouts."""

from __future__ import annotations

import dataclasses
import re

import mujoco
import numpy as np
import pytest

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.humanoid.mjcf import load_model
from rgsd_envs.motion.cli import main
from rgsd_envs.motion.clip import FORMAT_VERSION, MotionClip, clip_file_stem, load_clip
from rgsd_envs.utils.files import InputFileError

DOCUMENTED_KEYS = {
    "format_version", "name", "category", "fps", "source_fps", "source", "root_pos", "root_rot", "joint_rot",
    "dof_pos", "root_lin_vel", "root_ang_vel", "dof_vel", "body_pos", "body_rot", "body_lin_vel", "body_ang_vel",
    "body_offsets",
}  # fmt: skip
"""The keys the clip module's docstring lists."""


@pytest.fixture(scope="module")
def clip(real_clips) -> MotionClip:
    """A real imported clip (the walk)."""
    return next(c for c in real_clips if c.name == "walk")


def test_save_then_load_gives_back_every_field(clip, tmp_path):
    loaded = load_clip(clip.save(tmp_path / "walk.npz"))
    for f in dataclasses.fields(MotionClip):
        got, want = getattr(loaded, f.name), getattr(clip, f.name)
        if isinstance(want, np.ndarray):
            np.testing.assert_array_equal(got, want, err_msg=f.name)
            assert got.dtype == np.float64, f.name
        else:
            assert got == want and type(got) is type(want), f.name


def test_saved_file_holds_exactly_the_documented_keys(clip, tmp_path):
    with np.load(clip.save(tmp_path / "walk.npz")) as data:
        assert set(data.files) == DOCUMENTED_KEYS
        assert int(data["format_version"]) == FORMAT_VERSION


def test_save_leaves_no_temporary_file(clip, tmp_path):
    clip.save(tmp_path / "walk.npz")
    clip.save(tmp_path / "walk.npz")
    assert [p.name for p in tmp_path.iterdir()] == ["walk.npz"]


def test_save_creates_missing_folders(clip, tmp_path):
    path = clip.save(tmp_path / "a" / "b" / "walk.npz")
    assert path.is_file()


def test_invalid_clip_is_not_written(clip, tmp_path):
    bad = dataclasses.replace(clip, dof_pos=np.full_like(clip.dof_pos, np.nan))
    with pytest.raises(InputFileError) as err:
        bad.save(tmp_path / "bad.npz")
    assert (err.value.field, err.value.path) == ("dof_pos", str(tmp_path / "bad.npz"))
    assert list(tmp_path.iterdir()) == []


def test_empty_name_is_refused(clip, tmp_path):
    with pytest.raises(InputFileError, match="non-empty string") as err:
        dataclasses.replace(clip, name="").save(tmp_path / "x.npz")
    assert err.value.field == "name"


@pytest.mark.parametrize("name", ["../../../ESCAPED", "a/b", "a\\b", "..", "wa\x00lk", "walk\n2", "tab\there"])
def test_a_name_that_could_leave_a_folder_is_refused_on_save_and_on_load(clip, tmp_path, name):
    with pytest.raises(InputFileError, match=re.escape("path separator, '..' or a control character")) as err:
        dataclasses.replace(clip, name=name).save(tmp_path / "x.npz")
    assert (err.value.path, err.value.field) == (str(tmp_path / "x.npz"), "name")
    path = clip.save(tmp_path / "walk.npz")
    with np.load(path) as data:
        raw = {k: data[k] for k in data.files}
    np.savez(tmp_path / "esc.npz", **{**raw, "name": np.asarray(name)})
    with pytest.raises(InputFileError) as err:
        load_clip(tmp_path / "esc.npz")
    assert (err.value.path, err.value.field) == (str(tmp_path / "esc.npz"), "name")


@pytest.mark.parametrize(
    "name", ["../../../ESCAPED", "a/b", "a\\b", "..", ".hidden", "walk 2", "x\x00y", "—", "a_b", "a b"]
)
def test_file_stems_of_clip_names_stay_in_their_folder(tmp_path, name):
    stem = clip_file_stem(name)
    assert re.fullmatch(r"[0-9A-Za-z_-][0-9A-Za-z._-]*", stem), stem
    assert (tmp_path / f"{stem}_replay.html").parent == tmp_path


def test_file_stems_keep_plain_names_and_tell_changed_ones_apart():
    assert clip_file_stem("walk_turn-left.2") == "walk_turn-left.2"
    assert clip_file_stem("a b") != clip_file_stem("a_b") != clip_file_stem("a/b") != clip_file_stem("a b")
    assert clip_file_stem("a b").startswith("a_b_")


def test_newer_format_version_is_refused_on_load(clip, tmp_path):
    path = clip.save(tmp_path / "walk.npz")
    with np.load(path) as data:
        raw = {k: data[k] for k in data.files}
    np.savez(path, **{**raw, "format_version": np.int64(FORMAT_VERSION + 1)})
    with pytest.raises(InputFileError, match="unsupported format version 2") as err:
        load_clip(path)
    assert err.value.field == "format_version"


@pytest.mark.parametrize(
    ("key", "value"),
    [("format_version", np.array("one")), ("fps", np.array("thirty")), ("source_fps", np.array([120.0, 60.0]))],
)
def test_a_clip_field_that_is_not_a_number_is_an_error_naming_the_file_and_key(clip, tmp_path, capsys, key, value):
    path = clip.save(tmp_path / "walk.npz")
    with np.load(path) as data:
        raw = {k: data[k] for k in data.files}
    np.savez(path, **{**raw, key: value})
    with pytest.raises(
        InputFileError, match=rf"^{re.escape(str(path))}: field '{key}': must be a single number, got "
    ) as err:
        load_clip(path)
    assert err.value.field == key
    assert main(["info", str(path)]) != 0
    assert f"{path}: field '{key}': must be a single number" in capsys.readouterr().err


def test_num_frames_and_duration_follow_the_arrays(clip):
    assert clip.num_frames == clip.root_pos.shape[0] == 39
    assert clip.duration == pytest.approx(38 / 30)


def test_qpos_is_root_position_quaternion_then_hinges(clip):
    qpos = clip.qpos
    assert qpos.shape == (clip.num_frames, sk.QPOS_DIM)
    np.testing.assert_array_equal(qpos[:, :3], clip.root_pos)
    np.testing.assert_array_equal(qpos[:, 3:7], clip.root_rot)
    np.testing.assert_array_equal(qpos[:, 7:], clip.dof_pos)


def test_qvel_is_world_linear_then_local_angular_then_hinge_velocities(clip):
    qvel = clip.qvel
    assert qvel.shape == (clip.num_frames, sk.QVEL_DIM)
    np.testing.assert_array_equal(qvel[:, :3], clip.root_lin_vel)
    np.testing.assert_array_equal(qvel[:, 6:], clip.dof_vel)
    r = np.array([_matrix(q) for q in clip.root_rot])
    np.testing.assert_allclose(np.einsum("tji,tj->ti", r, clip.root_ang_vel), qvel[:, 3:6], atol=1e-12)


def _matrix(q: np.ndarray) -> np.ndarray:
    m = np.zeros(9)
    mujoco.mju_quat2Mat(m, q)
    return m.reshape(3, 3)


def test_qvel_gives_mujoco_the_clip_root_angular_velocity(clip):
    model = load_model()
    data = mujoco.MjData(model)
    res = np.zeros(6)
    for t in (0, 10, 25):
        data.qpos[:], data.qvel[:] = clip.qpos[t], clip.qvel[t]
        mujoco.mj_forward(model, data)
        mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_XBODY, int(sk.MJ_BODY_IDS[0]), res, 0)
        np.testing.assert_allclose(res[:3], clip.root_ang_vel[t], atol=1e-10)
        np.testing.assert_allclose(res[3:], clip.root_lin_vel[t], atol=1e-10)


def test_stored_velocities_are_the_time_derivatives_of_the_positions(clip):
    dt = 1.0 / clip.fps
    mid = slice(1, -1)
    np.testing.assert_allclose(clip.dof_vel[mid], (clip.dof_pos[2:] - clip.dof_pos[:-2]) / (2 * dt), atol=1e-9)
    np.testing.assert_allclose(clip.root_lin_vel[mid], (clip.root_pos[2:] - clip.root_pos[:-2]) / (2 * dt), atol=1e-9)
    np.testing.assert_allclose(clip.body_lin_vel[:, 0], clip.root_lin_vel, atol=1e-9)


def test_body_arrays_agree_with_mujoco_forward_kinematics(clip):
    model = load_model()
    data = mujoco.MjData(model)
    for t in (0, 20, 38):
        data.qpos[:] = clip.qpos[t]
        mujoco.mj_kinematics(model, data)
        np.testing.assert_allclose(data.xpos[sk.MJ_BODY_IDS], clip.body_pos[t], atol=1e-12)
        np.testing.assert_allclose(data.xquat[sk.MJ_BODY_IDS], clip.body_rot[t], atol=1e-12)


def test_body_velocities_are_those_of_the_body_origins(clip):
    model = load_model()
    data = mujoco.MjData(model)
    res = np.zeros(6)
    for t in (0, 20, 38):
        data.qpos[:], data.qvel[:] = clip.qpos[t], clip.qvel[t]
        mujoco.mj_forward(model, data)
        for b in range(sk.NUM_BODIES):
            mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_XBODY, int(sk.MJ_BODY_IDS[b]), res, 0)
            np.testing.assert_allclose(clip.body_ang_vel[t, b], res[:3], atol=1e-10)
            np.testing.assert_allclose(clip.body_lin_vel[t, b], res[3:], atol=1e-10)
