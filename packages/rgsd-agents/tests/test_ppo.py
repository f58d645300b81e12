"""Actor-critic and PPO update rule."""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import pytest
import torch

from rgsd_agents.config import NetworkConfig, PPOConfig
from rgsd_agents.rl.networks import ActorCritic, ValueNormalizer
from rgsd_agents.rl.ppo import BOUNDS_COEF, PPO
from rgsd_agents.rl.rollout import collect_rollout
from rgsd_agents.rl.storage import RolloutStorage
from rgsd_envs.runs.policy import PolicyMLP


def _ac(learn_std=False, obs_dim=4, act_dim=2) -> ActorCritic:
    torch.manual_seed(0)
    return ActorCritic(
        obs_dim, act_dim, NetworkConfig(actor_hidden=(16,), critic_hidden=(16,), init_log_std=-1.0, learn_std=learn_std)
    )


def test_actor_mean_is_an_exportable_policy_mlp(tmp_path):
    ac = _ac()
    assert isinstance(ac.actor, PolicyMLP)
    ac.obs_normalizer.update(torch.randn(100, 4) * 3 + 1)
    ac.actor.save(tmp_path / "policy.pt")
    from rgsd_envs.runs.policy import load_policy

    loaded = load_policy(tmp_path / "policy.pt")
    x = torch.randn(5, 4)
    torch.testing.assert_close(loaded.act(x), ac.actor.act(x))


def test_log_prob_and_entropy_match_torch_normal():
    ac = _ac()
    obs = torch.randn(7, 4)
    actions, log_prob, _ = ac.act(obs, torch.Generator().manual_seed(1))
    dist = torch.distributions.Normal(ac.actor.net(obs), ac.log_std.exp())
    torch.testing.assert_close(log_prob, dist.log_prob(actions).sum(-1))
    lp, ent, _, _ = ac.evaluate(obs, actions)
    torch.testing.assert_close(lp, dist.log_prob(actions).sum(-1))
    torch.testing.assert_close(ent, dist.entropy().sum(-1)[0])


def test_fixed_std_is_not_trained_and_learned_std_is():
    assert not any(p is _ac().log_std for p in _ac().actor_parameters())
    ac = _ac(learn_std=True)
    assert any(p is ac.log_std for p in ac.actor_parameters())


def test_value_normalizer_roundtrip_and_statistics():
    vn = ValueNormalizer()
    x = torch.randn(1000, dtype=torch.float64) * 5 + 3
    vn.update(x[:400])
    vn.update(x[400:])
    assert abs(vn.mean.item() - x.mean().item()) < 1e-9
    assert abs(vn.var.item() - x.var(unbiased=False).item()) < 1e-6
    y = torch.randn(10)
    torch.testing.assert_close(vn.denormalize(vn.normalize(y)), y)


def _storage(ac: ActorCritic, adv_sign: torch.Tensor) -> RolloutStorage:
    """A rollout whose advantages favour actions with the sign of adv_sign."""
    t_len, n = 4, 16
    st = RolloutStorage(t_len, n, 4, 2, 1, 1)
    g = torch.Generator().manual_seed(0)
    for _ in range(t_len):
        obs = torch.randn(n, 4, generator=g)
        a, lp, v = ac.act(obs, g)
        r = (a * adv_sign).sum(-1)
        st.add(obs, a, lp, v, r, torch.ones(n), torch.ones(n), torch.zeros(n, 1), torch.zeros(n, 1), torch.zeros(n, 1))
    st.compute_returns(torch.zeros(n), 0.99, 0.95)
    return st


@pytest.mark.parametrize("bf16", [False, True], ids=["float32", "bf16"])
def test_ppo_update_moves_the_policy_towards_positive_advantages(bf16):
    ac = _ac()
    sign = torch.tensor([1.0, -1.0])
    st = _storage(ac, sign)
    probe = torch.randn(256, 4)
    before = (ac.actor.net(probe) * sign).sum(-1).mean().item()
    cfg = PPOConfig(actor_lr=3e-3, critic_lr=3e-3, epochs=4, minibatch_size=16, entropy_coef=0.0, bf16=bf16)
    stats = PPO(ac, cfg).update(st, torch.Generator().manual_seed(0))
    after = (ac.actor.net(probe) * sign).sum(-1).mean().item()
    assert after > before + 0.05
    assert all(math.isfinite(v) for v in stats.values())
    assert 0.0 <= stats["clip_fraction"] <= 1.0


