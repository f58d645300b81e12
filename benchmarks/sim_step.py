"""Raw single-thread ``mj_step`` throughput: our SMPL humanoid against Gymnasium's Humanoid-v5 model.

Both models run under the same conditions in one process: start from the model's
standing ``qpos0``, hold a random control (uniform over each actuator's control
range) for one control step (our 30 Hz step = ``physics_substeps`` physics steps;
Humanoid-v5's ``frame_skip`` = 5), reset when fallen (our pelvis below 0.4 m;
Humanoid-v5's torso outside its healthy z range 1-2 m; contacts, falls and simulator
blow-ups of the last repetition are listed). Each repetition times
the same number of ``mj_step`` calls per model, interleaved; the median over
repetitions is reported with the ratio. Gymnasium's model is read from the
installed package's ``humanoid.xml``. These are figures, not a test.

Then, for our model only: where an ``mj_step`` goes (MuJoCo's stage timers, summed
over the run) and what other solver settings would cost on the same random
controls: Newton (ours), CG and PGS at our iteration limits, and with contacts
disabled (a bound for any solver setting: the physics without contacts).
Run: ``python benchmarks/sim_step.py`` (~30 s).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import gymnasium
import mujoco
import numpy as np

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.humanoid.mjcf import HumanoidConfig, load_model, physics_substeps
from rgsd_envs.motion.replay import capture_mujoco_warnings

GYM_HUMANOID_XML = Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets" / "humanoid.xml"
GYM_FRAME_SKIP = 5
"""Humanoid-v5 steps MuJoCo 5 times per action."""


def ours_fallen(data: mujoco.MjData) -> bool:
    return data.xpos[sk.MJ_BODY_IDS[sk.ROOT_ID], 2] < 0.4


def gym_fallen(data: mujoco.MjData) -> bool:
    return not 1.0 < data.qpos[2] < 2.0


STAGES = {
    "position (kinematics, inertia, collision, constraints made)": mujoco.mjtTimer.mjTIMER_POSITION,
    "velocity": mujoco.mjtTimer.mjTIMER_VELOCITY,
    "actuation": mujoco.mjtTimer.mjTIMER_ACTUATION,
    "constraint solver": mujoco.mjtTimer.mjTIMER_CONSTRAINT,
    "integration (implicitfast)": mujoco.mjtTimer.mjTIMER_ADVANCE,
}


def _timers(data: mujoco.MjData) -> np.ndarray:
    """Seconds per stage of ``STAGES`` since the data's last reset."""
    return np.array([data.timer[int(t)].duration for t in STAGES.values()])


