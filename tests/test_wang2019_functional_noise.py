"""The Ornstein-Uhlenbeck sampler of Wang & Hegde (2019): exact conditional moments, the
joint law whatever the query order (a likelihood-ratio test that must reject wrong
formulas), consistency, storage invariants, benchmarks and input checks."""

import numpy as np
import pytest
from scipy import stats

from dprl.wang2019 import functional_noise
from dprl.wang2019.benchmarks import (conditioning_setup, dense_conditioning, loglog_slope,
                                      ou_conditioning, query_operations, query_times)
from dprl.wang2019.functional_noise import (OUPath, conditional_moments,
                                            dense_conditional_moments, dense_conditional_sample,
                                            ou_kernel)

SIGMA, BETA, PATHS = 1.3, 2.0, 20_000
POINTS = np.array([-0.4, 0.05, 0.3, 0.32, 0.7, 1.1, 1.6])
#: Query orders: each entry is one call (a float or a list); every order ends with all
#: POINTS sampled, reaching them by right and left extrapolation, bridges and gap runs.
ORDERS = {
    "forward singly": list(POINTS),
    "backward singly": list(POINTS[::-1]),
    "middle out singly": [0.3, 0.7, 1.6, -0.4, 1.1, 0.05, 0.32],
    "random singly": list(np.random.default_rng(7).permutation(POINTS)),
    "batches with repeats": [[0.7, 0.3, 0.7], [1.6, -0.4, 0.32], [1.1, 0.05, 0.3]],
    "one shuffled batch": [list(np.random.default_rng(8).permutation(POINTS))],
    "runs inside gaps": [[0.3, 1.6], [0.05, 0.32, 0.7, 1.1, -0.4]],
    "extra points first": [[0.2, 0.9], 1.3, [-1.0, 2.5], list(POINTS)],
}


def _sample(order, seed: int) -> np.ndarray:
    """Values at POINTS, shaped (PATHS, 7), after querying PATHS paths in ``order``."""
    path = OUPath(SIGMA, BETA, np.random.default_rng(seed), n_paths=PATHS)
    for query in order:
        path(query)
    return path(POINTS)


def _covariance_pvalues(samples: np.ndarray) -> tuple[float, float, float]:
    """p-values that the rows are iid N(0, K): the likelihood-ratio test of the covariance
    (known zero mean; n (tr S - log det S - p) ~ chi2 with p(p+1)/2 dof, S the covariance
    of the whitened rows), a chi2 test of the mean, and a KS test of the whitened entries."""
    n, p = samples.shape
    whitened = np.linalg.solve(np.linalg.cholesky(ou_kernel(POINTS, POINTS, SIGMA, BETA)),
                               samples.T).T
    s = whitened.T @ whitened / n
    lr = n * (np.trace(s) - np.linalg.slogdet(s)[1] - p)
    mean_stat = n * np.sum(whitened.mean(axis=0) ** 2)
    return (stats.chi2.sf(lr, p * (p + 1) / 2), stats.chi2.sf(mean_stat, p),
            stats.kstest(whitened.ravel(), "norm").pvalue)


@pytest.mark.parametrize("name", sorted(ORDERS))
def test_joint_law_is_the_kernel_whatever_the_order(name):
    seed = sorted(ORDERS).index(name)
    assert min(_covariance_pvalues(_sample(ORDERS[name], seed))) > 1e-3


def _wrong_one_sided_variance(d1, d2, u, w):
    """The one-sided variance sigma^2 (1 - e^{-beta d}) instead of (1 - e^{-2 beta d})."""
    mean, var = _correct_moments(d1, d2, u, w)
    one_sided = np.isinf(d1) ^ np.isinf(d2)
    d = np.where(np.isinf(d1), d2, d1)
    return mean, np.where(one_sided, -np.expm1(-d), var)


_correct_moments = functional_noise._moments


def test_the_test_rejects_a_wrong_variance(monkeypatch):
    monkeypatch.setattr(functional_noise, "_moments", _wrong_one_sided_variance)
    assert _covariance_pvalues(_sample(ORDERS["middle out singly"], 0))[0] < 1e-6


