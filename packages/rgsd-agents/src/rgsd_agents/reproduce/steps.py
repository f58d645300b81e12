"""Running a plan: ``<out>/steps.json``, skipping, resuming, failures, one progress bar.

Each step's state lives in ``<out>/steps.json`` (rewritten atomically after every change): its status, the
fingerprint of its inputs (``plan.fingerprint``), attempts, seconds, times and error. Running the command
again:

- a ``done`` step whose inputs are unchanged is skipped;
- a step left ``running`` (the command was stopped) or ``failed`` resumes from its checkpoint
  (``rgsd train --resume``, ``rgsd downstream --resume``) if it has one, else starts afresh in a cleared folder;
- a step whose inputs changed (another scale, an edited preset, another rgsd version, more runs to evaluate, a
  step it reads that ran again) starts afresh;
- a kept step (a method of the folder this command does not name) stays as it is: done or not, it does not run.

A step's folder is cleared for a fresh start only while no process holds its lock (``<folder>/.lock``: a training
of an earlier command that still runs), else the step fails saying which process holds it.

A failed step is recorded with its error (the last ``error:`` line or exception of its log, ``<out>/logs/``)
and the others go on; a step whose ``needs`` failed or were skipped is skipped, with the reason. Steps run as
``python -m rgsd_agents.cli ...`` subprocesses (a crash or a full memory ends the step, not the plan), at most
``parallel`` at a time; Ctrl-C, SIGTERM or SIGHUP (the terminal closed) asks the running ones to stop
(``stop_signal``: SIGTERM, which they answer as their own Ctrl-C, checkpointing, even where they started with SIGINT
ignored, as a shell's background job does), waits for them, records those that succeeded meanwhile as done and the
others as interrupted, and returns 130. A step's ``seconds`` add up its attempts, each counted once.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from rgsd_agents.reproduce.plan import NothingToDo, Plan, Step, makespan, step_fingerprint, step_label
from rgsd_envs.utils.files import LOCK_NAME, FolderInUse, InputFileError, atomic_path, folder_lock
from rgsd_envs.utils.progress import StatusBar, clock
from rgsd_envs.utils.signals import on_stop_signals, raise_interrupt, restore_signals

STEPS_FILE = "steps.json"
STEPS_FORMAT = "rgsd-reproduce-steps"
STEPS_VERSION = 1
PENDING, RUNNING, DONE, FAILED, SKIPPED, INTERRUPTED = "pending", "running", "done", "failed", "skipped", "interrupted"
STOP_GRACE_S = 120.0
"""Seconds a stopped step gets to write its checkpoint before it is killed."""
STOP_JOIN_S = 10.0
"""Seconds the command waits, once a stopped step's process has ended, for its thread to report how it ended."""


class StepFailed(Exception):
    """A step ended without success; the message says why (shown in the plan's status)."""


@dataclass
class StepState:
    """What ``steps.json`` records of one step."""

    status: str = PENDING
    fingerprint: str = ""
    attempts: int = 0
    seconds: float = 0.0
    """Wall time over the attempts since the step last started afresh (its resumed attempts add up)."""
    started: str | None = None
    finished: str | None = None
    error: str | None = None
    """Why the step failed or was skipped."""
    resumed: bool = False
    """Whether the last attempt continued from a checkpoint."""
    log: str | None = None
    budget: str | None = None
    """The step's budget in words, as it last ran."""
    output: str | None = None
    """The folder the step writes, relative to the reproduce folder (a report from several folders reads it)."""


