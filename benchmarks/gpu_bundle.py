"""An offline bundle for a GPU machine with CUDA torch and no internet: what it lacks, packed in parts.

    python benchmarks/gpu_bundle.py --out bundle/                 # here, with PyPI (or --find-links) at hand
    bash bundle/unpack.sh /tmp/rgsd                                # there: checks and unpacks the parts
    . /tmp/rgsd/env.sh && python benchmarks/gpu_check.py --quick --out runs/gpu_check

Many GPU nodes have Python with CUDA torch (and numpy, scipy, matplotlib, tensorboard, ...) but none of MuJoCo,
MuJoCo Warp or warp-lang, and cannot reach a package index; jobs there may carry only so many megabytes each.
This script installs ``PACKAGES`` for the target's Python and platform into a staging folder (``pip install
--target --platform``, no dependencies resolved: the list is what a CUDA torch image lacks), drops what a GPU
training node does not use (``PRUNE``: tests, examples, MuJoCo's GUI, headers and, unless ``--keep-warp-cpu``,
warp's CPU compiler), adds the repository's files (tracked and untracked-not-ignored, so no run outputs; skip
with ``--no-repo`` where the repository travels by other means) with ``COMMIT.json`` (the commit they were packed
from, and whether they differ from it), and writes one xz-compressed tar in parts of at most ``--part-mib`` MiB,
with ``MANIFEST.json`` (parts, sizes, sha256, package versions, the commit) and ``unpack.sh``.

What the node must already hold is what ``prerequisites.py`` lists (rgsd's dependencies, read from its
``pyproject.toml`` files, and pytest) less ``PACKAGES``. ``--with-base`` packs those too, torch excepted, with their
dependencies resolved by pip for ``--python``, as a second archive (``base/``, its own parts, so its megabytes are
counted apart): for a Python that has CUDA torch and nothing else.

It also carries rgsd's warp kernels compiled for ``--kernels-arch`` (default 90: H100, H200) by
``benchmarks/warp_kernels.py``, here, with no GPU: a bare GPU machine would otherwise spend its job's first minutes
compiling them. That needs this Python to hold the same warp-lang and mujoco-warp as the bundle (``--no-kernels``
skips it).

``unpack.sh DEST`` checks every part's sha256, streams them through Python's ``tarfile`` (no xz program needed)
into ``DEST`` and writes ``DEST/env.sh``, which puts ``DEST/site`` (and ``DEST/base``) and the repository's three
packages on ``PYTHONPATH``, sets ``MUJOCO_GL=disable`` (a GPU node often has no libEGL), points ``WARP_CACHE_PATH`` at
the compiled kernels (warp adds what it compiles there to them) and exports the bundle's Python as
``RGSD_BUNDLE_PYTHON``. Both then run the repository's ``prerequisites.py``, which says in one line each whether
``python3`` is another Python than the bundle's and what it lacks (``gpu_check.py`` checks the same before its
first step). Parts may arrive in separate jobs: the script only needs them side by side when it runs.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import IO

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from prerequisites import (  # noqa: E402  (one list of what rgsd needs)
    BUNDLE_PYTHON_ENV,
    NAME,
    canonical,
    runtime_requirements,
    tool_requirements,
)

PROVENANCE = REPO / "packages" / "rgsd-envs" / "src" / "rgsd_envs" / "utils" / "provenance.py"


def _provenance() -> ModuleType:
    """``rgsd_envs.utils.provenance``, loaded from its file: it names the commit file that it reads back, and
    importing it through its package would import rgsd's simulator, which this script (run where pip is) does not
    need."""
    spec = importlib.util.spec_from_file_location("_rgsd_provenance", PROVENANCE)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _required(name: str) -> str:
    """``name`` as rgsd's ``pyproject.toml`` files require it (their floor, written there once); bare where they
    cannot be read (a Python 3.10 without tomli)."""
    by_name = {canonical(NAME.match(r).group(1)): r for r in runtime_requirements()}  # type: ignore[union-attr]
    return by_name.get(canonical(name), name)


PACKAGES = (
    "warp-lang==1.19.0",
    "mujoco-warp==4.0.0",
    "mujoco==4.0.0",
    "mujoco-core==4.0.0",
    "mujoco-studio==4.0.0",
    _required("gymnasium"),
    "farama-notifications",
    "glfw",
    "pyopengl",
    "websockets>=13",
)
"""What a CUDA torch image lacks of rgsd's runtime (pinned where rgsd pins them: the warp extra; gymnasium with
rgsd's floor)."""
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
"""Wheel platform tags accepted for the target (x86-64 Linux, glibc 2.28 or newer)."""
PRUNE = (
    "warp/tests",
    "warp/examples",
    "mujoco/studio",
    "mujoco/include",
    "mujoco/doc",
    "mujoco/testdata",
    "mujoco_warp/test_data",
)
"""Staged folders a GPU training node does not use (test suites, examples, MuJoCo's GUI, C headers)."""
WARP_CPU = "warp/bin/warp-clang.so"
"""warp's CPU compiler (69 MB): a CUDA device compiles with NVRTC, inside warp.so; the CPU device needs it."""
ARCHIVE = "rgsd-gpu-bundle.tar.xz"
BASE_ARCHIVE = "rgsd-gpu-bundle-base.tar.xz"
"""``--with-base``'s packages: an archive of their own, so the manifest counts their megabytes apart."""
COMMIT_FILE = _provenance().COMMIT_FILE
"""In the packed repository: {"commit": the commit it was packed from, "dirty": whether its files differ from it}
(the bundle carries no ``.git``; ``rgsd_envs.utils.provenance`` reads it there)."""
KERNEL_PACKAGES = ("warp-lang", "mujoco-warp")
"""Whose sources name the compiled kernels (warp hashes a module's source): here and in the bundle they must match."""

