"""FB-CPR (Meta Motivo): its losses against hand-computed values, B's sphere, the z mix, the replay buffer, and
the off-policy runner (a seeded run, its exports for rgsd eval, exact resume)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from rgsd_agents import methods
from rgsd_agents.config import MethodConfig, TrainConfig
from rgsd_agents.methods import fb_cpr
from rgsd_agents.methods.fb_cpr import (
    BackwardMap,
    ExpertWindows,
    FBCPRConfig,
    actor_loss,
    critic_td_loss,
    discriminator_loss,
    discriminator_reward,
    ensemble_pessimism,
    fb_q_loss,
    fb_td_loss,
    mix_z,
    noisy_action,
    orthonormality_loss,
    relabel,
    tracking_inference,
    uniform_z,
    wgan_gradient_penalty,
    window_latents,
)
from rgsd_agents.probe import ImitationProbe
from rgsd_agents.rl.networks import NetworkConfig
from rgsd_agents.rl.replay import ReplayBuffer
from rgsd_agents.testing import assert_same_tensors, reproducible, tiny_options, tiny_train_config
from rgsd_agents.training.offpolicy import OffPolicyRunner
from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.observations import FRAME_DIM, POLICY_OBS_DIM
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.runs.policy import load_policy
from rgsd_envs.runs.run_dir import RunDir, load_clip_latents, load_tracking_latents

T = torch.tensor


# -- losses ------------------------------------------------------------------------------------
def test_fb_td_loss_matches_the_hand_computed_value():
    Fs = T([[[1.0, 0.0], [0.0, 1.0]]])  # one member, F(s_0) = e1, F(s_1) = e2
    B = T([[1.0, 0.0], [1.0, 1.0]])
    target_M = T([[0.5, 0.0], [0.0, 1.0]])
    discount = T([[0.5], [1.0]])
    # M = F B^T = [[1, 1], [0, 1]]; diff = M - discount_i target_M = [[0.75, 1], [0, 0]]
    # off-diagonal: 0.5 * (1^2 + 0^2) / 2 = 0.25; diagonal: -(0.75 + 0) / 2 = -0.375
    loss, stats = fb_td_loss(Fs, B, target_M, discount)
    assert loss.item() == pytest.approx(-0.125)
    assert stats["fb_offdiag"].item() == pytest.approx(0.25) and stats["fb_diag"].item() == pytest.approx(-0.375)
    # an ensemble sums its members' losses
    loss2, _ = fb_td_loss(Fs.expand(2, -1, -1), B, target_M, discount)
    assert loss2.item() == pytest.approx(-0.25)


def test_orthonormality_loss_matches_the_hand_computed_value_and_is_lowest_for_orthonormal_rows():
    # cov = B B^T = [[1, 0, 1], [0, 1, 1], [1, 1, 2]]: off-diagonal 0.5 * 4 / 6, diagonal mean 4 / 3
    B = T([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert orthonormality_loss(B).item() == pytest.approx(0.5 * 4 / 6 - 4 / 3)
    assert orthonormality_loss(torch.eye(3)).item() == pytest.approx(-1.0)
    assert orthonormality_loss(T([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [0.0, 0.0, 1.0]])).item() > -1.0


def test_fb_q_loss_matches_the_hand_computed_value():
    # cov(B) = B^T B / 2 = I / 2, so the implicit reward is 2 B.z = [2, 2]; next Q = target_F.z = [1, 2];
    # targets [2 + 0.5 * 1, 2 + 1 * 2] = [2.5, 4]; Q = F.z = [1, 2]: 0.5 * 1 * ((1.5^2 + 2^2) / 2)
    B = T([[1.0, 0.0], [0.0, 1.0]])
    z = T([[1.0, 0.0], [1.0, 1.0]])
    Fs = T([[[1.0, 0.0], [1.0, 1.0]]])
    target_Fs = T([[[1.0, 1.0], [0.0, 2.0]]])
    assert fb_q_loss(Fs, target_Fs, B, z, T([[0.5], [1.0]])).item() == pytest.approx(0.5 * (2.25 + 4.0) / 2)


def test_fb_q_loss_combines_the_target_ensemble_with_the_fb_pessimism():
    # metamotivo/fb/agent.py:219-220: next_Q = get_targets_uncertainty(target F^T z, fb_pessimism_penalty)
    B, z = T([[1.0, 0.0], [0.0, 1.0]]), T([[1.0, 0.0], [1.0, 1.0]])
    Fs = T([[[1.0, 0.0], [1.0, 1.0]], [[1.0, 0.0], [1.0, 1.0]]])  # Q = [1, 2] for both members
    target_Fs = T([[[1.0, 1.0], [0.0, 2.0]], [[3.0, 0.0], [0.0, 4.0]]])  # next Q [1, 2] and [3, 4]: spread 2
    discount = T([[0.5], [1.0]])
    # penalty 0.5: next Q = mean - 0.5 * spread = the minimum [1, 2]; targets [2 + 0.5, 2 + 2] = [2.5, 4]
    pess = fb_q_loss(Fs, target_Fs, B, z, discount, pessimism=0.5)
    assert pess.item() == pytest.approx(0.5 * 2 * (2.25 + 4.0) / 2)
    # penalty 0: the mean [2, 3]; targets [3, 5]; errors 2 and 3
    assert fb_q_loss(Fs, target_Fs, B, z, discount).item() == pytest.approx(0.5 * 2 * (4.0 + 9.0) / 2)


def test_ensemble_pessimism_of_two_members_with_penalty_half_is_their_minimum():
    preds = T([[1.0, 5.0, -2.0], [3.0, 4.0, -1.0]])
    mean, spread, pess = ensemble_pessimism(preds, 0.5)
    torch.testing.assert_close(mean, T([2.0, 4.5, -1.5]))
    torch.testing.assert_close(spread, T([2.0, 1.0, 1.0]))
    torch.testing.assert_close(pess, preds.min(0).values)


def test_actor_loss_matches_the_hand_computed_value_and_its_scale_carries_no_gradient():
    Qs_disc = T([[[1.0], [3.0]], [[2.0], [1.0]]])  # pessimistic (min): [1, 1]
    Qs_fb = T([[2.0, -4.0], [4.0, -2.0]], requires_grad=True)  # min: [2, -4], mean -1, mean |.| 3
    loss, stats = actor_loss(Qs_disc, Qs_fb, reg_coeff=0.01, pessimism=0.5)
    assert loss.item() == pytest.approx(-1.0 * 0.01 * 3.0 + 1.0)
    assert stats["Q_fb"].item() == pytest.approx(-1.0) and stats["Q_discriminator"].item() == pytest.approx(1.0)
    loss.backward()  # only -mean(Q_fb) through the minimum (member 0) reaches Q_fb
    torch.testing.assert_close(Qs_fb.grad, T([[-0.5, -0.5], [0.0, 0.0]]))
    unscaled, _ = actor_loss(Qs_disc, Qs_fb.detach(), reg_coeff=0.01, pessimism=0.5, scale_reg=False)
    assert unscaled.item() == pytest.approx(-0.01 + 1.0)


def test_discriminator_loss_and_its_gradient_penalty_match_hand_computed_values():
    bce = discriminator_loss(T([[2.0]]), T([[-1.0]]))
    assert bce.item() == pytest.approx(math.log1p(math.exp(-2.0)) + math.log1p(math.exp(-1.0)))

    # D(s, z) = 0.5 |(s, z)|^2 has gradient (s, z): the penalty is (|x| - 1)^2 at the interpolate x
    def quadratic(s, z):
        return 0.5 * (s.square().sum(-1, keepdim=True) + z.square().sum(-1, keepdim=True))

    expert = (T([[2.0, 0.0], [3.0, 0.0]]), T([[0.0, 0.0], [0.0, 0.0]]))
    replay = (T([[0.0, 0.0], [0.0, 0.0]]), T([[0.0, 2.0], [0.0, 0.0]]))
    alpha = T([[0.5], [1.0]])  # x = (1, 0, 0, 1) and (3, 0, 0, 0)
    gp = wgan_gradient_penalty(quadratic, expert, replay, alpha)
    assert gp.item() == pytest.approx(((math.sqrt(2.0) - 1.0) ** 2 + (3.0 - 1.0) ** 2) / 2)


def test_critic_td_loss_and_the_discriminator_reward():
    Qs = T([[[1.0], [2.0]], [[3.0], [2.0]]])
    # 0.5 * 2 members * mean of squared errors (0, 1, 4, 1)
    assert critic_td_loss(Qs, T([[1.0], [1.0]])).item() == pytest.approx(1.5)
    logits = T([[-3.0], [0.0], [0.7], [40.0]])
    reward = discriminator_reward(logits)
    torch.testing.assert_close(reward[:3], logits[:3], atol=1e-5, rtol=1e-5)  # log D - log(1 - D) is the logit
    d = torch.tensor(1 - 1e-7)  # D clamped to 1 - 1e-7 (float32: 1 - 1.19e-7)
    assert reward[3].item() == pytest.approx((d.log() - (1 - d).log()).item())


def test_noisy_actions_stay_in_the_box_and_pass_gradients_straight_through():
    mean = T([[0.95, -0.2, 0.0]], requires_grad=True)
    g = torch.Generator().manual_seed(0)
    a = noisy_action(mean.expand(1000, -1), 0.2, 0.3, g)
    assert a.abs().max() < 1.0 and (a - mean).abs().max() <= 0.3 + 1e-6
    a.sum().backward()
    torch.testing.assert_close(mean.grad, torch.full((1, 3), 1000.0))


# -- the latents ---------------------------------------------------------------------------------
def test_backward_map_outputs_lie_on_the_sphere_of_radius_sqrt_d():
    torch.manual_seed(0)
    b = BackwardMap(FRAME_DIM, 16, 32, 1)
    out = b(torch.randn(50, FRAME_DIM) * 3)
    torch.testing.assert_close(out.norm(dim=-1), torch.full((50,), 4.0))
    torch.testing.assert_close(uniform_z(50, 16, torch.Generator().manual_seed(1)).norm(dim=-1), torch.full((50,), 4.0))
    assert [type(m).__name__ for m in b.net] == ["Linear", "LayerNorm", "Tanh", "Linear"]


def test_the_z_mix_draws_goals_experts_and_uniform_latents_in_its_shares():
    n, g = 40000, torch.Generator().manual_seed(0)
    sources = [torch.full((n, 16), float(v)) for v in (1, 2, 3)]
    z = mix_z(*sources, (0.2, 0.6, 0.2), g)
    shares = [(z[:, 0] == v).float().mean().item() for v in (1, 2, 3)]
    assert shares == pytest.approx([0.2, 0.6, 0.2], abs=0.01)
    assert all(((z == s).all(-1) | (z != s).all(-1)).all() for s in sources)  # rows are whole latents
    kept = relabel(torch.zeros(n, 16), torch.ones(n, 16), 0.8, g)
    assert (kept[:, 0] == 1).float().mean().item() == pytest.approx(0.8, abs=0.01)


def test_expert_windows_are_consecutive_frames_of_one_clip_and_their_z_is_b_averaged():
    features = torch.arange(30, dtype=torch.float32).unsqueeze(-1).expand(-1, 3)
    starts, num_frames = T([0, 10]), T([10, 20])
    windows = ExpertWindows(features, starts, num_frames, seq_length=4)
    out = windows.sample(4 * 500, torch.Generator().manual_seed(0))
    frame = out["obs"][:, 0].view(500, 4)
    assert torch.equal(frame[:, 1:] - frame[:, :-1], torch.ones(500, 3))
    assert torch.equal(out["next_obs"][:, 0], out["obs"][:, 0] + 1)
    nxt = out["next_obs"][:, 0].view(500, 4)
    in_first = nxt[:, -1] <= 9
    assert (in_first | (frame[:, 0] >= 10)).all()  # no window crosses from clip 0 into clip 1
    assert ((frame[:, 0] < 10).float().mean() - 0.5).abs() < 0.07  # clips drawn uniformly, not by length
    with pytest.raises(ValueError, match="fewer than seq_length"):
        ExpertWindows(features, starts, num_frames, seq_length=10)
    B = T([[1.0, 0.0], [0.0, 1.0], [3.0, 0.0], [3.0, 0.0]])
    z = window_latents(B, 2)  # windows: mean (0.5, 0.5) -> norm sqrt 2; mean (3, 0)
    s2 = math.sqrt(2.0)
    torch.testing.assert_close(z, T([[1.0, 1.0], [1.0, 1.0], [s2, 0.0], [s2, 0.0]]))


def test_tracking_inference_gives_each_step_the_projected_mean_of_b_over_the_next_window():
    # B of the next states o_1 .. o_4 (d = 2, window 2): step t averages rows t and t + 1, the last step row 3 alone
    B_next = T([[2.0, 0.0], [0.0, 2.0], [0.0, -2.0], [1.0, 0.0]])
    s2 = math.sqrt(2.0)
    # means (1, 1), (0, 0) -> projected onto the sphere of radius sqrt(2) (a zero mean stays 0), (0.5, -1), (1, 0)
    expected = T([[1.0, 1.0], [0.0, 0.0], [0.5, -1.0], [1.0, 0.0]])
    expected = s2 * torch.nn.functional.normalize(expected, dim=-1)
    torch.testing.assert_close(tracking_inference(B_next, 2), expected)
    # metamotivo/fb/model.py:154-159, its loop as written: z[t] = z[t : min(t + L, T)].mean(), then project_z
    z = B_next.clone()
    for t in range(z.shape[0]):
        z[t] = z[t : min(t + 2, z.shape[0])].mean(0)
    torch.testing.assert_close(tracking_inference(B_next, 2), s2 * torch.nn.functional.normalize(z, dim=-1))
    # a window longer than the clip averages to its end
    torch.testing.assert_close(
        tracking_inference(B_next, 8)[0], s2 * torch.nn.functional.normalize(B_next.mean(0), dim=0)
    )


def test_the_agents_tracking_latents_start_from_the_frame_after_each_step():
    # metamotivo README.md:235-242: ctx = tracking_inference(next_obs=observation[1:]); step t acts with ctx[t]
    cfg = FBCPRConfig(
        **{k: v for k, v in tiny_options(fb_cpr.NAME).items() if k not in ("loop", "batch_size")},
        batch_size=33,
        seq_length=3,
    )
    agent = fb_cpr.FBCPRAgent(cfg, sk.NUM_DOFS, (16,), "relu", "cpu", seed=0)
    frames = torch.randn(6, FRAME_DIM)
    z = agent.tracking_latents(frames)
    assert z.shape == (5, 16)
    with torch.no_grad():
        B = agent.backward_map(agent.normalize(frames))
    torch.testing.assert_close(z[0], fb_cpr.project_z(B[1:4].mean(0)))
    torch.testing.assert_close(z[4], fb_cpr.project_z(B[5:6].mean(0)))


def test_the_update_sees_the_latent_as_the_worlds_actor_does_beyond_the_normalisers_clip():
    # z_dim 64: a latent of norm 8 may have components beyond the actor normaliser's clip (5)
    options = {k: v for k, v in tiny_options(fb_cpr.NAME).items() if k != "loop"}
    agent = fb_cpr.FBCPRAgent(FBCPRConfig(**{**options, "z_dim": 64}), sk.NUM_DOFS, (16,), "relu", "cpu", seed=0)
    s = torch.randn(4, FRAME_DIM)
    z = torch.zeros(4, 64)
    z[:, 0], z[:, 1], z[:, 2] = 6.0, -4.0, 3.0  # norm sqrt(d) = 8 (36 + 16 + 9 + 3 x 1), one component beyond +-5
    z[:, 3:6] = 1.0
    with torch.no_grad():
        rollout, update = agent.mean_action(s, z), agent.mean_action_n(agent.normalize(s), z)
        unclipped = torch.tanh(agent.actor.net(torch.cat([agent.normalize(s), z], -1)))
    torch.testing.assert_close(update, rollout)
    assert (update - unclipped).abs().max() > 1e-3  # the clip acts here


# -- the replay buffer ----------------------------------------------------------------------------
def _buffer(capacity: int = 5) -> ReplayBuffer:
    return ReplayBuffer(capacity, {"x": ((2,), torch.float32), "done": ((), torch.bool)}, "cpu")


def _rows(start: int, n: int) -> dict[str, torch.Tensor]:
    x = torch.arange(start, start + n, dtype=torch.float32).unsqueeze(-1).expand(-1, 2)
    return {"x": x, "done": torch.arange(start, start + n) % 2 == 0}


def test_replay_buffer_is_a_ring_sampled_uniformly_over_its_filled_rows():
    buf = _buffer()
    buf.add(**_rows(0, 3))
    assert len(buf) == 3 and buf.pos == 3
    g = torch.Generator().manual_seed(0)
    seen = buf.sample(3000, g)["x"][:, 0]
    assert set(seen.tolist()) == {0.0, 1.0, 2.0}
    assert all(abs((seen == v).float().mean().item() - 1 / 3) < 0.03 for v in (0, 1, 2))
    buf.add(**_rows(3, 4))  # 7 rows into 5: rows 5 and 6 overwrite 0 and 1
    assert len(buf) == 5 and buf.pos == 2
    assert buf.data["x"][:, 0].tolist() == [5.0, 6.0, 2.0, 3.0, 4.0]
    assert buf.data["done"].tolist() == [False, True, True, False, True]
    buf.add(**_rows(10, 12))  # more rows than room: the newest 5 survive, the oldest of them at the new pos
    assert buf.data["x"][:, 0].tolist() == [18.0, 19.0, 20.0, 21.0, 17.0] and buf.pos == 4
    with pytest.raises(ValueError, match="exactly the fields"):
        buf.add(x=torch.zeros(1, 2))


def test_replay_buffer_state_round_trips_and_can_leave_its_rows_out():
    buf = _buffer()
    buf.add(**_rows(0, 7))
    copy = _buffer()
    copy.load_state_dict(buf.state_dict())
    assert (copy.pos, copy.size) == (buf.pos, buf.size)
    assert_same_tensors(copy.data, buf.data)
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert_same_tensors(copy.sample(8, g1), buf.sample(8, g2))
    empty = _buffer()
    empty.load_state_dict(buf.state_dict(contents=False))
    assert len(empty) == 0 and empty.pos == 0
    with pytest.raises(ValueError, match="capacity"):
        _buffer(4).load_state_dict(buf.state_dict())


# -- the off-policy runner ----------------------------------------------------------------------------
RING = {
    "update_z_every": 3,
    "loop": {"steps_per_iteration": 4, "updates_per_iteration": 2, "random_steps": 8, "replay_capacity": 40},
}
"""A ring of 40 transitions that four iterations of 4 x 4 steps wrap, and latents drawn every 3 steps."""


@pytest.fixture
def registered():
    """FB-CPR is a ``method.name`` of the registry, trained by the off-policy runner."""
    from rgsd_agents.training.trainers import trainer_class

    assert methods.METHODS[fb_cpr.NAME].LOOP == "off_policy"
    assert trainer_class(fb_cpr.NAME) is OffPolicyRunner


def tiny_config(iterations: int) -> TrainConfig:
    return TrainConfig(
        num_envs=4,
        iterations=iterations,
        checkpoint_every=2,
        probe_every=0,
        device="cpu",
        env=EnvConfig(p_imitation=0.0),
        networks=NetworkConfig(actor_hidden=(16,)),
        method=MethodConfig(fb_cpr.NAME, tiny_options(fb_cpr.NAME, **RING)),
    )


def _params(runner: OffPolicyRunner) -> dict[str, torch.Tensor]:
    state = {}
    for name, module in runner.agent.modules().items():
        state.update({f"{name}.{k}": v for k, v in module.state_dict().items()})
    state.update({f"replay.{k}": v for k, v in runner.replay.data.items()})
    return state


def test_a_seeded_run_trains_and_exports_a_policy_and_clip_latents_for_rgsd_eval(registered, tmp_path):
    runner = OffPolicyRunner(tiny_config(2), tmp_path / "run", progress=False)
    history = runner.learn()
    # past the 8 random steps, updates wait until the buffer holds a batch (32): 16 rows, then 32
    assert [m["charts/updates"] for m in history] == [0.0, 2.0]
    # the budget rgsd reproduce states counts the updates the runner takes
    assert runner.loop_cfg.gradient_steps(2, 4, runner.method_cfg.batch_size) == 2
    assert "method/fb_loss" not in history[0] and "method/fb_loss" in history[1]
    assert all(math.isfinite(v) for m in history for v in m.values())
    assert history[-1]["replay/size"] == 32.0
    z = runner.replay.data["z"][:32]
    torch.testing.assert_close(z.norm(dim=-1), torch.full((32,), 4.0))
    assert runner.agent.z_count == 2 * 32  # every update's mixed latents feed the rollouts

    run = RunDir(tmp_path / "run")
    assert run.config()["method"]["options"]["ortho_coef"] == 100.0  # defaults filled in beside the overrides
    info = run.method()
    assert info == {
        "name": "fb_cpr",
        "latent_choice": "tracking",
        "tracking_latents": RunDir.TRACKING_LATENTS,
        "clip_latents": RunDir.CLIP_LATENTS,
        "clip_latents_rule": "B averaged over the clip",  # what the reports say it is scored with
    }
    lib = runner.env.core.lib
    latents = load_clip_latents(run.clip_latents_path(), list(lib.names))
    first, count = int(lib.starts[1]), int(lib.num_frames[1])
    frames = runner.ref_features[first : first + count]
    torch.testing.assert_close(latents[1] * 4.0, runner.agent.clip_latent(frames))
    tracks = load_tracking_latents(run.tracking_latents_path(), list(lib.names), lib.num_frames.tolist())
    assert [t.shape for t in tracks] == [(int(n) - 1, 16) for n in lib.num_frames]
    torch.testing.assert_close(torch.as_tensor(tracks[1]).float() * 4.0, runner.agent.tracking_latents(frames))
    # policy.pt is the actor: [o_t, z / sqrt(d)] -> tanh mean, as rgsd eval and play load it
    policy = load_policy(run.policy_path)
    assert (policy.obs_dim, policy.output) == (POLICY_OBS_DIM, "tanh")
    s, zz = runner.obs[:, :FRAME_DIM], runner.agent.rollout_latents(4, torch.Generator().manual_seed(0))
    with torch.no_grad():
        exported = policy(torch.cat([s, zz / 4.0], -1))
        inside = runner.agent.mean_action_n(runner.agent.normalize(s), zz)
    torch.testing.assert_close(exported, runner.agent.mean_action(s, zz))
    torch.testing.assert_close(exported, inside, atol=1e-5, rtol=1e-5)
    runner.close()


def test_the_imitation_probe_rolls_out_the_exported_actor_with_the_tracking_latents_evaluation_reads(
    registered, tmp_path
):
    runner = OffPolicyRunner(dataclasses.replace(tiny_config(2), probe_every=2), tmp_path / "run", progress=False)
    history = runner.learn()
    probed = {k for k in history[1] if k.startswith("probe")}
    assert "probe/cartesian_error_cm" in probed and not any(k.startswith("probe") for k in history[0])
    assert set(runner.initial_probe) == probed  # the untrained policy, logged at step 0
    run, lib = RunDir(tmp_path / "run"), runner.env.core.lib
    tracks = load_tracking_latents(run.tracking_latents_path(), list(lib.names), lib.num_frames.tolist())
    longest = max(t.shape[0] for t in tracks)
    table = torch.stack([torch.as_tensor(t[[min(i, len(t) - 1) for i in range(longest)]]) for t in tracks]).float()
    probe = ImitationProbe(runner.env_cfg, lib, str(run.encoder_path))
    again = probe.run(load_policy(run.policy_path), table[:, None])
    probe.close()
    runner.close()
    for key in probed:
        assert again[key] == pytest.approx(history[1][key], rel=1e-5, abs=1e-6), key


def test_resume_continues_exactly(registered, tmp_path):
    straight = OffPolicyRunner(tiny_config(4), tmp_path / "straight", progress=False)
    full = reproducible(straight.learn())
    straight.close()
    assert full[-1]["replay/size"] == 40.0  # the ring has wrapped

    first = OffPolicyRunner(tiny_config(2), tmp_path / "split", progress=False)
    first.learn()
    first.close()
    resumed = OffPolicyRunner.resume(tmp_path / "split", {"iterations": 4}, progress=False)
    assert resumed.iteration == 2
    rest = reproducible(resumed.learn())
    resumed.close()
    assert rest == full[2:]
    assert_same_tensors(_params(straight), _params(resumed))


def test_the_config_refuses_a_latent_that_does_not_fit_the_skill_slot(tmp_path):
    with pytest.raises(ValueError, match="z_dim must be >= 2"):
        FBCPRConfig(z_dim=1)
    cfg = tiny_train_config(None, method=MethodConfig("fb_cpr", {"z_dim": 32}), device="cpu")
    with pytest.raises(ValueError, match=r"z_dim \(32\) must equal env.skill_dim \(16\)"):
        OffPolicyRunner(cfg, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
    with pytest.raises(ValueError, match="multiple of seq_length"):
        FBCPRConfig(batch_size=100)


# -- pinned to its authors' code (facebookresearch/metamotivo) -------------------------------------------------
def test_fb_cpr_defaults_follow_its_code():
    cfg = FBCPRConfig()
    # examples/fbcpr_train_humenv.py: the paper's agent config
    assert cfg.batch_size == 1024  # :429
    assert cfg.update_z_every == 150  # :431 update_z_every_step
    assert cfg.actor_std == 0.2  # :432
    assert cfg.seq_length == 8  # :433
    assert (cfg.f_hidden, cfg.f_layers) == (1024, 2)  # :436, :443, :447
    assert (cfg.b_hidden, cfg.b_layers) == (256, 1)  # :444, :448
    assert (cfg.critic_hidden, cfg.critic_layers) == (1024, 2)  # :436, :446, :450
    assert (cfg.lr_f, cfg.lr_b, cfg.lr_actor, cfg.lr_critic) == (1e-4, 1e-5, 1e-4, 1e-4)  # :455-458
    assert cfg.ortho_coef == 100.0  # :459
    assert cfg.z_mix == (0.2, 0.6, 0.2)  # :460 train_goal_ratio 0.2, :461 expert_asm_ratio 0.6, the rest uniform
    assert cfg.relabel_ratio == 0.8  # :462
    assert cfg.reg_coeff == 0.01  # :463
    assert cfg.q_loss_coef == 0.1  # :464
    assert cfg.grad_penalty == 10.0  # :466
    assert cfg.lr_discriminator == 1e-5  # :468
    assert (cfg.disc_layers, cfg.disc_hidden) == (3, 1024)  # :469-470
    assert cfg.discount == 0.98  # :473
    # metamotivo/fb/agent.py TrainConfig, which the script leaves at its defaults
    assert cfg.fb_target_tau == 0.01  # :27
    assert cfg.fb_pessimism == 0.0  # :30 fb_pessimism_penalty
    assert cfg.actor_pessimism == 0.5  # :31
    assert cfg.stddev_clip == 0.3  # :32
    assert cfg.z_buffer_size == 10000  # :38
    # metamotivo/fb_cpr/agent.py TrainConfig
    assert cfg.critic_target_tau == 0.005  # :24
    assert cfg.critic_pessimism == 0.5  # :25
    assert cfg.scale_reg is True  # :27
    # metamotivo/fb/model.py:35 and fb_cpr/model.py:22 num_parallel
    assert cfg.ensemble == 2
    # the loop: examples/fbcpr_train_humenv.py:84 50 worlds, :135 an update round every 10 steps of them, :139
    # 50 updates, :137 1000 random steps of each world
    loop = cfg.loop
    assert (loop.steps_per_iteration, loop.updates_per_iteration, loop.random_steps) == (10, 50, 50 * 1000)
    # departures (docs/methods.md's table): :440 z_dim 256 (fb_cpr_paper restores it), :83 a 5 M replay buffer
    assert cfg.z_dim == 16 and loop.replay_capacity == 1_000_000


def test_rollout_latents_are_redrawn_at_each_episode_start_and_every_update_z_every_steps(registered, tmp_path):
    # metamotivo/fb/agent.py:301-309: a new z where step_count % update_z_every_step == 0; step_count is the time
    # since the episode began (examples/fbcpr_train_humenv.py:196 TimeAwareObservation, :256 td["time"])
    options = {**RING, "loop": {**RING["loop"], "steps_per_iteration": 1}}
    cfg = dataclasses.replace(tiny_config(1), method=MethodConfig(fb_cpr.NAME, tiny_options(fb_cpr.NAME, **options)))
    runner = OffPolicyRunner(cfg, tmp_path / "run", progress=False)
    every = runner.method_cfg.update_z_every
    assert every == 3
    held = torch.zeros(4, dtype=torch.long)
    longest = 0
    for _ in range(12):
        age, before = runner.episode_steps.clone(), runner.z.clone()
        runner.collect()
        z = runner.replay.data["z"][len(runner.replay) - 4 : len(runner.replay)]  # the latents this step acted with
        redrawn = (z != before).any(-1)
        assert torch.equal(redrawn, age % every == 0), (age, redrawn)
        torch.testing.assert_close(z.norm(dim=-1), torch.full((4,), 4.0))
        held = torch.where(redrawn, 1, held + 1)
        longest = max(longest, int(held.max()))
    assert longest == every  # a latent is held for exactly update_z_every steps of an episode
    runner.close()


def test_a_truncated_step_is_stored_unterminated_with_the_state_it_reached(tmp_path):
    """A world reaching its clip's last frame is cut off, not ended: its row keeps terminated False, and next_obs is
    the state it reached (phase 1), not the next episode's first."""
    one_step = {**RING, "loop": {**RING["loop"], "steps_per_iteration": 1}}
    cfg = dataclasses.replace(tiny_config(1), method=MethodConfig(fb_cpr.NAME, tiny_options(fb_cpr.NAME, **one_step)))
    runner = OffPolicyRunner(cfg, tmp_path / "run", progress=False)
    try:
        last = int(runner.env.core.lib.num_frames[0]) - 1
        obs, _ = runner.env.reset(options={"clip": 0, "start_frame": last - 1, "task": "discovery"})
        runner.obs = obs.clone()
        runner.collect()
        rows = slice(len(runner.replay) - 4, len(runner.replay))
        assert not runner.replay.data["terminated"][rows].any()
        torch.testing.assert_close(runner.replay.data["next_obs"][rows][:, 0], torch.ones(4))  # the phase column
    finally:
        runner.close()