@dataclass
class StepsFile:
    """``<out>/steps.json``: every step's ``StepState``."""

    path: Path
    steps: dict[str, StepState] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, out: str | os.PathLike) -> StepsFile:
        """The state of ``out`` (empty when new); a step left ``running`` reads as ``interrupted``."""
        path = Path(out) / STEPS_FILE
        if not path.is_file():
            return cls(path)
        try:
            doc = json.loads(path.read_text())
            if not isinstance(doc, dict):
                raise ValueError(f"a JSON {type(doc).__name__}, expected an object")
            if doc.get("format") != STEPS_FORMAT:
                raise ValueError(f"format {doc.get('format')!r}, expected {STEPS_FORMAT!r}")
            for key in ("steps", "info"):
                if not isinstance(doc.get(key, {}), dict):
                    raise ValueError(f"{key!r} is a JSON {type(doc[key]).__name__}, expected an object")
            steps = {k: StepState(**v) for k, v in doc["steps"].items()}
        except (ValueError, TypeError, KeyError) as err:
            raise InputFileError(path, f"not a reproduce state file ({err}); choose another --out") from None
        for s in steps.values():
            if s.status == RUNNING:
                s.status = INTERRUPTED
        return cls(path, steps, doc.get("info", {}))

    def get(self, step_id: str) -> StepState:
        """The state of a step (created pending)."""
        return self.steps.setdefault(step_id, StepState())

    def done(self) -> set[str]:
        """The steps that finished successfully."""
        return {k for k, v in self.steps.items() if v.status == DONE}

    def upstream(self) -> dict[str, tuple[str, str | None]]:
        """Each step's (fingerprint, end time): what a step that reads it puts in its own fingerprint."""
        return {k: (v.fingerprint, v.finished) for k, v in self.steps.items()}

    def fingerprint(self, step: Step, done: set[str] | None = None) -> str:
        """The fingerprint ``step`` runs with now (``plan.step_fingerprint``; ``NothingToDo`` if it has no input)."""
        return step_fingerprint(step, self.done() if done is None else done, self.upstream())

    def methods(self) -> dict[str, list[int]]:
        """The methods whose trainings this folder records, with their seeds, in the folder's order (``info``)."""
        out: dict[str, list[int]] = {}
        for step_id in self.steps:
            parts = step_id.split("/")
            if len(parts) == 3 and parts[0] == "train" and parts[2].startswith("seed") and parts[2][4:].isdigit():
                out.setdefault(parts[1], []).append(int(parts[2][4:]))
        recorded = [m for m in self.info.get("methods", []) if m in out]
        return {m: sorted(out[m]) for m in [*recorded, *(m for m in out if m not in recorded)]}

    def save(self) -> None:
        """Write the file atomically."""
        doc = {
            "format": STEPS_FORMAT,
            "version": STEPS_VERSION,
            "info": self.info,
            "steps": {k: asdict(v) for k, v in self.steps.items()},
        }
        with atomic_path(self.path) as tmp:
            tmp.write_text(json.dumps(doc, indent=1) + "\n")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")


Runner = Callable[[Step, list[str], Path], None]
"""Runs one command step (its ``rgsd`` arguments) with its log file; raises ``StepFailed``."""


def stop_signal() -> signal.Signals:
    """The signal that asks a step to stop: SIGTERM, which every ``rgsd`` command answers as Ctrl-C
    (``rgsd_envs.utils.signals``), whatever its SIGINT: a shell's background job (``cmd &``, ``nohup cmd &``) starts
    with SIGINT ignored, and its steps inherit that. SIGINT only where this process was started ignoring SIGTERM,
    which its steps then ignore too."""
    return signal.SIGINT if signal.getsignal(signal.SIGTERM) == signal.SIG_IGN else signal.SIGTERM


