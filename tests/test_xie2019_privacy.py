"""Xie et al. (2019) privacy analysis: Lemma 1, Theorem 4's tail, the full accountant, Table 1."""

import math

import numpy as np
import pytest

from dprl import xie2019 as x
from dprl.accounting import (rdp_to_dp, sampled_without_replacement_gaussian_rdp,
                             sampled_without_replacement_gaussian_rdp_approx)


def test_lemma1_hand_values():
    # sigma^2 = 2 >= 1/ln 2: the min is 4 (e^{1/2} - 1)
    expected = 2 * 3 / (2 * 100**2) * 4 * math.expm1(0.5)
    assert x.lemma1_log_moment(np.array([2]), 100, math.sqrt(2))[0] == pytest.approx(expected)
    # sigma^2 = 1 < 1/ln 2: the min is 2 e
    assert x.lemma1_log_moment(np.array([1]), 10, 1.0)[0] == pytest.approx(2 / 200 * 2 * math.e)
    with pytest.raises(ValueError, match="integers"):
        x.lemma1_log_moment(np.array([1.5]), 10, 1.0)


def test_lemma1_linearises_the_leading_term_of_wbk_theorem9():
    """lambda * eps(lambda + 1) of the j = 2 term is log(1 + ...) <= Lemma 1's bound."""
    lam = np.arange(1, 200)
    approx = lam * sampled_without_replacement_gaussian_rdp_approx(lam + 1.0, 1.3, 1, 500)
    assert np.all(approx <= x.lemma1_log_moment(lam, 500, 1.3) * (1 + 1e-12))
    assert np.allclose(approx[:5], x.lemma1_log_moment(lam[:5], 500, 1.3), rtol=1e-4)


@pytest.mark.parametrize(("n", "m", "sigma"), [(100, 50, 0.8), (10_000, 1000, 1.5),
                                                (5, 10, 3.0)])
def test_lemma1_delta_is_the_minimum_over_all_integer_lambdas(n, m, sigma):
    lam = np.arange(1, 200_000)
    brute = np.exp(np.minimum(n * x.lemma1_log_moment(lam, m, sigma) - lam * 0.1, 0.0)).min()
    assert x.lemma1_delta(0.1, n, m, sigma) == pytest.approx(brute, rel=1e-12)


def test_calibrations_meet_their_targets_and_are_smallest():
    s = x.lemma1_sigma(0.1, 1e-5, 1000, 1000)
    assert x.lemma1_delta(0.1, 1000, 1000, s) <= 1e-5 < x.lemma1_delta(0.1, 1000, 1000, s / 1.001)
    s = x.gpope_sigma(0.1, 1e-5, 1000, 1000)
    assert x.gpope_epsilon(s, 1e-5, 1000, 1000) <= 0.1 < x.gpope_epsilon(s / 1.001, 1e-5, 1000,
                                                                          1000)
    # the consistent replace-one pairing (2h) needs exactly twice the paper's (h)
    assert s == pytest.approx(2 * x.gpope_sigma(0.1, 1e-5, 1000, 1000, sensitivity=1.0),
                              rel=1e-8)


def test_full_accountant_is_wbk_theorem9_composed():
    rdp = sampled_without_replacement_gaussian_rdp(x.privacy.GPOPE_ORDERS, 1.7 / 2, 1, 300)
    eps = rdp_to_dp(x.privacy.GPOPE_ORDERS, 400 * rdp, 1e-5)[0]
    assert x.gpope_epsilon(1.7, 1e-5, 400, 300) == pytest.approx(eps, rel=1e-12)
    assert x.gpope_delta(1.7, eps, 400, 300) == pytest.approx(1e-5, rel=1e-6)


def test_lemma1_understates_the_noise_where_higher_terms_matter():
    """With small sigma the dropped terms dominate: the paper's sigma is too small even
    under its own sensitivity h."""
    paper = x.lemma1_sigma(0.1, 1e-5, 10_000, 100_000)
    full = x.gpope_sigma(0.1, 1e-5, 10_000, 100_000, sensitivity=1.0)
    assert paper < full / 2
    assert x.gpope_epsilon(paper, 1e-5, 10_000, 100_000, sensitivity=1.0) > 0.1


def test_theorem1_constant():
    assert x.theorem1_constant(2.0, 0.1, 1e-5, 100, 1000) == pytest.approx(
        2.0 * 1000 * 0.1 / math.sqrt(100 * math.log(1e5)))


def test_table1_relations():
    signs = x.relation_signs(0.1, 1e-5, 2000, 2000)
    expected = np.array([[0, -1, 1, -1, -1],
                         [-1, 0, 1, -1, -1],
                         [1, 1, 0, 1, 1],
                         [-1, -1, 1, 0, -1],
                         [-1, -1, 1, -1, 0]])
    assert np.array_equal(signs, expected)
    assert np.array_equal(signs, signs.T)  # the relation "move together / oppositely" is mutual


