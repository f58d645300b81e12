"""``benchmarks/gpu_check.py --quick --smoke``: the GPU check's one-command form runs every step on the CPU (warp on its
CPU device) and gpu_check.md has every section, so on a GPU machine it runs the first time."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "gpu_check.py"
QUICK = ["--quick", "--smoke", "--methods", "rgsd", "fb_cpr"]  # one PPO and one off-policy method: both trainers


@pytest.fixture(scope="module")
def gpu_check(load_benchmark):
    return load_benchmark("gpu_check")


def _run(out: Path, *extra: str, expect: int = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), *extra], cwd=REPO, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == expect, proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc


def _step_results(md: str) -> dict[str, str]:
    return {
        cells[1].strip(): cells[2].strip()
        for cells in (line.split("|") for line in md.split("## Steps")[1].split("## ")[0].splitlines())
        if len(cells) > 3 and cells[1].strip() not in ("step", "---")
    }


@pytest.mark.slow
def test_the_quick_check_split_over_two_commands_runs_every_step_and_reports_every_section(gpu_check, tmp_path):
    """A lent GPU machine runs 10 minutes a command: ``--steps`` splits the check, steps.json carries the results,
    and the same command with ``--resume`` runs only what is left; the CUDA tests run beside the methods step."""
    out = tmp_path / "gpu_check"
    console = _run(out, *QUICK, "--steps", "demo_motions,import_motions,throughput,methods,cuda_tests").stdout
    assert "[gpu_check] cuda_tests: skipped in " in console  # as the report says, not "pass"
    first = json.loads((out / "steps.json").read_text())
    assert first["methods"]["status"] == "pass" and first["sharing"]["status"] == "not run"
    assert first["methods"]["extra"]["beside"] == ["cuda_tests"] and first["cuda_tests"]["status"] == "skipped"
    assert "ran beside methods" in first["cuda_tests"]["note"] and (out / "logs" / "cuda_tests.log").is_file()
    second = _run(out, *QUICK, "--resume").stdout
    assert "[gpu_check] --resume: sharing, parity" in second
    ran = {line.split(":")[0].split()[1] for line in second.splitlines() if " in " in line and "[gpu_check]" in line}
    assert ran == {"sharing", "parity"}, second  # the passed steps were not run again
    kept = json.loads((out / "steps.json").read_text())
    assert all(kept[n] == first[n] for n in ("demo_motions", "throughput", "methods", "cuda_tests"))
    md = (out / "gpu_check.md").read_text()
    headings = [line[3:] for line in md.splitlines() if line.startswith("## ")]
    assert headings == list(gpu_check.SECTIONS)
    assert _step_results(md) == {
        "cuda_tests": "skipped",  # CI has no GPU: every cuda test skipped, cleanly
        "demo_motions": "pass",
        "import_motions": "pass",
        "throughput": "pass",
        "train": "not run",  # the full check's longer training and its evaluation
        "eval": "not run",
        "methods": "pass",
        "parity": "pass",
        "sharing": "pass",
    }
    section = {h: md.split(f"## {h}\n")[1].split("\n## ")[0] for h in headings}
    assert "| 8 | env (" in section["Throughput"] and "torch profiler" in section["Throughput"]
    assert "Wall seconds of each row at N = 8, setup included" in section["Throughput"]
    for method in ("rgsd", "fb_cpr"):  # trained, then evaluated under the paper protocol
        assert f"| {method} | pass |" in section["Methods"]
    assert section["Methods"].count("| pass |") == 4  # each of the two: trained and evaluated
    assert "The cuda_tests step ran beside it" in section["Methods"]
    assert "RGSD's paper preset alone" in section["Goals"]  # the training goal's clean figure, not the shared one
    assert "No train step ran; the figure is RGSD's paper preset alone" in section["Training"]
    assert "Downstream step: pass" in section["Methods"]
    assert "| 1 | yes |" in section["Sharing"] and "| 2 | yes |" in section["Sharing"]
    assert "all clips within tolerance: True" in section["Backend parity"]
    assert "not judged (--smoke: CPU)" in section["Goals"]
    methods = json.loads((out / "methods" / "concurrent.json").read_text())["groups"]["methods"]
    assert set(methods["members"]) == {"rgsd", "fb_cpr"} and methods["passed"]
    assert all(r["exit_code"] == 0 and r["err_cm"] for r in methods["eval"].values())


def test_steps_are_checked_and_put_in_run_order(gpu_check):
    assert gpu_check.parse_steps("eval, train") == ["train", "eval"]
    with pytest.raises(argparse.ArgumentTypeError, match=r"unknown step.*'bogus'.*valid: cuda_tests"):
        gpu_check.parse_steps("train,bogus")
    assert set(gpu_check.QUICK_STEPS) <= set(gpu_check.STEP_NAMES)
    # the throughput first on a machine lent by the minute, alone on the GPU; the CUDA tests beside the methods
    # step; the sharing table after the methods step whose RGSD encoder it reuses
    order = gpu_check.QUICK_STEPS
    assert order.index("throughput") < order.index("methods") < order.index("sharing")
    assert gpu_check.QUICK_BESIDE == {"cuda_tests": "methods"}
    assert order.index("cuda_tests") == order.index("methods") + 1


def test_a_step_with_no_time_left_is_not_started_and_fails_the_check(tmp_path):
    """Past ``--deadline-minutes`` no step starts: it is reported as not run, out of time, and the check fails."""
    out = tmp_path / "late"
    _run(out, "--smoke", "--steps", "demo_motions", "--deadline-minutes", "0", expect=1)
    steps = json.loads((out / "steps.json").read_text())
    assert steps["demo_motions"]["status"] == "not run" and "out of time" in steps["demo_motions"]["note"]
    assert not (out / "motions").exists()


def test_the_concurrent_trainings_smoke_drops_settings_a_method_has_no_field_for(load_benchmark):
    ct: ModuleType = load_benchmark("concurrent_trainings")
    args = argparse.Namespace(
        minutes=0.1, motions=Path("m"), encoder=Path("e.pt"), smoke=True, device="cpu"
    )  # fmt: skip
    for method in ct.method_names():
        argv = ct.train_argv(method, Path("run"), args)
        sets = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
        assert f"{method}_paper" in argv and "env.backend=warp" in sets
        assert not set(sets) & set(ct.SMOKE_SKIP.get(method, ()))
        assert ("encoder=e.pt" in sets) == (method != "fb_cpr")  # the off-policy config has no encoder field


def test_resumed_concurrent_trainings_keep_only_finished_groups_measured_alike(load_benchmark, tmp_path):
    """``--resume`` keeps a group an earlier command finished (the same methods, all trained, evaluated where asked)
    on the same device and budget; a group cut short, failed or measured otherwise runs again."""
    ct: ModuleType = load_benchmark("concurrent_trainings")
    args = argparse.Namespace(device="cuda", minutes=0.4, eval=False, downstream=False)
    done = {"passed": True, "members": {f"rgsd_{i}": {"method": "rgsd", "exit_code": 0} for i in range(2)}}
    groups = {"x1": ["rgsd"], "x2": ["rgsd", "rgsd"], "x4": ["rgsd"] * 4}
    path = tmp_path / "concurrent.json"
    x1 = {"passed": False, "members": {"rgsd": {"method": "rgsd", "exit_code": None}}}  # stopped at its limit
    path.write_text(json.dumps({"device": "cuda", "minutes": 0.4, "groups": {"x1": x1, "x2": done}}))
    assert list(ct.kept_groups(path, groups, args)) == ["x2"]
    assert ct.kept_groups(path, {"x2": ["rgsd", "ase"]}, args) == {}  # other methods under the same label
    for changed in ({"minutes": 0.67}, {"device": "cpu"}):
        assert ct.kept_groups(path, groups, argparse.Namespace(**{**vars(args), **changed})) == {}
    assert ct.kept_groups(tmp_path / "missing.json", groups, args) == {}
    evaluated = argparse.Namespace(**{**vars(args), "eval": True})
    assert not ct.finished(done, groups["x2"], evaluated)  # asked for evaluations it does not have
    ok, failed = {"exit_code": 0}, {"exit_code": 1}
    assert ct.finished({**done, "eval": {"rgsd_0": ok, "rgsd_1": ok}}, groups["x2"], evaluated)
    assert not ct.finished({**done, "eval": {"rgsd_0": ok, "rgsd_1": failed}}, groups["x2"], evaluated)
    with_rgsd = {"passed": True, "members": {"rgsd": {"method": "rgsd", "exit_code": 0}}}
    downstream = argparse.Namespace(**{**vars(args), "downstream": True})
    assert not ct.finished(with_rgsd, ["rgsd"], downstream)
    assert ct.finished({**with_rgsd, "downstream": ok}, ["rgsd"], downstream)


def test_the_rate_together_counts_only_the_window_in_which_every_training_iterated(gpu_check):
    """Two trainings at 100 samples/s each while both run; the second goes on alone at 300 samples/s after the
    first stops: together they made 200 samples/s, although their medians sum to 400."""
    first = [(t, 100.0 * t) for t in range(0, 11)]
    second = [(t, 100.0 * t) for t in range(0, 11)] + [(t, 1000.0 + 300.0 * (t - 10)) for t in range(11, 31)]
    rate, seconds = gpu_check.overlap_sps([first, second])
    assert rate == pytest.approx(200.0) and seconds == 10
    late = [(t, 50.0 * t) for t in (9.5, 10.0)]  # started as the others stopped: one iteration inside the window
    assert gpu_check.overlap_sps([first, second, late + [(11.0, 600.0)]])[0] is None
    assert gpu_check.overlap_sps([]) == (None, 0.0) and gpu_check.overlap_sps([first, [(0, 0.0)]])[0] is None


def test_the_gpus_idle_time_is_split_by_the_host_phase_running_through_it(load_benchmark):
    """``gpu_throughput.py --profile``'s reading of a chrome trace: GPU work 0-10 and 12-20 us (a memset and a
    kernel), then 25-30; the host observes through 9-11 and waits in the read through 13-26: of the GPU's 7 idle us,
    1 falls in the observations, 5 in the read and 1 in no timed phase, over one step."""
    gt = load_benchmark("gpu_throughput")
    observe, read = "observations, termination", "the one read (host waits for the device)"

    def x(cat: str, name: str, ts: float, dur: float) -> dict:
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur}

    trace = {
        "traceEvents": [
            x("gpu_memset", "memset", 0, 10), x("kernel", "k", 12, 6), x("kernel", "k2", 14, 6),
            x("kernel", "k3", 25, 5), x("user_annotation", observe, 9, 2), x("user_annotation", read, 13, 13),
            x("cpu_op", "aten::add", 20, 3), {"ph": "i", "name": "marker", "ts": 5},
        ]
    }  # fmt: skip
    idle = gt.device_idle_by_phase(trace, [observe, read, "encoder reward"], steps=1)
    assert idle == pytest.approx(
        {"GPU busy": 0.023, "GPU idle": 0.007, observe: 0.001, read: 0.005, gt.OUTSIDE_PHASES: 0.001}
    )
    assert gt.device_idle_by_phase({"traceEvents": [x("cpu_op", "aten::mm", 0, 5)]}, [observe], 1) == {}


def test_the_dense_mass_matrix_rows_factor_the_humanoids_tree_by_tile_cholesky():
    """mujoco-warp factors trees of more than 64 dofs by sparse LDL, one launch per level; the ``dense M`` rows'
    backends lay the humanoid's 75-dof tree out for tile Cholesky, and only inside their context."""
    pytest.importorskip("mujoco_warp")
    from rgsd_envs.humanoid import skeleton as sk
    from rgsd_envs.sim import make_backend
    from rgsd_envs.testing import dense_mass_matrix

    dofs = sk.NUM_DOFS + 6
    with dense_mass_matrix():
        dense = make_backend("warp", 2)
    sparse = make_backend("warp", 2)
    assert [t.size for t in dense.wp_model.M_tiles] == [dofs] and dense.wp_model.qLD_block_total == dofs * dofs
    assert sparse.wp_model.M_tiles == () and sparse.wp_model.qLD_block_total == 0
    dense.close()
    sparse.close()


