"""``rgsd reproduce``: the plan of every scale, the bookkeeping of steps.json (skip, resume, fail, interrupt), and
the smoke scale end to end on the demo motions."""

from __future__ import annotations

import _thread
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path

import pytest
import yaml

from rgsd_agents.cli import build_parser
from rgsd_agents.cli import main as rgsd
from rgsd_agents.reproduce.plan import NothingToDo, Plan, Step, build_plan, eval_id, makespan
from rgsd_agents.reproduce.scale import ReproduceScale, load_scale, scale_names
from rgsd_agents.reproduce.steps import (
    DONE,
    FAILED,
    INTERRUPTED,
    SKIPPED,
    PlanProgress,
    StepFailed,
    StepsFile,
    StepState,
    run_plan,
)
from rgsd_envs.utils.files import InputFileError

# -- scales and plans ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["smoke", "cpu", "gpu", "full"])
def test_every_built_in_scale_builds_a_plan_of_every_method(name, tmp_path):
    from rgsd_agents.methods import METHODS, method_class

    assert name in scale_names()
    scale, path = load_scale(name)
    assert scale.description.strip(), f"{name}: state what the scale can and cannot show"
    plan = build_plan(scale, path, "demo", tmp_path)  # loads every preset with the scale's overrides
    assert not plan.dropped_methods, f"{name}: methods left out of the plan: {plan.dropped_methods}"
    assert plan.methods == list(METHODS)
    ids = [s.id for s in plan.steps]
    for m in METHODS:
        for k in range(scale.seeds):
            assert f"train/{m}/seed{k}" in ids
            assert (f"pretrain/{m}/seed{k}" in ids) == (method_class(m).ENCODER == "pretrained")
            for style in ("freestyle", "sidestep", "backward"):
                assert f"downstream/{style}/{m}/seed{k}" in ids
    assert ids[-2:] == ["aggregate", "report"] and all(f"eval/{m}" in ids for m in METHODS)
    assert len(ids) == len(set(ids))


def test_the_full_scale_says_the_paper_states_no_budget_and_paper_still_selects_it():
    full, path = load_scale("full")
    assert load_scale("paper")[1] == path and "paper" not in scale_names()
    assert "our full budget" in full.description and "the paper states no total budget" in full.description


def test_the_plan_states_each_training_s_budget_in_its_own_loop_s_terms(tmp_path):
    """A PPO iteration is 32 steps of 4096 worlds and 20 minibatch steps; Meta Motivo's is one step and 400 updates."""
    scale, path = load_scale("full")
    plan = build_plan(scale, path, "demo", tmp_path, methods=["rgsd", "fb_cpr"], seeds=1)
    assert plan.step("train/rgsd/seed0").budget == (
        "20000 it, 4096 worlds x 32 steps: 2.62 B transitions, 400 k gradient steps of 32768"
    )
    # 82 M transitions; no update until 50,000 random transitions are in, i.e. from the 13th iteration on
    assert plan.step("train/fb_cpr/seed0").budget == (
        "20000 it, 4096 worlds x 1 step: 81.9 M transitions, 8.00 M gradient steps of 1024"
    )
    cpu, cpu_path = load_scale("cpu")
    fb = build_plan(cpu, cpu_path, "demo", tmp_path / "cpu", methods=["fb_cpr"], seeds=1).step("train/fb_cpr/seed0")
    assert fb.budget.startswith("100000 it or 25 min, 16 worlds x 16 steps: at most 25.6 M transitions")


def test_a_minutes_budget_longer_than_the_stated_time_is_the_step_s_time_plus_set_up(tmp_path):
    """A training or downstream training that its minutes end takes at least them plus set-up, whatever the scale's
    stated time (which is for the scale's own budget); one its iterations end keeps the stated time."""
    from rgsd_agents.commands.reproduce import format_plan
    from rgsd_agents.reproduce.plan import DOWNSTREAM, DOWNSTREAM_SETUP_MINUTES, TRAIN_SETUP_MINUTES, plan_seconds
    from rgsd_envs.utils.config import set_overrides

    def plan_of(name: str, sets: list[str], out: str) -> Plan:
        scale, path = load_scale(name, set_overrides(ReproduceScale, sets))
        return build_plan(scale, path, "demo", tmp_path / out, methods=["rgsd"], seeds=1)

    def downstream_s(plan: Plan) -> set[float]:
        """The stated seconds of the downstream steps, to the millisecond."""
        return {round(s.estimate_s, 3) for s in plan.steps if s.kind == DOWNSTREAM}

    cpu = plan_of("cpu", [], "cpu")  # its own budgets: 25 and 3 minutes, stated as 26 and 3.5
    assert cpu.step("train/rgsd/seed0").estimate_s == pytest.approx(26 * 60.0)
    assert downstream_s(cpu) == {3.5 * 60.0}
    longer = plan_of("cpu", ["train.minutes=75", "downstream.minutes=10"], "longer")
    assert longer.step("train/rgsd/seed0").estimate_s == pytest.approx((75 + TRAIN_SETUP_MINUTES) * 60.0)
    assert downstream_s(longer) == {round((10 + DOWNSTREAM_SETUP_MINUTES) * 60.0, 3)}
    three_styles = 3 * (10 + DOWNSTREAM_SETUP_MINUTES - 3.5) * 60.0
    assert plan_seconds(longer, 1) - plan_seconds(cpu, 1) == pytest.approx(
        (75 + TRAIN_SETUP_MINUTES - 26) * 60.0 + three_styles
    )
    line = format_plan(longer, StepsFile.load(tmp_path / "longer"), 1).splitlines()[-1]
    assert "trainings with a minutes budget at least that plus set-up, their probes and checkpoints on top" in line
    # smoke's trainings end at 3 iterations (7 s stated); 100000 iterations or half a minute take the half minute
    timed = ["train.minutes=0.5", "train.iterations=100000", "downstream.minutes=0.3", "downstream.iterations=100000"]
    smoke = plan_of("smoke", timed, "smoke")
    assert smoke.step("train/rgsd/seed0").estimate_s == pytest.approx((0.5 + TRAIN_SETUP_MINUTES) * 60.0)
    assert downstream_s(smoke) == {round((0.3 + DOWNSTREAM_SETUP_MINUTES) * 60.0, 3)}
    for name in scale_names():  # every built-in scale's own budgets fit in its stated times, set-up included
        scale, _ = load_scale(name)
        plan = plan_of(name, [], name)
        assert plan.step("train/rgsd/seed0").estimate_s == pytest.approx(60.0 * scale.train.estimate_minutes)
        assert downstream_s(plan) <= {round(60.0 * scale.downstream.estimate_minutes, 3)}


def test_each_pretraining_runs_on_the_plan_s_clips_with_its_seed(tmp_path, real_clip_dir):
    """The pretraining file holds the clips, seed and skill size of the training it serves, and a change of clips
    is a change of the step (not "done, skipped" on a folder run with other clips)."""
    clips = Path(real_clip_dir)
    scale, path = load_scale("smoke")
    plan = build_plan(scale, path, str(clips), tmp_path / "out", methods=["rgsd"], seeds=2)
    for seed in (0, 1):
        step = plan.step(f"pretrain/rgsd/seed{seed}")
        step.prepare()
        written = yaml.safe_load((tmp_path / "out" / "pretrain" / f"rgsd_seed{seed}.yaml").read_text())
        train = yaml.safe_load(yaml.safe_dump(plan.step(f"train/rgsd/seed{seed}").extra))
        assert written["motions"] == [str(clips.resolve())] or written["motions"] == str(clips.resolve())
        assert written["seed"] == seed and step.extra["seed"] == seed
        assert written["skill_dim"] == train["env"]["skill_dim"]
        assert written["motions"] == train["env"]["motions"]
    demo = build_plan(scale, path, "demo", tmp_path / "out2", methods=["rgsd"], seeds=1)
    assert demo.step("pretrain/rgsd/seed0").extra != plan.step("pretrain/rgsd/seed0").extra


def test_rgsd_pretrains_per_seed_and_best_of_n_methods_take_the_eval_s_clip_latents(tmp_path):
    scale, path = load_scale("smoke")
    plan = build_plan(scale, path, "demo", tmp_path, methods=["rgsd", "ase"], seeds=2)
    train = plan.step("train/rgsd/seed1")
    assert train.needs == ("pretrain/rgsd/seed1",)
    argv = train.command(set())
    assert f"encoder={tmp_path.resolve() / 'pretrain' / 'rgsd_seed1' / 'encoder.pt'}" in argv
    assert argv[argv.index("--seed") + 1] == "1" and "iterations=3" in argv
    ase = plan.step("downstream/backward/ase/seed1")
    assert set(ase.needs) == {"train/ase/seed1", "eval/ase"}
    latents = tmp_path.resolve() / "eval" / "ase" / "ase_seed1" / "clip_latents.json"
    assert f"task.clip_latents={latents}" in ase.command(set())
    own = plan.step("downstream/backward/rgsd/seed1")  # an encoder method: its run's encoder gives the style latent
    assert own.needs == ("train/rgsd/seed1",) and not any("clip_latents" in a for a in own.command(set()))
    ev = plan.step("eval/rgsd")  # each method's evaluation takes its runs that trained
    argv = ev.command({"train/ase/seed0", "train/rgsd/seed1"})
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--run"] == [str(plan.run_dir("rgsd", 1))]
    assert argv[argv.index("--out") + 1] == str(tmp_path.resolve() / "eval" / "rgsd")
    parsed = build_parser().parse_args(argv)  # --motions takes several sources: the one given here, --out after it
    assert parsed.motions == ["demo"] and parsed.out == str(tmp_path.resolve() / "eval" / "rgsd")
    with pytest.raises(NothingToDo, match="no training of ase finished"):
        plan.step("eval/ase").command({"train/rgsd/seed1"})


