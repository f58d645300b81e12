"""What the encoder reward pays a policy's states near the reference, and which part of the state costs it.

The deterministic policy of ``--run`` plays every clip from its first frame (no early termination). For
each encoder given (default: the run's), per clip:

* ``policy_cos_first``: the mean cos(mu(s), z_m) of the rollout's first ``--first`` states (within a few cm
  of the reference: the state the reward should pay almost as much as the reference);
* ``policy_cos``: the same over the first ``--steps`` states;
* ``reference_cos``: the reference's own states over those frames;
* ``policy_cos_by_step``: the policy's cos at every step, and ``body_error_by_step`` its mean body error
  (m): whether the reward falls as the policy leaves the reference (e.g. on the
  demo's backward walk the preset's encoder paid the policy 0.41 on average over its first 31 steps,
  within 15 cm, and 0.63 while it sat down and fell, 0.21-0.94 m off);
* ``swap``: ``policy_cos_first`` with one feature group of the policy's states (all 5 stacked frames)
  replaced by the reference's: the group whose swap raises it most is what the reward holds against the
  policy (e.g. the bodies' angular velocities, 0.29 -> 0.64 on the demo's backward walk).

Examples::

    python benchmarks/reward_near_reference.py --run runs/demo --encoder runs/enc_hard/encoder.pt \\
        --out benchmarks/results/reward_near_reference/reward_near_reference.json
    python benchmarks/reward_near_reference.py --run packages/rgsd-agents/src/rgsd_agents/pretrained/rgsd_cpu \\
        --steps 10 --first 1   # the shipped run, a quick look
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from rgsd_envs.envs.observations import FRAME_DIM, FRAME_LAYOUT, HISTORY_LEN, reference_encoder_inputs
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.rewards import encoders as enc
from rgsd_envs.runs.run_dir import RunDir

sys.path.insert(0, str(Path(__file__).resolve().parent))  # a sibling script: the same rollout start
from heading_drift import first_frame_env, shipped_run

Tensor = torch.Tensor


@torch.no_grad()
def rollout_encoder_inputs(run: Path, lib: MotionLib, steps: int) -> tuple[Tensor, Tensor]:
    """(steps, clips, 1795) encoder inputs of the transitions of the run's deterministic policy from each clip's
    first frame (imitation, no early termination), and (steps, clips) its mean body error (m)."""
    env, policy, obs = first_frame_env(run, lib)
    reward_core = env.unwrapped.torch_env.reward_core
    out, err = [], []
    for _ in range(steps):
        obs, _, _, _, info = env.step(policy.act(obs).numpy())
        out.append(reward_core.next_encoder_inputs.clone())
        err.append(torch.as_tensor(info["cartesian_error"], dtype=torch.float32))
    env.close()
    return torch.stack(out), torch.stack(err)


def reward_near_reference(
    lib: MotionLib, windows: Tensor, encoder, first: int, errors: Tensor | None = None
) -> dict[str, dict]:
    """Per clip: the policy's and the reference's cos to z_m and the feature-group swaps (module docstring)."""
    reference = reference_encoder_inputs(lib)
    z = enc.clip_embeddings(encoder, reference, lib.clip_of_frame, lib.num_clips)
    steps = windows.shape[0]

    def cos_each(x: Tensor, m: int) -> Tensor:
        return (enc.embed(encoder, x) * z[m]).sum(-1)

    def cos(x: Tensor, m: int) -> float:
        return float(cos_each(x, m).mean())

    out = {}
    for m, name in enumerate(lib.names):
        start = int(lib.starts[m])
        ref = reference[start + 1 : start + 1 + steps]  # transition k reaches frame k + 1
        pol = windows[: ref.shape[0], m]
        swap = {}
        for part, cols in FRAME_LAYOUT.items():
            x = pol[:first].clone().view(-1, HISTORY_LEN, FRAME_DIM)
            x[..., cols] = ref[:first].view(-1, HISTORY_LEN, FRAME_DIM)[..., cols]
            swap[part] = cos(x.flatten(1), m)
        out[name] = {
            "policy_cos_first": cos(pol[:first], m),
            "policy_cos": cos(pol, m),
            "reference_cos": cos(ref, m),
            "swap": swap,
            "policy_cos_by_step": [round(float(c), 4) for c in cos_each(pol, m)],
        }
        if errors is not None:
            out[name]["body_error_by_step"] = [round(float(e), 4) for e in errors[: ref.shape[0], m]]
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the table per encoder and optionally write the JSON."""
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--run", help="a trained run folder (its policy plays the clips); required")
    p.add_argument(
        "--encoder", action="append", default=[], help="encoder file to score with (repeatable; default: the run's)"
    )
    p.add_argument("--steps", type=int, default=40, help="rollout steps scored per clip")
    p.add_argument("--first", type=int, default=3, help="the first states, near the reference")
    p.add_argument("--out", help="JSON file for the numbers")
    args = p.parse_args(argv)
    if not args.run:
        p.error(f"give --run, a trained run folder (the run rgsd ships: --run {shipped_run()})")
    if not 1 <= args.first <= args.steps:
        p.error(f"--first must be in [1, --steps], got {args.first}")
    torch.set_num_threads(1)
    run = Path(args.run)
    lib = MotionLib(RunDir(run).env_config().motions)
    windows, errors = rollout_encoder_inputs(run, lib, args.steps)
    data = {"run": str(run), "steps": args.steps, "first": args.first, "encoders": {}}
    for path in args.encoder or [str(RunDir(run).encoder_path)]:
        rows = reward_near_reference(lib, windows, enc.load_encoder(path), args.first, errors)
        data["encoders"][path] = rows
        print(
            f"{path}: cos(mu(s), z_m) of the policy's first {args.first} / {args.steps} states, the reference's; "
            f"first {args.first} with one group swapped to the reference's"
        )
        for name, r in rows.items():
            swaps = "  ".join(f"{k} {v:.2f}" for k, v in r["swap"].items())
            print(
                f"  {name:<16} {r['policy_cos_first']:.3f} / {r['policy_cos']:.3f}  ref {r['reference_cos']:.3f}  | {swaps}"
            )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(args.out).with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        tmp.replace(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
