"""Each method on a fabricated rollout of reference-like transitions: rewards, updates, latents, exact state."""

from __future__ import annotations

import copy

import pytest
import torch

from rgsd_agents.methods import METHODS, build_method, method_config
from rgsd_agents.methods.base import MethodContext
from rgsd_agents.methods.common import ReferenceData
from rgsd_agents.storage import RolloutStorage
from rgsd_envs.envs.observations import ENCODER_INPUT_DIM, POLICY_OBS_DIM, SKILL_DIM, reference_encoder_inputs
from rgsd_envs.motion.library import MotionLib

TINY = {
    "ase": {"hidden": [16, 8], "minibatch_size": 16},
    "calm": {"encoder_hidden": [16], "disc_hidden": [16], "minibatch_size": 16},
    "metra": {"hidden": [16], "minibatch_size": 16},
}
T, N = 4, 6
OWN_REWARD = sorted(name for name, cls in METHODS.items() if not cls.ENV_REWARD and cls.LOOP == "on_policy")
"""The on-policy methods whose reward comes from their own networks (RGSD and DIAYN keep the env's)."""


def test_every_method_with_its_own_reward_is_tested_here():
    assert sorted(TINY) == OWN_REWARD


@pytest.fixture(scope="module")
def reference() -> ReferenceData:
    lib = MotionLib("demo")
    return ReferenceData(reference_encoder_inputs(lib).float(), lib.clip_of_frame, lib.starts, lib.num_frames)


def _rollout(reference: ReferenceData, seed: int) -> RolloutStorage:
    """A storage whose discovery samples are reference windows (plus noise) with random unit skills."""
    g = torch.Generator().manual_seed(seed)
    st = RolloutStorage(T, N, POLICY_OBS_DIM, 69, SKILL_DIM, ENCODER_INPUT_DIM)
    frames = torch.randint(reference.num_total, (T, N), generator=g)
    st.encoder_inputs.copy_(reference.inputs[frames] + 0.01 * torch.randn(T, N, ENCODER_INPUT_DIM, generator=g))
    st.skills.copy_(torch.nn.functional.normalize(torch.randn(T, N, SKILL_DIM, generator=g), dim=-1))
    st.step = T
    return st


def _method(name: str, reference: ReferenceData):
    return build_method(name, TINY[name], MethodContext(reference, N, torch.device("cpu"), seed=3))


@pytest.mark.parametrize("name", OWN_REWARD)
def test_relabel_writes_finite_rewards_and_the_update_changes_them(name, reference):
    method = _method(name, reference)
    storage = _rollout(reference, 0)
    before = method.relabel(storage)
    rewards = storage.rewards.clone()
    assert torch.isfinite(rewards).all() and rewards.std() > 0
    assert float(before["reward"]) == pytest.approx(float(rewards.mean()), rel=1e-5)
    stats = method.update(storage, torch.Generator().manual_seed(0))
    assert stats and all(torch.isfinite(v) and v.dim() == 0 for v in stats.values())
    method.relabel(storage)
    assert not torch.equal(storage.rewards, rewards)


@pytest.mark.parametrize("name", OWN_REWARD)
def test_state_dict_restores_exactly(name, reference):
    a = _method(name, reference)
    a.update(_rollout(reference, 0), torch.Generator().manual_seed(0))
    a.choose_skills(torch.zeros(N, dtype=torch.bool), torch.zeros(N, SKILL_DIM))
    state = copy.deepcopy(a.state_dict())
    b = _method(name, reference)
    b.load_state_dict(state)
    storage = _rollout(reference, 1)
    outs = []
    for m in (a, b):
        m.update(storage, torch.Generator().manual_seed(5))
        m.relabel(storage)
        z = m.choose_skills(torch.zeros(N, dtype=torch.bool), torch.ones(N, SKILL_DIM) / 4.0)
        outs.append((storage.rewards.clone(), z))
    assert torch.equal(outs[0][0], outs[1][0])
    assert (outs[0][1] is None) == (outs[1][1] is None)
    if outs[0][1] is not None:
        assert torch.equal(outs[0][1], outs[1][1])


def test_ase_resamples_expired_latents_on_the_sphere_and_keeps_the_others(reference):
    method = build_method(
        "ase", {**TINY["ase"], "latent_steps_min": 2, "latent_steps_max": 2}, MethodContext(reference, N, "cpu", 0)
    )
    z0 = torch.nn.functional.normalize(torch.randn(N, SKILL_DIM), dim=-1)
    none = torch.zeros(N, dtype=torch.bool)
    assert torch.equal(method.choose_skills(none, z0), z0)  # 1 step left
    z1 = method.choose_skills(none, z0)  # held 2 steps: every world draws a new latent
    assert not torch.isclose(z1, z0).all(-1).any()
    torch.testing.assert_close(z1.norm(dim=-1), torch.ones(N))
    paper = build_method("ase", {**TINY["ase"], "resample": False}, MethodContext(reference, N, "cpu", 0))
    assert paper.choose_skills(none, z0) is None  # one latent per episode: the env's


def test_calm_starts_episodes_with_encoded_reference_windows(reference):
    method = _method("calm", reference)
    started = torch.tensor([True, False, True, False, False, False])
    z0 = torch.nn.functional.normalize(torch.ones(N, SKILL_DIM), dim=-1)
    z = method.choose_skills(started, z0)
    latents = method.reference_latents
    for i in (0, 2):  # each new latent is the encoding of some reference window
        assert torch.isclose(latents, z[i]).all(-1).any()
    probe = method.probe_latents(reference.starts.shape[0])
    assert probe.shape == (5, 1, SKILL_DIM)


def test_method_options_are_checked_naming_the_key():
    with pytest.raises(Exception, match=r"method\.options\.hiden"):
        method_config("metra", {"hiden": [4]})
