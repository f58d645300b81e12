"""Body shape from a SMPL model and betas, checked on a tiny synthetic SMPL model file.

The synthetic model puts one vertex on each neutral rest joint (SMPL frame) and a
J_regressor that picks them (the pelvis as the mean of two vertices), so zero
betas must give the neutral joint table. Beta 0 stretches both legs below the
hips by ``LEG_STRETCH`` per unit; beta 1 moves every vertex ``SHIFT_X`` per unit
along SMPL's x (the subject's left). smplx holds a model's arrays in float32, so
results match the designed values to ``ATOL`` (a micrometre), not bit for bit.
"""

from __future__ import annotations

import pickle
import sys

import mujoco
import numpy as np
import pytest
import scipy.sparse

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.humanoid.body_shape import body_from_smpl, model_file_names
from rgsd_envs.humanoid.mjcf import HumanoidConfig, load_model, rest_root_height
from rgsd_envs.motion.cli import main
from rgsd_envs.motion.clip import load_clip
from rgsd_envs.utils.files import InputFileError

pytest.importorskip("smplx")

NUM_SHAPE = 10
LEG_STRETCH = 0.1
SHIFT_X = 0.01
ATOL = 1e-6
LOWER_LEG = [sk.body_id(n) for n in ("L_Knee", "L_Ankle", "L_Toe", "R_Knee", "R_Ankle", "R_Toe")]
HIP_OF = {b: sk.body_id(("L_" if sk.BODY_NAMES[b].startswith("L_") else "R_") + "Hip") for b in LOWER_LEG}


def neutral_joints_smpl() -> np.ndarray:
    """Neutral rest joints (24, 3) in SMPL's frame, from the joint table."""
    j = np.zeros((sk.NUM_BODIES, 3))
    j[0] = sk.SMPL_NEUTRAL_PELVIS_REST
    for b in range(1, sk.NUM_BODIES):
        j[b] = j[sk.PARENTS[b]] + sk.WORLD_FROM_SMPL.T @ sk.REST_OFFSETS[b]
    return j


def synthetic_model(scale: float = 1.0) -> dict:
    """A SMPL-format model dict (26 vertices) whose rest joints are the neutral ones times scale."""
    joints = scale * neutral_joints_smpl()
    nv = sk.NUM_BODIES + 2
    v = np.zeros((nv, 3))
    v[1 : sk.NUM_BODIES] = joints[1:]
    v[0] = (1.0, 1.0, 1.0)  # decoy: the pelvis comes from vertices 24 and 25
    v[24] = joints[0] + (0.05, 0.0, 0.0)
    v[25] = joints[0] - (0.05, 0.0, 0.0)
    reg = np.zeros((sk.NUM_BODIES, nv))
    reg[np.arange(1, sk.NUM_BODIES), np.arange(1, sk.NUM_BODIES)] = 1.0
    reg[0, [24, 25]] = 0.5
    shapedirs = np.zeros((nv, 3, NUM_SHAPE))
    for b in LOWER_LEG:
        shapedirs[b, :, 0] = LEG_STRETCH * (joints[b] - joints[HIP_OF[b]])
    shapedirs[:, 0, 1] = SHIFT_X
    weights = np.zeros((nv, sk.NUM_BODIES))
    weights[np.arange(sk.NUM_BODIES), np.arange(sk.NUM_BODIES)] = 1.0
    weights[24:, 0] = 1.0
    parents = np.array(sk.PARENTS, dtype=np.int64)
    parents[0] = 4294967295  # as in the released SMPL files (uint32 -1)
    return {
        "v_template": v,
        "shapedirs": shapedirs,
        "posedirs": np.zeros((nv, 3, 207)),
        "J_regressor": scipy.sparse.csc_matrix(reg),
        "weights": weights,
        "kintree_table": np.stack([parents, np.arange(sk.NUM_BODIES)]),
        "f": np.array([[0, 1, 2]], dtype=np.uint32),
    }


def write_pkl(path, model: dict) -> None:
    """Write a model dict as smplx reads it (pickle)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump(model, f)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A folder holding SMPL_NEUTRAL.pkl of the synthetic model."""
    d = tmp_path_factory.mktemp("smpl")
    write_pkl(d / "SMPL_NEUTRAL.pkl", synthetic_model())
    return d


# --- shape maths -----------------------------------------------------------


def test_zero_betas_give_the_neutral_table_offsets(model_dir):
    offsets, _ = body_from_smpl(model_dir)
    np.testing.assert_allclose(offsets, sk.REST_OFFSETS, atol=ATOL)


