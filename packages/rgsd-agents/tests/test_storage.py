"""Rollout storage: GAE, bootstrapping on truncation only, minibatches."""

from __future__ import annotations

import torch

from rgsd_agents.rl.storage import RolloutStorage


def _reference_gae(rewards, values, dones, last_values, gamma, lam):
    """Per-world GAE written as plainly as possible (python loops)."""
    t_len, n = rewards.shape
    adv = torch.zeros(t_len, n, dtype=torch.float64)
    for i in range(n):
        gae = 0.0
        for t in reversed(range(t_len)):
            next_v = last_values[i] if t == t_len - 1 else values[t + 1, i]
            nonterminal = 1.0 - dones[t, i]
            delta = rewards[t, i] + gamma * next_v * nonterminal - values[t, i]
            gae = delta + gamma * lam * nonterminal * gae
            adv[t, i] = gae
    return adv


def _add_scalar_step(st: RolloutStorage, value: float, reward: float, done: float) -> None:
    """One step of a 1-world storage with 1-D everything."""
    z = torch.zeros(1, 1)
    st.add(z, z, z[0], torch.tensor([value]), torch.tensor([reward]), torch.tensor([done]), z[0], z, z, z)


def _filled(t_len=6, n=3, seed=0) -> RolloutStorage:
    g = torch.Generator().manual_seed(seed)
    st = RolloutStorage(t_len, n, obs_dim=2, act_dim=1, skill_dim=2, encoder_dim=3)
    for _ in range(t_len):
        st.add(
            torch.randn(n, 2, generator=g),
            torch.randn(n, 1, generator=g),
            torch.zeros(n),
            torch.randn(n, generator=g),
            torch.rand(n, generator=g),
            (torch.rand(n, generator=g) < 0.3).float(),
            (torch.rand(n, generator=g) < 0.5).long(),
            torch.zeros(n, 2),
            torch.randn(n, 3, generator=g),
            torch.randn(n, 3, generator=g),
        )
    return st


def test_gae_matches_a_plain_per_world_computation():
    st = _filled()
    last = torch.randn(3)
    st.compute_returns(last, 0.99, 0.95)
    ref = _reference_gae(st.rewards.double(), st.values.double(), st.dones.double(), last.double(), 0.99, 0.95)
    torch.testing.assert_close(st.advantages.double(), ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(st.returns, st.advantages + st.values)


def test_gae_does_not_cross_an_episode_end():
    st = RolloutStorage(2, 1, 1, 1, 1, 1)
    _add_scalar_step(st, value=0.0, reward=1.0, done=1.0)
    _add_scalar_step(st, value=5.0, reward=100.0, done=0.0)
    st.compute_returns(torch.tensor([7.0]), gamma=0.9, lam=1.0)
    assert st.advantages[0, 0].item() == 1.0  # the next episode's rewards and values do not leak back
    assert abs(st.advantages[1, 0].item() - (100.0 + 0.9 * 7.0 - 5.0)) < 1e-4


def test_truncation_bootstrap_adds_discounted_final_value_to_that_step_only():
    st = _filled()
    before = st.rewards.clone()
    st.add_bootstrap(torch.tensor([1, 4]), torch.tensor([2, 0]), torch.tensor([10.0, -3.0]), gamma=0.9)
    expected = before.clone()
    expected[1, 2] += 9.0
    expected[4, 0] += -2.7
    torch.testing.assert_close(st.rewards, expected)


def test_bootstrapped_truncation_equals_continuing_with_the_final_value():
    """A truncated step with r + gamma V(s_final) has the advantage of an episode that went on with value V(s_final)."""
    gamma, lam, v_final = 0.99, 0.95, 3.0
    st = RolloutStorage(1, 1, 1, 1, 1, 1)
    _add_scalar_step(st, value=2.0, reward=1.0, done=1.0)
    st.add_bootstrap(torch.tensor([0]), torch.tensor([0]), torch.tensor([v_final]), gamma)
    st.compute_returns(torch.tensor([123.0]), gamma, lam)  # the next episode's value must not matter
    assert abs(st.advantages[0, 0].item() - (1.0 + gamma * v_final - 2.0)) < 1e-5


def test_minibatches_partition_the_rollout():
    st = _filled(t_len=4, n=5)
    parts = list(st.minibatch_indices(6, torch.Generator().manual_seed(0)))
    assert len(parts) == 3
    assert sorted(torch.cat(parts).tolist()) == list(range(20))


def test_encoder_inputs_keep_s_for_imitation_and_s_next_for_discovery():
    st = RolloutStorage(1, 4, 1, 1, 1, 2)
    tasks = torch.tensor([1, 0, 1, 0])
    s, s_next = torch.randn(4, 2), torch.randn(4, 2)
    z = torch.zeros(4)
    st.add(z.view(4, 1), z.view(4, 1), z, z, z, z, tasks, z.view(4, 1), s, s_next)
    torch.testing.assert_close(st.encoder_inputs[0], torch.stack((s[0], s_next[1], s[2], s_next[3])))
    assert st.tasks[0].tolist() == [1.0, 0.0, 1.0, 0.0]
