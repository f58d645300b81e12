"""Generate the SMPL humanoid's MJCF from the joint table (and optional body offsets).

Geometry follows the offsets: limbs are capsules along the parent-to-child
offset, feet and hands are boxes, the head a sphere, the trunk capsules. With a
user's body shape (``body_shape.body_from_smpl``) the same rules give a model
of that body. Masses come from the geoms at a uniform density.
"""

from __future__ import annotations

import functools
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import mujoco
import numpy as np

from rgsd_envs.humanoid import skeleton as sk

DEFAULT_TIMESTEP = 1.0 / 60.0
"""Physics timestep (s): 2 physics steps per 30 Hz control step. With hinge armature
``2 kp dt^2`` it holds standing for 10 s, replays the clips as long as 1/120 and
1/240 s do and never blows up under random actions, at half the cost of 1/120 s
(``benchmarks/timestep_choice.py``; README "Physics timestep")."""
CONTROL_HZ = 30
"""Policy rate (Hz): one action per 1/30 s, held for several physics steps."""


@dataclass(frozen=True)
class HumanoidConfig:
    """Options of the generated model; the defaults are the project's model."""

    timestep: float = DEFAULT_TIMESTEP
    density: float = 1000.0
    """kg/m^3, uniform over all geoms (the human body is ~985-1050)."""
    armature_factor: float = 2.0
    """Rotor inertia added to each hinge, as a multiple of ``kp * timestep**2`` (kg m^2).

    MuJoCo integrates the actuators' damping implicitly but their stiffness
    explicitly, which is stable only while a hinge's effective inertia exceeds
    about ``kp * dt^2``; light links (hands, collars, arms) fall short and random
    actions blow them up. ``2 kp dt^2`` per hinge (0.44 kg m^2 at the hips,
    0.17 at the wrists at 1/60 s) never blew up under random actions in
    ``benchmarks/timestep_choice.py`` and follows the timestep if it changes."""
    friction: float = 1.0
    self_collision: bool = True
    """Body parts collide with each other (not only with the floor)."""
    offsets: tuple[tuple[float, float, float], ...] | None = field(default=None)
    """Per-body parent-relative offsets (24x3); None for the neutral table."""

    def hinge_armature(self) -> np.ndarray:
        """(69,) armature per hinge in DOF order: armature_factor * kp * timestep^2."""
        return self.armature_factor * sk.KP * self.timestep**2

    def offset_array(self) -> np.ndarray:
        """Offsets as a (24, 3) array."""
        return sk.REST_OFFSETS.copy() if self.offsets is None else np.asarray(self.offsets, dtype=float)


def _f(v) -> str:
    return " ".join(f"{float(x):.6g}" for x in np.atleast_1d(v))


def _capsule(body: ET.Element, a, b, r: float, name: str) -> None:
    ET.SubElement(body, "geom", name=name, type="capsule", fromto=_f(np.concatenate([a, b])), size=_f(r))


def _box(body: ET.Element, center, half, name: str) -> None:
    ET.SubElement(body, "geom", name=name, type="box", pos=_f(center), size=_f(half))


# limb capsule radii (m) and how much of each end is left free for the joints
_LIMB_RADIUS = {
    "Hip": 0.075, "Knee": 0.052, "Shoulder": 0.046, "Elbow": 0.04, "Neck": 0.05, "Thorax": 0.05,
}  # fmt: skip
SOLE_BELOW_TOE = 0.02
"""The sole is this far below the toe joint (as in the shared clips' grounding)."""
HEEL_BEHIND_ANKLE = 0.055