def test_zero_betas_give_the_neutral_pelvis_rest_joint(model_dir):
    _, pelvis = body_from_smpl(model_dir, betas=[0.0] * NUM_SHAPE)
    np.testing.assert_allclose(pelvis, sk.SMPL_NEUTRAL_PELVIS_REST, atol=ATOL)


def test_leg_beta_lengthens_lower_leg_offsets_by_the_designed_factor(model_dir):
    offsets, _ = body_from_smpl(model_dir, betas=[2.0])
    np.testing.assert_allclose(offsets[LOWER_LEG], (1 + 2 * LEG_STRETCH) * sk.REST_OFFSETS[LOWER_LEG], atol=ATOL)


def test_leg_beta_leaves_the_other_offsets_unchanged(model_dir):
    offsets, _ = body_from_smpl(model_dir, betas=[2.0])
    others = [b for b in range(sk.NUM_BODIES) if b not in LOWER_LEG]
    np.testing.assert_allclose(offsets[others], sk.REST_OFFSETS[others], atol=ATOL)


def test_shift_beta_moves_the_pelvis_rest_joint_along_smpl_x(model_dir):
    offsets, pelvis = body_from_smpl(model_dir, betas=[0.0, 3.0])
    np.testing.assert_allclose(pelvis - sk.SMPL_NEUTRAL_PELVIS_REST, (3 * SHIFT_X, 0.0, 0.0), atol=ATOL)
    np.testing.assert_allclose(offsets, sk.REST_OFFSETS, atol=ATOL)


def test_gender_picks_its_own_model_file(tmp_path):
    write_pkl(tmp_path / "SMPL_NEUTRAL.pkl", synthetic_model())
    write_pkl(tmp_path / "SMPL_MALE.pkl", synthetic_model(scale=1.1))
    offsets, _ = body_from_smpl(tmp_path, gender="male")
    np.testing.assert_allclose(offsets, 1.1 * sk.REST_OFFSETS, atol=ATOL)


def test_model_is_found_in_a_smpl_subfolder(tmp_path):
    write_pkl(tmp_path / "smpl" / "SMPL_NEUTRAL.pkl", synthetic_model(scale=1.1))
    offsets, _ = body_from_smpl(tmp_path)
    np.testing.assert_allclose(offsets, 1.1 * sk.REST_OFFSETS, atol=ATOL)


def test_model_file_path_is_accepted_directly(tmp_path):
    path = tmp_path / "basicmodel_neutral_lbs_10_207_0_v1.1.0.pkl"
    write_pkl(path, synthetic_model(scale=1.1))
    offsets, _ = body_from_smpl(path)
    np.testing.assert_allclose(offsets, 1.1 * sk.REST_OFFSETS, atol=ATOL)


def test_npz_model_file_gives_the_same_body_as_pkl(tmp_path, model_dir):
    model = synthetic_model()
    model["J_regressor"] = model["J_regressor"].toarray()
    np.savez(tmp_path / "SMPL_NEUTRAL.npz", **model)
    got = body_from_smpl(tmp_path, betas=[1.5, -2.0])
    want = body_from_smpl(model_dir, betas=[1.5, -2.0])
    np.testing.assert_allclose(got[0], want[0], atol=1e-12)
    np.testing.assert_allclose(got[1], want[1], atol=1e-12)


# --- errors ------------------------------------------------------------------


def test_missing_smplx_says_how_to_install_it(model_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "smplx", None)
    with pytest.raises(ImportError, match=r'pip install "rgsd-envs\[smplx\]"'):
        body_from_smpl(model_dir)


def test_missing_model_folder_is_named(tmp_path):
    missing = tmp_path / "no_such_folder"
    with pytest.raises(InputFileError, match="folder not found") as err:
        body_from_smpl(missing)
    assert err.value.path == str(missing)


def test_folder_without_model_file_names_the_files_looked_for(tmp_path):
    with pytest.raises(InputFileError) as err:
        body_from_smpl(tmp_path, gender="female")
    assert err.value.path == str(tmp_path)
    assert model_file_names("female") == ("SMPL_FEMALE.pkl", "SMPL_FEMALE.npz")
    assert "SMPL_FEMALE.pkl" in str(err.value) and "smpl/" in str(err.value)


def test_too_many_betas_are_refused_with_the_model_size(model_dir):
    with pytest.raises(ValueError, match=f"11 betas.*{NUM_SHAPE} shape components"):
        body_from_smpl(model_dir, betas=[0.0] * 11)


def test_nan_betas_are_refused(model_dir):
    with pytest.raises(ValueError, match="finite"):
        body_from_smpl(model_dir, betas=[0.0, float("nan")])


