"""First-visit Monte Carlo, TD statistics, LSTD, TD(0), GTD2, the MSPBE and error measures."""

import numpy as np
import pytest

from dprl import policy_evaluation as pe
from dprl.envs import ChainMDP, Trajectories
from dprl.features import aggregation_features, tabular_features
from dprl.seeding import trial_generator

GAMMA = 0.5


@pytest.fixture(scope="module")
def hand_built() -> Trajectories:
    """x1: 0 -0.25-> 0 -1-> 1 -0.5-> 3 (terminal); x2: 2 -1-> 1 -0-> 2 -0-> 1 -1-> 0 (truncated)."""
    return Trajectories(states=[[0, 0, 1, 3, -1], [2, 1, 2, 1, 0]],
                        rewards=[[0.25, 1.0, 0.5, 0.0], [1.0, 0.0, 0.0, 1.0]],
                        lengths=[3, 4], terminated=np.array([True, False]), reward_range=(0.0, 1.0))


@pytest.fixture(scope="module")
def chain() -> ChainMDP:
    return ChainMDP()


@pytest.fixture(scope="module")
def sample(chain):
    return chain.sample(20_000, trial_generator(2019, 0))


@pytest.fixture(scope="module")
def small():
    """A small chain (N = 8, gamma = 0.9): three data sets of 200 episodes."""
    mdp = ChainMDP(n_states=8, horizon=50, gamma=0.9)
    return mdp, mdp.sample((3, 200), trial_generator(2019, 1))


def test_first_visit_returns_by_hand(hand_built):
    F, visited = pe.first_visit_returns(hand_built, GAMMA, 4)
    # x1 returns-to-go 0.875, 1.25, 0.5; x2: 1.125, 0.25, 0.5, 1 (s_L is not visited)
    np.testing.assert_allclose(F, [[0.875, 0.5, 0, 0], [0, 0.25, 1.125, 0]])
    np.testing.assert_array_equal(visited, [[True, True, False, False], [False, True, True, False]])
    values, counts = pe.monte_carlo_values(hand_built, GAMMA, 4)
    np.testing.assert_allclose(values, [0.875, 0.375, 1.125, np.nan])
    np.testing.assert_array_equal(counts, [1, 2, 1, 0])


def test_td_statistics_by_hand(hand_built):
    K = np.zeros((4, 4))  # non-terminal transition counts
    for s, s_next in [(0, 0), (0, 1), (2, 1), (1, 2), (2, 1), (1, 0)]:
        K[s, s_next] += 1
    A, b, C = pe.td_statistics(hand_built, tabular_features(4), GAMMA)
    np.testing.assert_allclose(C, np.diag([2, 3, 2, 0]) / 7)
    np.testing.assert_allclose(A, (np.diag([2, 3, 2, 0]) - GAMMA * K) / 7)
    np.testing.assert_allclose(b, [1.25 / 7, 1.5 / 7, 1 / 7, 0])
    A, b, C = pe.td_statistics(hand_built, tabular_features(4), GAMMA, "trajectories")
    np.testing.assert_allclose(C, (np.diag([2, 1, 0, 0]) / 3 + np.diag([0, 2, 2, 0]) / 4) / 2)
    K1, K2 = np.zeros((4, 4)), np.zeros((4, 4))
    K1[0, 0] = K1[0, 1] = 1
    K2[2, 1], K2[1, 2], K2[1, 0] = 2, 1, 1
    np.testing.assert_allclose(A, ((np.diag([2, 1, 0, 0]) - GAMMA * K1) / 3
                                   + (np.diag([0, 2, 2, 0]) - GAMMA * K2) / 4) / 2)
    np.testing.assert_allclose(b, [1.25 / 6, 0.5 / 6 + 1 / 8, 1 / 8, 0])