def _add_geoms(body: ET.Element, b: int, off: np.ndarray) -> None:
    """Add body b's collision/visual geoms; off holds all parent-relative offsets."""
    name = sk.BODY_NAMES[b]
    kind = name[2:] if name[:2] in ("L_", "R_") else name
    children = [c for c in range(sk.NUM_BODIES) if sk.PARENTS[c] == b]
    if kind in ("Hip", "Knee", "Shoulder", "Elbow", "Neck", "Thorax"):
        d = off[children[0]]
        r = _LIMB_RADIUS[kind]
        start = 0.12 if kind in ("Hip", "Knee", "Shoulder", "Elbow") else 0.1
        _capsule(body, start * d, (1.0 - 0.12) * d - np.array([0, 0, 0]), r, f"{name}_geom")
    elif kind == "Ankle":
        toe = off[children[0]]
        bottom = toe[2] - SOLE_BELOW_TOE
        x0, x1 = -HEEL_BEHIND_ANKLE, toe[0]
        top = -0.02
        _box(
            body,
            ((x0 + x1) / 2, toe[1] / 2, (bottom + top) / 2),
            ((x1 - x0) / 2, 0.045, (top - bottom) / 2),
            f"{name}_geom",
        )
    elif kind == "Toe":
        _box(body, (0.03, 0.0, 0.0), (0.035, 0.045, SOLE_BELOW_TOE), f"{name}_geom")
    elif kind == "Wrist":
        d = off[children[0]]
        _box(
            body,
            d / 2,
            (0.04 if abs(d[0]) < abs(d[1]) else abs(d[0]) / 2 + 0.01, abs(d[1]) / 2 + 0.01, 0.018),
            f"{name}_geom",
        )
    elif kind == "Hand":
        side = 1.0 if name.startswith("L_") else -1.0
        _box(body, (0.0, side * 0.045, 0.0), (0.035, 0.045, 0.012), f"{name}_geom")
    elif kind == "Head":
        ET.SubElement(body, "geom", name=f"{name}_geom", type="sphere", pos=_f((0.02, 0.0, 0.09)), size="0.1")
    elif kind == "Pelvis":
        lh, rh = off[sk.body_id("L_Hip")], off[sk.body_id("R_Hip")]
        z = 0.5 * (lh[2] + rh[2]) * 0.45
        _capsule(body, (-0.015, lh[1] * 0.75, z), (-0.015, rh[1] * 0.75, z), 0.1, f"{name}_geom")
    elif kind in ("Torso", "Spine"):
        d = off[children[0]]
        r = 0.09 if kind == "Torso" else 0.095
        _capsule(body, 0.15 * d, 0.85 * d, r, f"{name}_geom")
    elif kind == "Chest":
        lt, rt, neck = off[sk.body_id("L_Thorax")], off[sk.body_id("R_Thorax")], off[sk.body_id("Neck")]
        z = 0.5 * (lt[2] + rt[2]) * 0.75
        x = 0.5 * (lt[0] + rt[0]) * 0.5
        _capsule(body, (x, lt[1] * 0.8, z), (x, rt[1] * 0.8, z), 0.1, f"{name}_geom")
        _capsule(body, (0.01, 0.0, 0.02), (x, 0.0, 0.5 * neck[2]), 0.1, f"{name}_lower_geom")
    else:  # pragma: no cover - the table has no other kinds
        raise ValueError(f"no geometry rule for body {name}")


def _body_tree(world: ET.Element, off: np.ndarray, root_height: float, cfg: HumanoidConfig) -> None:
    elems: dict[int, ET.Element] = {}
    armature = cfg.hinge_armature()
    for b, name in enumerate(sk.BODY_NAMES):
        parent = world if sk.PARENTS[b] < 0 else elems[sk.PARENTS[b]]
        pos = (0.0, 0.0, root_height) if b == 0 else off[b]
        el = ET.SubElement(parent, "body", name=name, pos=_f(pos))
        elems[b] = el
        if b == 0:
            ET.SubElement(el, "freejoint", name="root")
            ET.SubElement(el, "camera", name="track", mode="trackcom", pos="0.3 -3.2 0.35", xyaxes="1 0 0 0 0.15 1")
        else:
            for axis in sk.hinge_order(name):
                lo, hi = sk.DOF_RANGES[sk.DOF_NAMES.index(f"{name}_{axis}")]
                dof = sk.DOF_NAMES.index(f"{name}_{axis}")
                ET.SubElement(
                    el,
                    "joint",
                    name=f"{name}_{axis}",
                    axis={"x": "1 0 0", "y": "0 1 0", "z": "0 0 1"}[axis],
                    range=_f((lo, hi)),
                    armature=_f(armature[dof]),
                )
        _add_geoms(el, b, off)


