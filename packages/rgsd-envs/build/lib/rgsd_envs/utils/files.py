"""File helpers shared by all rgsd packages: atomic writes and input errors."""

from __future__ import annotations

import contextlib
import os
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np


class InputFileError(ValueError):
    """A user-supplied file is unreadable or malformed; names the file and field."""

    def __init__(self, path: str | os.PathLike, message: str, field: str | None = None):
        self.path = str(path)
        self.field = field
        where = f"{self.path}" + (f": field '{field}'" if field else "")
        super().__init__(f"{where}: {message}")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` on success.

    If the body raises (or the process is interrupted), the temporary file is
    removed and ``path`` is left as it was: no half-written outputs.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        # mkstemp creates 0600 files; give the output the usual permissions
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_path, 0o666 & ~umask)
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def read_npz(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """All arrays of an .npz file, or an InputFileError naming the file if it is
    missing, truncated or corrupt (no pickles are loaded)."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "no such file")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as err:
        raise InputFileError(path, f"not a readable .npz file (truncated or corrupt?): {err}") from None
