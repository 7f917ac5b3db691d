"""The moments accountant (Abadi et al. 2016) against dprl's exact subsampled-Gaussian RDP."""

import math

import numpy as np
import pytest

from dprl import accounting as A

#: (sigma, q) inside Lemma 3's conditions sigma >= 1, q < 1/(16 sigma).
VALID = [(sigma, fraction / (16 * sigma)) for sigma in (1.0, 1.5, 4.0, 8.0)
         for fraction in (0.01, 0.3, 0.99)]


def _lambda_max(sigma, q):
    return math.floor(sigma**2 * math.log(1 / (q * sigma)))


def test_log_moment_formula():
    lam = np.array([1.0, 2.0, 5.0])
    expected = 0.01**2 * lam * (lam + 1) / (0.99 * 4.0**2)
    np.testing.assert_allclose(A.moments_accountant_log_moment(lam, 4.0, 0.01), expected,
                               rtol=1e-15)


@pytest.mark.parametrize("sigma,q", VALID)
def test_log_moment_bounds_exact_log_moment(sigma, q):
    """Lemma 3's leading term is above lambda * RDP(lambda + 1) of the exact curve."""
    lam = np.arange(1, min(_lambda_max(sigma, q), 200) + 1, dtype=float)
    exact = lam * A.poisson_subsampled_gaussian_rdp(lam + 1, sigma, q)
    assert np.all(A.moments_accountant_log_moment(lam, sigma, q) >= exact)


@pytest.mark.parametrize("steps", [1, 100, 10_000])
@pytest.mark.parametrize("sigma,q", VALID)
def test_moments_accountant_is_above_exact_rdp_epsilon(sigma, q, steps):
    eps, lam = A.moments_accountant_epsilon(sigma, q, steps, 1e-5)
    exact = A.poisson_subsampled_gaussian_epsilon(sigma, q, steps, 1e-5, method="classic")
    assert eps >= exact
    assert 1 <= lam <= min(A.DEFAULT_MAX_LAMBDA, _lambda_max(sigma, q))
    same_orders = A.poisson_subsampled_gaussian_epsilon(sigma, q, steps, 1e-5,
                                                        orders=float(lam) + 1, method="classic")
    assert eps >= same_orders


def test_moments_accountant_minimises_over_lambda():
    sigma, q, steps, delta = 4.0, 0.01, 10_000, 1e-5
    lam = np.arange(1, 33, dtype=float)
    candidates = (steps * A.moments_accountant_log_moment(lam, sigma, q) - math.log(delta)) / lam
    eps, best = A.moments_accountant_epsilon(sigma, q, steps, delta)
    assert eps == pytest.approx(candidates.min(), rel=1e-15) and best == candidates.argmin() + 1


@pytest.mark.parametrize("call,match", [
    (lambda: A.moments_accountant_epsilon(0.9, 0.01, 10, 1e-5), "noise_multiplier >= 1"),
    (lambda: A.moments_accountant_epsilon(2.0, 1 / 32, 10, 1e-5),
     r"sampling_rate < 1/\(16 sigma\)"),
    (lambda: A.moments_accountant_log_moment(1.0, 0.5, 0.01), "noise_multiplier >= 1"),
    (lambda: A.moments_accountant_log_moment(1.0, 1.0, 0.1), r"sampling_rate < 1/\(16 sigma\)"),
    (lambda: A.moments_accountant_log_moment(0.0, 4.0, 0.01), r"lam must hold integers in \[1,"),
    (lambda: A.moments_accountant_log_moment(1.5, 4.0, 0.01), r"lam must hold integers in \[1,"),
    (lambda: A.moments_accountant_log_moment(1000.0, 4.0, 0.01), r"lambda <= sigma\^2 ln"),
    (lambda: A.moments_accountant_epsilon(4.0, 0.0, 10, 1e-5), "sampling_rate must be > 0"),
    (lambda: A.moments_accountant_epsilon(4.0, 0.01, 0, 1e-5), "steps must be >= 1"),
    (lambda: A.moments_accountant_epsilon(4.0, 0.01, 10, 2.0), r"delta must lie in \(0, 1\)"),
    (lambda: A.moments_accountant_epsilon(4.0, 0.01, 10, 1e-5, max_lambda=0),
     "max_lambda must be >= 1"),
])
def test_bad_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call()
