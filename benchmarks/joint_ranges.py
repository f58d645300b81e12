"""Measured range of every hinge over real mocap, beside the joint table's ranges.

Each AMASS file is read as ``rgsd-motions import`` reads it (our axes, resampled to 30 Hz),
and every joint rotation is decomposed into the body's three hinge angles with no range
limits (``joint_fit.fit_hinge_angles`` with unbounded ranges: the exact Euler solution
nearest the previous frame, so tracks are continuous). Printed per hinge: the smallest
and largest angle over all clips (degrees), the clip reaching each, the table's range
(``skeleton.DOF_RANGES``) and how far the data goes past it (0: inside).

Run: ``python benchmarks/joint_ranges.py [AMASS files or folders]`` (default: the MIT
clips in motions/deepmimic-smpl). ``--outside`` prints only the hinges the
data takes past the table. Figures are printed, never asserted; the rgsd-envs README's
joint-range table quotes them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.amass import amass_rotations, clip_name_from_path, find_amass_files, read_amass
from rgsd_envs.motion.joint_fit import fit_hinge_angles
from rgsd_envs.motion.kinematics import resample

DEFAULT_CLIPS = Path(__file__).resolve().parents[1] / "motions" / "deepmimic-smpl"
UNBOUNDED = np.tile([-4 * np.pi, 4 * np.pi], (sk.NUM_DOFS, 1))
"""Ranges wider than any hinge track: the fit is the continuous exact decomposition."""


def measured_angles(path: Path) -> np.ndarray:
    """Hinge angles (T, 69), degrees, qpos order, of one AMASS file at 30 Hz with no range limits."""
    motion = read_amass(path)
    root_pos, root_rot, local = amass_rotations(motion)
    _, _, local = resample(root_pos, root_rot, local, motion.fps)
    dof, _ = fit_hinge_angles(local, UNBOUNDED)
    return np.rad2deg(dof)


def main() -> None:
    """Print the measured per-hinge ranges beside the table's."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("inputs", nargs="*", default=[str(DEFAULT_CLIPS)], help="AMASS files or folders")
    p.add_argument("--outside", action="store_true", help="only hinges the data takes past the table's range")
    args = p.parse_args()
    files = [f for f in find_amass_files(args.inputs) if f.name.endswith(("_poses.npz", "_stageii.npz"))]
    names = [clip_name_from_path(f) for f in files]
    per_clip = [measured_angles(f) for f in files]
    lo_clip = np.stack([a.min(0) for a in per_clip])  # (clips, 69)
    hi_clip = np.stack([a.max(0) for a in per_clip])
    table = np.rad2deg(sk.DOF_RANGES)
    print(f"{len(files)} clips, {sum(len(a) for a in per_clip)} frames at 30 Hz: {', '.join(names)}")
    print(f"{'hinge':14s} {'data min':>9s} {'data max':>9s}  {'table':>15s}  {'past':>6s}  clips at min / max")
    for i, name in enumerate(sk.DOF_NAMES):
        lo, hi = lo_clip[:, i].min(), hi_clip[:, i].max()
        past = max(table[i, 0] - lo, hi - table[i, 1], 0.0)
        if args.outside and past <= 0.0:
            continue
        at = f"{names[int(lo_clip[:, i].argmin())]} / {names[int(hi_clip[:, i].argmax())]}"
        rng = f"{table[i, 0]:.0f}..{table[i, 1]:.0f}"
        print(f"{name:14s} {lo:9.1f} {hi:9.1f}  {rng:>15s}  {past:6.1f}  {at}")


if __name__ == "__main__":
    main()
