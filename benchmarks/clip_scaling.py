"""How rgsd's costs grow with the number of reference clips: 20 (the paper's), 100 and 500 generated clips.

For each count N of clips made by ``rgsd-motions demo --variants N`` this measures, on the CPU:

- ``generate s`` and ``load s``: writing the N clips (``--clips-dir`` keeps them, with the time it took, for the
  next run), and reading them into a ``MotionLib``;
- pretraining (the cpu preset's encoder, hidden [256, 256], one torch thread): ``step s`` (one InfoNCE step, 256
  pairs), ``align eval s`` (one within-motion alignment over every reference state, done every 10 steps by
  the early stop; here every 50), and 400 steps at each dimension: the alignment reached, the learned clip
  directions' separation and, at the first dimension, the first evaluated step at the 0.999 early stop (None: not
  within 400);
- separation of the clips on the skill sphere, at each of ``--dims``: the max over clips and the mean over clips of
  the cosine to the nearest other clip, for the directions the training-free encoder assigns
  (``spread_directions``: orthonormal while N <= dim) and for the pretrained encoder's z_m (at every dimension from
  100 clips on);
- the env at the cpu preset's 128 worlds with that encoder: build time, resident memory it added, the bytes of its
  reference tensors (clips; frame features and encoder inputs), a reset of all worlds and a 5 % reset;
- training samples/s of the cpu preset (2 iterations, the first left out: it warms up);
- evaluation (``--eval-once``: at the first count only, the rate then applies to every count): the quick
  protocol's evaluation of that run (no video; the figures and the report left out) gives world steps per second,
  rollouts and metrics together; the quick and paper protocols' world steps on N clips
  (``rgsd_eval.evaluate.eval_plan``) at that rate give their time per clip (the paper's extrapolated, not run).

Timings on a shared machine are pessimistic; the ratios between counts hold better than the seconds. The
figures go to ``--out`` (JSON) and a table on stdout. Run:
``python benchmarks/clip_scaling.py --out docs/results/clip_scaling.json`` (~15 min on 2 quiet cores, longer at
nice 19 beside other jobs); ``--smoke`` runs tiny sizes in a couple of minutes; ``--reprint FILE`` prints a saved
result.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import logging
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rgsd_agents.config import load_config
from rgsd_agents.pretraining.config import PretrainConfig
from rgsd_agents.pretraining.encoder import build_encoder
from rgsd_agents.pretraining.loop import train_step
from rgsd_agents.pretraining.reference import load_reference
from rgsd_agents.pretraining.statistics import alignment_from_embeddings, separation_stats
from rgsd_agents.training.runner import Runner
from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.torch_env import RGSDTorchEnv
from rgsd_envs.motion.cli import main as rgsd_motions
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.rewards.encoders import embed, spread_directions
from rgsd_eval.config import EvalConfig
from rgsd_eval.evaluate import ReferenceFeatures, eval_plan, evaluate_run
from rgsd_eval.runs import load_run

COUNTS = (20, 100, 500)
EVAL_EVERY = 50
"""Steps between alignment evaluations of the pretraining runs."""
TARGET = 0.999
"""Pretraining's default early stop (``PretrainConfig.target_alignment``)."""
DIMS = (16, 32, 64)


@dataclasses.dataclass
class Sizes:
    """How big each measurement is (``--smoke`` shrinks them)."""

    pretrain_hidden: tuple[int, ...] = (256, 256)
    pretrain_steps: int = 400
    num_envs: int = 128
    iterations: int = 2
    eval_batch: int = 512
    dims_from: int = 100
    """Counts below this measure the pretrained separation at the first of ``--dims`` only."""


SMOKE = Sizes(pretrain_hidden=(32,), pretrain_steps=50, num_envs=16, iterations=2, eval_batch=64, dims_from=20)