def test_the_report_counts_the_kernels_a_bundle_shipped_and_those_compiled_since(gpu_check, tmp_path, monkeypatch):
    cache, logs = tmp_path / "warp-cache", tmp_path / "logs"
    logs.mkdir()
    monkeypatch.delenv("WARP_CACHE_PATH", raising=False)
    assert "none shipped compiled" in gpu_check.kernel_cache_lines(logs)[0]
    for name in ("wp_a_1111111", "wp_b_2222222", "wp_a_3333333"):  # the last: module a, its hash not shipped
        (cache / "1.19.0" / name).mkdir(parents=True)
    shipped = {"warp": "1.19.0", "arch": 90, "modules": ["wp_a_1111111", "wp_b_2222222"]}
    (cache / "rgsd-kernels.json").write_text(json.dumps(shipped))
    monkeypatch.setenv("WARP_CACHE_PATH", str(cache))
    (line,) = gpu_check.kernel_cache_lines(logs)
    assert "2 module variants shipped compiled for sm_90" in line and "1 compiled on this machine since" in line
    assert (logs / "warp_compiled.txt").read_text() == "wp_a_3333333\n"


def test_the_report_splits_a_training_iteration_into_its_parts(gpu_check):
    doc = {
        "figures": {"8192": {"train": {"warp": 211_708.0}}},
        "train_split": {"8192": {"warp": {"env": 0.6, "policy": 0.05, "update": 0.3, "method": 0.04, "other": 0.01}}},
    }
    lines = gpu_check.throughput_section(doc)
    assert "| 8192 | train (samples/s (paper networks, full loop)) | 211,708 | - | - |" in lines
    assert (
        "One training iteration at N = 8192 on warp, by part (host clocks): env 0.600 s (60%), policy 0.050 s (5%), "
        "update 0.300 s (30%), method 0.040 s (4%), other 0.010 s (1%)." in lines
    )


