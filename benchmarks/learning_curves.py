"""Learning curves of named training arms (issue 11): Cartesian error per clip against samples and wall time.

Each arm is a preset plus ``--set`` overrides and a wall-clock budget; it is a
run folder ``<out>/<arm>`` trained with ``rgsd train --config ... --out ...``
and, when the folder already holds a checkpoint, continued with
``rgsd train --resume <out>/<arm> --set max_minutes=<budget>`` (the loop's
clock counts over sessions, so an interrupted arm loses at most
``checkpoint_every`` iterations and resumes where it stopped). Arms run one
after the other, each in its own process. An arm that used its budget is
marked with ``<out>/<arm>/learning_curve_arm.json`` and skipped next time.

The curves are read from each run's TensorBoard scalars: the imitation probe
(``rgsd_agents.probe``: the deterministic policy from fixed starts of each clip
to its end, no early termination; ``probe_clips/<clip>_cm`` every
``probe_every`` iterations and before the first) against ``global_step``
(samples), and against training minutes (the sum of ``perf/iteration_seconds``:
rollouts and updates, probes excluded). Outputs in ``<out>``:

- ``learning_curves.png``: one panel per clip category (mean over its clips;
  each demo clip is its own category), one line per arm; top row against
  samples, bottom row against training minutes;
- ``learning_curves.json``: every arm's run folder, settings, status and its
  curves (samples, minutes, overall and per-clip and per-category errors in cm).

Examples::

    python benchmarks/learning_curves.py                        # the built-in arms, 150 min each
    python benchmarks/learning_curves.py --arms encoder tracking --minutes 60
    python benchmarks/learning_curves.py --arm-set methods --out runs/methods   # rgsd diayn ase calm metra, 60 min
    python benchmarks/learning_curves.py --arms demo kl_adaptive --out runs/lc20 --set torch_threads=1   # issue 20
    python benchmarks/learning_curves.py --arms-file arms.yaml --out runs/lc
    python benchmarks/learning_curves.py --plot-only --include demo=runs/demo   # only the included runs
    python benchmarks/learning_curves.py --plot-only --arms kl_adaptive --out runs/lc20 \
        --include-json cpu_fw=benchmarks/results/issue11/learning_curves.json:cpu_fw_failure_weighted
    python benchmarks/learning_curves.py --arm-set issue20 --arms demo deviation_heading --seeds 0 1 2 --out runs/i20
    nohup python benchmarks/learning_curves.py --no-progress > runs/lc.log 2>&1 &   # in the background

``--seeds`` repeats every selected arm per seed: seed 0 keeps the arm's name (its
folder ``<out>/<arm>``), seed N > 0 is the arm ``<arm>_sN`` with ``seed=N`` added.

An arms file::

    arms:
      encoder:   {config: cpu, minutes: 150}
      tracking:  {config: cpu, minutes: 150, set: [env.reward=tracking]}
      walk_only: {config: demo, minutes: 60, set: [env.motions=clips/walk_punch]}
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

LATEST = Path("checkpoints") / "latest.pt"
DONE_FILE = "learning_curve_arm.json"
PNG, JSON = "learning_curves.png", "learning_curves.json"
DT_120 = 1.0 / 120.0


@dataclass
class Arm:
    """One arm: a preset (or YAML file), overrides and a wall-clock budget."""

    name: str
    config: str = "cpu"
    minutes: float = 150.0
    set: list[str] = field(default_factory=list)
    note: str = ""


DEFAULT_ARMS: dict[str, Arm] = {
    arm.name: arm
    for arm in (
        Arm(
            "encoder",
            set=["env.clip_sampling=uniform"],
            note="the paper's setting: frozen encoder reward, plain InfoNCE, clips drawn uniformly",
        ),
        Arm(
            "hard_negatives",
            set=["pretrain.negatives=hard", "pretrain.target_alignment=null", "pretrain.steps=4000"],
            note="encoder pretrained with hard negatives (held still, phase +0.5, reversed)",
        ),
        Arm(
            "tracking",
            set=["env.reward=tracking"],
            note="control: DeepMimic-style tracking reward for imitation",
        ),
        Arm(
            "failure_weighted",
            set=["env.clip_sampling=failure_weighted", "env.failure_weighted_share=0.7"],
            note="clips whose imitation episodes fail are drawn more often (the cpu preset since issue 11)",
        ),
        Arm(
            "dt120", set=[f"env.timestep={DT_120!r}"], note="1/120 s physics (armature 4x smaller: it scales with dt^2)"
        ),
    )
}
"""The arms of issue 11 (each on the ``cpu`` preset and the demo motions, 150 minutes)."""

METHOD_ARMS: dict[str, Arm] = {
    arm.name: arm
    for arm in (
        Arm("rgsd", "cpu", 60.0, note="RGSD: the cpu preset"),
        Arm("diayn", "diayn", 60.0, note="DIAYN: the ablation without reference grounding"),
        Arm("ase", "ase", 60.0, note="ASE (rgsd_agents.methods.ase), diversity loss off"),
        Arm("calm", "calm", 60.0, note="CALM (rgsd_agents.methods.calm)"),
        Arm("metra", "metra", 60.0, note="METRA (rgsd_agents.methods.metra) with PPO"),
    )
}
"""The paper's methods as arms (issue 18): the same worlds, sizes and wall-clock budget (60 minutes) each."""


