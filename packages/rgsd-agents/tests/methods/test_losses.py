"""Each baseline's losses, rewards and latent rules against hand-computed values on tiny batches."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats
from torch import nn

from rgsd_agents.methods.ase import (
    ASEConfig,
    ASENetwork,
    ase_discriminator_loss,
    ase_encoder_loss,
    ase_reward,
    diversity_loss,
)
from rgsd_agents.methods.calm import (
    CALMConfig,
    ConditionalDiscriminator,
    alignment_loss,
    conditional_disc_loss,
    conditional_inputs,
    encoder_regularizer,
    uniformity_loss,
)
from rgsd_agents.methods.common import (
    FEATURE_DIM,
    LatentSchedule,
    discriminator_reward,
    gan_loss,
    gradient_penalty,
    transition_features,
    vmf_log_normalizer,
    vmf_log_prob,
)
from rgsd_agents.methods.metra import constraint_slack, metra_losses, metra_reward, state_pair
from rgsd_envs.envs.observations import FRAME_DIM, POLICY_OBS_DIM, SKILL_DIM
from rgsd_envs.humanoid import skeleton as sk

LN2, LN3, LN4 = math.log(2.0), math.log(3.0), math.log(4.0)


def test_vmf_log_prob_matches_scipy_and_the_uniform_density_at_kappa_zero():
    rng = np.random.default_rng(0)
    mu = rng.standard_normal((3, 16))
    mu /= np.linalg.norm(mu, axis=1, keepdims=True)
    z = rng.standard_normal((3, 16))
    z /= np.linalg.norm(z, axis=1, keepdims=True)
    for kappa in (0.5, 1.0, 10.0):
        ours = vmf_log_prob(torch.tensor(mu), torch.tensor(z), kappa).numpy()
        ref = [stats.vonmises_fisher(mu[i], kappa).logpdf(z[i]) for i in range(3)]
        np.testing.assert_allclose(ours, ref, rtol=1e-9)
    area = 2 * math.pi**8 / math.gamma(8)  # surface of the unit sphere in R^16
    assert vmf_log_normalizer(0.0) == pytest.approx(-math.log(area))
    assert vmf_log_normalizer(1e-8) == pytest.approx(-math.log(area), abs=1e-6)


def test_transition_features_are_the_last_frames_without_the_phase():
    frames = torch.arange(5, dtype=torch.float32).repeat_interleave(FRAME_DIM).view(1, -1)  # frame k holds k
    frames[0, 4 * FRAME_DIM] = -1.0  # the phase of the newest frame is dropped
    x = transition_features(frames, 2)
    assert x.shape == (1, 2 * FEATURE_DIM)
    assert torch.equal(x[0, :FEATURE_DIM], torch.full((FEATURE_DIM,), 3.0))
    assert torch.equal(x[0, FEATURE_DIM:], torch.full((FEATURE_DIM,), 4.0))
    with pytest.raises(ValueError, match="frames"):
        transition_features(frames, 6)


def test_gan_loss_and_discriminator_reward_by_hand():
    ref, pol = torch.tensor([0.0, LN3]), torch.tensor([0.0])
    # reference labelled 1: -log sigmoid(0) = ln 2, -log sigmoid(ln 3) = -log 0.75; policy labelled 0: ln 2
    expected = 0.5 * ((LN2 - math.log(0.75)) / 2 + LN2)
    assert float(gan_loss(pol, ref)) == pytest.approx(expected)
    # -log(1 - D): D = 0.5 -> ln 2, D = 0.75 -> ln 4, D -> 1 floored at 1 - D = 1e-4
    r = discriminator_reward(torch.tensor([0.0, LN3, 50.0]))
    np.testing.assert_allclose(r.numpy(), [LN2, LN4, -math.log(1e-4)], rtol=1e-6)


def test_standardize_clips_features_the_references_hold_nearly_constant():
    from rgsd_agents.methods.common import NORM_CLIP, Standardize

    norm = Standardize(2)
    norm.fit(torch.tensor([[0.0, 1.0], [0.0, 3.0]]))  # first feature constant: std floored at 1e-3
    out = norm(torch.tensor([[1.0, 2.0], [-1.0, 4.0]]))
    torch.testing.assert_close(out, torch.tensor([[NORM_CLIP, 0.0], [-NORM_CLIP, 2.0 / math.sqrt(2.0)]]))


def test_gradient_penalty_by_hand():
    w = torch.tensor([1.0, -2.0, 3.0])
    x = torch.randn(4, 3, requires_grad=True)
    assert float(gradient_penalty(x @ w + 0.5, x).detach()) == pytest.approx(14.0)  # ||w||^2 for every sample
    x = torch.tensor([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]], requires_grad=True)
    # D = sum x^2: gradient 2x, squared norms 4 and 16
    assert float(gradient_penalty(x.square().sum(-1), x).detach()) == pytest.approx(10.0)


def _constant_ase_net(logit: float, mu_axis: int) -> ASENetwork:
    """Trunk output fixed at 1 (zero weights, bias 1), so the heads' biases set the logit and mu."""
    net = ASENetwork(4, (3,), skill_dim=16)
    with torch.no_grad():
        for p in net.parameters():
            p.zero_()
        net.trunk.net[-1].bias.fill_(1.0)
        net.disc.bias.fill_(logit)
        net.enc.bias[mu_axis] = 1.0
    return net