UNPACK_SH = r"""#!/usr/bin/env bash
# Unpack the rgsd GPU bundle beside this script into DEST (default /tmp/rgsd); then: . DEST/env.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="$(mkdir -p "${1:-/tmp/rgsd}" && cd "${1:-/tmp/rgsd}" && pwd)"
python3 - "$here" "$dest" <<'PY'
import hashlib, json, os, subprocess, sys, tarfile
from pathlib import Path

here, dest = Path(sys.argv[1]), Path(sys.argv[2])
manifest = json.loads((here / "MANIFEST.json").read_text())
archives = {}
for part in manifest["parts"]:
    path = here / part["name"]
    if not path.is_file():
        sys.exit(f"unpack: {path}: missing (the bundle has {len(manifest['parts'])} parts; copy them all beside unpack.sh)")
    if hashlib.sha256(path.read_bytes()).hexdigest() != part["sha256"]:
        sys.exit(f"unpack: {path}: sha256 differs from MANIFEST.json (a part was cut short or changed in transit)")
    archives.setdefault(part["archive"], []).append(path)


class Joined:
    # the parts read as one stream
    def __init__(self, paths):
        self.files = [open(p, "rb") for p in paths]

    def read(self, n=-1):
        out = b""
        while self.files and (n < 0 or len(out) < n):
            chunk = self.files[0].read(-1 if n < 0 else n - len(out))
            if not chunk:
                self.files.pop(0).close()
            out += chunk
        return out


for files in archives.values():
    with tarfile.open(fileobj=Joined(files), mode="r|xz") as tar:
        tar.extractall(dest, filter="tar")
site, base, repo = dest / "site", dest / "base", dest / "rgsd"
paths = [str(site)] + ([str(base)] if base.is_dir() else [])
paths += [str(repo / "packages" / p / "src") for p in ("rgsd-envs", "rgsd-eval", "rgsd-agents") if repo.is_dir()]
lines = [f'export PYTHONPATH="{":".join(paths)}${{PYTHONPATH:+:$PYTHONPATH}}"', "export MUJOCO_GL=${MUJOCO_GL:-disable}"]
if (dest / "warp-cache").is_dir():
    lines.append(f'export WARP_CACHE_PATH="{dest / "warp-cache"}"')
if manifest.get("python"):
    lines.append(f"export @PYTHON_ENV@={manifest['python']}")
check = repo / "benchmarks" / "prerequisites.py"
if check.is_file():  # one line each: another Python than the bundle's, what it lacks
    lines.append(f'python3 "{check}" --prefix env.sh || true')
(dest / "env.sh").write_text("\n".join(lines) + "\n")
print(f"unpacked {len(manifest['parts'])} parts into {dest}: . {dest / 'env.sh'}" + (f"; the repository is {repo}" if repo.is_dir() else ""))
if check.is_file():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, *filter(None, [os.environ.get("PYTHONPATH")])])}
    subprocess.run([sys.executable, str(check), "--python", manifest.get("python") or "", "--prefix", "unpack"], env=env)
PY
"""


