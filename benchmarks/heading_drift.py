"""Why a walk can drift sideways while its pose tracks: what the reward sees of a global drift.

Three measurements:

1. ``reward``: each reference clip bent into an arc (a yaw that grows linearly to
   ``--degrees`` at the clip's end, about the start pelvis), scored by the run's
   frozen encoder under the clip's z_m, beside the straight clip; and the mean body
   error (the Cartesian error rgsd eval reports) between the two. The observation and
   the encoder input are heading-relative (``rgsd_envs.envs.observations``), so the
   arc changes them only through the small yaw-rate terms of the velocities.
2. ``rollouts`` (with ``--run``): the deterministic policy from each clip's first frame
   to its second-last (the last step resets the world), no early termination; per clip the final pelvis offset from the
   reference's in the reference's start-heading frame (forward, left; m) and the
   final heading error (degrees, + = turned left).
3. ``trace`` (with ``--run`` and ``--trace CLIP``): that rollout step by step: pelvis
   height beside the reference's, mean and max body error and the body with the max,
   heading error and pelvis offset: where and how a clip fails (e.g. a backward walk that
   leaves its feet in front and sits down).

The clips are the run's motions (the demo clips with ``--encoder`` alone).

Examples::

    python benchmarks/heading_drift.py --run runs/demo --out benchmarks/results/heading_drift/heading_drift.json
    python benchmarks/heading_drift.py --run runs/demo --trace demo_backward --every 5
    python benchmarks/heading_drift.py --run packages/rgsd-agents/src/rgsd_agents/pretrained/rgsd_cpu   # the shipped run
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import torch

from rgsd_envs.envs.observations import body_axes, frame_features, history_indices, phase_of, stack_history
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.rewards import encoders as enc
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.rotations import quat_from_axis_angle, quat_mul


def bent_clip(pos, rot, lin, ang, fps: float, degrees: float):
    """A clip's world states (T, 24, ...) turned by a yaw growing linearly to ``degrees`` about the start pelvis."""
    t = pos.shape[0]
    rate = math.radians(degrees) / max(t - 1, 1)  # per frame
    theta = rate * torch.arange(t, dtype=pos.dtype)
    c, s = torch.cos(theta)[:, None], torch.sin(theta)[:, None]
    origin = pos[0, 0].clone()
    origin[2] = 0.0

    def turn(v):
        return torch.stack((c * v[..., 0] - s * v[..., 1], s * v[..., 0] + c * v[..., 1], v[..., 2]), dim=-1)

    p = turn(pos - origin) + origin
    q = quat_mul(quat_from_axis_angle(theta[:, None] * pos.new_tensor([0.0, 0.0, 1.0]))[:, None], rot)
    w = torch.tensor([0.0, 0.0, rate * fps], dtype=pos.dtype)  # yaw rate, rad/s
    arm = p - origin
    v = turn(lin) + torch.cross(w.expand_as(arm), arm, dim=-1)
    return p, q, v, turn(ang) + w


def reward_under_arc(lib: MotionLib, encoder, degrees: float) -> dict[str, dict[str, float]]:
    """Per clip: mean encoder reward cosine of the straight and the bent clip under z_m, and their body error."""
    from rgsd_envs.envs.observations import reference_encoder_inputs

    z = enc.clip_embeddings(encoder, reference_encoder_inputs(lib), lib.clip_of_frame, lib.num_clips)
    out = {}
    for m, name in enumerate(lib.names):
        sl = slice(int(lib.starts[m]), int(lib.starts[m] + lib.num_frames[m]))
        states = [lib.frames(k)[sl] for k in ("body_pos", "body_rot", "body_lin_vel", "body_ang_vel")]
        frames = torch.arange(states[0].shape[0])
        phase = phase_of(frames, lib.num_frames[m].expand_as(frames))
        row = {}
        for label, st in (("straight", states), ("bent", bent_clip(*states, lib.fps, degrees))):
            feats = frame_features(phase, *[x.float() for x in st])
            inputs = stack_history(feats, history_indices(frames, torch.zeros_like(frames)))
            cos = (enc.embed(encoder, inputs) * z[m]).sum(-1)
            row[f"{label}_cos"] = float(cos.mean())
        bent_pos = bent_clip(*states, lib.fps, degrees)[0]
        row["body_error_m"] = float((bent_pos - states[0]).norm(dim=-1).mean())
        row["final_pelvis_offset_m"] = float((bent_pos[-1, 0, :2] - states[0][-1, 0, :2]).norm())
        out[name] = row
    return out


