"""dprl.audit: Clopper-Pearson against scipy's exact binomial test, the trade-off curves against
their definitions, and the lower bound on the Gaussian and Laplace mechanisms: below the claim
when calibrated, above it when under-noised, near the tight eps with many runs."""

import numpy as np
import pytest
from scipy import stats

from dprl import audit
from dprl.mechanisms import analytic_gaussian_sigma, gaussian_delta, gaussian_epsilon


def _gaussian_curves(sigma: float, runs: int, seed: int) -> tuple:
    """Selection and evaluation trade-offs of N(0, sigma^2) against N(1, sigma^2)."""
    rng = np.random.default_rng(seed)
    edges = np.linspace(-6 * sigma, 1 + 6 * sigma, 1501)
    null = audit.histogram(rng.normal(0, sigma, (2, runs)), edges)
    alternative = audit.histogram(1 + rng.normal(0, sigma, (2, runs)), edges)
    return null, alternative, edges


@pytest.mark.parametrize("k", [0, 1, 7, 250, 999, 1000])
def test_clopper_pearson_matches_scipy_exact_binomial_interval(k):
    low, high = audit.clopper_pearson(k, 1000, 0.9)
    expected = stats.binomtest(k, 1000).proportion_ci(0.9, method="exact")
    assert np.isclose(low, expected.low, rtol=1e-10, atol=1e-14)
    assert np.isclose(high, expected.high, rtol=1e-10, atol=1e-14)


def test_histogram_and_trade_off_count_every_threshold_exactly():
    rng = np.random.default_rng(3)
    null, alternative = rng.normal(size=500), 1 + rng.normal(size=400)
    thresholds = np.linspace(-2, 3, 37)
    curve = audit.trade_off(null, alternative, thresholds)
    assert np.array_equal(curve.false_positives, (null[None] >= thresholds[:, None]).sum(1))
    assert np.array_equal(curve.false_negatives, (alternative[None] < thresholds[:, None]).sum(1))
    assert (curve.n_null, curve.n_alternative) == (500, 400)
    counts = audit.histogram(np.stack([null[:400], alternative]), thresholds)
    assert counts.shape == (2, 38) and np.array_equal(counts.sum(1), [400, 400])


def test_epsilon_bounds_are_the_kairouz_inequalities():
    fpr, fnr, delta = np.array([0.1, 0.3]), np.array([0.2, 0.05]), 0.01
    first, second = audit.epsilon_bounds(fpr, fnr, delta)
    assert np.allclose(np.exp(first) * fnr + fpr, 1 - delta)
    assert np.allclose(np.exp(second) * fpr + fnr, 1 - delta)
    assert audit.epsilon_bounds(0.995, 0.5, delta)[0] == -np.inf


def test_trade_off_curves_match_their_definitions():
    alpha = np.linspace(0, 1, 101)
    mu = 1.3
    beta = audit.gaussian_dp_trade_off(alpha, mu)
    # type II error of the most powerful level-alpha test of N(0, 1) against N(mu, 1)
    assert np.allclose(beta, stats.norm.cdf(stats.norm.ppf(1 - alpha) - mu))
    eps, delta = 0.7, 0.05
    curve = audit.dp_trade_off(alpha, eps, delta)
    assert np.all(curve + np.exp(eps) * alpha >= 1 - delta - 1e-12)
    assert np.all(alpha + np.exp(eps) * curve >= 1 - delta - 1e-12)
    assert np.all((curve == 0) | np.isclose(curve + np.exp(eps) * alpha, 1 - delta)
                  | np.isclose(alpha + np.exp(eps) * curve, 1 - delta))


def test_trade_off_curve_at_huge_eps_is_its_limit_not_nan():
    """Past eps = 709, e^eps overflows: the curve is its limit, 1 - delta at alpha = 0 and 0
    elsewhere, and an audit's reachable bound is then its ceiling at that size."""
    alpha = np.array([0.0, 1e-300, 0.1, 1.0])
    curve = audit.dp_trade_off(alpha, 800.0, 1e-5)
    assert np.array_equal(curve, [1 - 1e-5, 0.0, 0.0, 0.0]) and not np.signbit(curve).any()
    assert audit.dp_trade_off(alpha, 700.0, 1e-5)[2] == pytest.approx(np.exp(-700.0) * (0.9 - 1e-5))
    ceiling = audit.dp_reachable_bound(800.0, 1e-5, 1000, 1000)
    assert np.isfinite(ceiling) and ceiling == audit.dp_reachable_bound(50.0, 1e-5, 1000, 1000)


