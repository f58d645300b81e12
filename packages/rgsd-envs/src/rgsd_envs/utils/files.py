"""File helpers shared by all rgsd packages: atomic writes and input errors."""

from __future__ import annotations

import contextlib
import os
import tempfile
import zipfile
import zlib
from collections.abc import Iterable, Iterator, Mapping
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