def test_the_test_rejects_right_extrapolation_from_the_smallest_point(monkeypatch):
    """The authors' bug: a point above the largest sampled one conditioned on the smallest."""
    locate = OUPath._locate

    def buggy_locate(self, points):
        found, values, left, right = locate(self, points)
        if self.n_points:
            xs, stored = self.sampled()
            beyond = np.isinf(right[0])
            left[0][beyond], left[1][:, beyond] = xs[0], stored[:, :1] / SIGMA
        return found, values, left, right

    monkeypatch.setattr(OUPath, "_locate", buggy_locate)
    order = [[x, x] for x in ORDERS["middle out singly"]]  # pairs take the batch code
    assert _covariance_pvalues(_sample(order, 1))[0] < 1e-6


def test_moments_match_dense_conditioning():
    rng = np.random.default_rng(0)
    x_obs = np.sort(rng.uniform(0, 1, 6))
    g_obs = rng.standard_normal(6)
    beta = 3.0
    for s in [-0.5, 0.01, 0.5, 0.99, 1.7]:
        left = x_obs[x_obs < s]
        right = x_obs[x_obs > s]
        left_x, left_v = (left[-1], g_obs[x_obs < s][-1]) if left.size else (-np.inf, 0.0)
        right_x, right_v = (right[0], g_obs[x_obs > s][0]) if right.size else (np.inf, 0.0)
        mean, var = conditional_moments(s, left_x, left_v, right_x, right_v, beta)
        dense_mean, dense_cov = dense_conditional_moments(x_obs, g_obs, [s], 1.0, beta)
        np.testing.assert_allclose([mean, var], [dense_mean[0], dense_cov[0, 0]], rtol=1e-9,
                                   atol=1e-12)


def test_moments_match_the_sinh_formulas_and_survive_large_distances():
    d1, d2, u, w = 0.3, 1.1, 0.7, -1.2
    mean, var = conditional_moments(d1, 0.0, u, d1 + d2, w, 1.0)
    np.testing.assert_allclose(mean, (np.sinh(d2) * u + np.sinh(d1) * w) / np.sinh(d1 + d2))
    np.testing.assert_allclose(var, 2 * np.sinh(d1) * np.sinh(d2) / np.sinh(d1 + d2))
    mean, var = conditional_moments(0.5, 0.0, u, np.inf, np.nan, 4.0)
    np.testing.assert_allclose([mean, var], [np.exp(-2) * u, 1 - np.exp(-4)])
    mean, var = conditional_moments(0.0, -np.inf, np.nan, np.inf, np.nan, 1.0)
    assert (mean, var) == (0.0, 1.0)
    mean, var = conditional_moments(500.0, 0.0, u, 1000.0, w, 2.0)
    assert np.isfinite(mean) and abs(mean) < 1e-300 and var == pytest.approx(1.0)


@pytest.mark.parametrize("name, args", [
    ("x", (np.nan, 0.0, 0.5, 1.0, 0.2)), ("x", (np.inf, 0.0, 0.5, np.inf, 0.0)),
    ("x", ([0.5, np.nan], 0.0, 0.5, 1.0, 0.2)), ("left_x", (0.5, np.nan, 0.5, 1.0, 0.2)),
    ("right_x", (0.5, 0.0, 0.5, np.nan, 0.2)), ("left_value", (0.5, 0.0, np.nan, 1.0, 0.2)),
    ("left_value", (0.5, [0.0, -np.inf], [np.inf, 0.3], 1.0, 0.2)),
    ("right_value", (0.5, 0.0, 0.5, 1.0, np.inf)),
    ("right_value", (0.5, -np.inf, np.nan, [1.0, 2.0], [0.1, np.nan]))])
def test_conditional_moments_refuse_nan_by_name(name, args):
    """A NaN point, neighbour, or value of a sampled neighbour is refused by name (it gave NaN
    moments); the value of a missing neighbour (infinite position) stays ignored."""
    with pytest.raises(ValueError, match=name):
        conditional_moments(*args, 1.0)


def test_single_and_batch_code_draw_the_same_values():
    single = OUPath(SIGMA, BETA, np.random.default_rng(5), n_paths=3)
    batch = OUPath(SIGMA, BETA, np.random.default_rng(5), n_paths=3)
    for x in np.random.default_rng(3).uniform(-1, 2, 200):
        np.testing.assert_array_equal(single(x), batch([x, x])[:, 0])


