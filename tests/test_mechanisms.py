"""Tests of dprl.mechanisms against closed forms, dp-accounting and Monte Carlo."""

import math

import numpy as np
import pytest
from dp_accounting import gaussian_mechanism as dp_gaussian
from dp_accounting.pld.privacy_loss_mechanism import GaussianPrivacyLoss
from scipy import stats

from dprl import mechanisms as M

EPS_GRID = [0.05, 0.5, 0.99, 2.0, 10.0]
DELTA_GRID = [1e-3, 1e-6, 1e-10]
SENSITIVITIES = [0.5, 1.0, 3.0]


def test_classic_sigma_is_dwork_roth_formula():
    assert M.gaussian_sigma(2.0, 0.5, 1e-5) == pytest.approx(
        2.0 * math.sqrt(2 * math.log(1.25e5)) / 0.5, rel=1e-15)


@pytest.mark.parametrize("eps", [1.0, 3.0])
def test_classic_sigma_refuses_eps_at_least_one(eps):
    with pytest.raises(ValueError, match="analytic_gaussian_sigma"):
        M.gaussian_sigma(1.0, eps, 1e-5)


@pytest.mark.parametrize("sensitivity", SENSITIVITIES)
@pytest.mark.parametrize("delta", DELTA_GRID)
@pytest.mark.parametrize("eps", EPS_GRID)
def test_analytic_sigma_meets_delta_exactly_and_is_smallest(eps, delta, sensitivity):
    sigma = M.analytic_gaussian_sigma(sensitivity, eps, delta)
    achieved = M.gaussian_delta(eps, sensitivity, sigma)
    assert achieved <= delta
    assert achieved == pytest.approx(delta, rel=1e-10)
    assert M.gaussian_delta(eps, sensitivity, sigma * (1 - 1e-9)) > delta
    reference = sensitivity * dp_gaussian.get_sigma_gaussian(eps, delta)
    assert sigma == pytest.approx(reference, rel=1e-9)
    if eps < 1:
        assert sigma < M.gaussian_sigma(sensitivity, eps, delta)


@pytest.mark.parametrize("sensitivity,sigma", [(1.0, 0.5), (1.0, 2.0), (3.0, 1.7), (0.2, 5.0)])
def test_gaussian_delta_matches_dp_accounting_pld_mechanism(sensitivity, sigma):
    eps = np.array([0.0, 0.1, 1.0, 3.0, 8.0])
    reference = GaussianPrivacyLoss(sigma, sensitivity=sensitivity).get_delta_for_epsilon(eps)
    ours = M.gaussian_delta(eps, sensitivity, sigma)
    assert ours.shape == eps.shape
    np.testing.assert_allclose(ours, reference, rtol=1e-9, atol=1e-300)
    assert np.all(np.diff(ours) <= 0)


def test_gaussian_delta_at_zero_is_total_variation():
    # TV(N(0,1), N(Delta,1)) = 2 Phi(Delta/2) - 1.
    assert M.gaussian_delta(0.0, 1.3, 1.0) == pytest.approx(2 * stats.norm.cdf(0.65) - 1,
                                                            rel=1e-14)