def test_gaussian_mechanism_trade_off_lies_above_its_tight_eps_delta_curve():
    sigma, delta = 2.0, 1e-3
    eps = gaussian_epsilon(delta, 1.0, sigma)
    alpha = np.linspace(1e-6, 1 - 1e-6, 2001)
    assert np.all(audit.gaussian_dp_trade_off(alpha, 1 / sigma)
                  >= audit.dp_trade_off(alpha, eps, delta) - 1e-9)


def test_calibrated_gaussian_mechanism_shows_no_violation():
    eps, delta = 1.0, 1e-5
    sigma = analytic_gaussian_sigma(1.0, eps, delta)
    for seed in range(5):
        bound = audit.pilot_lower_bound(*_gaussian_curves(sigma, 100_000, seed), delta, 1)
        assert bound.eps < eps


def test_under_noised_gaussian_mechanism_shows_a_violation():
    eps, delta = 1.0, 1e-5
    sigma = analytic_gaussian_sigma(1.0, eps, delta) / 3  # claimed eps 1, true eps 3.407
    assert gaussian_epsilon(delta, 1.0, sigma) > 3
    bound = audit.pilot_lower_bound(*_gaussian_curves(sigma, 100_000, 11), delta, 1)
    assert bound.eps > eps
    assert gaussian_delta(eps, 1.0, sigma) > delta


def test_lower_bound_approaches_the_tight_eps_of_the_gaussian_mechanism():
    sigma, delta = 1.0, 1e-3
    tight = gaussian_epsilon(delta, 1.0, sigma)  # 3.139
    bound = audit.pilot_lower_bound(*_gaussian_curves(sigma, 500_000, 5), delta, 1)
    assert tight - 0.4 < bound.eps <= tight  # within 0.4 (13%) of the tight eps
    scan = audit.epsilon_lower_bound(
        audit.trade_off_from_histograms(*_gaussian_curves(sigma, 500_000, 5)), delta)
    assert tight - 0.2 < scan.eps <= tight


def test_lower_bound_approaches_eps_of_the_laplace_mechanism():
    rng = np.random.default_rng(8)
    edges = np.linspace(-10, 11, 2101)
    null = audit.histogram(rng.laplace(0, 1, (2, 500_000)), edges)
    alternative = audit.histogram(1 + rng.laplace(0, 1, (2, 500_000)), edges)
    bound = audit.pilot_lower_bound(null, alternative, edges, 0.0, 1)
    assert 0.97 < bound.eps <= 1.0  # eps = 1 (b = 1, sensitivity 1), within 3%


@pytest.mark.parametrize("call, name", [
    (lambda: audit.clopper_pearson(3, 10, 1.0), "confidence"),
    (lambda: audit.clopper_pearson(11, 10), "successes"),
    (lambda: audit.histogram([1.0, np.nan], [0.0]), "samples"),
    (lambda: audit.histogram([1.0], [1.0, 0.0]), "edges"),
    (lambda: audit.epsilon_bounds(1.5, 0.1, 0.1), "fpr"),
    (lambda: audit.epsilon_bounds(0.5, 0.1, 1.0), "delta"),
    (lambda: audit.gaussian_dp_trade_off(0.5, -1.0), "mu"),
    (lambda: audit.dp_trade_off(0.5, 0.0, 0.1), "eps"),
    (lambda: audit.trade_off_from_histograms([1, 2], [1, 2, 3], [0.0, 1.0]), "null_counts"),
    (lambda: audit.pilot_lower_bound([[1, 2]], [[1, 2]], [0.0], 0.1, 1), "null_counts"),
    (lambda: audit.pilot_lower_bound([[1, 2]] * 2, [[1, 2]] * 2, [0.0], 0.1, 0), "pilot_trials"),
    (lambda: audit.dp_reachable_bound(1.0, 1e-5, 0, 10), "n_null"),
])
def test_bad_input_is_rejected_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_reachable_bounds_stay_below_eps_and_approach_it_with_runs():
    eps, delta = 1.0, 1e-5
    mu = 1 / analytic_gaussian_sigma(1.0, eps, delta)
    reach = [audit.dp_reachable_bound(eps, delta, n, n) for n in (10**4, 10**6, 10**8)]
    gdp = [audit.gdp_reachable_bound(mu, delta, n, n) for n in (10**4, 10**6, 10**8)]
    assert np.all(np.diff(reach) > 0) and np.all(np.diff(gdp) > 0)
    assert reach[-1] < eps and gdp[-1] < eps and reach[-1] > 0.99 * eps
    # the Gaussian pair is less distinguishable than the tight (eps, delta) pair
    assert np.all(np.array(gdp) < np.array(reach))
    assert 0.9 < gdp[-1]


