"""RDP composition and conversion to (eps, delta)-DP against closed forms and dp-accounting."""

import logging
import math

import numpy as np
import pytest
import dp_accounting as dpa
from dp_accounting.rdp import rdp_privacy_accountant as dp_rdp

from dprl import accounting as A

logging.getLogger("absl").setLevel(logging.ERROR)

#: Integer orders used where dp-accounting must agree to 1e-9 (see test_accounting_rdp for
#: why fractional orders differ).
ORDERS = A.DEFAULT_INTEGER_ORDERS


def _rdp_accountant_epsilon(event, delta, orders=ORDERS,
                            relation=dpa.NeighboringRelation.ADD_OR_REMOVE_ONE):
    accountant = dp_rdp.RdpAccountant(list(orders), relation)
    accountant.compose(event)
    return accountant.get_epsilon(delta)


@pytest.mark.parametrize("sigma,steps,delta", [(1.0, 1, 1e-5), (4.0, 50, 1e-6),
                                               (20.0, 1000, 1e-8)])
def test_classic_gaussian_conversion_hits_analytic_minimiser(sigma, steps, delta):
    """steps * alpha/(2 sigma^2) + log(1/delta)/(alpha - 1) is minimised at
    alpha* = 1 + sqrt(log(1/delta)/rho), rho = steps/(2 sigma^2), with value rho + 2 sqrt(rho L)."""
    rho, log_inv_delta = steps / (2 * sigma**2), math.log(1 / delta)
    best_order = 1 + math.sqrt(log_inv_delta / rho)
    grid = np.append(np.linspace(1.01, 3 * best_order, 999), best_order)
    rdp = A.self_compose_rdp(A.gaussian_rdp(grid, sigma), steps)
    eps, order = A.rdp_to_dp(grid, rdp, delta, method="classic")
    assert eps == pytest.approx(rho + 2 * math.sqrt(rho * log_inv_delta), rel=1e-12)
    assert order == best_order
    coarse = A.rdp_to_dp(A.DEFAULT_ORDERS, A.gaussian_rdp(A.DEFAULT_ORDERS, sigma) * steps,
                         delta, method="classic")[0]
    assert coarse >= eps * (1 - 1e-12)


@pytest.mark.parametrize("q,sigma,steps", [(1.0, 2.0, 10), (0.01, 1.1, 1000), (0.1, 0.8, 200),
                                           (0.001, 3.0, 100_000)])
def test_improved_epsilon_matches_rdp_accountant(q, sigma, steps):
    event = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)),
                                    steps)
    ours = A.poisson_subsampled_gaussian_epsilon(sigma, q, steps, 1e-5, orders=ORDERS)
    assert ours == pytest.approx(_rdp_accountant_epsilon(event, 1e-5), rel=1e-9)
    assert ours <= A.poisson_subsampled_gaussian_epsilon(sigma, q, steps, 1e-5, orders=ORDERS,
                                                         method="classic")


def test_heterogeneous_composition_matches_rdp_accountant():
    event = dpa.ComposedDpEvent([
        dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(30.0), 20),
        dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.02, dpa.GaussianDpEvent(1.3)), 500),
    ])
    rdp = A.compose_rdp(A.self_compose_rdp(A.gaussian_rdp(ORDERS, 30.0), 20),
                        A.self_compose_rdp(A.poisson_subsampled_gaussian_rdp(ORDERS, 1.3, 0.02),
                                           500))
    eps, _ = A.rdp_to_dp(ORDERS, rdp, 1e-6)
    assert eps == pytest.approx(_rdp_accountant_epsilon(event, 1e-6), rel=1e-9)


def test_default_orders_epsilon_never_exceeds_rdp_accountant():
    """With fractional orders dprl's exact series can only lower eps (dp-accounting's is an
    upper bound there)."""
    event = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.05, dpa.GaussianDpEvent(0.9)),
                                    2000)
    ours = A.poisson_subsampled_gaussian_epsilon(0.9, 0.05, 2000, 1e-5)
    reference = _rdp_accountant_epsilon(event, 1e-5, orders=A.DEFAULT_ORDERS)
    assert ours <= reference * (1 + 1e-12)


@pytest.mark.parametrize("m,n,sigma,steps", [(100, 10_000, 1.0, 500), (32, 1000, 0.7, 100)])
def test_wor_epsilon_not_below_rdp_accountant(m, n, sigma, steps):
    orders = np.arange(2, 33)
    sampled = dpa.SampledWithoutReplacementDpEvent(n, m, dpa.GaussianDpEvent(sigma))
    event = dpa.SelfComposedDpEvent(sampled, steps)
    reference = _rdp_accountant_epsilon(event, 1e-5, orders,
                                        dpa.NeighboringRelation.REPLACE_ONE)
    ours = A.sampled_without_replacement_gaussian_epsilon(sigma, m, n, steps, 1e-5, orders)
    assert ours >= reference * (1 - 1e-12)


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.0])
def test_rdp_epsilon_of_one_gaussian_is_above_the_exact_one(sigma):
    eps, _ = A.rdp_to_dp(A.DEFAULT_ORDERS, A.gaussian_rdp(A.DEFAULT_ORDERS, sigma), 1e-5)
    assert eps > dpa.get_epsilon_gaussian(sigma, 1e-5)


