"""Compile the warp kernels of rgsd's GPU paths ahead of time, here, for a GPU that is not here.

    python benchmarks/warp_kernels.py --out warp-cache/          # here: no GPU needed
    export WARP_CACHE_PATH=$PWD/warp-cache                       # there: warp loads them instead of compiling

A bare GPU machine compiles every warp module rgsd launches the first time it runs it (NVRTC, one core: the env
step's modules take over a minute), and a short job pays that before its first step. NVRTC is inside warp's
library and needs no GPU. So this script runs rgsd's warp paths on the CPU warp device (the env with both kinds of
restart, the physics with the tree's mass matrix laid out dense, and the constraint-free worlds of the CUDA tests),
records each module launched and the block size each launch asks for, and compiles every such module for
``--arch`` as warp on a GPU would load it: in warp's cache layout, one folder per module and block size named by
the module's content hash (``<out>/<warp version>/``). Warp there finds them under ``WARP_CACHE_PATH`` and compiles
only what these paths did not launch.

The kernels are CUBIN, which warp builds where the GPU's driver is older than its NVRTC (CUDA 13.4 in warp-lang
1.19; drivers of the 580 series are CUDA 13.0); a newer driver makes warp choose PTX and compile anew. The default
arch, 90, is the H100's and the H200's.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

MANIFEST = "rgsd-kernels.json"
"""What was compiled, for which arch and warp version, written beside the warp version's folder."""


@dataclasses.dataclass(frozen=True)
class Launch:
    """A warp module launched, and the block size the launch asked for (None: the CUDA default)."""

    module: Any
    block_dim: int | None


@contextmanager
def recording() -> Iterator[set[Launch]]:
    """Record every ``wp.launch`` and ``wp.launch_tiled`` made inside the block (before warp's CPU device turns
    the asked block size into 1)."""
    from rgsd_envs.testing import watching_warp

    seen: set[Launch] = set()

    def record(name: str, args: tuple, kwargs: dict) -> None:
        kernel = args[0] if args else kwargs["kernel"]
        seen.add(Launch(kernel.module, kwargs.get("block_dim")))

    with watching_warp(("launch", "launch_tiled"), record):
        yield seen


def run_paths(num_envs: int, steps: int) -> None:
    """rgsd's warp paths on the CPU warp device: the env (masked and host restarts, the state read after a
    restart), the physics with a dense mass matrix, and constraint-free worlds."""
    from rgsd_envs.envs.torch_env import RGSDTorchEnv
    from rgsd_envs.sim import make_backend
    from rgsd_envs.testing import dense_mass_matrix, warp_without_constraints

    gen = torch.Generator().manual_seed(0)
    for masked in (True, False):
        env = RGSDTorchEnv(num_envs, backend="warp", device="cpu")
        env.masked_restarts = masked
        env.reset(seed=0)
        for _ in range(steps):
            env.step(torch.rand(num_envs, env.act_dim, generator=gen) * 2 - 1)
        env.reset(options={"reset_mask": np.arange(num_envs) % 2 == 0})
        env.core.backend.state()
        env.close()
    for context in (dense_mass_matrix, warp_without_constraints):
        with context():
            backend = make_backend("warp", num_envs, device=torch.device("cpu"))
        for _ in range(steps):
            backend.step(torch.zeros(num_envs, backend.model.nu))
        backend.close()


def gpu_block_sizes() -> set[int]:
    """The block sizes mujoco-warp launches its tiled kernels with on a GPU (``BlockDim``'s values above 1)."""
    from mujoco_warp._src.types import BlockDim

    return {v for v in dataclasses.asdict(BlockDim()).values() if v > 1}


def block_sizes(launches: set[Launch], gpu_sizes: set[int]) -> dict[Any, set[int]]:
    """Module -> the block sizes a GPU would load it with: a launch that names none gets the CUDA default; one
    that names 1 comes from a CPU-only branch, whose CUDA size is one of ``gpu_sizes`` (mujoco-warp's
    ``BlockDim``), so every one of those is built."""
    from rgsd_envs.sim.warp_backend import CUDA_LAUNCH_BLOCK

    sizes: dict[Any, set[int]] = {}
    for launch in launches:
        if not launch.module.execs:
            continue  # launched over no threads (a model part the humanoid lacks): never loaded, on a GPU either
        b = launch.block_dim
        wanted = {CUDA_LAUNCH_BLOCK} if b is None else gpu_sizes if b == 1 else {b}
        sizes.setdefault(launch.module, set()).update(wanted)
    return sizes


def compile_module(module: Any, block_dim: int, arch: int, cache: Path) -> Path:
    """Compile ``module`` at ``block_dim`` for ``arch`` (CUBIN) into ``cache`` in warp's layout; its folder."""
    import warp as wp

    default = module.options["block_dim"]
    module.options["block_dim"] = block_dim  # the variant a CUDA launch of this block size loads
    try:
        folder = cache / module.get_module_identifier(block_dim)
        wp.compile_aot_module(module, arch=arch, module_dir=folder, use_ptx=False)
    finally:
        module.options["block_dim"] = default
    for source in folder.glob("*.cu"):
        source.unlink()  # warp loads the binary and its meta; the CUDA source serves only a rebuild from source
    return folder


def build(out: Path, arch: int, num_envs: int, steps: int, log: Callable[[str], None] = print) -> dict:
    """Run the paths, compile what they launched into ``out/<warp version>``; the manifest written beside it."""
    import warp as wp

    start = time.perf_counter()
    with recording() as launches:
        run_paths(num_envs, steps)
    variants = block_sizes(launches, gpu_block_sizes())
    cache = out / wp.config.version
    took = time.perf_counter() - start
    log(f"warp_kernels: {len(variants)} modules launched in {took:.0f} s; compiling for sm_{arch}")
    folders = []
    for module, sizes in sorted(variants.items(), key=lambda kv: kv[0].name):
        for block_dim in sorted(sizes):
            t = time.perf_counter()
            folders.append(compile_module(module, block_dim, arch, cache).name)
            log(f"  {module.name} (block {block_dim}): {time.perf_counter() - t:.1f} s")
    manifest = {
        "warp": wp.config.version,
        "arch": arch,
        "format": "cubin",
        "modules": sorted(folders),
        "seconds": round(time.perf_counter() - start, 1),
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    """Compile the kernels into ``--out`` and print where they went."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the cache folder (WARP_CACHE_PATH there)")
    parser.add_argument("--arch", type=int, default=90, help="the GPU's compute capability as an int (default 90)")
    parser.add_argument("--num-envs", type=int, default=16, help="worlds of each path run here (default 16)")
    parser.add_argument("--steps", type=int, default=4, help="control steps of each path (default 4)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    manifest = build(args.out, args.arch, args.num_envs, args.steps)
    print(
        f"warp_kernels: {len(manifest['modules'])} module variants for sm_{args.arch} in {manifest['seconds']} s, "
        f"in {args.out}; there: export WARP_CACHE_PATH={args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
