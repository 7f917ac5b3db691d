"""Speed workloads for the Ornstein-Uhlenbeck sampler (Wang & Hegde 2019, Prop. 9): a
candidate/reference pair and the query-scaling measurement, registered for
``python -m dprl bench`` (:data:`BENCHMARKS`, :mod:`dprl.bench`).

- :func:`ou_conditioning` vs :func:`dense_conditioning`: draw a path at 100 new points given
  its values at ``n`` sampled points, by nearest neighbours vs a dense Cholesky solve.
- :func:`query_times`: total time for ``N`` random queries, batched or one at a time, whose
  log-log slope (:func:`loglog_slope`) is ~1 for an O(N log N) sampler and 2 for O(N^2).
- :func:`query_operations`: the same workload measured in elementary operations
  (:attr:`OUPath.operations`), a cost that does not depend on the machine or its load.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence

import numpy as np

from dprl.benchmarking import Benchmark, Scaling
from dprl.validation import require_array, require_int
from dprl.wang2019.functional_noise import OUPath, dense_conditional_sample

#: Workload of the conditioning pair: unit kernel, 100 new points, uniform points on [0, 1].
_SIGMA, _BETA, _NEW_POINTS = 1.0, 1.0, 100
_CACHE: dict[int, tuple[OUPath, np.ndarray]] = {}


def conditioning_setup(n: int) -> tuple[OUPath, np.ndarray]:
    """A path sampled at ``n`` uniform points of [0, 1] and 100 new points (cached per n): the
    shared input of the Prop. 9 conditioning pair (Wang & Hegde 2019)."""
    n = require_int("n", n)
    if n not in _CACHE:
        rng = np.random.default_rng(0)
        path = OUPath(_SIGMA, _BETA, rng)
        path(rng.random(n))
        _CACHE[n] = path, rng.random(_NEW_POINTS)
    return _CACHE[n]


def ou_conditioning(n: int) -> np.ndarray:
    """Candidate: the 100 new values from a copy of the stored path, by nearest neighbours
    (Wang & Hegde 2019, App. A Eq. (2), Prop. 9)."""
    path, x_new = conditioning_setup(n)
    return copy.deepcopy(path)(x_new)


def dense_conditioning(n: int) -> np.ndarray:
    """Reference: the 100 new values given all n stored values by a dense Cholesky solve
    (Rasmussen & Williams 2006, Eq. 2.19), O(n^3)."""
    path, x_new = conditioning_setup(n)
    x_obs, g_obs = path.sampled()
    return dense_conditional_sample(x_obs, g_obs, x_new, _SIGMA, _BETA,
                                    np.random.default_rng(1))


def _answer_queries(n: int, batch_size: int, seed: int) -> tuple[OUPath, float]:
    """A fresh path after answering n uniform random points of [0, 1] in batches of
    ``batch_size`` (Prop. 9's workload), and the seconds it took."""
    points = np.random.default_rng(seed).random(require_int("size", n))
    path = OUPath(_SIGMA, _BETA, np.random.default_rng(seed + 1))
    start = time.perf_counter()
    for first in range(0, points.size, batch_size):
        path(points[first:first + batch_size])
    return path, time.perf_counter() - start


def query_times(sizes: Sequence[int], batch_size: int, seed: int = 0) -> np.ndarray:
    """Seconds a fresh path takes to answer N uniform random points of [0, 1] in batches of
    ``batch_size`` (1: one point per call), for each N in ``sizes`` (Prop. 9's workload)."""
    batch_size = require_int("batch_size", batch_size)
    return np.array([_answer_queries(n, batch_size, seed)[1] for n in sizes])


def query_operations(sizes: Sequence[int], batch_size: int, seed: int = 0) -> np.ndarray:
    """Elementary operations (:attr:`OUPath.operations`: comparisons, neighbour updates,
    bridge draws, merge moves) a fresh path spends on the workload of :func:`query_times`,
    for each N in ``sizes``: Prop. 9's cost (Wang & Hegde 2019), deterministic."""
    batch_size = require_int("batch_size", batch_size)
    return np.array([_answer_queries(n, batch_size, seed)[0].operations for n in sizes],
                    dtype=float)


def loglog_slope(sizes: Sequence[int], times: Sequence[float]) -> float:
    """Least-squares slope of log(time) against log(size): ~1 for Prop. 9's O(N log N)
    (Wang & Hegde 2019), 2 for O(N^2)."""
    sizes = require_array("sizes", sizes, ndim=1)
    times = require_array("times", times, shape=sizes.shape)
    if sizes.size < 2 or np.any(sizes <= 0) or np.any(times <= 0):
        raise ValueError("need at least 2 positive sizes and times")
    return float(np.polyfit(np.log(sizes), np.log(times), 1)[0])


_OU_QUERY_BATCH = 1000


def _ou_query_times(sizes: Sequence[int]) -> np.ndarray:
    """Prop. 9's workload at each size, the fastest of 3 timings (Wang & Hegde 2019)."""
    return np.min([query_times(sizes, _OU_QUERY_BATCH, seed) for seed in range(3)], axis=0)


#: The benchmarks of this module, for :data:`dprl.bench.BENCHMARKS`.
BENCHMARKS = (
    Benchmark("ou-conditioning", "Ornstein-Uhlenbeck path at 100 new points given n sampled "
              "ones (Wang & Hegde 2019, Prop. 9): nearest-neighbour bridges vs dense Gaussian "
              "conditioning (Cholesky)", "sampled points", ou_conditioning, dense_conditioning,
              size=10_000, quick_size=500, repeats=1, setup=conditioning_setup, goal=100.0),
    Scaling("ou-scaling", "Ornstein-Uhlenbeck path answering N uniform queries in batches of "
            f"{_OU_QUERY_BATCH} (Wang & Hegde 2019, Prop. 9: O(N log N), slope about 1; "
            "O(N^2) would be 2)", "queries", _ou_query_times,
            sizes=(10_000, 100_000, 1_000_000), quick_sizes=(1_000, 10_000), goal=1.2),
)
