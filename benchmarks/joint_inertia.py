"""Effective joint inertia: hinge armature against the links' own inertia (physics fidelity).

MuJoCo's joint-space inertia ``M = mj_fullM`` at the rest pose holds, on each
hinge's diagonal, the armature plus the inertia about that axis of everything
the hinge moves (the link and the links beyond it). Armature is
``armature_factor * kp * dt^2`` (``HumanoidConfig.hinge_armature``): it keeps
the explicitly integrated PD stiffness stable, and it scales with the
timestep squared, so at 1/120 s the same factor gives 4x less. For the first
hinge (in qpos order) of each joint group (left side) this prints the links' own inertia
``M_ii - armature`` (kg m^2) and ``armature / own inertia`` for each setting:
at a ratio well above 1 the joint moves like a heavy flywheel rather than the
limb. Run: ``python benchmarks/joint_inertia.py`` (a few seconds);
``--markdown`` prints the README table.
"""

from __future__ import annotations

import argparse

import mujoco
import numpy as np

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.humanoid.mjcf import DEFAULT_TIMESTEP, HumanoidConfig, load_model

GROUPS = {
    "hip": "L_Hip",
    "knee": "L_Knee",
    "ankle": "L_Ankle",
    "toe": "L_Toe",
    "torso": "Torso",
    "neck": "Neck",
    "head": "Head",
    "shoulder": "L_Shoulder",
    "elbow": "L_Elbow",
    "wrist": "L_Wrist",
    "hand": "L_Hand",
}
"""Joint group -> the body whose first hinge represents it."""
SETTINGS = {
    "1/60 s, c=2 (default)": (DEFAULT_TIMESTEP, 2.0),
    "1/120 s, c=2": (1 / 120, 2.0),
    "1/120 s, c=1": (1 / 120, 1.0),
    "1/120 s, c=0.5": (1 / 120, 0.5),
}
"""(timestep, armature factor c: armature = c kp dt^2) of each column."""


def joint_inertia(cfg: HumanoidConfig) -> tuple[np.ndarray, np.ndarray]:
    """(diagonal of M over the 69 hinges, armature (69,)) at the rest pose (qpos0), in DOF order."""
    model = load_model(cfg)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    full = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, full)
    return np.diag(full)[6:].copy(), model.dof_armature[6:].copy()


def table() -> dict[str, dict[str, float]]:
    """Per group: own inertia (kg m^2), and armature and the ratio armature / own inertia per setting."""
    rows: dict[str, dict[str, float]] = {g: {} for g in GROUPS}
    for label, (dt, factor) in SETTINGS.items():
        diag, arm = joint_inertia(HumanoidConfig(timestep=dt, armature_factor=factor))
        for group, body in GROUPS.items():
            i = next(k for k, name in enumerate(sk.DOF_NAMES) if name.rsplit("_", 1)[0] == body)
            own = diag[i] - arm[i]
            rows[group]["own"] = own
            rows[group][f"armature {label}"] = arm[i]
            rows[group][label] = arm[i] / own
    return rows


def main() -> None:
    """Print the table (plain or markdown)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--markdown", action="store_true", help="print a markdown table (the README's)")
    args = p.parse_args()
    rows = table()
    labels = list(SETTINGS)
    if args.markdown:
        print(
            "| joint (first hinge) | own inertia (kg m^2) | "
            + " | ".join(f"armature / own, {s}" for s in labels)
            + " |"
        )
        print("|---|---|" + "---|" * len(labels))
        for g, r in rows.items():
            print(
                f"| {g} | {r['own']:.4f} | "
                + " | ".join(f"{r[s]:.3g} ({r['armature ' + s]:.3g})" for s in labels)
                + " |"
            )
        print("\n(armature in kg m^2 in brackets)")
        return
    print(f"{'joint':<9} {'own kg m^2':>11}  " + "  ".join(f"{s:>20}" for s in labels))
    for g, r in rows.items():
        print(f"{g:<9} {r['own']:>11.4f}  " + "  ".join(f"{r[s]:>20.3g}" for s in labels))
    print("(armature / the links' own inertia on the first hinge of each joint, rest pose, mj_fullM)")


if __name__ == "__main__":
    main()
