"""Discovery encoder loss: -log q(z|s') on discovery samples, alpha * KL to the frozen encoder on imitation samples."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import torch

from rgsd_agents.methods.discovery import DiscoveryConfig, DiscoveryTrainer, discovery_loss
from rgsd_agents.methods.rgsd import RGSD
from rgsd_agents.rl.storage import RolloutStorage
from rgsd_envs.envs.observations import ENCODER_INPUT_DIM, SKILL_DIM
from rgsd_envs.envs.skills import vmf_kl_same_kappa
from rgsd_envs.rewards.encoders import MLPEncoder


def _encoders(seed=0):
    torch.manual_seed(seed)
    frozen = MLPEncoder((32,), kappa=10.0).requires_grad_(False)
    return copy.deepcopy(frozen).requires_grad_(True), frozen


def _batch(n=64, p_imitation=0.5, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, ENCODER_INPUT_DIM, generator=g)
    z = torch.nn.functional.normalize(torch.randn(n, SKILL_DIM, generator=g), dim=-1)
    c = (torch.rand(n, generator=g) < p_imitation).float()
    return x, z, c


def test_loss_is_the_papers_per_sample_formula():
    trainable, frozen = _encoders()
    with torch.no_grad():
        trainable.net[0].weight.add_(0.05)  # make the KL term non-zero
    x, z, c = _batch()
    loss, stats = discovery_loss(trainable, frozen, x, z, c, kappa=10.0, alpha=0.5)
    with torch.no_grad():
        nll = -10.0 * (trainable(x) * z).sum(-1)
        kl = vmf_kl_same_kappa(trainable(x), frozen(x), 10.0)
        expected = ((1 - c) * nll + 0.5 * c * kl).mean()
    torch.testing.assert_close(loss, expected)
    assert stats["kl_to_frozen"][0] > 0 and stats["kl_to_frozen"][1] == (c > 0.5).sum()


def test_kl_term_vanishes_for_an_unchanged_copy():
    trainable, frozen = _encoders()
    x, z, _ = _batch()
    loss, stats = discovery_loss(trainable, frozen, x, z, torch.ones(len(x)), kappa=10.0, alpha=0.5)
    assert abs(stats["kl_to_frozen"][0].item()) < 1e-5
    assert abs(loss.item()) < 1e-5


def test_update_raises_skill_likelihood_on_discovery_samples_and_leaves_frozen_alone():
    trainable, frozen = _encoders()
    frozen_before = copy.deepcopy(frozen.state_dict())
    x, z, _ = _batch(n=64)
    st = RolloutStorage(4, 16, 1, 1, SKILL_DIM, ENCODER_INPUT_DIM)
    st.encoder_inputs.copy_(x.view(4, 16, -1))
    st.skills.copy_(z.view(4, 16, -1))
    st.tasks.zero_()  # all discovery
    st.step = 4
    with torch.no_grad():
        before = (trainable(x) * z).sum(-1).mean().item()
    trainer = DiscoveryTrainer(trainable, frozen, 10.0, DiscoveryConfig(lr=1e-3, epochs=20, minibatch_size=64))
    stats = trainer.update(st, torch.Generator().manual_seed(0))
    with torch.no_grad():
        after = (trainable(x) * z).sum(-1).mean().item()
    assert after > before + 0.1
    assert "kl_to_frozen" not in stats  # no imitation samples: the term is left out, not NaN
    for k, v in frozen.state_dict().items():
        assert torch.equal(v, frozen_before[k])


def test_the_discovery_encoder_updates_on_the_first_rollout_and_every_update_every_th_after():
    updated: list[int] = []
    optimizer = SimpleNamespace(param_groups=[{"lr": 1e-4}])
    method = SimpleNamespace(
        iteration=0,
        cfg=SimpleNamespace(update_every=3),
        trainer=SimpleNamespace(
            optimizer=optimizer, update=lambda storage, gen: updated.append(method.iteration) or {}
        ),
        sync_env_encoder=lambda: None,
    )
    for _ in range(7):
        RGSD.update(method, None, None)
    assert [i - 1 for i in updated] == [0, 3, 6]  # the count has moved on when the trainer runs