def test_update_logs_the_last_minibatch_kl_beside_the_mean(monkeypatch):
    """``approx_kl`` is the mean over the minibatch steps (the first is about 0 in float32); the KL the update reached is
    the last step's, logged as ``approx_kl_last_minibatch``."""
    ac = _ac()
    st = _storage(ac, torch.tensor([1.0, -1.0]))
    ppo = PPO(ac, PPOConfig(actor_lr=3e-3, critic_lr=3e-3, epochs=4, minibatch_size=16, entropy_coef=0.0))
    kls = []
    step = ppo._step

    def recording_step(*args, **kw):
        out = step(*args, **kw)
        kls.append(out["approx_kl"].item())
        return out

    monkeypatch.setattr(ppo, "_step", recording_step)
    stats = ppo.update(st, torch.Generator().manual_seed(0))
    assert len(kls) == 16 and kls[0] < 1e-12  # 4 epochs of 64 samples in minibatches of 16; float32: ratio 1
    assert stats["approx_kl"] == pytest.approx(sum(kls) / len(kls))
    assert stats["approx_kl_last_minibatch"] == kls[-1]
    assert stats["approx_kl_last_minibatch"] > 2 * stats["approx_kl"]


def test_clipping_bounds_the_ratio_gradient():
    """With ratio beyond 1 + clip on positive advantages, the surrogate has no gradient."""
    ac = _ac()
    cfg = PPOConfig(actor_lr=1e-3, critic_lr=1e-3, clip=0.2, entropy_coef=0.0)
    ppo = PPO(ac, cfg)
    obs = torch.randn(8, 4)
    actions = ac.actor.net(obs).detach() + 0.3  # off the mean, where the log-prob has a gradient to cut
    log_probs, _, _, _ = ac.evaluate(obs, actions)
    old = log_probs.detach() - 1.0  # ratio = e > 1.2
    ppo.optimizer.zero_grad()
    stats = ppo._step(obs, actions, old, torch.ones(8), torch.zeros(8))
    assert stats["clip_fraction"].item() == 1.0
    assert stats["bounds_loss"].item() == 0.0  # means inside the bounds: no gradient from there either
    assert all(p.grad is None or p.grad.abs().max() == 0 for p in ac.actor.net.parameters())


def test_bounds_loss_pulls_means_back_inside():
    ac = _ac()
    with torch.no_grad():
        ac.actor.net[-1].bias.fill_(3.0)
    cfg = PPOConfig(actor_lr=1e-2, critic_lr=1e-3, epochs=1, minibatch_size=64, entropy_coef=0.0)
    st = _storage(ac, torch.zeros(2))
    st.advantages.zero_()  # no policy gradient: only the bounds loss moves the means
    stats = PPO(ac, cfg).update(st, torch.Generator().manual_seed(0))
    assert stats["bounds_loss"] == pytest.approx(2 * (3.0 - cfg.bound) ** 2, rel=0.05)
    assert ac.actor.net[-1].bias.max().item() < 3.0


def test_the_actor_lr_stays_fixed():
    ac = _ac()
    ppo = PPO(ac, PPOConfig(actor_lr=5e-2, critic_lr=1e-3, epochs=2, minibatch_size=16))
    ppo.update(_storage(ac, torch.tensor([1.0, -1.0])), torch.Generator().manual_seed(0))
    assert [g["lr"] for g in ppo.optimizer.param_groups] == [5e-2, 1e-3]


def test_bf16_forward_keeps_float32_outputs_close_to_the_float32_forward():
    from rgsd_agents.rl.networks import forward_mixed

    ac = _ac(obs_dim=64, act_dim=8)
    x = torch.randn(32, 64)
    exact = ac.actor.net(x)
    mixed = forward_mixed(ac.actor.net, x, bf16=True)
    assert mixed.dtype == torch.float32
    assert not torch.equal(mixed, exact)  # the hidden layers did run in bf16
    torch.testing.assert_close(mixed, exact, atol=2e-2, rtol=2e-2)
    mixed.sum().backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in ac.actor.net.parameters())


