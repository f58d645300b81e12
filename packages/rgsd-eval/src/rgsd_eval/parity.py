"""Backend parity: one trained policy's per-clip Cartesian error under native MuJoCo and under MuJoCo Warp.

Warp runs float32 and native MuJoCo float64, so once contacts begin their trajectories part (a contact onset
moves by a physics step and the difference grows), and a step-by-step comparison of states stops holding.
What must hold is the evaluation figure: the same policy, deterministic (mean) actions, z = z_m, every clip
started at its first frame, no early termination, scores about the same error on either backend. A clip where
the policy falls on one backend is chaotic (where and how it lands is not reproducible in float32), so it is
compared only on whether it falls in both.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rgsd_envs.envs.torch_env import RGSDTorchEnv
from rgsd_envs.motion.library import MotionLib
from rgsd_eval.rollouts import RolloutJobs, run_rollouts
from rgsd_eval.runs import load_run

BACKENDS = ("mujoco", "warp")
"""The reference backend first."""
TOLERANCE_CM = 1.0
"""Absolute part of the per-clip tolerance (cm)."""
TOLERANCE_REL = 0.05
"""Relative part of the per-clip tolerance (of the native error)."""
HORIZONS = (10, 20, 30, 45, 60, 90, 120, 150)
"""Frame counts at which the gaps are also reported (those within the rollouts' length)."""


def clip_tolerance_cm(native_error_cm: float) -> float:
    """How far warp's error on a clip may be from native MuJoCo's: the larger of the absolute and relative parts."""
    return max(TOLERANCE_CM, TOLERANCE_REL * native_error_cm)


@dataclass
class ClipParity:
    """One clip's errors on both backends and whether they agree."""

    clip: str
    frames: int
    """Frames compared, the start frame included."""
    error_cm: dict[str, float]
    fell: dict[str, bool]
    gap_cm: float
    """|warp - mujoco| of the mean error over ``frames``."""
    tolerance_cm: float
    compared: str
    """"error" (neither fell: the gap is held to the tolerance) or "fall" (one fell: both must)."""
    ok: bool


@dataclass
class ParityReport:
    """Per-clip parity of one run on the two backends, and the gaps at shorter horizons."""

    run: str
    device: str
    """The warp device ("cpu" or "cuda")."""
    max_frames: int | None
    clips: list[ClipParity]
    horizons: dict[int, dict[str, float]] = field(default_factory=dict)
    """Frames h -> mean and max gap (cm), over the clips that did not fall, of the error over the first h frames
    (a clip's whole length when it is shorter)."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Wall time of each backend's rollouts."""

    @property
    def ok(self) -> bool:
        """Every clip agrees."""
        return all(c.ok for c in self.clips)

    def gaps(self) -> dict[str, float]:
        """Mean and max gap (cm) over the clips compared on their error."""
        g = [c.gap_cm for c in self.clips if c.compared == "error"]
        return {"mean_gap_cm": float(np.mean(g)) if g else 0.0, "max_gap_cm": float(np.max(g)) if g else 0.0}

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of the whole report."""
        return {
            "run": self.run,
            "device": self.device,
            "max_frames": self.max_frames,
            "tolerance": {"abs_cm": TOLERANCE_CM, "rel": TOLERANCE_REL},
            "ok": self.ok,
            **self.gaps(),
            "clips": [dataclasses.asdict(c) for c in self.clips],
            "horizons": {str(k): v for k, v in self.horizons.items()},
            "seconds": self.seconds,
        }

    def markdown(self) -> str:
        """The per-clip table, then the gap by horizon, as markdown."""
        rows = [
            "| clip | frames | mujoco, cm | warp, cm | gap, cm | tolerance, cm | compared | ok |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for c in self.clips:
            e = {b: f"{c.error_cm[b]:.2f}" + (" (fell)" if c.fell[b] else "") for b in BACKENDS}
            rows.append(
                f"| {c.clip} | {c.frames} | {e['mujoco']} | {e['warp']} | {c.gap_cm:.3f} | {c.tolerance_cm:.2f} "
                f"| {c.compared} | {'yes' if c.ok else '**no**'} |"
            )
        g = self.gaps()
        rows += ["", f"mean gap {g['mean_gap_cm']:.3f} cm, max {g['max_gap_cm']:.3f} cm (clips that did not fall)", ""]
        rows += ["| frames | mean gap, cm | max gap, cm |", "|---|---|---|"]
        rows += [f"| {h} | {v['mean_gap_cm']:.3f} | {v['max_gap_cm']:.3f} |" for h, v in self.horizons.items()]
        return "\n".join(rows)


def backend_parity(
    run: str | os.PathLike,
    device: str = "cpu",
    clips: list[str] | None = None,
    max_frames: int | None = None,
    motions: str | None = None,
) -> ParityReport:
    """Roll out ``run``'s policy (z = z_m of its encoder) on each of ``clips`` (default: all of the run's clips) on native MuJoCo and on
    MuJoCo Warp on ``device``, from each clip's first frame for ``max_frames`` frames (default: to the clip's end),
    and compare the per-clip errors (see the module docstring)."""
    loaded = load_run(run, latent="encoder")
    source = motions or loaded.run.training_motions()
    lib = MotionLib(source)
    names = list(lib.names) if clips is None else clips
    unknown = [c for c in names if c not in lib.names]
    if unknown:
        raise ValueError(f"no clips named {unknown} in {source!s}; choose from: {', '.join(lib.names)}")
    idx = [list(lib.names).index(c) for c in names]
    encoder = None if loaded.encoder_path is None else str(loaded.encoder_path)
    results, seconds, skills = {}, {}, None
    for backend in BACKENDS:
        dev = device if backend == "warp" else "cpu"
        cfg = dataclasses.replace(loaded.env_config, backend=backend, device=dev)
        policy = copy.deepcopy(loaded.policy).to(dev)
        env = RGSDTorchEnv(len(idx), encoder_reward=False, config=cfg, motions=lib, encoder=encoder)
        try:
            if skills is None:  # both backends run the same z = z_m, the native env's
                skills = env.core.clip_embeddings[idx].cpu().double().numpy()
            jobs = RolloutJobs(clip=idx, skill=skills, group=0, keep_qpos=False)
            start = time.perf_counter()
            results[backend] = run_rollouts(
                env, policy, jobs, fall_height=loaded.fall_height, features=False, max_frames=max_frames
            )
            seconds[backend] = round(time.perf_counter() - start, 1)
        finally:
            env.close()
    ref, war = results["mujoco"], results["warp"]
    out = []
    for j, name in enumerate(names):
        err = {b: 100.0 * float(results[b].error[j]) for b in BACKENDS}
        fell = {b: bool(results[b].fell[j]) for b in BACKENDS}
        gap = abs(err["warp"] - err["mujoco"])
        tol = clip_tolerance_cm(err["mujoco"])
        compared = "fall" if any(fell.values()) else "error"
        ok = all(fell.values()) if compared == "fall" else gap <= tol
        frames = int(min(ref.length[j], war.length[j]))
        out.append(ClipParity(name, frames, err, fell, gap, tol, compared, ok))
    standing = [j for j, c in enumerate(out) if c.compared == "error"]
    horizons = {}
    for h in HORIZONS:
        if not standing or h > int(ref.length[standing].max()):
            continue
        gaps = [
            100.0 * abs(np.nanmean(war.frame_error[j][1:h]) - np.nanmean(ref.frame_error[j][1:h])) for j in standing
        ]
        horizons[h] = {"mean_gap_cm": float(np.mean(gaps)), "max_gap_cm": float(np.max(gaps))}
    return ParityReport(str(run), device, max_frames, out, horizons, seconds)