def test_ase_reward_is_minus_log_one_minus_d_plus_beta_clamped_log_q():
    cfg = ASEConfig(kappa=2.0, disc_weight=1.0, beta=0.5)
    net = _constant_ase_net(LN3, mu_axis=0)
    z = torch.zeros(2, 16)
    z[0, 0], z[1, 0] = 1.0, -1.0  # aligned with mu, opposite to it
    reward, disc, enc = ase_reward(net, torch.randn(2, 4), z, cfg)
    np.testing.assert_allclose(disc.numpy(), [LN4, LN4], rtol=1e-6)
    np.testing.assert_allclose(enc.numpy(), [2.0, 0.0])  # kappa mu^T z, clamped at 0
    np.testing.assert_allclose(reward.numpy(), [LN4 + 1.0, LN4], rtol=1e-6)


def test_ase_encoder_loss_is_minus_kappa_mean_cosine_and_its_step_aligns_mu_with_the_latents():
    net = _constant_ase_net(0.0, mu_axis=0)
    z = torch.zeros(2, 16)
    z[0, 0], z[1, 1] = 1.0, 1.0  # one latent along mu, one orthogonal to it
    x = torch.randn(2, 4)
    loss = ase_encoder_loss(net, x, z, kappa=2.0)
    assert loss.item() == pytest.approx(-2.0 * (1.0 + 0.0) / 2)
    loss.backward()
    with torch.no_grad():
        net.enc.bias -= 0.1 * net.enc.bias.grad  # a gradient step turns mu towards the latents' mean
    assert net.mu(x)[0, 1].item() > 0.05 and ase_encoder_loss(net, x, z, kappa=2.0).item() < loss.item()


def test_ase_discriminator_loss_adds_penalty_logit_regulariser_and_weight_decay():
    torch.manual_seed(0)
    cfg = ASEConfig(grad_penalty=5.0, logit_reg=0.01, weight_decay=1e-4)
    net = ASENetwork(4, (8, 6))
    net.trunk.norm.fit(3.0 * torch.randn(50, 4) + 1.0)
    pol, ref = torch.randn(5, 4), torch.randn(5, 4)
    loss, parts = ase_discriminator_loss(net, pol, ref, cfg)
    # the penalty is on the standardised reference samples (as ASE normalises before its discriminator)
    ref_n = ((ref - net.trunk.norm.mean) / net.trunk.norm.std).requires_grad_(True)
    gp = gradient_penalty(net.logits_standardized(ref_n), ref_n)
    # weight decay on the trunk's and the logit head's weights; the encoder head has none (ASE: enc_weight_decay 0)
    decayed = [*(m for m in net.trunk.modules() if isinstance(m, nn.Linear)), net.disc]
    decay = sum(m.weight.square().sum() for m in decayed)
    expected = gan_loss(net.logits(pol), net.logits(ref)) + 5.0 * gp + 0.01 * net.disc.weight.square().sum()
    assert float(loss.detach()) == pytest.approx(float((expected + 1e-4 * decay).detach()), rel=1e-6)
    assert float(parts["grad_penalty"]) == pytest.approx(float(gp.detach()), rel=1e-6) and float(gp.detach()) > 0
    loss.backward()
    assert net.enc.weight.grad is None  # nothing in the discriminator's loss reaches the encoder head


