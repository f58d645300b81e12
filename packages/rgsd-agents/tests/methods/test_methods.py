"""Each method on a fabricated rollout of reference-like transitions: rewards, updates, latents, exact state."""

from __future__ import annotations

import copy

import pytest
import torch

from rgsd_agents.config import PPOConfig
from rgsd_agents.methods import METHODS, build_method, method_config
from rgsd_agents.methods.base import MethodContext
from rgsd_agents.methods.common import ReferenceData, discriminator_reward, transition_features
from rgsd_agents.rl.networks import ActorCritic, NetworkConfig
from rgsd_agents.rl.ppo import PPO
from rgsd_agents.rl.storage import RolloutStorage
from rgsd_agents.testing import TINY_OPTIONS, tiny_options
from rgsd_envs.envs.observations import ENCODER_INPUT_DIM, POLICY_OBS_DIM, SKILL_DIM, reference_encoder_inputs
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.library import MotionLib

T, N = 4, 6
PPO_EPOCHS, PPO_MINIBATCH = 2, 8
"""PPO's schedule on the fabricated rollouts: 2 epochs of T * N / 8 = 3 minibatches."""
OWN_REWARD = sorted(name for name, cls in METHODS.items() if not cls.ENV_REWARD and cls.LOOP == "on_policy")
"""The on-policy methods whose reward comes from their own networks (RGSD and DIAYN keep the env's)."""


def test_every_method_with_its_own_reward_has_tiny_options():
    missing = sorted(set(OWN_REWARD) - set(TINY_OPTIONS))
    assert not missing, f"add {missing} to rgsd_agents.testing.TINY_OPTIONS (docs/methods.md, Adding a method)"
    assert {"ase", "calm", "metra"} <= set(OWN_REWARD)


@pytest.fixture(scope="module")
def reference() -> ReferenceData:
    lib = MotionLib("demo")
    return ReferenceData(reference_encoder_inputs(lib).float(), lib.clip_of_frame, lib.starts, lib.num_frames)


def _rollout(reference: ReferenceData, seed: int, method=None) -> RolloutStorage:
    """A storage whose discovery samples are reference windows (plus noise) with random unit skills; ``method``
    chooses latents after each of its T steps, as the env wrapper has it do."""
    g = torch.Generator().manual_seed(seed)
    st = RolloutStorage(T, N, POLICY_OBS_DIM, sk.NUM_DOFS, SKILL_DIM, ENCODER_INPUT_DIM)
    frames = torch.randint(reference.num_total, (T, N), generator=g)
    st.encoder_inputs.copy_(reference.inputs[frames] + 0.01 * torch.randn(T, N, ENCODER_INPUT_DIM, generator=g))
    st.skills.copy_(torch.nn.functional.normalize(torch.randn(T, N, SKILL_DIM, generator=g), dim=-1))
    st.obs.copy_(torch.randn(T, N, POLICY_OBS_DIM, generator=g))
    st.actions.copy_(0.1 * torch.randn(T, N, sk.NUM_DOFS, generator=g))
    st.returns.copy_(torch.randn(T, N, generator=g))
    st.advantages.copy_(torch.randn(T, N, generator=g))
    st.step = T
    for t in range(T if method is not None else 0):
        method.choose_skills(torch.zeros(N, dtype=torch.bool), st.skills[t])
    return st


def _method(name: str, reference: ReferenceData, **options):
    return build_method(name, tiny_options(name, **options), MethodContext(reference, N, torch.device("cpu"), seed=3))


def _ppo(seed: int = 0) -> PPO:
    torch.manual_seed(seed)
    ac = ActorCritic(POLICY_OBS_DIM, sk.NUM_DOFS, NetworkConfig(actor_hidden=(16,), critic_hidden=(16,)))
    return PPO(ac, PPOConfig(epochs=PPO_EPOCHS, minibatch_size=PPO_MINIBATCH, actor_lr=1e-3, critic_lr=1e-3))


