"""RDP curves of dprl.accounting against dp-accounting 0.6.0 and high-precision arithmetic.

dp-accounting is the reference for the Gaussian and for integer orders of the Poisson-
subsampled Gaussian (relative agreement 1e-9). For fractional orders dp-accounting sums
the absolute values of the generalised binomial coefficients (``_log_comb`` goes through
``gammaln``), an upper bound that is up to ~20% loose at orders near 1 and often fails to
converge (inf); dprl sums the signed series of Mironov, Talwar & Zhang (2019, Sec. 3.3),
which is checked here against 30-digit quadrature of the defining integral (1e-12
relative) and shown never to exceed dp-accounting's value.
"""

import logging

import mpmath
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as dp_rdp

from dprl import accounting as A

logging.getLogger("absl").setLevel(logging.ERROR)  # dp-accounting's divergence warnings

SIGMAS = [0.5, 0.8, 1.0, 2.0, 5.0]
RATES = [1e-3, 0.01, 0.1, 0.5, 1.0]
#: Integer orders spanning 2..256 (dp-accounting's sum is a Python loop: a sparse tail).
INTEGER_ORDERS = np.concatenate([np.arange(2, 41), [48, 64, 96, 128, 160, 192, 224, 256]])
FRACTIONAL_ORDERS = np.array([1.1, 1.5, 2.5, 3.7, 7.3, 10.9])


def test_default_orders_are_dp_accounting_grid_without_1024():
    assert set(A.DEFAULT_ORDERS) | {1024.0} == set(map(float, dp_rdp.DEFAULT_RDP_ORDERS))
    assert len(A.DEFAULT_ORDERS) == 155
    assert set(A.DEFAULT_INTEGER_ORDERS) == set(range(2, 64)) | {128, 256, 512}


@pytest.mark.parametrize("sigma", SIGMAS)
def test_gaussian_rdp_matches_dp_accounting(sigma):
    orders = np.concatenate([FRACTIONAL_ORDERS, INTEGER_ORDERS])
    reference = dp_rdp._compute_rdp_poisson_subsampled_gaussian(1.0, sigma, orders)
    np.testing.assert_allclose(A.gaussian_rdp(orders, sigma), reference, rtol=1e-15)


@pytest.mark.parametrize("q", RATES)
@pytest.mark.parametrize("sigma", SIGMAS)
def test_poisson_integer_orders_match_dp_accounting(sigma, q):
    ours = A.poisson_subsampled_gaussian_rdp(INTEGER_ORDERS, sigma, q)
    reference = dp_rdp._compute_rdp_poisson_subsampled_gaussian(q, sigma, INTEGER_ORDERS)
    np.testing.assert_allclose(ours, reference, rtol=1e-9)


@pytest.mark.parametrize("q", RATES)
@pytest.mark.parametrize("sigma", SIGMAS)
def test_poisson_fractional_orders_never_exceed_dp_accounting(sigma, q):
    ours = A.poisson_subsampled_gaussian_rdp(FRACTIONAL_ORDERS, sigma, q)
    reference = dp_rdp._compute_rdp_poisson_subsampled_gaussian(q, sigma, FRACTIONAL_ORDERS)
    assert np.all(ours <= reference * (1 + 1e-9))


def _log_moment_exact(alpha, sigma, q):
    """log A_alpha at 30 digits: the binomial sum (integer alpha) or quadrature of
    E_{z ~ N(0, sigma^2)} (1 - q + q e^{(2z - 1)/(2 sigma^2)})^alpha minus 1 (fractional)."""
    mpmath.mp.dps = 30
    alpha, sigma, q = mpmath.mpf(alpha), mpmath.mpf(sigma), mpmath.mpf(q)
    if alpha == int(alpha):
        return mpmath.log(mpmath.fsum(
            mpmath.binomial(alpha, k) * (1 - q) ** (alpha - k) * q**k
            * mpmath.exp((k * k - k) / (2 * sigma**2)) for k in range(int(alpha) + 1)))
    z0 = sigma**2 * mpmath.log(1 / q - 1) + mpmath.mpf(1) / 2

    def integrand(z):
        ratio = (1 - q) + q * mpmath.exp((2 * z - 1) / (2 * sigma**2))
        return mpmath.npdf(z, 0, sigma) * (ratio**alpha - 1)

    points = sorted({-mpmath.inf, -40 * sigma, 0, z0, 1, alpha, 40 * sigma + alpha, mpmath.inf})
    return mpmath.log1p(mpmath.quad(integrand, points, maxdegree=10))


