"""Sharma et al. (2025) Alg. 1-2: prefix counts, the release parameters (App. B.3 table),
the lazy stable-prefix walk, DataRelease's draws and output, and the exact distribution of
the released prefix length."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from dprl.sharma2025 import release as r
from dprl.sharma2025.experts import pmin_log_probabilities


def _log_probs(rng, m, length, n_actions=3, p_min=0.02, agree=0.8):
    """App. B.1 experts' log-probabilities of an all-zero action sequence, a fraction
    ``agree`` of them greedy on it."""
    greedy = rng.integers(0, n_actions, (m, length))
    greedy[: int(agree * m)] = 0
    return pmin_log_probabilities(greedy, np.zeros(length, dtype=np.int64), n_actions, p_min)


def test_log_prefix_counts_match_direct_sums_of_products():
    rng = np.random.default_rng(0)
    probs = rng.uniform(0.05, 1.0, (7, 9))
    direct = np.log(np.cumprod(probs, axis=1).sum(axis=0))
    assert np.allclose(r.log_prefix_counts(np.log(probs)), direct, rtol=1e-13, atol=0)
    # a batch of trajectories on the middle axes
    batch = rng.uniform(0.05, 1.0, (7, 4, 9))
    got = r.log_prefix_counts(np.log(batch))
    assert got.shape == (4, 9)
    assert np.allclose(got[2], np.log(np.cumprod(batch[:, 2], axis=1).sum(axis=0)), rtol=1e-13)


def test_log_prefix_counts_do_not_underflow_for_long_prefixes():
    """3000 unanimous experts over 1000 steps: count = m 0.96^k exactly; a dissenting set's
    counts (p_min^1000 = 1e-1699) stay finite in log space."""
    m, length = 3000, 1000
    unanimous = pmin_log_probabilities(np.zeros((m, length), dtype=np.int64),
                                       np.zeros(length, dtype=np.int64), 3, 0.02)
    k = np.arange(1, length + 1)
    assert np.allclose(r.log_prefix_counts(unanimous), math.log(m) + k * math.log(0.96),
                       rtol=1e-12)
    dissent = np.full((m, length), math.log(0.02))
    assert np.allclose(r.log_prefix_counts(dissent), math.log(m) + k * math.log(0.02),
                       rtol=1e-12)


def test_log_prefix_counts_reject_bad_input():
    with pytest.raises(ValueError, match="log_probs"):
        r.log_prefix_counts(np.zeros(5))
    with pytest.raises(ValueError, match="<= 0"):
        r.log_prefix_counts(np.full((2, 3), 0.1))
    with pytest.raises(ValueError, match="empty"):
        r.log_prefix_counts(np.zeros((0, 3)))


class _LazyColumns:
    """A log-probability matrix that records which columns were evaluated."""

    def __init__(self, matrix):
        self.matrix, self.shape, self.evaluated = matrix, matrix.shape, 0

    def __getitem__(self, key):
        self.evaluated = max(self.evaluated, key[1].stop)
        return self.matrix[key]


@pytest.mark.parametrize("chunk", [1, 7, 32, 500])
def test_lazy_walk_equals_the_full_computation_bit_for_bit(chunk):
    rng = np.random.default_rng(1)
    log_probs = _log_probs(rng, 3000, 200)
    params = r.appendix_b3_parameters("Acrobot", 10.0)
    full = np.exp(r.log_prefix_counts(log_probs))
    for _ in range(20):
        threshold_hat = params.threshold + rng.laplace(0, params.threshold_scale)
        noise = rng.laplace(0, params.query_scale, 200)
        passed = full + noise > threshold_hat
        expected = 200 if passed.all() else int(np.argmin(passed))
        lazy = _LazyColumns(log_probs)
        assert r.stable_prefix_length(lazy, threshold_hat, noise, chunk) == expected
        assert lazy.evaluated <= min(200, (expected // chunk + 1) * chunk)


def test_lazy_walk_chunks_give_identical_counts():
    """The carried cumulative sums reproduce np.cumsum's sequential sums exactly: a threshold
    placed exactly at a count decides the same way whatever the chunk."""
    rng = np.random.default_rng(2)
    log_probs = _log_probs(rng, 500, 64, agree=0.5)
    counts = np.exp(r.log_prefix_counts(log_probs))
    noise = np.zeros(64)
    for k in (0, 5, 31, 32, 63):
        results = {r.stable_prefix_length(log_probs, counts[k], noise, chunk)
                   for chunk in (1, 3, 16, 64)}
        assert results == {k}      # count_k + 0 > count_k is False: the walk stops at k


def test_prefix_query_pass_rate_is_the_laplace_tail():
    rng = np.random.default_rng(3)
    n, count, threshold, eps_prime = 200_000, 10.0, 12.0, 1.0
    passed = r.prefix_query(np.full(n, math.log(count)), threshold, eps_prime, rng)
    expected = stats.laplace.sf(threshold - count, scale=4 / eps_prime)
    assert stats.binomtest(int(passed.sum()), n, expected).pvalue > 1e-3
    with pytest.raises(ValueError, match="eps_prime"):
        r.prefix_query(np.zeros(2), 1.0, 0.0, rng)
    with pytest.raises(ValueError, match="rng"):
        r.prefix_query(np.zeros(2), 1.0, 1.0, 0)


#: sharma2025-details.md: (env, eps, T) -> eps', theta + offset, longest unanimous prefix.
DETAILS_TABLE = {("Acrobot", 10.0, 25): (0.120, 1017, 26), ("Acrobot", 7.5, 20): (0.101, 1199, 22),
                 ("Acrobot", 5.0, 20): (0.067, 1786, 12), ("CartPole", 10.0, 25): (0.089, 1360, 39),
                 ("CartPole", 7.5, 20): (0.075, 1605, 30),
                 ("LunarLander", 10.0, 100): (0.045, 2963, 0),
                 ("LunarLander", 7.5, 62): (0.043, 3065, 0), ("HIV", 10.0, 50): (0.063, 1869, 7),
                 ("HIV", 7.5, 50): (0.047, 2484, 3)}


@pytest.mark.parametrize(("env", "eps", "n_queries"), list(DETAILS_TABLE))
def test_appendix_b3_parameters_reproduce_the_details_table(env, eps, n_queries):
    params = r.appendix_b3_parameters(env, eps)
    eps_prime, threshold, longest = DETAILS_TABLE[env, eps, n_queries]
    assert params.n_queries == n_queries
    assert round(params.eps_prime, 3) == eps_prime
    assert round(params.threshold) == threshold
    assert params.longest_unanimous_prefix(3000, r.N_ACTIONS[env]) == longest


def test_hiv_eps5_row_is_the_three_quarter_split_that_appendix_b3_does_not_run():
    assert r.appendix_b3_parameters("HIV", 5.0) is None
    params = r.release_parameters(3.75, 0.9 / 3000, 50, 50, 0.02)
    assert (round(params.eps_prime, 3), round(params.threshold)) == (0.032, 3713)
    assert params.longest_unanimous_prefix(3000, 4) == 0


def test_release_parameters_follow_algorithm2_lines_3_4():
    p = r.release_parameters(2.0, 1e-4, 10, 40, 0.05)
    eps_prime = 2.0 / math.sqrt(320 * math.log(2e4))
    assert p.eps_prime == pytest.approx(eps_prime, rel=1e-14)
    assert p.delta_prime == pytest.approx(1e-4 / 800, rel=1e-14)
    assert p.c_min == pytest.approx(math.exp(eps_prime) / (math.exp(eps_prime) - 1), rel=1e-12)
    assert p.theta == pytest.approx(p.c_min / 0.05, rel=1e-14)
    assert p.threshold == pytest.approx(p.theta + 4 / eps_prime * math.log(800 / 1e-4),
                                        rel=1e-14)
    assert (p.threshold_scale, p.query_scale) == pytest.approx((2 / eps_prime, 4 / eps_prime))
    for bad in [dict(eps1=0.0), dict(delta1=1.0), dict(n_queries=0), dict(max_length=0),
                dict(p_min=0.0)]:
        kwargs = dict(eps1=2.0, delta1=1e-4, n_queries=10, max_length=40, p_min=0.05) | bad
        with pytest.raises(ValueError, match=next(iter(bad))):
            r.release_parameters(**kwargs)


@pytest.mark.parametrize("m", [1, 50, 1500, 3000, 10**6])
def test_longest_unanimous_prefix_is_the_brute_force_largest_k(m):
    params = r.release_parameters(10.0, 1 / 3000, 25, 200, 0.02)
    passing = [k for k in range(201) if m * 0.96**k > params.threshold]
    assert params.longest_unanimous_prefix(m, 3) == (max(passing) if passing else 0)


def test_appendix_b3_split_readings():
    m = 3000
    assert r.appendix_b3_split("Acrobot", 5.0, m) == (5.0, 0.0, 1 / m, 0.0, 20)
    assert r.appendix_b3_split("CartPole", 10.0, m) == pytest.approx(
        (7.5, 2.5, 0.9 / m, 0.1 / m, 25))
    for env in ("LunarLander", "CartPole", "HIV"):
        assert r.appendix_b3_split(env, 5.0, m) == (0.0, 5.0, 0.0, 1 / m, None)
    assert r.appendix_b3_split("HIV", 7.5, m).eps1 == pytest.approx(5.625)
    assert r.appendix_b3_split("HIV", 7.5, m, hiv_split="section6") == (7.5, 0.0, 1 / m, 0.0, 50)
    with pytest.raises(ValueError, match="env"):
        r.appendix_b3_split("Pong", 10.0)
    with pytest.raises(ValueError, match="eps"):
        r.appendix_b3_split("HIV", 2.5)
    with pytest.raises(ValueError, match="hiv_split"):
        r.appendix_b3_split("HIV", 10.0, hiv_split="table3")


def _dataset(rng, n, m=400, max_length=30, agree=0.9):
    lengths = rng.integers(5, max_length + 1, n)
    matrices = [_log_probs(rng, m, int(length), agree=agree) for length in lengths]
    return lengths, matrices


def test_data_release_draw_order_is_documented():
    """Permutation, then per queried trajectory: threshold noise, then |tau| query noises."""
    rng = np.random.default_rng(4)
    lengths, matrices = _dataset(rng, 12, m=150, agree=0.2)
    params = r.release_parameters(40.0, 0.5, 8, 30, 0.02)
    result = r.data_release(len(lengths), matrices.__getitem__, params, np.random.default_rng(5))
    replay = np.random.default_rng(5)
    order = replay.permutation(12)
    expected = []
    for t in order[:8]:
        threshold_hat = params.threshold + replay.laplace(0, 2 / params.eps_prime)
        noise = replay.laplace(0, 4 / params.eps_prime, lengths[t])
        passed = np.exp(r.log_prefix_counts(matrices[t])) + noise > threshold_hat
        expected.append(lengths[t] if passed.all() else int(np.argmin(passed)))
    assert np.array_equal(result.order, order)
    assert np.array_equal(result.prefix_lengths, expected)
    assert 0 < np.count_nonzero(expected) < 8       # the case mixes releases and rejections


def test_data_release_splits_every_trajectory_into_stable_prefix_and_unstable_tail():
    rng = np.random.default_rng(6)
    lengths, matrices = _dataset(rng, 40)
    params = r.release_parameters(40.0, 0.5, 25, 30, 0.02)
    result = r.data_release(len(lengths), matrices.__getitem__, params, rng, chunk=4)
    covered = np.zeros(40, dtype=np.int64)
    stable_index, stable_length = result.stable
    assert np.all(stable_length >= 1)
    covered[stable_index] += stable_length
    unstable_index, unstable_start = result.unstable(lengths)
    assert np.array_equal(result.queried_lengths, lengths[result.queried])
    covered[unstable_index] += lengths[unstable_index] - unstable_start
    assert np.array_equal(covered, lengths)                 # disjoint, complete cover
    start = dict(zip(unstable_index, unstable_start))
    for t, k in zip(stable_index, stable_length):
        assert start.get(t, lengths[t]) == k                # the tail starts after the prefix
    not_queried = np.setdiff1d(np.arange(40), result.queried)
    assert all(start[t] == 0 for t in not_queried)
    assert np.all(np.diff(unstable_index) > 0)


def test_data_release_rejects_bad_input():
    rng = np.random.default_rng(7)
    lengths, matrices = _dataset(rng, 5)
    ok = r.release_parameters(40.0, 0.5, 3, 30, 0.02)
    with pytest.raises(ValueError, match="n_queries"):
        r.data_release(5, matrices.__getitem__, r.release_parameters(40.0, 0.5, 6, 30, 0.02),
                       rng)
    with pytest.raises(ValueError, match="max_length"):
        r.data_release(5, matrices.__getitem__, r.release_parameters(40.0, 0.5, 3, 4, 0.02),
                       rng)
    with pytest.raises(ValueError, match="non-empty"):
        r.data_release(5, lambda t: matrices[t][:, :0], ok, rng)
    with pytest.raises(ValueError, match="n_trajectories"):
        r.data_release(0, matrices.__getitem__, ok, rng)
    with pytest.raises(ValueError, match="rng"):
        r.data_release(5, matrices.__getitem__, ok, 7)
    result = r.data_release(5, matrices.__getitem__, ok, rng)
    with pytest.raises(ValueError, match="disagree"):
        result.unstable(lengths + 1)


def _quad_distribution(counts, eps_prime, threshold):
    """P(k) by scipy quad over the threshold noise, split at the kinks."""
    su, sv = 4 / eps_prime, 2 / eps_prime

    def integrand(v, k):
        y = threshold + v - counts
        passes = np.where(y >= 0, 0.5 * np.exp(-y / su), 1 - 0.5 * np.exp(y / su))
        fail = 1 - passes[k] if k < len(counts) else 1.0
        return np.prod(passes[:k]) * fail * np.exp(-abs(v) / sv) / (2 * sv)

    points = sorted({0.0, *(counts - threshold)})
    return np.array([integrate.quad(integrand, -80 * sv, 80 * sv, args=(k,), points=points,
                                    limit=500, epsabs=1e-15, epsrel=1e-12)[0]
                     for k in range(len(counts) + 1)])


@pytest.mark.parametrize(("counts", "eps_prime", "threshold"),
                         [([12.0, 9.0, 7.0, 6.5, 3.0, 1.0], 1.0, 8.0),
                          ([3000 * 0.96**k for k in range(1, 40)], 0.12, 1017.0),
                          ([50.0, 49.0, 48.5], 4.0, 48.9)])
def test_pass_probabilities_match_scipy_quad(counts, eps_prime, threshold):
    counts = np.array(counts)
    exact = r.pass_probabilities(np.log(counts), eps_prime, threshold)
    assert exact.sum() == pytest.approx(1.0, abs=1e-13)
    assert np.allclose(exact, _quad_distribution(counts, eps_prime, threshold), atol=1e-13)


def test_pass_probabilities_batches_like_single_trajectories():
    rng = np.random.default_rng(8)
    log_counts = np.sort(rng.uniform(0, 4, (3, 2, 5)), axis=-1)[..., ::-1]
    batch = r.pass_probabilities(log_counts, 0.7, 20.0)
    assert batch.shape == (3, 2, 6)
    assert np.allclose(batch[1, 0], r.pass_probabilities(log_counts[1, 0], 0.7, 20.0),
                       atol=1e-15)


def test_data_release_matches_the_exact_prefix_length_distribution():
    """20000 one-trajectory releases (T = 1, eps' = 1): the histogram of k agrees with
    pass_probabilities (chi-square)."""
    rng = np.random.default_rng(9)
    log_probs = _log_probs(np.random.default_rng(10), 30, 6, n_actions=2, p_min=0.25,
                           agree=0.9)
    eps1 = math.sqrt(32 * math.log(4))          # eps' = 1 with T = 1, delta1 = 1/2
    params = r.release_parameters(eps1, 0.5, 1, 6, 0.25)
    assert params.eps_prime == pytest.approx(1.0)
    exact = r.pass_probabilities(r.log_prefix_counts(log_probs), 1.0, params.threshold)
    n = 20_000
    ks = [r.data_release(1, lambda t: log_probs, params, rng).prefix_lengths[0]
          for _ in range(n)]
    observed = np.bincount(ks, minlength=7)
    keep = exact * n >= 5
    assert keep.sum() >= 4                     # a spread distribution, not one value
    observed = np.append(observed[keep], observed[~keep].sum())
    expected = np.append(exact[keep], exact[~keep].sum()) * n
    if expected[-1] == 0:
        observed, expected = observed[:-1], expected[:-1]
    assert stats.chisquare(observed, expected).pvalue > 1e-3


@pytest.mark.parametrize(("env", "eps"), [("CartPole", 10.0), ("LunarLander", 10.0)])
def test_unanimous_prefix_pmf_is_the_release_distribution_of_unanimous_counts(env, eps):
    """The counts of m experts who all put 1 - (|A| - 1) p_min on the recorded action, built
    by log_prefix_counts, give the distribution unanimous_prefix_pmf returns."""
    params = r.appendix_b3_parameters(env, eps)
    n_actions = r.N_ACTIONS[env]
    high = 1 - (n_actions - 1) * params.p_min
    log_probs = np.full((3000, 60), math.log(high))
    pmf = params.unanimous_prefix_pmf(3000, n_actions, 60)
    assert pmf.shape == (61,) and pmf.sum() == pytest.approx(1.0, abs=1e-12)
    expected = r.pass_probabilities(r.log_prefix_counts(log_probs), params.eps_prime,
                                    params.threshold)
    assert np.allclose(pmf, expected, rtol=1e-9, atol=1e-15)
    assert params.unanimous_prefix_pmf(3000, n_actions).shape == (params.max_length + 1,)
    for bad in ({"m": 0}, {"length": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            params.unanimous_prefix_pmf(**({"m": 3000, "n_actions": n_actions} | bad))