def _iterate(method, storage: RolloutStorage, seed: int) -> dict[str, torch.Tensor]:
    """The runner's order after a rollout: relabel, PPO's update with the method's minibatch hooks, its update."""
    method.relabel(storage)
    gen = torch.Generator().manual_seed(seed)
    ppo = _ppo(seed)
    _fill_log_probs(ppo, storage)
    ppo.update(storage, gen, method)
    return method.update(storage, gen)


@torch.no_grad()
def _fill_log_probs(ppo: PPO, storage: RolloutStorage) -> None:
    """The stored actions' log-probabilities under the policy PPO starts from (as a rollout would store them)."""
    log_probs = ppo.ac.evaluate(storage.flat("obs"), storage.flat("actions"))[0]
    storage.log_probs.copy_(log_probs.view_as(storage.log_probs))


@pytest.mark.parametrize("name", OWN_REWARD)
def test_relabel_writes_finite_rewards_and_the_update_changes_them(name, reference):
    method = _method(name, reference)
    storage = _rollout(reference, 0, method)
    before = method.relabel(storage)
    rewards = storage.rewards.clone()
    assert torch.isfinite(rewards).all() and rewards.std() > 0
    assert float(before["reward"]) == pytest.approx(float(rewards.mean()), rel=1e-5)
    storage = _rollout(reference, 0, method)
    stats = _iterate(method, storage, 0)
    assert stats and all(torch.isfinite(v) and v.dim() == 0 for v in stats.values())
    storage = _rollout(reference, 0, method)
    method.relabel(storage)
    assert not torch.equal(storage.rewards, rewards)


@pytest.mark.parametrize("name", OWN_REWARD)
def test_state_dict_restores_exactly(name, reference):
    a = _method(name, reference)
    _iterate(a, _rollout(reference, 0, a), 0)
    a.choose_skills(torch.zeros(N, dtype=torch.bool), torch.zeros(N, SKILL_DIM))
    state = copy.deepcopy(a.state_dict())
    b = _method(name, reference)
    b.load_state_dict(state)
    a.load_state_dict(copy.deepcopy(state))  # as a resumed run has it: nothing of a rollout in progress
    outs = []
    for m in (a, b):
        storage = _rollout(reference, 1, m)
        _iterate(m, storage, 5)
        storage = _rollout(reference, 1, m)
        m.relabel(storage)
        z = m.choose_skills(torch.tensor([True] + [False] * (N - 1)), torch.ones(N, SKILL_DIM) / 4.0)
        outs.append((storage.rewards.clone(), z))
    assert torch.equal(outs[0][0], outs[1][0])
    assert (outs[0][1] is None) == (outs[1][1] is None)
    if outs[0][1] is not None:
        assert torch.equal(outs[0][1], outs[1][1])


@pytest.mark.parametrize("name", ["ase", "calm"])
def test_the_discriminator_steps_in_every_ppo_minibatch(name, reference):
    method = _method(name, reference)
    storage = _rollout(reference, 0, method)
    _iterate(method, storage, 0)
    minibatches = T * N // PPO_MINIBATCH
    for p in method.optimizer.param_groups[-1]["params"]:  # the discriminator's (ASE: with its encoder head)
        assert int(method.optimizer.state[p]["step"]) == PPO_EPOCHS * minibatches


def test_ase_resamples_expired_latents_on_the_sphere_and_keeps_the_others(reference):
    method = build_method(
        "ase",
        tiny_options("ase", resample=True, latent_steps_min=2, latent_steps_max=2),
        MethodContext(reference, N, "cpu", 0),
    )
    z0 = torch.nn.functional.normalize(torch.randn(N, SKILL_DIM), dim=-1)
    none = torch.zeros(N, dtype=torch.bool)
    assert torch.equal(method.choose_skills(none, z0), z0)  # 1 step left
    z1 = method.choose_skills(none, z0)  # held 2 steps: every world draws a new latent
    assert not torch.isclose(z1, z0).all(-1).any()
    torch.testing.assert_close(z1.norm(dim=-1), torch.ones(N))
    paper = build_method("ase", tiny_options("ase"), MethodContext(reference, N, "cpu", 0))
    assert paper.choose_skills(none, z0) is None  # by default one latent per episode: the env's