def stage_packages(
    site: Path, python: str, find_links: list[Path], packages: tuple[str, ...], deps: bool = False
) -> None:
    """``pip install --target site`` of ``packages`` as wheels for CPython ``python`` on x86-64 Linux (and, with
    ``deps``, of their dependencies as pip resolves them for that Python)."""
    argv = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--target", str(site)]
    argv += [] if deps else ["--no-deps"]
    argv += ["--only-binary=:all:", "--python-version", python, "--implementation", "cp"]
    argv += [a for tag in PLATFORMS for a in ("--platform", tag)]
    argv += [a for folder in find_links for a in ("--find-links", str(folder))]
    subprocess.run([*argv, *packages], check=True)


def prune(site: Path, keep_warp_cpu: bool) -> list[str]:
    """Remove ``PRUNE`` (and warp's CPU compiler unless kept) from the staged packages; the paths removed."""
    removed = []
    for rel in (*PRUNE, *(() if keep_warp_cpu else (WARP_CPU,))):
        path = site / rel
        if path.is_dir():
            shutil.rmtree(path)
        elif path.is_file():
            path.unlink()
        else:
            continue
        removed.append(rel)
    for cache in site.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)
    return removed


def base_requirements(repo: Path = REPO) -> list[str]:
    """What ``--with-base`` packs: rgsd's and the check's requirements (``prerequisites.py``) less ``PACKAGES``
    and torch (a CUDA build is the node's own)."""
    carried = {canonical(NAME.match(p).group(1)) for p in PACKAGES} | {"torch"}  # type: ignore[union-attr]
    reqs = runtime_requirements(repo) + tool_requirements(repo)
    return [r for r in reqs if canonical(NAME.match(r).group(1)) not in carried]  # type: ignore[union-attr]


def git(repo: Path, *args: str) -> str | None:
    """The stripped output of ``git -C repo args``; None where git is missing or fails (not a checkout)."""
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def source_commit(repo: Path = REPO) -> dict:
    """{"commit": the repository's HEAD (None without git), "dirty": whether the files packed differ from it:
    changed or untracked-not-ignored files}."""
    head, status = git(repo, "rev-parse", "HEAD"), git(repo, "status", "--porcelain")
    return {"commit": head, "dirty": None if status is None else bool(status)}


def prune_test_suites(folder: Path) -> list[str]:
    """Remove every folder named ``tests`` (the packages' own test suites: scipy's alone are tens of MB) and
    ``__pycache__`` under ``folder``; the test folders removed."""
    found = {p for p in folder.rglob("tests") if p.is_dir()}
    suites = sorted(p for p in found if not found & set(p.parents))  # the outermost of nested ones
    for path in suites:
        shutil.rmtree(path, ignore_errors=True)
    for cache in folder.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)
    return [str(p.relative_to(folder)) for p in suites]


def repo_files() -> list[str]:
    """The repository's tracked and untracked-not-ignored files (no run outputs, no virtual environments)."""
    out = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
    ).stdout
    return sorted({f for f in out.decode().split("\0") if f and (REPO / f).is_file()})


def versions(site: Path) -> dict[str, str]:
    """Package name -> version of every staged distribution."""
    out = {}
    for info in sorted(site.glob("*.dist-info")):
        name, _, version = info.name[: -len(".dist-info")].partition("-")
        out[name] = version
    return out


class PartWriter(io.RawIOBase):
    """A write stream cut into files ``<stem>.00``, ``.01``, ... of at most ``limit`` bytes each."""

    def __init__(self, folder: Path, stem: str, limit: int):
        self.folder, self.stem, self.limit = folder, stem, limit
        self.paths: list[Path] = []
        self.file: io.BufferedWriter | None = None
        self.used = 0

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        view = memoryview(data)
        while view:
            if self.file is None or self.used == self.limit:
                self._next()
            take = min(len(view), self.limit - self.used)
            self.file.write(view[:take])  # type: ignore[union-attr]
            self.used += take
            view = view[take:]
        return len(data)

    def _next(self) -> None:
        if self.file is not None:
            self.file.close()
        self.paths.append(self.folder / f"{self.stem}.{len(self.paths):02d}")
        self.file, self.used = self.paths[-1].open("wb"), 0

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
        super().close()