def test_expected_count_bound_is_the_bound_of_the_expected_counts():
    """At one threshold, the bound of integer counts equal to n * rate is the Kairouz bound of
    their Clopper-Pearson upper ends, computed here from scipy's beta quantiles."""
    n, fpr, fnr, delta = 10_000, 0.002, 0.9, 1e-5
    high = [stats.beta.ppf(0.975, k + 1, n - k) for k in (20, 9000)]
    expected = np.log((1 - delta - high[1]) / high[0])
    assert audit.expected_count_bound([fpr], [fnr], delta, n, n) == pytest.approx(expected)


def test_simultaneous_band_covers_every_rate_at_once():
    """Repeats of a Gaussian audit: the band covers the exact rates at all thresholds at once in
    at least 95% of repeats (Bonferroni is conservative), and its corners bracket the rates."""
    from scipy import special
    edges = np.linspace(-3, 4, 71)
    exact_fpr, exact_fnr = special.ndtr(-edges), special.ndtr(edges - 1)
    rng, covered = np.random.default_rng(21), 0
    for _ in range(200):
        curve = audit.trade_off(rng.standard_normal(2000), 1 + rng.standard_normal(2000),
                                edges)
        fpr_low, fpr_high, fnr_low, fnr_high = audit.simultaneous_band(curve)
        assert np.all(fpr_low <= curve.fpr) and np.all(curve.fpr <= fpr_high)
        covered += bool(np.all((fpr_low <= exact_fpr) & (exact_fpr <= fpr_high)
                               & (fnr_low <= exact_fnr) & (exact_fnr <= fnr_high)))
    assert covered >= 0.95 * 200


def test_gdp_mu_lower_bound_covers_and_approaches_the_gaussian_pairs_mu():
    """Repeats of a Gaussian audit (N(0, 1) against N(mu, 1)): the fitted lower bound stays at
    or below mu in at least 95% of repeats, and within 10% of it with 5 x 10^4 runs."""
    mu, edges, rng = 1.5, np.linspace(-4, 6, 201), np.random.default_rng(22)
    fits = []
    for _ in range(100):
        curves = [audit.trade_off(rng.normal(0.0, 1.0, 50_000), rng.normal(mu, 1.0, 50_000),
                                  edges) for _ in range(2)]
        fits.append(audit.gdp_mu_lower_bound(*curves))
    fits = np.array(fits)
    assert np.mean(fits <= mu) >= 0.95 and np.median(fits) > 0.9 * mu
    with pytest.raises(ValueError, match="thresholds"):
        audit.gdp_mu_lower_bound(curves[0], audit.trade_off([0.0], [1.0], edges[:5]))


def test_family_confidence_is_bonferroni():
    from dprl.audit import family_confidence

    assert family_confidence(0.95, 1) == pytest.approx(0.95)
    assert family_confidence(0.95, 16) == pytest.approx(1 - 0.05 / 16)
    for bad in ((0.95, 0), (1.0, 3), (0.95, 2.5)):
        with pytest.raises(ValueError):
            family_confidence(*bad)
