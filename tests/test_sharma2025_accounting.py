import math

import numpy as np
import pytest
from dp_accounting import GaussianDpEvent, PoissonSampledDpEvent, SelfComposedDpEvent
from dp_accounting.rdp import rdp_privacy_accountant
from scipy import integrate, stats
from scipy.stats import binom

from dprl.accounting import calibrate_subsampled_gaussian
from dprl.accounting.pld import PLDOutOfReachError, poisson_gaussian_epsilon
from dprl.sharma2025 import accounting
from dprl.sharma2025.accounting import (TABLE3, dp_steps_upper_bound, dp_sgd_epsilon,
                                        hidden_coin_epsilon, hidden_coin_rdp, noise_for_budget,
                                        reading_budgets, selective_epsilon, steps_for_budget,
                                        table3_budgets)
from dprl.sharma2025.release import appendix_b3_split

M = 3000


@pytest.mark.parametrize("s, q, steps", [(1.0, 0.01, 1000), (10.0, 256 / M, 25_000),
                                         (20.0, 0.8 * 128 / M, 20_000)])
def test_pld_is_tighter_than_rdp_and_rdp_matches_dp_accounting(s, q, steps):
    delta = 1 / M
    pld, rdp = dp_sgd_epsilon(s, q, steps, delta), dp_sgd_epsilon(s, q, steps, delta, "rdp")
    accountant = rdp_privacy_accountant.RdpAccountant()
    accountant.compose(SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(s)), steps))
    assert 0 < pld <= rdp and rdp == pytest.approx(accountant.get_epsilon(delta), rel=0.02)


@pytest.mark.parametrize("accountant", ["pld", "rdp"])
def test_noise_calibration_round_trip(accountant):
    s = noise_for_budget(1.0, 1e-5, 0.05, 100, accountant, rtol=1e-3)
    assert dp_sgd_epsilon(s, 0.05, 100, 1e-5, accountant) <= 1.0
    assert dp_sgd_epsilon(s / 1.001, 0.05, 100, 1e-5, accountant) > 1.0
    if accountant == "rdp":
        assert s == pytest.approx(calibrate_subsampled_gaussian(1.0, 1e-5, 0.05, 100), rel=2e-3)
    else:
        assert s < noise_for_budget(1.0, 1e-5, 0.05, 100, "rdp", rtol=1e-3)


def test_steps_for_budget_is_the_largest_affordable_and_monotone():
    n = steps_for_budget(1.0, 1e-5, 2.0, 0.05, "rdp")
    assert dp_sgd_epsilon(2.0, 0.05, n, 1e-5, "rdp") <= 1.0 < dp_sgd_epsilon(2.0, 0.05, n + 1,
                                                                             1e-5, "rdp")
    exact = steps_for_budget(1.0, 1e-5, 2.0, 0.05, "pld", rtol=0.0)
    assert dp_sgd_epsilon(2.0, 0.05, exact, 1e-5) <= 1.0 < dp_sgd_epsilon(2.0, 0.05, exact + 1,
                                                                          1e-5)
    assert exact > n  # PLD affords more steps than RDP
    rough = steps_for_budget(1.0, 1e-5, 2.0, 0.05, "pld", rtol=0.05)
    assert exact / 1.06 <= rough <= exact
    base = steps_for_budget(1.0, 1e-5, 2.0, 0.01, "rdp")
    for more_eps, more_delta, more_noise, less_rate in [(1.5, 1e-5, 2.0, 0.01),
                                                        (1.0, 1e-4, 2.0, 0.01),
                                                        (1.0, 1e-5, 2.5, 0.01),
                                                        (1.0, 1e-5, 2.0, 0.008)]:
        assert steps_for_budget(more_eps, more_delta, more_noise, less_rate, "rdp") > base
    assert steps_for_budget(0.01, 1e-5, 0.5, 1.0, "rdp") == 0  # not even one step fits