def first_frame_env(run: Path, lib: MotionLib):
    """(env, policy, obs): one world per clip of ``lib`` at its first frame, imitating with the run's encoder
    reward and no early termination, and the run's deterministic policy."""
    import gymnasium as gym

    from rgsd_envs.envs.registration import ENV_ID

    rd = RunDir(run)
    cfg = rd.env_config().without_early_termination(p_imitation=1.0, eval_kappa=None, num_threads=1)
    n = lib.num_clips
    env = gym.make_vec(ENV_ID, num_envs=n, config=cfg, motions=lib, encoder=str(rd.encoder_path))
    obs, _ = env.reset(seed=0, options={"clip": list(range(n)), "start_frame": [0] * n, "task": "imitation"})
    return env, rd.load_policy(), obs


@torch.no_grad()
def policy_rollout(run: Path, lib: MotionLib) -> dict[str, np.ndarray]:
    """The deterministic policy from each clip of ``lib`` (the run's motions) from its first frame, no early
    termination: per step (T, clips, ...) the world body positions, the pelvis's forward direction and the
    imitation reward (the run's frozen encoder, C + kappa cos), and each clip's number of live steps."""
    env, policy, obs = first_frame_env(run, lib)
    core = env.unwrapped.core
    live_steps = (lib.num_frames - 2).numpy()  # the step that reaches the clip's last frame resets the world
    pos, fwd, rew = [], [], []
    for _ in range(int(live_steps.max())):
        obs, reward, *_ = env.step(policy.act(obs).numpy())
        rew.append(np.asarray(reward, dtype=np.float64))
        s = core.backend.state(None)
        pos.append(s.body_pos.double().numpy())
        fwd.append(body_axes(s.body_rot[:, 0].double())[:, :2].numpy())
    env.close()
    return {"body_pos": np.stack(pos), "forward": np.stack(fwd), "reward": np.stack(rew), "live_steps": live_steps}


def _heading_error_deg(fwd: np.ndarray, ref_fwd: np.ndarray) -> float:
    """Yaw of forward direction ``fwd`` (2,) minus that of ``ref_fwd``, in degrees within [-180, 180)."""
    head = math.degrees(math.atan2(fwd[1], fwd[0]) - math.atan2(ref_fwd[1], ref_fwd[0]))
    return (head + 180.0) % 360.0 - 180.0


