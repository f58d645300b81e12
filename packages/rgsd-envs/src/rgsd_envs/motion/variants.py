"""Demo variants: any number of distinct, named, categorised clips made by code (``rgsd-motions demo --variants N``).

Each variant is one of the demo kinds (walk, run, sidestep, backward, punch)
built by the demo generator (``rgsd_envs.motion.demo``) from that kind's
parameters perturbed within plausible ranges, so it keeps what makes the demo
clips sensible: whole gait cycles of 30 Hz frames, planted feet that do not
slide, a centre of mass balanced over them.

- Clip ``i`` of a set is of kind ``DEMO_KINDS[i % 5]``, the ``j = i // 5``-th of its
  kind, named ``<kind>_v<j>`` (two digits, more past 100 per kind) with category
  ``<kind>``. A clip depends only on its kind, ``j`` and the seed, so a larger set
  starts with a smaller one's clips.
- Gaits vary in speed (and with it the cadence), stride timing (duty), step
  height, stance width, lean, pelvis bob, chest twist, starting phase, sidestep
  direction and arm style: ``swing`` (wide counter-swing), ``flexed`` (elbows bent,
  pumping) or ``out`` (arms held away from the body, little swing).
- Punches vary in target height (``high``, ``middle``, ``body``), the timing of the
  jab and the cross, the stance, the guard, twist and lean.
- Distinct by construction: variant ``j`` takes arm style (punch: target height)
  ``j % 3``, and within a style its speed (punch: when the jab starts) is the
  ``j // 3``-th point of a van der Corput sequence, shifted by the seed, over the
  kind's range (sidesteps: left and right in turn, each direction its own
  sequence): no two of ``n`` such variants are closer than 1/(2n) of that range.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np

from rgsd_envs.motion.clip import CLIP_FPS, MotionClip
from rgsd_envs.motion.demo import DEMO_KINDS, GAITS, PUNCH, Gait, _gait_clip, _punch_clip
from rgsd_envs.motion.kinematics import KinematicModel

_DEG = np.pi / 180.0
ARM_STYLES: tuple[str, ...] = ("swing", "flexed", "out")
"""Gait variants' arm styles, in turn."""
PUNCH_HEIGHTS: dict[str, tuple[float, float]] = {"high": (0.16, 0.26), "middle": (-0.04, 0.06), "body": (-0.34, -0.22)}
"""Punch variants' targets, in turn: the range of the upward component of the punching upper arm's direction."""
SPEEDS: dict[str, tuple[float, float]] = {
    "walk": (0.8, 1.45),
    "run": (1.5, 2.2),
    "sidestep": (0.22, 0.5),
    "backward": (0.5, 0.95),
}
"""Pelvis speed (m/s) of each gait's variants along its direction of travel (sidesteps go left or right)."""
PERIOD_FRAMES: dict[str, tuple[int, int]] = {
    "walk": (34, 27),
    "run": (23, 19),
    "sidestep": (33, 26),
    "backward": (34, 27),
}
"""Frames per gait cycle at the slowest and at the fastest speed (a faster gait steps faster), +-2 frames."""
JAB_START: tuple[float, float] = (0.3, 1.0)
"""When the punch variants' jab starts, s."""
_LOWER_STEPS = 5
"""Tries with the pelvis 2 cm lower each when a long stride is out of the legs' reach."""
SLIDING_LIMITS: tuple[float, float] = (0.03, 0.12)
"""Mean and 95th percentile (m/s) of the planted feet's speed a gait variant stays under, as the demo clips do
(``rgsd_envs.motion.replay.kinematic_report``). Whether a foot counts as planted is read on the 30 Hz frames, so
it depends on where the frames fall in the cycle: a variant that exceeds them starts its cycle on another frame,
or changes its duty by ``DUTY_STEPS``."""
DUTY_STEPS: tuple[float, ...] = (0.0, 0.01, -0.01, 0.02, -0.02)
"""Changes of a gait variant's duty tried in turn while its feet slide more than ``SLIDING_LIMITS``."""


def _van_der_corput(i: int, base: int = 2) -> float:
    """The i-th point (i >= 0) of the van der Corput sequence in [0, 1): 0, 1/2, 1/4, 3/4, 1/8, ..."""
    out, scale = 0.0, 1.0 / base
    while i:
        i, digit = divmod(i, base)
        out += digit * scale
        scale /= base
    return out


def _level(kind: str, group: int, seed: int) -> float:
    """Where in its kind's range the ``group``-th variant of a style lies, in [0, 1): the ``group``-th point of the
    van der Corput sequence, shifted by the seed."""
    shift = np.random.default_rng([seed, DEMO_KINDS.index(kind), 7]).random()
    return (_van_der_corput(group) + shift) % 1.0