def test_ase_diversity_loss_by_hand():
    actor = nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        actor.weight.copy_(torch.tensor([[0.0, 2.0]]))
    obs, other = torch.tensor([[0.0, 1.0]]), torch.tensor([[0.0, 0.0]])
    z, z2 = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])  # orthogonal: (1 - z^T z') / 2 = 0.5
    # a_diff = (0 - 2)^2 = 4; bonus = 4 / (0.5 + 1e-5); loss = (1 - bonus)^2
    expected = (1.0 - 4.0 / (0.5 + 1e-5)) ** 2
    assert float(diversity_loss(actor, obs, other, z, z2, 1.0).detach()) == pytest.approx(expected, rel=1e-6)


def test_ase_diversity_loss_is_off_by_default_and_sees_the_sample_s_latent_and_a_new_one(monkeypatch):
    import rgsd_agents.methods.ase as ase_module
    from rgsd_agents.config import NetworkConfig
    from rgsd_agents.methods import build_method
    from rgsd_agents.methods.base import MethodContext
    from rgsd_agents.methods.common import ReferenceData
    from rgsd_agents.rl.networks import ActorCritic

    assert ASEConfig().diversity_coef == 0.0
    ref = ReferenceData(torch.randn(20, 5 * FRAME_DIM), torch.zeros(20, dtype=torch.long), torch.tensor([0]),
                        torch.tensor([20]))  # fmt: skip
    ac = ActorCritic(POLICY_OBS_DIM, sk.NUM_DOFS, NetworkConfig(actor_hidden=(8,), critic_hidden=(8,)))
    with torch.no_grad():
        ac.obs_normalizer.mean.normal_()
        ac.obs_normalizer.var.uniform_(0.5, 2.0)
    off = build_method("ase", {"hidden": [8]}, MethodContext(ref, 2, torch.device("cpu"), 0))
    assert off.policy_loss(ac, torch.zeros(3, POLICY_OBS_DIM)) == (None, {})
    on = build_method("ase", {"hidden": [8], "diversity_coef": 0.01}, MethodContext(ref, 2, torch.device("cpu"), 0))
    seen = []

    def spy(actor, obs, other, z, z_other, target):
        seen.append((z, z_other))
        return diversity_loss(actor, obs, other, z, z_other, target)

    monkeypatch.setattr(ase_module, "diversity_loss", spy)
    z = nn.functional.normalize(torch.randn(3, 16), dim=-1)
    norm = ac.obs_normalizer
    raw = torch.cat([torch.randn(3, FRAME_DIM), z], -1)
    obs_n = ((raw - norm.mean) / (norm.var + norm.eps).sqrt()).float()
    term, stats = on.policy_loss(ac, obs_n)
    z_seen, z_other = seen[0]
    torch.testing.assert_close(z_seen, z)  # the sample's own latent, recovered through the normaliser
    torch.testing.assert_close(z_other.norm(dim=-1), torch.ones(3))
    assert float(term.detach()) == pytest.approx(0.01 * float(stats["diversity_loss"]))
    term.backward()
    assert ac.actor.net[0].weight.grad.abs().sum() > 0


