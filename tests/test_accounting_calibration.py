"""Noise calibration: feasibility, tightness and agreement with dp-accounting."""

import logging

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as dp_rdp

from dprl import accounting as A

logging.getLogger("absl").setLevel(logging.ERROR)


@pytest.mark.parametrize("target,q,steps,method", [(1.0, 0.01, 1000, "improved"),
                                                   (8.0, 0.1, 100, "classic"),
                                                   (0.5, 1.0, 1, "improved")])
def test_calibrated_sigma_is_feasible_and_tight(target, q, steps, method):
    sigma = A.calibrate_subsampled_gaussian(target, 1e-5, q, steps, method=method)
    eps = lambda s: A.poisson_subsampled_gaussian_epsilon(s, q, steps, 1e-5, method=method)
    assert eps(sigma) <= target
    assert eps(sigma * (1 - 1e-6)) > target


def test_calibration_agrees_with_dp_accounting():
    orders = A.DEFAULT_INTEGER_ORDERS
    q, steps, target, delta = 0.01, 1000, 2.0, 1e-5
    reference = dpa.calibrate_dp_mechanism(
        lambda: dp_rdp.RdpAccountant(list(orders)),
        lambda s: dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(s)),
                                          steps),
        target, delta, dpa.ExplicitBracketInterval(0.3, 5.0), tol=1e-9)
    ours = A.calibrate_subsampled_gaussian(target, delta, q, steps, orders=orders)
    assert ours == pytest.approx(reference, rel=1e-6)


def test_calibrate_noise_multiplier_inverts_a_closed_form():
    # eps(sigma) = sqrt(2 log(1.25/delta)) / sigma inverts to sigma = sqrt(2 log(1.25/delta))/eps.
    fn = lambda sigma, delta: np.sqrt(2 * np.log(1.25 / delta)) / sigma
    sigma = A.calibrate_noise_multiplier(0.5, 1e-5, fn, rtol=1e-12)
    assert sigma == pytest.approx(np.sqrt(2 * np.log(1.25e5)) / 0.5, rel=2e-12)
    assert fn(sigma, 1e-5) <= 0.5


def test_unattainable_target_raises():
    with pytest.raises(ValueError, match="unattainable"):
        A.calibrate_subsampled_gaussian(1e-3, 1e-5, 0.01, 10, orders=[2.0, 8.0, 64.0])


def test_target_met_everywhere_raises():
    with pytest.raises(ValueError, match="met at every scale"):
        A.smallest_sufficient_scale(lambda x: 0.0, 1.0)


@pytest.mark.parametrize("call,match", [
    (lambda: A.calibrate_subsampled_gaussian(0.0, 1e-5, 0.01, 10), "target_eps must be > 0"),
    (lambda: A.calibrate_subsampled_gaussian(1.0, 1.0, 0.01, 10), r"delta must lie in \(0, 1\)"),
    (lambda: A.calibrate_subsampled_gaussian(1.0, 1e-5, 0.0, 10),
     r"sampling_rate must lie in \(0, 1\]"),
    (lambda: A.calibrate_subsampled_gaussian(1.0, 1e-5, 0.01, 0), "steps must be >= 1"),
    (lambda: A.calibrate_noise_multiplier(1.0, 1e-5, lambda s, d: 1 / s, rtol=-1.0),
     "rtol must be > 0"),
    (lambda: A.calibrate_noise_multiplier(1.0, 1e-5, lambda s, d: 1 / s, initial=0.0),
     "initial must be > 0"),
])
def test_bad_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_bisection_stops_at_adjacent_floats():
    """A tolerance below the float spacing used to loop forever once the bracket's ends were
    adjacent floats (hypothesis met such a case through analytic_gaussian_sigma); now it
    stops there, at the feasible end."""
    from dprl.accounting import smallest_sufficient_scale
    threshold = 1.2345678901234567
    result = smallest_sufficient_scale(lambda x: 0.0 if x >= threshold else 1.0, 0.5,
                                       rtol=1e-20)
    assert result >= threshold and np.nextafter(result, 0) < threshold