def rss_bytes() -> int:
    """Resident memory of this process."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def tensor_bytes(*objects: Any) -> int:
    """Bytes of the tensors held as attributes of the objects, or given directly."""
    total = 0
    for obj in objects:
        items = [obj] if isinstance(obj, torch.Tensor) else list(vars(obj).values())
        total += sum(t.numel() * t.element_size() for t in items if isinstance(t, torch.Tensor))
    return total


def best_of(fn: Any, repeats: int = 3) -> float:
    """Fastest wall time of ``repeats`` calls (s)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def separation(z: torch.Tensor) -> dict[str, float]:
    """Max and mean over clips of the cosine to the nearest other clip."""
    worst, mean = separation_stats(z.to(torch.float64))
    return {"max_cos": round(worst, 4), "mean_nearest_cos": round(mean, 4)}


def measure_pretraining(folder: Path, work: Path, sizes: Sizes, dims: list[int]) -> dict[str, Any]:
    """Step and alignment-evaluation costs, then ``sizes.pretrain_steps`` steps at each dimension: alignment, the first
    evaluated step at the 0.999 target, and the learned clip directions' separation."""
    base = PretrainConfig(motions=str(folder), hidden=sizes.pretrain_hidden, device="cpu")
    lib, inputs = load_reference(base)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as pretraining runs (PretrainConfig.num_threads)
    runs: dict[str, Any] = {}
    step = align = float("nan")
    try:
        for dim in dims:
            cfg = dataclasses.replace(base, skill_dim=dim)
            encoder = build_encoder(cfg, inputs)
            opt = torch.optim.Adam(encoder.parameters(), lr=cfg.lr)
            gen = torch.Generator().manual_seed(cfg.seed)

            def evaluate(encoder: Any = encoder) -> tuple[float, torch.Tensor]:
                return alignment_from_embeddings(embed(encoder, inputs), lib.clip_of_frame, lib.num_clips)

            if dim == dims[0]:
                align = best_of(evaluate, 2)
            target_step, t0 = None, time.perf_counter()
            for k in range(1, sizes.pretrain_steps + 1):
                train_step(encoder, opt, lib, inputs, cfg, gen)
                # the step count to the target is taken at the first dimension only: each check embeds every frame
                if dim == dims[0] and target_step is None and k % EVAL_EVERY == 0 and evaluate()[0] >= TARGET:
                    target_step = k
            if dim == dims[0]:
                evals = sizes.pretrain_steps // EVAL_EVERY if target_step is None else target_step // EVAL_EVERY
                step = (time.perf_counter() - t0 - evals * align) / sizes.pretrain_steps
            alignment, z = evaluate()
            runs[str(dim)] = {"steps": sizes.pretrain_steps, "alignment": round(alignment, 4), **separation(z)}
            if dim == dims[0]:
                runs[str(dim)]["steps_to_0.999"] = target_step
                path = work / "encoder.pt"
                encoder.cpu().eval().save(path)
                runs["encoder"] = str(path)
    finally:
        torch.set_num_threads(threads)
    return {"step_s": round(step, 4), "align_eval_s": round(align, 3), "runs": runs}


def measure_env(folder: Path, encoder: str, sizes: Sizes) -> dict[str, Any]:
    """Build time, memory and reset costs of the env at the cpu preset's worlds."""
    gc.collect()
    before = rss_bytes()
    t0 = time.perf_counter()
    env = RGSDTorchEnv(sizes.num_envs, config=EnvConfig(motions=str(folder)), encoder=encoder)
    build = time.perf_counter() - t0
    added = rss_bytes() - before
    core = env.core
    try:
        env.reset(seed=0)
        full = best_of(lambda: env.reset(seed=0))
        ids = torch.arange(0, sizes.num_envs, 20)  # 5 %

        def partial() -> None:
            core.reset_envs(ids)
            core.observe_reset(ids)

        part = best_of(partial, 5)
        lib_bytes = tensor_bytes(core.lib)
        ref_bytes = tensor_bytes(core.ref_features, core.ref_inputs)
    finally:
        env.close()
    return {
        "build_s": round(build, 2),
        "rss_added_mb": round(added / 2**20, 1),
        "motion_lib_mb": round(lib_bytes / 2**20, 1),
        "reference_features_mb": round(ref_bytes / 2**20, 1),
        "reset_all_ms": round(1e3 * full, 1),
        "reset_5pct_ms": round(1e3 * part, 2),
    }


