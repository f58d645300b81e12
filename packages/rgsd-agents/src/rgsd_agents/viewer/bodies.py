"""Humanoids in a viser scene: each body a sphere at its joint and a cylinder to its parent's, one instanced mesh each.

Two instanced meshes per character (24 spheres, 23 cylinders) are moved every frame by sending only the
instances' positions, rotations and scales, which keeps a 30 Hz update of several characters cheap.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rgsd_envs.humanoid import skeleton as sk
from rgsd_eval.html_replay import BODY_RADIUS

_CHILDREN = np.array([b for b in range(sk.NUM_BODIES) if sk.PARENTS[b] >= 0])
_PARENTS = np.array([sk.PARENTS[b] for b in _CHILDREN])
_JOINT_RADIUS = np.array(BODY_RADIUS)
_SEGMENT_RADIUS = _JOINT_RADIUS[_CHILDREN]


def rotations_from_z(d: np.ndarray) -> np.ndarray:
    """(N, 4) unit quaternions (w, x, y, z) turning +z onto the unit directions ``d`` (N, 3)."""
    q = np.stack([1.0 + d[:, 2], -d[:, 1], d[:, 0], np.zeros(len(d))], axis=-1)
    flipped = q[:, 0] < 1e-9  # d = -z: any half turn about a horizontal axis
    q[flipped] = (0.0, 1.0, 0.0, 0.0)
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def segment_instances(body_pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions, rotations and (r, r, length) scales of the 23 unit cylinders of a pose (24, 3)."""
    a, b = body_pos[_CHILDREN], body_pos[_PARENTS]
    v = b - a
    length = np.maximum(np.linalg.norm(v, axis=-1), 1e-6)
    scales = np.stack([_SEGMENT_RADIUS, _SEGMENT_RADIUS, length], axis=-1)
    return 0.5 * (a + b), rotations_from_z(v / length[:, None]), scales


class BodyDrawing:
    """One humanoid in a viser scene, in one colour; ``update`` moves it to a pose."""

    def __init__(self, scene: Any, name: str, color: tuple[int, int, int], opacity: float = 1.0) -> None:
        """Add the character's meshes under ``name`` to ``scene`` (a ``viser.SceneApi``), at the rest pose."""
        import trimesh

        sphere = trimesh.creation.icosphere(subdivisions=2, radius=1.0)
        cylinder = trimesh.creation.cylinder(radius=1.0, height=1.0, sections=14)
        rest = np.zeros((sk.NUM_BODIES, 3))  # a placeholder until the first update
        pos, rot, scale = segment_instances(rest)
        common = {"batched_colors": color, "opacity": None if opacity >= 1 else opacity}
        self.joints = scene.add_batched_meshes_simple(
            f"{name}/joints", sphere.vertices, sphere.faces, np.tile((1.0, 0, 0, 0), (sk.NUM_BODIES, 1)), rest,
            batched_scales=_JOINT_RADIUS, **common,
        )  # fmt: skip
        self.segments = scene.add_batched_meshes_simple(
            f"{name}/segments", cylinder.vertices, cylinder.faces, rot, pos, batched_scales=scale, **common
        )

    def update(self, body_pos: np.ndarray) -> None:
        """Move the character to the pose ``body_pos`` (24, 3)."""
        pos, rot, scale = segment_instances(np.asarray(body_pos, dtype=np.float64))
        self.joints.batched_positions = body_pos.astype(np.float32)
        self.segments.batched_positions = pos.astype(np.float32)
        self.segments.batched_wxyzs = rot.astype(np.float32)
        self.segments.batched_scales = scale.astype(np.float32)

    @property
    def visible(self) -> bool:
        """Whether the character is drawn."""
        return bool(self.joints.visible)

    @visible.setter
    def visible(self, value: bool) -> None:
        self.joints.visible = value
        self.segments.visible = value