def test_latent_schedule_holds_latents_for_the_drawn_steps_and_restarts_with_episodes():
    sched = LatentSchedule(2, 3, 3, torch.Generator().manual_seed(0))
    none = torch.zeros(2, dtype=torch.bool)
    masks = [sched.tick(none).tolist() for _ in range(3)]
    assert masks == [[False, False], [False, False], [True, True]]
    sched.tick(torch.tensor([True, False]))  # world 0 starts an episode: a fresh hold of 3
    assert sched.left.tolist() == [3, 2]
    assert sched.tick(none).tolist() == [False, False] and sched.tick(none).tolist() == [False, True]
    sched = LatentSchedule(1000, 1, 150, torch.Generator().manual_seed(0))
    assert sched.left.min() >= 1 and sched.left.max() <= 150 and sched.left.float().std() > 30


def test_calm_alignment_and_uniformity_by_hand():
    e1, e2 = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])
    assert float(alignment_loss(e1, e2)) == pytest.approx(2.0)
    assert float(alignment_loss(e1, e1)) == 0.0
    # two orthogonal unit vectors: squared distance 2, log exp(-2 * 2) = -4
    assert float(uniformity_loss(torch.cat([e1, e2]))) == pytest.approx(-4.0)
    three = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]])  # squared distances 4, 2, 2
    expected = math.log((math.exp(-8) + 2 * math.exp(-4)) / 3)
    assert float(uniformity_loss(three)) == pytest.approx(expected, rel=1e-6)


def test_calm_uniformity_compares_only_the_first_uniformity_rows():
    """The pairwise term's memory grows with the square of its rows: it takes the first ``uniformity_rows``."""
    z = torch.nn.functional.normalize(torch.randn(40, 4, generator=torch.Generator().manual_seed(0)), dim=-1)
    cfg = CALMConfig(uniformity_rows=16)
    _, stats = encoder_regularizer(z, z, cfg)
    assert float(stats["uniformity"]) == pytest.approx(float(uniformity_loss(z[:16])), rel=1e-6)
    assert float(stats["uniformity"]) != pytest.approx(float(uniformity_loss(z)), rel=1e-3)


def test_calm_encoder_regularizer_is_a_tenth_of_alignment_plus_half_uniformity_by_hand():
    z = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    z_near = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    # alignment: (0 + 2) / 2 = 1; uniformity: one pair at squared distance 2, log exp(-4) = -4
    loss, stats = encoder_regularizer(z, z_near, CALMConfig())
    assert float(stats["alignment"]) == pytest.approx(1.0)
    assert float(stats["uniformity"]) == pytest.approx(-4.0)
    assert float(loss) == pytest.approx(0.1 * (1.0 + 0.5 * -4.0))
    loss, _ = encoder_regularizer(z, z_near, CALMConfig(encoder_reg=2.0, uniformity_weight=1.0))
    assert float(loss) == pytest.approx(2.0 * (1.0 - 4.0))


def test_calm_conditional_discriminator_sees_transition_then_latent_and_penalises_only_the_transition():
    assert torch.equal(conditional_inputs(torch.ones(1, 2), torch.zeros(1, 3)), torch.tensor([[1.0, 1, 0, 0, 0]]))
    # no latent branch, identity standardisation; the logit reads the transition and the latent's first number
    disc = ConditionalDiscriminator(2, (), ())
    with torch.no_grad():
        disc.net[0].weight.copy_(torch.tensor([[1.0, 2.0, 3.0] + [0.0] * (SKILL_DIM - 1)]))
        disc.net[0].bias.zero_()
    cfg = CALMConfig(grad_penalty=1.0, logit_reg=0.0, weight_decay=0.0)
    e = torch.eye(SKILL_DIM)
    ref_x, ref_z = torch.tensor([[0.0, 0.0]]), e[:1].clone().requires_grad_(True)
    pol_x, pol_z = torch.tensor([[0.0, 0.0]]), e[1:2].clone().requires_grad_(True)
    loss, stats = conditional_disc_loss(disc, pol_x, pol_z, ref_x, ref_z, cfg)
    # reference logit 3 (its latent's first number x 3), policy logit 0; the penalty sees d logit / d x = (1, 2)
    # only (CALM's), not the latent's 3
    expected_gan = 0.5 * (math.log1p(math.exp(-3.0)) + LN2)
    assert float(stats["disc_loss"]) == pytest.approx(expected_gan, rel=1e-6)
    assert float(stats["grad_penalty"]) == pytest.approx(1.0 + 4.0)
    assert float(loss.detach()) == pytest.approx(expected_gan + 5.0, rel=1e-6)
    loss.backward()
    assert ref_z.grad is None and pol_z.grad is None  # no term here trains the encoder


