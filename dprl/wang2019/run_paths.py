"""Ornstein-Uhlenbeck sample paths of many independent runs at once, for the batched
Q-learning of :mod:`dprl.wang2019.q_learning` (Wang & Hegde 2019, Alg. 1 lines 7-8 and
14-18, App. A Eq. (2)).

:class:`~dprl.wang2019.functional_noise.OUPath` serves one run; calling it for each of R runs
at every step costs ~0.1-0.4 ms a call in Python overhead, most of a Fig. 1 run set. Here the
R runs share arrays, and the access pattern of Alg. 1 with replay is served in two ways:

- :meth:`RunPaths.refresh` draws *fresh* paths at a whole set of points per run (at a reset,
  the states in the replay buffer): sorted, a fresh OU path is the AR(1) chain
  ``v_k = rho_k v_{k-1} + sqrt(1 - rho_k^2) z_k``, ``rho_k = exp(-beta (x_k - x_{k-1}))``
  (Markov property), computed by a blocked scan (a loop over ~sqrt(K) positions, vectorised
  across runs and blocks). Repeated points get ``rho = 1``, ``sqrt(1 - rho^2) = 0``, hence
  exactly the same value.
- :meth:`RunPaths.extend` draws one new point per run given its two nearest sampled points
  (the bridge / one-sided formulas of :func:`~dprl.wang2019.functional_noise.conditional_moments`),
  or returns the stored value of a point sampled before.

Both are exact (up to rounding) for the Gaussian-process law, whatever the order of queries.
Run r draws only from ``rngs[r]``: ``standard_normal((K, n_paths))`` per refresh and
``standard_normal(n_paths)`` per extension, so its values do not depend on the other runs.
All arithmetic is elementwise across runs, so they agree bit for bit alone or in a batch.
:class:`RunNoise` is the noise ``g_a(s)`` of a batch of runs, some of them noiseless.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from dprl.validation import require_array, require_int, require_positive
from dprl.wang2019.functional_noise import conditional_moments


class RunPaths:
    """Independent paths ``g ~ GP(0, sigma_r^2 exp(-beta |x - y|))``, ``n_paths`` per run
    (e.g. one per action), for R runs, run r drawing from ``rngs[r]`` (Wang & Hegde 2019,
    Alg. 1 lines 7-8 and 14-18, App. A Eq. (2)). Values come back as (R, ..., n_paths).

    Sampled points are kept per run as a sorted base (from :meth:`refresh`) plus up to
    ``online_capacity`` recent extensions, merged into the base when that many accrue."""

    def __init__(self, sigmas: ArrayLike, beta: float, rngs: Sequence[np.random.Generator],
                 n_paths: int, online_capacity: int = 128) -> None:
        sigmas = require_array("sigmas", sigmas, ndim=1)
        if np.any(sigmas < 0):
            raise ValueError(f"sigmas must be >= 0, got min {sigmas.min()}")
        if len(rngs) != sigmas.size or not all(isinstance(r, np.random.Generator)
                                               for r in rngs):
            raise ValueError(f"rngs must be {sigmas.size} numpy Generators (one per run)")
        self.sigmas, self.beta, self._rngs = sigmas, require_positive("beta", beta), list(rngs)
        self.n_paths = require_int("n_paths", n_paths)
        self._capacity = require_int("online_capacity", online_capacity)
        self.refresh(np.empty((sigmas.size, 0)))

    @property
    def n_runs(self) -> int:
        """R, the number of runs."""
        return self.sigmas.size

    @property
    def n_points(self) -> np.ndarray:
        """Distinct points sampled per run since the last refresh, (R,): the length of
        Alg. 1's list ``g`` (lines 14-18), which Prop. 9's query cost depends on."""
        return self._distinct.copy()

    def refresh(self, points: ArrayLike) -> np.ndarray:
        """Forget every sampled point and draw fresh paths at ``points`` (R, K) (Alg. 1
        lines 7-8: a new sample path; K may be 0). Returns the values, (R, K, n_paths)."""
        points = self._points(points, 2)
        order = np.argsort(points, axis=1, kind="stable")
        xs = np.take_along_axis(points, order, axis=1)
        steps = np.diff(xs, axis=1, prepend=-np.inf) * self.beta
        z = np.stack([rng.standard_normal((xs.shape[1], self.n_paths)) for rng in self._rngs])
        unit = _ar1_scan(np.exp(-steps), np.sqrt(-np.expm1(-2 * steps))[..., None] * z)
        sentinel = np.full((self.n_runs, 1), np.inf)
        self._base_x = np.concatenate([xs, sentinel], axis=1)
        self._base_v = np.concatenate([unit, np.zeros((self.n_runs, 1, self.n_paths))], axis=1)
        self._online_x = np.empty((self.n_runs, self._capacity))
        self._online_v = np.empty((self.n_runs, self._capacity, self.n_paths))
        self._n_online = 0
        self._distinct = (xs.shape[1] > 0) + np.count_nonzero(np.diff(xs, axis=1), axis=1)
        values = np.empty_like(unit)
        np.put_along_axis(values, order[..., None], unit, axis=1)
        return values * self.sigmas[:, None, None]

    def extend(self, points: ArrayLike) -> np.ndarray:
        """The paths at one point per run, ``points`` (R,): the stored value where sampled
        before, else a draw given the nearest sampled points on either side (App. A
        Eq. (2)). Returns (R, n_paths)."""
        points = self._points(points, 1)
        found, stored, left, right = self._neighbours(points)
        left_x = np.where(found, -np.inf, left[0])[:, None]
        right_x = np.where(found, np.inf, right[0])[:, None]
        mean, var = conditional_moments(points[:, None], left_x, left[1], right_x, right[1],
                                        self.beta)
        z = np.stack([rng.standard_normal(self.n_paths) for rng in self._rngs])
        unit = np.where(found[:, None], stored, mean + np.sqrt(var) * z)
        self._distinct += ~found
        self._append(points, unit)
        return unit * self.sigmas[:, None]

    def __call__(self, points: ArrayLike) -> np.ndarray:
        """The paths at ``points`` (R, N), one column at a time by :meth:`extend`;
        returns (R, N, n_paths)."""
        points = self._points(points, 2)
        values = np.empty(points.shape + (self.n_paths,))
        for j in range(points.shape[1]):
            values[:, j] = self.extend(points[:, j])
        return values

    def _points(self, points: ArrayLike, ndim: int) -> np.ndarray:
        points = require_array("points", points, ndim=ndim, nonempty=False)
        if points.shape[0] != self.n_runs:
            raise ValueError(f"points must have one row per run ({self.n_runs}), "
                             f"got shape {points.shape}")
        return points

    def _neighbours(self, points: np.ndarray):
        """Whether each point is stored (and its value), and the nearest stored point
        (position, values) on each side, -inf / +inf where none."""
        rows = np.arange(self.n_runs)
        index = np.array([np.searchsorted(x, p) for x, p in zip(self._base_x, points)],
                         dtype=np.int64)
        below = np.maximum(index - 1, 0)
        found = self._base_x[rows, index] == points
        stored = self._base_v[rows, index]
        left = (np.where(index > 0, self._base_x[rows, below], -np.inf),
                self._base_v[rows, below])
        right = (self._base_x[rows, index], self._base_v[rows, index])
        if self._n_online:
            found, stored, left, right = self._online_neighbours(points, found, stored, left,
                                                                 right)
        return found, stored, left, right

    def _online_neighbours(self, points: np.ndarray, found, stored, left, right):
        """Update the base neighbours with the recent extensions (brute force)."""
        rows = np.arange(self.n_runs)
        xs, vs = self._online_x[:, :self._n_online], self._online_v[:, :self._n_online]
        equal = xs == points[:, None]
        hit = equal.any(axis=1)
        stored = np.where(hit[:, None], vs[rows, np.argmax(equal, axis=1)], stored)
        below = np.where(xs < points[:, None], xs, -np.inf)
        above = np.where(xs > points[:, None], xs, np.inf)
        j_left, j_right = np.argmax(below, axis=1), np.argmin(above, axis=1)
        closer_left = below[rows, j_left] > left[0]
        closer_right = above[rows, j_right] < right[0]
        left = (np.where(closer_left, below[rows, j_left], left[0]),
                np.where(closer_left[:, None], vs[rows, j_left], left[1]))
        right = (np.where(closer_right, above[rows, j_right], right[0]),
                 np.where(closer_right[:, None], vs[rows, j_right], right[1]))
        return found | hit, stored, left, right

    def _append(self, points: np.ndarray, unit: np.ndarray) -> None:
        """Record one extension per run; merge into the sorted base when the buffer fills."""
        self._online_x[:, self._n_online] = points
        self._online_v[:, self._n_online] = unit
        self._n_online += 1
        if self._n_online == self._capacity:
            xs = np.concatenate([self._base_x[:, :-1], self._online_x, self._base_x[:, -1:]],
                                axis=1)
            vs = np.concatenate([self._base_v[:, :-1], self._online_v, self._base_v[:, -1:]],
                                axis=1)
            order = np.argsort(xs, axis=1, kind="stable")
            self._base_x = np.take_along_axis(xs, order, axis=1)
            self._base_v = np.take_along_axis(vs, order[..., None], axis=1)
            self._n_online = 0


def _ar1_scan(rho: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """``v_k = rho_k v_{k-1} + noise_k`` along axis 1 (``v_{-1} = 0``), for rho (R, K) and
    noise (R, K, P), by blocks of ~sqrt(K): a sequential scan inside all blocks at once,
    then the carries from block to block (exact algebra; elementwise across runs)."""
    n_runs, length, width = noise.shape
    if length == 0:
        return noise.copy()
    block = math.isqrt(length - 1) + 1
    n_blocks = -(-length // block)
    pad = n_blocks * block - length
    rho = np.pad(rho, ((0, 0), (0, pad)), constant_values=1.0).reshape(n_runs, n_blocks, block)
    local = np.pad(noise, ((0, 0), (0, pad), (0, 0))).reshape(n_runs, n_blocks, block, width)
    for j in range(1, block):
        local[:, :, j] += rho[:, :, j, None] * local[:, :, j - 1]
    gain = np.cumprod(rho, axis=2)
    carry = np.zeros((n_runs, n_blocks, width))
    for m in range(1, n_blocks):
        carry[:, m] = local[:, m - 1, -1] + gain[:, m - 1, -1, None] * carry[:, m - 1]
    values = local + gain[..., None] * carry[:, :, None, :]
    return values.reshape(n_runs, n_blocks * block, width)[:, :length]


class RunNoise:
    """``g_a(s)`` of all R runs of :func:`dprl.wang2019.q_learning.train` (Wang & Hegde 2019,
    Alg. 1 lines 14-18): :class:`RunPaths` over the runs with sigma > 0 (one path per action),
    exactly zero for the others (plain DQN)."""

    def __init__(self, sigmas: np.ndarray, beta: float, rngs: Sequence[np.random.Generator],
                 n_actions: int) -> None:
        self.n_runs, self.n_actions = sigmas.size, n_actions
        self._noisy = np.flatnonzero(sigmas > 0)
        self._paths = RunPaths(sigmas[self._noisy], beta, [rngs[i] for i in self._noisy],
                               n_actions) if self._noisy.size else None
        self.n_resets = 0

    def refresh(self, points: np.ndarray) -> np.ndarray:
        """Fresh paths (Alg. 1 lines 7-8), drawn at ``points`` (R, K); values (R, K, A)."""
        self.n_resets += 1
        return self._apply("refresh", points)

    def extend(self, points: np.ndarray) -> np.ndarray:
        """The paths at one state per run (R,), sampled if new; values (R, A)."""
        return self._apply("extend", points)

    def __call__(self, points: np.ndarray) -> np.ndarray:
        """The paths at states (R, N); values (R, N, A)."""
        return self._apply("__call__", points)

    @property
    def n_points(self) -> np.ndarray:
        """Distinct points in each run's paths (R,), 0 for the noiseless runs."""
        counts = np.zeros(self.n_runs, dtype=np.int64)
        if self._paths is not None:
            counts[self._noisy] = self._paths.n_points
        return counts

    def _apply(self, method: str, points: np.ndarray) -> np.ndarray:
        """``RunPaths.<method>`` on the noisy runs' points, zeros for the others."""
        values = np.zeros(points.shape + (self.n_actions,))
        if self._paths is not None:
            values[self._noisy] = getattr(self._paths, method)(points[self._noisy])
        return values