def curriculum_step(at_samples: int, settings: dict[str, Any]) -> list[str]:
    """The ``--set`` override of a one-step ``curriculum``: ``settings`` from ``at_samples`` on."""
    return ["curriculum=" + json.dumps([{"at_samples": at_samples, "set": settings}])]


DEMO_MINUTES = 15.0
BF16 = ["ppo.bf16=true"]
DISCOVERY_EVERY4 = ["discovery.update_every=4"]
HEADING15 = ["env.deviation_heading_deg=15"]
SEED1 = ["seed=1"]
SEED2 = ["seed=2"]
HARD_NEGATIVES = ["pretrain.negatives=hard", "pretrain.target_alignment=null"]
FAST_IMITATION = ["ppo.epochs=2", "env.p_imitation=0.85"]
ACTOR_LR6E5 = ["ppo.actor_lr=6e-5"]
HEADING_CHEAP = HEADING15 + BF16 + DISCOVERY_EVERY4
DEMO_FAST = HEADING_CHEAP + FAST_IMITATION
DEMO_LR6E5 = HARD_NEGATIVES + DEMO_FAST + ACTOR_LR6E5
MAX050 = ["env.deviation_metric=max"]
NO_STEP = ["curriculum=[]"]
STEP_FAILURES = ["env.failure_rate_per=step"]
PROBE_WEIGHTED = ["env.clip_sampling=weighted"]
LEGS_HELD = ["pretrain.hard_negatives=[held_still,phase_shift,reversed,legs_held]"]
STEP_AT = 2457600  # iteration 600 x 4096 samples: where walk and run are learned under MAX050
TIGHTENED = {"env.deviation_metric": "mean", "env.deviation_adaptive": True, "env.deviation_min": 0.2}
TIGHTEN_AT_2P5M = curriculum_step(STEP_AT, TIGHTENED | {"env.deviation_heading_deg": 10})
TIGHTEN_AT_2P5M_FROM_070 = curriculum_step(
    STEP_AT, TIGHTENED | {"env.deviation_heading_deg": 10, "env.deviation_threshold": 0.5}
)
TIGHTEN030_AT_2P5M = curriculum_step(STEP_AT, TIGHTENED | {"env.deviation_min": 0.3, "env.deviation_heading_deg": 10})
TIGHTEN_MAX_AT_2P5M = curriculum_step(
    STEP_AT,
    {
        "env.deviation_adaptive": True,
        "env.deviation_adaptive_k": 1.5,
        "env.deviation_min": 0.25,
        "env.deviation_heading_deg": 10,
    },
)
"""Overrides that several issue-20 arms share (each written once; combined arms concatenate them).
``TIGHTENED`` is the cpu preset's tightened deviation rule (its ``curriculum``), stepped to at ``STEP_AT``."""
DEMO_UNTIL_DE606CD = [
    "env.p_imitation=0.7",
    "env.deviation_metric=mean",
    "env.deviation_heading_deg=null",
    "pretrain.negatives=infonce",
    "pretrain.target_alignment=0.999",
    "ppo.actor_lr=3e-5",
    "ppo.epochs=4",
    "ppo.bf16=false",
    "discovery.update_every=1",
    "curriculum=[]",
]
"""The ``demo`` preset's values until commit de606cd, which session 6 of issue 20 replaced with the arm
``demo_max050_tight``: the arms measured against the old preset start from these, so they keep what they measured."""


def on_demo_until_de606cd(arm: Arm) -> Arm:
    """``arm`` on the ``demo`` preset as it was until commit de606cd (its own overrides come after)."""
    return Arm(arm.name, arm.config, arm.minutes, DEMO_UNTIL_DE606CD + arm.set, arm.note)


