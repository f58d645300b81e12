"""The training loop shared by every rgsd trainer: iterations, logging, checkpoints, resume.

A trainer subclasses ``TrainingLoop`` and provides ``iterate`` (one iteration, returning its metrics),
``state_dict``/``load_state_dict`` (everything the next iteration depends on) and ``export`` (the deployable files).
The loop adds the progress bar (its total and ETA follow the time budget: ``rgsd_envs.utils.progress``), TensorBoard,
checkpoints written atomically every ``checkpoint_every`` iterations, at the end and on Ctrl-C, SIGTERM or SIGHUP (the
first finishes the iteration and saves, a second aborts: ``deferred_interrupt``), the time budget (``max_minutes`` of
iteration time) and exact resumption from ``checkpoints/latest.pt`` (or, where that is unreadable, the newest readable
``iter_*.pt``; the checkpoint's clips must be the ones ``env.motions`` loads now: ``clip_set``, and the temporaries of
a checkpoint write killed outright are removed). Checkpoints hold tensors and plain values only and load with
``weights_only=True`` (``rgsd_envs.utils.files.save_plain``/``load_plain``): resuming a run folder from elsewhere runs
no code. Keys in a trainer's ``RESUME_CURRICULUM`` may change on resume too: the trainer takes them as a curriculum
step (``add_curriculum_step``), and ``record_config_changes`` keeps the run's ``config_changes.yaml`` (what changed
mid-run, with the iteration and sample count).

In a data-parallel run (``self.dp``, see ``rgsd_agents.rl.distributed``) every rank
runs the loop in step: the decisions to stop (iterations, the time budget
of rank 0, a stop signal on any rank) are taken together, every rank contributes its
state to a checkpoint, and rank 0 alone writes files and TensorBoard.
"""

from __future__ import annotations

import contextlib
import logging
import math
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Protocol

import torch
import yaml

from rgsd_agents.rl.clip_set import clip_set, clip_set_change, saved_clip_count
from rgsd_agents.rl.distributed import DataParallel
from rgsd_envs.envs.registration import ENV_ID
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.config import (
    OverrideError,
    check_override,
    check_overrides,
    dotted_value,
    from_dict_with_overrides,
    read_yaml,
    save_yaml,
    shown_value,
    to_dict,
)
from rgsd_envs.utils.files import (
    InputFileError,
    PickledObjectsError,
    atomic_path,
    load_plain,
    remove_event_files,
    remove_stale_temps,
    save_plain,
)
from rgsd_envs.utils.progress import ProgressBar
from rgsd_envs.utils.provenance import provenance
from rgsd_envs.utils.signals import on_stop_signals, restore_signals, signal_name

log = logging.getLogger(__name__)
LATEST = RunDir.LATEST


def gpu_memory_metrics() -> dict[str, float]:
    """This process's peak CUDA memory so far (MiB, allocated and reserved); empty without CUDA.

    The allocator's counters are host-side bookkeeping: reading them does not wait for the GPU."""
    if not torch.cuda.is_initialized():
        return {}
    mib = float(1 << 20)
    return {
        "perf/gpu_peak_allocated_mib": torch.cuda.max_memory_allocated() / mib,
        "perf/gpu_peak_reserved_mib": torch.cuda.max_memory_reserved() / mib,
    }


class UnreadableCheckpoint(InputFileError):
    """A checkpoint file that does not load; ``why`` says so in a few words."""

    def __init__(self, path: str | Path, why: str, detail: str = ""):
        self.why = why
        super().__init__(path, f"{why}: {detail}" if detail else why)


class LoopConfig(Protocol):
    """The loop settings a trainer's config must carry."""

    iterations: int
    max_minutes: float | None
    checkpoint_every: int
    keep_checkpoints: int
    log_every: int


class Aborted(KeyboardInterrupt):
    """A second stop signal during training: the loop ends at once, without a checkpoint; the message says so."""


