"""Fitted Q iteration (Ernst et al. 2005) with least squares: exact on tiny MDPs whose Q* is
known by dynamic programming, bounded by its truncation where plain least-squares FQI
diverges; the HIV feature maps; and the Xie et al. (2019) HIV policy experiment at smoke
scale (determinism, batch invariance, behaviour probabilities and importance ratios)."""

import numpy as np
import pytest

from dprl.control.fitted_q import Transitions, fitted_q_iteration
from dprl.features import PolynomialBasis
from dprl.envs.hiv import HIVTreatmentMDP
from dprl.envs.hiv_features import LOG10_BOX, SquashedFourierBasis, q_features, value_features
from dprl.experiments.xie2019.hiv_data import behaviour_data
from dprl.experiments.xie2019.hiv_policy import (POLICY, behaviour_policy, behaviour_probabilities,
                                                 policy_trials, transitions)
from dprl.seeding import trial_generator

GAMMA = 0.9


def one_hot(n_states):
    return lambda observations: np.eye(n_states)[observations[:, 0].astype(int)]


def optimal_q(P: np.ndarray, R: np.ndarray, gamma: float) -> np.ndarray:
    """Q* of a finite MDP (``P[s, a, s']``, ``R[s, a]``) by policy iteration (exact)."""
    S, A = R.shape
    policy = np.zeros(S, dtype=int)
    while True:
        P_pi, R_pi = P[np.arange(S), policy], R[np.arange(S), policy]
        v = np.linalg.solve(np.eye(S) - gamma * P_pi, R_pi)
        q = R + gamma * P @ v
        if np.array_equal(q.argmax(axis=1), policy) or np.allclose(q.max(axis=1), v):
            return q
        policy = q.argmax(axis=1)


def exact_data(P: np.ndarray, R: np.ndarray, copies: int) -> Transitions:
    """``copies`` transitions per (s, a) whose next states follow ``P`` exactly (the
    probabilities are multiples of 1 / copies), so the empirical MDP is the MDP."""
    rows = []
    for s, a in np.ndindex(R.shape):
        counts = np.rint(P[s, a] * copies).astype(int)
        rows += [(s, a, R[s, a], s2) for s2 in np.repeat(np.arange(P.shape[2]), counts)]
    s, a, r, s2 = map(np.array, zip(*rows))
    return Transitions(s[:, None].astype(float), a, r.astype(float), s2[:, None].astype(float),
                       np.zeros(s.size, dtype=bool), R.shape[1])


def test_fqi_with_tabular_features_recovers_q_star_of_a_stochastic_mdp():
    P = np.zeros((3, 2, 3))
    P[0, 0] = [0.5, 0.5, 0.0]
    P[0, 1] = [0.0, 0.25, 0.75]
    P[1, 0] = [1.0, 0.0, 0.0]
    P[1, 1] = [0.25, 0.25, 0.5]
    P[2, 0] = [0.0, 0.0, 1.0]
    P[2, 1] = [0.75, 0.0, 0.25]
    R = np.array([[1.0, 0.0], [-1.0, 2.0], [0.5, -0.5]])
    fit = fitted_q_iteration(exact_data(P, R, 4), one_hot(3), GAMMA, 400)
    assert fit.weights.T == pytest.approx(optimal_q(P, R, GAMMA), abs=1e-9)
    assert fit.last_change < 1e-12


def test_fqi_does_not_bootstrap_from_terminal_next_states():
    # corridor 0 - 1 - 2, action 1 moves right (2 is terminal), action 0 stays; reward -1
    s = np.array([0, 0, 1, 1], dtype=float)[:, None]
    a = np.array([0, 1, 0, 1])
    s2 = np.array([0, 1, 1, 2], dtype=float)[:, None]
    data = Transitions(s, a, -np.ones(4), s2, np.array([False, False, False, True]), 2)
    fit = fitted_q_iteration(data, one_hot(3), GAMMA, 500, ridge=1e-12)
    expected = np.array([[-1 - GAMMA * 1.9, -1.9, 0.0], [-1 - GAMMA, -1.0, 0.0]])
    assert fit.weights == pytest.approx(expected, abs=1e-9)


def test_truncation_keeps_least_squares_fqi_bounded_where_it_would_diverge():
    # Tsitsiklis & Van Roy's two states with features 1 and 2: fitting w at feature 1 to
    # 1 + gamma * 2w gives w <- 1 + 2 gamma w, divergent for gamma > 1/2 without truncation
    data = Transitions(np.array([[1.0]]), np.array([0]), np.array([1.0]), np.array([[2.0]]),
                       np.array([False]), 1)
    fit = fitted_q_iteration(data, lambda o: o.copy(), GAMMA, 300)
    assert fit.weights[0, 0] == pytest.approx(1 + GAMMA / (1 - GAMMA))


@pytest.mark.parametrize("kwargs, message", [
    (dict(gamma=1.0), "gamma"), (dict(n_iterations=0), "n_iterations"),
    (dict(ridge=-1.0), "ridge")])
def test_fqi_rejects_bad_settings(kwargs, message):
    data = exact_data(np.ones((1, 2, 1)), np.zeros((1, 2)), 1)
    settings = dict(gamma=GAMMA, n_iterations=5, ridge=0.0) | kwargs
    with pytest.raises(ValueError, match=message):
        fitted_q_iteration(data, one_hot(1), **settings)