def test_hiv_and_cartpole_training_lengths_of_the_notes():
    # HIV, eps = 5, CQL: eps2 = 5, delta2 = 1/3000, s = 10, q = 256/3000 -> about 2.5e4 steps
    assert dp_sgd_epsilon(10.0, 256 / M, 24_700, 1 / M) <= 5.0 < dp_sgd_epsilon(10.0, 256 / M,
                                                                                24_900, 1 / M)
    # CartPole, eps = 10, CQL: eps2 = 2.5, delta2 = 1/30000, s = 80, q = 0.8 * 128 / 3000:
    # 2.3e6 steps fit under PLD (one evaluation, ~4 s) but not under RDP
    assert dp_sgd_epsilon(80.0, 0.8 * 128 / M, 2_300_000, 1 / (10 * M)) <= 2.5 \
        < dp_sgd_epsilon(80.0, 0.8 * 128 / M, 2_300_000, 1 / (10 * M), "rdp")


def test_table3_training_lengths_under_rdp():
    table = table3_budgets(accountant="rdp")
    assert len(table) == 16 == len(TABLE3) and all(row["p"] > 0 for row in table)
    print("\nTable 3 DP-SGD configurations (m = 3000): steps to spend eps2 at q = p b / m, RDP")
    for row in table:
        print(f"  {row['env']:<11} eps {row['eps']:<4} {row['algorithm']}: b {row['batch_size']}"
              f", p {row['p']}, s {row['noise_multiplier']:g}, eps2 {row['eps2']:.4g}, delta2 "
              f"{row['delta2']:.4g}, q {row['sampling_rate']:.4g}: {row['steps']:.4g} steps")
    steps = {(r["env"], r["eps"], r["algorithm"]): r["steps"] for r in table}
    assert min(steps.values()) == steps["HIV", 5.0, "CQL"]
    assert max(steps.values()) == steps["CartPole", 10.0, "CQL"]
    assert 2.0e4 < steps["HIV", 5.0, "CQL"] < 2.2e4
    assert 1.9e6 < steps["CartPole", 10.0, "CQL"] < 2.1e6
    (cartpole,) = [r for r in table if (r["env"], r["eps"], r["algorithm"]) == ("CartPole", 10.0,
                                                                                 "CQL")]
    assert (cartpole["eps2"], cartpole["delta2"]) == (2.5, pytest.approx(1 / (10 * M)))


def test_selective_epsilon_readings():
    s, b, p, n, delta = 20.0, 128, 0.5, 5000, 1e-5
    paper = selective_epsilon(s, b, M, p, n, delta, "paper", accountant="rdp")
    assert paper == dp_sgd_epsilon(s, p * b / M, n, delta, "rdp")
    k = 2500
    visible = selective_epsilon(s, b, M, p, n, delta, "visible_coins", dp_steps=k, accountant="rdp")
    assert visible == dp_sgd_epsilon(s, b / M, k, delta, "rdp")
    assert visible > 1.3 * paper  # the paper's reading understates the cost of the expected run
    assert selective_epsilon(s, b, M, p, n, delta, "visible_coins", dp_steps=0) == 0.0
    with pytest.raises(ValueError, match="dp_steps is required"):
        selective_epsilon(s, b, M, p, n, delta, "visible_coins")
    with pytest.raises(ValueError, match="dp_steps must be <="):
        selective_epsilon(s, b, M, p, n, delta, "visible_coins", dp_steps=n + 1)
    with pytest.raises(ValueError, match="reading"):
        selective_epsilon(s, b, M, p, n, delta, "hidden")
    with pytest.raises(ValueError, match="batch_size must be <="):
        selective_epsilon(s, M + 1, M, p, n, delta)
    k_max = dp_steps_upper_bound(10_000, 0.8, 1e-6)
    assert binom.sf(k_max, 10_000, 0.8) <= 1e-6 < binom.sf(k_max - 1, 10_000, 0.8)


def test_the_paper_reading_allows_about_one_over_p_times_the_steps():
    print("\nSteps allowed under the paper's q = p b / m vs the visible-coins q = b / m (RDP):")
    for row in TABLE3:
        if row.p == 1.0:
            continue
        split = appendix_b3_split(row.env, row.eps, M)
        budgets = reading_budgets(split.eps2, split.delta2, row.noise_multiplier,
                                  row.batch_size, M, row.p, "rdp")
        print(f"  {row.env:<11} eps {row.eps:<4} {row.algorithm} p {row.p}: paper "
              f"{budgets.paper_steps:.4g}, visible {budgets.visible_dp_steps:.4g} DP steps, "
              f"ratio {budgets.ratio:.4g} (1/p = {1 / row.p:.4g})")
        assert budgets.ratio == pytest.approx(1 / row.p, rel=2e-3)
    # under PLD too, at a smaller budget (HIV-like rate, p = 0.5)
    budgets = reading_budgets(1.0, 1e-5, 10.0, 256, M, 0.5, "pld", rtol=1e-3)
    assert budgets.ratio == pytest.approx(2.0, rel=0.01)


