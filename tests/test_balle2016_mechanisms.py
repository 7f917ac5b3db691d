"""Releases of DP-LSW and DP-LSL (Balle et al. 2016, Algorithms 1 and 2), the global-
sensitivity comparison, and refusal of bad inputs to the statistics and mechanisms."""

import numpy as np
import pytest

from dprl import balle2016 as b
from dprl.envs import ChainMDP, Trajectories
from dprl.features import aggregation_features
from dprl.seeding import trial_generator

MDP = ChainMDP(n_states=10, horizon=100, gamma=0.9)
PHI = aggregation_features(10, 2)
RHO = MDP.start_probabilities
EPS, DELTA = 1.0, 0.1
LAM = 2 * b.ridge_threshold(PHI, RHO)


@pytest.fixture(scope="module")
def sample() -> Trajectories:
    return MDP.sample(2000, trial_generator(2016, 2))


def _data(trajectories: Trajectories) -> b.FirstVisitData:
    return b.first_visit_data(trajectories, MDP.gamma, 10, r_max=1.0)


def _replicated(data: b.FirstVisitData, n: int) -> b.FirstVisitData:
    """``n`` copies of one data set as a batch."""
    return b.FirstVisitData(np.broadcast_to(data.returns, (n, *data.returns.shape)),
                            np.broadcast_to(data.visited, (n, *data.visited.shape)),
                            data.return_bound)


@pytest.mark.parametrize("release, estimate, scale", [
    (lambda X, rng: b.dp_lsw(X, PHI, RHO, EPS, DELTA, rng), lambda X: b.lsw(X, PHI, RHO),
     lambda X: b.dp_lsw_noise_scale(X, PHI, RHO, EPS, DELTA)),
    (lambda X, rng: b.dp_lsl(X, PHI, RHO, LAM, EPS, DELTA, rng),
     lambda X: b.lsl(X, PHI, RHO, LAM),
     lambda X: b.dp_lsl_noise_scale(X, PHI, RHO, LAM, EPS, DELTA)),
], ids=["dp-lsw", "dp-lsl"])
def test_release_noise_has_scale_sigma(sample, release, estimate, scale):
    """(theta_hat - theta) / sigma_X is standard normal: 4000 x 5 draws, mean within 5
    standard errors of 0, standard deviation within 3% of 1 (its standard error is 0.5%)."""
    X = _replicated(_data(sample.first(30)), 4000)
    standardised = (release(X, np.random.default_rng(3)) - estimate(X)) / scale(X)[..., None]
    assert abs(standardised.mean()) < 5 / np.sqrt(standardised.size)
    assert abs(standardised.std() - 1) < 0.03
    again = release(X, np.random.default_rng(3))
    np.testing.assert_array_equal(again, release(X, np.random.default_rng(3)))


def test_gaussian_perturbation_uses_the_generator_as_documented():
    theta, sigma = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([0.5, 2.0])
    expected = theta + sigma[:, None] * np.random.default_rng(7).standard_normal((2, 2))
    np.testing.assert_array_equal(b.gaussian_perturbation(theta, sigma, np.random.default_rng(7)),
                                  expected)


def test_one_generator_per_data_set_makes_releases_batch_invariant(sample):
    X = _data(sample.reshape(4, 500).first(30))
    rngs = [trial_generator(7, i) for i in range(4)]
    together = b.dp_lsl(X, PHI, RHO, LAM, EPS, DELTA, rngs)
    alone = b.dp_lsl(b.FirstVisitData(X.returns[2], X.visited[2], X.return_bound), PHI, RHO,
                     LAM, EPS, DELTA, trial_generator(7, 2))
    np.testing.assert_array_equal(together[2], alone)


def test_smooth_noise_vanishes_with_m_and_global_noise_does_not(sample):
    """Sec. 4.1 remark: the global bound (Cor. 3 at |X_s| <= 1) is the same for every m, while
    sigma_X of DP-LSW falls as every state gets visited often; DP-LSL's smooth sigma_X never
    exceeds its global counterpart, which grows like sqrt(m) at fixed lambda."""
    sizes = (50, 200, 2000)
    lsw_sigma = [float(b.dp_lsw_noise_scale(_data(sample.first(m)), PHI, RHO, EPS, DELTA))
                 for m in sizes]
    lsw_global = b.lsw_global_noise_scale(PHI, RHO, 1 / (1 - MDP.gamma), EPS, DELTA)
    assert lsw_sigma[0] > lsw_sigma[1] > lsw_sigma[2]
    assert lsw_sigma[0] <= lsw_global and lsw_sigma[2] < 0.02 * lsw_global  # 0.016
    lsl_global = [b.lsl_global_noise_scale(PHI, RHO, LAM, m, 1 / (1 - MDP.gamma), EPS, DELTA)
                  for m in sizes]
    lsl_sigma = [float(b.dp_lsl_noise_scale(_data(sample.first(m)), PHI, RHO, LAM, EPS, DELTA))
                 for m in sizes]
    assert all(s <= g for s, g in zip(lsl_sigma, lsl_global))
    assert lsl_global[0] < lsl_global[1] < lsl_global[2]