def test_single_td0_and_gtd2_updates_by_hand():
    one = Trajectories(states=[[0, 1]], rewards=[[1.0]], lengths=[1], terminated=np.array([False]),
                       reward_range=(0.0, 1.0))
    Phi = np.array([[1.0, 2.0], [0.5, -1.0]])
    theta0, w0 = np.array([0.1, 0.2]), np.array([0.3, -0.1])
    delta = 1 + GAMMA * Phi[1] @ theta0 - Phi[0] @ theta0
    np.testing.assert_allclose(pe.td0(one, Phi, GAMMA, 0.1, theta0=theta0),
                               theta0 + 0.1 * delta * Phi[0])
    theta, w = pe.gtd2(one, Phi, GAMMA, 0.1, 0.3, theta0=theta0, w0=w0)
    phi_w = Phi[0] @ w0
    np.testing.assert_allclose(theta, theta0 + 0.1 * (Phi[0] - GAMMA * Phi[1]) * phi_w)
    np.testing.assert_allclose(w, w0 + 0.3 * (delta - phi_w) * Phi[0])


def per_trajectory_moments(trajectories, features, gamma):
    """Per-trajectory statistics (data sets of one trajectory), flattened: ``(n, k)``."""
    n = trajectories.batch_shape[0]
    return np.hstack([M.reshape(n, -1) for M in
                      pe.td_statistics(trajectories.reshape(n, 1), features, gamma)])


def test_sample_statistics_converge_to_exact_ones():
    """z-scores of the sample statistics against the exact ones, for both normalisations:
    per-trajectory averages are i.i.d. means; per-transition ones are ratio estimators."""
    mdp = ChainMDP(n_states=8, horizon=30, stay_prob=0.6, gamma=0.9)
    sample = mdp.sample(20_000, trial_generator(2019, 2))
    Phi = np.random.default_rng(0).uniform(-1, 1, size=(8, 3))
    Y = per_trajectory_moments(sample, Phi, mdp.gamma)
    X, L = Y * sample.lengths[:, None], sample.lengths
    ratio = X.sum(axis=0) / L.sum()
    estimates = {"trajectories": (Y.mean(axis=0), Y.std(axis=0, ddof=1) / np.sqrt(len(Y))),
                 "transitions": (ratio, np.sqrt(((X - np.outer(L, ratio)) ** 2).sum(axis=0))
                                 / L.sum())}
    for normalisation, (mean, error) in estimates.items():
        pooled = np.hstack([M.ravel() for M in
                            pe.td_statistics(sample, Phi, mdp.gamma, normalisation)])
        np.testing.assert_allclose(pooled, mean, atol=1e-12)
        exact = np.hstack([M.ravel() for M in pe.exact_td_statistics(mdp, Phi, normalisation)])
        z = np.abs(mean - exact) / error
        assert z.max() < 5 and np.all(error > 0), normalisation


def test_the_two_normalisations_weight_differently(chain):
    Phi = tabular_features(40)
    per_transition = pe.exact_td_statistics(chain, Phi)
    per_trajectory = pe.exact_td_statistics(chain, Phi, "trajectories")
    np.testing.assert_allclose(np.diag(per_transition[2]), chain.on_policy_distribution())
    assert np.abs(per_trajectory[2] - per_transition[2]).max() > 1e-3
    assert np.trace(per_trajectory[2]) == pytest.approx(1.0)


def test_lstd_on_exact_statistics_is_the_exact_value_function(chain):
    A, b, _ = pe.exact_td_statistics(chain, tabular_features(40))
    np.testing.assert_allclose(np.linalg.solve(A, b), chain.value_function(), atol=1e-10)


def test_lstd_approaches_the_exact_values(chain, sample):
    Phi = tabular_features(40)
    theta = pe.lstd(sample, Phi, chain.gamma)
    A, b, _ = pe.td_statistics(sample, Phi, chain.gamma)
    np.testing.assert_allclose(A @ theta, b, atol=1e-12)
    assert pe.rmse(theta, chain.value_function()) < 2e-3
    ridged = pe.lstd(sample, Phi, chain.gamma, ridge=0.1)
    np.testing.assert_allclose((A + 0.1 * np.eye(40)) @ ridged, b, atol=1e-12)