@pytest.mark.parametrize("eps", [5.0, 20.0, 30.0])
def test_gaussian_delta_keeps_precision_at_large_eps(eps):
    """Both terms are ~1e-100 and nearly cancel; compare with 50-digit arithmetic."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 50
    a, b = 0.5 - mpmath.mpf(eps), -0.5 - mpmath.mpf(eps)  # Delta = sigma = 1
    exact = mpmath.ncdf(a) - mpmath.exp(eps) * mpmath.ncdf(b)
    assert M.gaussian_delta(eps, 1.0, 1.0) == pytest.approx(float(exact), rel=1e-8)


@pytest.mark.parametrize("sensitivity,sigma,delta", [
    (1.0, 0.5, 1e-5), (1.0, 2.0, 1e-5), (3.0, 1.7, 1e-3), (0.2, 5.0, 1e-8), (1.0, 30.0, 1e-6)])
def test_gaussian_epsilon_inverts_gaussian_delta(sensitivity, sigma, delta):
    eps = M.gaussian_epsilon(delta, sensitivity, sigma)
    assert eps > 0
    assert M.gaussian_delta(eps, sensitivity, sigma) <= delta
    assert M.gaussian_delta(eps * (1 - 1e-9), sensitivity, sigma) > delta
    reference = dp_gaussian.get_epsilon_gaussian(sigma / sensitivity, delta)
    assert eps == pytest.approx(reference, rel=1e-8)


def test_gaussian_epsilon_is_zero_when_total_variation_meets_delta():
    # TV(N(0, sigma^2), N(1, sigma^2)) = 2 Phi(1/(2 sigma)) - 1 ~ 4e-7 at sigma = 1e6.
    assert M.gaussian_epsilon(1e-5, 1.0, 1e6) == 0.0


def test_gaussian_epsilon_of_k_fold_composition_matches_privacy_loss_sum():
    """k Gaussians of noise sigma: loss N(k mu, 2 k mu) = one Gaussian of noise sigma/sqrt(k)."""
    k, sigma, delta = 16, 4.0, 1e-5
    eps = M.gaussian_epsilon(delta, 1.0, sigma / math.sqrt(k))
    mu, var = M.gaussian_privacy_loss_distribution(1.0, sigma)
    mu, sd = k * mu, math.sqrt(k * var)  # the sum of k independent losses N(mu, 2 mu)
    # delta(eps) = P[L > eps] - e^eps P'[L > eps], L ~ N(k mu, 2 k mu) under D, N(-k mu, .) under D'.
    exact_delta = stats.norm.sf(eps, mu, sd) - math.exp(eps) * stats.norm.sf(eps, -mu, sd)
    assert exact_delta == pytest.approx(delta, rel=1e-8)


def test_laplace_scale():
    assert M.laplace_scale(2.0, 0.5) == 4.0
    assert M.laplace_scale(1e300, 1.0) == 1e300
    with pytest.raises(ValueError, match="sensitivity=1e\\+300, eps=1e-300 is inf"):
        M.laplace_scale(1e300, 1e-300)
    with pytest.raises(ValueError, match="is 0.0, not a positive finite float"):
        M.laplace_scale(5e-324, 1e3)  # underflow: no noise at all


@pytest.mark.parametrize("calibration", ["classic", "analytic"])
def test_gaussian_mechanism_noise_has_calibrated_scale(calibration):
    sigma = (M.gaussian_sigma(1.0, 0.5, 1e-5) if calibration == "classic"
             else M.analytic_gaussian_sigma(1.0, 0.5, 1e-5))
    value = np.full((400, 500), 3.0)
    noisy = M.gaussian_mechanism(value, 1.0, 0.5, 1e-5, np.random.default_rng(1), calibration)
    assert noisy.shape == value.shape
    noise = (noisy - value).ravel()
    n = noise.size
    assert abs(noise.mean()) < 5 * sigma / math.sqrt(n)
    assert abs(noise.std() / sigma - 1) < 5 / math.sqrt(2 * n)


def test_laplace_mechanism_noise_has_calibrated_scale():
    noise = M.laplace_mechanism(np.zeros(200_000), 2.0, 0.5, np.random.default_rng(2))
    scale = 4.0  # E|Laplace(0, b)| = b, Var |.| = b^2
    assert abs(np.abs(noise).mean() / scale - 1) < 5 / math.sqrt(noise.size)


def test_mechanisms_are_reproducible_and_keep_scalars_scalar():
    a = M.gaussian_mechanism(1.0, 1.0, 0.5, 1e-5, np.random.default_rng(7))
    b = M.gaussian_mechanism(1.0, 1.0, 0.5, 1e-5, np.random.default_rng(7))
    assert isinstance(a, float) and a == b
    assert isinstance(M.laplace_mechanism(1.0, 1.0, 1.0, np.random.default_rng(7)), float)


def test_gaussian_privacy_loss_is_log_density_ratio():
    rng = np.random.default_rng(3)
    mean, neighbour, sigma = np.array([0.0, 1.0, -2.0]), np.array([0.5, 0.2, -2.0]), 1.7
    outputs = rng.normal(size=(50, 3)) * 4
    expected = (stats.multivariate_normal(mean, sigma**2).logpdf(outputs)
                - stats.multivariate_normal(neighbour, sigma**2).logpdf(outputs))
    np.testing.assert_allclose(M.gaussian_privacy_loss(outputs, mean, neighbour, sigma),
                               expected, rtol=1e-10, atol=1e-12)
    scalar = M.gaussian_privacy_loss(0.3, 0.0, 1.0, 2.0)
    assert scalar == pytest.approx(stats.norm(0, 2).logpdf(0.3) - stats.norm(1, 2).logpdf(0.3))


def test_gaussian_privacy_loss_distribution_monte_carlo():
    """Samples of the loss under p have mean mu and variance 2 mu (5 standard errors)."""
    mean, neighbour, sigma = np.array([1.0, 2.0]), np.array([1.6, 1.2]), 0.9
    mu, var = M.gaussian_privacy_loss_distribution(np.linalg.norm(mean - neighbour), sigma)
    assert var == 2 * mu
    n = 400_000
    outputs = np.random.default_rng(4).normal(mean, sigma, size=(n, 2))
    losses = M.gaussian_privacy_loss(outputs, mean, neighbour, sigma)
    assert abs(losses.mean() - mu) < 5 * math.sqrt(var / n)
    assert abs(losses.var() - var) < 5 * var * math.sqrt(2 / (n - 1))


def test_laplace_privacy_loss_bounded_by_eps():
    eps, sensitivity = 0.7, 1.5
    scale = M.laplace_scale(sensitivity, eps)
    mean, neighbour = np.array([0.0, 1.0]), np.array([1.0, 0.5])  # L1 distance 1.5
    outputs = np.concatenate([
        M.laplace_mechanism(np.tile(mean, (20_000, 1)), sensitivity, eps,
                            np.random.default_rng(5)),
        [[-100.0, 100.0]]])  # far corner: the bound is attained there
    losses = M.laplace_privacy_loss(outputs, mean, neighbour, scale)
    assert np.all(np.abs(losses) <= eps + 1e-12)
    assert losses[-1] == pytest.approx(eps, rel=1e-12)


@pytest.mark.parametrize("call,match", [
    (lambda: M.gaussian_sigma(0.0, 0.5, 1e-5), "sensitivity must be > 0"),
    (lambda: M.gaussian_sigma(1.0, 0.0, 1e-5), "eps must be > 0"),
    (lambda: M.gaussian_sigma(1.0, 0.5, 1.0), r"delta must lie in \(0, 1\)"),
    (lambda: M.gaussian_delta(-0.1, 1.0, 1.0), "eps must be >= 0"),
    (lambda: M.gaussian_delta(1.0, 1.0, 0.0), "sigma must be > 0"),
    (lambda: M.gaussian_delta([], 1.0, 1.0), "eps must not be empty"),
    (lambda: M.gaussian_epsilon(0.0, 1.0, 1.0), r"delta must lie in \(0, 1\)"),
    (lambda: M.gaussian_epsilon(1e-5, 0.0, 1.0), "sensitivity must be > 0"),
    (lambda: M.gaussian_epsilon(1e-5, 1.0, -2.0), "sigma must be > 0"),
    (lambda: M.gaussian_epsilon(1e-5, 1.0, 1.0, tol=0.0), "^tol must be > 0"),
    (lambda: M.analytic_gaussian_sigma(1.0, -1.0, 1e-5), "eps must be > 0"),
    (lambda: M.analytic_gaussian_sigma(1.0, 1.0, 0.0), r"delta must lie in \(0, 1\)"),
    (lambda: M.analytic_gaussian_sigma(1.0, 1.0, 1e-5, tol=0.0), "^tol must be > 0"),
    (lambda: M.laplace_scale(1.0, 0.0), "eps must be > 0"),
    (lambda: M.laplace_scale(-1.0, 1.0), "sensitivity must be > 0"),
    (lambda: M.gaussian_mechanism(1.0, 1.0, 0.5, 1e-5, np.random.default_rng(), "exact"),
     "calibration must be one of"),
    (lambda: M.gaussian_mechanism([], 1.0, 0.5, 1e-5, np.random.default_rng()),
     "value must not be empty"),
    (lambda: M.laplace_mechanism([1.0, np.nan], 1.0, 0.5, np.random.default_rng()),
     "value must contain only finite"),
    (lambda: M.gaussian_privacy_loss(np.zeros((4, 3)), np.zeros(2), np.ones(2), 1.0),
     "last axis of length 2"),
    (lambda: M.gaussian_privacy_loss(np.zeros(3), np.zeros(2), np.ones(3), 1.0),
     "mean and neighbour_mean"),
    (lambda: M.gaussian_privacy_loss(0.0, 0.0, 1.0, -1.0), "sigma must be > 0"),
    (lambda: M.laplace_privacy_loss(0.0, 0.0, 1.0, 0.0), "scale must be > 0"),
    (lambda: M.gaussian_privacy_loss_distribution(1.0, 0.0), "sigma must be > 0"),
])
def test_bad_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_non_generator_rng_raises():
    with pytest.raises(ValueError, match="numpy.random.Generator"):
        M.laplace_mechanism(1.0, 1.0, 1.0, np.random.RandomState(0))
