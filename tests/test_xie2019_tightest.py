"""The tightest sound calibration of GPOPE (Xie et al. 2019, Algorithm 1): WBK (2019) Thm. 27
for one record sampled without replacement, replace-one, against dp-accounting 0.6.0 and
against exact forward differences; the issue's measured numbers as regression anchors."""

import math

import mpmath
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as dpa_rdp

from dprl import xie2019 as x
from dprl.accounting import (rdp_to_dp, sampled_without_replacement_gaussian_rdp,
                             sampled_without_replacement_gaussian_rdp_tight)
from dprl.accounting.without_replacement import _log_forward_differences

ORDERS = np.array([2, 3, 4, 5, 10, 31, 64, 100, 128, 200, 256, 257, 320])


@pytest.mark.parametrize("multiplier, m", [(4.1, 300), (0.7, 1000), (20.0, 100), (1.5, 10)])
def test_tight_rdp_is_dp_accountings_without_replacement_gaussian(multiplier, m):
    ours = sampled_without_replacement_gaussian_rdp_tight(ORDERS, multiplier, 1, m)
    theirs = dpa_rdp._compute_rdp_sample_wor_gaussian(1 / m, multiplier,
                                                      [float(a) for a in ORDERS])
    assert np.allclose(ours, theirs, rtol=1e-7, atol=0)
    assert np.all(ours >= theirs * (1 - 1e-12))  # the error bound only ever raises it


@pytest.mark.parametrize("multiplier, m", [(0.5, 50), (2.0, 1000), (30.0, 100000)])
def test_tight_rdp_is_never_above_wbk_theorem9(multiplier, m):
    orders = x.privacy.GPOPE_ORDERS
    tight = sampled_without_replacement_gaussian_rdp_tight(orders, multiplier, 1, m)
    assert np.all(tight <= sampled_without_replacement_gaussian_rdp(orders, multiplier, 1, m)
                  * (1 + 1e-12))


def _exact_log_forward_differences(sigma: float, count: int) -> np.ndarray:
    mpmath.mp.dps = 200
    g = [mpmath.e ** (mpmath.mpf(k - 1) * k / (2 * mpmath.mpf(sigma) ** 2))
         for k in range(count + 3)]
    values = [mpmath.fsum((-1) ** (level - k) * mpmath.binomial(level, k) * g[k]
                          for k in range(level + 1)) for level in range(1, count + 3)]
    return np.array([float(mpmath.log(abs(v))) if v != 0 else -np.inf for v in values])


@pytest.mark.parametrize("sigma", [0.5, 8.0, 40.0])
def test_forward_differences_bound_the_exact_ones(sigma):
    count = 60
    exact = _exact_log_forward_differences(sigma, count)
    ours = _log_forward_differences(sigma, count)
    finite = np.isfinite(exact)
    assert np.all(ours[finite] >= exact[finite])
    if sigma >= 8:  # dp-accounting's unguarded values fall below the exact ones there
        theirs, _ = dpa_rdp._get_forward_diffs(lambda v: v * (v + 1) / (2 * sigma**2), count)
        assert np.any(theirs[finite] < exact[finite] - 1e-3)


def test_tightest_epsilon_is_dp_accountings_at_the_optimal_orders():
    sigma, n, m = 8.2, 300, 300
    composed = n * sampled_without_replacement_gaussian_rdp_tight(x.privacy.GPOPE_ORDERS,
                                                                  sigma / 2, 1, m)
    eps, order = rdp_to_dp(x.privacy.GPOPE_ORDERS, composed, 1e-5)
    assert eps == pytest.approx(x.tightest_epsilon(sigma, 1e-5, n, m), rel=1e-12)
    near = (order - 1, order, order + 1)
    assert x.dp_accounting_epsilon(sigma, 1e-5, n, m, orders=near) == pytest.approx(
        eps, rel=1e-6)


def test_tightest_sigma_is_the_smallest_meeting_eps_and_below_the_books():
    sigma = x.tightest_sigma(0.5, 1e-5, 2000, 1000, rtol=1e-6)
    assert x.tightest_epsilon(sigma, 1e-5, 2000, 1000) <= 0.5
    assert x.tightest_epsilon(sigma / (1 + 2e-6), 1e-5, 2000, 1000) > 0.5
    assert x.tightest_sigma(0.5, 1e-5, 2000, 1000) <= x.gpope_sigma(0.5, 1e-5, 2000, 1000)