def test_refuses_bad_inputs():
    with pytest.raises(ValueError):
        x.lemma1_delta(0.0, 10, 10, 1.0)
    with pytest.raises(ValueError):
        x.gpope_sigma(0.1, 1.5, 10, 10)
    with pytest.raises(ValueError):
        x.gpope_epsilon(1.0, 1e-5, 10, 10, sensitivity=0.0)
    with pytest.raises(ValueError):
        x.lemma1_sigma(0.1, 1e-5, 0, 10)


@pytest.mark.parametrize(("sigma", "n", "m"), [(3.0, 1000, 1000), (1.2, 200, 5000)])
def test_full_accountant_against_dp_accounting(sigma, n, m):
    """dp-accounting's RdpAccountant (replace-one, the same event) is never looser than WBK
    Thm. 9 and, here, within 1 % of it (orders 2..64, where dp-accounting is fast)."""
    import dp_accounting as dpa
    from dp_accounting import rdp

    orders = np.arange(2, 65, dtype=float)
    accountant = rdp.RdpAccountant(list(orders), dpa.NeighboringRelation.REPLACE_ONE)
    accountant.compose(dpa.SampledWithoutReplacementDpEvent(m, 1, dpa.GaussianDpEvent(sigma / 2)),
                       n)
    ours = rdp_to_dp(orders, n * sampled_without_replacement_gaussian_rdp(orders, sigma / 2, 1, m),
                     1e-5)[0]
    theirs = accountant.get_epsilon(1e-5)
    assert theirs <= ours <= 1.01 * theirs


def test_the_exact_log_moment_of_lemma1s_pair_matches_numerical_integration():
    from scipy import integrate, stats

    from dprl.xie2019.privacy import exact_log_moment
    m, sigma = 50, 1.5
    q = 1 / m
    for lam in (1, 3, 8):
        def integrand(z):
            ratio = (1 - q) + q * math.exp((2 * z - 1) / (2 * sigma**2))
            return stats.norm.pdf(z, scale=sigma) * ratio ** (lam + 1)
        value = math.log(integrate.quad(integrand, -40, 40, limit=200)[0])
        assert math.isclose(float(exact_log_moment(np.array([lam]), m, sigma)[0]), value,
                            rel_tol=1e-8)


def test_lemma1_falls_below_the_exact_moment_of_its_own_pair():
    """The thresholds of issue 15: lambda = 8, 19, 55, 221 at sigma 0.8, 1.2, 2, 4, m = 1000."""
    from dprl.xie2019.privacy import exact_log_moment, lemma1_log_moment
    lam = np.arange(1, 300)
    for sigma, first in ((0.8, 8), (1.2, 19), (2.0, 55), (4.0, 221)):
        above = lam[exact_log_moment(lam, 1000, sigma) > lemma1_log_moment(lam, 1000, sigma)]
        assert above[0] == first


def test_the_paper_pair_epsilon_is_dp_accountings_pld():
    from dprl.xie2019.privacy import paper_pair_epsilon
    eps = paper_pair_epsilon(3.0, 1e-5, 1000, 1000)
    assert 0 < eps < 1
    with pytest.raises(ValueError, match="m"):
        paper_pair_epsilon(3.0, 1e-5, 10, 1)


def test_dp_accounting_sigma_is_the_smallest_meeting_eps_and_the_premise():
    orders = (2.0, 4.0, 8.0, 16.0)
    sigma = x.dp_accounting_sigma(1.0, 1e-5, 100, 1000, orders=orders, rtol=1e-3)
    assert x.dp_accounting_epsilon(sigma, 1e-5, 100, 1000, orders=orders) <= 1.0
    assert x.dp_accounting_epsilon(sigma / 1.002, 1e-5, 100, 1000, orders=orders) > 1.0
    # sensitivity enters only through sigma / sensitivity
    assert x.dp_accounting_epsilon(2 * sigma, 1e-5, 100, 1000, sensitivity=2.0,
                                   orders=orders) == pytest.approx(
        x.dp_accounting_epsilon(sigma, 1e-5, 100, 1000, sensitivity=1.0, orders=orders))
    assert x.theorem1_premise(0.1, 2000, 100, c1=1.0)  # 0.1 < 2000 / 100^2
    assert not x.theorem1_premise(0.1, 1000, 1000, c1=1.0)  # 0.1 >= 1000 / 1000^2
    with pytest.raises(ValueError, match="c1"):
        x.theorem1_premise(0.1, 10, 10, c1=0.0)
