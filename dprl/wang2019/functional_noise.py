"""Lazily evaluated Ornstein-Uhlenbeck sample paths: the functional noise of Wang & Hegde
(2019), Algorithm 1 lines 7-8 and 14-18, App. A Eq. (2), Proposition 9.

A path ``g ~ GP(0, sigma^2 exp(-beta |x - y|))`` on the real line is drawn only where it is
queried. The kernel is Markov, so given every sampled point a new point depends only on its
two nearest sampled neighbours; with ``d1 = beta (s - a)``, ``d2 = beta (b - s)``,
``D = d1 + d2`` and ``g(a) = u``, ``g(b) = w`` (re-derived, checked against a dense solve):

- bridge: mean ``(sinh(d2) u + sinh(d1) w) / sinh(D)``,
  variance ``sigma^2 2 sinh(d1) sinh(d2) / sinh(D)``;
- one neighbour at scaled distance ``d``: mean ``exp(-d) u``, variance ``sigma^2 (1 - exp(-2 d))``;
- no neighbour (first point): ``N(0, sigma^2)``.

Sampled points are kept in sorted runs of geometrically growing capacity (the logarithmic
method of Bentley & Saxe 1980): locating neighbours costs O(log^2 n) per point and inserting
O(log n) amortised, so ``N`` queries cost O(N log^2 N) in all, against O(N^2) for inserts into
one sorted array and O(n^3) for a dense Gaussian-process solve (:func:`dense_conditional_sample`).
New points falling in one gap are drawn by bisection (median first), so a batch takes
O(log k) vectorised rounds rather than k sequential bridge steps; the law is the same.

``OUPath.operations`` counts the elementary operations of the data structure, a measure of
cost independent of the machine (:mod:`dprl.wang2019.benchmarks`): comparisons of the binary
searches (``ceil(log2(m + 1))`` per point searched in a run of m points) and of sorting a
query (``k ceil(log2 k)``), one neighbour update per point and run searched, one bridge draw
per new point and path, and one move per point written by a merge.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy import linalg

from dprl.validation import require_array, require_int, require_nonnegative, require_positive

#: Capacity of the smallest sorted run; run i holds at most _BASE * _GROWTH**i points.
_BASE, _GROWTH = 64, 8


def ou_kernel(x: ArrayLike, y: ArrayLike, sigma: float, beta: float) -> np.ndarray:
    """The noise covariance sigma^2 exp(-beta |x_i - y_j|) (Wang & Hegde 2019, Lemma 6 and
    Thm. 5: the reproducing kernel of the order-1 Sobolev space, scaled by sigma^2)."""
    x = require_array("x", x, ndim=1, nonempty=False)
    y = require_array("y", y, ndim=1, nonempty=False)
    sigma = require_nonnegative("sigma", sigma)
    beta = require_positive("beta", beta)
    if not math.isfinite(sigma * sigma):
        raise ValueError(f"sigma^2 overflows a float (sigma={sigma})")
    return sigma * sigma * np.exp(-beta * np.abs(x[:, None] - y[None, :]))


def conditional_moments(x: ArrayLike, left_x: ArrayLike, left_value: ArrayLike,
                        right_x: ArrayLike, right_value: ArrayLike,
                        beta: float) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of a unit-variance OU path at ``x`` given its values at the nearest
    sampled points ``left_x < x < right_x`` (Wang & Hegde 2019, App. A Eq. (2)); a missing
    neighbour is ``-inf`` / ``+inf`` (its value is then ignored). The bridge formulas above,
    divided through by ``e^D / 2`` so that large distances do not overflow:
    mean = (e^{-d1} (1 - e^{-2 d2}) u + e^{-d2} (1 - e^{-2 d1}) w) / (1 - e^{-2D}),
    variance = (1 - e^{-2 d1}) (1 - e^{-2 d2}) / (1 - e^{-2D}); with e^{-inf} = 0 they reduce
    to the one-sided formulas and to N(0, 1). Arrays broadcast against each other. Raises
    ``ValueError`` on a NaN or infinite ``x``, a NaN neighbour, or a NaN or infinite value of
    a neighbour that is there (finite position)."""
    beta = require_positive("beta", beta)
    x, left_x, right_x = (np.asarray(a, dtype=float) for a in (x, left_x, right_x))
    if not np.all(np.isfinite(x)):
        raise ValueError("x must contain only finite values")
    for name, where in (("left_x", left_x), ("right_x", right_x)):
        if np.any(np.isnan(where)):
            raise ValueError(f"{name} must not be NaN (a missing neighbour is -inf / +inf)")
    if np.any(left_x >= x) or np.any(right_x <= x):
        raise ValueError("neighbours must satisfy left_x < x < right_x")
    values = {}
    for name, where, value in (("left_value", left_x, left_value),
                               ("right_value", right_x, right_value)):
        value = np.asarray(value, dtype=float)
        if np.any(np.isfinite(where) & ~np.isfinite(value)):
            raise ValueError(f"{name} must be finite where its neighbour is sampled (finite "
                             f"{name[:-6]}_x)")
        values[name] = np.where(np.isfinite(where), value, 0.0)
    left_value, right_value = values["left_value"], values["right_value"]
    return _moments(beta * (x - left_x), beta * (right_x - x), left_value, right_value)