def measure_training(folder: Path, encoder: str, run_dir: Path, sizes: Sizes) -> dict[str, Any]:
    """Samples/s of a few iterations of the cpu preset (the first left out)."""
    overrides = {
        "env.motions": str(folder),
        "encoder": encoder,
        "iterations": sizes.iterations,
        "probe_every": 0,
        "max_minutes": None,
        "device": "cpu",
        "num_envs": sizes.num_envs,
    }
    cfg = load_config("cpu", overrides)
    t0 = time.perf_counter()
    runner = Runner(cfg, run_dir, progress=False)
    setup = time.perf_counter() - t0
    try:  # the iterations alone: the start report and probes are not what grows with the samples
        history = [runner.iterate() for _ in range(sizes.iterations)]
        runner.export()
    finally:
        runner.close()
    sps = [h["charts/SPS"] for h in history[1:]] or [history[0]["charts/SPS"]]
    return {"setup_s": round(setup, 1), "samples_per_s": round(statistics.median(sps), 1)}


def measure_eval(folder: Path, run_dir: Path, sizes: Sizes, rate: float | None = None) -> dict[str, Any]:
    """World steps/s of the quick protocol's evaluation of that run, its rollouts and metrics (``rate`` given: that
    rate, measured at another count; a world step does not touch the other clips); both protocols' time per clip
    at that rate (the quick one as run, the paper's extrapolated)."""
    quick = EvalConfig.for_protocol("quick", video=False, progress=False, batch_size=sizes.eval_batch, device="cpu")
    lib = MotionLib(str(folder))
    result: dict[str, Any] = {"measured_here": rate is None}
    if rate is None:
        steps = eval_plan(lib, quick).step_work  # world steps and the batch steps' own work, as the estimate counts
        loaded = load_run(run_dir, quick.latent, quick.best_of, device="cpu")
        ref = ReferenceFeatures.of(lib, quick.fid_window)
        t0 = time.perf_counter()
        evaluate_run(loaded, lib, ref, quick)  # the rollouts and metrics; figures and the report are left out
        seconds = time.perf_counter() - t0
        rate = steps / seconds
        result.update({"quick_run_s": round(seconds, 1)})
    result["world_steps_per_s"] = round(rate)
    for name in ("quick", "paper"):
        plan = eval_plan(lib, EvalConfig.for_protocol(name, video=False))
        result[name] = {
            "rollouts": plan.rollouts,
            "world_steps": plan.world_steps,
            "s_per_clip": round(plan.seconds(rate) / lib.num_clips, 2),
            "total_min": round(plan.seconds(rate) / 60.0, 1),
        }
    return result


def clip_folder(n: int, root: Path) -> tuple[Path, float | None]:
    """The folder of n generated clips under ``root`` and the seconds generating them took (generated now unless
    the folder holds them already; then the time stored beside it, or None)."""
    folder = root / f"clips{n}"
    timing = root / f"clips{n}.generate_s"
    if folder.is_dir() and len(list(folder.glob("*.npz"))) == n:
        return folder, float(timing.read_text()) if timing.is_file() else None
    t0 = time.perf_counter()
    assert rgsd_motions(["demo", "--variants", str(n), "--out", str(folder)]) == 0
    seconds = round(time.perf_counter() - t0, 1)
    timing.write_text(str(seconds))
    return folder, seconds


