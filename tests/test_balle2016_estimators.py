"""LSW and LSL (Balle et al. 2016, Eqs. 8 and 11) minimise their objectives; statistics,
estimators and noise scales are batch-invariant; bad inputs are refused."""

import numpy as np
import pytest

from dprl import balle2016 as b
from dprl.envs import ChainMDP
from dprl.features import aggregation_features, tabular_features
from dprl.seeding import trial_generator

MDP = ChainMDP(n_states=40, horizon=200, gamma=0.99)
PHI = aggregation_features(40, 2)
RHO = MDP.start_probabilities
LAM = 5.0


@pytest.fixture(scope="module")
def data() -> b.FirstVisitData:
    """A (3, 4) grid of data sets of 25 chain trajectories."""
    return b.first_visit_data(MDP.sample((3, 4, 25), trial_generator(2016, 1)), MDP.gamma, 40,
                              r_max=1.0)


def _gradient(function, theta: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """Central differences of a per-data-set function, ``(*datasets, d)``."""
    steps = np.eye(theta.shape[-1]) * h
    return np.stack([(function(theta + e) - function(theta - e)) / (2 * h) for e in steps], -1)


@pytest.mark.parametrize("estimator, objective", [
    (lambda X: b.lsw(X, PHI, RHO), lambda X, t: b.weighted_objective(X, PHI, RHO, t)),
    (lambda X: b.lsl(X, PHI, RHO, LAM), lambda X, t: b.ridge_objective(X, PHI, RHO, LAM, t)),
], ids=["lsw", "lsl"])
def test_estimators_minimise_their_objectives(data, estimator, objective):
    theta = estimator(data)
    assert np.abs(_gradient(lambda t: objective(data, t), theta)).max() < 1e-8
    rng = np.random.default_rng(0)
    best = objective(data, theta)
    for scale in (1e-3, 1e-1, 10.0):
        perturbed = theta + scale * rng.standard_normal(theta.shape)
        assert np.all(objective(data, perturbed) > best)


def test_objective_is_gamma_x_weighted_least_squares(data):
    """J_X(theta) - sum_s Gamma_X(s) (F_X(s) - phi_s^T theta)^2 does not depend on theta
    (the identity behind Eq. 5): Gamma_X = rho_s |X_s| / m is the right weighting."""
    gamma_x, rng = b.visit_weights(data, RHO), np.random.default_rng(1)
    differences = []
    for _ in range(3):
        theta = rng.standard_normal((*data.datasets_shape, PHI.shape[1]))
        fitted = (gamma_x * (data.mean_returns - theta @ PHI.T) ** 2).sum(axis=-1)
        differences.append(b.objective(data, PHI, RHO, theta) - fitted)
    np.testing.assert_allclose(differences[1:], [differences[0]] * 2, atol=1e-12)


def test_tabular_lsw_is_monte_carlo(data):
    """Tabular features and positive weights: LSW returns F_X itself (Eq. 8)."""
    theta = b.lsw(data, tabular_features(40), RHO)
    np.testing.assert_allclose(theta, data.mean_returns, atol=1e-12)


def _outputs(X: b.FirstVisitData) -> list[np.ndarray]:
    eps, delta, theta = 0.5, 0.1, np.full((*X.datasets_shape, 20), 0.5)
    return [X.mean_returns, X.counts, X.max_count, b.visit_weights(X, RHO),
            b.objective(X, PHI, RHO, theta), b.weighted_objective(X, PHI, RHO, theta),
            b.ridge_objective(X, PHI, RHO, LAM, theta), b.lsw(X, PHI, RHO),
            b.lsl(X, PHI, RHO, LAM), b.dp_lsw_noise_scale(X, PHI, RHO, eps, delta),
            *(b.dp_lsl_noise_scale(X, PHI, RHO, LAM, eps, delta, v) for v in b.LEMMA9_VARIANTS)]


def test_batch_invariance(data):
    """Every data set's outputs are bit-identical alone, in a sub-batch and in the grid."""
    together = _outputs(data)
    for i, j in [(0, 0), (1, 2), (2, 3)]:
        alone = _outputs(b.FirstVisitData(data.returns[i, j], data.visited[i, j],
                                          data.return_bound))
        for whole, single in zip(together, alone):
            np.testing.assert_array_equal(single, whole[i, j], strict=True)
    row = _outputs(b.FirstVisitData(data.returns[1], data.visited[1], data.return_bound))
    for whole, part in zip(together, row):
        np.testing.assert_array_equal(part, whole[1], strict=True)


@pytest.mark.parametrize("call, match", [
    (lambda X: b.lsw(X, PHI[:-1], RHO), r"features must have shape \(40, 'any'\)"),
    (lambda X: b.lsw(X, PHI, RHO[:-1]), r"weights must have shape \(40,\)"),
    (lambda X: b.lsw(X, PHI, -RHO), "weights must lie in"),
    (lambda X: b.lsw(X, PHI, np.r_[0.0, 0.0, RHO[2:]]), "must be invertible"),
    (lambda X: b.lsl(X, PHI, RHO, 0.0), "lam must be > 0"),
    (lambda X: b.lsl(X, PHI, 2 * np.ones(40), LAM), r"rho must lie in \[0, 1.0\]"),
    (lambda X: b.lsl(X.returns, PHI, RHO, LAM), "data must be a FirstVisitData"),
    (lambda X: b.objective(X, PHI, RHO, np.zeros(20)), r"theta must have shape \(3, 4, 20\)"),
    (lambda X: b.ridge_objective(X, PHI, RHO, -1.0, np.zeros((3, 4, 20))), "lam must be > 0"),
])
def test_bad_inputs_raise(data, call, match):
    with pytest.raises(ValueError, match=match):
        call(data)
