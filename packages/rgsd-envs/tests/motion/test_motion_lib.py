"""MotionLib: sampling clips and start frames, exact and interpolated reference states."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
import torch

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.utils.files import InputFileError

CHI2_DF7_P001 = 24.32
"""Chi-square value with 7 degrees of freedom exceeded with probability 0.001."""
QUAT_FIELDS = ("root_rot", "body_rot")
FIELDS = ("root_pos", "root_rot", "dof_pos", "root_lin_vel", "root_ang_vel", "dof_vel", "body_pos", "body_rot",
          "body_lin_vel", "body_ang_vel")  # fmt: skip


@pytest.fixture(scope="module")
def lib(real_clips) -> MotionLib:
    """The 8 real clips in float64, so lookups can be compared exactly."""
    return MotionLib(real_clips, dtype=torch.float64)


def gen(seed: int = 0) -> torch.Generator:
    """A seeded torch generator."""
    return torch.Generator().manual_seed(seed)


def test_lib_holds_every_clip_back_to_back(lib, real_clips):
    assert lib.num_clips == len(real_clips) == 8
    assert lib.num_frames.tolist() == [c.num_frames for c in real_clips]
    assert lib.starts.tolist() == np.concatenate([[0], np.cumsum(lib.num_frames.tolist())[:-1]]).tolist()
    assert lib.total_frames == sum(c.num_frames for c in real_clips)
    # a clip's duration runs from its first frame to its last: 91 frames at 30 fps are 3 s
    torch.testing.assert_close(lib.durations, (lib.num_frames - 1).double() / 30.0)
    assert MotionLib("demo").durations[0].item() == pytest.approx(3.0)


def test_sample_clips_is_uniform_over_clips(lib):
    n = 16000
    counts = torch.bincount(lib.sample_clips(n, generator=gen()), minlength=lib.num_clips).numpy()
    expected = n / lib.num_clips
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < CHI2_DF7_P001, counts


def test_sample_clips_is_reproducible_with_a_seeded_generator(lib):
    assert torch.equal(lib.sample_clips(100, generator=gen(3)), lib.sample_clips(100, generator=gen(3)))


def test_start_frames_are_inside_the_clip_and_never_its_last_frame(lib):
    ids = lib.sample_clips(20000, generator=gen(1))
    frames = lib.sample_start_frames(ids, generator=gen(2))
    assert (frames >= 0).all()
    assert (frames <= lib.num_frames[ids] - 2).all()


def test_start_frames_reach_every_allowed_frame_of_a_clip(lib):
    cid = lib.clip_id("run")
    ids = torch.full((5000,), cid)
    frames = lib.sample_start_frames(ids, generator=gen(4))
    assert sorted(set(frames.tolist())) == list(range(int(lib.num_frames[cid]) - 1))


def test_frame_state_at_integer_frames_equals_the_clip_arrays(lib, real_clips):
    ids = torch.tensor([0, 3, 3, 7])
    frames = torch.tensor([0, 5, int(lib.num_frames[3]) - 1, 10])
    state = lib.frame_state(ids, frames)
    for name in FIELDS:
        want = np.stack([getattr(real_clips[int(c)], name)[int(f)] for c, f in zip(ids, frames)])
        np.testing.assert_array_equal(getattr(state, name).numpy(), want, err_msg=name)


def test_frame_state_clamps_frames_past_the_end(lib, real_clips):
    state = lib.frame_state(torch.tensor([2]), torch.tensor([10_000]))
    np.testing.assert_array_equal(state.body_pos[0].numpy(), real_clips[2].body_pos[-1])


def test_state_at_frame_times_equals_the_frames(lib):
    ids = torch.tensor([0, 1, 4, 6])
    frames = torch.tensor([0, 7, 12, 20])
    at = lib.state_at(ids, frames.to(torch.float64) / 30.0)
    exact = lib.frame_state(ids, frames)
    for name in FIELDS:
        got, want = getattr(at, name), getattr(exact, name)
        if name in QUAT_FIELDS:  # q and -q are one rotation
            got = got * torch.sign((got * want).sum(-1, keepdim=True))
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-9, err_msg=name)


def test_state_at_midpoints_lerps_positions_and_velocities(lib):
    ids, frames = torch.tensor([1, 5]), torch.tensor([3, 9])
    mid = lib.state_at(ids, (frames.to(torch.float64) + 0.5) / 30.0)
    a, b = lib.frame_state(ids, frames), lib.frame_state(ids, frames + 1)
    for name in FIELDS:
        if name not in QUAT_FIELDS:
            want = 0.5 * (getattr(a, name) + getattr(b, name))
            np.testing.assert_allclose(getattr(mid, name).numpy(), want.numpy(), atol=1e-12, err_msg=name)


def test_state_at_midpoints_slerps_rotations(lib):
    ids, frames = torch.tensor([1, 5]), torch.tensor([3, 9])
    mid = lib.state_at(ids, (frames.to(torch.float64) + 0.5) / 30.0)
    a, b = lib.frame_state(ids, frames), lib.frame_state(ids, frames + 1)
    for name in QUAT_FIELDS:
        q0, q1 = getattr(a, name), getattr(b, name)
        q1 = q1 * torch.sign((q0 * q1).sum(-1, keepdim=True))
        want = (q0 + q1) / (q0 + q1).norm(dim=-1, keepdim=True)  # the slerp midpoint
        got = getattr(mid, name)
        np.testing.assert_allclose((got * want).sum(-1).abs().numpy(), 1.0, atol=1e-12, err_msg=name)


def test_state_at_after_the_end_gives_the_last_frame(lib, real_clips):
    state = lib.state_at(torch.tensor([4]), torch.tensor([100.0], dtype=torch.float64))
    np.testing.assert_allclose(state.body_pos[0].numpy(), real_clips[4].body_pos[-1], atol=1e-12)


def test_reference_qpos_and_qvel_have_mujoco_layouts(lib, real_clips):
    state = lib.frame_state(torch.tensor([2, 2, 6]), torch.tensor([0, 4, 8]))
    assert state.qpos.shape == (3, sk.QPOS_DIM) and state.qvel.shape == (3, sk.QVEL_DIM)
    np.testing.assert_allclose(state.qpos[1].numpy(), real_clips[2].qpos[4], atol=1e-12)
    np.testing.assert_allclose(state.qvel[2].numpy(), real_clips[6].qvel[8], atol=1e-12)


def test_float32_lib_matches_the_clips_to_float32_precision(real_clips):
    lib32 = MotionLib(real_clips)
    state = lib32.frame_state(torch.tensor([5]), torch.tensor([3]))
    assert state.body_pos.dtype == torch.float32
    np.testing.assert_allclose(state.body_pos[0].numpy(), real_clips[5].body_pos[3], atol=1e-6)


def test_clips_of_different_body_shapes_are_refused(real_clips):
    other = dataclasses.replace(real_clips[1], name="tall", body_offsets=1.1 * real_clips[1].body_offsets)
    with pytest.raises(InputFileError, match="another body shape") as err:
        MotionLib([real_clips[0], other])
    assert err.value.field == "body_offsets"


def test_a_clip_of_another_body_shape_is_named_by_its_file_against_the_shape_most_clips_share(real_clips, tmp_path):
    big = dataclasses.replace(real_clips[0], name="aaa_big", body_offsets=1.3 * real_clips[0].body_offsets)
    big.save(tmp_path / "aaa_big.npz")  # sorts first: the first clip is the odd one out
    for clip in real_clips[:3]:
        clip.save(tmp_path / f"{clip.name}.npz")
    first = sorted(c.name for c in real_clips[:3])[0]
    with pytest.raises(InputFileError) as err:
        MotionLib(tmp_path)
    assert (err.value.path, err.value.field) == (str(tmp_path / "aaa_big.npz"), "body_offsets")
    assert f"clip 'aaa_big' was made for another body shape than {first!r}" in err.value.reason
    assert f"({tmp_path / f'{first}.npz'}, the shape of 3 of the 4 clips)" in err.value.reason


def test_on_a_tie_of_body_shapes_the_first_clip_s_is_the_reference(real_clips, tmp_path):
    a, b = real_clips[:2]
    b = dataclasses.replace(b, body_offsets=1.3 * b.body_offsets)
    a.save(tmp_path / "1.npz")
    b.save(tmp_path / "2.npz")
    with pytest.raises(InputFileError) as err:
        MotionLib(tmp_path)
    assert err.value.path == str(tmp_path / "2.npz")
    assert f"than {a.name!r} ({tmp_path / '1.npz'}, the first clip's)" in err.value.reason


def test_duplicate_clip_names_are_refused_naming_where_each_copy_came_from(real_clips, tmp_path):
    with pytest.raises(ValueError, match=r"unique; 'zombie_walk' is the name of a clip object and a clip object$"):
        MotionLib([real_clips[0], real_clips[-1], real_clips[-1]])
    real_clips[-1].save(tmp_path / "a.npz")
    real_clips[-1].save(tmp_path / "b.npz")
    files = f"{tmp_path / 'a.npz'} and {tmp_path / 'b.npz'}"
    with pytest.raises(ValueError, match=rf"unique; 'zombie_walk' is the name of {re.escape(files)}$"):
        MotionLib(tmp_path)
    with pytest.raises(ValueError, match=r"'demo_backward' is the name of a built-in demo clip and .*also repeated: "):
        MotionLib(["demo", "demo"])


def _broken(clip, change: str):
    """``clip`` with one field made invalid: ``nan_root``, ``wide_dof``, ``fps_60`` or ``one_frame``."""
    if change == "nan_root":
        root = clip.root_pos.copy()
        root[3, 1] = np.nan
        return dataclasses.replace(clip, root_pos=root)
    if change == "wide_dof":
        return dataclasses.replace(clip, dof_pos=np.zeros((clip.num_frames, 68)))
    if change == "fps_60":
        return dataclasses.replace(clip, fps=60.0)
    arrays = ("root_pos", "root_rot", "joint_rot", "dof_pos", "root_lin_vel", "root_ang_vel", "dof_vel")
    arrays += ("body_pos", "body_rot", "body_lin_vel", "body_ang_vel")
    return dataclasses.replace(clip, **{k: getattr(clip, k)[:1] for k in arrays})


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ("nan_root", "root_pos", r"contains NaN or inf \(first at frame 3\)"),
        ("wide_dof", "dof_pos", r"expected shape \(\d+, 69\), got \(\d+, 68\)"),
        ("fps_60", "fps", "clips are stored at 30 Hz, got 60"),
        ("one_frame", "root_pos", "a clip needs at least 2 frames, got 1"),
    ],
)
def test_an_invalid_clip_object_is_refused_naming_the_field(real_clips, change, field, message):
    with pytest.raises(InputFileError, match=rf"^a clip object: field '{field}': {message}") as err:
        MotionLib([real_clips[0], _broken(real_clips[1], change)])
    assert err.value.field == field


def test_lib_loads_a_folder_of_clip_files(real_clips, tmp_path):
    for clip in real_clips[:3]:
        clip.save(tmp_path / f"{clip.name}.npz")
    lib = MotionLib(tmp_path)
    assert lib.names == sorted(c.name for c in real_clips[:3])


def test_lib_refuses_an_empty_folder(tmp_path):
    with pytest.raises(InputFileError, match=r"no \.npz motion clips") as err:
        MotionLib(tmp_path)
    assert err.value.path == str(tmp_path) and str(err.value).endswith("folder holds no .npz motion clips")


def test_an_empty_folder_s_error_points_at_its_clip_subfolders_and_amass_files(real_clips, real_motion_files, tmp_path):
    """The repository's motions/ holds only a folder of AMASS files: the error says to import them, and names a
    subfolder of clips to give instead."""
    import shutil

    shutil.copytree(real_motion_files[0].parent, tmp_path / "motions" / "deepmimic-smpl")
    with pytest.raises(InputFileError) as err:
        MotionLib(tmp_path / "motions")
    amass = tmp_path / "motions" / "deepmimic-smpl"
    assert f"{amass} holds AMASS files" in str(err.value)
    assert f"`rgsd-motions import {amass} --out DIR` and give DIR" in str(err.value)
    (tmp_path / "motions" / "clips").mkdir()
    real_clips[0].save(tmp_path / "motions" / "clips" / f"{real_clips[0].name}.npz")
    with pytest.raises(InputFileError, match=re.escape(f"{tmp_path / 'motions' / 'clips'} holds .npz clips: give")):
        MotionLib(tmp_path / "motions")


def test_clip_id_names_the_known_clips(lib):
    assert lib.names[lib.clip_id("punch")] == "punch"
    with pytest.raises(KeyError, match="no clip named 'swim'"):
        lib.clip_id("swim")


def test_subset_holds_just_the_clips_given_with_their_frames_and_origins():
    demo = MotionLib("demo")
    sub = demo.subset([3, 1])
    assert sub.names == ["demo_backward", "demo_run"] and sub.origins == [demo.origins[3], demo.origins[1]]
    assert sub.num_frames.tolist() == [demo.num_frames[3].item(), demo.num_frames[1].item()]
    run = demo.frame_state(torch.tensor([1]), torch.tensor([7])).qpos
    assert torch.equal(sub.frame_state(torch.tensor([1]), torch.tensor([7])).qpos, run)