ISSUE20_ARMS: dict[str, Arm] = {
    arm.name: on_demo_until_de606cd(arm)
    for arm in (
        Arm(
            "demo",
            "demo",
            DEMO_MINUTES,
            note="baseline: the demo preset as `rgsd demo` trained it until commit de606cd",
        ),
        Arm("demo_seed1", "demo", DEMO_MINUTES, SEED1, note="the baseline with another seed (run-to-run spread)"),
        Arm(
            "kl_adaptive",
            "demo",
            DEMO_MINUTES,
            ["ppo.lr_schedule=adaptive", "ppo.desired_kl=0.01"],
            note="rsl_rl's KL-adaptive actor lr (desired KL 0.01, x/÷1.5 per minibatch step) from 3e-5",
        ),
        Arm(
            "epochs2_mb4096",
            "demo",
            DEMO_MINUTES,
            ["ppo.epochs=2", "ppo.minibatch_size=4096"],
            note="update cost: 2 epochs of one 4096-sample minibatch (1 step each) instead of 4 x 2 of 2048",
        ),
        Arm(
            "discovery_every4",
            "demo",
            DEMO_MINUTES,
            DISCOVERY_EVERY4,
            note="update cost: the discovery encoder is updated every 4th iteration",
        ),
        Arm(
            "bf16",
            "demo",
            DEMO_MINUTES,
            BF16,
            note="update cost: bf16 autocast of the learner's hidden layers (output layers and losses in fp32)",
        ),
        Arm(
            "cheap_updates",
            "demo",
            DEMO_MINUTES,
            BF16 + DISCOVERY_EVERY4,
            note="update cost: bf16 and the discovery encoder every 4th iteration together",
        ),
        Arm(
            "deviation_max050",
            "demo",
            DEMO_MINUTES,
            ["env.deviation_metric=max", "env.deviation_threshold=0.5"],
            note="termination: maximum body error over 0.5 m (ProtoMotions) instead of the mean",
        ),
        Arm(
            "deviation_max025",
            "demo",
            DEMO_MINUTES,
            ["env.deviation_metric=max", "env.deviation_threshold=0.25"],
            note="termination: maximum body error over 0.25 m (PHC)",
        ),
        Arm(
            "deviation_mean030",
            "demo",
            DEMO_MINUTES,
            ["env.deviation_threshold=0.3"],
            note="termination: mean body error over 0.3 m instead of 0.5 m (a pelvis 0.3 m off its path ends it)",
        ),
        Arm(
            "deviation_tightening",
            "demo",
            DEMO_MINUTES,
            ["env.deviation_metric=max", "env.deviation_adaptive=true"],
            note="termination: per-clip max-error threshold clamp(k x EMA of the clip's error, lo, hi), tightening",
        ),
        Arm(
            "deviation_heading",
            "demo",
            DEMO_MINUTES,
            HEADING15,
            note="termination: also when the pelvis heading is 15 deg off the reference's (the reward is blind to it)",
        ),
        Arm(
            "heading_cheap",
            "demo",
            DEMO_MINUTES,
            HEADING_CHEAP,
            note="candidate demo preset: deviation_heading with cheap_updates",
        ),
        Arm(
            "hard_heading_cheap",
            "demo",
            DEMO_MINUTES,
            HARD_NEGATIVES + HEADING_CHEAP,
            note="heading_cheap with the encoder pretrained with hard negatives (a reward that sees the feet)",
        ),
        Arm(
            "demo_fast",
            "demo",
            DEMO_MINUTES,
            DEMO_FAST,
            note="heading_cheap with 2 epochs (4 minibatch steps) and 85 % imitation episodes: more imitation samples a minute",
        ),
        Arm(
            "demo_fast_hard",
            "demo",
            DEMO_MINUTES,
            HARD_NEGATIVES + DEMO_FAST,
            note="demo_fast with the encoder pretrained with hard negatives",
        ),
        Arm(
            "demo_fast_hard_lr6e5",
            "demo",
            DEMO_MINUTES,
            DEMO_LR6E5,
            note="demo_fast_hard with twice the actor lr (4 minibatch steps at 6e-5 move as far as 8 at 3e-5)",
        ),
        Arm(
            "demo_fast_hard_lr6e5_seed1",
            "demo",
            DEMO_MINUTES,
            DEMO_LR6E5 + SEED1,
            note="demo_fast_hard_lr6e5 with seed 1",
        ),
        Arm(
            "demo_fast_hard_lr6e5_seed2",
            "demo",
            DEMO_MINUTES,
            DEMO_LR6E5 + SEED2,
            note="demo_fast_hard_lr6e5 with seed 2",
        ),
        Arm(
            "deviation_heading_seed1",
            "demo",
            DEMO_MINUTES,
            HEADING15 + SEED1,
            note="deviation_heading with another seed",
        ),
    )
} | {
    arm.name: arm
    for arm in (  # session 6: the demo preset is demo_fast_hard_lr6e5 + MAX050 + TIGHTEN_AT_2P5M (bf16 auto)
        Arm(
            "demo_max050",
            "demo",
            DEMO_MINUTES,
            NO_STEP,
            note="demo_fast_hard_lr6e5 with imitation episodes ended by the maximum body error over 0.5 m (a foot off)",
        ),
        Arm("demo_max050_seed1", "demo", DEMO_MINUTES, NO_STEP + SEED1, note="demo_max050 with seed 1"),
        Arm("demo_max050_seed2", "demo", DEMO_MINUTES, NO_STEP + SEED2, note="demo_max050 with seed 2"),
        Arm(
            "demo_max050_tight",
            "demo",
            DEMO_MINUTES,
            note="the demo preset since session 6: demo_max050, then at 2.46 M samples the cpu preset's tightened rule "
            "(per-clip adaptive mean error, heading 10 deg)",
        ),
        Arm("demo_max050_tight_seed1", "demo", DEMO_MINUTES, SEED1, note="demo_max050_tight with seed 1"),
        Arm(
            "demo_max050_tight030",
            "demo",
            DEMO_MINUTES,
            TIGHTEN030_AT_2P5M,
            note="demo_max050_tight with the tightened threshold's floor at 0.3 m (the cpu run's walk and run settled there)",
        ),
        Arm(
            "demo_max050_tightmax",
            "demo",
            DEMO_MINUTES,
            TIGHTEN_MAX_AT_2P5M,
            note="demo_max050, then at 2.46 M samples an adaptive maximum-error rule (k 1.5, 0.25-0.5 m, heading 10 deg)",
        ),
        # session 7: where the samples go (on the same preset)
        Arm(
            "demo_step_failures",
            "demo",
            DEMO_MINUTES,
            STEP_FAILURES,
            note="the demo preset with clips drawn by failures per imitation step instead of per episode "
            "(a clip that fails soon after every start gets the samples)",
        ),
        Arm(
            "demo_step_failures_share09",
            "demo",
            DEMO_MINUTES,
            STEP_FAILURES + ["env.failure_weighted_share=0.9"],
            note="demo_step_failures with 90 % of the draws failure-weighted instead of 70 %",
        ),
        Arm(
            "demo_probe_weighted",
            "demo",
            DEMO_MINUTES,
            PROBE_WEIGHTED,
            note="the demo preset with 70 % of the draws following each clip's training-probe error squared "
            "(the clip tracked worst gets the samples; failure rates in training are alike across clips)",
        ),
        Arm(
            "demo_probe_weighted_seed1",
            "demo",
            DEMO_MINUTES,
            PROBE_WEIGHTED + SEED1,
            note="demo_probe_weighted with seed 1",
        ),
        Arm(
            "demo_probe_weighted_seed2",
            "demo",
            DEMO_MINUTES,
            PROBE_WEIGHTED + SEED2,
            note="demo_probe_weighted with seed 2",
        ),
        Arm(
            "demo_max070",
            "demo",
            DEMO_MINUTES,
            ["env.deviation_threshold=0.7"] + TIGHTEN_AT_2P5M_FROM_070,
            note="the demo preset with the maximum body error allowed to 0.7 m before the step (the backward walk's "
            "lagging foot reaches 0.5 m 19 frames after a start), then the same tightened rule",
        ),
        # session 8: what the reward pays for
        Arm(
            "demo_legs_held",
            "demo",
            DEMO_MINUTES,
            LEGS_HELD,
            note="the demo preset with a fourth hard negative in pretraining: the legs frozen to the pelvis in the pose "
            "of 10 frames earlier while the trunk and arms move on (the preset's encoder pays the run 0.80 of it)",
        ),
        # session 9: is the backward walk's fall the reward's doing, or the termination's?
        Arm(
            "demo_tracking",
            "demo",
            DEMO_MINUTES,
            ["env.reward=tracking"],
            note="the demo preset with the DeepMimic-style tracking reward for imitation instead of the encoder's",
        ),
        Arm(
            "demo_no_deviation",
            "demo",
            DEMO_MINUTES,
            ["env.deviation_termination=false"],
            note="the demo preset with imitation episodes ended only by a fall (no deviation rule): longer episodes",
        ),
        # session 10: the backward walk is short of samples; is it short of gradient steps? (KL per update 0.007)
        Arm(
            "demo_mb1024",
            "demo",
            DEMO_MINUTES,
            ["ppo.minibatch_size=1024"],
            note="the demo preset with minibatches of 1024 instead of 2048: twice the actor steps per sample",
        ),
        Arm(
            "demo_lr12e5",
            "demo",
            DEMO_MINUTES,
            ["ppo.actor_lr=1.2e-4"],
            note="the demo preset with the actor lr doubled again, to 1.2e-4",
        ),
        # session 10: one PD step off the reference the encoder already pays little (the bodies' angular velocity)
        Arm(
            "demo_noise10",
            "demo",
            DEMO_MINUTES,
            ["pretrain.input_noise=1.0"],
            note="the demo preset with its encoder pretrained on velocities noised by 1 std (pretrain.input_noise)",
        ),
        Arm(
            "demo_noise05",
            "demo",
            DEMO_MINUTES,
            ["pretrain.input_noise=0.5"],
            note="the same with half that noise",
        ),
        Arm(
            "demo_angnoise10",
            "demo",
            DEMO_MINUTES,
            ["pretrain.input_noise=1.0", "pretrain.noise_parts=[body_ang_vel]"],
            note="demo_noise10 with the noise on the angular velocities only (the linear ones tell the speed)",
        ),
        Arm(
            "demo_angnoise10_mb1024",
            "demo",
            DEMO_MINUTES,
            ["pretrain.input_noise=1.0", "pretrain.noise_parts=[body_ang_vel]", "ppo.minibatch_size=1024"],
            note="demo_angnoise10 with minibatches of 1024 (demo_mb1024)",
        ),
        Arm(
            "demo_twins50",
            "demo",
            DEMO_MINUTES,
            ["pretrain.sim_twins=0.5"],
            note="the demo preset with half its pretraining states swapped for their simulated twins (pretrain.sim_twins)",
        ),
        Arm(
            "demo_twins50_mb1024",
            "demo",
            DEMO_MINUTES,
            ["pretrain.sim_twins=0.5", "ppo.minibatch_size=1024"],
            note="demo_twins50 with minibatches of 1024 (demo_mb1024)",
        ),
        Arm(
            "demo_twins25_mb1024",
            "demo",
            DEMO_MINUTES,
            ["pretrain.sim_twins=0.25", "ppo.minibatch_size=1024"],
            note="demo_twins50_mb1024 with a quarter of the pretraining states swapped for twins",
        ),
        Arm(
            "demo_twins50_drift_mb1024",
            "demo",
            DEMO_MINUTES,
            ["pretrain.sim_twins=0.5", "pretrain.sim_negatives=true", "ppo.minibatch_size=1024"],
            note="demo_twins50_mb1024 with drift states (a second open loop, 0.25 m off) as hard negatives",
        ),
        Arm(
            "demo_drift_mb1024",
            "demo",
            DEMO_MINUTES,
            ["pretrain.sim_negatives=true", "ppo.minibatch_size=1024"],
            note="demo_mb1024 with drift states as hard negatives (no twins)",
        ),
        Arm(
            "demo_sinking",
            "demo",
            DEMO_MINUTES,
            ["pretrain.hard_negatives=[held_still,phase_shift,reversed,sinking]"],
            note="the demo preset with a fourth hard negative: the reference with the pelvis sinking 5-25 cm",
        ),
        Arm(
            "demo_sinking_mb1024",
            "demo",
            DEMO_MINUTES,
            ["pretrain.hard_negatives=[held_still,phase_shift,reversed,sinking]", "ppo.minibatch_size=1024"],
            note="demo_sinking with minibatches of 1024",
        ),
    )
}
"""The arms of issue 20: the ``demo`` preset (15 minutes, as ``rgsd demo``) with one change each
(``cheap_updates`` and ``heading_cheap`` combine two or three; the ``_seed1`` arms repeat one with seed 1).
The arms up to session 5 start from the preset as it was then (``DEMO_UNTIL_DE606CD``); ``demo`` is that
baseline and ``demo_max050_tight`` today's preset."""
ARM_SETS = {"issue11": DEFAULT_ARMS, "issue20": ISSUE20_ARMS, "methods": METHOD_ARMS}
"""The built-in arm sets (``--arm-set``); ``--arms`` alone picks by name from all of them."""
BUILTIN_ARMS: dict[str, Arm] = DEFAULT_ARMS | ISSUE20_ARMS | METHOD_ARMS