def test_calm_starts_episodes_with_encoded_reference_windows_and_remembers_each_step_s_window(reference):
    method = _method("calm", reference)
    before = method.window_end.clone()
    started = torch.tensor([True, False, True, False, False, False])
    z0 = torch.nn.functional.normalize(torch.ones(N, SKILL_DIM), dim=-1)
    z = method.choose_skills(started, z0)
    assert torch.equal(method._step_windows[-1], before)  # the step just taken used the old windows
    assert torch.equal(method.window_end[~started], before[~started])
    torch.testing.assert_close(z[started], method.encoder(method.windows.gather(method.window_end[started])))
    assert torch.equal(z[~started], z0[~started])
    ends = method.windows.draw(2000, torch.Generator().manual_seed(0))
    clip = reference.clip_of_frame[ends]
    assert (ends >= method.windows.first_ends[clip]).all() and (ends <= method.windows.last[clip]).all()
    assert set(clip.tolist()) == set(range(reference.starts.shape[0]))
    probe = method.probe_latents(range(reference.starts.shape[0]))
    assert probe.shape == (5, 1, SKILL_DIM)
    first = method.encoder(method.windows.gather(reference.starts + method.cfg.window - 1))
    torch.testing.assert_close(probe[:, 0], first)  # a clip's latent: E of its first window
    torch.testing.assert_close(method.probe_latents([3, 1])[:, 0], first[[3, 1]])  # the probed clips' own latents


def test_calm_windows_are_the_clip_s_frames_zero_padded_before_its_start(reference):
    method = _method("calm", reference, window=120, window_features="compact")  # the demo clips: 85-91 frames
    windows = method.windows
    assert windows.dim == 120 * 76
    start, count = int(reference.starts[1]), int(reference.num_frames[1])
    assert int(windows.first_ends[1]) == start + count - 1  # shorter than the window: its one window is the clip
    w = windows.gather(windows.first_ends[1:2]).view(120, 76)
    assert torch.equal(w[: 120 - count], torch.zeros(120 - count, 76))
    assert torch.equal(w[120 - count :], windows.table[start : start + count])
    assert not torch.equal(windows.table[start], torch.zeros(76))


def test_calm_trains_its_encoder_through_the_policy_s_ppo_loss(reference):
    # no regulariser, and the discriminator gives the encoder no gradient: only PPO's loss can move it
    method = _method("calm", reference, encoder_reg=0.0)
    storage = _rollout(reference, 0, method)
    method.relabel(storage)
    ppo = _ppo()
    norm = ppo.ac.obs_normalizer
    idx = torch.arange(PPO_MINIBATCH)
    with torch.no_grad():  # an unchanged encoder gives back the latent of the stored window, normalised
        inputs = method.policy_inputs(ppo.ac, idx, storage.flat("obs")[idx])
    z = method.window_latents[method._rollout[1][idx]]
    expected = (z - norm.mean[-SKILL_DIM:]) / (norm.var[-SKILL_DIM:] + norm.eps).sqrt()
    torch.testing.assert_close(inputs[:, -SKILL_DIM:], expected.float())
    torch.testing.assert_close(inputs[:, :-SKILL_DIM], storage.flat("obs")[idx, :-SKILL_DIM])
    seen = {}
    step = method.after_policy_step

    def recording(idx):
        seen["grad"] = [p.grad.clone() for p in method.encoder.parameters()]
        return step(idx)

    method.after_policy_step = recording
    _fill_log_probs(ppo, storage)
    before = [p.detach().clone() for p in method.encoder.parameters()]
    ppo.update(storage, torch.Generator().manual_seed(0), method)
    assert all(g.abs().sum() > 0 for g in seen["grad"])  # PPO's backward left its gradient on the encoder
    assert all(not torch.equal(a, b) for a, b in zip(before, method.encoder.parameters()))


