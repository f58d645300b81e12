"""Clip names of an import: no clip of one source file overwrites another's.

Each AMASS file asks for a name (its file name, or the paper set's); AMASS subject folders reuse file names, and
an output folder may already hold clips of other files. ``clip_names`` keeps a name with the file that has it and
names the others by their parent folders.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

from rgsd_envs.motion.amass import is_rgsd_clip, safe_name
from rgsd_envs.utils.files import InputFileError, npz_text, read_npz

Job = tuple[Path, str, str]
"""One clip to import: (source file, clip name asked for, category)."""


def clip_names(
    jobs: list[Job], out: Path, folder: dict[str, str], given: dict[tuple[str, str], str] | None = None
) -> list[tuple[str, list[str]]]:
    """The clip name each job writes into ``out``, and the other source files that have the name it asked for.

    ``folder`` maps the names of the clips already in ``out`` to their source files; ``given`` maps (a source's
    ``same_file_key``, the name it asked for) to the clip name an earlier import gave it. A source keeps the name
    an earlier import gave it while that clip is its own in ``out``, whichever files this import holds. Otherwise a
    name stays with the source that has it in ``out``; sources of one import asking for the same name are named by
    the nearest parent folders that tell them apart (``a/walk_poses.npz`` and ``b/walk_poses.npz`` become
    ``a_walk`` and ``b_walk``), with ``_2``, ``_3``... where the folders cannot. So importing a source again,
    alone or with others, rewrites its own clip.
    """
    given = given or {}
    asking: dict[str, list[int]] = {}
    kept: dict[int, str] = {}  # jobs whose source has its clip in ``out`` from an earlier import
    for i, (src, name, _) in enumerate(jobs):
        earlier = given.get((same_file_key(src), name))
        if earlier is not None and earlier in folder and _same_file(src, folder[earlier]):
            kept[i] = earlier
        else:
            asking.setdefault(name, []).append(i)
    names: list[tuple[str, list[str]]] = [(name, []) for _, name, _ in jobs]
    for i, earlier in kept.items():
        src, name, _ = jobs[i]
        if earlier != name:  # the files it was renamed for: this import's and the name's owner in ``out``
            owner = _owner(out, name, folder)
            others = [str(jobs[j][0]) for j in asking.get(name, [])]
            others += [owner] if owner is not None and not _same_file(src, owner) else []
            names[i] = (earlier, others)
    clashes: list[tuple[int, list[str]]] = []
    for name, idx in asking.items():
        owner = _owner(out, name, folder)
        keeper = next((i for i in idx if owner is not None and _same_file(jobs[i][0], owner)), None)
        if owner is None and len(idx) == 1:
            keeper = idx[0]
        claimants = [str(jobs[i][0]) for i in idx] + ([owner] if owner is not None and keeper is None else [])
        clashes += [(i, [c for c in claimants if c != str(jobs[i][0])]) for i in idx if i != keeper]
    taken = set(asking) | set(kept.values())
    for i, others in clashes:
        src, name, _ = jobs[i]
        base = _folder_name(src, name, others)
        chosen, n = base, 2
        while chosen in taken or not _same_file(src, _owner(out, chosen, folder) or src):
            chosen, n = f"{base}_{n}", n + 1
        taken.add(chosen)
        names[i] = (chosen, others)
    return names


def _folder_name(src: Path, name: str, others: list[str]) -> str:
    """``name`` after the fewest parent folders of ``src`` (outermost first) whose chain no other file shares."""
    mine = Path(os.path.abspath(src)).parent.parts[::-1]
    theirs = [Path(os.path.abspath(o)).parent.parts[::-1] for o in others]
    depth = next((d for d in range(1, len(mine) + 1) if all(t[:d] != mine[:d] for t in theirs)), 1)
    return safe_name("_".join([*reversed(mine[:depth]), name])) or name


def _owner(out: Path, name: str, folder: dict[str, str]) -> str | None:
    """The source file of the clip ``out/<name>.npz``, or None where there is no such file.

    Clips missing from the report name their source themselves; a file that is no rgsd clip (an AMASS file in an
    output folder that is also the input) has an owner no source matches, so nothing overwrites it.
    """
    if name in folder:
        return folder[name]
    path = out / f"{name}.npz"
    if not path.exists():
        return None
    if is_rgsd_clip(path):
        with contextlib.suppress(InputFileError, KeyError):
            return npz_text(read_npz(path, ("source",))["source"])
    return f"{path} (not an rgsd clip)"


def same_file_key(path: str | os.PathLike) -> str:
    """One key per file, whatever the path that names it (links and relative parts resolved)."""
    return os.path.realpath(path)


def _same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    return same_file_key(a) == same_file_key(b)


def inside(path: str | os.PathLike, folder: Path) -> bool:
    """Whether ``path`` is in ``folder`` or below it (links resolved)."""
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(folder))


def distinct_sources(jobs: Iterable[Job]) -> list[Job]:
    """Jobs with each source file once (a file given twice, or given and found again in a folder)."""
    seen: set[str] = set()
    out: list[Job] = []
    for job in jobs:
        key = same_file_key(job[0])
        if key not in seen:
            seen.add(key)
            out.append(job)
    return out