@pytest.mark.parametrize("sigma,q,alpha", [
    (2.0, 1e-3, 1.1), (5.0, 0.01, 1.5), (1.0, 0.01, 2.5), (0.5, 0.1, 1.3), (0.8, 0.6, 3.7),
    (1.0, 0.3, 6.3), (5.0, 1e-3, 7.0), (0.5, 0.5, 40.0)])
def test_poisson_rdp_matches_high_precision(sigma, q, alpha):
    exact = float(_log_moment_exact(alpha, sigma, q)) / (alpha - 1)
    assert A.poisson_subsampled_gaussian_rdp(alpha, sigma, q) == pytest.approx(exact, rel=1e-12)


@pytest.mark.parametrize("sigma,q,alpha", [
    (1.1, 0.01, 1.1), (1.1, 0.01, 3.5), (0.5, 0.1, 1.3), (1.0, 0.3, 6.3), (2.0, 0.01, 5.0),
    (0.8, 0.2, 12.0)])
def test_quadrature_reference_matches_series_and_exact_sum(sigma, q, alpha):
    """The quadrature reference agrees with the signed series (fractional orders) and with
    the 30-digit binomial sum (integer orders) to 1e-12 relative."""
    reference = A.poisson_subsampled_gaussian_rdp_quadrature(alpha, sigma, q)
    assert np.shape(reference) == () and isinstance(reference, np.floating)
    assert reference == pytest.approx(A.poisson_subsampled_gaussian_rdp(alpha, sigma, q),
                                      rel=1e-12)
    if alpha == int(alpha):
        exact = float(_log_moment_exact(alpha, sigma, q)) / (alpha - 1)
        assert reference == pytest.approx(exact, rel=1e-12)


def test_quadrature_reference_closed_cases_and_shape():
    orders = np.array([1.5, 2.0, 4.5])
    np.testing.assert_allclose(A.poisson_subsampled_gaussian_rdp_quadrature(orders, 1.3, 1.0),
                               A.gaussian_rdp(orders, 1.3), rtol=1e-12)
    np.testing.assert_array_equal(A.poisson_subsampled_gaussian_rdp_quadrature(orders, 1.3, 0.0),
                                  0.0)
    reference = A.poisson_subsampled_gaussian_rdp_quadrature(orders, 1.1, 0.01)
    assert reference.shape == orders.shape
    dp_reference = dp_rdp._compute_rdp_poisson_subsampled_gaussian(0.01, 1.1, orders)
    assert reference[0] < dp_reference[0] * (1 - 1e-3)  # dp-accounting is loose at 1.5


def test_poisson_closed_cases_and_shape():
    orders = np.array([1.5, 2.0, 17.0, 300.0])
    np.testing.assert_array_equal(A.poisson_subsampled_gaussian_rdp(orders, 1.3, 1.0),
                                  A.gaussian_rdp(orders, 1.3))
    np.testing.assert_array_equal(A.poisson_subsampled_gaussian_rdp(orders, 1.3, 0.0), 0.0)
    scalar = A.poisson_subsampled_gaussian_rdp(3.5, 1.3, 0.1)
    assert np.shape(scalar) == () and isinstance(scalar, np.floating)
    assert A.gaussian_rdp(3.0, 2.0) == 3.0 / 8.0


def test_poisson_rdp_is_monotone_in_rate_sigma_and_order():
    orders = A.DEFAULT_ORDERS
    low, high = (A.poisson_subsampled_gaussian_rdp(orders, 1.0, q) for q in (0.02, 0.05))
    assert np.all(low < high)
    assert np.all(A.poisson_subsampled_gaussian_rdp(orders, 1.5, 0.05) < high)
    assert np.all(np.diff(high) > 0)
    assert np.all(high <= A.gaussian_rdp(orders, 1.0))


WOR_CASES = [(1, 1000), (10, 1000), (500, 1000), (1000, 1000)]


@pytest.mark.parametrize("m,n", WOR_CASES)
@pytest.mark.parametrize("sigma", [0.5, 1.0, 5.0])
def test_wor_theorem9_bound_never_below_dp_accounting(sigma, m, n):
    """dp-accounting uses WBK 2019's tighter Thm. 27 up to order 256 and Thm. 9 beyond
    (its Thm. 27 branch costs O(alpha^3) in Python, hence the short grid)."""
    orders = np.concatenate([np.arange(2, 33), [64, 257, 300, 512]])
    ours = A.sampled_without_replacement_gaussian_rdp(orders, sigma, m, n)
    reference = dp_rdp._compute_rdp_sample_wor_gaussian(m / n, sigma, orders)
    assert np.all(ours >= reference * (1 - 1e-12))
    if m < n:
        np.testing.assert_allclose(ours[orders > 256], reference[orders > 256], rtol=1e-12)