def kernels_here(packages: tuple[str, ...] = PACKAGES) -> str | None:
    """Why this Python cannot compile the bundle's kernels (a missing or other warp-lang or mujoco-warp than the
    bundle's pin in ``packages``), or None."""
    from importlib import metadata

    pins = dict(p.split("==", 1) for p in packages if "==" in p)
    for name in KERNEL_PACKAGES:
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            have = None
        if have != pins[name]:
            return f"this Python has {name} {have or '(none)'}, the bundle {pins[name]}"
    return None


def compile_kernels(out: Path, arch: int) -> dict:
    """``benchmarks/warp_kernels.py`` into ``out`` (its own process: it runs the env on the CPU); its manifest."""
    subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "warp_kernels.py"), "--out", str(out), "--arch", str(arch)],
        check=True,
    )
    return json.loads((out / "rgsd-kernels.json").read_text())


def folder_members(folder: Path, prefix: str) -> Iterator[tuple[Path, str]]:
    """(file on disk, name in the archive) of every file under ``folder``, named ``<prefix>/<relative path>``."""
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        yield path, f"{prefix}/{path.relative_to(folder)}"


def members(
    site: Path, with_repo: bool, kernels: Path | None = None, commit: dict | None = None
) -> Iterator[tuple[Path | bytes, str]]:
    """(file on disk or its bytes, name in the archive): ``site/...``, ``warp-cache/...``, then ``rgsd/...`` and
    ``rgsd/COMMIT.json`` (``commit``)."""
    yield from folder_members(site, "site")
    if kernels is not None:
        yield from folder_members(kernels, "warp-cache")
    if with_repo:
        for rel in repo_files():
            yield REPO / rel, f"rgsd/{rel}"
        yield (json.dumps(commit or {"commit": None, "dirty": None}, indent=1) + "\n").encode(), f"rgsd/{COMMIT_FILE}"


def _add(tar: tarfile.TarFile, source: Path | bytes, name: str) -> None:
    if isinstance(source, Path):
        tar.add(source, arcname=name, recursive=False)
        return
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(source), 0o644, int(time.time())
    tar.addfile(info, io.BytesIO(source))


