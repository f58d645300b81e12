"""Known-answer tests: each method, trained on a toy env whose answer is known, shows its paper's property.

The envs are ``rgsd_envs.envs.toy`` (a 2-D point mass with four reference paths; a 4 x 4 gridworld for
Meta Motivo), behind the humanoid env's interface; the training loops are the runners' own pieces
(``rgsd_agents.known_answer``). Every test also fails on a bug planted in its method (``PLANTED_BUGS``): run
``RGSD_PLANT_BUG=<method> pytest packages/rgsd-agents/tests/methods/test_known_answers.py -k test_<method>`` and
the test must fail (docs/methods.md, "Known-answer tests").
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from rgsd_agents.known_answer import (
    FBToyTrainer,
    OnPolicyToyTrainer,
    ToyFBSettings,
    ToyPPOSettings,
    energy_distance,
    greedy_return,
    grid_step_cells,
    optimal_return,
    planted_bug,
    pretrain_toy_encoder,
    roll_out,
    skill_accuracy,
    tracking_error,
    unit_skills,
)
from rgsd_envs.envs.skills import sample_vmf
from rgsd_envs.envs.toy import GRID_SIZE, GridWorldEnv, PointMassEnv, grid_index

pytestmark = pytest.mark.slow
BUG = os.environ.get("RGSD_PLANT_BUG")
"""The method whose planted bug is switched on (``rgsd_agents.known_answer.PLANTED_BUGS``); unset: none."""


@pytest.fixture(autouse=True)
def _one_thread():
    """The CI's 2 cores run the tests' tiny networks fastest on one thread each."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _trainer(name: str, options: dict, env: PointMassEnv | None = None) -> OnPolicyToyTrainer:
    return OnPolicyToyTrainer(name, env or PointMassEnv(64, seed=0), options, ToyPPOSettings())


def test_rgsd_imitates_the_reference_paths_and_its_vmf_skills_stay_near_them():
    encoder = pretrain_toy_encoder(PointMassEnv(1))
    with planted_bug("rgsd" if BUG == "rgsd" else None):
        env = PointMassEnv(64, encoder=encoder, p_imitation=0.5, seed=0)
        trainer = _trainer("rgsd", {"minibatch_size": 512, "lr": 1e-3}, env)
        lib, zm = env.core.lib, env.core.clip_embeddings
        probe = PointMassEnv(8, encoder=encoder, seed=1)
        rng = np.random.default_rng(0)

        def errors() -> tuple[float, float, float]:
            """Mean tracking error (units) of each clip's z_m, of vMF(z_m, 100) draws and of uniform skills."""
            own, near, anywhere = [], [], []
            for m in range(lib.num_clips):
                ref = lib.clip_positions(m)
                vmf = np.stack([sample_vmf(rng, zm[m].numpy(), 100.0) for _ in range(8)])
                for out, z in (
                    (own, zm[m].expand(8, -1)),
                    (near, torch.tensor(vmf).float()),
                    (anywhere, unit_skills(8, m)),
                ):
                    out.append(float(tracking_error(roll_out(probe, trainer.policy, z, clip=m).positions, ref).mean()))
            return float(np.mean(own)), float(np.mean(near)), float(np.mean(anywhere))

        untrained = errors()
        trainer.train(50)
        own, near, anywhere = errors()
    report = (
        f"tracking error (units) z_m {own:.3f}, vMF(z_m, 100) {near:.3f}, uniform {anywhere:.3f}; untrained {untrained}"
    )
    print(report)  # the numbers, also when the test passes (pytest -s)
    assert own < 0.6 * untrained[0], report
    assert near < 0.5 * anywhere and near < 0.5 * untrained[1], report


def test_diayn_skills_are_distinguishable():
    with planted_bug("diayn" if BUG == "diayn" else None):
        trainer = _trainer("diayn", {"minibatch_size": 512, "lr": 1e-3})
        probe = PointMassEnv(8, seed=1)
        z = unit_skills(8, 5)

        def accuracy() -> float:
            inputs = roll_out(probe, trainer.policy, z).next_encoder_inputs
            return skill_accuracy(trainer.method.trainable, inputs, z, skip=10)

        untrained = accuracy()
        trainer.train(60)
        trained = accuracy()
    report = f"skill accuracy of the discriminator {trained:.3f} (chance 0.125; untrained {untrained:.3f})"
    print(report)  # the numbers, also when the test passes (pytest -s)
    assert trained > 0.3, report


def test_metra_skills_spread_and_travel():
    options = {"hidden": [64, 64], "minibatch_size": 256, "phi_steps": 20, "lr": 1e-3, "dual_lr": 1e-3}
    with planted_bug("metra" if BUG == "metra" else None):
        trainer = _trainer("metra", options)
        probe = PointMassEnv(16, seed=1)

        def travel_and_spread() -> tuple[float, float]:
            p = roll_out(probe, trainer.policy, unit_skills(16, 5)).positions
            return float((p[-1] - p[0]).norm(dim=-1).mean()), float(torch.cdist(p[-1], p[-1]).mean())

        untrained = travel_and_spread()
        trainer.train(40)
        travel, spread = travel_and_spread()
    report = f"travel {travel:.2f} units, spread {spread:.2f} (references travel 2.9; untrained {untrained})"
    print(report)  # the numbers, also when the test passes (pytest -s)
    assert travel > 2.5 and spread > 3.0, report