def test_a_scale_names_its_file_and_field_when_wrong(tmp_path):
    data = yaml.safe_load(load_scale("smoke")[1].read_text())
    data["train"]["sets"]["no_such_method"] = ["iterations=1"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(InputFileError, match=r"bad.yaml: field 'train.sets.no_such_method'"):
        load_scale(bad)
    data["train"]["sets"].pop("no_such_method")
    data["parallel"] = 3
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(InputFileError, match="parallel must be 1 or 2"):
        load_scale(bad)
    data["parallel"] = 2
    data["downstream"]["style_start"] = ["rgds"]
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(InputFileError, match=r"bad.yaml: field 'downstream.style_start': unknown method 'rgds'"):
        load_scale(bad)
    with pytest.raises(InputFileError, match="scales: cpu, full, gpu, smoke"):
        load_scale("huge")
    data["downstream"]["style_start"] = []
    data["seeds"] = "two"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(InputFileError, match=r"bad.yaml: field 'seeds': expected int, got 'two'"):
        load_scale(bad)
    data["seeds"] = 1
    data["train"]["minutes"] = [25]
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(InputFileError, match=r"bad.yaml: field 'train.minutes': expected float or null, got '\[25\]'"):
        load_scale(bad)


def test_a_second_command_on_a_folder_in_use_stops_before_it_writes(tmp_path, capsys):
    from rgsd_envs.utils.files import folder_lock

    out = tmp_path / "r"
    with folder_lock(out, "rgsd reproduce"):
        code = rgsd(["reproduce", "--motions", "demo", "--out", str(out), "--scale", "smoke", "--methods", "rgsd"])
        assert code == 2 and "r: in use by pid" in capsys.readouterr().err
        assert sorted(p.name for p in out.iterdir()) == [".lock"]
        run = tmp_path / "t"
        with folder_lock(run, "rgsd train"):
            code = rgsd(["train", "--config", "demo", "--out", str(run), "--set", "iterations=0", "--no-progress"])
            assert code == 2 and "t: in use by pid" in capsys.readouterr().err
            assert sorted(p.name for p in run.iterdir()) == [".lock"]


def test_a_missing_or_empty_motion_folder_ends_before_anything_runs(tmp_path, capsys):
    out = tmp_path / "r"
    code = rgsd(["reproduce", "--motions", str(tmp_path / "nowhere"), "--out", str(out), "--plan-only"])
    assert code == 2 and "nowhere: motions not found" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    code = rgsd(["reproduce", "--motions", str(tmp_path / "empty"), "--out", str(out)])
    assert code == 2 and "empty: folder holds no .npz motion clips" in capsys.readouterr().err
    assert not out.exists()


def test_a_copied_scale_file_is_accepted_and_its_overrides_are_checked_before_anything_runs(tmp_path, capsys):
    data = yaml.safe_load(load_scale("smoke")[1].read_text())
    data["train"]["sets"]["all"].append("ppo.no_such_key=1")
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump(data))
    code = rgsd(["reproduce", "--motions", "demo", "--out", str(tmp_path / "r"), "--scale", str(mine)])
    assert code == 2 and "no_such_key" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_a_scale_file_on_a_base_inherits_it_names_its_errors_and_is_saved_resolved(tmp_path, monkeypatch):
    """``base: smoke`` and the keys changed: the folder's scale.yaml is the merged scale, which loads on its own."""
    import rgsd_agents.reproduce.steps as steps_module
    from rgsd_envs.utils.config import to_dict

    mine = tmp_path / "mine.yaml"
    mine.write_text("base: smoke\nseeds: 1\neval: {settings: {rollouts: 2}}\n")
    scale, path = load_scale(mine)
    smoke, _ = load_scale("smoke")
    assert path == mine and scale.seeds == 1 and scale.eval.settings == {**smoke.eval.settings, "rollouts": 2}
    (tmp_path / "typo.yaml").write_text("base: mine.yaml\ntrain: {minutse: 1}\n")
    with pytest.raises(InputFileError, match=r"typo.yaml: field 'train.minutse'"):
        load_scale(tmp_path / "typo.yaml")

    class Stop(Exception):
        pass

    def stop(*args, **kwargs):
        raise Stop

    monkeypatch.setattr(steps_module, "run_plan", stop)
    out = tmp_path / "r"
    with pytest.raises(Stop):
        rgsd(["reproduce", "--motions", "demo", "--out", str(out), "--scale", str(mine), "--methods", "metra"])
    assert "base" not in yaml.safe_load((out / "scale.yaml").read_text())
    assert to_dict(load_scale(out / "scale.yaml")[0]) == to_dict(scale)


def test_the_scale_file_is_copied_into_the_folder_whole_or_not_at_all(tmp_path, monkeypatch):
    """A full disk while copying leaves the folder's scale.yaml as it was, which --report-only trusts."""
    import contextlib
    import errno

    import rgsd_agents.reproduce.steps as steps_module

    def half_then_disk_full(src, dst, *args, **kwargs):
        Path(dst).write_bytes(Path(src).read_bytes()[:20])
        raise OSError(errno.ENOSPC, "No space left on device")

    out = tmp_path / "r"
    out.mkdir()
    (out / "scale.yaml").write_text("# the scale an earlier command copied\n")
    monkeypatch.setattr(steps_module, "run_plan", lambda *args, **kwargs: pytest.fail("the plan ran"))
    monkeypatch.setattr(shutil, "copyfile", half_then_disk_full)
    with contextlib.suppress(OSError):
        rgsd(["reproduce", "--motions", "demo", "--out", str(out), "--scale", "smoke", "--methods", "rgsd"])
    assert (out / "scale.yaml").read_text() == "# the scale an earlier command copied\n"
    assert sorted(p.name for p in out.iterdir()) == [".lock", "scale.yaml"]  # no temporary left


def test_the_expected_time_runs_steps_in_order_two_at_a_time():
    deps = {"c": {"a"}, "d": {"b", "c"}}
    t = {"a": 10.0, "b": 4.0, "c": 3.0, "d": 5.0}
    assert makespan(["a", "b", "c", "d"], deps, t, parallel=1) == 22.0
    assert makespan(["a", "b", "c", "d"], deps, t, parallel=2) == 18.0  # a | b, then c after a, then d
    assert makespan(["c", "d"], deps, t, parallel=2) == 8.0  # a and b are outside: done
    assert makespan(["a", "c"], deps, {**t, "a": 2.0}, parallel=2, running=["a"]) == 5.0


# -- the bookkeeping of steps.json -------------------------------------------------------------------------------


def _plan(out: Path, checkpoint: bool = False) -> Plan:
    """A -> B -> C, and D beside them; ``report`` after all (in-process)."""
    written: list[set[str]] = []

    def step(name: str, needs: tuple[str, ...] = (), **kw) -> Step:
        folder = out / name
        return Step(
            name, "train", name, "-", 10.0, needs=needs, output=folder,
            checkpoint=folder / "latest.pt" if checkpoint else None,
            command=lambda done: [name, "fresh"],
            resume_command=(lambda: [name, "resume"]) if checkpoint else None, **kw,
        )  # fmt: skip

    steps = [step("A"), step("B", ("A",)), step("C", ("B",)), step("D")]
    steps.append(
        Step("report", "report", "report", "-", 1.0, after=("A", "B", "C", "D"), func=lambda done: written.append(done))
    )
    plan = Plan(out, "demo", ReproduceScale(), out / "scale.yaml", ["m"], [0], steps)
    plan.written = written  # type: ignore[attr-defined]
    return plan