def test_wor_theorem9_against_exact_arithmetic():
    sigma, m, n, alpha = 1.3, 7, 50, 6
    gamma, eps = mpmath.mpf(m) / n, lambda j: mpmath.mpf(j) / (2 * sigma**2)
    total = 1 + gamma**2 * mpmath.binomial(alpha, 2) * min(4 * mpmath.expm1(eps(2)),
                                                           2 * mpmath.exp(eps(2)))
    total += mpmath.fsum(2 * gamma**j * mpmath.binomial(alpha, j) * mpmath.exp((j - 1) * eps(j))
                         for j in range(3, alpha + 1))
    ours = A.sampled_without_replacement_gaussian_rdp(alpha, sigma, m, n)
    assert ours == pytest.approx(float(mpmath.log(total) / (alpha - 1)), rel=1e-13)
    approx = A.sampled_without_replacement_gaussian_rdp_approx(alpha, sigma, m, n)
    second = gamma**2 * mpmath.binomial(alpha, 2) * min(4 * mpmath.expm1(eps(2)),
                                                        2 * mpmath.exp(eps(2)))
    assert approx == pytest.approx(float(mpmath.log1p(second) / (alpha - 1)), rel=1e-13)


@pytest.mark.parametrize("sigma", [0.7, 2.0])
def test_wor_approximation_drops_positive_terms(sigma):
    orders = A.DEFAULT_INTEGER_ORDERS
    full = A.sampled_without_replacement_gaussian_rdp(orders, sigma, 64, 60_000)
    approx = A.sampled_without_replacement_gaussian_rdp_approx(orders, sigma, 64, 60_000)
    assert np.all(approx[1:] < full[1:])
    assert approx[0] == pytest.approx(full[0], rel=1e-15)  # order 2: no j >= 3 terms
    assert np.all(np.isfinite(full))


@pytest.mark.parametrize("call,match", [
    (lambda: A.gaussian_rdp(1.0, 1.0), "orders must all be > 1"),
    (lambda: A.gaussian_rdp([2.0, 0.5], 1.0), "orders must all be > 1"),
    (lambda: A.gaussian_rdp([[2.0]], 1.0), "scalar or a 1-D array"),
    (lambda: A.gaussian_rdp([], 1.0), "orders must not be empty"),
    (lambda: A.gaussian_rdp([2.0, np.inf], 1.0), "orders must contain only finite"),
    (lambda: A.gaussian_rdp(2.0, 0.0), "noise_multiplier must be > 0"),
    (lambda: A.poisson_subsampled_gaussian_rdp(2.0, -1.0, 0.1), "noise_multiplier must be > 0"),
    (lambda: A.poisson_subsampled_gaussian_rdp(2.0, 1.0, 1.5), r"sampling_rate must lie in"),
    (lambda: A.poisson_subsampled_gaussian_rdp(2.0, 1.0, -0.1), r"sampling_rate must lie in"),
    (lambda: A.sampled_without_replacement_gaussian_rdp(2.5, 1.0, 1, 10), "must be integers"),
    (lambda: A.sampled_without_replacement_gaussian_rdp_approx(2.5, 1.0, 1, 10),
     "must be integers"),
    (lambda: A.sampled_without_replacement_gaussian_rdp(2, 1.0, 11, 10),
     "sample_size must be <= dataset_size"),
    (lambda: A.sampled_without_replacement_gaussian_rdp(2, 1.0, 0, 10),
     "sample_size must be >= 1"),
    (lambda: A.sampled_without_replacement_gaussian_rdp(2, 1.0, 1.0, 10),
     "sample_size must be an integer"),
    (lambda: A.sampled_without_replacement_gaussian_rdp(2, 0.0, 1, 10),
     "noise_multiplier must be > 0"),
    (lambda: A.poisson_subsampled_gaussian_rdp_quadrature(1.0, 1.0, 0.1), "orders must all be > 1"),
    (lambda: A.poisson_subsampled_gaussian_rdp_quadrature(2.0, 0.0, 0.1),
     "noise_multiplier must be > 0"),
    (lambda: A.poisson_subsampled_gaussian_rdp_quadrature(2.0, 1.0, 1.5),
     r"sampling_rate must lie in"),
    (lambda: A.poisson_subsampled_gaussian_rdp_quadrature(2.0, 1.0, 0.1, dps=10),
     "dps must be an integer >= 15"),
])
def test_bad_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call()
