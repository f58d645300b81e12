"""``benchmarks/gpu_bundle.py``: the parts of an offline bundle unpack, checked, into what was packed."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest


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