def _state_distribution_distance(name: str, options: dict, iterations: int) -> tuple[float, float]:
    """Energy distance of (x, y, vx, vy) of rollouts from the paths' start under 32 of the method's latents to the
    reference frames', untrained and trained."""
    trainer = _trainer(name, options)
    probe = PointMassEnv(32, seed=1)
    ref = probe.core.ref_features[:, 1:5]

    def distance() -> float:
        if name == "calm":  # CALM's prior: the latents of reference windows
            latents = trainer.method.window_latents
            z = latents[torch.randint(latents.shape[0], (32,), generator=torch.Generator().manual_seed(5))]
        else:
            z = unit_skills(32, 5)
        return energy_distance(roll_out(probe, trainer.policy, z).features[..., 1:5], ref)

    untrained = distance()
    trainer.train(iterations)
    return untrained, distance()


def test_ase_reproduces_the_reference_state_distribution():
    with planted_bug("ase" if BUG == "ase" else None):
        untrained, trained = _state_distribution_distance("ase", {"hidden": [64, 64], "lr": 1e-3}, 40)
    report = f"energy distance to the references' states {trained:.3f} (untrained {untrained:.3f})"
    print(report)  # the numbers, also when the test passes (pytest -s)
    assert trained < 0.35, report


def test_calm_reproduces_the_reference_state_distribution():
    options = {"encoder_hidden": [64], "disc_hidden": [64, 64], "window": 10, "lr": 1e-3, "encoder_lr": 1e-3}
    with planted_bug("calm" if BUG == "calm" else None):
        untrained, trained = _state_distribution_distance("calm", options, 50)
    report = f"energy distance to the references' states {trained:.3f} (untrained {untrained:.3f})"
    print(report)  # the numbers, also when the test passes (pytest -s)
    assert trained < 0.35, report


FB_OPTIONS = dict(
    z_dim=16,
    discount=0.8,
    batch_size=256,
    f_hidden=64,
    b_hidden=64,
    critic_hidden=64,
    disc_hidden=64,
    fb_target_tau=0.05,
    lr_f=1e-3,
    lr_b=3e-4,
    lr_actor=3e-4,
    lr_critic=3e-4,
    lr_discriminator=1e-4,
    z_buffer_size=1000,
    update_z_every=20,
)
"""Meta Motivo on the gridworld: small networks, a short horizon (discount 0.8) and fast targets."""
FB_ITERATIONS = 250


@pytest.fixture(scope="module")
def fb_trainer() -> FBToyTrainer:
    with planted_bug("fb_cpr" if BUG == "fb_cpr" else None):
        trainer = FBToyTrainer(GridWorldEnv(32, seed=0), ToyFBSettings(updates_per_iteration=16, options=FB_OPTIONS))
        trainer.train(FB_ITERATIONS)
    return trainer


GOALS = (0, 3, 12, 15, 5, 10)
"""Goal cells of the zero-shot rewards: the corners and two inner cells."""


def _goal_reward(goal: int) -> torch.Tensor:
    r = torch.zeros(GRID_SIZE * GRID_SIZE)
    r[goal] = 1.0
    return r


def test_fb_successor_measure_matches_the_analytic_one_and_zero_shot_rewards_are_near_optimal(fb_trainer):
    states = torch.arange(GRID_SIZE * GRID_SIZE)
    latents = torch.stack([fb_trainer.reward_latent(_goal_reward(g)) for g in GOALS])
    learned, analytic = fb_trainer.successor_measures(latents)
    error = float(((learned - analytic).norm(dim=(1, 2)) / analytic.norm(dim=(1, 2))).max())
    achieved = sum(
        float(greedy_return(fb_trainer, z, _goal_reward(g), states, 20).sum()) for z, g in zip(latents, GOALS)
    )
    best = sum(float(optimal_return(_goal_reward(g), states, fb_trainer.cfg.discount, 20).sum()) for g in GOALS)
    report = f"successor measure relative error {error:.3f}; zero-shot return {achieved / best:.3f} of optimal"
    print(report)  # the numbers, also when the test passes (pytest -s)
    assert error < 0.4, report
    assert achieved > 0.9 * best, report


def _tracking_distances(trainer: FBToyTrainer) -> dict[str, float]:
    """Per reference path: mean Manhattan distance (cells) of the per-step tracking latents' rollout to the path."""
    lib = trainer.env.core.lib
    distances = {}
    for clip, name in enumerate(lib.names):
        ref = lib.clip_positions(clip)
        z = trainer.tracking_latents(clip)
        cells, dist = ref[:1].clone(), []
        for t in range(ref.shape[0] - 1):
            s = torch.nn.functional.one_hot(grid_index(cells), GRID_SIZE * GRID_SIZE).float()
            cells = grid_step_cells(cells, trainer.agent.mean_action(s, z[t : t + 1]))
            dist.append(float((cells - ref[t + 1]).abs().sum()))
        distances[name] = round(float(np.mean(dist)), 3)
    return distances


def test_fb_tracking_inference_follows_a_reference_path(fb_trainer):
    untrained = _tracking_distances(FBToyTrainer(GridWorldEnv(32, seed=0), ToyFBSettings(options=FB_OPTIONS)))
    trained = _tracking_distances(fb_trainer)
    report = f"mean distance (cells) to the reference frame: {trained} (untrained {untrained})"
    print(report)  # the numbers, also when the test passes (pytest -s)
    assert all(trained[k] < min(1.25, 0.5 * untrained[k]) for k in trained), report