def test_fqi_rejects_unfittable_regressions():
    data = Transitions(np.zeros((2, 1)), np.array([0, 0]), np.zeros(2), np.zeros((2, 1)),
                       np.zeros(2, dtype=bool), 2)
    with pytest.raises(ValueError, match="action 1 never occurs"):
        fitted_q_iteration(data, one_hot(1), GAMMA, 5)
    data = exact_data(np.ones((1, 2, 1)), np.zeros((1, 2)), 1)
    with pytest.raises(ValueError, match="singular"):
        fitted_q_iteration(data, lambda o: np.zeros((o.shape[0], 2)), GAMMA, 5)


@pytest.mark.parametrize("field, value, message", [
    ("actions", np.array([0, 2]), "actions must lie"),
    ("actions", np.array([0.0, 1.0]), "actions must be integers"),
    ("terminal", np.array([0, 1]), "terminal must be a bool"),
    ("rewards", np.array([0.0, np.nan]), "rewards"),
    ("next_observations", np.zeros((2, 2)), "next_observations")])
def test_transitions_reject_bad_inputs(field, value, message):
    fields = dict(observations=np.zeros((2, 1)), actions=np.array([0, 1]),
                  rewards=np.zeros(2), next_observations=np.zeros((2, 1)),
                  terminal=np.zeros(2, dtype=bool), n_actions=2) | {field: value}
    with pytest.raises(ValueError, match=message):
        Transitions(**fields)


def test_polynomial_basis_monomials_and_batch_invariance():
    basis = PolynomialBasis(2, [0.0, 0.0], [2.0, 4.0])
    assert basis.n_features == 6
    assert basis.exponents.tolist() == [[0, 0], [1, 0], [0, 1], [2, 0], [1, 1], [0, 2]]
    z = np.array([0.5, -0.25])  # the point (1.5, 1.5) scaled to [-1, 1]^2
    assert basis(np.array([[1.5, 1.5]]))[0] == pytest.approx(
        [1, z[0], z[1], z[0] ** 2, z[0] * z[1], z[1] ** 2])
    x = np.random.default_rng(0).normal(size=(50, 2))
    assert np.array_equal(basis(x)[7], basis(x[7:8])[0])
    with pytest.raises(ValueError, match="high must exceed low"):
        PolynomialBasis(2, [0.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="observations"):
        basis(np.zeros((3, 3)))


def test_hiv_feature_maps_have_the_stated_sizes_and_value_features_are_bounded():
    assert q_features().n_features == 210
    features = value_features()
    assert features.n_features == 10 and np.all(features.coefficients[0] == 0)
    assert value_features(3).n_features == 20
    extreme = np.array([[-300.0] * 6, [300.0] * 6, list(LOG10_BOX[0]), list(LOG10_BOX[1])])
    phi = features(extreme)
    assert phi.shape == (4, 10) and np.all(np.abs(phi) <= 1) and np.all(phi[:, 0] == 1)
    # only log10 T1, V and E matter; the box centre maps to z = 1/2
    y = np.array([[5.0, 9.0, 9.0, 9.0, 2.25, 3.0]])
    assert features(y)[0, 1:4] == pytest.approx(np.cos(np.pi / 2 * np.ones(3)), abs=1e-15)
    with pytest.raises(ValueError, match="high must exceed low"):
        SquashedFourierBasis(2, [0.0], [0.0], (0,))
    with pytest.raises(ValueError, match="distinct indices"):
        SquashedFourierBasis(2, [0.0, 0.0], [1.0, 1.0], (1, 1))
    with pytest.raises(ValueError, match="observations"):
        features(np.zeros((2, 5)))


def test_hiv_transitions_flatten_episodes_in_order():
    mdp = HIVTreatmentMDP(horizon=3)
    episodes = mdp.simulate_actions(np.array([[0, 1, 2], [3, 3, 0]]))
    data = transitions([episodes], mdp.n_actions)
    assert data.actions.tolist() == [0, 1, 2, 3, 3, 0]
    assert np.array_equal(data.next_observations[4], episodes.observations[1, 2])
    assert np.array_equal(data.rewards, episodes.rewards.ravel()) and not data.terminal.any()


def test_hiv_policy_experiment_is_deterministic_and_batch_invariant():
    config = POLICY.config("smoke")
    both = policy_trials(config, [trial_generator(config.root_seed, i) for i in range(2)])
    alone = policy_trials(config, [trial_generator(config.root_seed, 1)])
    for key, value in alone.items():
        assert np.array_equal(both[key][1:], value), key
    assert both["weights"].shape == (2, 4, 28)
    assert not np.array_equal(both["weights"][0], both["weights"][1])
    assert np.array_equal(both["constant_returns"][0], both["constant_returns"][1])
    # the behaviour is a proper softmax and the ratios are 1{greedy} / pi_b
    weights = both["weights"][0]  # the smoke policy's, which behaviour_data("smoke") uses
    data, rho = behaviour_data("smoke", 1e5, 5, np.random.default_rng(1))
    observations = data.observations[:, :-1].reshape(-1, 6)
    probs = behaviour_probabilities(weights, 1e5, observations, degree=2)
    assert probs.sum(axis=1) == pytest.approx(1.0)
    taken = data.actions.ravel()
    greedy = (q_features(2)(observations) @ weights.T).argmax(axis=1)
    expected = np.where(taken == greedy, 1 / probs[np.arange(taken.size), taken], 0.0)
    assert rho.ravel() == pytest.approx(expected)
    with pytest.raises(ValueError, match="temperature"):
        behaviour_policy(weights, 0.0, degree=2)