def _branch_ac() -> ActorCritic:
    torch.manual_seed(0)
    cfg = NetworkConfig(actor_hidden=(16,), critic_hidden=(16,), activation="relu", latent_branch=(8, 6))
    return ActorCritic(10, 2, cfg, latent=slice(6, 10))


def test_a_latent_branch_passes_only_the_latent_through_its_own_mlp_and_saves_as_a_policy_file(tmp_path):
    from rgsd_envs.runs.policy import LatentBranchMLP, load_policy

    ac = _branch_ac()
    net = ac.actor.net
    assert isinstance(net, LatentBranchMLP) and net.latent == slice(6, 10)
    assert [m.out_features for m in net.branch if isinstance(m, torch.nn.Linear)] == [8, 6, 4]
    assert net.branch[-1].weight.abs().max() > 0.5  # uniform in +-1, as ASE's and CALM's style layer
    x = torch.randn(5, 10)
    style = torch.tanh(net.branch(x[:, 6:]))  # ASE's and CALM's style: tanh of the branch, the latent's size
    torch.testing.assert_close(net(x), net.trunk(torch.cat([x[:, :6], style], -1)))
    changed = x.clone()
    changed[:, 6:] += 1.0
    assert not torch.equal(net(changed), net(x))  # the latent moves the action through the branch
    ac.set_mean_action(torch.tensor([0.3, -0.3]))
    ac.obs_normalizer.update(torch.randn(100, 10) * 3 + 1)
    ac.actor.save(tmp_path / "policy.pt")
    loaded = load_policy(tmp_path / "policy.pt")
    assert loaded.latent_branch == (8, 6) and loaded.latent == slice(6, 10)
    torch.testing.assert_close(loaded.act(x), ac.actor.act(x))


def test_a_latent_branch_trains_and_runs_under_bf16():
    from rgsd_agents.rl.networks import forward_mixed

    ac = _branch_ac()
    x = torch.randn(32, 10)
    torch.testing.assert_close(forward_mixed(ac.actor.net, x, bf16=True), ac.actor.net(x), atol=3e-2, rtol=3e-2)
    obs = torch.randn(8, 10)
    actions, log_probs, _ = ac.act(obs)
    ppo = PPO(ac, PPOConfig(actor_lr=1e-3, critic_lr=1e-3))
    ppo._step(obs, actions, log_probs, torch.ones(8), torch.zeros(8))
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in ac.actor.net.branch.parameters())


def test_critic_coef_weighs_the_squared_value_error_and_no_clip_leaves_gradients_whole():
    """loss = ... + critic_coef (V_n - R_n)^2 (ASE's and CALM's code: 5); max_grad_norm None clips nothing."""
    obs, returns = torch.randn(8, 4), torch.randn(8)
    grads = {}
    for coef, clip in ((0.5, None), (5.0, None), (5.0, 1e-3)):
        ac = _ac()
        ppo = PPO(ac, PPOConfig(critic_coef=coef, max_grad_norm=clip))
        actions, log_probs, _ = ac.act(obs, torch.Generator().manual_seed(0))
        with torch.no_grad():
            expected = float((ac.critic(obs).squeeze(-1) - returns).square().mean())
        stats = ppo._step(obs, actions, log_probs, torch.zeros(8), returns)
        assert float(stats["value_loss"]) == pytest.approx(expected, rel=1e-5)
        grads[coef, clip] = torch.cat([p.grad.flatten() for p in ac.critic.parameters()])
    torch.testing.assert_close(grads[5.0, None], 10.0 * grads[0.5, None])  # the critic's only loss is the value's
    assert float(grads[5.0, None].norm()) > 1e-2
    assert float(grads[5.0, 1e-3].norm()) == pytest.approx(1e-3, rel=1e-3)  # clipped to the norm asked for