def test_nested_betas_are_refused(model_dir):
    with pytest.raises(ValueError, match="flat list"):
        body_from_smpl(model_dir, betas=[[0.0, 1.0]])


def test_unknown_gender_is_refused(model_dir):
    with pytest.raises(ValueError, match="gender must be one of"):
        body_from_smpl(model_dir, gender="other")


def test_model_file_without_a_key_names_the_key(tmp_path):
    model = synthetic_model()
    del model["J_regressor"]
    write_pkl(tmp_path / "SMPL_NEUTRAL.pkl", model)
    with pytest.raises(InputFileError) as err:
        body_from_smpl(tmp_path)
    assert err.value.field == "J_regressor"
    assert err.value.path == str(tmp_path / "SMPL_NEUTRAL.pkl")


def test_model_with_another_joint_tree_is_refused(tmp_path):
    model = synthetic_model()
    model["kintree_table"][0, 5] = 0
    write_pkl(tmp_path / "SMPL_NEUTRAL.pkl", model)
    with pytest.raises(InputFileError, match="joint tree") as err:
        body_from_smpl(tmp_path)
    assert err.value.field == "kintree_table"


def test_unreadable_model_file_is_named(tmp_path):
    (tmp_path / "SMPL_NEUTRAL.pkl").write_bytes(b"not a pickle")
    with pytest.raises(InputFileError, match="not a readable SMPL model") as err:
        body_from_smpl(tmp_path)
    assert err.value.path == str(tmp_path / "SMPL_NEUTRAL.pkl")


# --- the humanoid and the importer with that shape -------------------------


def test_shape_offsets_compile_into_a_humanoid_with_those_offsets(model_dir):
    offsets, _ = body_from_smpl(model_dir, betas=[2.0])
    model = load_model(HumanoidConfig(offsets=tuple(map(tuple, offsets))))
    assert model.nbody == sk.NUM_BODIES + 1
    np.testing.assert_allclose(model.body_pos[sk.MJ_BODY_IDS[1:]], offsets[1:], atol=1e-6)


def test_longer_legs_stand_with_soles_on_the_floor(model_dir):
    offsets, _ = body_from_smpl(model_dir, betas=[2.0])
    model = load_model(HumanoidConfig(offsets=tuple(map(tuple, offsets))))
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    assert rest_root_height(offsets) > rest_root_height(sk.REST_OFFSETS) + 0.1
    feet = [i for i in range(model.ngeom) if model.geom_bodyid[i] in sk.MJ_BODY_IDS[list(sk.FOOT_BODY_IDS)]]
    lowest = min(data.geom_xpos[i, 2] - model.geom_size[i, 2] for i in feet)
    assert abs(lowest) < 1e-6


@pytest.fixture(scope="module")
def imported(model_dir, real_motion_files, tmp_path_factory):
    """The walk clip imported by the CLI with the neutral body and with a shaped body."""
    src = next(f for f in real_motion_files if f.name == "walk_poses.npz")
    out = {}
    for label, extra in (("neutral", []), ("shaped", ["--smpl-model", str(model_dir), "--betas", "2", "0.5"])):
        d = tmp_path_factory.mktemp(label)
        assert main(["import", str(src), "--out", str(d), "--quiet", *extra]) == 0
        out[label] = load_clip(d / "walk.npz")
    return out


def test_cli_import_with_smpl_model_stores_the_shape_offsets(imported, model_dir):
    offsets, _ = body_from_smpl(model_dir, betas=[2.0, 0.5])
    np.testing.assert_allclose(imported["shaped"].body_offsets, offsets, atol=1e-12)


def test_cli_import_with_smpl_model_places_the_pelvis_at_trans_plus_its_rest_joint(imported):
    shift = imported["shaped"].root_pos[:, :2] - imported["neutral"].root_pos[:, :2]
    np.testing.assert_allclose(shift, np.broadcast_to((0.5 * SHIFT_X, 0.0), shift.shape), atol=ATOL)


def test_cli_import_with_too_many_betas_exits_2_with_an_error(model_dir, real_motion_files, tmp_path, capsys):
    argv = ["import", str(real_motion_files[0]), "--out", str(tmp_path), "--smpl-model", str(model_dir)]
    assert main([*argv, "--quiet", "--betas", *["1"] * 11]) == 2
    assert capsys.readouterr().err.startswith("error: got 11 betas")
    assert not list(tmp_path.iterdir())


def test_cli_betas_without_smpl_model_exits_2(real_motion_files, tmp_path, capsys):
    assert main(["import", str(real_motion_files[0]), "--out", str(tmp_path), "--quiet", "--betas", "1"]) == 2
    assert "--betas needs --smpl-model" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
