"""benchmarks/heading_drift.py: the bent clip is a pure yaw about the start pelvis, velocities included."""

from __future__ import annotations

import math
from pathlib import Path

import torch


def test_bent_clip_turns_the_path_and_its_velocities_consistently(load_benchmark):
    hd = load_benchmark("heading_drift")
    from rgsd_envs.envs.observations import body_axes
    from rgsd_envs.motion.library import MotionLib

    lib = MotionLib("demo")
    m = lib.names.index("demo_walk")
    sl = slice(int(lib.starts[m]), int(lib.starts[m] + lib.num_frames[m]))
    pos, rot, lin, ang = (lib.frames(k)[sl].double() for k in ("body_pos", "body_rot", "body_lin_vel", "body_ang_vel"))
    same = hd.bent_clip(pos, rot, lin, ang, lib.fps, 0.0)
    for a, b in zip(same, (pos, rot, lin, ang)):
        torch.testing.assert_close(a, b)
    p, q, v, w = hd.bent_clip(pos, rot, lin, ang, lib.fps, 30.0)
    # the end point turns 30 deg about the start pelvis: chord 2 L sin(15 deg)
    start = pos[0, 0, :2]
    length = (pos[-1, 0, :2] - start).norm()
    assert math.isclose(
        float((p[-1, 0, :2] - pos[-1, 0, :2]).norm()), 2 * float(length) * math.sin(math.radians(15)), rel_tol=1e-6
    )

    # the pelvis heading turned by 30 deg at the end, 0 at the start
    def yaw(r):
        f = body_axes(r)[..., :2]
        return torch.atan2(f[..., 1], f[..., 0])

    turn = math.degrees(float(yaw(q[-1, 0]) - yaw(rot[-1, 0])))
    assert math.isclose((turn + 180) % 360 - 180, 30.0, abs_tol=1e-6)
    # linear velocities are the time derivative of the bent path (central differences, interior frames)
    fd = (p[2:] - p[:-2]) * lib.fps / 2
    base = (pos[2:] - pos[:-2]) * lib.fps / 2
    assert (fd - v[1:-1]).norm(dim=-1).mean() < (base - lin[1:-1]).norm(dim=-1).mean() + 0.02
    torch.testing.assert_close(
        w[..., 2] - ang[..., 2],
        torch.full_like(w[..., 2], math.radians(30) / (pos.shape[0] - 1) * lib.fps),
        rtol=0,
        atol=0.2,
    )


def test_failure_trace_and_drift_read_a_rollout_against_its_reference(load_benchmark):
    import numpy as np
    import pytest

    from rgsd_envs.motion.library import MotionLib

    hd = load_benchmark("heading_drift")
    lib = MotionLib("demo")
    m = lib.names.index("demo_backward")
    live = (lib.num_frames - 2).numpy()
    steps = int(live.max())
    pos = np.zeros((steps, lib.num_clips, 24, 3))
    fwd = np.zeros((steps, lib.num_clips, 2))
    for c in range(lib.num_clips):  # every clip's rollout is its reference, one frame on per step
        ref, ref_fwd = hd._clip_reference(lib, c)
        k = min(steps, int(live[c]))
        pos[:k, c], fwd[:k, c] = ref[1 : k + 1], ref_fwd[1 : k + 1]
    sink = 0.3  # the backward rollout sinks 0.3 m from step 10 on (every body), and 0.1 m to the side
    pos[9:, m, :, 2] -= sink
    pos[9:, m, :, 1] += 0.1
    roll = {"body_pos": pos, "forward": fwd, "live_steps": live}
    rows = hd.failure_trace(lib, roll, "demo_backward")
    assert len(rows) == int(live[m]) and rows[0]["frame"] == 1
    assert rows[0]["mean_body_error_m"] == pytest.approx(0.0, abs=1e-9) and rows[0]["heading_error_deg"] == 0
    late = rows[20]
    assert late["pelvis_height_m"] == pytest.approx(late["ref_pelvis_height_m"] - sink)
    assert late["mean_body_error_m"] == pytest.approx(math.hypot(sink, 0.1))
    assert late["pelvis_offset_m"] == pytest.approx(0.1) and late["worst_body"] and "reward" not in late
    roll["reward"] = np.arange(steps * lib.num_clips, dtype=float).reshape(steps, lib.num_clips)
    assert hd.failure_trace(lib, roll, "demo_backward")[20]["reward"] == 20 * lib.num_clips + m
    drift = hd.policy_drift(lib, roll)
    assert drift["demo_walk"]["final_offset_forward_m"] == pytest.approx(0.0, abs=1e-9)
    assert abs(drift["demo_backward"]["final_offset_left_m"]) == pytest.approx(0.1)
    with pytest.raises(SystemExit, match="demo_jump"):
        hd.failure_trace(lib, roll, "demo_jump")


def test_trace_arguments_are_checked_before_anything_loads(load_benchmark, capsys):
    import pytest

    hd = load_benchmark("heading_drift")
    with pytest.raises(SystemExit):
        hd.main(["--encoder", "missing.pt", "--trace", "demo_walk"])
    assert "--trace needs --run" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        hd.main(["--run", "missing_run", "--trace", "demo_walk", "--every", "0"])
    assert "--every must be 1 or more, got 0" in capsys.readouterr().err


def test_without_a_run_the_error_names_the_shipped_one(load_benchmark, capsys, monkeypatch):
    import pytest

    from rgsd_agents.pretrained import pretrained_run

    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    shipped = "packages/rgsd-agents/src/rgsd_agents/pretrained/rgsd_cpu"
    assert Path(shipped).resolve() == pretrained_run().resolve()
    for name, argv in (("heading_drift", []), ("reward_near_reference", ["--steps", "10"])):
        with pytest.raises(SystemExit):
            load_benchmark(name).main(argv)
        assert f"(the run rgsd ships: --run {shipped})" in capsys.readouterr().err, name