class SubprocessRunner:
    """Runs command steps as ``python -m rgsd_agents.cli ARGS`` (output to the step's log); ``stop()`` asks every
    running one to checkpoint and end."""

    def __init__(self, program: Sequence[str] = (sys.executable, "-m", "rgsd_agents.cli")) -> None:
        self.program = list(program)
        """What a step's ``rgsd`` arguments follow."""
        self.procs: dict[str, subprocess.Popen] = {}
        self.lock = threading.Lock()

    def __call__(self, step: Step, argv: list[str], log: Path) -> None:
        """Run ``step``'s ``rgsd`` arguments; ``StepFailed`` with the error of its log when it does not succeed."""
        log.parent.mkdir(parents=True, exist_ok=True)
        cmd = [*self.program, *argv]
        with open(log, "a") as f:
            f.write(f"$ {' '.join(cmd)}\n")
            f.flush()
            # its own session: the terminal's Ctrl-C reaches this command only, which forwards one stop signal (a
            # second one would cut the step's checkpoint short)
            proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
            with self.lock:
                self.procs[step.id] = proc
            try:
                code = proc.wait()
            finally:
                with self.lock:
                    self.procs.pop(step.id, None)
        if code != 0:
            raise StepFailed(f"exit status {code}: {last_error(log)}")

    def stop(self) -> None:
        """``stop_signal()`` to every running step, SIGKILL to those still running after ``STOP_GRACE_S`` or at a
        second stop signal: no step outlives the command."""
        with self.lock:
            procs = list(self.procs.values())
        sig = stop_signal()
        for p in procs:
            if p.poll() is None:
                p.send_signal(sig)
        deadline = time.monotonic() + STOP_GRACE_S
        try:
            for p in procs:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except KeyboardInterrupt:  # a second Ctrl-C (or SIGTERM, SIGHUP): no more waiting for checkpoints
            pass
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()


def last_error(log: Path) -> str:
    """The most telling line of a step's log: its last ``error:`` line or exception, else its last line."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return f"see {log}"
    for ln in reversed(lines):
        if ln.startswith("error:") or (":" in ln and ln.split(":", 1)[0].endswith(("Error", "Exception"))):
            return ln[:500]
    return (lines[-1][:500] if lines else "no output") + f" (see {log})"


class PlanProgress:
    """One bar over the whole plan: steps weighted by their stated time, an ETA from the remaining steps run
    ``parallel`` at a time, each kind's estimate corrected by how long its finished steps took."""

    def __init__(self, plan: Plan, to_run: list[str], parallel: int, disable: bool, file: IO[str] | None = None):
        self.plan, self.parallel = plan, parallel
        self.to_run = to_run
        self.total = sum(plan.step(s).estimate_s for s in to_run) or 1.0
        self.start = time.monotonic()
        self.actual: dict[str, float] = {}
        """Seconds of the steps finished in this command (their kinds' correction)."""
        self.finished: set[str] = set()
        self.disable = disable or not to_run
        self.bar = StatusBar("reproduce", disable=self.disable, file=file)

    def correction(self, kind: str) -> float:
        """Measured / stated time of this kind's finished steps (1 before any).

        Only a step's own kind corrects it: trainings run to an iteration-time budget (``max_minutes``), while
        pretraining and evaluation run to an amount of work, so a pretraining that took a third of its stated time
        says nothing about them."""
        ids = [s for s in self.actual if self.plan.step(s).kind == kind and self.plan.step(s).estimate_s > 0]
        stated = sum(self.plan.step(s).estimate_s for s in ids)
        return sum(self.actual[s] for s in ids) / stated if stated > 0 else 1.0

    def status(self, running: dict[str, float]) -> tuple[float, float]:
        """(fraction done, seconds left) with ``running`` = {step id: its start (monotonic)}."""
        now = time.monotonic()
        expected = {s: self.plan.step(s).estimate_s * self.correction(self.plan.step(s).kind) for s in self.to_run}
        done_w = sum(self.plan.step(s).estimate_s for s in self.finished)
        left: dict[str, float] = {}
        for s, t0 in running.items():
            frac = min((now - t0) / expected[s], 0.95) if expected[s] > 0 else 0.95
            done_w += frac * self.plan.step(s).estimate_s
            left[s] = max(expected[s] - (now - t0), 0.05 * expected[s])
        order = [s for s in self.to_run if s not in self.finished]
        deps = {s.id: set(s.needs) | set(s.after) for s in self.plan.steps}
        seconds = makespan(order, deps, {**expected, **left}, self.parallel, list(running))
        return min(done_w / self.total, 1.0), seconds

    def refresh(self, running: dict[str, float]) -> str:
        """Redraw; returns the status text."""
        frac, left = self.status(running)
        names = ", ".join(running) or "-"
        text = (
            f"{len(self.finished)}/{len(self.to_run)} steps, {clock(time.monotonic() - self.start)} elapsed, "
            f"~{clock(left)} left | running: {names}"
        )
        self.bar.show(frac, text)
        return text

    def add(self, step_id: str) -> None:
        """Count a step the plan did not expect to run (its inputs changed)."""
        if step_id not in self.to_run:
            self.to_run.append(step_id)
            self.total += self.plan.step(step_id).estimate_s

    def finish(self, step_id: str, seconds: float, measured: bool) -> None:
        """Count a step as finished (``measured``: its time corrects its kind's estimate)."""
        if step_id not in self.to_run:
            return
        self.finished.add(step_id)
        if measured:
            self.actual[step_id] = seconds

    def write(self, line: str) -> None:
        """A line above the bar (or plainly, without one)."""
        self.bar.write(line)

    def close(self) -> None:
        """End the bar's line."""
        self.bar.close()