def _restore_sigint(previous: object) -> None:
    """Give SIGINT its handler back; only the main thread may (a collection in a step's thread leaves it)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, previous)


class FakeRunner:
    """Records the arguments of each step; fails the steps named in ``fail``; writes a step's checkpoint."""

    def __init__(self, fail: tuple[str, ...] = (), interrupt: str | None = None):
        self.calls: list[list[str]] = []
        self.ids: list[str] = []
        self.fail, self.interrupt = fail, interrupt
        if interrupt is not None:
            # a shell's background job (`cmd &`) starts Python with SIGINT ignored, and then Ctrl-C, simulated or
            # not, does nothing: the test gives itself Python's own handler for the interrupt it sends
            previous = signal.signal(signal.SIGINT, signal.default_int_handler)
            weakref.finalize(self, _restore_sigint, previous)

    def __call__(self, step: Step, argv: list[str], log: Path) -> None:
        self.calls.append(argv)
        self.ids.append(step.id)
        if step.output is not None:
            step.output.mkdir(parents=True, exist_ok=True)
            (step.output / "latest.pt").write_text("checkpoint")
        if step.id == self.interrupt:
            _thread.interrupt_main()  # Ctrl-C while this step runs
            time.sleep(5)
        if step.id in self.fail:
            raise StepFailed(f"exit status 1: error: {step.id} broke")


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        ([], "a JSON list, expected an object"),
        ({"format": "rgsd-reproduce-steps", "steps": []}, "'steps' is a JSON list, expected an object"),
        ({"format": "rgsd-reproduce-steps", "steps": {}, "info": "x"}, "'info' is a JSON str, expected an object"),
    ],
    ids=["list", "steps-list", "info-text"],
)
def test_a_steps_file_of_another_shape_is_named_in_one_line(doc, why, tmp_path, capsys):
    out = tmp_path / "rp"
    out.mkdir()
    (out / "steps.json").write_text(json.dumps(doc))
    assert rgsd(["reproduce", "--motions", "demo", "--out", str(out), "--plan-only"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {out / 'steps.json'}: not a reproduce state file (") and err.count("\n") == 1, err
    assert why in err and "choose another --out" in err
    assert sorted(p.name for p in out.iterdir()) == ["steps.json"]


def test_a_failed_step_is_reported_its_dependants_skipped_and_the_others_go_on(tmp_path):
    plan = _plan(tmp_path)
    runner = FakeRunner(fail=("B",))
    outcome = run_plan(plan, StepsFile.load(tmp_path), runner, parallel=2, progress=False, tick=0.05)
    assert outcome.statuses == {"A": DONE, "B": FAILED, "C": SKIPPED, "D": DONE, "report": DONE}
    assert not outcome.ok
    state = json.loads((tmp_path / "steps.json").read_text())["steps"]
    assert state["B"]["error"] == "exit status 1: error: B broke"
    assert state["C"]["error"] == "needs B (failed)" and state["C"]["attempts"] == 0
    assert plan.written == [{"A", "D"}]  # the report ran on what finished
    from rgsd_agents.commands.reproduce import format_plan

    printed = format_plan(_plan(tmp_path), StepsFile.load(tmp_path), 1)
    assert "last time: exit status 1: error: B broke" in printed and "last time: needs B (failed)" in printed
    # again: A and D are skipped as done, B is retried, C runs once B succeeds, the report is redone
    runner = FakeRunner()
    outcome = run_plan(_plan(tmp_path), StepsFile.load(tmp_path), runner, progress=False, tick=0.05)
    assert outcome.ok and outcome.ran == ["B", "C", "report"]
    assert runner.calls == [["B", "fresh"], ["C", "fresh"]]


def test_finished_steps_are_skipped_and_a_step_whose_inputs_changed_runs_again(tmp_path):
    run_plan(_plan(tmp_path), StepsFile.load(tmp_path), FakeRunner(), progress=False, tick=0.05)
    runner = FakeRunner()
    outcome = run_plan(_plan(tmp_path), StepsFile.load(tmp_path), runner, progress=False, tick=0.05)
    assert outcome.ok and outcome.ran == [] and runner.calls == []
    plan = _plan(tmp_path)
    plan.step("D").command = lambda done: ["D", "fresh", "--set", "iterations=9"]
    (tmp_path / "D" / "old_output").write_text("x")
    outcome = run_plan(plan, StepsFile.load(tmp_path), runner, progress=False, tick=0.05)
    assert outcome.ran == ["D", "report"] and runner.calls == [["D", "fresh", "--set", "iterations=9"]]
    assert not (tmp_path / "D" / "old_output").exists()  # a fresh start clears the step's folder


def test_an_interrupted_step_resumes_from_its_checkpoint_and_one_without_starts_afresh(tmp_path, monkeypatch):
    plan = _plan(tmp_path, checkpoint=True)
    run_plan(plan, StepsFile.load(tmp_path), FakeRunner(), progress=False, tick=0.05)
    doc = json.loads((tmp_path / "steps.json").read_text())
    for name in ("C", "D"):  # the command was killed while C and D ran, 100 s into each
        doc["steps"][name]["status"] = "running"
        doc["steps"][name]["seconds"] = 100.0
    doc["steps"]["report"]["status"] = "running"
    (tmp_path / "steps.json").write_text(json.dumps(doc))
    (tmp_path / "D" / "latest.pt").unlink()  # D had not written a checkpoint yet
    (tmp_path / "D" / "partial").write_text("x")
    state = StepsFile.load(tmp_path)
    assert state.steps["C"].status == INTERRUPTED
    measured: dict[str, float] = {}
    finish = PlanProgress.finish

    def record(bar: PlanProgress, step_id: str, seconds: float, measured_: bool) -> None:
        measured[step_id] = seconds
        finish(bar, step_id, seconds, measured_)

    monkeypatch.setattr(PlanProgress, "finish", lambda bar, i, seconds, measured: record(bar, i, seconds, measured))
    runner = FakeRunner()
    outcome = run_plan(_plan(tmp_path, checkpoint=True), state, runner, progress=False, tick=0.05)
    assert outcome.ok and sorted(outcome.ran) == ["C", "D", "report"]
    assert sorted(runner.calls) == [["C", "resume"], ["D", "fresh"]]
    assert not (tmp_path / "D" / "partial").exists()
    saved = json.loads((tmp_path / "steps.json").read_text())["steps"]
    assert saved["C"]["resumed"] and not saved["D"]["resumed"] and saved["C"]["attempts"] == 2
    # the resumed step's time is both its attempts (its kind's ETA correction too); the fresh one's is its new run
    assert 100.0 < saved["C"]["seconds"] < 110.0 and saved["D"]["seconds"] < 10.0
    assert measured["C"] == saved["C"]["seconds"] and measured["D"] == saved["D"]["seconds"]


def test_the_plan_says_resume_only_where_the_run_will_resume(tmp_path):
    """An interrupted step resumes from its checkpoint only with the inputs that wrote it; the plan says so."""
    from rgsd_agents.commands.reproduce import format_plan

    run_plan(_plan(tmp_path, checkpoint=True), StepsFile.load(tmp_path), FakeRunner(), progress=False, tick=0.05)
    doc = json.loads((tmp_path / "steps.json").read_text())
    for name in ("C", "D"):
        doc["steps"][name]["status"] = "running"
    (tmp_path / "steps.json").write_text(json.dumps(doc))

    def mark(plan: Plan, name: str) -> str:
        line = next(
            x for x in format_plan(plan, StepsFile.load(tmp_path), 1).splitlines() if x.startswith(f"  {name} ")
        )
        return line.split()[2:5]

    plan = _plan(tmp_path, checkpoint=True)
    assert mark(plan, "C") == ["interrupted", "->", "resume"] and mark(plan, "D") == ["interrupted", "->", "resume"]
    plan.step("C").command = lambda done: ["C", "fresh", "--set", "iterations=9"]  # C's inputs changed
    assert mark(plan, "C") == ["interrupted", "->", "rerun"]
    runner = FakeRunner()
    run_plan(plan, StepsFile.load(tmp_path), runner, progress=False, tick=0.05)
    assert sorted(runner.calls) == [["C", "fresh", "--set", "iterations=9"], ["D", "resume"]]


def test_ctrl_c_records_the_running_step_as_interrupted_and_the_next_run_resumes_it(tmp_path):
    outcome = run_plan(
        _plan(tmp_path, checkpoint=True), StepsFile.load(tmp_path), FakeRunner(interrupt="B"), progress=False, tick=0.05
    )
    assert outcome.interrupted
    state = StepsFile.load(tmp_path)
    assert state.steps["A"].status == DONE and state.steps["B"].status == INTERRUPTED
    assert "C" not in state.steps or state.steps["C"].status == "pending"
    runner = FakeRunner()
    outcome = run_plan(_plan(tmp_path, checkpoint=True), state, runner, progress=False, tick=0.05)
    assert outcome.ok and runner.calls[0] == ["B", "resume"] and ["A", "fresh"] not in runner.calls


def test_a_resumed_step_interrupted_again_counts_its_earlier_seconds_once(tmp_path):
    run_plan(_plan(tmp_path, checkpoint=True), StepsFile.load(tmp_path), FakeRunner(), progress=False, tick=0.05)
    doc = json.loads((tmp_path / "steps.json").read_text())
    doc["steps"]["B"].update(status="running", seconds=100.0)  # stopped 100 s into B; its checkpoint is there
    (tmp_path / "steps.json").write_text(json.dumps(doc))
    outcome = run_plan(
        _plan(tmp_path, checkpoint=True), StepsFile.load(tmp_path), FakeRunner(interrupt="B"), progress=False, tick=0.05
    )
    assert outcome.interrupted and outcome.ran[0] == "B"
    saved = json.loads((tmp_path / "steps.json").read_text())["steps"]["B"]
    assert saved["resumed"] and saved["status"] == INTERRUPTED
    assert 100.0 <= saved["seconds"] < 110.0  # 100 s before, a moment now: not 200


def test_a_step_folder_a_live_process_holds_is_not_cleared(tmp_path):
    """A training of an earlier command that still runs (its command killed) keeps its folder; the step fails saying
    who holds it, and runs once that process has ended."""
    from rgsd_envs.utils.files import folder_lock

    run_plan(_plan(tmp_path), StepsFile.load(tmp_path), FakeRunner(), progress=False, tick=0.05)
    doc = json.loads((tmp_path / "steps.json").read_text())
    doc["steps"]["D"]["status"] = "running"  # no checkpoint: the rerun would start D afresh in a cleared folder
    (tmp_path / "steps.json").write_text(json.dumps(doc))
    (tmp_path / "D" / "partial").write_text("still being written")
    runner = FakeRunner()
    with folder_lock(tmp_path / "D", "rgsd train"):
        outcome = run_plan(_plan(tmp_path), StepsFile.load(tmp_path), runner, progress=False, tick=0.05)
    assert outcome.statuses["D"] == FAILED and "D" not in runner.ids
    assert "in use by pid" in StepsFile.load(tmp_path).steps["D"].error
    assert (tmp_path / "D" / "partial").read_text() == "still being written"
    runner = FakeRunner()
    outcome = run_plan(_plan(tmp_path), StepsFile.load(tmp_path), runner, progress=False, tick=0.05)
    assert outcome.ok and runner.ids == ["D"] and not (tmp_path / "D" / "partial").exists()


# -- fingerprints and folders of several commands ------------------------------------------------------------------


def _small_scale(tmp_path: Path) -> tuple[ReproduceScale, Path]:
    """The smoke scale on one seed and one style, each method's training preset a file of its own in tmp_path."""
    data = yaml.safe_load(load_scale("smoke")[1].read_text())
    presets = tmp_path / "presets"
    presets.mkdir()
    data["train"]["preset"] = str(presets / "{method}.yaml")
    data["seeds"] = 1
    data["downstream"].update(styles=["sidestep"], style_start=[])
    (presets / "rgsd.yaml").write_text("base: rgsd\n")
    (presets / "ase.yaml").write_text("base: ase_base.yaml\n")  # ase's settings one base: away
    (presets / "ase_base.yaml").write_text("base: ase\n")
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_scale(path)


def _folder_plan(scale_path: tuple[ReproduceScale, Path], out: Path, methods: list[str]) -> tuple[Plan, StepsFile]:
    state = StepsFile.load(out)
    reports: list[set[str]] = []
    plan = build_plan(
        *scale_path, "demo", out, methods, report=lambda p, done: reports.append(done), kept=state.methods()
    )
    plan.reports = reports  # type: ignore[attr-defined]
    return plan, state


def test_a_preset_edited_between_two_runs_retrains_what_it_changes_and_only_that(tmp_path, monkeypatch):
    from rgsd_agents.commands.reproduce import format_plan
    from rgsd_agents.reproduce import plan as plan_module
    from rgsd_agents.reproduce.steps import pending_steps

    scale = _small_scale(tmp_path)
    out = tmp_path / "r"
    plan, state = _folder_plan(scale, out, ["rgsd", "ase"])
    assert run_plan(plan, state, FakeRunner(), progress=False, tick=0.01).ok
    plan, state = _folder_plan(scale, out, ["rgsd", "ase"])
    assert pending_steps(plan, state) == []
    # ase's base file gets another value: its training, and what reads that training, run again
    (tmp_path / "presets" / "ase_base.yaml").write_text("base: ase\nkeep_checkpoints: 2\n")
    plan, state = _folder_plan(scale, out, ["rgsd", "ase"])
    printed = format_plan(plan, state, 2)
    assert "train/ase/seed0" in printed.split("inputs changed")[0] and "train/rgsd/seed0" in printed
    runner = FakeRunner()
    assert run_plan(plan, state, runner, progress=False, tick=0.01).ok
    assert runner.ids == ["train/ase/seed0", "eval/ase", "downstream/sidestep/ase/seed0", "aggregate"]
    assert plan.reports  # the report too
    # another rgsd version: every step runs again
    plan, state = _folder_plan(scale, out, ["rgsd", "ase"])
    assert pending_steps(plan, state) == []
    monkeypatch.setattr(plan_module, "package_versions", lambda: {"rgsd-agents": "9.9.9"})
    assert pending_steps(plan, state) == [s.id for s in plan.steps]


def test_methods_add_to_a_folder_whose_other_methods_are_kept_as_they_are(tmp_path):
    scale = _small_scale(tmp_path)
    out = tmp_path / "r"
    plan, state = _folder_plan(scale, out, ["rgsd"])
    assert run_plan(plan, state, FakeRunner(fail=("downstream/sidestep/rgsd/seed0",)), progress=False, tick=0.01)
    plan, state = _folder_plan(scale, out, ["ase"])
    assert plan.methods == ["rgsd", "ase"] and plan.kept == ["rgsd"]
    runner = FakeRunner()
    outcome = run_plan(plan, state, runner, progress=False, tick=0.01)
    # ase runs; rgsd's evaluation is not redone and its failed step is not retried (nor counted against this run)
    assert runner.ids == ["train/ase/seed0", "eval/ase", "downstream/sidestep/ase/seed0", "aggregate"]
    assert outcome.ok and outcome.statuses["downstream/sidestep/rgsd/seed0"] == FAILED
    assert {"eval/rgsd", "eval/ase"} <= plan.reports[-1]
    assert StepsFile.load(out).steps["eval/rgsd"].attempts == 1
    # naming rgsd again retries its failed step; the aggregation then takes both methods' runs
    plan, state = _folder_plan(scale, out, ["rgsd"])
    runner = FakeRunner()
    assert run_plan(plan, state, runner, progress=False, tick=0.01).ok
    assert runner.ids == ["downstream/sidestep/rgsd/seed0", "aggregate"]
    runs = runner.calls[-1][runner.calls[-1].index("--seeds") + 1 : runner.calls[-1].index("--out")]
    assert [Path(r).name for r in runs] == ["rgsd_seed0", "ase_seed0"]


def test_a_report_from_two_folders_takes_each_method_from_its_folder_and_refuses_unlike_ones(tmp_path, monkeypatch):
    """Methods run on two machines: one report, the downstream seeds aggregated over both folders' runs; folders of
    another scale, or holding the same method, are refused."""
    from rgsd_agents.downstream import report as downstream_report
    from rgsd_agents.reproduce.report import merge_reports

    scale = _small_scale(tmp_path)
    folders = {}
    for method in ("rgsd", "ase"):
        out = tmp_path / method
        plan, state = _folder_plan(scale, out, [method])
        assert run_plan(plan, state, FakeRunner(), progress=False, tick=0.01).ok
        shutil.copyfile(scale[1], out / "scale.yaml")  # as the command does
        folders[method] = out
    aggregated: list[list[str]] = []
    monkeypatch.setattr(downstream_report, "aggregate_seeds", lambda runs, out: aggregated.append(list(runs)))
    paths = merge_reports([folders["rgsd"], folders["ase"]], tmp_path / "both")
    assert [Path(r).relative_to(tmp_path).as_posix() for r in aggregated[0]] == [
        "rgsd/downstream/sidestep/rgsd_seed0",
        "ase/downstream/sidestep/ase_seed0",
    ]
    doc = json.loads(paths["json"].read_text())
    assert doc["methods"] == ["rgsd", "ase"] and doc["folders"] == ["../rgsd", "../ase"]
    # the evaluations are copied in, so the report's links stay inside its folder
    both = tmp_path / "both"
    assert sorted(p.name for p in (both / "eval").iterdir()) == ["ase", "rgsd"]
    assert (both / "eval" / "rgsd" / "latest.pt").read_text() == "checkpoint"
    assert "](../" not in paths["report"].read_text()
    (both / "eval" / "rgsd" / "stale.json").write_text("{}")
    (folders["rgsd"] / "eval" / "rgsd" / "kappa_sweep.png").write_bytes(b"png")
    merge_reports([folders["rgsd"], folders["ase"]], both)  # a second merge replaces each copy whole
    assert sorted(p.name for p in (both / "eval" / "rgsd").iterdir()) == ["kappa_sweep.png", "latest.pt"]
    with pytest.raises(ValueError, match="the same folder twice"):
        merge_reports([folders["rgsd"], tmp_path / "ase" / ".." / "rgsd"], tmp_path / "x")
    copy = shutil.copytree(folders["rgsd"], tmp_path / "rgsd_copy")
    with pytest.raises(ValueError, match="method 'rgsd' is in both"):
        merge_reports([folders["rgsd"], copy], tmp_path / "x")
    with pytest.raises(ValueError, match="not one of the --from folders"):
        merge_reports([folders["rgsd"], folders["ase"]], folders["ase"])
    data = yaml.safe_load((folders["ase"] / "scale.yaml").read_text())
    data["train"]["iterations"] = 4
    (folders["ase"] / "scale.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match="ran another scale"):
        merge_reports([folders["rgsd"], folders["ase"]], tmp_path / "x")


def test_a_combined_report_into_another_reproduce_folder_or_report_is_refused_and_writes_nothing(
    tmp_path, monkeypatch, capsys
):
    from rgsd_agents.downstream import report as downstream_report

    monkeypatch.setattr(downstream_report, "aggregate_seeds", lambda runs, out: None)  # the fake runs have no files
    scale = _small_scale(tmp_path)
    for method in ("rgsd", "ase"):
        plan, state = _folder_plan(scale, tmp_path / method, [method])
        assert run_plan(plan, state, FakeRunner(), progress=False, tick=0.01).ok
        shutil.copyfile(scale[1], tmp_path / method / "scale.yaml")  # as the command does
    other = tmp_path / "other"
    plan, state = _folder_plan(scale, other, ["rgsd"])  # a third reproduce folder, with its own rgsd evaluation
    assert run_plan(plan, state, FakeRunner(), progress=False, tick=0.01).ok
    (other / "report.md").write_text("other's report")
    evaluation = tmp_path / "evaluation"
    evaluation.mkdir()
    (evaluation / "metrics.json").write_text("{}")
    (evaluation / "report.md").write_text("rgsd eval's report")
    merge = ["reproduce", "--report-only", "--from", str(tmp_path / "rgsd"), "--from", str(tmp_path / "ase")]
    for out, what in (
        (other, "holds an rgsd reproduce folder (steps.json), whose report and evaluations the combined report"),
        (evaluation, "holds metrics.json, which a combined report does not write; give a new or empty folder"),
    ):
        before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
        assert rgsd([*merge, "--out", str(out)]) == 2
        assert capsys.readouterr().err.startswith(f"error: --out {out.resolve()}: {what}")
        assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert rgsd([*merge, "--out", str(tmp_path / "both")]) == 0
    assert rgsd([*merge, "--out", str(tmp_path / "both")]) == 0  # an earlier combined report is written over


def test_methods_added_to_a_folder_take_its_clips_and_from_goes_with_report_only(tmp_path, capsys):
    scale = _small_scale(tmp_path)
    out = tmp_path / "r"
    plan, state = _folder_plan(scale, out, ["rgsd"])
    assert run_plan(plan, state, FakeRunner(), progress=False, tick=0.01).ok
    state = StepsFile.load(out)
    state.info["motions"] = "demo"  # as the command records it
    state.save()
    from rgsd_envs.motion.library import load_motions

    (tmp_path / "clips").mkdir()
    load_motions("demo")[0].save(tmp_path / "clips" / "walk.npz")  # the plan reads the clips (their frames)
    args = ["reproduce", "--out", str(out), "--scale", str(scale[1]), "--methods", "ase", "--plan-only"]
    assert rgsd([*args, "--motions", str(tmp_path / "clips")]) == 2
    assert "holds rgsd run on --motions demo: give the same --motions" in capsys.readouterr().err
    assert rgsd([*args, "--motions", "demo"]) == 0
    printed = capsys.readouterr().out
    assert "kept: rgsd" in printed and "train/rgsd/seed0" in printed and "train/ase/seed0" in printed
    assert rgsd(["reproduce", "--out", str(out), "--from", str(out)]) == 2
    assert "--from goes with --report-only" in capsys.readouterr().err


def test_a_failing_command_s_error_line_becomes_the_step_s_error(tmp_path):
    from rgsd_agents.reproduce.steps import SubprocessRunner

    log = tmp_path / "logs" / "train__x.log"
    with pytest.raises(StepFailed, match=r"^exit status 2: error: nope.yaml: config file not found"):
        SubprocessRunner()(Step("train/x", "train", "x", "-", 1.0), ["train", "--config", "nope.yaml"], log)
    assert log.read_text().startswith("$ ") and "rgsd_agents.cli train --config nope.yaml" in log.read_text()


FAKE_STEP = """
import os, signal, sys, time
from pathlib import Path
mode, marker = sys.argv[1], Path(sys.argv[2])
if mode == "sleep":  # a step in its set-up, or one that handles no signal itself
    marker.write_text(str(os.getpid()))
    time.sleep(60)
else:  # a step whose work is done as the stop comes: it exits 0 whatever it is sent now
    while not marker.is_file():
        time.sleep(0.01)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.kill(os.getppid(), signal.SIGTERM)
"""


def test_a_stop_ends_steps_started_with_sigint_ignored_and_keeps_a_step_that_succeeded_as_done(tmp_path, monkeypatch):
    """A background job (`rgsd reproduce ... &` from a script) starts with SIGINT ignored, and so do its steps: the
    stop still ends them within seconds, and a step that exited 0 as the stop came is done, not run again."""
    from rgsd_agents.reproduce import steps as steps_module

    monkeypatch.setattr(steps_module, "STOP_GRACE_S", 20.0)
    script, marker = tmp_path / "fake_step.py", tmp_path / "sleeping.pid"
    script.write_text(FAKE_STEP)
    plan = Plan(tmp_path, "demo", ReproduceScale(), tmp_path / "scale.yaml", ["m"], [0])
    for name, mode in (("slow", "sleep"), ("quick", "stop")):
        plan.steps.append(Step(name, "eval", name, "-", 10.0, command=lambda done, mode=mode: [mode, str(marker)]))
    runner = steps_module.SubprocessRunner([sys.executable, str(script)])
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell starts a background job
    try:
        t0 = time.monotonic()
        outcome = run_plan(plan, StepsFile.load(tmp_path), runner, parallel=2, progress=False, tick=0.05)
        elapsed = time.monotonic() - t0
    finally:
        signal.signal(signal.SIGINT, previous)
    sleeping = int(marker.read_text())
    if _alive(sleeping):  # the failure below: no process left behind by the test either
        os.kill(sleeping, signal.SIGKILL)
        pytest.fail(f"the sleeping step outlived the command ({elapsed:.1f} s)")
    assert outcome.interrupted and elapsed < 10.0
    assert outcome.statuses == {"slow": INTERRUPTED, "quick": DONE}
    saved = StepsFile.load(tmp_path).steps
    assert saved["quick"].status == DONE and saved["slow"].status == INTERRUPTED and saved["slow"].seconds > 0


def test_the_eta_follows_the_measured_time_of_finished_steps(tmp_path):
    plan = _plan(tmp_path)
    bar = PlanProgress(plan, ["A", "B", "C", "D", "report"], parallel=1, disable=True)
    frac, left = bar.status({})
    assert frac == 0.0 and left == pytest.approx(41.0)
    bar.finish("A", 20.0, measured=True)  # a training took twice its stated time: so will the others
    frac, left = bar.status({})
    assert frac == pytest.approx(10.0 / 41.0) and left == pytest.approx(3 * 20.0 + 1.0)  # the report's stands


def test_a_resumed_step_counts_its_earlier_attempts_in_the_bar(tmp_path, monkeypatch):
    """A step stopped 8 s into its stated 10 is 8 s along when it resumes, not at its start."""
    plan = _plan(tmp_path, checkpoint=True)
    run_plan(plan, StepsFile.load(tmp_path), FakeRunner(), progress=False, tick=0.05)
    doc = json.loads((tmp_path / "steps.json").read_text())
    doc["steps"]["D"].update(status="running", seconds=8.0)  # D (10 s stated) was stopped 8 s in
    (tmp_path / "steps.json").write_text(json.dumps(doc))
    seen: list[tuple[float, float]] = []

    class Watching(FakeRunner):
        def __call__(self, step: Step, argv: list[str], log: Path) -> None:
            time.sleep(0.3)  # the bar refreshes while D runs
            super().__call__(step, argv, log)

    refresh = PlanProgress.refresh

    def record(bar: PlanProgress, running: dict[str, float]) -> str:
        if "D" in running:
            seen.append(bar.status(running))
        return refresh(bar, running)

    monkeypatch.setattr(PlanProgress, "refresh", record)
    outcome = run_plan(
        _plan(tmp_path, checkpoint=True), StepsFile.load(tmp_path), Watching(), progress=False, tick=0.05
    )
    assert outcome.ok and seen
    frac, left = seen[0]
    # D alone (and the report) left to run: D is at least 8 of its 10 s along, so 2 s of it and the report's 1 s remain
    assert frac >= 0.8 * 10.0 / 11.0 and left <= 2.0 + 1.0 + 0.1


def test_a_kind_s_measured_time_does_not_correct_the_other_kinds(tmp_path):
    """A pretraining that ran in a third of its stated time leaves the trainings' (iteration-time budgets) as stated."""
    steps = [
        Step("P", "pretrain", "P", "-", 150.0, command=lambda done: ["P"]),
        Step("T1", "train", "T1", "-", 1560.0, needs=("P",), command=lambda done: ["T1"]),
        Step("T2", "train", "T2", "-", 1560.0, command=lambda done: ["T2"]),
    ]
    plan = Plan(tmp_path, "demo", ReproduceScale(), tmp_path / "scale.yaml", ["m"], [0], steps)
    bar = PlanProgress(plan, ["P", "T1", "T2"], parallel=1, disable=True)
    bar.finish("P", 50.0, measured=True)
    assert bar.status({})[1] == pytest.approx(2 * 1560.0)


# -- the smoke scale end to end ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_reproduce_smoke_writes_the_paper_s_report_and_a_second_run_skips_every_step(tmp_path, capsys):
    out = tmp_path / "repro"
    args = ["reproduce", "--motions", "demo", "--out", str(out), "--scale", "smoke", "--methods", "rgsd", "ase"]
    assert rgsd([*args, "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("plan: ") and "train/rgsd/seed1" in printed and "expected time" in printed
    report = (out / "report.md").read_text()
    for heading in ("## Table 1", "## Discovered skills", "under sampled latents", "κ sweep", "## Downstream"):
        assert heading in report, heading
    table = report.split("## Table 1", 1)[1].split("##", 1)[0]
    assert sum(line.startswith(f"| {m} | ours (2 seeds)") for m in ("rgsd", "ase") for line in table.splitlines()) == 2
    assert table.count("| paper (quoted) |") == 2
    for name in ("discovery.png", "kappa_sweep.png", "downstream.png"):
        assert (out / "figures" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    doc = json.loads((out / "report.json").read_text())
    assert set(doc["imitation"]) == {"rgsd", "ase"} and doc["imitation"]["rgsd"]["walk"]["err_cm"]["n"] == 2
    assert doc["discovery"]["kappa"] == 50.0 and set(doc["downstream"]["final"]) == {
        "freestyle",
        "sidestep",
        "backward",
    }
    # the scale's style-start variant: its own rows beside the neutral start, its own folder
    assert set(doc["downstream"]["final"]["sidestep"]) == {"rgsd", "ase", "rgsd, style start"}
    assert "| sidestep | rgsd, style start |" in report and "`init_skill: style`" in report
    ds_cfg = yaml.safe_load((out / "downstream" / "sidestep" / "rgsd_style_start_seed0" / "config.yaml").read_text())
    assert ds_cfg["init_skill"] == "style"
    assert (
        yaml.safe_load((out / "downstream" / "sidestep" / "rgsd_seed0" / "config.yaml").read_text())["init_skill"]
        == "zero"
    )
    assert doc["paper_imitation"]["rgsd"]["walk"] == {"err_cm": 7.4, "fid_rank": 2}  # quoted ERR; FID as a rank
    # the tracking metrics per method and category, no paper FID as a number, the differences box
    tracking = report.split("### Tracking metrics", 1)[1].split("##", 1)[0]
    for m in ("rgsd", "ase"):
        for c in ("walk", "run", "sidestep", "backward", "punch", "all"):
            assert f"| {m} | {c} |" in tracking, (m, c)
    for col in ("ERR, world (cm)", "MPJPE (cm)", "Global MPJPE, successful (cm)", "Success rate", "Fall rate"):
        assert col in tracking, col
    from rgsd_eval.paper import PAPER_IMITATION

    for m in ("rgsd", "ase"):
        for _, fid in PAPER_IMITATION[m].values():
            assert f"| {fid:.1f} |" not in report, fid
    assert "## How this run differs from the paper" in report and "| simulator | MuJoCo | Isaac Gym |" in report
    # the downstream runs' task from their config.yaml: the demo preset's arena, the smoke scale's episodes
    assert "| goal-reaching arena | 4 x 4 m (`task.arena_size`)" in report
    assert "| goal-reaching episode | 2 s (`task.episode_seconds`)" in report
    rows = (out / "report.csv").read_text().splitlines()
    assert rows[0].startswith("section,method") and any(",paper (quoted)" in r for r in rows)
    state = json.loads((out / "steps.json").read_text())["steps"]
    assert len(state) == 2 + 4 + 2 + 12 + 6 + 2 and all(s["status"] == "done" for s in state.values())
    # every step's log shows its progress as whole lines (a training's bar), never carriage-return redraws
    train_log = (out / "logs" / "train__rgsd__seed0.log").read_text()
    assert "--no-progress" not in train_log.splitlines()[0] and "%|" in train_log
    for log in (out / "logs").glob("*.log"):
        assert "\r" not in log.read_text(), log.name

    start = time.monotonic()
    assert rgsd(args) == 0
    assert time.monotonic() - start < 30
    printed = capsys.readouterr().out
    assert "0 ran now" in printed and printed.count("done, skipped") == len(state)


def _tiny_scale(tmp_path: Path, iterations: int = 3) -> Path:
    """The smoke scale on one seed without downstream steps (the fake runs above cover their bookkeeping)."""
    data = yaml.safe_load(load_scale("smoke")[1].read_text())
    data["seeds"] = 1
    data["train"]["iterations"] = iterations
    data["downstream"].update(styles=[], style_start=[])
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _only(folder: Path, method: str, to: Path) -> Path:
    """A copy of a reproduce folder with ``method``'s steps alone: the folder another machine would have written
    with ``--methods method`` (cut from one run here rather than trained again)."""
    shutil.copytree(folder, to)
    doc = json.loads((to / "steps.json").read_text())
    other = [s for s in doc["steps"] if s.split("/")[-2 if s.split("/")[-1].startswith("seed") else -1] != method]
    for step_id in other:
        output = doc["steps"].pop(step_id).get("output")
        if output and step_id.split("/")[0] not in ("aggregate", "report"):
            shutil.rmtree(to / output)
    doc["info"]["methods"] = [method]
    (to / "steps.json").write_text(json.dumps(doc))
    return to


@pytest.mark.slow
def test_methods_run_one_after_the_other_into_one_folder_give_one_report_and_two_folders_one_too(tmp_path, capsys):
    out = tmp_path / "repro"
    args = ["reproduce", "--motions", "demo", "--out", str(out), "--scale", str(_tiny_scale(tmp_path)), "--no-progress"]
    assert rgsd([*args, "--methods", "rgsd"]) == 0
    rgsd_only = tmp_path / "rgsd_only"
    shutil.copytree(out, rgsd_only)
    capsys.readouterr()
    assert rgsd([*args, "--methods", "ase"]) == 0
    printed = capsys.readouterr().out
    assert "kept: rgsd" in printed and "start  eval/rgsd" not in printed
    report = (out / "report.md").read_text()
    table = report.split("## Table 1", 1)[1].split("##", 1)[0]
    assert [ln.split(" | ")[0] for ln in table.splitlines() if "| ours (1 seed)" in ln] == ["| rgsd", "| ase"]
    doc = json.loads((out / "report.json").read_text())
    assert list(doc["imitation"]) == ["rgsd", "ase"] and set(doc["kappa_sweep"]["spread"]) == {"rgsd", "ase"}
    assert json.loads((out / "steps.json").read_text())["steps"]["eval/rgsd"]["attempts"] == 1

    # the two methods as two machines would have run them: one report from both folders, the same numbers
    ase_only = _only(out, "ase", tmp_path / "ase_only")
    merged = tmp_path / "merged"
    assert (
        rgsd(["reproduce", "--report-only", "--from", str(rgsd_only), "--from", str(ase_only), "--out", str(merged)])
        == 0
    )
    both = json.loads((merged / "report.json").read_text())
    assert both["imitation"] == doc["imitation"] and both["kappa_sweep"] == doc["kappa_sweep"]
    assert both["folders"] == ["../rgsd_only", "../ase_only"]
    assert "(eval/ase/ase_seed0/kappa_sweep.png)" in (merged / "report.md").read_text()  # its own copy
    assert (merged / "eval" / "ase" / "ase_seed0" / "kappa_sweep.png").is_file()
    # a report written again from its folder alone counts the seeds the runs had, not the rebuilt plan's none
    assert rgsd(["reproduce", "--report-only", "--out", str(out)]) == 0
    assert "mean ± standard deviation over its 1 seed (one evaluation per seed" in (out / "report.md").read_text()
    capsys.readouterr()
    code = rgsd(["reproduce", "--report-only", "--from", str(rgsd_only), "--from", str(out), "--out", str(merged)])
    assert code == 2 and "method 'rgsd' is in both" in capsys.readouterr().err


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.is_file() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


@pytest.mark.slow
def test_sighup_during_a_step_stops_it_at_a_checkpoint_and_leaves_no_process_behind(tmp_path):
    """The terminal closes while a training runs: the command stops it as on Ctrl-C (it checkpoints) and ends."""
    out = tmp_path / "repro"
    argv = ["reproduce", "--motions", "demo", "--out", str(out), "--scale", str(_tiny_scale(tmp_path, 100000))]
    with open(tmp_path / "reproduce.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rgsd_agents.cli", *argv, "--methods", "ase", "--no-progress"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),  # as from a terminal, even under nohup
        )
    child = None
    try:
        run = out / "runs" / "ase_seed0"
        deadline = time.monotonic() + 120
        while not (run / "checkpoints" / "latest.pt").is_file():  # the training is under way
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "reproduce.log").read_text()
            time.sleep(0.2)
        child = int((run / ".lock").read_text().split()[1])
        assert _alive(child)
        proc.send_signal(signal.SIGHUP)
        assert proc.wait(timeout=150) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
        left = child is not None and _alive(child)
        if left:  # the failure below: no training left behind by the test either
            os.kill(child, signal.SIGKILL)
    assert not left
    step = json.loads((out / "steps.json").read_text())["steps"]["train/ase/seed0"]
    assert step["status"] == "interrupted" and step["seconds"] > 0
    assert "stopped by SIGTERM after iteration" in (out / step["log"]).read_text()  # with its checkpoint


# -- the report from an evaluation's numbers ----------------------------------------------------------------------


def _run_metrics(err: float, method: str) -> dict:
    """One run's metrics.json entry: every category's tracking numbers from one ERR (fabricated)."""
    cats = ("walk", "run", "sidestep", "backward", "punch")
    scope = {
        "clips": 1, "rollouts": 4, "err_cm": err, "err_until_fall_cm": err - 1, "mpjpe_cm": err / 2, "global_mpjpe_succ_cm": err / 3,
        "success_rate": 0.75, "fall_rate": 0.25, "fid": err / 10, "unstable": 0,
    }  # fmt: skip
    if method != "fb_cpr":  # Meta Motivo's stands for a metrics.json written before ERR to deviation
        scope["err_until_deviation_cm"] = err - 2
    return {
        "method": method,
        "latent": {"fb_cpr": "stored", "rgsd": "encoder"}.get(method, "best-of-500"),
        "simulator": "mujoco",
        "training_samples": 3 * 16 * 8,
        "action_noise": {"std": 0.2, "min": 0.2, "max": 0.2, "source": "policy.pt action_std"},
        "imitation": {
            "clips": {},
            "categories": {c: {**scope, "category": c} for c in cats},
            "all": {**scope, "clips": 5, "rollouts": 20},
        },
        "diversity": {},
    }


def test_the_report_sets_the_paper_s_err_beside_ours_and_its_fid_only_as_a_rank(tmp_path):
    from rgsd_agents.reproduce.report import write_report
    from rgsd_eval.paper import FID_NOT_COMPARABLE, PAPER_IMITATION

    scale, path = load_scale("smoke")
    plan = build_plan(scale, path, "demo", tmp_path, methods=["rgsd", "fb_cpr"], seeds=2)
    cats = ["walk", "run", "sidestep", "backward", "punch"]
    for m, e in (("rgsd", 10.0), ("fb_cpr", 20.0)):  # each method's evaluation of its two seeds
        doc = {
            "clips": [{"name": f"demo_{c}", "category": c, "frames": 91} for c in cats],
            "categories": cats,
            "config": {"action_noise": "policy", "discovery_kappa": 50.0, "kappas": [20.0, 100.0, 1000.0]},
            "runs": {plan.run_dir(m, k).name: _run_metrics(e + k, m) for k in (0, 1)},
        }
        if m == "fb_cpr":  # an evaluation by another rgsd than the report's; rgsd's by one that recorded none
            doc["provenance"] = {"rgsd": {"version": "0.0.9", "git": "abc123"}, "packages": {"torch": "2.4.0"}}
            doc["runs"][plan.run_dir(m, 1).name]["policy_provenance"] = {"rgsd": {"version": "0.0.8", "git": "def456"}}
        plan.eval_dir(m).mkdir(parents=True)
        (plan.eval_dir(m) / "metrics.json").write_text(json.dumps(doc))
    paths = write_report([(plan, {eval_id("rgsd"), eval_id("fb_cpr")})], plan.out)
    md = paths["report"].read_text()
    table = md.split("## Table 1", 1)[1].split("###", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("|")]
    assert rows[0].startswith(
        "| Method | Source | Frame | Rollouts per clip | Walk ERR | Walk ERR to fall | Walk ERR to deviation | Walk FID "
        "| Run ERR |"
    )
    assert rows[2].startswith(
        "| rgsd | ours (2 seeds) | world | 4 | 10.5 ± 0.7 | 9.5 ± 0.7 | 8.5 ± 0.7 | 1.05 ± 0.07, rank 1 |"
    )
    assert rows[2].endswith("| 10.5 ± 0.7 / 9.5 ± 0.7 / 8.5 ± 0.7 / 1.05 ± 0.07 |")  # ERR / to fall / to dev. / FID
    # the paper's row: its ERR, and its FID only as a rank among the methods here (Meta Motivo's FID is lower)
    assert rows[3].startswith(
        "|  | paper (quoted) | not stated | 500 | 7.4 | - | - | rank 2 of 2 | 7.7 | - | - | rank 2 of 2 |"
    )
    # an evaluation without ERR to deviation still renders, the column n/a
    assert "| fb_cpr | ours (2 seeds) | world | 4 | 20.5 ± 0.7 | 19.5 ± 0.7 | n/a | 2.05 ± 0.07, rank 2 |" in table
    assert "| 10.9 | - | - | rank 1 of 2 |" in table
    assert all(len(r.split("|")) == len(rows[0].split("|")) for r in rows)
    for method in ("rgsd", "meta-motivo"):
        for _, fid in PAPER_IMITATION[method].values():
            assert f"| {fid:.1f} |" not in md, fid
    assert FID_NOT_COMPARABLE in md
    tracking = md.split("### Tracking metrics", 1)[1].split("##", 1)[0]
    assert (
        "| Method | Category | ERR, world (cm) | MPJPE (cm) | Global MPJPE, successful (cm) | Success rate |"
        in tracking
    )
    assert "| rgsd | walk | 10.5 ± 0.7 | 5.2 ± 0.4 | 3.5 ± 0.2 | 0.75 ± 0.00 | 0.25 ± 0.00 |" in tracking
    box = md.split("## How this run differs from the paper", 1)[1].split("## Table 1", 1)[0]
    assert "| simulator | MuJoCo | Isaac Gym |" in box and "rgsd seed 0: 384 samples" in box
    assert "4 per clip, each run's own policy action std: rgsd 0.2 (policy.pt action_std)" in box
    assert "whenever the robot fell, the episode was terminated" in box and "; beside it ERR to fall" in box
    assert "| discovery motions | every clip, FID per clip and category at κ = 50 |" in box
    # the clip latent each method was scored with, from its runs' rule (Meta Motivo's from its method where the
    # evaluation recorded none), beside the paper's one latent per motion
    assert (
        "| clip latent | rgsd: z_m, its encoder's embedding of the clip; fb_cpr: B averaged over the clip | one per "
        "motion (Section 5.1)" in box
    )
    report = json.loads(paths["json"].read_text())
    assert report["paper_imitation"]["rgsd"]["walk"] == {"err_cm": 7.4, "fid_rank": 2}
    assert report["imitation"]["fb_cpr"]["all"]["success_rate"]["mean"] == 0.75
    assert report["training_samples"] == {"rgsd": {"0": 384, "1": 384}, "fb_cpr": {"0": 384, "1": 384}}
    assert report["latents"] == {"rgsd": {"0": "encoder", "1": "encoder"}, "fb_cpr": {"0": "stored", "1": "stored"}}
    csv_rows = paths["csv"].read_text().splitlines()
    assert "imitation,rgsd,walk,,,,fid_rank,value,2,paper (quoted)" in csv_rows
    # the code that wrote the report, and each evaluation's own record ("not recorded": an older rgsd's file)
    from rgsd_envs.utils.provenance import provenance, provenance_text

    assert report["provenance"]["report"] == provenance()
    assert report["provenance"]["evaluations"]["rgsd"] is None
    assert report["provenance"]["evaluations"]["fb_cpr"]["rgsd"]["git"] == "abc123"
    code = md.split("## Code", 1)[1].split("## Steps", 1)[0]
    assert f"| this report | {provenance_text(provenance())} |" in code
    assert "| `eval/rgsd` | not recorded |" in code
    assert "| `eval/fb_cpr` | rgsd 0.0.9 (git abc123); torch 2.4.0 |" in code
    assert "| fb_cpr seed 1's policy | rgsd 0.0.8 (git def456) |" in code  # trained by yet other code
    assert "| fb_cpr seed 0's policy | not recorded |" in code and "| rgsd seed 1's policy | not recorded |" in code
    assert report["provenance"]["policies"]["fb_cpr"] == {
        "0": None,
        "1": {"rgsd": {"version": "0.0.8", "git": "def456"}},
    }


def test_the_report_states_the_downstream_task_its_runs_trained_on_and_when_their_training_differs(tmp_path):
    """A report of a small arena and short budget says so beside its success rates: each goal-reaching setting
    from the runs' config.yaml, beside the paper's, and a warning where the methods' runs stopped at different
    training steps."""
    from rgsd_agents.reproduce.report import write_report
    from rgsd_eval.paper import PAPER_DOWNSTREAM_SETUP

    scale, path = load_scale("smoke")
    plan = build_plan(scale, path, "demo", tmp_path, methods=["rgsd", "ase"], seeds=1)
    runs = [plan.step(f"downstream/sidestep/{m}/seed0") for m in ("rgsd", "ase")]
    for i, step in enumerate(runs):  # fabricated runs: one states every field, the other predates eval_episodes
        cfg = {
            "low_level": str(tmp_path / "low"), "seed": 0, "max_minutes": 1.0, "iterations": 100000, "num_envs": 64,
            "horizon": 16, "task": {"style": "sidestep", "arena_size": 4.0, "min_goal_distance": 1.0,
                                    "episode_seconds": 10.0, "success_radius": 0.5, "low_level_steps": 5},
        }  # fmt: skip
        if i == 0:
            cfg["eval_episodes"] = 64
        step.output.mkdir(parents=True)
        (step.output / "config.yaml").write_text(yaml.safe_dump(cfg))
    curve = {"mean": [0.0, 0.25], "std": [0.0, 0.0], "min": [0.0, 0.25], "max": [0.0, 0.25]}
    groups = [
        {"style": "sidestep", "method": m, "init_skill": "zero", "seeds": [0], "runs": [str(s.output)],
         "curves": {"eval/success_rate": {**curve, "step": [0, last]}}}
        for m, s, last in (("rgsd", runs[0], 4096), ("ase", runs[1], 2048))
    ]  # fmt: skip
    plan.seeds_dir.mkdir(parents=True)
    (plan.seeds_dir / "seeds.json").write_text(json.dumps({"groups": groups}))
    paths = write_report([(plan, {s.id for s in runs})], plan.out, plan.seeds_dir)
    md = paths["report"].read_text()
    box = md.split("## How this run differs from the paper", 1)[1].split("## Table 1", 1)[0]
    paper = PAPER_DOWNSTREAM_SETUP
    for row in (
        f"| goal-reaching arena | 4 x 4 m (`task.arena_size`), start at its centre, the goal at least 1 m away | "
        f"{paper['goal-reaching arena']} |",
        "| goal-reaching episode | 10 s (`task.episode_seconds`); a decision every 5 control steps (6 Hz) |",
        "| goal-reaching success | within 0.5 m of the goal at a decision (`task.success_radius`, tested every 5 "
        "control steps) |",
        "| goal-reaching training | 1 min (`max_minutes`; at most 100000 iterations) of 64 worlds x 16 decisions per "
        "run: per style, method and seed |",
    ):
        assert row in box, row
    # the older run's config.yaml: the default it evaluated with, counted apart
    evaluation = next(line for line in box.splitlines() if line.startswith("| goal-reaching evaluation |"))
    assert "64 deterministic episodes (`eval_episodes`) per evaluation (1 run)" in evaluation
    assert "16 deterministic episodes (`eval_episodes`) per evaluation (1 run)" in evaluation
    assert "20 x 20 m arena" in paper["goal-reaching arena"]
    downstream = md.split("## Downstream", 1)[1].split("## Code", 1)[0]
    assert "the goal-reaching rows of the box at the top" in downstream
    assert "| sidestep | rgsd | 0.25 | - | 4096 | 1 |" in downstream
    assert "**This table compares unequal training**" in downstream and "sidestep 2048 to 4096" in downstream
    doc = json.loads(paths["json"].read_text())
    assert doc["setup"]["ours"]["goal-reaching arena"].startswith("4 x 4 m")
    assert doc["setup"]["paper"]["goal-reaching arena"] == paper["goal-reaching arena"]
    # no finished downstream run: the rows say so, and equal steps give no warning
    for g in groups:
        g["curves"]["eval/success_rate"]["step"] = [0, 4096]
    (plan.seeds_dir / "seeds.json").write_text(json.dumps({"groups": groups}))
    md = write_report([(plan, set())], plan.out, plan.seeds_dir)["report"].read_text()
    assert "| goal-reaching arena | no finished downstream run's config.yaml found |" in md
    assert "unequal training" not in md


def test_styles_the_motions_cannot_ground_are_left_out_of_the_plan_with_a_warning_and_the_report_says_so(
    tmp_path, capsys
):
    from rgsd_agents.reproduce.report import write_report
    from rgsd_envs.motion.library import load_motions

    motions = tmp_path / "motions"
    motions.mkdir()
    for clip in load_motions("demo"):
        if clip.category in ("walk", "punch"):
            clip.save(motions / f"{clip.name}.npz")
    out = tmp_path / "r"
    args = ["reproduce", "--motions", str(motions), "--out", str(out), "--scale", "smoke", "--methods", "rgsd"]
    assert rgsd([*args, "--seeds", "1", "--plan-only"]) == 0
    captured = capsys.readouterr()
    warnings = [line for line in captured.err.splitlines() if line.startswith("warning:")]
    assert [w.split("'")[1] for w in warnings] == ["sidestep", "backward"], captured.err
    assert "categories ['punch', 'walk']" in warnings[0]
    assert "downstream/freestyle/rgsd/seed0" in captured.out and "downstream/sidestep" not in captured.out
    scale, path = load_scale("smoke")
    plan = build_plan(scale, path, str(motions), out, methods=["rgsd"], seeds=1)
    md = write_report([(plan, set())], plan.out)["report"].read_text()
    assert "- sidestep: not run: style 'sidestep' needs reference clips of category 'sidestep'" in md


def test_a_registered_method_without_the_scale_s_preset_is_left_out_with_a_warning_and_the_report_says_so(
    tmp_path, monkeypatch, capsys
):
    """Every method by default: one without ``<method>_paper`` is left out, the others still run; named in
    ``--methods`` it is an error naming the preset to add."""
    from rgsd_agents.methods import METHODS
    from rgsd_agents.methods.metra import METRA
    from rgsd_agents.reproduce.report import recorded_plan, write_report

    monkeypatch.setitem(METHODS, "unlisted", METRA)
    scale, path = load_scale("gpu")
    plan = build_plan(scale, path, "demo", tmp_path / "r", seeds=1)
    assert "unlisted" not in plan.methods and plan.methods == [m for m in METHODS if m != "unlisted"]
    assert not any(s.method == "unlisted" for s in plan.steps)
    why = (
        "no training config at this scale (train.preset '{method}_paper'): no preset 'unlisted_paper' (add "
        "rgsd_agents/presets/unlisted_paper.yaml)"
    )
    assert plan.dropped_methods == {"unlisted": why}
    md = write_report([(plan, set())], plan.out)["report"].read_text()
    assert f"- unlisted: not run: {why}." in md
    state = StepsFile(
        plan.out / "steps.json", {"train/rgsd/seed0": StepState()}, {"dropped_methods": {"unlisted": why}}
    )
    state.save()
    shutil.copyfile(path, plan.out / "scale.yaml")
    assert recorded_plan(plan.out)[0].dropped_methods == {"unlisted": why}  # --report-only says so too
    with pytest.raises(ValueError) as err:
        build_plan(scale, path, "demo", tmp_path / "r", methods=["rgsd", "unlisted"], seeds=1)
    assert str(err.value) == (
        "--methods: method 'unlisted' has no training config at this scale (train.preset '{method}_paper'): no preset "
        "'unlisted_paper' (add rgsd_agents/presets/unlisted_paper.yaml); or leave unlisted out"
    )
    cli = ["reproduce", "--motions", "demo", "--out", str(tmp_path / "cli"), "--scale", "smoke", "--plan-only"]
    assert rgsd([*cli, "--seeds", "1"]) == 0
    captured = capsys.readouterr()
    assert f"warning: method 'unlisted' left out of the plan: {why.replace('_paper', '')}" in captured.err
    assert "train/rgsd/seed0" in captured.out and "train/unlisted" not in captured.out
    assert rgsd([*cli, "--methods", "unlisted"]) == 2
    assert "error: --methods: method 'unlisted' has no training config at this scale" in capsys.readouterr().err


def test_the_discovery_fid_and_the_sweep_show_each_method_s_skill_dim_and_latent_angle(tmp_path):
    """kappa means different neighbourhoods at different latent dims: both tables name each method's dim and the
    angle its kappa gave."""
    from rgsd_agents.reproduce.report import write_report

    scale, path = load_scale("smoke")
    plan = build_plan(scale, path, "demo", tmp_path, methods=["rgsd", "fb_cpr"], seeds=1)
    cats = ["walk", "run", "sidestep", "backward", "punch"]
    for m, dim, angles in (("rgsd", 16, (48.0, 30.0, 3.0)), ("fb_cpr", 256, (85.0, 79.0, 42.0))):
        run = _run_metrics(10.0, m)
        run["skill_dim"] = dim
        run["diversity"] = {
            f"{k:g}": {
                "kappa": k,
                "roles": roles,
                "clips": {
                    "demo_run": {
                        "latent_angle_deg": a,
                        "path_spread_m": 0.5,
                        "root_spread_m": 0.6,
                        "err_cm": 9.0,
                        "fid": 1.0,
                    }
                },
                "categories": {c: {"fid": 2.0} for c in cats},
                "mean": {"latent_angle_deg": a},
            }
            for k, a, roles in (
                (20.0, angles[0], ["sweep"]),
                (50.0, angles[1], ["discovery"]),
                (1000.0, angles[2], ["sweep"]),
            )
        }
        doc = {
            "clips": [{"name": f"demo_{c}", "category": c, "frames": 91} for c in cats],
            "categories": cats,
            "config": {"action_noise": "policy", "discovery_kappa": 50.0, "kappas": [20.0, 1000.0]},
            "runs": {plan.run_dir(m, 0).name: run},
        }
        plan.eval_dir(m).mkdir(parents=True)
        (plan.eval_dir(m) / "metrics.json").write_text(json.dumps(doc))
    md = write_report([(plan, {eval_id("rgsd"), eval_id("fb_cpr")})], plan.out)["report"].read_text()
    sampled = md.split("### FID per category under sampled latents", 1)[1].split("##", 1)[0]
    assert "| Method | Skill dim | Latent angle (deg) | Walk FID |" in sampled
    assert "| rgsd | 16 | 30.0 | 2.00 |" in sampled and "| fb_cpr | 256 | 79.0 | 2.00 |" in sampled
    assert "compare by latent angle, not by κ" in sampled
    sweep = md.split("## Diversity control", 1)[1].split("## Downstream", 1)[0]
    assert "| Method | Skill dim | Clip | κ=20 | κ=1000 |" in sweep
    assert "| rgsd | 16 | demo_run | 0.500 (48°) | 0.500 (3°) |" in sweep
    assert "| fb_cpr | 256 | demo_run | 0.500 (85°) | 0.500 (42°) |" in sweep


def test_an_evaluation_step_states_its_world_steps_on_the_plan_s_clips(tmp_path):
    """The scale's stated evaluation time is for clip sets like the paper's; where the evaluation's own estimate on
    the plan's clips (its world steps at the measured rate) is longer, the step states that."""
    import dataclasses

    from rgsd_envs.motion.library import MotionLib
    from rgsd_eval.config import EvalConfig
    from rgsd_eval.evaluate import eval_plan

    scale, path = load_scale("smoke")
    stated = 60.0 * scale.eval.estimate_minutes_per_run
    demo = build_plan(scale, path, "demo", tmp_path / "a", methods=["rgsd"], seeds=1)
    assert (demo.clips, demo.frames) == (5, 449)
    assert demo.step(eval_id("rgsd")).estimate_s == pytest.approx(stated)  # a few seconds of rollouts: the stated
    settings = {**scale.eval.settings, "rollouts": 2000}
    big = dataclasses.replace(scale, eval=dataclasses.replace(scale.eval, settings=settings))
    plan = build_plan(big, path, "demo", tmp_path / "b", methods=["rgsd"], seeds=1)
    cfg = EvalConfig.for_protocol(scale.eval.protocol, **settings)
    expected = eval_plan(MotionLib("demo"), cfg, best_of=0, render=cfg.video).seconds()
    assert expected > 2 * stated
    assert plan.step(eval_id("rgsd")).estimate_s == pytest.approx(expected)
    # an evaluation limited to 2 of the 5 clips states the time of those 2
    capped = dataclasses.replace(big, eval=dataclasses.replace(big.eval, settings={**settings, "max_clips": 2}))
    plan = build_plan(capped, path, "demo", tmp_path / "c", methods=["rgsd"], seeds=1)
    lib, cfg2 = MotionLib("demo"), EvalConfig.for_protocol(scale.eval.protocol, **{**settings, "max_clips": 2})
    ids = cfg2.evaluated_clip_ids(lib.categories)
    assert len(ids) == 2
    two = eval_plan(lib.subset(ids), cfg2, best_of=0, render=cfg2.video)
    assert plan.step(eval_id("rgsd")).estimate_s == pytest.approx(max(stated, two.seconds()))
    assert plan.step(eval_id("rgsd")).estimate_s < expected