def test_stored_values_duplicates_shapes_and_reset():
    path = OUPath(SIGMA, BETA, np.random.default_rng(0))
    first = path([[0.5, 0.2], [0.2, 0.9]])
    assert first.shape == (2, 2) and first[0, 1] == first[1, 0]
    assert path(0.9) == first[1, 1] and np.ndim(path(0.3)) == 0
    xs, values = path.sampled()
    np.testing.assert_array_equal(xs, [0.2, 0.3, 0.5, 0.9])
    np.testing.assert_array_equal(values, path(xs))
    assert path.n_points == 4
    path.reset()
    assert path.n_points == 0 and path(0.5) != first[0, 0]


def test_single_path_equals_one_of_many_and_sigma_scales_each_path():
    x = [0.1, 0.7, 0.3, 2.0]
    one = OUPath(2.0, BETA, np.random.default_rng(4))(x)
    stacked = OUPath(2.0, BETA, np.random.default_rng(4), n_paths=1)(x)
    np.testing.assert_array_equal(one, stacked[0])
    unit = OUPath(1.0, BETA, np.random.default_rng(4), n_paths=3)(x)
    scaled = OUPath(np.array([1.0, 2.0, 0.0]), BETA, np.random.default_rng(4), n_paths=3)(x)
    np.testing.assert_allclose(scaled, unit * np.array([[1.0], [2.0], [0.0]]))