def test_lstd_with_per_trajectory_statistics_solves_xies_estimating_equation(chain, sample):
    Phi = tabular_features(40)
    theta = pe.lstd(sample, Phi, chain.gamma, normalisation="trajectories")
    A, b, _ = pe.td_statistics(sample, Phi, chain.gamma, normalisation="trajectories")
    np.testing.assert_allclose(A @ theta, b, atol=1e-12)
    A_exact, b_exact, _ = pe.exact_td_statistics(chain, Phi, normalisation="trajectories")
    fixed_point = np.linalg.solve(A_exact, b_exact)
    assert pe.rmse(theta, fixed_point) < 2e-3 < pe.rmse(fixed_point, chain.value_function())


def test_monte_carlo_values_approach_the_exact_values(chain, sample):
    values, counts = pe.monte_carlo_values(sample, chain.gamma, 40)
    _, visited = pe.first_visit_returns(sample, chain.gamma, 40)
    np.testing.assert_array_equal(counts, visited.sum(axis=0))
    assert pe.rmse(values, chain.value_function()) < 2e-3


def test_batches_of_data_sets_match_separate_runs(small):
    mdp, batch = small
    Phi = tabular_features(8)
    datasets = [Trajectories(batch.states[i], batch.rewards[i], batch.lengths[i],
                             batch.terminated[i], batch.reward_range) for i in range(3)]
    runs = {"mc": lambda t: pe.monte_carlo_values(t, mdp.gamma, 8)[0],
            "stats": lambda t: pe.td_statistics(t, Phi, mdp.gamma, "trajectories")[0],
            "lstd": lambda t: pe.lstd(t, Phi, mdp.gamma),
            "td0": lambda t: pe.td0(t, Phi, mdp.gamma, 0.05),
            "gtd2": lambda t: pe.gtd2(t, Phi, mdp.gamma, 0.05, 0.5)[0]}
    for name, run in runs.items():
        together = run(batch)
        for i, dataset in enumerate(datasets):
            np.testing.assert_allclose(together[i], run(dataset), atol=1e-12, err_msg=name)


def test_td0_and_gtd2_converge_near_lstd(small):
    mdp, batch = small
    Phi = tabular_features(8)
    target = pe.lstd(batch, Phi, mdp.gamma)
    assert np.abs(target - mdp.value_function()).max() < 0.05
    assert np.abs(pe.td0(batch, Phi, mdp.gamma, 0.01, n_epochs=30) - target).max() < 0.02
    theta, _ = pe.gtd2(batch, Phi, mdp.gamma, 0.05, 0.5, n_epochs=20)
    assert np.abs(theta - target).max() < 0.05
    A, b, C = pe.td_statistics(batch, Phi, mdp.gamma)
    assert np.all(pe.mspbe(theta, A, b, C) < 1e-3 * pe.mspbe(np.zeros(8), A, b, C))


def test_per_feature_step_sizes(small):
    mdp, batch = small
    Phi = tabular_features(8)
    np.testing.assert_allclose(pe.td0(batch, Phi, mdp.gamma, np.full(8, 0.05)),
                               pe.td0(batch, Phi, mdp.gamma, 0.05))
    slow_last = np.r_[np.full(7, 0.05), 1e-9]
    assert np.all(np.abs(pe.td0(batch, Phi, mdp.gamma, slow_last)[:, -1]) < 1e-8)


def test_mspbe_is_zero_at_the_td_fixed_point_and_a_projected_error(chain):
    Phi = aggregation_features(40, 2)
    A, b, C = pe.exact_td_statistics(chain, Phi)
    fixed_point = np.linalg.solve(A, b)
    assert pe.mspbe(fixed_point, A, b, C) < 1e-20
    theta = np.random.default_rng(0).normal(size=(5, 20))
    value = pe.mspbe(theta, A, b, C)
    assert value.shape == (5,) and np.all(value > 1e-4)
    D = np.diag(chain.on_policy_distribution())  # ||Pi (T v - v)||_D^2 with v = Phi theta
    v = theta @ Phi.T
    bellman = chain.expected_rewards() + chain.gamma * v @ chain.live_matrix().T - v
    projected = bellman @ (Phi @ np.linalg.solve(Phi.T @ D @ Phi, Phi.T @ D)).T
    np.testing.assert_allclose(value, np.einsum("ks,st,kt->k", projected, D, projected), rtol=1e-8)


