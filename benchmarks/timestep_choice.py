"""Which physics timestep (and hinge armature) to use: stability against cost.

Hinge armature is ``factor * kp * timestep^2`` (``HumanoidConfig.armature_factor``).
For each (timestep, factor) this measures, with open-loop PD (no policy):

- PD-held standing of the rest pose for 10 s: upright or not, pelvis drift;
- PD-held guard: the demo punch replayed, then its last frame held, 6 s in all;
- PD replay of every demo clip and every real clip in motions/deepmimic-smpl (start from the
  clip's frame-0 state, PD targets = the clip's hinge angles): seconds upright;
- MuJoCo warnings (instabilities) over all those runs;
- random actions: PD targets drawn uniformly over the joint ranges each control
  step (what a freshly initialised policy explores), resetting to the rest pose
  on a fall: simulator blow-ups per 1000 control steps;
- mean body-position error to the reference over the first 0.5 s of replay;
- wall time per 30 Hz control step (all physics substeps, one thread).

The choice printed at the end is the largest timestep at which standing and the
guard hold, no run raises a warning, random actions never blow the simulator up,
every demo clip stays up >= 1 s and the real clips stay up as long as at the best
setting (within 10 %: replay times move in 1/30 s steps and single runs are noisy); at that timestep, the smallest armature factor that does so. Run: ``python benchmarks/timestep_choice.py`` (~30 s).
"""

from __future__ import annotations

import argparse
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.humanoid.mjcf import DEFAULT_TIMESTEP, HumanoidConfig, load_model, physics_substeps
from rgsd_envs.motion.clip import MotionClip
from rgsd_envs.motion.demo import demo_clips
from rgsd_envs.motion.replay import UNSTABLE_WARNINGS, ReplayResult, capture_mujoco_warnings, pd_replay, pd_standing

REAL_MOTIONS = Path(__file__).resolve().parents[1] / "motions" / "deepmimic-smpl"
TIMESTEPS = {"1/60": 1 / 60, "1/120": 1 / 120, "1/240": 1 / 240}
FACTORS = (0.0, 0.5, 1.0, 2.0, 4.0)
RANDOM_STEPS = 1500
"""Control steps (50 s) of random actions per setting."""


@dataclass
class Row:
    """Measurements of one (timestep, armature factor) setting."""

    label: str
    timestep: float
    factor: float
    standing: ReplayResult
    guard: ReplayResult
    demo: dict[str, ReplayResult] = field(default_factory=dict)
    real: dict[str, ReplayResult] = field(default_factory=dict)
    random_blowups: int = 0
    random_falls: int = 0

    def runs(self) -> list[ReplayResult]:
        return [self.standing, self.guard, *self.demo.values(), *self.real.values()]

    @property
    def warnings(self) -> int:
        return sum(r.warnings for r in self.runs())

    @property
    def tracking_cm(self) -> float:
        errors = [r.tracking_error for r in [*self.demo.values(), *self.real.values()] if np.isfinite(r.tracking_error)]
        return 100 * float(np.mean(errors)) if errors else float("nan")

    @property
    def us_per_step(self) -> float:
        return float(np.mean([r.us_per_control_step for r in self.runs()]))

    def mean(self, which: str) -> float:
        runs = getattr(self, which)
        return float(np.mean([r.seconds for r in runs.values()])) if runs else float("nan")


def load_real_clips(folder: Path) -> list[MotionClip]:
    """The real AMASS-format clips beside the repository (empty if absent)."""
    from rgsd_envs.motion.amass import amass_to_clip, read_amass
    from rgsd_envs.motion.kinematics import KinematicModel

    km = KinematicModel()
    return [amass_to_clip(read_amass(f), kinematics=km) for f in sorted(folder.glob("*_poses.npz"))]


def random_actions(cfg: HumanoidConfig, steps: int, seed: int = 0) -> tuple[int, int]:
    """Blow-ups and falls under uniformly random PD targets, resetting to the rest pose after either."""
    model = load_model(cfg)
    data = mujoco.MjData(model)
    rng = np.random.default_rng(seed)
    lo, hi = model.actuator_ctrlrange.T
    substeps = physics_substeps(cfg.timestep)
    blowups = falls = 0
    with capture_mujoco_warnings():
        for _ in range(steps):
            data.ctrl[:] = rng.uniform(lo, hi)
            for _ in range(substeps):
                mujoco.mj_step(model, data)
            if any(data.warning[w].number for w in UNSTABLE_WARNINGS) or not np.isfinite(data.qpos).all():
                blowups += 1
            elif data.xpos[sk.MJ_BODY_IDS[sk.ROOT_ID], 2] > 0.4:
                continue
            else:
                falls += 1
            mujoco.mj_resetData(model, data)
    return blowups, falls