def with_seeds(arms: dict[str, Arm], seeds: list[int]) -> dict[str, Arm]:
    """Each arm once per seed: seed 0 keeps its name, seed N > 0 becomes ``<arm>_sN`` with ``seed=N`` added."""
    out = {}
    for arm in arms.values():
        for seed in seeds:
            if seed < 0:
                raise SystemExit(f"--seeds: {seed} is not a seed (0 or more)")
            if seed == 0:
                out[arm.name] = arm
            else:
                name = f"{arm.name}_s{seed}"
                out[name] = Arm(name, arm.config, arm.minutes, [*arm.set, f"seed={seed}"], f"{arm.note} (seed {seed})")
    return out


def load_arms(path: str | Path) -> dict[str, Arm]:
    """Arms from a YAML file ``arms: {name: {config, minutes, set, note}}``; errors name the file and field."""
    data = yaml.safe_load(Path(path).read_text()) or {}
    arms = data.get("arms") if isinstance(data, dict) else None
    if not isinstance(arms, dict) or not arms:
        raise SystemExit(f"{path}: expected a mapping 'arms:' of name -> {{config, minutes, set}}")
    out = {}
    for name, spec in arms.items():
        spec = spec or {}
        unknown = set(spec) - {"config", "minutes", "set", "note"}
        if unknown:
            raise SystemExit(f"{path}: arms.{name}.{sorted(unknown)[0]} is not a field (config, minutes, set, note)")
        sets = spec.get("set", [])
        if isinstance(sets, str) or not all(isinstance(s, str) and "=" in s for s in sets):
            raise SystemExit(f"{path}: arms.{name}.set must be a list of key=value strings")
        out[str(name)] = Arm(str(name), str(spec.get("config", "cpu")), float(spec.get("minutes", 150.0)), list(sets))
        out[str(name)].note = str(spec.get("note", ""))
    return out