def test_weighted_rmse():
    v_hat, v = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]), np.array([1.0, 1.0, 1.0])
    np.testing.assert_allclose(pe.weighted_rmse(v_hat, v, [0.5, 0.5, 0.0]), [np.sqrt(0.5), 1.0])
    assert pe.weighted_rmse(v_hat[0], v, [2.0, 2.0, 2.0]) == pytest.approx(np.sqrt(5 / 3))
    assert pe.rmse(v_hat[0], v) == pytest.approx(np.sqrt(5 / 3))


# --- bad inputs ---------------------------------------------------------------------------

def bad_calls(hand_built):
    Phi, other = tabular_features(4), tabular_features(3)
    A, b, C = np.eye(2), np.ones(2), np.eye(2)
    return [
        lambda: pe.first_visit_returns(hand_built, 1.0, 4),
        lambda: pe.first_visit_returns(hand_built, -0.1, 4),
        lambda: pe.first_visit_returns(hand_built, GAMMA, 3),  # state 3 out of range
        lambda: pe.first_visit_returns(hand_built, GAMMA, 4.0),
        lambda: pe.monte_carlo_values(hand_built.states, GAMMA, 4),
        lambda: pe.td_statistics(hand_built, other, GAMMA),
        lambda: pe.td_statistics(hand_built, np.ones(4), GAMMA),
        lambda: pe.td_statistics(hand_built, Phi * np.nan, GAMMA),
        lambda: pe.td_statistics(hand_built, Phi, GAMMA, "episodes"),
        lambda: pe.lstd(hand_built, Phi, GAMMA),  # state 3 is never left: A is singular
        lambda: pe.lstd(hand_built, Phi, GAMMA, ridge=-1.0),
        lambda: pe.td0(hand_built, Phi, GAMMA, 0.0),
        lambda: pe.td0(hand_built, Phi, GAMMA, np.ones(3)),
        lambda: pe.td0(hand_built, Phi, GAMMA, 0.1, theta0=np.ones(3)),
        lambda: pe.td0(hand_built, Phi, GAMMA, 0.1, n_epochs=0),
        lambda: pe.td0(hand_built, Phi, GAMMA, 0.1, n_epochs=1.5),
        lambda: pe.gtd2(hand_built, Phi, GAMMA, 0.1, -0.1),
        lambda: pe.gtd2(hand_built, Phi, GAMMA, 0.1, 0.1, w0=np.ones((2, 4))),
        lambda: pe.exact_td_statistics(ChainMDP(n_states=4), other),
        lambda: pe.exact_td_statistics("chain", Phi),
        lambda: pe.mspbe(np.ones(3), A, b, C),
        lambda: pe.mspbe(np.ones(2), A, b, np.array([[1.0, 2.0], [2.0, 1.0]])),  # not PD
        lambda: pe.mspbe(np.ones(2), A, b, np.array([[1.0, 0.5], [0.0, 1.0]])),  # not symmetric
        lambda: pe.mspbe(1.0, A, b, C),
        lambda: pe.weighted_rmse([1.0, 2.0], [1.0, 2.0], [-1.0, 2.0]),
        lambda: pe.weighted_rmse([1.0, 2.0], [1.0, 2.0], [0.0, 0.0]),
        lambda: pe.weighted_rmse([1.0, np.nan], [1.0, 2.0], [1.0, 1.0]),
        lambda: pe.weighted_rmse([1.0, 2.0, 3.0], [1.0, 2.0], [1.0, 1.0]),
        lambda: pe.rmse([], []),
    ]


@pytest.mark.parametrize("index", range(29))
def test_bad_inputs(hand_built, index):
    calls = bad_calls(hand_built)
    assert len(calls) == 29
    with pytest.raises(ValueError):
        calls[index]()