def _clip_reference(lib: MotionLib, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Clip m's world body positions (T, 24, 3) and pelvis forward directions (T, 2)."""
    sl = slice(int(lib.starts[m]), int(lib.starts[m] + lib.num_frames[m]))
    ref_rot = lib.frames("body_rot")[sl].double()
    return lib.frames("body_pos")[sl].double().numpy(), body_axes(ref_rot[:, 0])[:, :2].numpy()


def policy_drift(lib: MotionLib, roll: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """Per clip: final pelvis offset (forward, left; m) and heading error (deg) of the rollout's last live step."""
    out = {}
    for m, name in enumerate(lib.names):
        ref, ref_fwd = _clip_reference(lib, m)
        last = int(roll["live_steps"][m]) - 1  # step k reaches frame k + 1; the last live state is frame T - 2
        f = ref_fwd[0] / np.linalg.norm(ref_fwd[0])
        d = roll["body_pos"][last, m, 0, :2] - ref[last + 1, 0, :2]
        out[name] = {
            "final_offset_forward_m": float(d @ f),
            "final_offset_left_m": float(-d[0] * f[1] + d[1] * f[0]),
            "final_heading_error_deg": _heading_error_deg(roll["forward"][last, m], ref_fwd[last + 1]),
        }
    return out


def failure_trace(lib: MotionLib, roll: dict[str, np.ndarray], clip: str) -> list[dict[str, float | int | str]]:
    """Per live step of ``clip``'s rollout: the frame, pelvis height (and the reference's), mean and max body
    error with the body that has the max, heading error, the pelvis offset from the reference's (m) and the
    step's imitation reward when the rollout has one."""
    from rgsd_envs.humanoid.skeleton import BODY_NAMES

    if clip not in lib.names:
        raise SystemExit(f"--trace: no clip {clip!r} in the run's motions ({', '.join(lib.names)})")
    m = lib.names.index(clip)
    ref, ref_fwd = _clip_reference(lib, m)
    rows = []
    for k in range(int(roll["live_steps"][m])):
        sim, r = roll["body_pos"][k, m], ref[k + 1]
        err = np.linalg.norm(sim - r, axis=-1)
        rows.append(
            {
                "frame": k + 1,
                "pelvis_height_m": float(sim[0, 2]),
                "ref_pelvis_height_m": float(r[0, 2]),
                "mean_body_error_m": float(err.mean()),
                "max_body_error_m": float(err.max()),
                "worst_body": BODY_NAMES[int(err.argmax())],
                "heading_error_deg": _heading_error_deg(roll["forward"][k, m], ref_fwd[k + 1]),
                "pelvis_offset_m": float(np.linalg.norm(sim[0, :2] - r[0, :2])),
            }
        )
        if "reward" in roll:
            rows[-1]["reward"] = float(roll["reward"][k, m])
    return rows


def shipped_run() -> str:
    """The run folder rgsd ships (``rgsd_agents.pretrained.pretrained_run()``), relative to here when it is below."""
    from rgsd_agents.pretrained import PRETRAINED_DIR

    here = Path.cwd().resolve()
    folder = PRETRAINED_DIR.resolve()
    return str(folder.relative_to(here)) if folder.is_relative_to(here) else str(folder)


def main(argv: list[str] | None = None) -> int:
    """Print and optionally write both measurements."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__)
    p.add_argument("--run", help="a trained run folder (its encoder scores the arcs; its policy is rolled out)")
    p.add_argument("--encoder", help="an encoder file instead of the run's")
    p.add_argument("--degrees", type=float, default=15.0, help="yaw of the bent clip at its end")
    p.add_argument("--trace", metavar="CLIP", help="with --run: print the clip's rollout step by step (how it fails)")
    p.add_argument("--every", type=int, default=5, help="--trace prints every N-th step (and the last)")
    p.add_argument("--out", help="JSON file for the numbers")
    args = p.parse_args(argv)
    if not (args.run or args.encoder):
        p.error(f"give --run or --encoder (the run rgsd ships: --run {shipped_run()})")
    if args.trace and not args.run:
        p.error("--trace needs --run (the policy whose rollout it prints)")
    if args.every < 1:
        p.error(f"--every must be 1 or more, got {args.every}")
    torch.set_num_threads(1)
    encoder = enc.load_encoder(args.encoder or Path(args.run) / "encoder.pt")
    lib = MotionLib(RunDir(args.run).env_config().motions if args.run else "demo")
    data: dict = {"degrees": args.degrees, "reward": reward_under_arc(lib, encoder, args.degrees)}
    for name, r in data["reward"].items():
        print(
            f"{name:<16} cos to z_m straight {r['straight_cos']:.4f}, bent {args.degrees:g} deg {r['bent_cos']:.4f};"
            f" body error {100 * r['body_error_m']:.1f} cm, final pelvis {r['final_pelvis_offset_m']:.2f} m off"
        )
    if args.run:
        roll = policy_rollout(Path(args.run), lib)
        data["rollouts"] = policy_drift(lib, roll)
        for name, r in data["rollouts"].items():
            print(
                f"{name:<16} policy ends {r['final_offset_forward_m']:+.2f} m forward, "
                f"{r['final_offset_left_m']:+.2f} m left of the reference, heading {r['final_heading_error_deg']:+.1f} deg"
            )
    if args.trace:
        data["trace"] = {"clip": args.trace, "steps": failure_trace(lib, roll, args.trace)}
        print(
            f"{args.trace}: frame, pelvis height (reference), mean / max body error (worst body), heading, "
            "pelvis offset, imitation reward"
        )
        steps = data["trace"]["steps"]
        for row in steps:
            if (row["frame"] - 1) % args.every == 0 or row is steps[-1]:
                print(
                    f"  {row['frame']:4d}  {row['pelvis_height_m']:.2f} ({row['ref_pelvis_height_m']:.2f})  "
                    f"{row['mean_body_error_m']:.2f} / {row['max_body_error_m']:.2f} ({row['worst_body']})  "
                    f"{row['heading_error_deg']:+.0f} deg  {row['pelvis_offset_m']:.2f} m  {row.get('reward', math.nan):.2f}"
                )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