def test_an_update_step_is_ppos_loss_written_out_by_hand():
    """One epoch of one minibatch: the reported losses and the gradients of every parameter equal those of the
    clipped surrogate on standardised advantages, the value error on standardised returns, the entropy bonus and the
    bounds loss on both sides, written here with torch.distributions."""
    ac = _ac(learn_std=True)
    with torch.no_grad():
        ac.actor.net[-1].bias.copy_(torch.tensor([1.6, -1.7]))  # some means beyond +bound, some beyond -bound
    t_len, n = 4, 8
    st = RolloutStorage(t_len, n, 4, 2, 0, 0)
    g = torch.Generator().manual_seed(3)
    for t in range(t_len):
        obs = torch.randn(n, 4, generator=g)
        a, lp, v = ac.act(obs, g)
        old = lp + 0.4 * torch.randn(n, generator=g)  # ratios inside and beyond the clip range, both ways
        st.add(obs, a, old, v, torch.randn(n, generator=g) + 1.0, torch.full((n,), float(t == 1)))
    st.compute_returns(torch.zeros(n), 0.99, 0.95)
    ref = copy.deepcopy(ac)
    cfg = PPOConfig(epochs=1, minibatch_size=t_len * n, clip=0.2, entropy_coef=0.1, critic_coef=0.5, max_grad_norm=None)
    stats = PPO(ac, cfg).update(st, torch.Generator().manual_seed(0))

    obs, actions, old = st.flat("obs"), st.flat("actions"), st.flat("log_probs")
    mean = ref.actor.net(obs)
    dist = torch.distributions.Normal(mean, ref.log_std.exp())
    ratio = (dist.log_prob(actions).sum(-1) - old).exp()
    adv = st.flat("advantages")
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    surrogate = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
    ref.value_normalizer.update(st.returns)
    value = (ref.critic(obs).squeeze(-1) - ref.value_normalizer.normalize(st.flat("returns"))).square().mean()
    entropy = dist.entropy().sum(-1).mean()
    bounds = (mean.abs() - cfg.bound).clamp_min(0).square().sum(-1).mean()
    (surrogate + 0.5 * value - 0.1 * entropy + BOUNDS_COEF * bounds).backward()

    assert 0.0 < stats["clip_fraction"] < 1.0 and stats["bounds_loss"] > 0.0
    for name, want in (
        ("policy_loss", surrogate),
        ("value_loss", value),
        ("entropy", entropy),
        ("bounds_loss", bounds),
    ):
        assert stats[name] == pytest.approx(float(want.detach()), rel=1e-5, abs=1e-7), name
    for (name, p), (_, q) in zip(ac.named_parameters(), ref.named_parameters(), strict=True):
        if q.grad is not None:
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6, msg=name)


class _ScriptedEnv:
    """Two worlds, three steps: at step 1 world 0 reaches its clip's end (truncated) and world 1 falls (terminated)."""

    device = torch.device("cpu")

    def __init__(self) -> None:
        self.t = 0

    def step(self, actions: torch.Tensor):
        term, trunc = torch.tensor([False, self.t == 1]), torch.tensor([self.t == 1, False])
        done = term | trunc
        final = torch.full((2, 4), 0.5 * (self.t + 1))
        final[1] *= -1.0
        self.t += 1
        extras = SimpleNamespace(done=done, done_host=done.numpy(), time_outs_host=trunc.numpy(), final_obs=final)
        return torch.where(done[:, None], torch.zeros(2, 4), final), torch.ones(2), term, trunc, extras


def test_a_rollout_bootstraps_the_truncated_step_with_gamma_v_of_its_final_state_and_not_the_terminated():
    ac = _ac()
    storage = RolloutStorage(3, 2, 4, 2, 0, 0)
    env = _ScriptedEnv()
    collect_rollout(env, ac, storage, torch.zeros(2, 4), torch.Generator().manual_seed(0), gamma=0.9, gae_lambda=0.95)
    with torch.no_grad():
        v_final = ac.value(torch.full((1, 4), 1.0) * (1.0 + ac.obs_normalizer.eps) ** -0.5).item()
    assert storage.dones[1].tolist() == [1.0, 1.0]
    assert storage.rewards[1, 0].item() == pytest.approx(1.0 + 0.9 * v_final, rel=1e-6)
    assert storage.rewards[1, 1].item() == 1.0  # a fall has no future value
    assert storage.rewards[0].tolist() == [1.0, 1.0] and storage.rewards[2].tolist() == [1.0, 1.0]