def test_lemma9_as_printed_never_adds_less_noise(sample):
    X = _data(sample.first(200))
    printed = b.dp_lsl_noise_scale(X, PHI, RHO, LAM, EPS, DELTA, "max")
    assert printed >= b.lsl_global_noise_scale(PHI, RHO, LAM, 200, X.return_bound, EPS, DELTA)


def _negative_reward() -> Trajectories:
    return Trajectories([[0, 1, 2]], [[-0.5, 1.0]], [2], np.array([True]), (-1.0, 1.0))


@pytest.mark.parametrize("call, match", [
    (lambda X, T: b.first_visit_data(_negative_reward(), 0.9, 10, 1.0), r"rewards must lie in \[0"),
    (lambda X, T: b.first_visit_data(T, 0.9, 10, r_max=0.5), r"rewards must lie in \[0.0, 0.5\]"),
    (lambda X, T: b.first_visit_data(T, 0.9, 10, 1.0, f_max=0.5), r"returns must lie in"),
    (lambda X, T: b.first_visit_data(T, 0.9, 10, r_max=0.0), "r_max must be > 0"),
    (lambda X, T: b.first_visit_data(T.states, 0.9, 10, 1.0), "must be a Trajectories"),
    (lambda X, T: b.FirstVisitData(np.zeros((0, 10)), np.zeros((0, 10), bool), 1.0), "empty"),
    (lambda X, T: b.FirstVisitData(np.zeros(10), np.zeros(10, bool), 1.0), r"\(\*datasets, m"),
    (lambda X, T: b.FirstVisitData(X.returns, X.visited[:-1], 10.0), "visited must be a bool"),
    (lambda X, T: b.FirstVisitData(X.returns + 0.1, X.visited, 10.0), "0 where the state"),
    (lambda X, T: b.dp_lsw_noise_scale(X, PHI, RHO, 0.0, DELTA), "eps must be > 0"),
    (lambda X, T: b.dp_lsw_noise_scale(X, PHI, RHO, EPS, 1.5), r"delta must lie in \(0, 1\)"),
    (lambda X, T: b.dp_lsl_noise_scale(X, PHI, RHO, -1.0, EPS, DELTA), "lam must be > 0"),
    (lambda X, T: b.dp_lsl_noise_scale(X, PHI, RHO, LAM / 2, EPS, DELTA),
     r"lam must exceed \|\|Phi\|\|_2\^2 \|\|rho\|\|_inf = 0.2"),
    (lambda X, T: b.ridge_constant(PHI, RHO, LAM / 2), "lam must exceed"),
    (lambda X, T: b.dp_lsl(X, PHI, RHO, LAM, EPS, DELTA, np.random.default_rng(), "Max"),
     "lemma9_variant"),
    (lambda X, T: b.dp_lsw(X, PHI, RHO, EPS, DELTA, 3), "rng must be a numpy.random.Generator"),
    (lambda X, T: b.gaussian_perturbation(np.zeros((2, 3)), np.ones(2),
                                          [np.random.default_rng()]), "one per data set"),
    (lambda X, T: b.gaussian_perturbation([[1.0]], [0.0], np.random.default_rng()),
     "sigma must be > 0"),
    (lambda X, T: b.gaussian_perturbation([1.0], [1.0], np.random.default_rng()),
     r"sigma must have shape \(\)"),
    (lambda X, T: b.visit_weights(X.returns, RHO), "data must be a FirstVisitData"),
    (lambda X, T: b.lsw_global_noise_scale(PHI, RHO, 0.0, EPS, DELTA), "return_bound"),
    (lambda X, T: b.lsl_global_noise_scale(PHI, RHO, LAM, 0, 10.0, EPS, DELTA), "m must be"),
])
def test_bad_inputs_raise(sample, call, match):
    with pytest.raises(ValueError, match=match):
        call(_data(sample.first(20)), sample.first(20))


def test_ridge_threshold_is_at_the_boundary():
    """lambda = ||Phi||_2^2 ||rho||_inf exactly is refused; just above it is accepted."""
    threshold = b.ridge_threshold(PHI, RHO)
    assert threshold == pytest.approx(2 * 0.1)  # pairs: ||Phi||_2^2 = 2; rho = 1/10
    with pytest.raises(ValueError, match="lam must exceed"):
        b.ridge_constant(PHI, RHO, threshold)
    assert b.ridge_constant(PHI, RHO, threshold * (1 + 1e-9)) > 0