def _moments(d1: np.ndarray, d2: np.ndarray, u: np.ndarray,
             w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The formulas of :func:`conditional_moments` on scaled distances (unchecked)."""
    a1, a2 = -np.expm1(-2 * d1), -np.expm1(-2 * d2)
    denominator = -np.expm1(-2 * (d1 + d2))
    mean = (np.exp(-d1) * a2 * u + np.exp(-d2) * a1 * w) / denominator
    return mean, a1 * a2 / denominator


class OUPath:
    """Independent lazily evaluated sample paths g ~ GP(0, sigma^2 exp(-beta |x - y|)) on the
    real line, all queried at the same points (Wang & Hegde 2019, Alg. 1 lines 14-18, App. A
    Eq. (2), Prop. 9).

    ``n_paths=None`` gives one path (values shaped like the query); an integer gives that
    many independent paths along a leading axis, e.g. one per action (Alg. 1 keeps one list
    per action, all extended at the visited state) or per action and seed. ``sigma`` is a
    scalar or one value per path (noise levels side by side: each path is sigma times a
    unit-variance path). Already-sampled points return their stored values; new points are
    drawn given their nearest sampled neighbours; duplicates within a query agree.
    ``operations`` counts the elementary operations done so far (module docstring).
    """

    def __init__(self, sigma: float | ArrayLike, beta: float, rng: np.random.Generator,
                 n_paths: int | None = None) -> None:
        if not isinstance(rng, np.random.Generator):
            raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        self._n_paths = None if n_paths is None else require_int("n_paths", n_paths)
        self._scale = _path_scale(sigma, self._n_paths)
        self.beta = require_positive("beta", beta)
        self._rng = rng
        self.operations = 0
        self.reset()

    def reset(self) -> None:
        """Forget every sampled point: later queries follow a fresh, independent path
        (Alg. 1 lines 7-8, a new sample path every T / (J B) iterations)."""
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []

    @property
    def n_points(self) -> int:
        """How many distinct points have been sampled since the last reset."""
        return sum(xs.size for xs, _ in self._runs)

    def sampled(self) -> tuple[np.ndarray, np.ndarray]:
        """The sampled points in increasing order and the path values there, shaped
        (n_points,) or (n_paths, n_points)."""
        xs = np.empty(0)
        values = np.empty((self._n_paths or 1, 0))
        for run in self._runs:
            xs, values = _merge((xs, values), run)
        return xs, self._output(values)

    def __call__(self, x: ArrayLike) -> np.ndarray:
        """The path values at the points ``x`` (any shape), shaped like ``x`` or
        (n_paths, *x.shape); samples and stores the points not seen before."""
        x = require_array("x", x)
        if x.size == 1:
            return self._output(self._query_point(float(x.flat[0])).reshape((-1,) + x.shape))
        self.operations += x.size * math.ceil(math.log2(x.size))
        points, inverse = np.unique(x.ravel(), return_inverse=True)
        found, found_values, left, right = self._locate(points)
        values = np.empty((self._n_paths or 1, points.size))
        values[:, found] = found_values[:, found]
        new = ~found
        if new.any():
            values[:, new] = self._sample_gaps(points[new], _take(left, new), _take(right, new))
            self._insert(points[new], values[:, new])
        return self._output(values[:, inverse].reshape(values.shape[:1] + x.shape))

    def _query_point(self, point: float) -> np.ndarray:
        """Unit-variance values at one point: the batch path of :meth:`__call__` with
        scalar bookkeeping (the same draws), as Alg. 1 queries one state per step."""
        left_x, right_x = -np.inf, np.inf
        left_v = right_v = np.zeros(self._n_paths or 1)
        for xs, vs in (run for run in self._runs if run[0].size):
            self.operations += _search_cost(1, xs.size)
            i = int(xs.searchsorted(point))
            if i < xs.size and xs[i] == point:
                return vs[:, i]
            if i > 0 and xs[i - 1] > left_x:
                left_x, left_v = xs[i - 1], vs[:, i - 1]
            if i < xs.size and xs[i] < right_x:
                right_x, right_v = xs[i], vs[:, i]
        mean, var = _moments(self.beta * (point - left_x), self.beta * (right_x - point),
                             left_v, right_v)
        values = mean + np.sqrt(var) * self._rng.standard_normal((mean.size, 1))[:, 0]
        self.operations += mean.size
        self._insert(np.array([point]), values[:, None])
        return values

    def _output(self, unit_values: np.ndarray) -> np.ndarray:
        """Scale unit-variance values by sigma; drop the path axis for a single path."""
        scaled = self._scale.reshape((-1,) + (1,) * (unit_values.ndim - 1)) * unit_values
        return scaled[0] if self._n_paths is None else scaled

    def _locate(self, points: np.ndarray):
        """For sorted distinct ``points``: which are stored (and their values), and the
        nearest stored neighbour (position, value) on each side (+-inf where none)."""
        k, n_paths = points.size, self._n_paths or 1
        found = np.zeros(k, dtype=bool)
        found_values = np.empty((n_paths, k))
        left_x, right_x = np.full(k, -np.inf), np.full(k, np.inf)
        left_v, right_v = np.zeros((n_paths, k)), np.zeros((n_paths, k))
        for xs, vs in (run for run in self._runs if run[0].size):
            self.operations += _search_cost(k, xs.size)
            idx = np.searchsorted(xs, points)
            at = np.minimum(idx, xs.size - 1)
            hit = xs[at] == points
            found |= hit
            found_values[:, hit] = vs[:, at[hit]]
            below = np.maximum(idx - 1, 0)
            closer = (idx > 0) & (xs[below] > left_x)
            left_x[closer], left_v[:, closer] = xs[below[closer]], vs[:, below[closer]]
            above = np.minimum(idx + hit, xs.size - 1)
            closer = (idx + hit < xs.size) & (xs[above] < right_x)
            right_x[closer], right_v[:, closer] = xs[above[closer]], vs[:, above[closer]]
        return found, found_values, (left_x, left_v), (right_x, right_v)

    def _sample_gaps(self, points: np.ndarray, left: tuple, right: tuple) -> np.ndarray:
        """Unit-variance values at new sorted ``points`` given their stored neighbours. The
        new points of one gap are drawn median first, then the medians of the two halves,
        and so on (log2 rounds), each given its nearest already-drawn point on either side:
        by the Markov property any such order gives the exact joint law."""
        is_start = np.concatenate([[True], left[0][1:] != left[0][:-1]])
        gap, lo = np.cumsum(is_start), np.flatnonzero(is_start)
        hi = np.append(lo[1:], points.size)
        values = np.zeros((self._n_paths or 1, points.size))
        self.operations += values.size
        while lo.size:
            mid = (lo + hi) // 2
            a, u = _nearest_drawn(np.maximum(lo - 1, 0), lo > 0, mid, gap, points, values, left)
            b, w = _nearest_drawn(np.minimum(hi, points.size - 1), hi < points.size, mid, gap,
                                  points, values, right)
            s = points[mid]
            mean, var = _moments(self.beta * (s - a), self.beta * (b - s), u, w)
            values[:, mid] = mean + np.sqrt(var) * self._rng.standard_normal(mean.shape)
            lo, hi = np.concatenate([lo, mid + 1]), np.concatenate([mid, hi])
            keep = lo < hi
            lo, hi = lo[keep], hi[keep]
        return values

    def _insert(self, points: np.ndarray, values: np.ndarray) -> None:
        """Merge a sorted run of new points into the runs, carrying a run that outgrows its
        capacity into the next (amortised O(log n) moves per point)."""
        carry, level, empty = (points, values), 0, (np.empty(0), np.empty((values.shape[0], 0)))
        while True:
            if level == len(self._runs):
                self._runs.append(empty)
            carry = _merge(self._runs[level], carry)
            self.operations += carry[0].size
            if carry[0].size <= _BASE * _GROWTH ** level:
                self._runs[level] = carry
                return
            self._runs[level] = empty
            level += 1


def _search_cost(k: int, m: int) -> int:
    """Comparisons of ``k`` binary searches in a sorted run of ``m`` points, plus one
    neighbour update each (the cost model of :attr:`OUPath.operations`)."""
    return k * (math.ceil(math.log2(m + 1)) + 1)


def _path_scale(sigma: float | ArrayLike, n_paths: int | None) -> np.ndarray:
    """sigma as an array with one entry per path (checked: finite, >= 0)."""
    if np.ndim(sigma) == 0:
        return np.full(n_paths or 1, require_nonnegative("sigma", sigma))
    if n_paths is None:
        raise ValueError(f"sigma must be a scalar for a single path, got shape {np.shape(sigma)}")
    sigma = require_array("sigma", sigma, shape=(n_paths,))
    if np.any(sigma < 0):
        raise ValueError(f"sigma must be >= 0, got min {sigma.min()}")
    return sigma


def _nearest_drawn(end: np.ndarray, exists: np.ndarray, mid: np.ndarray, gap: np.ndarray,
                   points: np.ndarray, values: np.ndarray, stored: tuple):
    """Position and values of the nearest drawn point on one side of each ``mid``: the new
    point ``end`` bounding its interval if it lies in the same gap, else the stored one."""
    inner = exists & (gap[end] == gap[mid])
    return (np.where(inner, points[end], stored[0][mid]),
            np.where(inner, values[:, end], stored[1][:, mid]))


def _take(neighbour: tuple[np.ndarray, np.ndarray], mask: np.ndarray):
    """The neighbours (positions, values) of the masked points."""
    return neighbour[0][mask], neighbour[1][:, mask]


def _merge(run: tuple[np.ndarray, np.ndarray],
           other: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Merge two sorted runs of distinct points (values on the last axis) in linear time."""
    (xs, vs), (ys, ws) = run, other
    at = np.searchsorted(xs, ys) + np.arange(ys.size)
    rest = np.ones(xs.size + ys.size, dtype=bool)
    rest[at] = False
    merged_x = np.empty(rest.size)
    merged_v = np.empty((vs.shape[0], rest.size))
    merged_x[at], merged_x[rest] = ys, xs
    merged_v[:, at], merged_v[:, rest] = ws, vs
    return merged_x, merged_v


def _distinct_observations(x_obs: np.ndarray, g_obs: np.ndarray
                           ) -> tuple[np.ndarray, np.ndarray]:
    """The observations with repeated points merged: conditioning on g(x) = v twice is
    conditioning on it once (the kernel matrix of repeated points is singular); a point
    observed with two different values is impossible for a function, so it is refused."""
    points, first, inverse = np.unique(x_obs, return_index=True, return_inverse=True)
    if np.any(g_obs != g_obs[first][inverse]):
        clash = x_obs[g_obs != g_obs[first][inverse]][0]
        raise ValueError(f"x_obs repeats the point {clash} with different g_obs values")
    return points, g_obs[first]


def dense_conditional_moments(x_obs: ArrayLike, g_obs: ArrayLike, x_new: ArrayLike,
                              sigma: float, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance of g(x_new) given g(x_obs) = g_obs for g ~ GP(0, sigma^2
    exp(-beta |x - y|)) by a dense Cholesky solve on all observations, O(n^3): the generic
    Gaussian-process conditioning (Rasmussen & Williams 2006, Eq. 2.19) that Wang & Hegde
    (2019, Prop. 9) avoid. Empty ``x_obs`` gives the prior; a point observed more than once
    counts once (with different values it is refused)."""
    x_obs = require_array("x_obs", x_obs, ndim=1, nonempty=False)
    g_obs = require_array("g_obs", g_obs, shape=x_obs.shape, nonempty=False)
    x_new = require_array("x_new", x_new, ndim=1)
    sigma, beta = require_positive("sigma", sigma), require_positive("beta", beta)
    if sigma * sigma < np.finfo(float).tiny:   # a subnormal kernel: the solve turns inf/NaN
        raise ValueError(f"sigma^2 underflows a normal float (sigma={sigma})")
    x_obs, g_obs = _distinct_observations(x_obs, g_obs)
    prior = ou_kernel(x_new, x_new, sigma, beta)
    if x_obs.size == 0:
        return np.zeros(x_new.size), prior
    try:
        factor = linalg.cho_factor(ou_kernel(x_obs, x_obs, sigma, beta), lower=True)
    except linalg.LinAlgError as error:
        raise ValueError(f"the kernel matrix of x_obs is numerically singular at sigma={sigma}, "
                         f"beta={beta}: {error}") from error
    cross = ou_kernel(x_new, x_obs, sigma, beta)
    return cross @ linalg.cho_solve(factor, g_obs), prior - cross @ linalg.cho_solve(factor,
                                                                                      cross.T)


def dense_conditional_sample(x_obs: ArrayLike, g_obs: ArrayLike, x_new: ArrayLike,
                             sigma: float, beta: float, rng: np.random.Generator) -> np.ndarray:
    """One draw of g(x_new) given g(x_obs) = g_obs by :func:`dense_conditional_moments`
    (symmetric square root of the conditional covariance): the dense reference for
    :class:`OUPath` (Wang & Hegde 2019, Prop. 9)."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    mean, cov = dense_conditional_moments(x_obs, g_obs, x_new, sigma, beta)
    return rng.multivariate_normal(mean, cov, method="eigh")