def test_a_failed_step_s_note_keeps_the_exception_whole_and_drops_the_traceback(gpu_check, tmp_path):
    """The note names the cause and the fix; a message cut to the width of a traceback line lost the fix."""
    message = (
        "rgsd_envs.sim.WarpUnavailableError: backend 'warp' on the CPU needs warp's CPU compiler, which this "
        "installation lacks (benchmarks/gpu_bundle.py leaves it out unless --keep-warp-cpu); run warp on cuda "
        '(device="cuda") or the mujoco backend'
    )
    log = tmp_path / "throughput.log"
    log.write_text(
        "[gpu_throughput] N = 8\nTraceback (most recent call last):\n"
        '  File "/node/rgsd/benchmarks/gpu_throughput.py", line 400, in <module>\n    main()\n'
        '  File "/node/rgsd/packages/rgsd-envs/src/rgsd_envs/sim/__init__.py", line 63, in make_backend\n'
        f"    raise WarpUnavailableError(\n    ^^^^^^^^^^^^^^^^^^^^^^^^^^^\n{message}\n"
    )
    assert len(message) > 200
    assert gpu_check.failure_note(log) == f"{message} (raised at rgsd_envs/sim/__init__.py:63)"
    last = "error: --set env.num_envs=8: unknown key 'num_envs' in 'env'; valid keys: " + ", ".join(["k"] * 80)
    log.write_text(f"starting\n{'x' * 300}\n{last}\n")  # no traceback: the last line whole, those before it cut
    assert gpu_check.failure_note(log) == f"starting / {'x' * 160}… / {last}"
    # a traceback the command outlived (a warning logged, then more output) is not why it failed
    log.write_text(
        'Traceback (most recent call last):\n  File "a.py", line 1\nValueError: old\n' + "step\n" * 8 + "done"
    )
    assert gpu_check.failure_note(log) == "step / step / done"
    assert gpu_check.failure_note(tmp_path / "missing.log") == "no output"


