"""The training's imitation probe: which clips it rolls out, how far, and its numbers on the demo clips."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rgsd_agents.probe import MAX_PROBE_CLIPS, PROBE_FRAMES, ImitationProbe
from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.observations import POLICY_OBS_DIM
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.motion.selection import spread_clips
from rgsd_envs.runs.policy import PolicyMLP
from rgsd_envs.testing import first_frames


@pytest.fixture(scope="module")
def demo() -> MotionLib:
    return MotionLib("demo")


def _policy() -> PolicyMLP:
    torch.manual_seed(0)
    return PolicyMLP(POLICY_OBS_DIM, sk.NUM_DOFS, (32,))


def _probe(lib: MotionLib, **kw) -> ImitationProbe:
    return ImitationProbe(EnvConfig(motions="demo"), lib, None, **kw)


def test_probe_clips_take_every_clip_of_a_small_set_and_spread_a_large_one_over_its_categories():
    assert spread_clips(["walk", "run", "walk"], most=32) == [0, 1, 2]
    # name order puts 40 kicks first: the first 32 clips would all be kicks
    categories = ["kick"] * 40 + ["run"] * 5 + ["walk"] * 30 + ["punch"] * 2
    chosen = spread_clips(categories, most=12)
    assert chosen == [0, 1, 2, 3, 40, 41, 42, 45, 46, 47, 75, 76]  # round-robin: punch has 2, kick gets the 12th
    assert [categories.count(c) for c in ("kick", "run", "walk", "punch")] == [40, 5, 30, 2]
    picked = [categories[i] for i in chosen]
    assert [picked.count(c) for c in ("kick", "run", "walk", "punch")] == [4, 3, 3, 2]
    assert spread_clips(categories, most=200) == list(range(len(categories)))


def test_the_probe_rolls_out_the_spread_clips(demo):
    assert _probe(demo, max_clips=2).clip_ids.tolist() == spread_clips(demo.categories, 2) == [0, 1]
    assert MAX_PROBE_CLIPS == 32


def test_the_probe_of_short_clips_is_unchanged_by_the_frame_cap(demo):
    probe = _probe(demo)
    assert probe.clip_ids.tolist() == [0, 1, 2, 3, 4] and probe.names == list(demo.names)
    frames = demo.num_frames.numpy()
    assert probe.starts.tolist() == [k * (f - 1) // 4 for f in frames for k in range(4)]
    assert probe.length.tolist() == [f - 1 - k * (f - 1) // 4 for f in frames for k in range(4)]
    assert int(probe.length.max()) < PROBE_FRAMES
    out = probe.run(_policy())
    probe.close()
    # measured with the probe that stepped every world to its clip's end (no cap, the first 32 clips)
    expected = {
        "probe/cartesian_error_cm": 86.51451886580091,
        "probe/frames_within_threshold": 0.43220314212641586,
        "probe/imitation_reward": 12.696694313023553,
        "probe_clips/demo_walk_cm": 118.26377294134161,
        "probe_clips/demo_punch_cm": 68.28433640929387,
    }
    for key, value in expected.items():
        assert out[key] == pytest.approx(value, rel=1e-6), key


def test_the_probe_stops_scoring_a_rollout_after_max_frames_steps(demo):
    capped = _probe(demo, max_frames=20)
    assert capped.length.tolist() == [20] * 20  # every start has >= 23 frames to its clip's end
    steps, errors = [], []
    step = capped.env.step

    def counted(action):
        steps.append(1)
        return step(action)

    capped.env.step = counted
    out = capped.run(_policy())
    capped.close()
    assert len(steps) == 20  # not the 90 steps to the demo clips' ends

    full = _probe(demo)
    step = full.env.step

    def recorded(action):
        result = step(action)
        errors.append(result[4].cartesian_error.to(torch.float64))
        return result

    full.env.step = recorded
    uncapped = full.run(_policy())
    full.close()
    first20 = torch.stack(errors[:20]).mean(0).numpy().reshape(5, 4)  # (clips, starts): no world ends before 20
    for c, name in enumerate(demo.names):
        assert out[f"probe_clips/{name}_cm"] == pytest.approx(100.0 * first20[c].mean(), rel=1e-9)
    assert out["probe/cartesian_error_cm"] != pytest.approx(uncapped["probe/cartesian_error_cm"])


def test_the_probe_rolls_out_its_chosen_clips_with_their_latents(demo):
    clips = [
        first_frames(c, 12, f"{c.category}_{i:02d}") for c in demo.clips for i in range(4)
    ]  # 20 clips, name order = category order
    lib = MotionLib(clips)
    probe = _probe(lib, max_clips=7, starts_per_clip=1, candidates=2)
    chosen = probe.clip_ids.tolist()
    assert chosen == [0, 1, 4, 5, 8, 12, 16]  # the first of each category, then a second walk and run
    assert sorted({lib.categories[i] for i in chosen}) == sorted(set(lib.categories))
    latents = torch.nn.functional.normalize(torch.randn(7, 2, 16, generator=torch.Generator().manual_seed(0)), dim=-1)
    options, skills = {}, []
    reset, step = probe.env.reset, probe.env.step

    def remembered(**kw):
        options.update(kw["options"])
        return reset(**kw)

    def first_skills(action):
        skills.append(probe.env.core.skill.clone())
        return step(action)

    probe.env.reset, probe.env.step = remembered, first_skills
    out = probe.run(_policy(), latents)
    probe.close()
    assert options["clip"] == np.repeat(chosen, 2).tolist()  # (clip, candidate) worlds on the library's clips
    torch.testing.assert_close(skills[0], latents.reshape(14, 16))
    assert {k.removeprefix("probe_clips/").removesuffix("_cm") for k in out if k.startswith("probe_clips/")} == {
        lib.names[i] for i in chosen
    }