def measure_count(
    n: int, clips_root: Path, tmp: Path, sizes: Sizes, dims: list[int], eval_rate: float | None = None
) -> dict[str, Any]:
    """Every figure for n clips (``eval_rate``: evaluation's world steps/s measured at another count)."""
    folder, generate = clip_folder(n, clips_root)
    t0 = time.perf_counter()
    lib = MotionLib(str(folder))
    load = time.perf_counter() - t0
    row: dict[str, Any] = {
        "clips": n,
        "frames": int(lib.total_frames),
        "generate_s": generate,
        "load_s": round(load, 2),
    }
    del lib
    row["spread_directions"] = {str(d): separation(spread_directions(n, d)) for d in dims}
    pre_dims = dims if n >= sizes.dims_from else dims[:1]
    work = tmp / f"n{n}"
    work.mkdir()
    row["pretrain"] = measure_pretraining(folder, work, sizes, pre_dims)
    encoder = row["pretrain"]["runs"].pop("encoder")
    row["env"] = measure_env(folder, encoder, sizes)
    run_dir = work / "run"
    row["training"] = measure_training(folder, encoder, run_dir, sizes)
    row["eval"] = measure_eval(folder, run_dir, sizes, eval_rate)
    gc.collect()
    return row


RATIO_KEYS = {
    "frames": ("frames",),
    "generate_s": ("generate_s",),
    "load_s": ("load_s",),
    "pretrain_step_s": ("pretrain", "step_s"),
    "pretrain_align_eval_s": ("pretrain", "align_eval_s"),
    "env_build_s": ("env", "build_s"),
    "reference_features_mb": ("env", "reference_features_mb"),
    "motion_lib_mb": ("env", "motion_lib_mb"),
    "reset_all_ms": ("env", "reset_all_ms"),
    "reset_5pct_ms": ("env", "reset_5pct_ms"),
    "train_setup_s": ("training", "setup_s"),
    "samples_per_s": ("training", "samples_per_s"),
    "eval_world_steps_per_s": ("eval", "world_steps_per_s"),
    "quick_s_per_clip": ("eval", "quick", "s_per_clip"),
    "paper_s_per_clip": ("eval", "paper", "s_per_clip"),
    "paper_total_min": ("eval", "paper", "total_min"),
}
"""Figures whose growth the ratios to the smallest count show (a ratio holds better than a second on a shared
machine)."""


def add_ratios(rows: list[dict[str, Any]]) -> None:
    """Each row's ``ratio_to_first``: its figures over the first row's, rounded to 2 decimals."""

    def get(row: dict[str, Any], path: tuple[str, ...]) -> float | None:
        for key in path:
            row = row[key]
        return None if row is None else float(row)  # type: ignore[arg-type]

    def ratio(a: float | None, b: float | None) -> float | None:
        return None if a is None or not b else round(a / b, 2)

    for row in rows:
        row["ratio_to_first"] = {name: ratio(get(row, p), get(rows[0], p)) for name, p in RATIO_KEYS.items()}


