"""The shipped policy's per-clip error on native MuJoCo and on MuJoCo Warp, and whether they agree.

    python benchmarks/backend_parity.py --device cpu  --json benchmarks/results/backend_parity_cpu.json
    python benchmarks/backend_parity.py --device cuda --json runs/backend_parity_cuda.json
    python benchmarks/backend_parity.py --device cpu --dense-mass-matrix --json benchmarks/results/backend_parity_cpu_dense_m.json

Deterministic actions, z = z_m, each clip from its first frame to its end, no early termination
(``rgsd_eval.parity``). Prints the per-clip table and the gaps at shorter horizons as markdown, writes the
same as JSON, and exits 1 when a clip is outside its tolerance.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import sys
from importlib.metadata import version
from pathlib import Path

from rgsd_agents.pretrained import pretrained_run
from rgsd_envs.testing import dense_mass_matrix
from rgsd_envs.utils.files import InputFileError
from rgsd_eval.parity import backend_parity


def machine(device: str) -> dict[str, str]:
    """What ran the check: processor or GPU, and the simulator and torch versions."""
    import torch

    gpu = torch.cuda.get_device_name() if device.startswith("cuda") and torch.cuda.is_available() else None
    out = {"device": gpu or platform.processor() or platform.machine(), "python": platform.python_version()}
    return out | {name: version(name) for name in ("torch", "mujoco", "mujoco-warp", "warp-lang")}


def main(argv: list[str] | None = None) -> int:
    """Run the parity check and print its table."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", help="warp's device: cpu (the CPU warp device) or cuda")
    p.add_argument("--run", default=None, help="a run folder (default: the shipped pretrained policy)")
    p.add_argument("--motions", default=None, help="the run's clips where they are now (default: its config's)")
    p.add_argument("--clips", default=None, help="comma-separated clip names (default: all of the run's clips)")
    p.add_argument("--max-frames", type=int, default=None, help="stop each rollout after this many frames")
    p.add_argument("--json", default=None, help="write the report here")
    p.add_argument(
        "--dense-mass-matrix",
        action="store_true",
        help="warp factors the humanoid's mass matrix by tile Cholesky (gpu_throughput.py's dense M rows)",
    )
    args = p.parse_args(argv)
    try:
        with dense_mass_matrix() if args.dense_mass_matrix else contextlib.nullcontext():
            report = backend_parity(
                args.run or pretrained_run(),
                device=args.device,
                motions=args.motions,
                clips=args.clips.split(",") if args.clips else None,
                max_frames=args.max_frames,
            )
    except (InputFileError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    data = report.to_json()
    if args.run is None:
        data["run"] = "rgsd_agents/pretrained/rgsd_cpu"  # not this machine's install path
    data["machine"] = machine(args.device)
    data["command"] = "python benchmarks/backend_parity.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(report.markdown())
    print(f"\n{'all clips agree' if report.ok else 'some clips disagree'}; rollouts took {report.seconds} s")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(data, indent=1) + "\n")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
