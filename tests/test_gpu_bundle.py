"""``benchmarks/gpu_bundle.py``: the parts of an offline bundle unpack, checked, into what was packed."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gpu_bundle(load_benchmark):
    return load_benchmark("gpu_bundle")


def _site(root: Path) -> Path:
    site = root / "site"
    for rel, size in {
        "warp/bin/warp.so": 300_000,
        "mujoco/__init__.py": 2_000,
        "pkg-1.0.dist-info/METADATA": 50,
    }.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(random.Random(size).randbytes(size))  # incompressible: the archive needs several parts
    return site


def test_a_bundle_cut_in_parts_unpacks_into_the_same_files(gpu_bundle, tmp_path):
    site, out = _site(tmp_path), tmp_path / "bundle"
    out.mkdir()
    manifest = gpu_bundle.pack(site, out, False, 4096, {"python": "3.12"})
    parts = manifest["parts"]
    assert len(parts) >= 2 and all(p["bytes"] <= 4096 for p in parts)  # cut at the limit
    assert manifest["packages"] == {"pkg": "1.0"} and json.loads((out / "MANIFEST.json").read_text()) == manifest
    dest = tmp_path / "dest"
    proc = subprocess.run(["bash", str(out / "unpack.sh"), str(dest)], capture_output=True, text=True, check=True)
    assert f"unpacked {len(parts)} parts" in proc.stdout
    for path in site.rglob("*"):
        if path.is_file():
            assert (dest / "site" / path.relative_to(site)).read_bytes() == path.read_bytes()
    env = (dest / "env.sh").read_text()
    assert f'PYTHONPATH="{dest / "site"}' in env and "MUJOCO_GL" in env


def test_a_missing_or_damaged_part_is_named_before_anything_is_unpacked(gpu_bundle, tmp_path):
    site, out = _site(tmp_path), tmp_path / "bundle"
    out.mkdir()
    parts = [out / p["name"] for p in gpu_bundle.pack(site, out, False, 4096, {})["parts"]]
    parts[-1].write_bytes(parts[-1].read_bytes()[:-1])  # cut short in transit
    proc = subprocess.run(["bash", str(out / "unpack.sh"), str(tmp_path / "d1")], capture_output=True, text=True)
    assert proc.returncode != 0 and f"{parts[-1].name}: sha256 differs" in proc.stderr
    assert not (tmp_path / "d1" / "site").exists()
    parts[0].unlink()
    proc = subprocess.run(["bash", str(out / "unpack.sh"), str(tmp_path / "d2")], capture_output=True, text=True)
    assert proc.returncode != 0 and f"{parts[0].name}: missing" in proc.stderr


def test_pruning_keeps_warp_s_cpu_compiler_only_when_asked(gpu_bundle, tmp_path):
    for keep in (False, True):
        site = tmp_path / str(keep)
        for rel in ("warp/bin/warp-clang.so", "warp/tests/t.py", "mujoco/studio/s.py", "mujoco/x.py"):
            (site / rel).parent.mkdir(parents=True, exist_ok=True)
            (site / rel).write_text("x")
        removed = gpu_bundle.prune(site, keep_warp_cpu=keep)
        assert (site / "warp/bin/warp-clang.so").exists() == keep and (site / "mujoco/x.py").exists()
        assert "warp/tests" in removed and "mujoco/studio" in removed and not (site / "warp/tests").exists()


def test_compiled_kernels_travel_in_the_parts_and_env_sh_points_warp_at_them(gpu_bundle, tmp_path):
    site, out, kernels = _site(tmp_path), tmp_path / "bundle", tmp_path / "warp-cache"
    cubin = kernels / "1.19.0" / "wp_m_abc1234" / "wp_m_abc1234.sm90.cubin"
    cubin.parent.mkdir(parents=True)
    cubin.write_bytes(b"\x7fELF" * 100)
    (kernels / "rgsd-kernels.json").write_text('{"arch": 90}')
    out.mkdir()
    gpu_bundle.pack(site, out, False, 1 << 20, {}, kernels)
    dest = tmp_path / "dest"
    subprocess.run(["bash", str(out / "unpack.sh"), str(dest)], capture_output=True, check=True)
    assert (dest / "warp-cache" / cubin.relative_to(kernels)).read_bytes() == cubin.read_bytes()
    assert f'export WARP_CACHE_PATH="{dest / "warp-cache"}"' in (dest / "env.sh").read_text()


def test_kernels_are_compiled_only_by_the_warp_the_bundle_carries(gpu_bundle):
    # warp names a compiled module by a hash of its source: another warp-lang here would compile modules there
    # warp would never look up
    why = gpu_bundle.kernels_here(("warp-lang==0.0.1", "mujoco-warp==4.0.0"))
    assert why is not None and why.startswith("this Python has warp-lang ") and why.endswith("the bundle 0.0.1")


def _python3_version() -> str:
    """The version of the ``python3`` that ``unpack.sh`` and ``env.sh`` run (major.minor)."""
    out = subprocess.run(["python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True)
    return out.stdout.decode().strip()


PREREQUISITE_FILES = [
    "benchmarks/prerequisites.py",
    "requirements-test.txt",
    *(f"packages/{p}/pyproject.toml" for p in ("rgsd-envs", "rgsd-eval", "rgsd-agents")),
]
"""What ``prerequisites.py`` reads of the repository."""


def _with_prerequisites(gpu_bundle, monkeypatch) -> None:
    """Pack only what ``prerequisites.py`` reads of the repository (the whole tree would take a minute of xz)."""
    monkeypatch.setattr(gpu_bundle, "repo_files", lambda: PREREQUISITE_FILES)


def test_the_node_s_prerequisites_are_read_from_the_packages_and_the_base_option_packs_all_but_torch(
    gpu_bundle, load_benchmark, tmp_path
):
    pre = load_benchmark("prerequisites")
    runtime = {pre.NAME.match(r).group(1) for r in pre.runtime_requirements()}
    assert {"numpy", "scipy", "pyyaml", "tqdm", "imageio", "pillow", "matplotlib", "tensorboard"} <= runtime
    assert {"torch", "mujoco", "gymnasium", "mujoco-warp"} <= runtime  # the warp extra: warp worlds
    assert not runtime & {"rgsd-envs", "rgsd-eval", "imageio-ffmpeg"}  # each other; videos, which the check skips
    assert pre.tool_requirements() == ["pytest>=8"]
    base = {pre.NAME.match(r).group(1) for r in gpu_bundle.base_requirements()}
    assert base == (runtime | {"pytest"}) - {"torch", "mujoco", "gymnasium", "mujoco-warp"}
    # derived, not kept by hand: a dependency added to a package is a prerequisite
    repo = tmp_path / "repo"
    for folder, deps in {"rgsd-envs": ["numpy>=1.26", "a_b.c>=2"], "rgsd-eval": ["rgsd-envs>=0.1", "numpy>=2"]}.items():
        (repo / "packages" / folder).mkdir(parents=True)
        extra = '\n[project.optional-dependencies]\nwarp = ["mujoco-warp==4.0.0"]' if folder == "rgsd-envs" else ""
        (repo / "packages" / folder / "pyproject.toml").write_text(f"[project]\ndependencies = {deps!r}{extra}\n")
    (repo / "packages" / "rgsd-agents").mkdir()
    (repo / "packages" / "rgsd-agents" / "pyproject.toml").write_text('[project]\ndependencies = ["tensorboard"]\n')
    (repo / "requirements-test.txt").write_text("# tools\npytest>=8  # the runner\nruff>=0.5\n")
    assert pre.runtime_requirements(repo) == ["numpy>=1.26,>=2", "a_b.c>=2", "mujoco-warp==4.0.0", "tensorboard"]
    assert pre.tool_requirements(repo) == ["pytest>=8"]


def test_a_python_that_lacks_a_prerequisite_is_told_in_one_line_what_and_how(load_benchmark, tmp_path):
    pre = load_benchmark("prerequisites")
    assert pre.missing(["numpy>=1", "PyYAML", "surely-not-a-package_x>=1"]) == ["surely-not-a-package_x"]
    reqs = ["numpy>=1", "surely-not-a-package-x>=1", "torch>=2.1"]
    line = pre.missing_problem(["surely-not-a-package-x", "torch"], reqs)
    assert (
        "lacks surely-not-a-package-x, torch: pack the GPU bundle with `benchmarks/gpu_bundle.py --with-base`" in line
    )
    assert "install them: pip install 'surely-not-a-package-x>=1'; install a CUDA build of torch" in line
    assert "--with-base" not in pre.missing_problem(["torch"], reqs)  # which carries no torch
    assert "\n" not in line and pre.missing_problem([], reqs) is None
    # a Python without site-packages (-S) lacks them all: one line, the check stops before writing anything
    for script, argv, prefix in (
        ("prerequisites.py", [], "rgsd"),
        ("gpu_check.py", ["--quick", "--out", str(tmp_path / "gc")], "gpu_check"),
    ):
        proc = subprocess.run(
            [sys.executable, "-S", "-E", str(REPO / "benchmarks" / script), *argv], capture_output=True, text=True
        )
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode in (1, 2) and len(lines) == 1, proc.stderr
        assert lines[0].startswith(f"{prefix}: this Python (") and "lacks numpy, scipy, torch" in lines[0]
        assert "pytest" in lines[0]
    assert not (tmp_path / "gc").exists()
    no_tests = subprocess.run(
        [sys.executable, "-S", "-E", str(REPO / "benchmarks" / "prerequisites.py"), "--no-tests"],
        capture_output=True,
        text=True,
    )
    assert "lacks numpy" in no_tests.stderr and "pytest" not in no_tests.stderr


def test_unpack_and_env_sh_name_the_python_to_pack_for_when_python3_is_another(gpu_bundle, monkeypatch, tmp_path):
    _with_prerequisites(gpu_bundle, monkeypatch)
    here = _python3_version()
    for python, dest in (("2.7", tmp_path / "other"), (here, tmp_path / "same")):
        out = tmp_path / f"bundle-{python}"
        out.mkdir()
        gpu_bundle.pack(_site(tmp_path / python), out, True, 1 << 20, {"python": python})
        unpack = subprocess.run(["bash", str(out / "unpack.sh"), str(dest)], capture_output=True, text=True)
        sourced = subprocess.run(
            ["bash", "-c", f". {dest}/env.sh && echo $RGSD_BUNDLE_PYTHON"], capture_output=True, text=True
        )
        assert unpack.returncode == 0 and sourced.returncode == 0 and sourced.stdout.strip() == python
        told = f"this bundle is for Python {python}, this Python ("
        if python == here:  # this venv holds every prerequisite: nothing to say
            assert unpack.stderr == "" and sourced.stderr == "", unpack.stderr + sourced.stderr
            continue
        (line,) = unpack.stderr.strip().splitlines()
        assert (
            line.startswith(f"unpack: {told}")
            and f"is {here}: pack it with `benchmarks/gpu_bundle.py --python {here}`" in line
        )
        (line,) = sourced.stderr.strip().splitlines()
        assert line.startswith(f"env.sh: {told}")


def test_the_base_packages_are_an_archive_of_their_own_after_the_bundle_s_on_the_path(gpu_bundle, tmp_path):
    site, out = _site(tmp_path / "s"), tmp_path / "bundle"
    base = _site(tmp_path / "b").rename(tmp_path / "base")
    (base / "numpy-2.3.0.dist-info").mkdir()
    (base / "numpy-2.3.0.dist-info" / "METADATA").write_text("Name: numpy")
    out.mkdir()
    manifest = gpu_bundle.pack(site, out, False, 4096, {"python": "3.12"}, base=base)
    archives = {p["archive"] for p in manifest["parts"]}
    assert archives == {gpu_bundle.ARCHIVE, gpu_bundle.BASE_ARCHIVE} and all(
        p["bytes"] <= 4096 for p in manifest["parts"]
    )
    mib = gpu_bundle.archive_mib(manifest, gpu_bundle.BASE_ARCHIVE)
    assert mib * (1 << 20) == sum((out / p["name"]).stat().st_size for p in manifest["parts"] if "base" in p["name"])
    assert mib * (1 << 20) > 300_000  # the incompressible 300 kB file
    assert manifest["base_packages"] == {"numpy": "2.3.0", "pkg": "1.0"}
    dest = tmp_path / "dest"
    subprocess.run(["bash", str(out / "unpack.sh"), str(dest)], capture_output=True, check=True)
    assert (dest / "base" / "warp" / "bin" / "warp.so").read_bytes() == (base / "warp" / "bin" / "warp.so").read_bytes()
    assert f'PYTHONPATH="{dest / "site"}:{dest / "base"}$' in (dest / "env.sh").read_text()  # no repository here


def test_packing_with_base_stages_it_with_its_dependencies_and_says_what_it_adds(
    gpu_bundle, monkeypatch, tmp_path, capsys
):
    staged = []

    def stage(folder, python, find_links, packages, deps=False):
        staged.append((folder.name, python, packages, deps))
        (folder / "tests").mkdir(parents=True)
        (folder / "tests" / "t.py").write_text("x")
        (folder / f"{folder.name}-1.0.dist-info").mkdir()
        (folder / f"{folder.name}-1.0.dist-info" / "METADATA").write_bytes(random.Random(1).randbytes(20_000))

    monkeypatch.setattr(gpu_bundle, "stage_packages", stage)
    monkeypatch.setattr(gpu_bundle, "source_commit", lambda: {"commit": "ab" * 20, "dirty": False})
    out = tmp_path / "bundle"
    assert gpu_bundle.main(["--out", str(out), "--no-kernels", "--no-repo", "--with-base", "--python", "3.11"]) == 0
    assert staged == [
        ("site", "3.11", gpu_bundle.PACKAGES, False),  # what a CUDA torch image lacks, nothing resolved
        ("base", "3.11", tuple(gpu_bundle.base_requirements()), True),  # pip resolves their dependencies
    ]
    manifest = json.loads((out / "MANIFEST.json").read_text())
    assert (
        manifest["commit"] == "ab" * 20 and manifest["dirty"] is False and manifest["base_packages"] == {"base": "1.0"}
    )
    mib = gpu_bundle.archive_mib(manifest, gpu_bundle.BASE_ARCHIVE)
    assert f"({mib:.1f} MiB of them --with-base's 1 packages)" in capsys.readouterr().out


def test_the_base_packages_lose_their_test_suites(gpu_bundle, tmp_path):
    for rel in (
        "scipy/linalg/tests/t.py",
        "scipy/linalg/tests/data/tests/d.npz",
        "scipy/linalg/_x.py",
        "numpy/testing/u.py",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    assert gpu_bundle.prune_test_suites(tmp_path) == ["scipy/linalg/tests"]
    assert (tmp_path / "scipy/linalg/_x.py").exists() and (tmp_path / "numpy/testing/u.py").exists()


def test_the_packed_repository_names_its_commit_and_its_code_records_it_without_git(gpu_bundle, monkeypatch, tmp_path):
    """The bundle's repository carries no ``.git``: the code run from it records the commit of its ``COMMIT.json``
    (in the provenance of the policies and metrics it writes) and gpu_check's report shows the same."""
    sources = [f for f in gpu_bundle.repo_files() if "/src/" in f and "/pretrained/" not in f]  # the code, no weights
    monkeypatch.setattr(
        gpu_bundle,
        "repo_files",
        lambda: ["benchmarks/gpu_check.py", "benchmarks/gpu_bundle.py", *PREREQUISITE_FILES, *sources],
    )
    out, dest = tmp_path / "bundle", tmp_path / "dest"
    out.mkdir()
    sha = "0123456789abcdef" * 2 + "01234567"
    manifest = gpu_bundle.pack(_site(tmp_path), out, True, 1 << 20, {"commit": sha, "dirty": True})
    assert manifest["commit"] == sha and manifest["dirty"] is True
    subprocess.run(["bash", str(out / "unpack.sh"), str(dest)], capture_output=True, check=True)
    repo = dest / "rgsd"
    assert json.loads((repo / gpu_bundle.COMMIT_FILE).read_text()) == {"commit": sha, "dirty": True}
    assert gpu_bundle.git(repo, "rev-parse", "HEAD") is None  # tmp_path is no checkout
    script = (
        "import json, sys; sys.path.insert(0, 'benchmarks'); import gpu_check, rgsd_envs; "
        "from rgsd_envs.utils.provenance import provenance; "
        "print(json.dumps([rgsd_envs.__file__, provenance()['rgsd'], gpu_check.commit_text()]))"
    )
    src = [str(repo / "packages" / p / "src") for p in ("rgsd-envs", "rgsd-eval", "rgsd-agents")]
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=repo, env={**os.environ, "PYTHONPATH": os.pathsep.join(src)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    module, rgsd, text = json.loads(done.stdout.splitlines()[-1])
    assert Path(module).is_relative_to(repo)  # the bundle's code ran, not this checkout's
    assert (rgsd["git"], rgsd.get("commit_from")) == ("0123456789ab-dirty", "COMMIT.json")
    assert text == "git 0123456789ab-dirty, from COMMIT.json"
    here = gpu_bundle.source_commit()  # this checkout: its HEAD
    assert here["commit"] == gpu_bundle.git(gpu_bundle.REPO, "rev-parse", "HEAD") and isinstance(here["dirty"], bool)


def test_the_check_s_commit_is_the_one_the_reports_record(load_benchmark):
    from rgsd_envs.utils.provenance import commit_text, rgsd_version

    gpu_check = load_benchmark("gpu_check")
    text = gpu_check.commit_text()
    assert text == commit_text(rgsd_version())
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert rgsd_version()["commit_from"] == "git" and text.startswith("git ") and head[:12] in text


def test_the_bundle_names_the_commit_file_its_reader_reads(gpu_bundle):
    from rgsd_envs.utils import provenance

    assert gpu_bundle.COMMIT_FILE == provenance.COMMIT_FILE == "COMMIT.json"
