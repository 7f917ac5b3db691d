"""The authors'-code variant of DP-LSW / DP-LSL (Balle et al. 2016, Sec. 6) against
closed forms and term-by-term loops."""

import numpy as np
import pytest

from dprl import balle2016 as b
from dprl.balle2016.authors_code import (authors_dp_lsw, authors_lsl_noise_scale,
                                         authors_lsw_noise_scale, authors_ridge_threshold)
from dprl.balle2016.statistics import FirstVisitSummary

EPS, DELTA = 0.1, 0.1


def summary(counts, m, n_states):
    counts = np.asarray(counts, dtype=np.int64)
    assert counts.shape[-1] == n_states
    return FirstVisitSummary(counts=counts, return_sums=0.5 * counts.astype(float),
                             n_trajectories=m, return_bound=100.0)


def test_tabular_uniform_weights_scale_by_n_to_the_three_quarters():
    # Phi = I, w = 1/N: ||.||_F / ||.||_2 = sqrt(N), psi with w^(1/2) / psi with w = sqrt(N)
    n = 12
    data = summary(np.random.default_rng(0).integers(0, 50, (4, n)), 50, n)
    rho = np.full(n, 1 / n)
    ratio = (authors_lsw_noise_scale(data, np.eye(n), rho, EPS, DELTA)
             / b.dp_lsw_noise_scale(data, np.eye(n), rho, EPS, DELTA))
    np.testing.assert_allclose(ratio, n**0.75, rtol=1e-12)


def test_lsw_scale_matches_a_loop_over_k_with_square_root_weights():
    rng = np.random.default_rng(1)
    n, d, m = 6, 3, 20
    phi = rng.uniform(0.1, 1, (n, d))
    w = rng.dirichlet(np.ones(n))
    counts = rng.integers(0, m + 1, n)
    alpha, beta = b.smoothing_constants(EPS, DELTA, d)
    psi = max(np.exp(-k * beta) * (np.sqrt(w) / np.maximum(counts - k, 1) ** 2).sum()
              for k in range(counts.max() + 1))
    inverse = np.linalg.inv((np.sqrt(w)[:, None] * phi).T @ (np.sqrt(w)[:, None] * phi)) \
        @ (np.sqrt(w)[:, None] * phi).T
    expected = alpha * 100.0 * np.sqrt((inverse**2).sum()) * np.sqrt(psi)
    got = authors_lsw_noise_scale(summary(counts, m, n), phi, w, EPS, DELTA)
    np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_lsl_scale_matches_a_loop_with_frobenius_norms():
    rng = np.random.default_rng(2)
    n, d, m, lam = 6, 3, 15, 40.0
    phi = rng.uniform(0, 1, (n, d))
    rho = rng.dirichlet(np.ones(n))
    counts = rng.integers(0, m + 1, n)
    alpha, beta = b.smoothing_constants(EPS, DELTA, d)
    fro = np.sqrt((phi**2).sum())
    c_lam = fro * rho.max() / np.sqrt(2 * lam)
    psi = max(np.exp(-k * beta) * (c_lam * np.sqrt((rho * np.minimum(counts + k, m)).sum())
                                   + np.sqrt((rho**2).sum())) ** 2 for k in range(m + 1))
    expected = 2 * alpha * 100.0 * fro / (lam - fro**2 * rho.max()) * np.sqrt(psi)
    got = authors_lsl_noise_scale(summary(counts, m, n), phi, rho, lam, EPS, DELTA)
    np.testing.assert_allclose(got, expected, rtol=1e-10)
    assert got > b.dp_lsl_noise_scale(summary(counts, m, n), phi, rho, lam, EPS, DELTA)


def test_threshold_is_frobenius_and_refused_below_it():
    phi, rho = np.eye(4), np.full(4, 0.25)
    assert authors_ridge_threshold(phi, rho) == pytest.approx(1.0)
    assert b.ridge_threshold(phi, rho) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="lam"):
        authors_lsl_noise_scale(summary([1, 2, 3, 4], 5, 4), phi, rho, 0.9, EPS, DELTA)


def test_release_is_lsw_plus_noise_of_that_scale():
    n = 5
    data = summary(np.full((3000, n), 7), 10, n)
    rho = np.full(n, 1 / n)
    released = authors_dp_lsw(data, np.eye(n), rho, EPS, DELTA, np.random.default_rng(3))
    noise = released - b.lsw(data, np.eye(n), rho)
    sigma = authors_lsw_noise_scale(data, np.eye(n), rho, EPS, DELTA)[0]
    assert abs(noise.std() / sigma - 1) < 0.03