def variant_name(kind: str, index: int, per_kind: int = 100) -> str:
    """``<kind>_v<index>``: two digits, more when a kind has more than 100 variants."""
    return f"{kind}_v{index:0{max(2, len(str(per_kind - 1)))}d}"


def _gait_variant(kind: str, index: int, seed: int, rng: np.random.Generator) -> tuple[dict, str]:
    """The Gait fields that change for this variant, and its arm style."""
    base = GAITS[kind]
    group = index // len(ARM_STYLES)
    # sidesteps go left and right in turn, each direction spread over the speeds
    level = _level(kind, group // 2 if kind == "sidestep" else group, seed)
    lo, hi = SPEEDS[kind]
    speed = lo + level * (hi - lo)
    slow, fast = PERIOD_FRAMES[kind]
    frames = round(slow + level * (fast - slow)) + int(rng.integers(-2, 3))
    if kind == "sidestep":
        velocity = (0.0, speed * (1.0 if group % 2 == 0 else -1.0))
    else:
        velocity = (speed * (-1.0 if kind == "backward" else 1.0), 0.0)
    style = ARM_STYLES[index % len(ARM_STYLES)]
    arm_swing, elbow_flex, arm_out = base.arm_swing, base.elbow_flex, base.arm_out
    if style == "swing":
        arm_swing *= rng.uniform(1.3, 1.8)
        elbow_flex = max(5 * _DEG, elbow_flex + rng.uniform(-5, 5) * _DEG)
        arm_out += rng.uniform(-3, 3) * _DEG
    elif style == "flexed":
        arm_swing *= rng.uniform(0.8, 1.2)
        elbow_flex = min(elbow_flex + rng.uniform(35, 55) * _DEG, rng.uniform(100, 110) * _DEG)
        arm_out += rng.uniform(-3, 3) * _DEG
    else:
        arm_swing *= rng.uniform(0.3, 0.6)
        elbow_flex += rng.uniform(-5, 10) * _DEG
        arm_out += rng.uniform(12, 22) * _DEG
    width = base.width + (rng.uniform(-0.04, 0.06) if kind == "sidestep" else rng.uniform(-0.03, 0.03))
    changes = dict(
        velocity=velocity,
        period=frames / CLIP_FPS,
        start=0.0,  # chosen by _first_frame
        duty=base.duty + rng.uniform(-0.03, 0.03),
        step_height=base.step_height * rng.uniform(0.8, 1.4),
        width=width,
        pelvis_height=base.pelvis_height - rng.uniform(0.0, 0.02),
        bob=base.bob * rng.uniform(0.7, 1.3),
        pitch=base.pitch + rng.uniform(-1.5, 1.5) * _DEG,
        chest_lean=base.chest_lean + rng.uniform(-1, 5) * _DEG,
        chest_twist=base.chest_twist * rng.uniform(0.5, 1.5),
        arm_swing=arm_swing,
        arm_out=arm_out,
        elbow_flex=elbow_flex,
    )
    return changes, style


def _punch_variant(index: int, seed: int, rng: np.random.Generator) -> tuple[dict, str]:
    """The Punch fields of this variant, and its target height."""
    height = list(PUNCH_HEIGHTS)[index % len(PUNCH_HEIGHTS)]
    lo, hi = JAB_START
    jab_start = lo + _level("punch", index // len(PUNCH_HEIGHTS), seed) * (hi - lo)
    jab_out = jab_start + rng.uniform(0.18, 0.32)
    jab_back = jab_out + rng.uniform(0.03, 0.1)
    jab = (jab_start, jab_out, jab_back, jab_back + rng.uniform(0.22, 0.35))
    cross_start = jab[3] + rng.uniform(0.2, 0.5)
    cross_out = cross_start + rng.uniform(0.22, 0.36)
    cross_back = cross_out + rng.uniform(0.03, 0.1)
    cross = (cross_start, cross_out, cross_back, cross_back + rng.uniform(0.3, 0.45))
    duration = np.ceil((cross[3] + rng.uniform(0.45, 0.8)) * CLIP_FPS) / CLIP_FPS
    z_lo, z_hi = PUNCH_HEIGHTS[height]
    jab_dir = (1.0, -0.14 + rng.uniform(-0.04, 0.04), rng.uniform(z_lo, z_hi))
    cross_dir = (1.0, 0.08 + rng.uniform(-0.04, 0.04), rng.uniform(z_lo, z_hi))
    arms = {
        **PUNCH.arms,
        "jab_dir": jab_dir,
        "cross_dir": cross_dir,
        "guard_flex": rng.uniform(110, 130) * _DEG,
        "hit_flex": rng.uniform(4, 14) * _DEG,
    }
    stance = {
        **PUNCH.stance,
        "lead_foot": (rng.uniform(0.08, 0.13), rng.uniform(0.1, 0.15)),
        "rear_foot": (-rng.uniform(0.08, 0.13), -rng.uniform(0.1, 0.15)),
        "com_ahead": PUNCH.stance["com_ahead"] + rng.uniform(-0.008, 0.008),
    }
    deeper = 0.03 if height == "body" else 0.0  # punching low, the body sinks lower
    sink = tuple(s + deeper + rng.uniform(-0.015, 0.015) for s in PUNCH.sink)
    guard_lean = rng.uniform(1, 4) * _DEG
    changes = dict(
        arms=arms,
        stance=stance,
        duration=float(duration),
        jab=jab,
        cross=cross,
        sink=sink,
        pitch=rng.uniform(2, 4) * _DEG,
        twist=(-rng.uniform(6, 14) * _DEG, rng.uniform(16, 30) * _DEG),
        lean=(guard_lean, guard_lean + rng.uniform(0, 2) * _DEG, guard_lean + rng.uniform(2, 6) * _DEG + deeper),
    )
    return changes, height


def make_variant(
    kind: str, index: int, seed: int = 0, kinematics: KinematicModel | None = None, name: str | None = None
) -> MotionClip:
    """Variant ``index`` (>= 0) of a demo kind under ``seed``: deterministic, 30 Hz, grounded (default name
    ``variant_name(kind, index)``)."""
    if kind not in DEMO_KINDS:
        raise ValueError(f"unknown demo motion {kind!r}; choose one of {', '.join(DEMO_KINDS)}")
    if index < 0:
        raise ValueError(f"variant index must be >= 0, got {index}")
    km = kinematics or KinematicModel()
    name = name or variant_name(kind, index)
    rng = np.random.default_rng([seed, DEMO_KINDS.index(kind), index])
    if kind == "punch":
        changes, height = _punch_variant(index, seed, rng)
        source = f"demo:punch variant {index} ({height} punches) seed {seed}"
        return _punch_clip(km, dataclasses.replace(PUNCH, **changes), name, source)
    changes, style = _gait_variant(kind, index, seed, rng)
    gait = dataclasses.replace(GAITS[kind], **changes)
    source = f"demo:{kind} variant {index} ({style} arms) seed {seed}"
    for _ in range(_LOWER_STEPS):  # a long stride may be out of reach: lower the pelvis a little
        try:
            return _first_frame(kind, gait, km, name, source, rng)
        except ValueError as err:
            if "out of reach" not in str(err):
                raise
            gait = dataclasses.replace(gait, pelvis_height=gait.pelvis_height - 0.02)
    return _first_frame(kind, gait, km, name, source, rng)


def _first_frame(
    kind: str, gait: Gait, km: KinematicModel, name: str, source: str, rng: np.random.Generator
) -> MotionClip:
    """The gait clip starting on a whole frame of its cycle (tried in random order, then with the duty changed by
    ``DUTY_STEPS``) whose feet stay within ``SLIDING_LIMITS``, else the one that slides least."""
    from rgsd_envs.motion.replay import kinematic_report

    frames = round(gait.period * CLIP_FPS)
    starts = rng.permutation(frames)
    best, best_excess = None, np.inf
    for step in DUTY_STEPS:
        for start in starts:
            tried = dataclasses.replace(gait, start=int(start) / frames, duty=gait.duty + step)
            clip = _gait_clip(kind, tried, km, name, source)
            report = kinematic_report(clip, km)
            q95 = float(np.quantile(report.stance_foot_speed, 0.95))
            excess = max(report.skating / SLIDING_LIMITS[0], q95 / SLIDING_LIMITS[1])
            if excess < 1.0:
                return clip
            if excess < best_excess:
                best, best_excess = clip, excess
    assert best is not None
    return best


def demo_variants(count: int, seed: int = 0) -> list[MotionClip]:
    """``count`` distinct clips: kinds in turn (``DEMO_KINDS``), each the next variant of its kind."""
    if count < 1:
        raise ValueError(f"the number of variants must be >= 1, got {count}")
    km = KinematicModel()
    per_kind = -(-count // len(DEMO_KINDS))
    out = []
    for i in range(count):
        kind, index = DEMO_KINDS[i % len(DEMO_KINDS)], i // len(DEMO_KINDS)
        out.append(make_variant(kind, index, seed, km, variant_name(kind, index, per_kind)))
    return out


def write_demo_variants(out_dir: str | os.PathLike, count: int, seed: int = 0) -> list[Path]:
    """Save ``demo_variants(count, seed)`` as ``<out_dir>/<name>.npz`` (atomic writes); returns the paths."""
    out = Path(out_dir)
    return [clip.save(out / f"{clip.name}.npz") for clip in demo_variants(count, seed)]
