"""File helpers shared by all rgsd packages: atomic writes, input errors, .npz reads and torch files of plain data.

rgsd's torch files (checkpoints, policies, encoders) hold tensors and plain values only, so they load with
``torch.load(weights_only=True)``: a file from elsewhere cannot run code when it is read. ``save_plain`` refuses
anything else at save time and ``load_plain`` refuses files that carry pickled objects.
"""

from __future__ import annotations

import collections
import contextlib
import fnmatch
import glob
import hashlib
import os
import pickle
import re
import shutil
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rgsd_envs.utils.listing import first_few


class InputFileError(ValueError):
    """A user-supplied file is unreadable or malformed; names the file and field."""

    def __init__(self, path: str | os.PathLike, message: str, field: str | None = None):
        self.path = str(path)
        self.field = field
        self.reason = message
        where = f"{self.path}" + (f": field '{field}'" if field else "")
        super().__init__(f"{where}: {message}")

    def without_path(self, path: str | os.PathLike) -> str:
        """The message without its leading file name when it is about ``path`` (for a line that names it already);
        the whole message when it is about another file."""
        if self.path != str(path):
            return str(self)
        return (f"field '{self.field}': " if self.field else "") + self.reason


LOCK_NAME = ".lock"
"""The lock file a long command holds in its output folder (``folder_lock``)."""


class FolderInUse(InputFileError):
    """Another process holds the output folder (``folder_lock``)."""


def file_on_path(path: str | os.PathLike) -> Path | None:
    """The first of ``path`` and its parents that exists and is not a folder (None: a folder can be made there)."""
    path = Path(path)
    return next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)


