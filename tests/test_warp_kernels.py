"""``benchmarks/warp_kernels.py``: rgsd's warp kernels compiled here, with no GPU, where warp on a GPU looks."""

from __future__ import annotations

import json

import pytest

wp = pytest.importorskip("warp")
pytest.importorskip("mujoco_warp")

from rgsd_envs.sim.warp_backend import CUDA_LAUNCH_BLOCK  # noqa: E402


@wp.kernel
def _double(x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = 2.0 * x[i]


@pytest.fixture(scope="module")
def warp_kernels(load_benchmark):
    return load_benchmark("warp_kernels")


class _Module:
    """A stand-in for a warp module: its name, and whether it was loaded (``execs``)."""

    def __init__(self, name: str, loaded: bool = True):
        self.name, self.execs = name, {"cpu": object()} if loaded else {}


def test_each_module_gets_the_block_sizes_a_cuda_launch_of_it_would_load(warp_kernels):
    plain, tiled, cpu_branch, unloaded = _Module("plain"), _Module("tiled"), _Module("cpu_branch"), _Module("u", False)
    launches = {
        warp_kernels.Launch(plain, None),
        warp_kernels.Launch(tiled, 64),
        warp_kernels.Launch(tiled, 32),
        warp_kernels.Launch(cpu_branch, 1),
        warp_kernels.Launch(unloaded, None),
    }
    sizes = warp_kernels.block_sizes(launches, {32, 128})
    # no size named: warp's CUDA default; a size of 1 comes from a CPU-only branch, so every GPU size is built
    assert sizes == {plain: {256}, tiled: {32, 64}, cpu_branch: {32, 128}}


def test_recording_sees_the_block_size_each_launch_asks_for_and_puts_warp_back(warp_kernels):
    original = wp.launch, wp.launch_tiled
    x = wp.ones(4, dtype=float, device="cpu")
    with warp_kernels.recording() as seen:
        wp.launch(_double, dim=4, inputs=[x], device="cpu")
        wp.launch(_double, dim=4, inputs=[x], device="cpu", block_dim=64)
    module = _double.module
    assert {warp_kernels.Launch(module, None), warp_kernels.Launch(module, 64)} <= seen
    assert x.numpy().tolist() == [4.0] * 4  # the launches ran
    assert (wp.launch, wp.launch_tiled) == original


def test_a_module_compiles_for_the_arch_into_the_folder_warp_s_loader_reads(warp_kernels, tmp_path):
    from warp._src.context import Module

    module = _double.module
    default = module.options["block_dim"]
    folder = warp_kernels.compile_module(module, 64, 90, tmp_path)
    assert folder.parent == tmp_path and folder.name == module.get_module_identifier(64)
    # the name warp's loader looks up for a CUDA device of arch 90 building CUBIN (Module.load)
    cubin = Module._get_compile_output_name(module, None, 90, "", False, 64)
    assert sorted(p.name for p in folder.iterdir()) == [f"{folder.name}.meta", cubin]  # no CUDA source kept
    assert cubin.endswith(".sm90.cubin") and (folder / cubin).stat().st_size > 0
    assert module.options["block_dim"] == default
    assert warp_kernels.compile_module(module, 128, 90, tmp_path) != folder  # another block size, another variant


def test_build_compiles_what_the_paths_launched_and_lists_it(warp_kernels, tmp_path, monkeypatch):
    def paths(num_envs: int, steps: int) -> None:
        x = wp.ones(num_envs, dtype=float, device="cpu")
        for _ in range(steps):
            wp.launch(_double, dim=num_envs, inputs=[x], device="cpu")

    monkeypatch.setattr(warp_kernels, "run_paths", paths)
    manifest = warp_kernels.build(tmp_path, 90, 4, 2, log=lambda line: None)
    folder = _double.module.get_module_identifier(CUDA_LAUNCH_BLOCK)
    assert folder in manifest["modules"] and (manifest["arch"], manifest["format"]) == (90, "cubin")
    assert (tmp_path / manifest["warp"] / folder / f"{folder}.sm90.cubin").is_file()
    assert json.loads((tmp_path / warp_kernels.MANIFEST).read_text()) == manifest


@pytest.mark.slow
def test_rgsd_s_warp_paths_are_recorded_with_the_block_sizes_a_gpu_loads(warp_kernels, tmp_path):
    # the env, the dense mass matrix and constraint-free worlds on the CPU warp device; one module compiled (the
    # whole set takes about 2 minutes of NVRTC: benchmarks/warp_kernels.py)
    from rgsd_envs.sim import warp_backend

    with warp_kernels.recording() as launches:
        warp_kernels.run_paths(2, 1)
    gpu_sizes = warp_kernels.gpu_block_sizes()
    sizes = warp_kernels.block_sizes(launches, gpu_sizes)
    by_name = {module.name: s for module, s in sizes.items()}
    assert by_name[warp_backend.__name__] == {CUDA_LAUNCH_BLOCK}  # rgsd's kernels name no block size
    assert any(name.startswith("_tile_cholesky") for name in by_name)  # the dense mass matrix's tile kernels
    assert any(s == gpu_sizes for s in by_name.values())  # a launch of a CPU-only branch: every GPU size
    ours = next(m for m in sizes if m.name == warp_backend.__name__)
    folder = warp_kernels.compile_module(ours, CUDA_LAUNCH_BLOCK, 90, tmp_path)
    assert (folder / f"{folder.name}.sm90.cubin").is_file()