def print_table(rows: list[dict[str, Any]], dims: list[int]) -> None:
    """The figures as a plain-text table, one column per clip count."""
    base = str(dims[0])
    lines = [
        ("frames", lambda r: r["frames"]),
        ("generate s", lambda r: r["generate_s"]),
        ("load s", lambda r: r["load_s"]),
        ("pretrain step s", lambda r: r["pretrain"]["step_s"]),
        ("pretrain align eval s", lambda r: r["pretrain"]["align_eval_s"]),
        ("pretrain steps to 0.999", lambda r: r["pretrain"]["runs"][base]["steps_to_0.999"]),
        ("pretrain alignment", lambda r: r["pretrain"]["runs"][base]["alignment"]),
    ]
    for d in dims:
        lines.append((f"spread max cos, {d}-D", lambda r, d=d: r["spread_directions"][str(d)]["max_cos"]))
        lines.append((f"spread mean nearest, {d}-D", lambda r, d=d: r["spread_directions"][str(d)]["mean_nearest_cos"]))
    for d in dims:
        lines.append(
            (f"pretrained max cos, {d}-D", lambda r, d=d: r["pretrain"]["runs"].get(str(d), {}).get("max_cos", "-"))
        )
        lines.append(
            (
                f"pretrained mean nearest, {d}-D",
                lambda r, d=d: r["pretrain"]["runs"].get(str(d), {}).get("mean_nearest_cos", "-"),
            )
        )
    lines += [
        ("env build s", lambda r: r["env"]["build_s"]),
        ("env RSS added MB", lambda r: r["env"]["rss_added_mb"]),
        ("motion lib MB", lambda r: r["env"]["motion_lib_mb"]),
        ("reference features MB", lambda r: r["env"]["reference_features_mb"]),
        ("reset all ms", lambda r: r["env"]["reset_all_ms"]),
        ("reset 5% ms", lambda r: r["env"]["reset_5pct_ms"]),
        ("train setup s", lambda r: r["training"]["setup_s"]),
        ("train samples/s", lambda r: r["training"]["samples_per_s"]),
        ("eval world steps/s", lambda r: r["eval"]["world_steps_per_s"]),
        ("quick eval s/clip", lambda r: r["eval"]["quick"]["s_per_clip"]),
        ("paper eval s/clip", lambda r: r["eval"]["paper"]["s_per_clip"]),
        ("paper eval total min", lambda r: r["eval"]["paper"]["total_min"]),
    ]
    print(f"{'clips':<30}" + "".join(f"{r['clips']:>12}" for r in rows))
    for label, get in lines:
        print(f"{label:<30}" + "".join(f"{get(r)!s:>12}" for r in rows))
    print(f"ratios to {rows[0]['clips']} clips:")
    for name in RATIO_KEYS:
        print(f"  {name:<28}" + "".join(f"{r['ratio_to_first'][name]!s:>12}" for r in rows))