@dataclass
class Outcome:
    """What one ``run_plan`` did."""

    statuses: dict[str, str]
    """Every step's status after this command (done, failed, skipped, interrupted)."""
    ran: list[str]
    """Steps that ran in this command."""
    interrupted: bool = False
    kept: frozenset[str] = frozenset()
    """Kept steps (methods this command does not name): in ``statuses`` as they were, not in ``ok``."""

    @property
    def ok(self) -> bool:
        """Every step this command was to run done."""
        return all(s == DONE for k, s in self.statuses.items() if k not in self.kept)


def _clear(step: Step, out: Path) -> None:
    """Empty a step's output folder before a fresh start (only inside the reproduce folder), holding its lock:
    ``FolderInUse`` while another process (a step of an earlier command that still runs) holds it."""
    if step.output is None or not step.output.exists():
        return
    if not step.output.resolve().is_relative_to(out.resolve()):
        raise RuntimeError(f"refusing to clear {step.output}: outside {out}")
    if not step.output.is_dir():
        step.output.unlink()
        return
    with folder_lock(step.output, "rgsd reproduce, clearing the folder"):
        for p in step.output.iterdir():
            if p.name == LOCK_NAME:
                continue
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()


def resumes(step: Step, st: StepState, fp: str) -> bool:
    """Whether an unfinished step continues from its checkpoint: only with the inputs (fingerprint ``fp``) of the
    attempt that wrote it; otherwise it starts afresh in a cleared folder."""
    return (
        step.checkpoint is not None
        and step.resume_command is not None
        and st.status in (INTERRUPTED, FAILED, RUNNING)
        and st.fingerprint == fp
        and step.checkpoint.is_file()
    )


def pending_steps(plan: Plan, state: StepsFile) -> list[str]:
    """The steps that will (probably) run: not done, done with other inputs (judged where they can be now), and those
    that read a step that will run (it ends with new results). Kept steps never run."""
    done = state.done()
    out: list[str] = []
    for s in plan.steps:
        if s.kept:
            continue
        st = state.steps.get(s.id)
        if st is None or st.status != DONE or any(d in out for d in (*s.needs, *s.after)):
            out.append(s.id)
            continue
        try:
            if state.fingerprint(s, done) != st.fingerprint:
                out.append(s.id)
        except NothingToDo:
            pass
    return out


def stale(step: Step, state: StepsFile) -> bool:
    """Whether a done step's inputs changed since it ran (a kept step then stands for inputs no longer current)."""
    st = state.steps.get(step.id)
    if st is None or st.status != DONE:
        return False
    try:
        return state.fingerprint(step) != st.fingerprint
    except NothingToDo:
        return False