def test_paths_are_independent():
    values = OUPath(1.0, BETA, np.random.default_rng(9), n_paths=PATHS)([0.2, 0.6])
    pairs = values.reshape(PATHS // 2, 2, 2)
    for i in range(2):
        r = np.corrcoef(pairs[:, 0, i], pairs[:, 1, i])[0, 1]
        assert abs(r) < 4 / np.sqrt(PATHS // 2)


def test_runs_stay_sorted_logarithmic_and_within_capacity():
    path = OUPath(1.0, 1.0, np.random.default_rng(0))
    rng = np.random.default_rng(1)
    for _ in range(3000):
        path(rng.random())
    for _ in range(30):
        path(rng.random(1000))
    assert path.n_points == 33_000
    assert len(path._runs) <= np.log(33_000 / 64) / np.log(8) + 2
    for level, (xs, values) in enumerate(path._runs):
        assert xs.size <= 64 * 8 ** level and np.all(np.diff(xs) > 0)
        assert values.shape == (1, xs.size)


def test_dense_sample_is_the_prior_without_observations():
    draws = np.array([dense_conditional_sample([], [], [0.0, 0.5], 2.0, 1.0,
                                               np.random.default_rng(s)) for s in range(3000)])
    np.testing.assert_allclose(np.cov(draws.T), ou_kernel([0.0, 0.5], [0.0, 0.5], 2.0, 1.0),
                               atol=0.3)


def test_benchmark_pair_does_equivalent_work():
    path, x_new = conditioning_setup(300)
    x_obs, g_obs = path.sampled()
    assert ou_conditioning(300).shape == dense_conditioning(300).shape == (100,)
    assert path.n_points == 300  # the candidate works on a copy
    idx = np.searchsorted(x_obs, x_new)
    mean, var = conditional_moments(x_new, x_obs[idx - 1], g_obs[idx - 1], x_obs[idx],
                                    g_obs[idx], 1.0)
    dense_mean, dense_cov = dense_conditional_moments(x_obs, g_obs, x_new, 1.0, 1.0)
    np.testing.assert_allclose(mean, dense_mean, atol=1e-8)
    np.testing.assert_allclose(var, np.diag(dense_cov), atol=1e-8)


def test_query_times_and_slope():
    assert np.all(query_times([10, 100], 10) > 0)
    assert loglog_slope([10, 100, 1000], [1.0, 10.0 ** 1.5, 10.0 ** 3]) == pytest.approx(1.5)


def test_operation_count_of_a_first_batch_by_hand():
    # 100 new points into an empty path: sort 100 ceil(log2 100) = 700 comparisons, no run to
    # search, 100 bridge draws, 100 moves into run 0 (capacity 64, overflows) and 100 into run 1
    path = OUPath(SIGMA, BETA, np.random.default_rng(0))
    path(np.random.default_rng(1).random(100))
    assert path.operations == 700 + 100 + 200
    # one more point: 2 runs (0 empty, 1 with 100 points): ceil(log2 101) + 1 = 8, one bridge,
    # one move into run 0
    before = path.operations
    path(0.123456)
    assert path.operations - before == 8 + 1 + 1
    # a point already stored costs only its search, found in run 0 (1 point): 1 + 1
    before = path.operations
    path(0.123456)
    assert path.operations - before == 2


def test_operation_counts_grow_like_n_log_n_whatever_the_points():
    sizes = np.array([10_000, 100_000])
    batched = query_operations(sizes, 1000)
    assert np.array_equal(batched, query_operations(sizes, 1000, seed=7))
    assert 1.0 < loglog_slope(sizes, batched) < 1.25
    single = query_operations(sizes // 10, 1)
    assert 1.0 < loglog_slope(sizes // 10, single) < 1.25
    # a structure with one sorted array (O(N) moves per insert) would have slope ~2
    assert np.all(batched < sizes * np.log2(sizes) ** 2)


@pytest.mark.parametrize("kwargs", [
    {"sigma": -1.0}, {"beta": 0.0}, {"beta": np.inf}, {"rng": 0}, {"n_paths": 0},
    {"n_paths": 2.0}, {"sigma": [1.0, 2.0]}, {"sigma": [1.0, -2.0], "n_paths": 2},
    {"sigma": [1.0, 2.0, 3.0], "n_paths": 2}, {"sigma": True},
])
def test_bad_construction_raises(kwargs):
    args = {"sigma": 1.0, "beta": 1.0, "rng": np.random.default_rng(0)} | kwargs
    with pytest.raises(ValueError):
        OUPath(**args)


@pytest.mark.parametrize("x", [[], [0.1, np.nan], np.inf, "a", [True]])
def test_bad_queries_raise(x):
    with pytest.raises(ValueError):
        OUPath(1.0, 1.0, np.random.default_rng(0))(x)


def test_bad_reference_inputs_raise():
    with pytest.raises(ValueError):
        conditional_moments(0.5, 0.6, 0.0, 1.0, 0.0, 1.0)
    with pytest.raises(ValueError):
        dense_conditional_moments([0.1, 0.2], [1.0], [0.5], 1.0, 1.0)
    with pytest.raises(ValueError):
        dense_conditional_sample([0.1], [1.0], [0.5], 1.0, 1.0, rng=1)
    with pytest.raises(ValueError):
        ou_kernel([0.1], [0.2], 1.0, -1.0)
    with pytest.raises(ValueError):
        loglog_slope([1.0], [1.0])


def test_a_repeated_observation_counts_once():
    x_obs, g_obs, x_new = [0.2, 0.5, 0.2, 0.9], [1.0, -0.3, 1.0, 0.4], [0.1, 0.3, 0.7]
    once = dense_conditional_moments([0.2, 0.5, 0.9], [1.0, -0.3, 0.4], x_new, 1.5, 2.0)
    for got, want in zip(dense_conditional_moments(x_obs, g_obs, x_new, 1.5, 2.0), once):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    draw = dense_conditional_sample(x_obs, g_obs, [0.2], 1.5, 2.0, np.random.default_rng(0))
    np.testing.assert_allclose(draw, [1.0], atol=1e-6)  # pinned at the observed value


def test_a_point_observed_with_two_values_is_refused():
    with pytest.raises(ValueError, match="x_obs repeats the point 0.2 with different g_obs"):
        dense_conditional_moments([0.2, 0.5, 0.2], [1.0, 0.0, 2.0], [0.3], 1.0, 1.0)


def test_dense_conditioning_refuses_a_subnormal_kernel():
    """sigma^2 below the smallest normal float made the Cholesky solve return inf and NaN
    (found by the property test: sigma = 2.6e-162)."""
    with pytest.raises(ValueError, match="sigma"):
        dense_conditional_moments([0.0], [1.0], [0.3, 0.7], 2.5985131824554963e-162, 1.0)