def test_the_console_and_the_report_give_a_step_the_same_result(gpu_check, tmp_path, capsys):
    """Without CUDA the CUDA tests pass by skipping: "skipped" in the console as in gpu_check.md."""
    step = gpu_check.Step("cuda_tests", [sys.executable, "-c", "print('19 skipped')"], 60)
    gpu_check.run_step(step, tmp_path)
    assert step.status == "pass" and "cuda_tests: pass" not in capsys.readouterr().out  # not yet settled
    gpu_check.settle(step, ["methods"], cuda=False)
    assert (step.status, step.extra) == ("skipped", {"no_cuda": True, "beside": ["methods"]})
    assert step.note == "ran beside methods; no CUDA: every cuda test skipped"
    failed = gpu_check.run_step(
        gpu_check.Step("import_motions", [sys.executable, "-c", "raise SystemExit('bad file')"], 60), tmp_path
    )
    gpu_check.settle(failed, [], cuda=True)
    assert failed.note == "exit code 1; bad file; training on the demo motions alone"


def test_a_method_whose_training_failed_is_not_evaluated_and_its_row_says_why(
    load_benchmark, gpu_check, monkeypatch, tmp_path
):
    ct: ModuleType = load_benchmark("concurrent_trainings")
    launched = []

    def launch(jobs, logs, timeout):
        launched.append(sorted(jobs))
        return {name: {"exit_code": 1, "seconds": 1.0} for name in jobs}

    monkeypatch.setattr(ct, "launch", launch)
    args = argparse.Namespace(out=tmp_path, device="cpu", smoke=True, eval_seconds=10.0)
    members = {"rgsd": {"exit_code": 0}, "ase": {"exit_code": 1, "error": "ModuleNotFoundError: No module named 'x'"}}
    evals = ct.eval_group({"members": members}, "methods", args)
    assert launched == [["rgsd"]]  # the failed training is not evaluated
    assert evals["ase"] == {"exit_code": None, "skipped": ct.TRAINING_FAILED} and evals["rgsd"]["exit_code"] == 1
    group = {
        "members": members,
        "eval": {**evals, "rgsd": {"exit_code": 1, "error": "KeyError: 'clip'"}},
        "downstream": {"exit_code": None, "skipped": ct.TRAINING_FAILED},
    }
    section = gpu_check.methods_section({"device": "cpu", "minutes": 0.05, "groups": {"methods": group}})
    rows = {line.split("|")[1].strip(): line for line in section if line.startswith("| ") and "---" not in line}
    assert "| FAIL |" in rows["ase"] and "| not run (its training failed) |" in rows["ase"]
    assert rows["ase"].endswith("| training: ModuleNotFoundError: No module named 'x' |")
    assert rows["rgsd"].endswith("| FAIL | - | evaluation: KeyError: 'clip' |")
    assert "Downstream step: not run (its training failed)." in section