def rest_root_height(offsets: np.ndarray) -> float:
    """Pelvis height at which the rest pose stands with its soles on the floor."""
    lowest = 0.0
    for ankle, toe in (("L_Ankle", "L_Toe"), ("R_Ankle", "R_Toe")):
        a = sk.body_id(ankle)
        z, b = 0.0, a
        while b > 0:
            z += offsets[b][2]
            b = sk.PARENTS[b]
        lowest = min(lowest, z + offsets[sk.body_id(toe)][2] - SOLE_BELOW_TOE)
    return -lowest


def build_mjcf(cfg: HumanoidConfig = HumanoidConfig()) -> str:
    """The humanoid's MJCF as an XML string."""
    off = cfg.offset_array()
    if off.shape != (sk.NUM_BODIES, 3) or not np.isfinite(off).all():
        raise ValueError(f"offsets must be a finite ({sk.NUM_BODIES}, 3) array, got shape {off.shape}")
    root = ET.Element("mujoco", model="rgsd_smpl_humanoid")
    ET.SubElement(root, "compiler", angle="radian", autolimits="true")
    ET.SubElement(
        root, "option", timestep=f"{cfg.timestep:.8g}", integrator="implicitfast", iterations="20", ls_iterations="10"
    )
    # peak arena use under random actions is ~0.23 MB (23 contacts); MuJoCo's
    # automatic size is 17.8 MB per world, which persistent batches multiply by N
    ET.SubElement(root, "size", memory="1M")
    vis = ET.SubElement(root, "visual")
    ET.SubElement(vis, "global", offwidth="1280", offheight="720")
    ET.SubElement(vis, "quality", shadowsize="2048")
    default = ET.SubElement(root, "default")
    ET.SubElement(default, "joint", type="hinge", damping="0", limited="true")
    ET.SubElement(
        default,
        "geom",
        density=_f(cfg.density),
        condim="3",
        friction=_f((cfg.friction, 0.005, 0.0001)),
        rgba="0.8 0.6 0.45 1",
        contype="1",
        conaffinity="1" if cfg.self_collision else "2",
    )
    asset = ET.SubElement(root, "asset")
    ET.SubElement(
        asset,
        "texture",
        name="grid",
        type="2d",
        builtin="checker",
        rgb1=".25 .28 .32",
        rgb2=".35 .38 .42",
        width="512",
        height="512",
    )
    ET.SubElement(asset, "material", name="grid", texture="grid", texrepeat="1 1", texuniform="true", reflectance="0.1")
    ET.SubElement(
        asset,
        "texture",
        name="sky",
        type="skybox",
        builtin="gradient",
        rgb1=".55 .65 .8",
        rgb2=".1 .1 .15",
        width="256",
        height="256",
    )
    world = ET.SubElement(root, "worldbody")
    ET.SubElement(world, "light", name="sun", pos="0 0 6", dir="0 0.2 -1", directional="true", castshadow="true")
    ET.SubElement(
        world,
        "geom",
        name="floor",
        type="plane",
        size="50 50 0.1",
        material="grid",
        rgba="1 1 1 1",
        contype="1",
        conaffinity="3",
    )
    _body_tree(world, off, rest_root_height(off), cfg)
    contact = ET.SubElement(root, "contact")
    for b1, b2 in _rest_overlaps(off, cfg.self_collision):
        ET.SubElement(contact, "exclude", body1=sk.BODY_NAMES[b1], body2=sk.BODY_NAMES[b2])
    act = ET.SubElement(root, "actuator")
    for i, dof in enumerate(sk.DOF_NAMES):
        ET.SubElement(
            act,
            "position",
            name=dof,
            joint=dof,
            kp=_f(sk.KP[i]),
            kv=_f(sk.KD[i]),
            ctrlrange=_f(sk.DOF_RANGES[i]),
            forcerange=_f((-sk.TORQUE_LIMITS[i], sk.TORQUE_LIMITS[i])),
        )
    sensor = ET.SubElement(root, "sensor")
    for name in sk.BODY_NAMES:
        ET.SubElement(sensor, "contact", name=f"floor_{name}", body1=name, geom2="floor", data="found", num="1")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode")