def file_sha256(path: str | os.PathLike) -> str:
    """The hex sha256 of a file's bytes (read in 1 MiB blocks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def output_folder(path: str | os.PathLike) -> bool:
    """Create the output folder ``path`` and its parents; True where this call created it. A path that is a file,
    or lies under one, or cannot be created is an InputFileError naming it, not a traceback."""
    path = Path(path)
    blocker = file_on_path(path)
    if blocker == path:
        raise InputFileError(path, "output path exists and is not a folder")
    if blocker is not None:
        raise InputFileError(path, f"cannot create this folder: {blocker} is a file")
    created = not path.exists()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputFileError(path, f"cannot create this folder: {err.strerror}") from None
    return created


@contextlib.contextmanager
def folder_lock(
    path: str | os.PathLike, command: str, create: bool = True, setup_files: Collection[str] = ()
) -> Iterator[Path]:
    """Hold ``path`` for one process while ``command`` writes into it; a second one gets FolderInUse.

    Runs resume by running the same command again, so a second command on a folder still in use (under nohup,
    in another terminal) would otherwise interleave its checkpoints with the first one's. The lock is an advisory
    ``flock`` on ``<path>/.lock`` that the system drops when the process ends, so a killed run never leaves a stale
    lock. A folder this call created is removed again if nothing but the lock was written into it; with
    ``create=False`` a missing folder is not created and not locked (the command's own check names it). A folder
    this call created is also removed when the command fails while the folder holds nothing but ``setup_files``
    (a run's config and encoder, written before its environment is built): they cannot be resumed, and a later run
    must not take them for a run. Anything else (TensorBoard logs, a pretraining, checkpoints) keeps the folder. No
    lock on systems without ``fcntl`` (Windows).
    """
    path = Path(path)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        fcntl = None
    if fcntl is None or (not create and not path.is_dir()):
        yield path
        return
    created = output_folder(path)
    lock = path / LOCK_NAME
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    failed = False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 200).decode(errors="replace").strip() or "another process"
            raise FolderInUse(path, f"in use by {holder}; wait for it to end or stop it, then run again") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} ({command})".encode())
        failed = True
        yield path
        failed = False
    finally:
        os.close(fd)  # closing drops the flock
        removable = {LOCK_NAME, *(setup_files if failed else ())}
        if created and {p.name for p in path.iterdir()} <= removable:
            shutil.rmtree(path, ignore_errors=True)


def remove_event_files(folder: str | os.PathLike) -> None:
    """Delete the TensorBoard event files in ``folder``: a training started again writes its curves from step 0
    on, over the earlier attempt's, which TensorBoard would draw as well."""
    for path in Path(folder).glob("events.out.tfevents.*"):
        path.unlink(missing_ok=True)


TEMP_SUFFIXES = (".tmp", ".partial", ".old")
"""How ``atomic_path`` (a file), ``staged_folder`` (a folder) and its replacement (the earlier folder, moved aside)
name their temporaries: ``.<target name>.<8 random characters><suffix>``, beside the target."""

_TEMP_NAME = re.compile(r"^\.(?P<target>.+)\.[a-z0-9_]{8}(?P<suffix>\.tmp|\.partial|\.old)$")
"""A temporary's name (``tempfile``'s 8 random characters); the target name and suffix are groups."""


def remove_stale_temps(folder: str | os.PathLike, target: str) -> list[Path]:
    """Delete the temporaries in ``folder`` that a killed writer left of a target named like ``target`` (a glob
    pattern: ``iter_*.pt``); returns them.

    A writer killed outright (SIGKILL, a power cut) cannot remove its temporary, and a later write of the same
    target picks a new random name, so nothing else would. An earlier folder moved aside (``.old``) whose target
    is missing is put back first: the writer died between the two renames of ``_replace_folder``. Only names of
    ``TEMP_SUFFIXES``' pattern are touched,
    and only those no live process holds: a writer keeps an ``flock`` on its temporary while it writes
    (``_claim``), which the system drops when it dies. Nothing is removed on systems without ``fcntl`` (Windows),
    where a live writer cannot be told from a dead one."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return []
    removed: list[Path] = []
    for path in sorted(Path(folder).glob(".*")):
        match = _TEMP_NAME.match(path.name)
        if match is None or not fnmatch.fnmatchcase(match["target"], target) or path.is_symlink():
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:  # gone already, or not ours to read
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a live writer holds it
            os.close(fd)
            continue
        try:
            earlier, target_path = path / match["target"], path.parent / match["target"]
            if match["suffix"] == ".old" and earlier.is_dir() and not target_path.exists():
                os.rename(earlier, target_path)  # killed between moving it aside and the rename: its only copy
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        finally:
            os.close(fd)
        removed.append(path)
    return removed


def _claim(make: Callable[[], str]) -> tuple[Path, int | None]:
    """A new temporary (``make`` creates it and returns its path) and an open descriptor holding an ``flock`` on it
    (None without ``fcntl``), so that ``remove_stale_temps`` leaves it alone while this process lives."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return Path(make()), None
    while True:
        path = make()
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # a file system without locks (some network mounts): write unguarded, as without fcntl
            os.close(fd)
            return Path(path), None
        if os.fstat(fd).st_nlink > 0:  # not removed as stale between its creation and the lock
            return Path(path), fd
        os.close(fd)


def _release(fd: int | None) -> None:
    """Close a descriptor from ``_claim`` (dropping its lock)."""
    if fd is not None:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` on success.

    If the body raises (or the process is interrupted), the temporary file is
    removed and ``path`` is left as it was: no half-written outputs. Temporaries of
    ``path`` that a killed writer left are removed first (``remove_stale_temps``).
    """
    path = Path(path)
    if path.is_dir():
        raise InputFileError(path, "output path is a folder; give a file name")
    blocker = file_on_path(path.parent)
    if blocker is not None:
        raise InputFileError(path, f"cannot write here: {blocker} is a file, not a folder")
    output_folder(path.parent)
    remove_stale_temps(path.parent, glob.escape(path.name))

    def make() -> str:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        return tmp

    try:
        tmp_path, lock = _claim(make)
    except OSError as err:  # named by the output, not by the temporary file beside it
        raise InputFileError(path, f"cannot write here: {err.strerror}") from None
    try:
        yield tmp_path
        os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp creates 0600 files; give the output the usual permissions
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise
    finally:
        _release(lock)


@contextlib.contextmanager
def staged_folder(out: str | os.PathLike) -> Iterator[Path]:
    """Yield a new hidden folder beside ``out`` to write into; on success it replaces ``out`` whole, on an error or
    an interrupt it is removed and ``out`` is left as it was. Stage and set-aside folders of ``out`` that a killed
    writer left are removed first (``remove_stale_temps``). An ``out`` that is or holds the working folder is an
    InputFileError: replacing it would pull the folder away from under the process."""
    out = Path(out).resolve() if Path(out).is_symlink() else Path(out)  # the folder a link names gets the files
    if Path.cwd().resolve().is_relative_to(out.resolve()):
        raise InputFileError(out, "is the working folder or holds it, which would be replaced whole; give another")
    parent = next(p for p in out.absolute().parents if p.exists())  # nothing is created before the folder is whole
    remove_stale_temps(parent, glob.escape(out.name))
    try:
        stage, lock = _claim(lambda: tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=parent))
    except OSError as err:
        raise InputFileError(out, f"cannot write here: {err.strerror}") from None
    try:
        yield stage
        os.chmod(stage, 0o777 & ~_umask())  # mkdtemp makes a private folder; give it the usual permissions
        _replace_folder(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    finally:
        _release(lock)


def _replace_folder(stage: Path, out: Path) -> None:
    """Rename ``stage`` onto ``out``, the earlier folder there moved aside first and deleted after, so that at every
    moment one of them is at ``out``'s path or being renamed to it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists():
        os.rename(stage, out)
        return
    old, lock = _claim(lambda: tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
    try:
        os.rename(out, old / out.name)
        try:
            os.rename(stage, out)
        except BaseException:
            os.rename(old / out.name, out)  # the earlier folder back in place
            shutil.rmtree(old, ignore_errors=True)
            raise
        shutil.rmtree(old, ignore_errors=True)
    finally:
        _release(lock)


def _umask() -> int:
    """The process's umask (reading it means setting it, so it is set back at once)."""
    umask = os.umask(0)
    os.umask(umask)
    return umask


class NpzArrays(Mapping[str, np.ndarray]):
    """The arrays read from an .npz file, and the names of all its members."""

    def __init__(self, path: Path, arrays: dict[str, np.ndarray], files: tuple[str, ...]):
        self.path = path
        self.files = files
        """Every member of the archive, read or not."""
        self._arrays = arrays

    def __getitem__(self, key: str) -> np.ndarray:
        return self._arrays[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)


def _corrupt(path: Path, err: BaseException) -> InputFileError:
    return InputFileError(path, f"not a readable .npz file (truncated or corrupt?): {err}")


def read_npz(path: str | os.PathLike, keys: Iterable[str] | None = None) -> NpzArrays:
    """The arrays named in ``keys`` (all when None) that an .npz file holds, read one at a time.

    Members not asked for are never read, so extra keys a format does not need (AMASS
    SMPL-X files carry a pickled ``markers_latent_vids``) cannot break the read. Nothing
    is unpickled: an asked-for object array is an InputFileError naming the key; only a
    broken archive (bad zip, CRC, truncation) is reported as truncated or corrupt.
    """
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "no such file")
    with open(path, "rb") as f:
        magic = f.read(6)
    if not magic.startswith((b"PK", b"\x93NUMPY")):  # np.load would try pickle and talk of "pickled data"
        raise InputFileError(path, "not an .npz archive (its first bytes are not those of a zip file)")
    try:
        data = np.load(path, allow_pickle=False)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as err:
        raise _corrupt(path, err) from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise InputFileError(path, f"expected an .npz archive, got a single {type(data).__name__} (.npy?)")
    with data:
        files = tuple(data.files)
        wanted = files if keys is None else [k for k in dict.fromkeys(keys) if k in files]
        arrays: dict[str, np.ndarray] = {}
        for key in wanted:
            try:
                arrays[key] = data[key]
            except ValueError as err:
                if "pickle" in str(err):
                    raise InputFileError(
                        path,
                        "stored as an object (pickled) array; rgsd reads .npz arrays without unpickling, "
                        "re-save this key as a plain numeric or string array",
                        key,
                    ) from None
                raise _corrupt(path, err) from None
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as err:
                raise _corrupt(path, err) from None
    return NpzArrays(path, arrays, files)


def npz_text(value: np.ndarray | str | bytes) -> str:
    """A string stored in an .npz (0-d unicode or bytes array, or a plain str/bytes)."""
    item = value.item() if isinstance(value, np.ndarray) else value
    return item.decode("utf-8", errors="replace") if isinstance(item, bytes) else str(item)


PLAIN_TYPES: tuple[type, ...] = (
    dict,
    collections.OrderedDict,  # what nn.Module.state_dict returns
    list,
    tuple,
    str,
    int,
    float,
    bool,
    type(None),
    torch.Tensor,
    torch.nn.Parameter,
    torch.Size,
    torch.dtype,
    torch.device,
)
"""Exact types a torch file of plain data may hold (all load with ``weights_only=True``; subclasses such as
numpy's float64 or a named tuple would be pickled as objects and are not plain)."""


class PickledObjectsError(InputFileError):
    """A torch file that carries pickled Python objects: rgsd refuses it instead of unpickling (that can run code)."""


def non_plain_entries(obj: Any, where: str = "") -> list[str]:
    """Where ``obj`` holds something other than ``PLAIN_TYPES`` ("key.sub[2] (numpy.ndarray)"); empty when plain."""
    kind = type(obj)
    if kind not in PLAIN_TYPES:
        return [f"{where or '<top>'} ({kind.__module__}.{kind.__qualname__})"]
    found: list[str] = []
    if isinstance(obj, dict):
        for key, value in obj.items():
            path = f"{where}.{key}" if where else str(key)
            if type(key) not in PLAIN_TYPES:
                found.append(f"{path} (a key of type {type(key).__module__}.{type(key).__qualname__})")
            found += non_plain_entries(value, path)
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            found += non_plain_entries(value, f"{where}[{i}]")
    return found


def save_plain(obj: Any, path: str | os.PathLike) -> Path:
    """``torch.save`` of plain data (``PLAIN_TYPES`` only), atomically; a TypeError names the first other entry."""
    bad = non_plain_entries(obj)
    if bad:
        raise TypeError(
            f"{path}: refusing to save {first_few(bad, 1)}: rgsd torch "
            "files hold tensors and plain Python values only (convert arrays with torch.from_numpy, numbers with "
            "float() or int())"
        )
    with atomic_path(path) as tmp:
        torch.save(obj, tmp)
    return Path(path)


def load_plain(path: str | os.PathLike, hint: str = "use a file written by this version of rgsd") -> Any:
    """``torch.load(weights_only=True)`` on the CPU; a file carrying pickled objects is a PickledObjectsError (its
    message ends with ``hint``, what to do instead).

    Other failures (a truncated or corrupt file) are torch's own exceptions, for the caller to word."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        text = str(err)
        if not _OBJECT_REFUSED.search(text):
            # not an object but garbage (an unknown opcode, a broken stream): the caller says corrupt, with torch's
            # reason alone (its advice to retry with weights_only=False is wrong for garbage and unsafe in general)
            reason = (
                text.split("WeightsUnpickler error:", 1)[1].strip().splitlines() if "WeightsUnpickler" in text else []
            )
            raise pickle.UnpicklingError(reason[0] if reason else "not a torch file") from None
        found = re.search(r"GLOBAL ([\w.]+)", text)
        what = f" ({found.group(1)})" if found else ""
        raise PickledObjectsError(
            path,
            f"holds objects that are not plain data{what}; rgsd will not unpickle them, since unpickling can run "
            f"code (rgsd writes tensors and plain values only): {hint}",
        ) from None


_OBJECT_REFUSED = re.compile(
    r"Unsupported global|unsupported GLOBAL|Can only create new object|call reduce for unrecognized|Can only build"
)
"""How torch's weights-only unpickler words a refused object (a class, a function, a reduce call)."""
