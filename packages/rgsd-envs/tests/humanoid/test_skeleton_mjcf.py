"""The joint table (skeleton) and the MJCF generated from it (humanoid.mjcf)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.humanoid.mjcf import HumanoidConfig, build_mjcf, load_model, physics_substeps

RANGE_ATOL = 1e-5
"""The MJCF writes numbers with 6 significant digits."""


@pytest.fixture(scope="module")
def model() -> mujoco.MjModel:
    """The default humanoid model."""
    return load_model()


@pytest.fixture(scope="module")
def rest(model) -> mujoco.MjData:
    """Data at the model's rest pose (qpos0), forward kinematics done."""
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    return data


def lowest_geom_z(model: mujoco.MjModel, data: mujoco.MjData) -> float:
    """Lowest world z over the humanoid's geoms (boxes, spheres, capsules)."""
    low = np.inf
    for g in range(model.ngeom):
        if model.geom_bodyid[g] == 0:
            continue
        size, zc = model.geom_size[g], data.geom_xpos[g, 2]
        zrow = data.geom_xmat[g].reshape(3, 3)[2]  # world z of the geom's local axes
        kind = model.geom_type[g]
        if kind == mujoco.mjtGeom.mjGEOM_BOX:
            low = min(low, zc - np.abs(zrow) @ size)
        elif kind == mujoco.mjtGeom.mjGEOM_SPHERE:
            low = min(low, zc - size[0])
        elif kind == mujoco.mjtGeom.mjGEOM_CAPSULE:
            low = min(low, zc - abs(zrow[2]) * size[1] - size[0])
        else:
            raise AssertionError(f"unexpected geom type {kind}")
    return low


# --- the joint table -------------------------------------------------------------


def test_table_has_24_bodies_69_dofs_and_smpl_parents():
    assert (sk.NUM_BODIES, sk.NUM_DOFS, len(sk.DOF_NAMES), len(set(sk.DOF_NAMES))) == (24, 69, 69, 69)
    assert sk.PARENTS == (-1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 12, 13, 14, 16, 17, 18, 19, 20, 21)


def test_mj_body_order_lists_parents_before_children():
    pos = {b: i for i, b in enumerate(sk.MJ_BODY_ORDER)}
    assert sorted(sk.MJ_BODY_ORDER) == list(range(24))
    assert all(pos[sk.PARENTS[b]] < pos[b] for b in range(1, 24))


def test_legs_use_y_x_z_hinges_and_the_rest_x_y_z():
    assert [sk.hinge_order(n) for n in ("L_Knee", "R_Hip", "L_Toe", "Spine", "L_Elbow")] == ["yxz"] * 3 + ["xyz"] * 2


def test_per_dof_gains_follow_the_body_groups():
    gains = {n: (sk.KP[i], sk.KD[i], sk.TORQUE_LIMITS[i]) for i, n in enumerate(sk.DOF_NAMES)}
    assert gains["L_Knee_y"] == (800, 80, 500)
    assert gains["R_Toe_x"] == (500, 50, 500)
    assert gains["Chest_z"] == (1000, 100, 500)
    assert gains["Head_x"] == (500, 50, 250)
    assert gains["L_Elbow_z"] == (500, 50, 150)
    assert gains["R_Hand_y"] == (300, 30, 150)


def test_right_ranges_mirror_the_left_ones():
    left = [i for i, n in enumerate(sk.DOF_NAMES) if n.startswith("L_")]
    right = [sk.DOF_NAMES.index("R_" + sk.DOF_NAMES[i][2:]) for i in left]
    about_y = np.array([sk.DOF_NAMES[i].endswith("_y") for i in left])[:, None]
    mirrored = np.where(about_y, sk.DOF_RANGES[left], -sk.DOF_RANGES[left][:, ::-1])
    assert len(left) == 27  # nine left bodies
    np.testing.assert_allclose(sk.DOF_RANGES[right], mirrored)


def test_every_range_contains_the_rest_pose():
    assert (sk.DOF_RANGES[:, 0] < 0).all() and (sk.DOF_RANGES[:, 1] > 0).all()


def test_action_offset_and_scale_span_each_range_exactly():
    np.testing.assert_allclose(sk.ACTION_OFFSET - sk.ACTION_SCALE, sk.DOF_RANGES[:, 0])
    np.testing.assert_allclose(sk.ACTION_OFFSET + sk.ACTION_SCALE, sk.DOF_RANGES[:, 1])


def test_body_id_names_unknown_bodies():
    assert sk.body_id("Head") == 15
    with pytest.raises(KeyError, match="unknown body 'Tail'"):
        sk.body_id("Tail")


# --- the generated model -----------------------------------------------------------


def test_model_has_24_bodies_plus_the_world(model):
    assert model.nbody == 25
    assert [model.body(int(i)).name for i in sk.MJ_BODY_IDS] == list(sk.BODY_NAMES)