def markdown_table(result: dict[str, Any]) -> str:
    """The results page's table of a saved result: one column per count, then the last count over the first."""
    rows, dims = result["rows"], [str(d) for d in result["dims"]]
    first, last = rows[0]["clips"], rows[-1]["clips"]

    def cell(v: Any) -> str:
        return "-" if v is None else str(v)

    def at(row: dict[str, Any], *path: str) -> Any:
        for key in path:
            if not isinstance(row, dict) or key not in row:
                return None
            row = row[key]
        return row

    lines = [
        ("reference frames", ("frames",), "frames"),
        ("generate the clips, s", ("generate_s",), "generate_s"),
        ("load them, s", ("load_s",), "load_s"),
        ("pretraining step, s", ("pretrain", "step_s"), "pretrain_step_s"),
        ("alignment check (all frames), s", ("pretrain", "align_eval_s"), "pretrain_align_eval_s"),
        (f"pretraining steps to alignment 0.999 ({dims[0]}-D)", ("pretrain", "runs", dims[0], "steps_to_0.999"), None),
        (f"alignment after 400 steps ({dims[0]}-D)", ("pretrain", "runs", dims[0], "alignment"), None),
    ]
    for d in dims:
        lines.append((f"default encoder, max cos ({d}-D)", ("spread_directions", d, "max_cos"), None))
        lines.append((f"default encoder, mean nearest cos ({d}-D)", ("spread_directions", d, "mean_nearest_cos"), None))
    for d in dims:
        lines.append((f"pretrained, max cos ({d}-D)", ("pretrain", "runs", d, "max_cos"), None))
        lines.append((f"pretrained, mean nearest cos ({d}-D)", ("pretrain", "runs", d, "mean_nearest_cos"), None))
    lines += [
        ("env reference tensors, MB", ("env", "reference_features_mb"), "reference_features_mb"),
        ("motion library, MB", ("env", "motion_lib_mb"), "motion_lib_mb"),
        ("env build, s", ("env", "build_s"), "env_build_s"),
        ("reset of all 128 worlds, ms", ("env", "reset_all_ms"), "reset_all_ms"),
        ("reset of 5 %, ms", ("env", "reset_5pct_ms"), "reset_5pct_ms"),
        ("training, samples/s", ("training", "samples_per_s"), "samples_per_s"),
        ("quick evaluation, s per clip", ("eval", "quick", "s_per_clip"), "quick_s_per_clip"),
        ("paper evaluation, s per clip", ("eval", "paper", "s_per_clip"), "paper_s_per_clip"),
        ("paper evaluation, min in all", ("eval", "paper", "total_min"), "paper_total_min"),
    ]
    heads = " | ".join(f"{r['clips']} clips" for r in rows)
    out = [
        f"| | {heads} | {last} / {first} |",
        "|---|" + "---|" * (len(rows) + 1),
    ]
    for label, path, ratio in lines:
        values = [cell(at(r, *path)) for r in rows]
        out.append(f"| {label} | {' | '.join(values)} | {cell(rows[-1]['ratio_to_first'][ratio]) if ratio else ''} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=list(COUNTS), help="clip counts (20 100 500)")
    parser.add_argument("--dims", type=int, nargs="+", default=list(DIMS), help="skill dimensions (16 32 64)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (a couple of minutes): checks the script runs")
    parser.add_argument("--out", type=Path, default=None, help="JSON file for the figures (written after each count)")
    parser.add_argument("--clips-dir", type=Path, default=None, help="keep the generated clips here and reuse them")
    parser.add_argument("--note", default="", help="what else ran on the machine (stored with the figures)")
    parser.add_argument(
        "--eval-once", action="store_true", help="measure evaluation's world steps/s at the first count only"
    )
    parser.add_argument("--markdown", action="store_true", help="with --reprint: the results page's table")
    parser.add_argument("--reprint", type=Path, default=None, help="print (and update the ratios of) a saved JSON")
    args = parser.parse_args()
    if args.reprint is not None:
        saved = json.loads(args.reprint.read_text())
        add_ratios(saved["rows"])
        print(markdown_table(saved)) if args.markdown else print_table(saved["rows"], saved["dims"])
        args.reprint.write_text(json.dumps(saved, indent=2) + "\n")
        return
    logging.basicConfig(level=logging.WARNING)
    sizes = SMOKE if args.smoke else Sizes()
    counts = [8, 20] if args.smoke and args.counts == list(COUNTS) else args.counts
    rows: list[dict[str, Any]] = []
    start = time.perf_counter()
    load0 = os.getloadavg()[0]
    result: dict[str, Any] = {
        "command": "python benchmarks/clip_scaling.py" + (" --smoke" if args.smoke else ""),
        "machine": {
            "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
            "torch": torch.__version__,
            "load_average_start": round(load0, 2),
            "note": args.note,
        },
        "sizes": dataclasses.asdict(sizes),
        "dims": args.dims,
        "rows": rows,
    }
    with tempfile.TemporaryDirectory(prefix="rgsd_clip_scaling_") as tmp:
        clips_root = args.clips_dir or Path(tmp)
        clips_root.mkdir(parents=True, exist_ok=True)
        for n in counts:
            t0 = time.perf_counter()
            rate = rows[0]["eval"]["world_steps_per_s"] if rows and args.eval_once else None
            rows.append(measure_count(n, clips_root, Path(tmp), sizes, args.dims, rate))
            print(f"[{n} clips: {time.perf_counter() - t0:.0f} s]", flush=True)
            add_ratios(rows)
            result["machine"]["load_average_end"] = round(os.getloadavg()[0], 2)
            result["seconds"] = round(time.perf_counter() - start)
            if args.out is not None:  # after every count: a long run keeps what it measured
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps(result, indent=2) + "\n")
    print_table(rows, args.dims)
    print(f"total {result['seconds']} s" + (f"; wrote {args.out}" if args.out else ""))


if __name__ == "__main__":
    np.set_printoptions(precision=4)
    main()