def test_reference_frames_are_drawn_clip_first_inside_the_clip_as_ase_s_motion_library():
    """A clip uniformly, then a frame with ``history - 1`` frames of the clip before it (nv-tlabs/ASE
    ase/utils/motion_lib.py:100-118, ase/env/tasks/humanoid_amp.py:71-76); the old rule drew a 300-frame clip 100x
    as often as a 3-frame one."""
    starts, counts = torch.tensor([0, 3]), torch.tensor([3, 300])
    ref = ReferenceData(torch.zeros(303, 1), torch.repeat_interleave(torch.arange(2), counts), starts, counts)
    g = torch.Generator().manual_seed(0)
    frames = ref.sample_frames(20000, g, history=2)
    short = frames < 3
    assert abs(float(short.float().mean()) - 0.5) < 0.02
    assert set(frames[short].tolist()) == {1, 2}  # (s, s') inside the clip: never its first frame
    assert int(frames[~short].min()) == 4 and int(frames[~short].max()) == 302
    uniform = ref.sample_frames(20000, g, clip_first=False)
    assert float((uniform < 3).float().mean()) < 0.02
    one = ReferenceData(torch.zeros(1, 1), torch.zeros(1, dtype=torch.long), torch.tensor([0]), torch.tensor([1]))
    assert set(one.sample_frames(10, g, history=5).tolist()) == {0}  # a clip too short keeps its frame


@pytest.mark.parametrize("name", ["ase", "calm"])
def test_the_discriminator_trains_on_the_minibatch_s_first_disc_minibatch_size_rows(name, reference, monkeypatch):
    """ASE's and CALM's code: amp_minibatch_size (4096) of each PPO minibatch, and as many reference samples."""
    method = _method(name, reference, disc_minibatch_size=3)
    storage = _rollout(reference, 0, method)
    method.relabel(storage)
    seen = []
    if name == "ase":
        draw = reference.sample_frames
        monkeypatch.setattr(reference, "sample_frames", lambda n, *a, **k: seen.append(n) or draw(n, *a, **k))
    else:
        draw = method.windows.draw
        monkeypatch.setattr(method.windows, "draw", lambda n, g: seen.append(n) or draw(n, g))
    idx = torch.randperm(T * N)[:PPO_MINIBATCH]
    if name == "calm":
        method.policy_inputs(_ppo().ac, idx, storage.flat("obs")[idx])
    method.after_policy_step(idx)
    assert seen == [3]
    assert method_config(name, {}).disc_minibatch_size == 4096


def test_calm_rewards_the_latent_the_policy_acted_with(reference):
    """NVlabs/CALM calm/learning/calm_agent.py:133-135: the rollout's stored latents, not a re-encoding."""
    method = _method("calm", reference)
    storage = _rollout(reference, 0, method)
    with torch.no_grad():  # the encoder has moved since the worlds drew their latents
        for p in method.encoder.parameters():
            p.add_(0.5)
        method.window_latents = method._encode_windows()
    method.relabel(storage)
    x = transition_features(storage.flat("encoder_inputs"), method.cfg.frames)
    with torch.no_grad():
        acted = method.cfg.disc_weight * discriminator_reward(method.disc(x, storage.flat("skills")))
        ends = torch.stack(method._step_windows).reshape(-1)
        current = method.cfg.disc_weight * discriminator_reward(method.disc(x, method.window_latents[ends]))
    torch.testing.assert_close(storage.rewards.reshape(-1), acted)
    assert not torch.allclose(acted, current)


def test_method_options_are_checked_naming_the_key():
    with pytest.raises(Exception, match=r"method\.options\.hiden"):
        method_config("metra", {"hiden": [4]})
