"""The toy envs of the known-answer tests: the humanoid env's interface, references a perfect policy reproduces."""

from __future__ import annotations

import torch

from rgsd_envs.envs.observations import HUMANOID_LAYOUT, POLICY_LAYOUT, POLICY_OBS_DIM
from rgsd_envs.envs.toy import MAX_SPEED, GridWorldEnv, PointMassEnv, grid_transition


def test_the_humanoid_layout_holds_the_humanoid_constants():
    assert HUMANOID_LAYOUT.policy_obs_dim == POLICY_OBS_DIM and HUMANOID_LAYOUT.skill == POLICY_LAYOUT["skill"]
    assert HUMANOID_LAYOUT.feature_dim == 358 and HUMANOID_LAYOUT.encoder_input_dim == 1795


def test_point_mass_commanding_the_reference_velocity_reproduces_every_path_exactly():
    env = PointMassEnv(4)
    lib = env.core.lib
    obs, _ = env.reset(seed=0, options={"clip": list(range(4)), "start_frame": 0, "task": 1})
    assert obs.shape == (4, env.layout.policy_obs_dim) and torch.allclose(obs[:, 5:], env.core.clip_embeddings)
    for t in range(1, 29):
        vel = torch.stack([env.reference_states_table[int(lib.starts[c]) + t, 2:] for c in range(4)])
        obs, reward, term, trunc, ex = env.step(vel / MAX_SPEED)
        assert not term.any()
        assert torch.allclose(ex.cartesian_error, torch.zeros(4), atol=1e-5) and not trunc.any()
        assert ex.encoder_inputs.shape == (4, env.layout.encoder_input_dim) and reward.shape == (4,)
    _, _, _, trunc, ex = env.step(torch.zeros(4, 2))
    assert trunc.all() and ex.started.all() and ex.done_host.all()  # SameStep autoreset at the clip's end


def test_gridworld_moves_one_cell_and_stops_at_walls():
    env = GridWorldEnv(2, start="reference")
    env.reset(seed=0, options={"clip": 0, "start_frame": 0})
    _, _, _, _, ex = env.step(torch.tensor([[1.0, 0.0], [-1.0, 0.2]]))  # east; west into the wall
    assert env.feature_positions(ex.final_features).tolist() == [[1.0, 0.0], [0.0, 0.0]]
    P = grid_transition()
    assert torch.equal(P.sum(-1), torch.ones(16, 5)) and P[0, 2, 0] == 1.0 and P[0, 1, 1] == 1.0
