"""Linear Q-learning (Watkins 1989; Q(lambda)) and its policies: exact convergence on a tiny
corridor whose Q* is known by dynamic programming, learning on Mountain Car, and the action
probabilities of the stochastic policies (chi-square checks, level 1e-3, power 1e-6)."""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
from scipy import stats

from dprl.control import (EpsilonGreedyPolicy, SoftmaxPolicy, epsilon_greedy_probabilities,
                          greedy_policy, q_learning)
from dprl.envs.episodes import UniformPolicy, importance_ratios, taken_action_probabilities
from dprl.envs.mountain_car import MountainCar, mountain_car_features

LEVEL, POWER_LEVEL = 1e-3, 1e-6


@dataclass(frozen=True)
class Corridor:
    """States 0..N-1 as (n, 1) int arrays, actions 0 (left, blocked at 0) and 1 (right),
    reward -1 per step, entering N-1 terminates; starts uniform on 0..N-2. The horizon is too
    short to reach the end from the left, so truncation must be bootstrapped."""

    n_states: int = 6
    horizon: int = 3
    n_actions: ClassVar[int] = 2
    reward_range: ClassVar[tuple[float, float]] = (-1.0, -1.0)

    def reset(self, n, rng):
        return rng.integers(self.n_states - 1, size=(n, 1))

    def step(self, states, actions):
        nxt = np.clip(states + 2 * actions[:, None] - 1, 0, self.n_states - 1)
        return nxt, np.full(len(states), -1.0), nxt[:, 0] == self.n_states - 1

    def observe(self, states):
        return states.astype(float)

    def features(self, observations):
        return np.eye(self.n_states)[observations[:, 0].astype(int)]

    def optimal_q(self, gamma: float) -> np.ndarray:
        """Q*(s, a), (A, N - 1), by value iteration (infinite horizon)."""
        n, V = self.n_states, np.zeros(self.n_states)
        nxt = np.array([np.maximum(np.arange(n - 1) - 1, 0), np.arange(1, n)])
        for _ in range(1000):
            Q = -1.0 + gamma * V[nxt]
            V[:-1] = Q.max(axis=0)
        return Q


@pytest.mark.parametrize("gamma, trace_decay", [(1.0, 0.0), (0.9, 0.0), (1.0, 0.8)])
def test_q_learning_finds_the_exact_q_of_a_corridor(gamma, trace_decay):
    env = Corridor()
    result = q_learning(env, env.features, 0.5, 1500, np.random.default_rng(0), epsilon=0.5,
                        gamma=gamma, trace_decay=trace_decay, n_agents=3)
    assert result.weights.shape == (3, 2, 6) and result.returns.shape == (3, 1500)
    assert np.allclose(result.weights[:, :, :-1], env.optimal_q(gamma), atol=1e-8)
    assert np.array_equal(result.returns, -result.lengths)


def test_q_learning_is_deterministic_given_the_seed():
    env = Corridor()
    runs = [q_learning(env, env.features, 0.3, 50, np.random.default_rng(4), epsilon=0.2,
                       n_agents=2) for _ in range(2)]
    assert np.array_equal(runs[0].weights, runs[1].weights)
    assert np.array_equal(runs[0].returns, runs[1].returns)


def test_q_learning_learns_to_drive_up_the_mountain():
    """40 episodes of Q(0.9) with the order-5 Fourier basis: the greedy policies reach the
    goal, which the uniform random policy never does in 200 steps."""
    car, phi = MountainCar(), mountain_car_features()
    result = q_learning(car, phi, 0.002 * phi.step_size_scaling(), 40, np.random.default_rng(0),
                        epsilon=0.0, trace_decay=0.9, n_agents=2)
    assert result.weights.shape == (2, 3, 36)
    assert result.lengths[:, -10:].mean() < result.lengths[:, :10].mean()
    for weights in result.weights:
        episodes = car.simulate(200, greedy_policy(weights, phi), np.random.default_rng(1))
        assert episodes.terminated.mean() > 0.5 and episodes.rewards.sum(-1).mean() > -185


def test_epsilon_greedy_probabilities():
    q = np.array([[1.0, 3.0, 2.0], [5.0, 5.0, 0.0]])
    assert np.allclose(epsilon_greedy_probabilities(q, 0.3),
                       [[0.1, 0.8, 0.1], [0.8, 0.1, 0.1]])  # ties go to the lowest action
    assert np.allclose(epsilon_greedy_probabilities(q, 1.0), 1 / 3)
    assert np.array_equal(epsilon_greedy_probabilities(q, 0.0), [[0, 1, 0], [1, 0, 0]])