def measure(label: str, cfg: HumanoidConfig, demos: list[MotionClip], reals: list[MotionClip]) -> Row:
    """All runs of one setting."""
    punch = next(c for c in demos if c.category == "punch")
    row = Row(label, cfg.timestep, cfg.armature_factor, pd_standing(10.0, cfg), pd_replay(punch, cfg, max_seconds=6.0))
    row.demo = {c.name: pd_replay(c, cfg) for c in demos}
    row.real = {c.name: pd_replay(c, cfg) for c in reals}
    row.random_blowups, row.random_falls = random_actions(cfg, RANDOM_STEPS)
    return row


def choose(rows: list[Row]) -> Row | None:
    """Largest timestep (then smallest armature factor) that passes every stability criterion."""
    best_real = max((r.mean("real") for r in rows if r.real), default=float("nan"))

    def stable(r: Row) -> bool:
        return (
            r.standing.completed
            and r.guard.completed
            and r.warnings == 0
            and r.random_blowups == 0
            and all(d.seconds >= 1.0 for d in r.demo.values())
            and (not r.real or r.mean("real") >= 0.90 * best_real)
        )

    passing = [r for r in rows if stable(r)]
    return max(passing, key=lambda r: (r.timestep, -r.factor)) if passing else None


def print_tables(rows: list[Row]) -> None:
    print("\nPer setting (seconds upright; stand = rest pose 10 s, guard = punch then its guard, 6 s;")
    print("drift and tracking error (first 0.5 s of replays) in cm; warn = MuJoCo warnings; open-loop PD;")
    print(f"rnd blow / falls = blow-ups / falls per 1000 control steps of random actions ({RANDOM_STEPS} steps)):")
    head = f"{'dt':>6} {'factor':>6} | {'stand':>6} {'drift':>6} {'guard':>6} | {'demo min':>8} {'demo mean':>9} | {'real mean':>9} {'real min':>8} | {'warn':>4} {'track':>6} | {'rnd blow':>8} {'falls':>5} | {'us/ctrl':>8}"
    print(head)
    print("-" * len(head))
    for r in rows:
        real_min = min((x.seconds for x in r.real.values()), default=float("nan"))
        demo_min = min(x.seconds for x in r.demo.values())
        print(
            f"{r.label:>6} {r.factor:>6.2f} | {r.standing.seconds:>6.2f} {100 * r.standing.root_drift:>6.1f} "
            f"{r.guard.seconds:>6.2f} | "
            f"{demo_min:>8.2f} {r.mean('demo'):>9.2f} | {r.mean('real'):>9.2f} {real_min:>8.2f} | "
            f"{r.warnings:>4d} {r.tracking_cm:>6.1f} | {1000 * r.random_blowups / RANDOM_STEPS:>8.1f} "
            f"{1000 * r.random_falls / RANDOM_STEPS:>5.0f} | {r.us_per_step:>8.0f}"
        )
    names = list(rows[0].demo) + list(rows[0].real)
    print("\nPD replay seconds per clip (the whole clip at most; durations listed above):")
    print(f"{'clip':<24}" + "".join(f"{r.label + '/' + format(r.factor, '.1f'):>11}" for r in rows))
    for name in names:
        runs = [r.demo.get(name) or r.real.get(name) for r in rows]
        print(f"{name:<24}" + "".join(f"{x.seconds:>11.2f}" for x in runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--motions", type=Path, default=REAL_MOTIONS, help="folder of real AMASS *_poses.npz clips")
    parser.add_argument("--factors", type=float, nargs="+", default=list(FACTORS))
    args = parser.parse_args()
    logging.getLogger("rgsd_envs").setLevel(logging.ERROR)
    start = time.perf_counter()
    demos = demo_clips()
    reals = load_real_clips(args.motions) if args.motions.is_dir() else []
    print(f"{len(demos)} demo clips, {len(reals)} real clips ({args.motions})")
    for c in [*demos, *reals]:
        print(f"  {c.name:<24} {c.duration:.2f} s")
    rows = [
        measure(label, HumanoidConfig(timestep=dt, armature_factor=a), demos, reals)
        for label, dt in TIMESTEPS.items()
        for a in args.factors
    ]
    print_tables(rows)
    chosen = choose(rows)
    print(f"\ncurrent default: timestep {DEFAULT_TIMESTEP:.6g} s, armature factor {HumanoidConfig().armature_factor}")
    if chosen is None:
        print("no setting passes every criterion")
    else:
        print(
            f"choice: timestep {chosen.label} s, armature factor {chosen.factor:.1f} "
            f"(standing {chosen.standing.seconds:.1f} s, demo min {min(d.seconds for d in chosen.demo.values()):.2f} s, "
            f"real mean {chosen.mean('real'):.2f} s, {chosen.us_per_step:.0f} us per control step)"
        )
    print(f"[{time.perf_counter() - start:.0f} s]")


if __name__ == "__main__":
    main()
