"""Balle et al. (2016) on a data set small enough to compute by hand: F_X, |X_s|, K_X, Gamma_X,
LSW, LSL and the noise scales of DP-LSW and DP-LSL."""

import numpy as np
import pytest

from dprl import balle2016 as b
from dprl.envs import Trajectories

GAMMA = 0.5
PHI = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])  # states 0 and 1 aggregated, d = 2
RHO = np.array([1.0, 0.5, 1.0])
W = np.array([0.5, 0.25, 0.25])
LAM = 3.0
EPS, DELTA = 1.0, 2 * np.exp(-2.0)  # ln(2 / delta) = 2: alpha = 5 sqrt(4) = 10, beta = 1/16


@pytest.fixture(scope="module")
def data() -> b.FirstVisitData:
    """x1: 0 -0-> 1 -1-> 2 (terminal); x2: 1 -0-> 1 -1-> 2 (terminal);
    x3: 2 -0-> 0 -0.5-> 1 (truncated at H = 2). R_max = 1, so F_max = 1 / (1 - 0.5) = 2."""
    trajectories = Trajectories(states=[[0, 1, 2], [1, 1, 2], [2, 0, 1]],
                                rewards=[[0.0, 1.0], [0.0, 1.0], [0.0, 0.5]], lengths=[2, 2, 2],
                                terminated=np.array([True, True, False]), reward_range=(0.0, 1.0))
    return b.first_visit_data(trajectories, GAMMA, 3, r_max=1.0)


def test_statistics(data):
    # F_{x1,0} = 0 + 0.5 * 1 = 0.5, F_{x1,1} = 1; F_{x2,1} = 0 + 0.5 * 1 = 0.5;
    # F_{x3,2} = 0 + 0.5 * 0.5 = 0.25, F_{x3,0} = 0.5
    np.testing.assert_array_equal(data.returns, [[0.5, 1, 0], [0, 0.5, 0], [0.5, 0, 0.25]])
    np.testing.assert_array_equal(data.counts, [2, 2, 1])
    assert data.max_count == 2 and data.return_bound == 2.0 and data.n_trajectories == 3
    # F_X = ((0.5 + 0.5) / 2, (1 + 0.5) / 2, 0.25 / 1)
    np.testing.assert_allclose(data.mean_returns, [0.5, 0.75, 0.25], rtol=0, atol=1e-15)
    # Gamma_X = rho_s |X_s| / m = (1 * 2/3, 0.5 * 2/3, 1 * 1/3)
    np.testing.assert_allclose(b.visit_weights(data, RHO), [2 / 3, 1 / 3, 1 / 3], rtol=1e-15)


def test_estimators(data):
    # LSW: group {0, 1} gets (0.5 * 0.5 + 0.25 * 0.75) / (0.5 + 0.25) = 0.4375 / 0.75 = 7/12
    np.testing.assert_allclose(b.lsw(data, PHI, W), [7 / 12, 0.25], rtol=1e-14)
    # LSL: Phi^T Gamma_X Phi = diag(1, 1/3), Phi^T Gamma_X F_X = (2/3 * 0.5 + 1/3 * 0.75,
    # 1/3 * 0.25) = (7/12, 1/12), lambda / 2m = 0.5: theta = (7/12 / 1.5, 1/12 / (5/6))
    np.testing.assert_allclose(b.lsl(data, PHI, RHO, LAM), [7 / 18, 0.1], rtol=1e-14)


def test_objectives(data):
    theta = np.array([0.5, 0.0])
    # J_X = (1/3) [1 * 0^2 + 0.5 * 0.5^2 + 0.5 * 0^2 + 1 * 0^2 + 1 * 0.25^2] = 0.1875 / 3
    assert b.objective(data, PHI, RHO, theta) == pytest.approx(0.0625)
    # J^w = 0.5 * 0^2 + 0.25 * 0.25^2 + 0.25 * 0.25^2
    assert b.weighted_objective(data, PHI, W, theta) == pytest.approx(0.03125)
    # J^lambda = J_X + 3 / 6 * 0.25
    assert b.ridge_objective(data, PHI, RHO, LAM, theta) == pytest.approx(0.1875)


def test_noise_scales(data):
    assert b.smoothing_constants(EPS, DELTA, 2) == pytest.approx((10.0, 1 / 16))
    # DP-LSW: Phi^T Gamma Phi = diag(0.75, 0.25), so ||(Gamma^1/2 Phi)^+|| = 1 / 0.5 = 2.
    # phi_0 = 0.5/4 + 0.25/4 + 0.25/1 = 0.4375, phi_1 = phi_2 = 1 (K_X = 2); the maximum of
    # (0.4375, e^{-1/16}, e^{-2/16}) is e^{-1/16}: sigma = 10 * 2 * 2 * e^{-1/32}
    assert b.dp_lsw_noise_scale(data, PHI, W, EPS, DELTA) == pytest.approx(40 * np.exp(-1 / 32))
    # DP-LSL: ||Phi|| = sqrt(2), ||rho||_inf = 1, threshold 2, c = sqrt(2) / sqrt(6);
    # ||rho||_2 = 1.5; sum_s rho_s min{|X_s| + k, 3} = 4, 6.5, 7.5, 7.5 for k = 0..3, so
    # e^{-k/16} phi_k = 7.05, 8.30, 8.38, 7.87: k = 2 wins with (sqrt(7.5 / 3) + 1.5)^2 e^{-1/8}
    assert b.ridge_threshold(PHI, RHO) == pytest.approx(2.0)
    assert b.ridge_constant(PHI, RHO, LAM) == pytest.approx(1 / np.sqrt(3))
    factor = 2 * 10 * 2 * np.sqrt(2) / (LAM - 2)
    expected = factor * (np.sqrt(2.5) + 1.5) * np.exp(-1 / 16)
    assert b.dp_lsl_noise_scale(data, PHI, RHO, LAM, EPS, DELTA) == pytest.approx(expected)
    # Lemma 9 as printed: max{|X_s| + k, 3} sums to 7.5, 7.5, 9, 11.5; k = 3 wins with
    # (sqrt(11.5 / 3) + 1.5)^2 e^{-3/16}, above even the worst case (sqrt(7.5 / 3) + 1.5)^2
    printed = factor * (np.sqrt(11.5 / 3) + 1.5) * np.exp(-3 / 32)
    assert b.dp_lsl_noise_scale(data, PHI, RHO, LAM, EPS, DELTA, "max") == pytest.approx(printed)


def test_public_return_bound_and_global_scales(data):
    # F_max = 1 (all returns here are <= 1) halves both noise scales
    tight = b.FirstVisitData(data.returns, data.visited, 1.0)
    assert b.dp_lsw_noise_scale(tight, PHI, W, EPS, DELTA) == pytest.approx(20 * np.exp(-1 / 32))
    # global LSW: 10 * 2 * 2 * sqrt(0.5 + 0.25 + 0.25); global LSL: every |X_s| = 3
    assert b.lsw_global_noise_scale(PHI, W, 2.0, EPS, DELTA) == pytest.approx(40.0)
    expected = 2 * 10 * 2 * np.sqrt(2) * (np.sqrt(2.5) + 1.5)
    assert b.lsl_global_noise_scale(PHI, RHO, LAM, 3, 2.0, EPS, DELTA) == pytest.approx(expected)
