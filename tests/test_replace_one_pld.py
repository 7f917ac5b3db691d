"""The symmetric PLD of one Gaussian step on one record sampled without replacement under
replace-one neighbours (dprl.accounting.pld.replace_one_*), against exact enumeration."""

import math

import numpy as np
import pytest
from scipy.stats import norm

from dprl.accounting.pld import (poisson_gaussian_epsilon, replace_one_gaussian_epsilon,
                                 replace_one_profile)
from dprl.xie2019.privacy import tightest_epsilon

EPSILONS = np.linspace(-2.0, 3.0, 26)


def _hockey_stick(a: np.ndarray, b: np.ndarray, alpha: float, dx: float) -> float:
    """H_alpha(A || B) of two densities on the same grid (Riemann sum)."""
    return float(np.sum(np.maximum(a - alpha * b, 0.0)) * dx)


def _mixture(x: np.ndarray, centres: np.ndarray, s: float) -> np.ndarray:
    """The density of one of ``centres`` picked uniformly, plus N(0, s^2)."""
    return norm.pdf(x[:, None], loc=centres[None, :], scale=s).mean(axis=1)


@pytest.mark.parametrize("m, s", [(2, 0.7), (3, 0.8), (5, 1.5)])
def test_every_neighbouring_pair_is_within_the_profile_and_the_worst_attains_it(m, s):
    """Exact enumeration in one dimension (the worst case is collinear): outputs of one
    record of m picked uniformly, gradients in [-1/2, 1/2] (replace-one sensitivity 1), the
    record m-1 replaced; H_{e^eps}(A || B) of 60 random neighbouring pairs, both orders,
    never exceeds replace_one_profile, and the pair (others and g' at -1/2, g at +1/2)
    attains it: its larger order equals the profile at every eps."""
    x = np.linspace(-12 * s - 1, 12 * s + 1, 40_001)
    dx = x[1] - x[0]
    profile = replace_one_profile(s, 1 / m, EPSILONS)
    rng = np.random.default_rng(m)
    for _ in range(60):
        others = rng.uniform(-0.5, 0.5, m - 1)
        g, g_prime = rng.uniform(-0.5, 0.5, 2)
        a = _mixture(x, np.append(others, g), s)
        b = _mixture(x, np.append(others, g_prime), s)
        for eps, bound in zip(EPSILONS, profile):
            worst = max(_hockey_stick(a, b, math.exp(eps), dx),
                        _hockey_stick(b, a, math.exp(eps), dx))
            assert worst <= bound + 1e-6
    a = _mixture(x, np.append(np.full(m - 1, -0.5), 0.5), s)
    b = _mixture(x, np.full(m, -0.5), s)
    attained = [max(_hockey_stick(a, b, math.exp(eps), dx), _hockey_stick(b, a, math.exp(eps),
                                                                         dx))
                for eps in EPSILONS]
    assert np.allclose(attained, profile, atol=1e-6)


def test_one_step_without_sampling_is_the_gaussian_mechanism():
    """At sampling rate 1 the profile is the Gaussian mechanism's (Balle & Wang 2018):
    Phi(1/(2s) - eps s) - e^eps Phi(-1/(2s) - eps s), and one composed step's eps is its
    root to within the PLD's discretisation (pessimistic: not below)."""
    s, delta = 1.3, 1e-5
    eps = np.linspace(0.0, 4.0, 9)
    exact = norm.cdf(1 / (2 * s) - eps * s) - np.exp(eps) * norm.cdf(-1 / (2 * s) - eps * s)
    assert np.allclose(replace_one_profile(s, 1.0, eps), exact, rtol=1e-9, atol=1e-15)
    composed = replace_one_gaussian_epsilon(s, 1.0, 1, delta)
    grid = np.linspace(composed - 2e-3, composed + 2e-3, 4001)
    truth = grid[np.argmin(np.abs(norm.cdf(1 / (2 * s) - grid * s)
                                  - np.exp(grid) * norm.cdf(-1 / (2 * s) - grid * s) - delta))]
    assert truth - 1e-6 <= composed <= truth + 2e-3


def test_composed_between_poisson_and_the_tightest_rdp():
    """Composing the symmetric profile costs more than Poisson sampling's separately
    composed orders and less than WBK's RDP bound (GPOPE at N = m = 100, delta = 1e-5,
    sigma = 2.418: 0.4826 against RDP's 1, as the Xie privacy chapter shows)."""
    for sigma in (1.8, 2.418, 4.0):
        pld = replace_one_gaussian_epsilon(sigma / 2, 0.01, 100, 1e-5)
        assert poisson_gaussian_epsilon(sigma / 2, 0.01, 100, 1e-5) <= pld
        assert pld <= tightest_epsilon(sigma, 1e-5, 100, 100)
    assert replace_one_gaussian_epsilon(2.418 / 2, 0.01, 100, 1e-5) == pytest.approx(0.4826,
                                                                                     abs=1e-3)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="noise_multiplier"):
        replace_one_profile(0.0, 0.1, EPSILONS)
    with pytest.raises(ValueError, match="sampling_rate"):
        replace_one_profile(1.0, 0.0, EPSILONS)
    with pytest.raises(ValueError, match="epsilons"):
        replace_one_profile(1.0, 0.1, EPSILONS[::-1])
    with pytest.raises(ValueError, match="delta"):
        replace_one_gaussian_epsilon(1.0, 0.1, 10, 1.5)
    with pytest.raises(ValueError, match="steps"):
        replace_one_gaussian_epsilon(1.0, 0.1, 0, 1e-5)
    with pytest.raises(ValueError, match="noise_multiplier"):
        replace_one_gaussian_epsilon(1e-3, 0.5, 10, 1e-5)


def test_gpope_pld_calibration_is_sound_and_below_rdp():
    """GPOPE's PLD sigma (sensitivity 2h): spends at most eps, a little less noise spends
    more, never more noise than the RDP calibration; 'pld' by name is the same."""
    from dprl.xie2019 import calibrated_sigma, pld_epsilon, pld_sigma, tightest_sigma

    eps, delta, n, m = 1.0, 1e-5, 50, 40
    sigma = pld_sigma(eps, delta, n, m)
    assert pld_epsilon(sigma, delta, n, m) <= eps < pld_epsilon(sigma / 1.0002, delta, n, m)
    assert sigma < tightest_sigma(eps, delta, n, m)
    assert calibrated_sigma("pld", eps, delta, n, m) == sigma
    assert pld_epsilon(sigma / 2, delta, n, m, sensitivity=1.0) == pytest.approx(
        pld_epsilon(sigma, delta, n, m), abs=1e-12)


def test_calibration_lookup_names_a_missing_setting():
    from dprl.experiments.xie2019.calibration import calibration_at

    class Result:
        config = {"settings": [[0.1, 100, 100]]}
        arrays = {"pld": np.array([6.99])}

    assert calibration_at(Result, 0.1, 100, 100) == {"pld": 6.99}
    with pytest.raises(ValueError, match="not in xie2019-theorem4-pld"):
        calibration_at(Result, 1.0, 100, 100)