def test_model_body_parents_follow_the_table(model):
    parents = [model.body_parentid[int(sk.MJ_BODY_IDS[b])] for b in range(1, 24)]
    assert parents == [int(sk.MJ_BODY_IDS[sk.PARENTS[b]]) for b in range(1, 24)]


def test_model_bodies_sit_at_the_table_offsets(model, rest):
    xpos = rest.xpos[sk.MJ_BODY_IDS]
    rel = xpos[1:] - xpos[list(sk.PARENTS[1:])]
    np.testing.assert_allclose(rel, sk.REST_OFFSETS[1:], atol=1e-6)


def test_model_has_a_free_root_then_69_hinges_in_dof_order(model):
    assert model.nq == sk.QPOS_DIM and model.nv == sk.QVEL_DIM
    assert model.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE
    assert [model.joint(j).name for j in range(1, model.njnt)] == list(sk.DOF_NAMES)
    assert (model.jnt_type[1:] == mujoco.mjtJoint.mjJNT_HINGE).all()
    np.testing.assert_array_equal(model.jnt_qposadr[1:], 7 + np.arange(69))


def test_hinge_axes_match_their_names(model):
    axes = {"x": (1, 0, 0), "y": (0, 1, 0), "z": (0, 0, 1)}
    np.testing.assert_array_equal(model.jnt_axis[1:], [axes[n[-1]] for n in sk.DOF_NAMES])


def test_joint_ranges_are_the_table_ranges(model):
    assert model.jnt_limited[1:].all()
    np.testing.assert_allclose(model.jnt_range[1:], sk.DOF_RANGES, atol=RANGE_ATOL)


def test_actuators_are_named_and_ordered_like_the_dofs(model):
    assert model.nu == 69
    assert [model.actuator(i).name for i in range(model.nu)] == list(sk.DOF_NAMES)
    np.testing.assert_array_equal(model.actuator_trnid[:, 0], np.arange(1, 70))


def test_actuators_are_position_servos_with_the_table_gains(model):
    assert (model.actuator_biastype == mujoco.mjtBias.mjBIAS_AFFINE).all()
    np.testing.assert_allclose(model.actuator_gainprm[:, 0], sk.KP)
    np.testing.assert_allclose(model.actuator_biasprm[:, :3], np.stack([0 * sk.KP, -sk.KP, -sk.KD], 1))


def test_actuator_force_limits_are_the_table_torque_limits(model):
    assert model.actuator_forcelimited.all()
    np.testing.assert_allclose(model.actuator_forcerange, np.stack([-sk.TORQUE_LIMITS, sk.TORQUE_LIMITS], 1))


def test_actuator_control_ranges_are_the_joint_ranges(model):
    np.testing.assert_allclose(model.actuator_ctrlrange, sk.DOF_RANGES, atol=RANGE_ATOL)


def test_total_mass_is_that_of_an_adult(model):
    assert 65.0 <= model.body_mass.sum() <= 72.0


def test_rest_pose_stands_with_the_soles_on_the_floor(model, rest):
    assert abs(lowest_geom_z(model, rest)) < 1e-6


def test_rest_pose_lowest_points_are_the_feet(model, rest):
    feet = set(sk.MJ_BODY_IDS[list(sk.FOOT_BODY_IDS)].tolist())
    low = min(rest.geom_xpos[g, 2] for g in range(model.ngeom) if model.geom_bodyid[g] not in feet | {0})
    assert low > 0.05


def test_pd_at_the_rest_pose_holds_it_standing_for_two_seconds(model):
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    z0 = data.qpos[2]
    for _ in range(int(2.0 / model.opt.timestep)):
        mujoco.mj_step(model, data)
    assert np.isfinite(data.qpos).all()
    assert abs(data.qpos[2] - z0) < 0.03
    up = data.xmat[sk.MJ_BODY_IDS[sk.HEAD_ID]].reshape(3, 3)[2, 2]
    assert up > 0.95


def test_model_uses_implicit_integration_at_the_default_timestep(model):
    assert model.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    assert physics_substeps(model.opt.timestep) == round(1 / (30 * model.opt.timestep))


def test_physics_substeps_refuses_a_timestep_that_does_not_divide_the_control_period():
    assert physics_substeps(1 / 240) == 8
    with pytest.raises(ValueError, match="does not divide"):
        physics_substeps(1 / 100)


def test_scaled_offsets_scale_the_model():
    off = 1.1 * sk.REST_OFFSETS
    model = load_model(HumanoidConfig(offsets=tuple(map(tuple, off))))
    np.testing.assert_allclose(model.body_pos[sk.MJ_BODY_IDS[1:]], off[1:], atol=1e-6)


def test_offsets_of_the_wrong_shape_are_refused():
    with pytest.raises(ValueError, match=r"\(24, 3\)"):
        build_mjcf(HumanoidConfig(offsets=((0.0, 0.0, 0.0),) * 23))