def _rest_overlaps(off: np.ndarray, self_collision: bool) -> list[tuple[int, int]]:
    """Body pairs excluded from self-collision: those whose geoms touch in the rest
    pose (they would push on each other forever) and ``ALWAYS_EXCLUDED``."""
    if not self_collision:
        return []
    pairs = set(_rest_overlaps_cached(tuple(map(tuple, off))))
    pairs |= {tuple(sorted((sk.body_id(a), sk.body_id(b)))) for a, b in ALWAYS_EXCLUDED}
    return sorted(pairs)


_TRUNK = ("Pelvis", "Torso", "Spine", "Chest", "Neck", "L_Thorax", "R_Thorax")
ALWAYS_EXCLUDED: tuple[tuple[str, str], ...] = (
    *((a, b) for i, a in enumerate(_TRUNK) for b in _TRUNK[i + 1 :]),
    *((leg, t) for leg in ("L_Hip", "R_Hip") for t in ("Pelvis", "Torso", "Spine")),
    ("L_Hip", "R_Hip"),
    ("Chest", "L_Shoulder"),
    ("Chest", "R_Shoulder"),
)
"""Body pairs that never collide: the trunk segments among themselves (their
capsules overlap whenever the spine bends) and the thighs with the lower trunk
(deep hip flexion), and the upper arms with the chest (the neutral body is
asymmetric: with the arms down the right upper arm sits 2.4 cm inside the chest
capsule, which physics would push out). Without the trunk exclusions, bending forward drove the pelvis capsule
13 cm into the spine capsule and the solver blew up."""


@functools.lru_cache(maxsize=8)
def _rest_overlaps_cached(off_t: tuple) -> tuple[tuple[int, int], ...]:
    off = np.asarray(off_t)
    cfg = HumanoidConfig(offsets=off_t, self_collision=True)
    root = ET.fromstring(_bare_mjcf(off, cfg))
    model = mujoco.MjModel.from_xml_string(ET.tostring(root, encoding="unicode"))
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    pairs = set()
    margin = 0.01
    for g1 in range(model.ngeom):
        for g2 in range(g1 + 1, model.ngeom):
            b1, b2 = model.geom_bodyid[g1], model.geom_bodyid[g2]
            if b1 == 0 or b2 == 0 or b1 == b2:
                continue
            if mujoco.mj_geomDistance(model, data, g1, g2, margin, None) < margin:
                pairs.add(tuple(sorted((sk.MJ_BODY_ORDER[b1 - 1], sk.MJ_BODY_ORDER[b2 - 1]))))
    return tuple(sorted(pairs))


def _bare_mjcf(off: np.ndarray, cfg: HumanoidConfig) -> str:
    root = ET.Element("mujoco")
    ET.SubElement(root, "compiler", angle="radian", autolimits="true")
    world = ET.SubElement(root, "worldbody")
    _body_tree(world, off, 1.0, cfg)
    return ET.tostring(root, encoding="unicode")


@functools.lru_cache(maxsize=8)
def _compiled(cfg: HumanoidConfig) -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(build_mjcf(cfg))


def load_model(cfg: HumanoidConfig = HumanoidConfig()) -> mujoco.MjModel:
    """A compiled MjModel of the humanoid (a fresh copy each call)."""
    import copy

    return copy.copy(_compiled(cfg))


def physics_substeps(timestep: float) -> int:
    """Physics steps per 30 Hz control step; the timestep must divide 1/30 s."""
    n = round(1.0 / (CONTROL_HZ * timestep))
    if n < 1 or abs(n * timestep * CONTROL_HZ - 1.0) > 1e-6:
        raise ValueError(f"timestep {timestep} does not divide the control period 1/{CONTROL_HZ} s")
    return n