def test_calm_conditional_discriminator_joins_its_latent_through_the_branch_as_calm_s_style_mlp():
    torch.manual_seed(0)
    disc = ConditionalDiscriminator(3, (8,), (6, 5))
    x, z = torch.randn(4, 3), torch.nn.functional.normalize(torch.randn(4, SKILL_DIM), dim=-1)
    style = torch.tanh(disc.branch(z))  # ReLU 6, 5 -> 16 numbers, tanh
    # (NVlabs/CALM calm/learning/calm_network_builder.py:389-393)
    assert [m.out_features for m in disc.branch if isinstance(m, nn.Linear)] == [6, 5, SKILL_DIM]
    torch.testing.assert_close(disc(x, z), disc.net(torch.cat([disc.norm(x), style], -1)).squeeze(-1))
    # weight decay covers the branch as CALM's covers its whole conditional MLP
    assert len([m for m in disc.modules() if isinstance(m, nn.Linear)]) == 5


def test_metra_state_pair_is_the_second_newest_frame_then_the_newest_without_the_phase():
    frames = 1000.0 * torch.arange(5.0)[:, None] + torch.arange(float(FRAME_DIM))  # frame k, column j: 1000 k + j
    s, s_next = state_pair(frames.reshape(1, -1).expand(3, -1))
    columns = torch.arange(1.0, FRAME_DIM)  # every column but the phase (column 0)
    torch.testing.assert_close(s, (3000.0 + columns).expand(3, -1))
    torch.testing.assert_close(s_next, (4000.0 + columns).expand(3, -1))


def test_metra_reward_and_constraint_by_hand():
    phi = nn.Identity()
    s, s2 = torch.tensor([[0.0, 0.0], [1.0, 1.0]]), torch.tensor([[0.5, 0.0], [1.0, 3.0]])
    z = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    np.testing.assert_allclose(metra_reward(phi, s, s2, z).numpy(), [0.5, 2.0])
    # ||delta||^2 = 0.25 -> min(1e-3, 0.75) = 1e-3; ||delta||^2 = 4 -> -3 (violated)
    np.testing.assert_allclose(constraint_slack(s2 - s, 1e-3).numpy(), [1e-3, -3.0], rtol=1e-6)


def test_metra_dual_update_raises_lambda_while_the_constraint_is_violated_and_lowers_it_otherwise():
    phi = nn.Identity()
    s, z = torch.zeros(2, 2), torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    violated = torch.tensor([[0.5, 0.0], [0.0, 2.0]])  # slacks 1e-3 and -3: mean -1.4995
    log_lam = torch.tensor(math.log(30.0), requires_grad=True)
    phi_loss, dual_loss, parts = metra_losses(phi, log_lam, s, violated, z, 1e-3)
    objective = (0.5 + 2.0) / 2
    assert float(phi_loss.detach()) == pytest.approx(-(objective + 30.0 * (1e-3 - 3.0) / 2), rel=1e-6)
    dual_loss.backward()
    assert float(log_lam.grad) == pytest.approx((1e-3 - 3.0) / 2, rel=1e-6)
    opt = torch.optim.SGD([log_lam], lr=0.1)
    opt.step()
    assert float(log_lam.detach()) == pytest.approx(math.log(30.0) + 0.1 * (3.0 - 1e-3) / 2, rel=1e-6)  # lambda grew
    assert float(parts["dual_lambda"]) == pytest.approx(30.0)
    log_lam = torch.tensor(0.0, requires_grad=True)
    _, dual_loss, _ = metra_losses(phi, log_lam, s, 0.1 * z, z, 1e-3)  # holds with slack: lambda shrinks
    dual_loss.backward()
    assert float(log_lam.grad) == pytest.approx(1e-3)