def run_plan(
    plan: Plan,
    state: StepsFile,
    runner: Runner | None = None,
    parallel: int = 1,
    progress: bool = True,
    tick: float = 1.0,
) -> Outcome:
    """Run the plan's steps that are not done (see the module docstring); returns what happened."""
    runner = runner if runner is not None else SubprocessRunner()
    done = {k for k in state.done() if k in {s.id for s in plan.steps}}
    this: dict[str, str] = {}
    """Steps settled in this command: done (ran or skipped as done), failed, skipped; kept steps as they were."""
    running: dict[str, float] = {}
    """Running steps: where the bar counts each one from (monotonic; a resumed one, its earlier attempts back)."""
    began: dict[str, float] = {}
    """Running steps: when this attempt began (monotonic)."""
    results: queue.Queue[tuple[str, str | None, float]] = queue.Queue()
    threads: dict[str, threading.Thread] = {}
    """Each started step's thread (it puts the step's result)."""
    bar = PlanProgress(plan, pending_steps(plan, state), parallel, disable=not progress)
    ran: list[str] = []
    interrupted = False
    log_dir = plan.out / "logs"
    state.info["methods"] = plan.methods  # the folder's methods in their order: the next command's plan keeps it

    def settle(step: Step, status: str, error: str | None = None) -> None:
        st = state.get(step.id)
        st.status, st.error = status, error
        this[step.id] = status
        if status == DONE:
            done.add(step.id)
        else:
            done.discard(step.id)
        state.save()

    def start(step: Step, argv: list[str] | None, fp: str) -> None:
        st = state.get(step.id)
        resume = resumes(step, st, fp)
        if resume:
            argv = step.resume_command()
        else:
            try:
                _clear(step, plan.out)
            except FolderInUse as err:  # a step of an earlier command still writes there: leave it be
                st.finished = _now()
                settle(step, FAILED, str(err))
                bar.finish(step.id, 0.0, measured=False)
                bar.write(f"FAILED {step.id}: {err}")
                return
        if step.prepare is not None:
            step.prepare()
        log = log_dir / f"{step_label(step.id)}.log"
        st.status, st.fingerprint, st.error, st.resumed = RUNNING, fp, None, resume
        if not resume:  # a fresh start: the seconds count this run of the step, not an earlier one it replaces
            st.seconds = 0.0
        st.attempts += 1
        st.started, st.finished, st.log = _now(), None, str(log.relative_to(plan.out))
        st.budget = step.budget
        if step.output is not None and step.output.resolve().is_relative_to(plan.out.resolve()):
            st.output = str(step.output.resolve().relative_to(plan.out.resolve()))
        state.save()
        began[step.id] = time.monotonic()
        # a resumed step is as far along as its earlier attempts took it (a training's budget counts them all)
        running[step.id] = began[step.id] - st.seconds
        ran.append(step.id)
        bar.add(step.id)
        bar.write(f"{'resume' if resume else 'start '} {step.id}")

        inputs = set(done)

        def work() -> None:
            t0 = time.monotonic()
            try:
                if step.func is not None:
                    log.parent.mkdir(parents=True, exist_ok=True)
                    step.func(inputs)
                else:
                    assert argv is not None
                    runner(step, argv, log)
                results.put((step.id, None, time.monotonic() - t0))
            except StepFailed as err:
                results.put((step.id, str(err), time.monotonic() - t0))
            except Exception as err:  # an in-process step's or a runner's failure: this step's, not the plan's
                with open(log, "a") as f:
                    f.write(f"{type(err).__name__}: {err}\n")
                results.put((step.id, f"{type(err).__name__}: {err}", time.monotonic() - t0))

        threads[step.id] = threading.Thread(target=work, name=step.id, daemon=True)
        threads[step.id].start()

    def finish(step_id: str, error: str | None, seconds: float) -> None:
        step = plan.step(step_id)
        running.pop(step_id, None)
        began.pop(step_id, None)
        st = state.get(step_id)
        st.seconds += seconds
        st.finished = _now()
        settle(step, DONE if error is None else FAILED, error)
        # all of this run's attempts: a step resumed here took only its rest in this command, and a kind's
        # correction from that alone would shrink the other steps' estimates (26 stated minutes read as 8)
        bar.finish(step_id, st.seconds, measured=error is None)
        bar.write(
            f"{'done  ' if error is None else 'FAILED'} {step_id} in {clock(seconds)}" + (f": {error}" if error else "")
        )

    def schedule() -> None:
        for step in plan.steps:
            if step.id in this or step.id in running:
                continue
            if step.kept:  # a method this command does not name: its steps stay as they are
                st = state.steps.get(step.id)
                this[step.id] = st.status if st is not None else PENDING
                continue
            deps = set(step.needs) | set(step.after)
            if not all(d in this for d in deps):
                continue
            missing = [d for d in step.needs if this[d] != DONE]
            if missing:
                settle(step, SKIPPED, f"needs {missing[0]} ({this[missing[0]]})")
                bar.finish(step.id, 0.0, measured=False)
                continue
            try:
                inputs = step.inputs(done)
                fp = state.fingerprint(step, done)
            except NothingToDo as why:
                settle(step, SKIPPED, str(why))
                bar.finish(step.id, 0.0, measured=False)
                continue
            st = state.get(step.id)
            if st.status == DONE and st.fingerprint == fp:
                this[step.id] = DONE
                bar.finish(step.id, 0.0, measured=False)
                continue
            if len(running) >= parallel:
                return
            start(step, inputs if step.command is not None else None, fp)

    previous = on_stop_signals(raise_interrupt)  # SIGTERM and SIGHUP stop the plan as Ctrl-C does
    try:
        while True:
            schedule()
            if not running:
                break
            try:
                finish(*results.get(timeout=tick))
                while not results.empty():
                    finish(*results.get_nowait())
            except queue.Empty:
                pass
            bar.refresh(running)
    except KeyboardInterrupt:
        interrupted = True
        _say(bar, "stopping: the running steps write their checkpoints; run the same command again to resume")
        # a step that succeeded is done, whether it ended before the stop or as it came (its result may be queued
        # still); any other that ran is interrupted, a failure the stop may have caused included
        _finish_succeeded(results, finish)
        if isinstance(runner, SubprocessRunner):
            runner.stop()
            with contextlib.suppress(KeyboardInterrupt):  # a further stop signal: no more waiting
                for step_id in list(running):  # their processes have ended: their results come at once
                    thread = threads.get(step_id)
                    if thread is not None and plan.step(step_id).func is None:  # not an in-process step (the report)
                        thread.join(timeout=STOP_JOIN_S)
            _finish_succeeded(results, finish)
        for step_id in list(running):
            st = state.get(step_id)
            st.status, st.error, st.finished = INTERRUPTED, "interrupted", _now()
            running.pop(step_id)
            st.seconds += time.monotonic() - began.pop(step_id)  # this attempt's time, once
            this[step_id] = INTERRUPTED
        state.save()
    finally:
        restore_signals(previous)
        try:
            bar.refresh(running)
            bar.close()
        except OSError:  # the terminal is gone (SIGHUP)
            pass
    statuses = {s.id: this.get(s.id, state.get(s.id).status) for s in plan.steps}
    return Outcome(statuses, ran, interrupted, frozenset(s.id for s in plan.steps if s.kept))


def _finish_succeeded(results: queue.Queue, finish: Callable[[str, None, float], None]) -> None:
    """``finish`` each step of the (step id, error, seconds) in ``results`` now that succeeded (no error)."""
    with contextlib.suppress(queue.Empty):
        while True:
            step_id, error, seconds = results.get_nowait()
            if error is None:
                with contextlib.suppress(OSError):  # its line, where the terminal is gone (SIGHUP); its state is saved
                    finish(step_id, None, seconds)


def _say(bar: PlanProgress, line: str) -> None:
    """A line above the bar, where the terminal is still there (after SIGHUP it may be gone)."""
    with contextlib.suppress(OSError):
        bar.write(line)


def format_seconds(seconds: float) -> str:
    """``h:mm:ss`` / ``mm:ss`` of a duration (``--:--`` if unknown)."""
    return clock(seconds) if math.isfinite(seconds) else "--:--"