@pytest.mark.parametrize("method", ["classic", "improved"])
def test_rdp_to_delta_inverts_rdp_to_dp(method):
    rdp = A.self_compose_rdp(A.poisson_subsampled_gaussian_rdp(ORDERS, 1.0, 0.01), 3000)
    eps, order = A.rdp_to_dp(ORDERS, rdp, 1e-6, method)
    delta, delta_order = A.rdp_to_delta(ORDERS, rdp, eps, method)
    assert delta == pytest.approx(1e-6, rel=1e-9) and delta_order == order
    if method == "improved":
        assert delta == pytest.approx(dp_rdp.compute_delta(ORDERS, rdp, eps)[0], rel=1e-9)
    assert A.rdp_to_delta(ORDERS, rdp, 0.0, method)[0] <= 1.0


def test_rdp_to_dp_reports_zero_for_a_negative_bound():
    assert A.rdp_to_dp([2.0], [0.0], 0.9) == (0.0, 2.0)


def test_compose_rdp_adds_per_order():
    a, b = np.array([0.1, 0.2, 0.3]), np.array([1.0, 0.0, 2.0])
    np.testing.assert_allclose(A.compose_rdp(a, b, a), [1.2, 0.4, 2.6], rtol=1e-15)
    np.testing.assert_array_equal(A.self_compose_rdp(a, 4), 4 * a)


def test_advanced_composition_formula():
    # Dwork & Roth 2014, Cor. 3.21 with eps = 0.1, k = 100, delta' = 1e-6, delta = 1e-7:
    # sqrt(200 ln 1e6) * 0.1 + 100 * 0.1 * (e^0.1 - 1) = 6.30823095051340822... (20 digits)
    eps, delta = A.advanced_composition(0.1, 1e-7, 100, 1e-6)
    assert eps == pytest.approx(6.3082309505134082, rel=1e-14)
    assert delta == pytest.approx(100 * 1e-7 + 1e-6, rel=1e-15)
    pure = A.advanced_composition(0.01, 0.0, 10_000, 1e-5)
    assert pure[1] == 1e-5 and pure[0] < 10_000 * 0.01  # beats basic composition here
    assert A.advanced_composition(1.0, 0.0, 1, 1e-5)[0] > 1.0  # but not for k = 1


@pytest.mark.parametrize("call,match", [
    (lambda: A.rdp_to_dp([2.0, 3.0], [0.1], 1e-5), "rdp must have the shape of orders"),
    (lambda: A.rdp_to_dp([2.0], [-0.1], 1e-5), "rdp must be >= 0"),
    (lambda: A.rdp_to_dp([2.0], [0.1], 0.0), r"delta must lie in \(0, 1\)"),
    (lambda: A.rdp_to_dp([2.0], [0.1], 1e-5, method="optimal"), "method must be one of"),
    (lambda: A.rdp_to_dp([1.0], [0.1], 1e-5), "orders must all be > 1"),
    (lambda: A.rdp_to_delta([2.0], [0.1], -1.0), "eps must be >= 0"),
    (lambda: A.rdp_to_delta([2.0], [np.nan], 1.0), "rdp must contain only finite"),
    (lambda: A.compose_rdp(), "at least one RDP curve"),
    (lambda: A.compose_rdp([0.1, 0.2], [0.1]), "share the orders' shape"),
    (lambda: A.self_compose_rdp([0.1], 0), "steps must be >= 1"),
    (lambda: A.self_compose_rdp([0.1], 2.5), "steps must be an integer"),
    (lambda: A.advanced_composition(0.0, 0.0, 10, 1e-5), "eps must be > 0"),
    (lambda: A.advanced_composition(0.1, 1.0, 10, 1e-5), r"delta must lie in \[0, 1\)"),
    (lambda: A.advanced_composition(0.1, 0.0, 0, 1e-5), "k must be >= 1"),
    (lambda: A.advanced_composition(0.1, 0.0, 10, 0.0), r"delta_prime must lie in \(0, 1\)"),
    (lambda: A.poisson_subsampled_gaussian_epsilon(1.0, 0.1, 0, 1e-5), "steps must be >= 1"),
    (lambda: A.sampled_without_replacement_gaussian_epsilon(1.0, 5, 10, 1, 1e-5, [2.5]),
     "must be integers"),
])
def test_bad_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call()