@pytest.fixture(scope="module")
def learned():
    """Weights that give the three actions distinct values (fixed random numbers)."""
    return np.random.default_rng(2).normal(size=(3, 36)), mountain_car_features()


def observations(n: int) -> np.ndarray:
    car = MountainCar()
    return car.observe(car.reset(n, np.random.default_rng(3)))


def test_policy_probabilities(learned):
    weights, phi = learned
    obs = observations(50)
    q = phi(obs) @ weights.T
    soft = SoftmaxPolicy(weights, phi, temperature=2.0).probabilities(obs)
    assert np.allclose(soft, np.exp(q / 2) / np.exp(q / 2).sum(axis=1, keepdims=True))
    eps = EpsilonGreedyPolicy(weights, phi, 0.1).probabilities(obs)
    for p in (soft, eps):
        assert np.allclose(p.sum(axis=1), 1.0) and np.all(p >= 0)
    assert np.allclose(eps.max(axis=1), 0.1 / 3 + 0.9)
    greedy = greedy_policy(weights, phi)
    assert np.array_equal(greedy(obs, np.random.default_rng(0)), q.argmax(axis=1))


@pytest.mark.parametrize("make", [lambda w, f: EpsilonGreedyPolicy(w, f, 0.3),
                                  lambda w, f: SoftmaxPolicy(w, f, 1.5)])
def test_sampled_actions_follow_the_probabilities(learned, make):
    policy, n = make(*learned), 30_000
    obs = observations(4)
    probs = policy.probabilities(obs)
    actions = policy(np.repeat(obs, n, axis=0), np.random.default_rng(5)).reshape(4, n)
    for p, a in zip(probs, actions):
        counts = np.bincount(a, minlength=3)
        assert stats.chisquare(counts, p * n).pvalue > LEVEL
        wrong = 0.97 * p + 0.01  # a slightly different distribution
        assert stats.chisquare(counts, wrong * n).pvalue < POWER_LEVEL


def test_behaviour_probabilities_give_importance_ratios(learned):
    """Off-policy data as in Xie et al. (2019, Sec. 7): behaviour = the learned policy made
    stochastic, target = uniform random; rho_t = (1/3) / pi_b(a_t | o_t)."""
    behaviour, car = EpsilonGreedyPolicy(*learned, epsilon=0.2), MountainCar()
    episodes = car.simulate(20, behaviour, np.random.default_rng(6))
    mask = episodes.transition_mask
    assert np.array_equal(taken_action_probabilities(behaviour, episodes),
                          episodes.behaviour_probabilities)
    taken = episodes.behaviour_probabilities[mask]
    assert np.all(np.isclose(taken, 0.2 / 3) | np.isclose(taken, 0.8 + 0.2 / 3))
    ratios = taken_action_probabilities(UniformPolicy(3), episodes)[mask] \
        / episodes.behaviour_probabilities[mask]
    assert np.all(ratios > 0) and np.isclose(ratios.max(), 5.0)
    rho = importance_ratios(UniformPolicy(3), episodes)
    assert np.array_equal(rho[mask], ratios) and np.all(rho[~mask] == 0)
    with pytest.raises(ValueError, match="behaviour probabilities"):
        importance_ratios(UniformPolicy(3), car.simulate(
            2, lambda o, rng: np.zeros(len(o), dtype=np.int64), np.random.default_rng(7)))


@pytest.mark.parametrize("kwargs", [{"epsilon": -0.1}, {"epsilon": 1.5}, {"epsilon": np.nan},
                                    {"gamma": 1.1}, {"trace_decay": -0.5}, {"n_agents": 0},
                                    {"n_episodes": 0}, {"step_sizes": -0.1},
                                    {"step_sizes": np.ones(5)}, {"rng": None}])
def test_q_learning_refuses_bad_arguments(kwargs):
    env = Corridor()
    args = {"env": env, "features": env.features, "step_sizes": 0.1, "n_episodes": 2,
            "rng": np.random.default_rng(0), "epsilon": 0.1, **kwargs}
    with pytest.raises(ValueError):
        q_learning(**args)


def test_policies_refuse_bad_arguments(learned):
    weights, phi = learned
    for make in (lambda: EpsilonGreedyPolicy(weights, phi, 1.2),
                 lambda: EpsilonGreedyPolicy(weights, phi, -0.1),
                 lambda: SoftmaxPolicy(weights, phi, 0.0),
                 lambda: greedy_policy(weights[0], phi),
                 lambda: greedy_policy(weights[:1], phi),
                 lambda: epsilon_greedy_probabilities(np.zeros((2, 3)), 2.0),
                 lambda: UniformPolicy(0)):
        with pytest.raises(ValueError):
            make()
