"""Utility in a discrete state space (dprl.wang2019.utility, Wang & Hegde 2019, Prop. 10):
the discretised line MDP against sampling, value iteration against the Bellman equation and
policy evaluation, tabular Algorithm 1 with J = 1 against Q* (released) and Q* - g (table),
batch invariance, the bound by hand, and input checks."""

import math

import numpy as np
import pytest
from scipy import stats

from dprl.seeding import trial_generators
from dprl.wang2019.utility import (DiscreteLine, mean_absolute_error, noisy_q_learning,
                                   prop10_bound)


def test_transition_matrices_are_the_sampled_chain():
    mdp = DiscreteLine(7, 0.9)
    matrices = mdp.transition_matrices()
    assert matrices.shape == (2, 7, 7) and np.all(matrices >= 0)
    np.testing.assert_allclose(matrices.sum(axis=2), 1.0, rtol=0, atol=1e-15)
    draws = 200_000
    following = mdp.next_states(np.random.default_rng(0).random((draws, 2, 7)))
    for action in range(2):
        for state in range(7):
            counts = np.bincount(following[:, action, state], minlength=7)
            expected = matrices[action, state] * draws
            support = expected > 0
            assert np.all(counts[~support] == 0)
            statistic = np.sum((counts[support] - expected[support]) ** 2 / expected[support])
            assert stats.chi2.sf(statistic, max(support.sum() - 1, 1)) > 1e-4


def test_moves_up_and_down_by_at_most_max_move():
    mdp = DiscreteLine(9, 0.9)  # spacing 1/8: a move of up to 0.25 rounds to 0, 1 or 2 cells
    up, down = mdp.transition_matrices()
    np.testing.assert_allclose(up[0, :3], [0.25, 0.5, 0.25])
    np.testing.assert_allclose(down[0, 0], 1.0)
    np.testing.assert_allclose(up[8, 8], 1.0)
    np.testing.assert_allclose(down[4, 2:5], [0.25, 0.5, 0.25])


def test_optimal_q_solves_the_bellman_equation_and_moves_toward_the_centre():
    mdp = DiscreteLine(41, 0.9)
    q = mdp.optimal_q()
    matrices, rewards = mdp.transition_matrices(), mdp.expected_rewards()
    np.testing.assert_allclose(q, rewards + 0.9 * matrices @ q.max(axis=0), rtol=0, atol=1e-10)
    policy = q.argmax(axis=0)
    far = np.abs(mdp.states - 0.5) > 0.1
    assert np.all(policy[far] == (mdp.states[far] > 0.5))
    chosen = matrices[policy, np.arange(41)]
    value = np.linalg.solve(np.eye(41) - 0.9 * chosen, rewards[policy, np.arange(41)])
    np.testing.assert_allclose(value, q.max(axis=0), rtol=0, atol=1e-9)


def test_with_one_fixed_path_the_released_q_tends_to_q_star_and_the_table_to_q_star_minus_g():
    mdp = DiscreteLine(15, 0.7)
    q_star = mdp.optimal_q()
    noise = np.stack([np.zeros((2, 15)), 0.8 * np.random.default_rng(1).standard_normal(
        (2, 15))])
    table = noisy_q_learning(mdp, noise, 20_000, trial_generators(2, 2))
    for run in range(2):
        np.testing.assert_allclose(table[run] + noise[run], q_star, atol=0.03)
        np.testing.assert_allclose(table[run], q_star - noise[run], atol=0.03)
    assert np.abs(table[1] - q_star).max() > 0.5  # the table itself is off by the noise


def test_same_samples_give_a_noise_independent_released_error_gap():
    """In terms of Q + g the update is ordinary Q-learning from Q_0 = g: with the same
    samples, runs that differ only by g differ by a contraction of the initial gap."""
    mdp = DiscreteLine(11, 0.8)
    noise = np.stack([np.zeros((2, 11)), np.random.default_rng(3).standard_normal((2, 11))])
    gaps = []
    for iterations in (10, 100, 1000):
        rngs = [np.random.default_rng(9), np.random.default_rng(9)]  # the same samples
        table = noisy_q_learning(mdp, noise, iterations, rngs)
        gaps.append(np.abs((table[1] + noise[1]) - table[0]).max())
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 0.02 * gaps[0]


def test_runs_do_not_depend_on_the_batch():
    mdp = DiscreteLine(9, 0.9)
    noise = np.random.default_rng(4).standard_normal((3, 2, 9))
    batch = noisy_q_learning(mdp, noise, 50, trial_generators(5, 3))
    alone = noisy_q_learning(mdp, noise[1:2], 50, trial_generators(5, [1]))
    np.testing.assert_array_equal(alone[0], batch[1])


def test_bound_and_error_by_hand():
    assert prop10_bound(0.5, 100, 0.9) == pytest.approx(
        2 * math.sqrt(2) * 0.5 / (math.sqrt(100 * math.pi) * 0.1))
    assert prop10_bound(0.0, 10, 0.5) == 0.0
    np.testing.assert_allclose(mean_absolute_error([[1.0, -1.0, 3.0]], [0.0, 0.0, 0.0]), [5 / 3])


@pytest.mark.parametrize("call", [
    lambda: DiscreteLine(1, 0.9),
    lambda: DiscreteLine(5, 1.0),
    lambda: DiscreteLine(5, 0.9, max_move=1.5),
    lambda: DiscreteLine(5, 0.9).next_states(np.zeros((2, 4))),
    lambda: DiscreteLine(5, 0.9).next_states(np.full((2, 5), 1.5)),
    lambda: DiscreteLine(5, 0.9).optimal_q(tol=0.0),
    lambda: noisy_q_learning(DiscreteLine(5, 0.9), np.zeros((2, 2, 5)), 3,
                             trial_generators(0, 1)),
    lambda: noisy_q_learning(DiscreteLine(5, 0.9), np.zeros((1, 2, 5)), 0,
                             trial_generators(0, 1)),
    lambda: noisy_q_learning("mdp", np.zeros((1, 2, 5)), 3, trial_generators(0, 1)),
    lambda: prop10_bound(-1.0, 10, 0.9),
    lambda: prop10_bound(1.0, 0, 0.9),
    lambda: mean_absolute_error(np.zeros(3), np.zeros(4)),
])
def test_bad_inputs_raise(call):
    with pytest.raises(ValueError):
        call()