def write_parts(out: Path, archive: str, files: Iterable[tuple[Path | bytes, str]], part_bytes: int) -> list[Path]:
    """The xz tar ``archive`` of ``files`` (``members``) cut into parts; compressed by the xz program (all cores)
    when there is one, else by Python's lzma (one core, slower)."""
    xz = shutil.which("xz")
    writer = PartWriter(out, archive, part_bytes)
    if xz:
        proc = subprocess.Popen([xz, "-9", "-T0", "-c"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        with tarfile.open(fileobj=proc.stdin, mode="w|") as tar:  # type: ignore[arg-type]
            pump = _pump_in_thread(proc.stdout, writer)
            for source, name in files:
                _add(tar, source, name)
        proc.stdin.close()  # type: ignore[union-attr]
        pump.join()
        if proc.wait():
            raise SystemExit(f"gpu_bundle: xz failed with exit code {proc.returncode}")
    else:
        with tarfile.open(fileobj=writer, mode="w|xz", preset=9) as tar:  # type: ignore[call-overload]
            for source, name in files:
                _add(tar, source, name)
    writer.close()
    return writer.paths


def _pump_in_thread(src: IO[bytes], dst: PartWriter) -> threading.Thread:
    """Copy the compressor's output into the parts while the tar is written into its input."""

    def pump() -> None:
        while chunk := src.read(1 << 20):
            dst.write(chunk)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


def sha256(path: Path) -> str:
    """Hex digest of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def pack(
    site: Path,
    out: Path,
    with_repo: bool,
    part_bytes: int,
    meta: dict,
    kernels: Path | None = None,
    base: Path | None = None,
) -> dict:
    """Write the parts of ``site`` (and the repository, stamped with ``meta``'s commit, and the compiled
    ``kernels``), those of ``base`` (``--with-base``) apart, ``MANIFEST.json`` (``meta`` plus the parts) and
    ``unpack.sh`` into ``out``; the manifest."""
    commit = {k: meta.get(k) for k in ("commit", "dirty")}
    archives = {ARCHIVE: write_parts(out, ARCHIVE, members(site, with_repo, kernels, commit), part_bytes)}
    if base is not None:
        archives[BASE_ARCHIVE] = write_parts(out, BASE_ARCHIVE, folder_members(base, "base"), part_bytes)
    manifest = {
        **meta,
        "packages": versions(site),
        **({"base_packages": versions(base)} if base is not None else {}),
        "repository": with_repo,
        "parts": [
            {"name": p.name, "archive": archive, "bytes": p.stat().st_size, "sha256": sha256(p)}
            for archive, parts in archives.items()
            for p in parts
        ],
    }
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    (out / "unpack.sh").write_text(UNPACK_SH.replace("@PYTHON_ENV@", BUNDLE_PYTHON_ENV))
    return manifest


def archive_mib(manifest: dict, archive: str) -> float:
    """The MiB of ``archive``'s parts in ``manifest``."""
    return sum(p["bytes"] for p in manifest["parts"] if p["archive"] == archive) / (1 << 20)


def main(argv: list[str] | None = None) -> int:
    """Stage, prune, compress and cut; write MANIFEST.json and unpack.sh beside the parts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder of the parts, MANIFEST.json and unpack.sh")
    parser.add_argument("--python", default="3.12", help="the GPU machine's Python (major.minor; default 3.12)")
    parser.add_argument("--part-mib", type=float, default=60.0, help="largest part in MiB (default 60)")
    parser.add_argument("--find-links", type=Path, action="append", default=[], help="a folder of wheels to use")
    parser.add_argument("--keep-warp-cpu", action="store_true", help="keep warp's CPU compiler (69 MB)")
    parser.add_argument("--no-repo", action="store_true", help="the packages alone (the repository travels apart)")
    parser.add_argument("--kernels-arch", type=int, default=90, help="compile rgsd's warp kernels for this GPU arch")
    parser.add_argument("--no-kernels", action="store_true", help="no compiled kernels (warp compiles them there)")
    parser.add_argument(
        "--with-base", action="store_true",
        help="also rgsd's other dependencies and pytest, torch excepted (numpy, scipy, matplotlib, tensorboard, ...), "
        "for a Python that has CUDA torch alone",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.out.exists() and any(args.out.iterdir()):
        parser.error(f"--out {args.out}: not empty (a bundle is written into a new or empty folder)")
    why = None if args.no_kernels else kernels_here()
    if why:
        parser.error(f"cannot compile the bundle's warp kernels: {why} (install it, or pass --no-kernels)")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rgsd-bundle-") as tmp:
        site = Path(tmp) / "site"
        stage_packages(site, args.python, args.find_links, PACKAGES)
        removed = prune(site, args.keep_warp_cpu)
        base = None
        if args.with_base:
            base = Path(tmp) / "base"
            stage_packages(base, args.python, args.find_links, tuple(base_requirements()), deps=True)
            prune_test_suites(base)
        meta = {"python": args.python, "platforms": list(PLATFORMS), "pruned": removed, **source_commit()}
        kernels = None
        if not args.no_kernels:
            kernels = Path(tmp) / "warp-cache"
            compiled = compile_kernels(kernels, args.kernels_arch)
            meta["kernels"] = {
                **{k: compiled[k] for k in ("warp", "arch", "format")},
                "modules": len(compiled["modules"]),
            }
        manifest = pack(site, args.out, not args.no_repo, int(args.part_mib * (1 << 20)), meta, kernels, base)
    total = sum(p["bytes"] for p in manifest["parts"]) / (1 << 20)
    with_base = (
        f" ({archive_mib(manifest, BASE_ARCHIVE):.1f} MiB of them --with-base's "
        f"{len(manifest['base_packages'])} packages)"
        if base is not None
        else ""
    )
    print(
        f"{len(manifest['parts'])} parts, {total:.1f} MiB in all{with_base}, in {args.out}; "
        f"there: bash {args.out}/unpack.sh DEST"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
