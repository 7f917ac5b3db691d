"""The exact calibration of the smoothed Gaussian mechanism (beyond Balle et al. 2016)."""

import numpy as np
import pytest

from dprl.balle2016 import smoothing_constants
from dprl.balle2016.calibration import (gaussian_pair_delta, smooth_gaussian_alpha,
                                        smooth_gaussian_delta)
from dprl.mechanisms import analytic_gaussian_sigma, gaussian_delta


@pytest.mark.parametrize("log_ratio", [0.0, 1e-9, -1e-9])
def test_equal_variances_give_the_gaussian_mechanism(log_ratio):
    for shift in (0.05, 0.3, 1.0):
        assert gaussian_pair_delta(0.1, shift, log_ratio, 40) == pytest.approx(
            gaussian_delta(0.1, shift, 1.0), rel=1e-6)


def test_different_variances_match_monte_carlo():
    rng, d, shift, log_r, eps = np.random.default_rng(0), 5, 0.3, 0.2, 0.1
    r = np.exp(log_r)

    def loss(x):
        return d * log_r - 0.5 * (x**2).sum(1) + 0.5 * (((x - shift * np.eye(d)[0]) / r) ** 2
                                                        ).sum(1)

    n = 2_000_000
    p = (loss(rng.standard_normal((n, d))) > eps).mean()
    q = (loss(shift * np.eye(d)[0] + r * rng.standard_normal((n, d))) > eps).mean()
    se = np.sqrt((p * (1 - p) + np.exp(2 * eps) * q * (1 - q)) / n)
    assert abs(p - np.exp(eps) * q - gaussian_pair_delta(eps, shift, log_r, d)) < 5 * se


def test_delta_grows_with_the_shift_and_the_variance_gap():
    shifts = np.linspace(0, 1, 11)
    for log_r in (-0.01, 0.0, 0.01):
        deltas = [gaussian_pair_delta(0.1, s, log_r, 40) for s in shifts]
        assert np.all(np.diff(deltas) > 0)
    assert gaussian_pair_delta(0.1, 0.0, 0.05, 40) > gaussian_pair_delta(0.1, 0.0, 0.01, 40)


def test_recalibrated_alpha_meets_delta_and_is_far_below_lemma1():
    alpha, beta = smoothing_constants(0.1, 0.1, 40)
    tight = smooth_gaussian_alpha(0.1, 0.1, beta, 40)
    assert smooth_gaussian_delta(0.1, tight, beta, 40) <= 0.1
    assert smooth_gaussian_delta(0.1, tight / 1.001, beta, 40) > 0.1
    assert smooth_gaussian_delta(0.1, alpha, beta, 40) < 1e-10  # Lemma 1 is very loose here
    # beta -> 0 leaves the Gaussian mechanism: alpha = sigma / sensitivity, analytically
    assert tight == pytest.approx(analytic_gaussian_sigma(1.0, 0.1, 0.1), rel=1e-3)


def test_refuses_impossible_or_bad_inputs():
    with pytest.raises(ValueError, match="alone"):
        smooth_gaussian_alpha(0.1, 0.1, 0.3, 40)
    for bad in ({"eps": 0.0}, {"shift": -1.0}, {"d": 1}):
        kwargs = {"eps": 0.1, "shift": 0.1, "log_ratio": 0.0, "d": 40} | bad
        with pytest.raises(ValueError):
            gaussian_pair_delta(**kwargs)


def test_noise_scales_take_other_constants():
    from dprl import balle2016 as b
    from dprl.balle2016.signature_noise import lsl_noise_scale_at, lsw_noise_scale_at
    from dprl.features import tabular_features

    Phi, w, v = tabular_features(4), np.full(4, 0.25), np.array([30, 5, 0, 12])
    lemma1 = smoothing_constants(0.1, 0.1, 4)
    assert lsw_noise_scale_at(v, Phi, w, 1.0, 0.1, 0.1, constants=lemma1) == \
        lsw_noise_scale_at(v, Phi, w, 1.0, 0.1, 0.1)
    alpha, beta = 3.0, 0.01
    expected = alpha * 1.0 * 2.0 * np.sqrt(b.lsw_smooth_bound(v, w, beta))  # ||pinv|| = 2
    assert lsw_noise_scale_at(v, Phi, w, 1.0, 0.1, 0.1, constants=(alpha, beta)) == \
        pytest.approx(expected, rel=1e-12)
    c_lambda = b.ridge_constant(Phi, w, 5.0)
    expected = 2 * alpha * np.sqrt(b.lsl_smooth_bound(v, 40, w, c_lambda, beta)) / (5.0 - 0.25)
    assert lsl_noise_scale_at(v, 40, Phi, w, 5.0, 1.0, 0.1, 0.1, constants=(alpha, beta)) == \
        pytest.approx(expected, rel=1e-12)
    for bad in ((3.0,), (0.0, 0.1), (3.0, -1.0), [3.0, 0.1]):
        with pytest.raises(ValueError):
            lsw_noise_scale_at(v, Phi, w, 1.0, 0.1, 0.1, constants=bad)