@pytest.mark.parametrize("n, m, expected, book_certifies", [
    (300, 300, 8.2, True), (100, 100, 14.2, False), (100_000, 1000, 43.15, False)])
def test_issue16_measured_calibrations(n, m, expected, book_certifies):
    """eps = 0.1, delta = 1e-5: dp-accounting's values measured in issue 16 (its default
    orders <= 128; the tightest accountant's orders reach 1024, hence <= 0.5 % below)."""
    c = x.calibrations(0.1, 1e-5, n, m)
    assert c.tightest == pytest.approx(expected, rel=6e-3)
    assert c.tightest <= expected * (1 + 1e-3)
    assert math.isnan(c.book) != book_certifies
    assert not c.tightest > c.book  # below the book's bound where that certifies at all
    assert c.paper < c.tightest and c.paper_epsilon > 0.1  # the paper's sigma is not 0.1-DP
    assert c.paper_epsilon == x.tightest_epsilon(c.paper, 1e-5, n, m)


def test_calibrations_refuse_bad_input():
    with pytest.raises(ValueError, match="eps"):
        x.calibrations(0.0, 1e-5, 100, 100)
    with pytest.raises(ValueError, match="delta"):
        x.calibrations(0.1, 1.5, 100, 100)


def test_gpope_adds_the_noise_of_the_named_calibration():
    from dprl.envs import ChainMDP, stack_trajectories
    from dprl.features import tabular_features
    from dprl.seeding import trial_generators
    mdp = ChainMDP(n_states=5)
    data = stack_trajectories([mdp.sample(300, g) for g in trial_generators(0, 2)])
    features = tabular_features(5)
    for calibration, sigma in (("paper", x.lemma1_sigma(1.0, 1e-5, 300, 300)),
                               ("tightest", x.tightest_sigma(1.0, 1e-5, 300, 300)),
                               ("book", x.gpope_sigma(1.0, 1e-5, 300, 300))):
        assert x.calibrated_sigma(calibration, 1.0, 1e-5, 300, 300) == sigma
        theta, _ = x.gpope(data, features, mdp.gamma, 0.1, 300, 1.0, 1.0, 1e-5,
                           trial_generators(1, 2), calibration=calibration)
        expected, _ = x.primal_dual_descent(data, features, mdp.gamma, 0.1, 300,
                                            trial_generators(1, 2), clip=1.0,
                                            noise_scale=sigma)
        assert np.array_equal(theta, expected)
    with pytest.raises(ValueError, match="calibration"):
        x.calibrated_sigma("sound", 1.0, 1e-5, 300, 300)


def test_each_calibration_is_certified_by_its_sound_accountant():
    """certified_epsilon names the accountant that certifies a calibration's sigma: the PLD
    for "pld" (which RDP does not certify at the target), RDP's tightest for the others."""
    eps, delta, n, m = 1.0, 1e-5, 100, 100
    for calibration in x.CALIBRATIONS:
        sigma = x.calibrated_sigma(calibration, eps, delta, n, m)
        accountant = x.pld_epsilon if calibration == "pld" else x.tightest_epsilon
        assert x.certified_epsilon(calibration, sigma, delta, n, m) == accountant(
            sigma, delta, n, m)
    sigma = x.calibrated_sigma("pld", eps, delta, n, m)
    assert x.certified_epsilon("pld", sigma, delta, n, m) <= eps
    assert x.tightest_epsilon(sigma, delta, n, m) > eps
    with pytest.raises(ValueError, match="calibration"):
        x.certified_epsilon("sound", sigma, delta, n, m)


def test_calibrations_at_a_large_eps():
    """eps = 10 (Fig. 4's largest level): Lemma 1's bracket passes sigmas whose tail bound
    exceeds 1 by far (it is capped at 1, not overflowed)."""
    c = x.calibrations(10.0, 1e-5, 4000, 400)
    assert x.lemma1_delta(10.0, 4000, 400, c.paper) <= 1e-5
    assert x.lemma1_delta(10.0, 4000, 400, 0.05) == 1.0
    assert c.tightest <= c.book and c.paper < c.tightest
