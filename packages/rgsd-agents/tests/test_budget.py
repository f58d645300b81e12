"""A training's budget in its own loop's terms: what ``rgsd reproduce`` states for every training."""

from __future__ import annotations

import pytest

from rgsd_agents.config import load_config
from rgsd_agents.training.budget import format_count, training_budget
from rgsd_agents.training.offpolicy_config import OffPolicyConfig


def test_a_ppo_iteration_is_a_rollout_of_every_world_and_epochs_of_minibatch_steps():
    budget = training_budget(load_config("rgsd_paper"))
    assert (budget.worlds, budget.steps_per_iteration, budget.gradient_steps_per_iteration) == (4096, 32, 20)
    assert budget.transitions == 20_000 * 4096 * 32  # 2.6 B
    assert (budget.gradient_steps, budget.gradient_batch) == (20_000 * 5 * 4, 32768)


def test_meta_motivo_s_iteration_is_one_step_of_its_worlds_and_400_gradient_steps():
    budget = training_budget(load_config("fb_cpr_paper"))
    assert (budget.worlds, budget.steps_per_iteration, budget.gradient_steps_per_iteration) == (4096, 1, 400)
    assert budget.transitions == 20_000 * 4096  # 82 M, not 4096 x 32 per iteration
    # updates start once more than 50,000 random transitions are in: the 13th iteration (53,248)
    assert (budget.gradient_steps, budget.gradient_batch) == (400 * (20_000 - 12), 1024)
    assert budget.describe() == "20000 it, 4096 worlds x 1 step: 81.9 M transitions, 8.00 M gradient steps of 1024"


@pytest.mark.parametrize(
    ("loop", "iterations", "worlds", "batch", "expected"),
    [
        (OffPolicyConfig(4, 2, random_steps=8, replay_capacity=40), 2, 4, 32, 2),  # waits for a batch: 16, then 32
        (OffPolicyConfig(4, 2, random_steps=16, replay_capacity=40), 3, 4, 8, 4),  # 16 is not past 16: from the 2nd
        (OffPolicyConfig(1, 5, random_steps=0, replay_capacity=10), 4, 2, 16, 0),  # the buffer never holds a batch
    ],
)
def test_off_policy_updates_wait_for_the_random_phase_and_a_full_batch(loop, iterations, worlds, batch, expected):
    assert loop.gradient_steps(iterations, worlds, batch) == expected


def test_counts_read_in_three_significant_digits():
    assert [format_count(n) for n in (6, 400_000, 7_995_200, 81_920_000, 2_621_440_000)] == [
        "6",
        "400 k",
        "8.00 M",
        "81.9 M",
        "2.62 B",
    ]