def test_bad_arguments():
    with pytest.raises(ValueError, match="accountant"):
        dp_sgd_epsilon(1.0, 0.1, 10, 1e-5, "moments")
    with pytest.raises(ValueError, match="eps"):
        steps_for_budget(0.0, 1e-5, 1.0, 0.1)
    with pytest.raises(ValueError, match="delta"):
        noise_for_budget(1.0, 1.0, 0.1, 10)
    with pytest.raises(ValueError, match="sampling_rate"):
        steps_for_budget(1.0, 1e-5, 1.0, 0.0)
    with pytest.raises(ValueError, match="tail"):
        dp_steps_upper_bound(10, 0.5, 0.0)
    assert np.isfinite(dp_sgd_epsilon(1.0, 1.0, 1, 1e-5))


@pytest.mark.parametrize("s, q, steps", [
    (80.0, 0.8 * 128 / M, 20_000), (20.0, 128 / M, 7), (40.0, 0.01, 5), (10.0, 256 / M, 1),
    (1.0, 0.01, 200), (2.0, 1.0, 5), (0.57, 1e-4, 20)])
def test_pld_is_dp_accountings_bit_for_bit(s, q, steps):
    """Sparse one-step PLDs (few grid points) composed by FFT or kept sparse, dense ones,
    q = 1 (symmetric): the bounded path gives PLDAccountant's exact eps."""
    from dp_accounting.pld import pld_privacy_accountant

    reference = pld_privacy_accountant.PLDAccountant()
    reference.compose(SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(s)), steps))
    assert poisson_gaussian_epsilon(s, q, steps, 1 / M) == reference.get_epsilon(1 / M)


@pytest.mark.parametrize("args, name", [
    ((1e-3, 0.01, 10, 1e-5), "noise_multiplier = 0.001"),    # was a 38 GiB MemoryError
    ((0.05, 0.01, 10, 1e-5), "noise_multiplier = 0.05"),     # was over 30 s
    ((1e-300, 0.5, 1, 1e-5), "noise_multiplier = 1e-300"),
    ((1.0, 0.01, 10**9, 1e-5), "steps = 1000000000"),        # was over 30 s and 7.3 GB
    ((20.0, 0.0427, 10**8, 1e-5), "steps = 100000000"), ((2.0, 0.05, 100, 1e-16), "delta")])
def test_pld_refuses_what_it_cannot_afford_at_once(args, name):
    """Settings beyond the PLD's size limits (or a delta below its truncated mass: eps inf)
    are refused by name at once, pointing to RDP, which answers them."""
    import time

    started = time.perf_counter()
    with pytest.raises(PLDOutOfReachError, match=name) as refusal:
        dp_sgd_epsilon(*args)
    assert time.perf_counter() - started < 5  # generous guard: the checks come first
    assert "accountant='rdp'" in str(refusal.value)
    if args[0] > 1e-300:
        assert math.isfinite(dp_sgd_epsilon(*args, "rdp"))


def test_pld_searches_refuse_out_of_reach_answers_by_eps():
    """noise_for_budget(50, ...) needed noise multipliers the PLD cannot build (40 s before);
    steps_for_budget's answer can lie beyond its composition limit; a noise multiplier
    already out of reach is named as such."""
    with pytest.raises(PLDOutOfReachError, match="eps = 50.0 in steps = 10"):
        noise_for_budget(50, 1e-5, 0.01, 10)
    with pytest.raises(PLDOutOfReachError, match="eps = 50.0 at noise_multiplier = 20.0"):
        steps_for_budget(50, 1e-5, 20.0, 0.0427)
    with pytest.raises(PLDOutOfReachError, match="noise_multiplier = 0.1 is too small"):
        steps_for_budget(5.0, 1e-5, 0.1, 0.01)
    with pytest.raises(ValueError, match="noise_multiplier = 1e[+]300 is too large"):
        dp_sgd_epsilon(1e300, 0.5, 1, 1e-5)   # dp-accounting's square would overflow
    with pytest.raises(ValueError, match="sampling_rate = 5e-324 is too small"):
        dp_sgd_epsilon(1.0, 5e-324, 1, 1e-5)  # subnormal: dp-accounting's bounds fail