def run(
    model: mujoco.MjModel, hold: int, fallen, steps: int, rng: np.random.Generator, stages: np.ndarray | None = None
) -> tuple[float, float, int, int]:
    """Time ``steps`` mj_step calls; returns (seconds, mean contacts, resets, simulator blow-ups). With
    ``stages``, MuJoCo's stage timers are added into it (the timers restart at each reset)."""
    data = mujoco.MjData(model)
    lo, hi = model.actuator_ctrlrange[:, 0], model.actuator_ctrlrange[:, 1]
    controls = rng.uniform(lo, hi, size=(steps // hold + 1, model.nu))
    contacts, resets, blowups = 0, 0, 0
    with capture_mujoco_warnings():
        start = time.perf_counter()
        for k in range(steps // hold):
            data.ctrl[:] = controls[k]
            for _ in range(hold):
                mujoco.mj_step(model, data)
            contacts += data.ncon
            blew_up = data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number > 0
            if blew_up or fallen(data):
                if stages is not None:
                    stages += _timers(data)
                mujoco.mj_resetData(model, data)
                blowups += int(blew_up)
                resets += int(not blew_up)
        elapsed = time.perf_counter() - start
    if stages is not None:
        stages += _timers(data)
    return elapsed, contacts / max(steps // hold, 1), resets, blowups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000, help="mj_step calls per model per repetition")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    cfg = HumanoidConfig()
    ours = load_model(cfg)
    gym = mujoco.MjModel.from_xml_path(str(GYM_HUMANOID_XML))
    substeps = physics_substeps(cfg.timestep)
    steps = args.steps - args.steps % (substeps * GYM_FRAME_SKIP)
    rng = np.random.default_rng(args.seed)
    times: dict[str, list[float]] = {"ours": [], "gym": []}
    info: dict[str, tuple[float, int, int]] = {}
    for _ in range(args.repeats):
        for name, model, hold, fallen in (
            ("ours", ours, substeps, ours_fallen),
            ("gym", gym, GYM_FRAME_SKIP, gym_fallen),
        ):
            elapsed, contacts, resets, blowups = run(model, hold, fallen, steps, rng)
            times[name].append(elapsed)
            info[name] = (contacts, resets, blowups)
    rate = {name: steps / float(np.median(t)) for name, t in times.items()}
    print(
        f"mujoco {mujoco.__version__}, {steps} mj_step calls per model x {args.repeats} repetitions, median, 1 thread"
    )
    print(
        f"{'model':<38} {'nv':>4} {'nu':>4} {'dt (s)':>8} {'integrator':>12} {'contacts':>9} {'falls':>6} {'blowups':>7} {'steps/s':>9} {'us/step':>8}"
    )
    for name, model, label in (
        ("ours", ours, "rgsd SMPL humanoid"),
        ("gym", gym, "Gymnasium Humanoid-v5 (humanoid.xml)"),
    ):
        integrator = mujoco.mjtIntegrator(model.opt.integrator).name.removeprefix("mjINT_")
        print(
            f"{label:<38} {model.nv:>4} {model.nu:>4} {model.opt.timestep:>8.5f} {integrator:>12} "
            f"{info[name][0]:>9.1f} {info[name][1]:>6d} {info[name][2]:>7d} {rate[name]:>9.0f} {1e6 / rate[name]:>8.1f}"
        )
    print(f"ratio ours / Humanoid-v5 (steps/s): {rate['ours'] / rate['gym']:.2f}")
    print(
        f"simulated seconds per wall second: ours {rate['ours'] * ours.opt.timestep:.2f}, "
        f"Humanoid-v5 {rate['gym'] * gym.opt.timestep:.2f}"
    )
    per_control = substeps * 1e6 / rate["ours"]
    print(
        f"ours per 30 Hz control step at dt = 1/{round(1 / cfg.timestep)} s ({substeps} substeps): {per_control:.0f} us "
        f"= {1e6 / per_control:.0f} control steps/s per thread"
    )
    solver_variants(cfg, substeps, steps, args.repeats, args.seed)


def _variant(cfg: HumanoidConfig, solver: str | None = None, contacts: bool = True) -> mujoco.MjModel:
    model = load_model(cfg)
    if solver is not None:
        model.opt.solver = getattr(mujoco.mjtSolver, f"mjSOL_{solver}")
    if not contacts:
        model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    return model


def solver_variants(cfg: HumanoidConfig, substeps: int, steps: int, repeats: int, seed: int) -> None:
    """Our model's stage timers, then the same random controls under other solver settings (median us/step)."""
    variants = {
        "Newton (ours)": _variant(cfg),
        "CG": _variant(cfg, "CG"),
        "PGS": _variant(cfg, "PGS"),
        "contacts off (bound)": _variant(cfg, contacts=False),
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    stages = np.zeros(len(STAGES))
    for _ in range(repeats):
        for name, model in variants.items():
            rng = np.random.default_rng(seed)  # the same controls for every variant
            elapsed = run(model, substeps, ours_fallen, steps, rng, stages if name == "Newton (ours)" else None)[0]
            times[name].append(elapsed)
    print("\nwhere an mj_step of ours goes (MuJoCo's stage timers, all repetitions):")
    for label, share in zip(STAGES, stages / stages.sum()):
        print(f"  {label:<60} {100 * share:5.1f} %")
    base = float(np.median(times["Newton (ours)"]))
    print(f"\nsolver settings, same random controls ({steps} mj_step calls, median of {repeats}):")
    for name, t in times.items():
        us = 1e6 * float(np.median(t)) / steps
        print(f"  {name:<22} {us:7.1f} us/step   x{base / float(np.median(t)):.2f}")


if __name__ == "__main__":
    main()
