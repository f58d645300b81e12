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
Run: ``python benchmarks/sim_step.py`` (~15 s).
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


def run(
    model: mujoco.MjModel, hold: int, fallen, steps: int, rng: np.random.Generator
) -> tuple[float, float, int, int]:
    """Time ``steps`` mj_step calls; returns (seconds, mean contacts, resets, simulator blow-ups)."""
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
            if data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number:
                blowups += 1
                mujoco.mj_resetData(model, data)
            elif fallen(data):
                mujoco.mj_resetData(model, data)
                resets += 1
        elapsed = time.perf_counter() - start
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


if __name__ == "__main__":
    main()