REPEAT_GRACE = 2.0
"""Seconds after a stop signal in which another one is the same stop, not a second: torchrun passes the signal it
gets on to its ranks, a terminal's Ctrl-C reaches torchrun and the ranks alike, and SLURM signals every process of
a job, so one stop can reach a rank twice within milliseconds."""


@contextlib.contextmanager
def deferred_interrupt(resume_hint: Callable[[], str] = lambda: "") -> Iterator[list[int]]:
    """The first Ctrl-C, SIGTERM or SIGHUP (``rgsd_envs.utils.signals``) sets ``flag[0]`` to its number (the loop
    stops after the iteration and saves); a second one, ``REPEAT_GRACE`` seconds or more later, raises ``Aborted``,
    whose message ends with ``resume_hint()``."""
    flag = [0]
    first = [0.0]

    def handler(signum: int, frame: Any) -> None:
        name = signal_name(signum)
        if flag[0]:
            if time.monotonic() - first[0] < REPEAT_GRACE:  # the same stop, delivered twice
                return
            raise Aborted(f"aborted by a second {name} without writing a checkpoint; {resume_hint()}")
        flag[0], first[0] = signum, time.monotonic()
        with contextlib.suppress(OSError):  # after SIGHUP the terminal may be gone
            print(
                f"\n{name}: finishing this iteration and writing a checkpoint ({name} again to abort without saving)",
                file=sys.stderr,
                flush=True,
            )

    try:
        previous = {signal.SIGINT: signal.signal(signal.SIGINT, handler)}
    except ValueError:  # not the main thread: no signal handling
        yield flag
        return
    previous.update(on_stop_signals(handler))
    try:
        yield flag
    finally:
        restore_signals(previous)