# -- running ------------------------------------------------------------------------
def train_command(arm: Arm, run: Path, extra: list[str], progress: bool) -> list[str]:
    """The ``rgsd train`` command line that starts or resumes ``arm`` in ``run``."""
    cmd = [sys.executable, "-m", "rgsd_agents.cli", "train"]
    budget = ["--set", f"max_minutes={arm.minutes}"]
    if (run / LATEST).exists():
        cmd += ["--resume", str(run), *budget]
    else:
        cmd += ["--config", arm.config, "--out", str(run), *budget]
        for item in [*arm.set, *extra]:
            cmd += ["--set", item]
    return cmd + ([] if progress else ["--no-progress"])


def run_arm(arm: Arm, out: Path, extra: list[str], progress: bool) -> str:
    """Train (or resume) one arm until its budget; returns its status ("done", "skipped", "failed rc=N")."""
    run = out / arm.name
    marker = run / DONE_FILE
    if marker.exists() and json.loads(marker.read_text()).get("minutes", -1) >= arm.minutes:
        return "skipped"
    cmd = train_command(arm, run, extra, progress)
    print("$ " + " ".join(cmd), flush=True)
    rc = subprocess.call(cmd)
    if rc != 0:
        return f"failed rc={rc}"
    marker.write_text(json.dumps({"minutes": arm.minutes, "command": cmd}, indent=2) + "\n")
    return "done"