def _refusing(monkeypatch, refuse):
    """Make the PLD accountant refuse the noise multipliers and step counts ``refuse(s, n)``."""
    def pld(s, q, n, delta):
        if refuse(s, n):
            raise PLDOutOfReachError(f"out of reach (test): s = {s}, n = {n}")
        return poisson_gaussian_epsilon(s, q, n, delta)

    monkeypatch.setattr(accounting, "poisson_gaussian_epsilon", pld)


def test_pld_searches_stay_within_reach(monkeypatch):
    """Refused probes count as exceeding the budget: where they do exceed it the searches
    return the same answers; where the answer lies among them they raise, naming eps."""
    noise = noise_for_budget(1.0, 1e-5, 0.05, 100, rtol=1e-2)
    steps = steps_for_budget(1.0, 1e-5, 2.0, 0.05, "pld", rtol=0.0)
    _refusing(monkeypatch, lambda s, n: s < 0.9 * noise)
    assert noise_for_budget(1.0, 1e-5, 0.05, 100, rtol=1e-2) == noise
    _refusing(monkeypatch, lambda s, n: s < 1.0005 * noise)
    with pytest.raises(PLDOutOfReachError, match="eps = 1.0 in steps = 100"):
        noise_for_budget(1.0, 1e-5, 0.05, 100, rtol=1e-2)
    _refusing(monkeypatch, lambda s, n: n > 1.1 * steps)
    assert steps_for_budget(1.0, 1e-5, 2.0, 0.05, "pld", rtol=0.0) == steps
    _refusing(monkeypatch, lambda s, n: n > steps)
    with pytest.raises(PLDOutOfReachError, match="eps = 1.0 at noise_multiplier = 2.0"):
        steps_for_budget(1.0, 1e-5, 2.0, 0.05, "pld", rtol=0.0)


def _mixture_renyi_moment(alpha, sigma, q, p):
    """E_Q[(dP/dQ)^alpha] of one hidden-coin step by quadrature: the point mass (1 - p) plus
    p times the subsampled Gaussian's moment, (1 - q) N(0, s) + q N(1, s) against N(0, s)."""
    ratio = lambda x: 1 - q + q * math.exp((2 * x - 1) / (2 * sigma**2))
    moment = integrate.quad(lambda x: stats.norm.pdf(x, 0, sigma) * ratio(x) ** alpha,
                            -30 * sigma, 30 * sigma, limit=400, epsabs=0, epsrel=1e-12)[0]
    return 1 - p + p * moment


def test_hidden_coin_rdp_is_the_mixture_moment():
    sigma, q, p = 2.0, 128 / 3000, 0.6
    orders = np.array([2.0, 3.0, 5.5])
    expected = [math.log(_mixture_renyi_moment(a, sigma, q, p)) / (a - 1) for a in orders]
    assert np.allclose(hidden_coin_rdp(orders, sigma, q, p), expected, rtol=1e-8, atol=0)


def test_hidden_coins_cost_about_p_not_p_squared():
    """p = 1 is plain DP-SGD; hidden coins with noiseless stable steps spend about what pN
    visible DP steps do, and more than the paper's rate p b / m claims."""
    sigma, b, m, steps, delta = 20.0, 128, 3000, 20_000, 1e-5
    assert hidden_coin_epsilon(sigma, b, m, 1.0, steps, delta) == pytest.approx(
        dp_sgd_epsilon(sigma, b / m, steps, delta, "rdp"), rel=1e-12)
    for p in (0.5, 0.8):
        hidden = hidden_coin_epsilon(sigma, b, m, p, steps, delta)
        visible = dp_sgd_epsilon(sigma, b / m, int(p * steps), delta, "rdp")
        paper = dp_sgd_epsilon(sigma, p * b / m, steps, delta, "rdp")
        assert hidden == pytest.approx(visible, rel=0.02) and hidden > 1.1 * paper
    with pytest.raises(ValueError, match="p"):
        hidden_coin_epsilon(sigma, b, m, 0.0, steps, delta)