class TrainingLoop:
    """Iterations with logging and checkpoints around a trainer's ``iterate`` (see the module docstring)."""

    CHECKPOINT_FORMAT = "rgsd-checkpoint"
    CHECKPOINT_VERSION = 1
    PROGRESS_DESC = "train"
    COMMAND = "rgsd train"
    """The command that continues this trainer's runs (``<COMMAND> --resume RUN``), named in its messages."""

    CONFIG_CLASS: type
    """The trainer's config dataclass (for resume)."""
    RESUME_OVERRIDABLE: tuple[str, ...] = (
        "iterations",
        "max_minutes",
        "checkpoint_every",
        "keep_checkpoints",
        "log_every",
        "device",
    )
    """Config keys that ``--resume`` may change (the rest would break exact continuation; a device of another
    kind continues with reseeded action noise)."""
    RESUME_CURRICULUM: tuple[str, ...] = ()
    """Config keys that ``--resume`` may also change, from the checkpoint on: a different training from then
    on, handed to ``add_curriculum_step`` rather than written over the saved config."""
    RESUME_REQUIRES: tuple[str, ...] = (RunDir.CONFIG,)
    """Run-folder files a resumable run must hold."""
    DATA_PARALLEL: bool = False
    """Whether the trainer trains data-parallel under torchrun (its constructor then takes ``dp``)."""

    cfg: LoopConfig
    run: RunDir
    progress: bool
    progress_file: IO[str] | None = None
    """Where the progress bar is drawn (None: stderr)."""

    def __init__(self) -> None:
        self.dp: DataParallel | None = None
        """This process's rank of a data-parallel run (None: a single process)."""
        self.iteration = 0
        self.global_step = 0
        self.elapsed = 0.0
        """Seconds spent in the loop over all sessions (for max_minutes)."""
        self.history: list[dict[str, float]] = []
        """Per-iteration metrics of this session."""
        self.stopped_by = 0
        """The signal that stopped this session before its budget (``deferred_interrupt``; 0: none), the same on
        every rank."""
        self.continue_command: str | None = None
        """The command that continues this run, as the stop messages name it (None: ``COMMAND --resume RUN``);
        ``rgsd demo``, which evaluates after training, names itself."""

    @property
    def is_main(self) -> bool:
        """Whether this process writes files and logs (rank 0, or a single process)."""
        return self.dp is None or self.dp.is_main

    def agree(self, flag: bool) -> bool:
        """``flag`` if set on any rank (a single process: ``flag``); keeps the ranks' loops in step."""
        return flag if self.dp is None else self.dp.any(flag)

    def agree_signal(self, signum: int) -> int:
        """The highest signal number any rank received (0: none), the same on every rank."""
        return signum if self.dp is None else self.dp.max_int(signum)

    def budget_reached(self) -> str | None:
        """The budget setting this run has used up (``iterations=N``, ``max_minutes=M``), None while some is left;
        rank 0's clock counts, as in ``learn``."""
        cfg = self.cfg
        if self.iteration >= cfg.iterations:
            return f"iterations={cfg.iterations}"
        if cfg.max_minutes is not None and self.elapsed >= 60.0 * cfg.max_minutes:
            return f"max_minutes={cfg.max_minutes:g}"
        return None

    def budget_message(self) -> str:
        """One line for a resumed run with no budget left: which setting, and how to raise it."""
        reached = self.budget_reached() or "its budget"
        key = reached.partition("=")[0]
        return (
            f"{self.run.path} already reached its budget ({reached}; {self.iteration} iterations, "
            f"{self.elapsed / 60:.1f} min trained): nothing to do; to train on, raise it: "
            f"{self.COMMAND} --resume {shlex.quote(str(self.run.path))} --set {key}=N"
        )

    def resume_hint(self) -> str:
        """Where the run's latest checkpoint is and the command that continues from it (rank 0's files)."""
        latest = self.run.checkpoints_dir / LATEST
        if not latest.is_file():
            return self.run.not_started()
        command = self.continue_command or f"{self.COMMAND} --resume {shlex.quote(str(self.run.path))}"
        return f"checkpoint {latest}; continue with: {command}"

    def start_session(self, writer: Any) -> None:
        """``on_start``; a stop signal during it (before the loop defers them) ends the command with one line saying
        that nothing was trained in this session and how to start or continue the run."""
        try:
            self.on_start(writer)
        except KeyboardInterrupt as err:
            what = "the run's set-up" if self.iteration == 0 else "this session's set-up"
            raise KeyboardInterrupt(
                f"{str(err) or 'interrupted'} during {what}, before its first iteration: nothing was trained; "
                f"{self.resume_hint()}"
            ) from None

    def stop_message(self) -> str:
        """One line for a session ``stopped_by`` a signal: after which iteration, the checkpoint, how to resume."""
        return f"stopped by {signal_name(self.stopped_by)} after iteration {self.iteration}: {self.resume_hint()}"

    @classmethod
    def resume(
        cls, run_dir: str | Path, overrides: dict[str, Any] | None = None, progress: bool = True, **kwargs: Any
    ) -> Any:
        """Continue a run from its newest readable checkpoint (``load_newest_readable``); only
        ``RESUME_OVERRIDABLE`` keys may change, and ``RESUME_CURRICULUM`` keys through ``add_curriculum_step``
        (``kwargs`` go to the trainer's constructor, e.g. ``dp``). A run with no budget left (``budget_reached``)
        is loaded but nothing is written."""
        run = RunDir(run_dir)
        if run.never_checkpointed():  # stopped during its set-up: its missing files are not what went wrong
            raise InputFileError(run.path, f"nothing to resume: {run.not_started()}")
        run.check(*cls.RESUME_REQUIRES)
        checkpoint_candidates(run)  # nothing to resume is said before the saved config is read
        overrides = dict(overrides or {})
        changes = {k: overrides.pop(k) for k in list(overrides) if k in cls.RESUME_CURRICULUM}
        if changes:  # where they will be recorded: a corrupt record ends the command here, before any file changes
            read_config_changes(run)
        cfg = resume_config(run, cls.CONFIG_CLASS, overrides, cls.RESUME_OVERRIDABLE, cls.RESUME_CURRICULUM)
        runner = cls(cfg, run.path, progress=progress, _resume=True, **kwargs)
        if runner.is_main:  # a checkpoint write killed outright (SIGKILL, a power cut) left its temporary
            remove_stale_temps(run.checkpoints_dir, "*.pt")
        checkpoint = runner.load_newest_readable(run)
        if runner.budget_reached():  # nothing to train: the command says so and the run folder stays as it is
            return runner
        log.info("resuming %s at iteration %d from %s", run.path, runner.iteration, checkpoint.relative_to(run.path))
        if overrides and runner.is_main:
            save_run_config(run, cfg)
        if changes:
            runner.add_curriculum_step(changes)
        return runner

    # -- what a trainer provides ----------------------------------------------------
    def add_curriculum_step(self, changes: dict[str, Any]) -> None:
        """Change ``RESUME_CURRICULUM`` keys from now on (trainers that name such keys provide it)."""
        raise NotImplementedError

    def iterate(self) -> dict[str, float]:
        """One iteration; returns its metrics (TensorBoard tags) and advances ``global_step``."""
        raise NotImplementedError

    def trainer_state(self) -> dict[str, Any]:
        """The trainer's state besides the loop counters."""
        raise NotImplementedError

    def load_trainer_state(self, state: dict[str, Any]) -> None:
        """Restore ``trainer_state``."""
        raise NotImplementedError

    def export(self) -> None:
        """Write the deployable files (refreshed with every checkpoint)."""

    def clip_library(self) -> MotionLib | None:
        """The motion clips this trainer's worlds play (None: none); checkpoints record them (``clip_set``) and a
        resumed run must load the same ones."""
        return None

    def clips_setting(self) -> str:
        """The setting that chose ``clip_library``'s clips, as messages name it."""
        env = getattr(self.cfg, "env", None)
        return f"env.motions ({env.motions})" if env is not None else "env.motions"

    def policy_meta(self, skill_dim: int) -> dict[str, Any]:
        """The metadata ``policy.pt`` carries: the env id, its skill dimension, how far training got, and the code
        that wrote it (``provenance``; a resumed run's policy names the last session's code), which ``rgsd eval``
        reports beside its own."""
        return {
            "env_id": ENV_ID,
            "skill_dim": skill_dim,
            "iteration": self.iteration,
            "global_step": self.global_step,
            "provenance": provenance(),
        }

    def on_start(self, writer: Any) -> None:
        """Called once before the first iteration of a session."""

    def on_iteration(self, metrics: dict[str, float]) -> None:
        """Called after each iteration; may add metrics."""

    def on_finish(self) -> None:
        """Called when the session ends (also on errors)."""

    def postfix(self, metrics: dict[str, float]) -> str:
        """Short progress-bar text of an iteration's metrics."""
        return f"sps={metrics.get('charts/SPS', 0.0):.0f}"

    # -- the loop -----------------------------------------------------------------------
    def learn(self) -> list[dict[str, float]]:
        """Train until ``iterations`` (or ``max_minutes``); checkpoint periodically, at the end and on Ctrl-C,
        SIGTERM or SIGHUP (then ``stopped_by`` names it); a second such signal raises ``Aborted``."""
        from torch.utils.tensorboard import SummaryWriter

        cfg = self.cfg
        main = self.is_main
        if main and self.iteration == 0:  # a fresh start: an earlier attempt's curves are not this run's
            remove_event_files(self.run.tensorboard_dir)
        writer = SummaryWriter(str(self.run.tensorboard_dir), purge_step=self.purge_step()) if main else None
        budget = math.inf if cfg.max_minutes is None else 60.0 * cfg.max_minutes
        bar = ProgressBar(
            self.PROGRESS_DESC,
            cfg.iterations,
            None if cfg.max_minutes is None else budget,
            initial=self.iteration,
            elapsed=self.elapsed,
            disable=not (self.progress and main),
            file=self.progress_file,
        )
        saved_at = self.iteration
        try:
            self.start_session(writer)
            with deferred_interrupt(self.resume_hint) as interrupted:
                while not self.agree(main and self.budget_reached() is not None):
                    metrics = self.iterate()
                    metrics.update(gpu_memory_metrics())
                    self.on_iteration(metrics)
                    self.history.append(metrics)
                    if writer is not None and (self.iteration % cfg.log_every == 0 or self.iteration == cfg.iterations):
                        for k, v in metrics.items():
                            writer.add_scalar(k, v, self.global_step)
                    # the terminal closed (SIGHUP): the run goes on to its checkpoint without the bar
                    with contextlib.suppress(OSError):
                        bar.update(self.iteration, self.elapsed, self.postfix(metrics))
                    if self.iteration % cfg.checkpoint_every == 0:
                        self.save_checkpoint()
                        saved_at = self.iteration
                    self.stopped_by = self.agree_signal(interrupted[0])
                    if self.stopped_by:
                        log.info("stopped by %s after iteration %d", signal_name(self.stopped_by), self.iteration)
                        break
                has_latest = main and (self.run.checkpoints_dir / LATEST).exists()
                if self.agree(saved_at != self.iteration or (main and not has_latest)):
                    self.save_checkpoint()
        finally:
            with contextlib.suppress(OSError):
                bar.close()
            if writer is not None:
                writer.close()
            self.on_finish()
        return self.history

    def purge_step(self) -> int | None:
        """The first TensorBoard step a resumed session writes over (None: a fresh run). Every point is logged at the
        sample count after its iteration (0: before the first), so the checkpoint's own iteration, at
        ``global_step``, is kept and whatever an earlier session logged after it, then lost with it, is dropped."""
        return self.global_step + 1 if self.global_step else None

    # -- checkpoints ----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Loop counters and the trainer's state."""
        return {
            "format": self.CHECKPOINT_FORMAT,
            "version": self.CHECKPOINT_VERSION,
            "iteration": self.iteration,
            "global_step": self.global_step,
            "elapsed": self.elapsed,
            **self.trainer_state(),
            **({"clips": clip_set(lib)} if (lib := self.clip_library()) is not None else {}),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict``."""
        self.iteration, self.global_step, self.elapsed = state["iteration"], state["global_step"], state["elapsed"]
        self.load_trainer_state(state)

    def save_checkpoint(self) -> Path | None:
        """Write ``checkpoints/iter_XXXXXX.pt`` and ``latest.pt`` atomically, then the exported files.

        Every rank of a data-parallel run calls it (each contributes its state); rank 0 writes and returns the
        path, the others return None."""
        state = self.state_dict()
        if not self.is_main:
            return None
        ckpt_dir = self.run.checkpoints_dir
        path = ckpt_dir / f"iter_{self.iteration:06d}.pt"
        save_plain(state, path)
        with atomic_path(ckpt_dir / LATEST) as tmp:
            shutil.copyfile(path, tmp)
        for old in sorted(ckpt_dir.glob("iter_*.pt"))[: -self.cfg.keep_checkpoints]:
            old.unlink(missing_ok=True)
        self.export()
        return path

    def load_newest_readable(self, run: RunDir) -> Path:
        """Load the newest checkpoint that reads (``latest.pt``, else the newest readable ``iter_*.pt``: a crash
        while copying or a full disk can leave the newest files truncated); one warning line says which file and
        why when it is not ``latest.pt``. Returns its path."""
        candidates = checkpoint_candidates(self.run)
        skipped: list[str] = []
        for path in candidates:
            try:
                self.load_checkpoint(path)
            except UnreadableCheckpoint as err:
                skipped.append(f"{path.name} is {err.why}")
                continue
            if skipped:
                log.warning("resuming from %s (iteration %d): %s", path, self.iteration, "; ".join(skipped))
            return path
        raise InputFileError(run.checkpoints_dir, f"no readable checkpoint to resume from: {'; '.join(skipped)}")

    def load_checkpoint(self, path: str | Path) -> None:
        """Load a checkpoint written by ``save_checkpoint``: plain data only (``weights_only=True``), so a run
        folder from elsewhere cannot run code; one that carries pickled objects is refused (PickledObjectsError,
        not skipped for an older checkpoint)."""
        try:
            state = load_plain(
                path, hint="resume only checkpoints written by this version of rgsd, or start the run again"
            )
        except PickledObjectsError:
            raise
        except Exception as err:
            raise UnreadableCheckpoint(path, "not a readable checkpoint (truncated or corrupt?)", str(err)) from None
        if not isinstance(state, dict) or state.get("format") != self.CHECKPOINT_FORMAT:
            raise UnreadableCheckpoint(path, f"not an {self.CHECKPOINT_FORMAT} file (wrong kind of checkpoint)")
        self.check_clips(path, state)
        self.check_config(path, state)
        try:
            self.load_state_dict(state)
        except torch.OutOfMemoryError:
            raise
        except (RuntimeError, KeyError, ValueError, TypeError) as err:  # torch's size mismatch, a missing entry
            # not UnreadableCheckpoint: the load may have changed part of the trainer already (networks, curriculum
            # steps, the env's rule), so no older checkpoint is tried on top of it; the command ends here instead
            detail = " ".join(str(err).split())[:300]
            raise InputFileError(
                path, f"does not fit this run's networks and state (another config or version?): {detail}"
            ) from None

    def check_config(self, path: str | Path, state: dict[str, Any]) -> None:
        """Refuse a checkpoint whose saved config differs from the one resumed (config.yaml with the ``--set``
        overrides) in a setting resume may not change (``resume_change``): config.yaml edited by hand would
        otherwise continue the run with the new value unrecorded. A checkpoint without its config (an earlier
        version's) is loaded unchecked."""
        saved = state.get("config")
        if not isinstance(saved, dict):
            return
        recorded = recorded_changes(self.run)
        change = resume_change(saved, to_dict(self.cfg), self.RESUME_OVERRIDABLE, state["global_step"], recorded)
        if change is None:
            return
        key, old, new = change
        name = Path(path).relative_to(self.run.path) if Path(path).is_relative_to(self.run.path) else path
        new_run = f"{self.COMMAND} --config {shlex.quote(str(self.run.config_path))} --out NEW_FOLDER"
        raise InputFileError(
            self.run.config_path,
            f"{shown_value(new)} here, but {name} trained with {shown_value(old)}: a resumed run keeps the settings "
            f"it trained with (--resume --set may change {', '.join(self.RESUME_OVERRIDABLE + self.RESUME_CURRICULUM)}"
            f"); put back {shown_value(old)}, or train with the new value as a new run: {new_run}",
            key,
        )

    def check_clips(self, path: str | Path, state: dict[str, Any]) -> None:
        """Refuse a checkpoint trained on other clips than ``clip_library`` (names and frame counts; a checkpoint
        without them: their number, with a warning that only it was compared), before anything of it is loaded."""
        lib = self.clip_library()
        if lib is None:
            return
        fix = "put back the clips it trained on, or train them as a new run (another --out)"
        if "clips" in state:
            change = clip_set_change(state["clips"], lib)
            if change is not None:
                raise InputFileError(
                    path, f"trained on other clips than {self.clips_setting()} loads now: {change}; {fix}"
                )
            return
        count = saved_clip_count(state)
        if count is not None and count != lib.num_clips:
            raise InputFileError(
                path,
                f"trained on {count} clips, {self.clips_setting()} loads {lib.num_clips} now (this checkpoint, from "
                f"an earlier version, names no clips, so only their number is compared); {fix}",
            )
        log.warning(
            "%s names no clips (written by an earlier version): only their number (%s) was compared with %s; "
            "make sure they are the clips it trained on",
            path,
            count if count is not None else "unknown",
            self.clips_setting(),
        )


def resume_config(
    run: RunDir, cls: type, overrides: dict[str, Any] | None, allowed: tuple[str, ...], curriculum: tuple[str, ...] = ()
) -> Any:
    """The saved config of a run to continue, with the ``allowed`` overrides only (others would break exactness;
    the error names the ``curriculum`` keys too, which the trainer takes separately). An override that repeats its
    saved value changes nothing and is accepted: a command run again with its own settings continues its run."""
    run.check(RunDir.CONFIG)
    checked = check_overrides(cls, overrides)
    saved = run.config()
    bad = sorted(k for k, v in checked.items() if k not in allowed and _saved_as_override(cls, saved, k) != v)
    if bad:
        also = f" (from the checkpoint on, so may {', '.join(curriculum)})" if curriculum else ""
        raise InputFileError(
            f"--resume {run.path}",
            f"continues the saved config; only {', '.join(allowed)} may change, not {bad[0]}{also}",
        )
    env = saved.get("env")
    if isinstance(env, dict) and "motions" in env:  # clips the run folder carries, wherever the command runs
        saved = {**saved, "env": {**env, "motions": run.motions_in_folder(env["motions"])}}
    return from_dict_with_overrides(cls, saved, str(run.config_path), checked, overrides)


def save_run_config(run: RunDir, cfg: Any) -> None:
    """Write the config of a run being continued (``resume_config``'s, with its changes) to its config.yaml, with
    ``env.motions`` as config.yaml names it where ``resume_config`` read that from inside the run folder
    (``RunDir.motions_in_folder``): a run that carries its clips keeps naming them relative to its folder, so that
    the folder can still be moved or copied."""
    data = to_dict(cfg)
    env, recorded = data.get("env"), run.config().get("env")
    motions = recorded.get("motions") if isinstance(recorded, dict) else None
    if isinstance(env, dict) and motions is not None and env.get("motions") == run.motions_in_folder(motions):
        data["env"] = {**env, "motions": motions}
    save_yaml(data, run.config_path)


def _saved_as_override(cls: type, saved: dict[str, Any], dotted: str) -> Any:
    """The saved config's value of ``dotted`` converted as an override is (a YAML list as the field's tuple), or a
    marker equal to no value where the saved config lacks it or holds a value of another type."""
    missing = object()
    value = dotted_value(saved, dotted, missing)
    try:
        return missing if value is missing else check_override(cls, dotted, value)
    except OverrideError:
        return missing


CONFIG_CHANGES = "config_changes.yaml"
"""Run-folder file listing the settings changed mid-run (iteration, samples, key, old and new value)."""


def read_config_changes(run: RunDir) -> list[dict[str, Any]]:
    """The changes a run's ``config_changes.yaml`` records (none without one); a file that is not a list of them
    (not YAML, a mapping) is an InputFileError naming it, as appending to it would lose or garble them."""
    path = run.file(CONFIG_CHANGES)
    history = (read_yaml(path) or []) if path.exists() else []
    if not isinstance(history, list):
        raise InputFileError(
            path,
            f"expected a list of config changes (iteration, samples, key, old, new), got {type(history).__name__}; "
            "repair it or move it aside",
        )
    return history


def record_config_changes(
    run: RunDir, changes: dict[str, tuple[Any, Any]], iteration: int, samples: int
) -> list[dict[str, Any]]:
    """Append each ``key: (old, new)`` whose value changed to ``config_changes.yaml`` (atomically, after
    ``read_config_changes``) and log one line each; returns the new entries."""
    entries = [
        {"iteration": iteration, "samples": samples, "key": k, "old": old, "new": new}
        for k, (old, new) in changes.items()
        if old != new
    ]
    if not entries:
        return entries
    path = run.file(CONFIG_CHANGES)
    history = read_config_changes(run)
    with atomic_path(path) as tmp:
        Path(tmp).write_text(yaml.safe_dump(history + entries, sort_keys=False))
    for e in entries:
        log.warning("from iteration %d on: %s %s -> %s (recorded in %s)", iteration, e["key"], e["old"], e["new"], path)
    return entries


def recorded_changes(run: RunDir) -> set[tuple[float, str]]:
    """The (samples, key) of every change ``config_changes.yaml`` records (``read_config_changes``)."""
    entries = read_config_changes(run)
    return {(e["samples"], e["key"]) for e in entries if isinstance(e, dict) and {"samples", "key"} <= e.keys()}


CURRICULUM = "curriculum"
"""The config field of a trainer with ``RESUME_CURRICULUM`` keys that lists its curriculum steps (``{at_samples,
set}``, ``TrainConfig.curriculum``); ``add_curriculum_step`` inserts one where ``--resume --set`` changes them."""
CLIPS_KEY = "env.motions"
"""Not compared on resume: ``check_clips`` compares the clips it names, which may have moved since."""


def resume_change(
    checkpoint: dict[str, Any],
    config: dict[str, Any],
    allowed: tuple[str, ...],
    samples: int,
    recorded: set[tuple[float, str]],
) -> tuple[str, Any, Any] | None:
    """The first setting (dotted key, the checkpoint's value, the config's) in which a checkpoint's saved config
    and the config resumed from it differ where resume may not change it: not an ``allowed`` key (or below one),
    not ``CLIPS_KEY``, not curriculum steps added from the checkpoint's ``samples`` on (``curriculum_added``);
    None when they agree. A key only one of them holds (a setting of another version) is not compared."""
    old, new = _flat(checkpoint), _flat(config)
    for key, value in new.items():
        if key not in old or _plain(old[key]) == _plain(value) or key == CLIPS_KEY:
            continue
        if any(key == a or key.startswith(f"{a}.") for a in allowed):
            continue
        if key == CURRICULUM and curriculum_added(old[key], value, samples, recorded):
            continue
        return key, old[key], value
    return None


def curriculum_added(before: Any, after: Any, samples: int, recorded: set[tuple[float, str]]) -> bool:
    """Whether curriculum steps ``after`` are ``before`` with steps added that resume may add: each after the
    checkpoint's ``samples`` (recorded in config_changes.yaml once in force), or at a sample count where
    config_changes.yaml records every change it makes (a ``--resume --set`` of a session that ended before its next
    checkpoint)."""
    if not isinstance(before, list) or not isinstance(after, list):
        return False
    kept, added = 0, []
    for step in after:
        if kept < len(before) and _plain(step) == _plain(before[kept]):
            kept += 1
        else:
            added.append(step)
    if kept < len(before):
        return False
    return all(
        isinstance(s, dict)
        and isinstance(s.get("set"), dict)
        and (s.get("at_samples", 0) > samples or all((s.get("at_samples"), k) in recorded for k in s["set"]))
        for s in added
    )


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested mapping as dotted keys and their values (lists kept whole)."""
    out: dict[str, Any] = {}
    for k, v in data.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _plain(value: Any) -> Any:
    """``value`` with tuples as lists, recursively (a checkpoint may hold either)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def checkpoint_candidates(run: RunDir) -> list[Path]:
    """A run's checkpoints, newest first: ``latest.pt``, then ``iter_*.pt`` by iteration; a clear error if none."""
    ckpt_dir = run.checkpoints_dir
    found = [ckpt_dir / LATEST] if (ckpt_dir / LATEST).is_file() else []
    found += sorted(ckpt_dir.glob("iter_*.pt"), reverse=True)  # zero-padded: name order is iteration order
    if not found and run.policy_path.is_file():
        raise InputFileError(
            run.path,
            f"nothing to resume: it holds a trained policy ({RunDir.POLICY}) but no checkpoints (a shipped or "
            "exported run keeps none); train a new run into another folder",
        )
    if not found:
        raise InputFileError(
            ckpt_dir / LATEST, "no checkpoint to resume from (a run writes one every checkpoint_every iterations)"
        )
    return found


def load_generator_state(gen: torch.Generator, rng: dict[str, Any], iteration: int) -> None:
    """Restore the action-noise generator; a checkpoint from another kind of device reseeds it (not bit-exact)."""
    saved = rng.get("sample_device", "cpu")
    if saved == gen.device.type:
        gen.set_state(rng["sample"])
        return
    seed = int(torch.randint(2**62, (1,), generator=torch.Generator().manual_seed(iteration)))
    gen.manual_seed(seed)
    log.warning(
        "checkpoint drew action noise on %s, this run on %s: the noise generator is reseeded, so the continuation "
        "is not bit-identical to an uninterrupted run",
        saved,
        gen.device.type,
    )