# -- reading curves ------------------------------------------------------------------
def read_scalars(tb_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of a TensorBoard folder: tag -> [(step, value)], one value per step (the latest written)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    series: dict[str, dict[int, tuple[float, float]]] = {}
    for events in sorted(tb_dir.glob("**/events.out.tfevents.*")):
        acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            s = series.setdefault(tag, {})
            for e in acc.Scalars(tag):
                if e.step not in s or e.wall_time >= s[e.step][0]:  # a resumed session rewrites later steps
                    s[e.step] = (e.wall_time, e.value)
    return {tag: sorted((step, v) for step, (_, v) in s.items()) for tag, s in series.items()}


def clip_categories(run: Path, names: list[str]) -> dict[str, str]:
    """Category of each probed clip (from the run's encoder.pt, else its motions; else the clip's name)."""
    try:
        from rgsd_envs.rewards.encoders import read_encoder_file

        payload = read_encoder_file(run / "encoder.pt")
        known = dict(zip(payload["clip_names"], payload["clip_categories"]))
        if set(names) <= set(known):
            return {n: known[n] or n for n in names}
    except Exception:  # no categories stored: read the motions
        pass
    try:
        from rgsd_envs.motion.library import MotionLib

        motions = yaml.safe_load((run / "config.yaml").read_text())["env"]["motions"]
        lib = MotionLib(motions)
        known = dict(zip(lib.names, lib.categories))
    except Exception as err:  # a moved motion folder must not stop the plot
        print(f"note: {run}: clip categories unavailable ({err}); one panel per clip", file=sys.stderr)
        known = {}
    return {n: known.get(n) or n for n in names}


def training_minutes(scalars: dict[str, list[tuple[int, float]]], steps: list[int]) -> list[float]:
    """Training minutes at each of ``steps``: iteration seconds summed up to it (each logged iteration
    stands for the samples since the previous log), rollouts and updates only."""
    its = scalars.get("perf/iteration_seconds", [])
    if not its:
        return [math.nan] * len(steps)
    batch = its[0][0]  # the first iteration is logged at global_step = one batch
    cum, total, prev = [], 0.0, 0
    for step, sec in its:
        total += sec * max(step - prev, 0) / batch
        prev = step
        cum.append((step, total))
    out = []
    for s in steps:
        done = [t for st, t in cum if st <= s]
        out.append((done[-1] if done else 0.0) / 60.0)
    return out


def arm_curves(run: Path) -> dict[str, Any]:
    """The probe curves of one run folder (samples, minutes, overall, per clip and per category, cm)."""
    tb = run / "tb"
    if not tb.is_dir():
        raise FileNotFoundError(f"{run}: no tb/ folder (not an rgsd train run, or it has not started)")
    scalars = read_scalars(tb)
    overall = scalars.get("probe/cartesian_error_cm", [])
    steps = [s for s, _ in overall]
    prefix, suffix = "probe_clips/", "_cm"
    clips = {
        tag[len(prefix) : -len(suffix)]: dict(v)
        for tag, v in scalars.items()
        if tag.startswith(prefix) and tag.endswith(suffix)
    }
    per_clip = {name: [vals.get(s, math.nan) for s in steps] for name, vals in sorted(clips.items())}
    cats = clip_categories(run, list(per_clip))
    per_cat: dict[str, list[float]] = {}
    for cat in sorted(set(cats.values())):
        rows = [per_clip[n] for n in per_clip if cats[n] == cat]
        per_cat[cat] = [_nanmean([r[i] for r in rows]) for i in range(len(steps))]
    return {
        "run": str(run),
        "samples": steps,
        "minutes": training_minutes(scalars, steps),
        "overall_cm": [v for _, v in overall],
        "clips_cm": per_clip,
        "clip_categories": cats,
        "categories_cm": per_cat,
        "final_cm": {name: vals[-1] for name, vals in per_clip.items()} if steps else {},
    }


def _nanmean(values: list[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return sum(finite) / len(finite) if finite else math.nan


# -- outputs -------------------------------------------------------------------------
def plot(curves: dict[str, dict[str, Any]], path: Path, xmax: tuple[float | None, float | None] = (None, None)) -> Path:
    """learning_curves.png: one panel per clip category, one line per arm; samples (top), minutes (bottom);
    ``xmax``: right ends of the axes (millions of samples, minutes; None: all data)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cats = sorted({c for arm in curves.values() for c in arm.get("categories_cm", {})}) or ["(no probe data)"]
    fig, axes = plt.subplots(2, len(cats), figsize=(4.2 * len(cats), 7.5), squeeze=False)
    colours = plt.get_cmap("tab10")
    for k, (name, arm) in enumerate(curves.items()):
        for j, cat in enumerate(cats):
            ys = arm.get("categories_cm", {}).get(cat)
            if not ys:
                continue
            for row, xs in ((0, [s / 1e6 for s in arm["samples"]]), (1, arm["minutes"])):
                axes[row, j].plot(xs, ys, color=colours(k % 10), label=name, marker=".", markersize=3)
    for j, cat in enumerate(cats):
        axes[0, j].set_title(cat)
        axes[0, j].set_xlabel("samples (millions)")
        axes[1, j].set_xlabel("training minutes (rollouts + updates)")
        for row in (0, 1):
            axes[row, j].set_ylabel("Cartesian error (cm)")
            axes[row, j].set_ylim(bottom=0)
            if xmax[row] is not None:
                axes[row, j].set_xlim(0, xmax[row])
            axes[row, j].grid(alpha=0.3)
    axes[0, -1].legend(title="arm", fontsize=8)
    fig.suptitle(
        "Imitation probe: deterministic policy from fixed starts of each clip to its end, no early termination"
    )
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp")
    fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
    tmp.replace(path)
    return path


def write_json(data: dict[str, Any], path: Path) -> Path:
    """Write JSON atomically (NaN as null)."""

    def clean(x: Any) -> Any:
        if isinstance(x, float) and math.isnan(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x

    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(clean(data), indent=2) + "\n")
    tmp.replace(path)
    return path


def saved_curve(spec: str) -> tuple[str, dict[str, Any]]:
    """``NAME=FILE:ARM``: arm ARM's curves from an earlier learning_curves.json, under the name NAME."""
    name, sep, rest = spec.partition("=")
    file, colon, arm = rest.rpartition(":")
    if not (sep and colon and name and file and arm):
        raise SystemExit(f"--include-json expects NAME=FILE:ARM, got {spec!r}")
    arms = json.loads(Path(file).read_text()).get("arms", {})
    if not arms.get(arm, {}).get("samples"):
        raise SystemExit(
            f"{file}: no curves for arm {arm!r}; arms with curves: {[a for a in arms if arms[a].get('samples')]}"
        )
    entry = dict(arms[arm])
    entry["minutes"] = [math.nan if m is None else m for m in entry["minutes"]]
    entry["categories_cm"] = {c: [math.nan if v is None else v for v in vs] for c, vs in entry["categories_cm"].items()}
    entry["status"] = f"included from {file} ({arm})"
    return name, entry


def summarise(
    out: Path,
    arms: dict[str, Arm],
    status: dict[str, str],
    include: dict[str, Path],
    saved: dict[str, dict[str, Any]] | None = None,
    xmax: tuple[float | None, float | None] = (None, None),
) -> dict[str, Any]:
    """Read every arm's curves (and ``saved`` ones from earlier JSON files), write learning_curves.png and .json
    into ``out``; returns the JSON data."""
    curves, data = dict(saved or {}), {"arms": dict(saved or {})}
    runs = {name: out / name for name in arms} | include
    for name, run in runs.items():
        entry: dict[str, Any] = {"status": status.get(name) or _status(name, run, include)}
        if name in arms:
            a = arms[name]
            entry.update(config=a.config, budget_minutes=a.minutes, set=a.set, note=a.note)
        try:
            c = arm_curves(run)
        except FileNotFoundError as err:
            entry["error"] = str(err)
        else:
            curves[name] = c
            entry.update(c)
        data["arms"][name] = entry
    plot(curves, out / PNG, xmax)
    write_json(data, out / JSON)
    return data


def _status(name: str, run: Path, include: dict[str, Path]) -> str:
    """Status of an arm not trained in this call."""
    if name in include:
        return "included"
    if (run / DONE_FILE).exists():
        return f"budget used ({json.loads((run / DONE_FILE).read_text())['minutes']} min)"
    return "partial (resume to continue)" if (run / LATEST).exists() else "not started"


def table(data: dict[str, Any]) -> str:
    """Last probe per arm: samples, minutes and the error of each clip (cm)."""
    lines = []
    for name, arm in data["arms"].items():
        if not arm.get("samples"):
            lines.append(
                f"{name:>18}: no probe yet ({arm.get('status')}{'; ' + arm['error'] if 'error' in arm else ''})"
            )
            continue
        clips = ", ".join(f"{c} {v:.1f}" for c, v in arm["final_cm"].items())
        lines.append(
            f"{name:>18}: {arm['samples'][-1]:,} samples, {arm['minutes'][-1]:.1f} min, "
            f"overall {arm['overall_cm'][-1]:.1f} cm; {clips}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the selected arms (unless --plot-only), then write the plot and the JSON."""
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    p.add_argument("--out", default="runs/learning_curves", help="folder of the arms' run folders and the outputs")
    p.add_argument("--arms-file", help="YAML file of arms (default: the built-in arm set)")
    p.add_argument(
        "--arm-set",
        choices=sorted(ARM_SETS),
        help="built-in arms: issue11 (encoder variants, 150 min; the default), issue20 (demo-preset variants, "
        "15 min) or methods (rgsd, diayn, ase, calm, metra; 60 min)",
    )
    p.add_argument(
        "--arms", nargs="+", help="run only these arms (default: all of the file or the set; alone: any built-in arm)"
    )
    p.add_argument("--minutes", type=float, help="budget of every arm (overrides the arms' own)")
    p.add_argument("--seeds", type=int, nargs="+", help="run every arm once per seed (seed 0: <arm>, seed N: <arm>_sN)")
    p.add_argument(
        "--set", dest="extra", action="append", default=[], help="override for every new arm (e.g. num_envs=4)"
    )
    p.add_argument("--include", action="append", default=[], metavar="NAME=RUN_DIR", help="add an existing run's curve")
    p.add_argument(
        "--include-json",
        action="append",
        default=[],
        metavar="NAME=FILE:ARM",
        help="add an arm's curve from an earlier learning_curves.json (e.g. a baseline whose run folder is gone)",
    )
    p.add_argument("--plot-only", action="store_true", help="train nothing; plot what the run folders hold")
    p.add_argument("--max-samples", type=float, help="right end of the samples axis (millions)")
    p.add_argument("--max-minutes", type=float, help="right end of the minutes axis")
    p.add_argument("--no-progress", action="store_true", help="no progress bars from rgsd train")
    args = p.parse_args(argv)

    if args.arms_file:
        arms = load_arms(args.arms_file)
    elif args.arm_set:
        arms = copy.deepcopy(ARM_SETS[args.arm_set])
    elif args.plot_only and (args.include or args.include_json) and not args.arms:
        arms = {}  # plotting given runs only: no built-in arm is listed as "not started"
    else:
        arms = copy.deepcopy(BUILTIN_ARMS if args.arms else DEFAULT_ARMS)
    if args.arms:
        missing = [a for a in args.arms if a not in arms]
        if missing:
            p.error(f"unknown arm {missing[0]!r}; arms: {', '.join(arms)}")
        arms = {a: arms[a] for a in args.arms}
    if args.seeds:
        arms = with_seeds(arms, args.seeds)
    if args.minutes is not None:
        for arm in arms.values():
            arm.minutes = args.minutes
    include = {}
    for item in args.include:
        name, sep, run = item.partition("=")
        if not sep or not name or not run:
            p.error(f"--include expects NAME=RUN_DIR, got {item!r}")
        include[name] = Path(run)
    saved = dict(saved_curve(spec) for spec in args.include_json)
    xmax = (args.max_samples, args.max_minutes)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    status: dict[str, str] = {}
    if not args.plot_only:
        for arm in arms.values():
            status[arm.name] = run_arm(arm, out, args.extra, not args.no_progress)
            print(f"arm {arm.name}: {status[arm.name]}", flush=True)
            summarise(out, arms, status, include, saved, xmax)  # refreshed after every arm
    data = summarise(out, arms, status, include, saved, xmax)
    print(table(data))
    print(f"plot: {out / PNG}\nnumbers: {out / JSON}")
    return 0 if all(not s.startswith("failed") for s in status.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
