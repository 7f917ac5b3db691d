"""The private data release of Sharma et al. (2025): PrefixQuery (Alg. 1) and DataRelease
(Alg. 2), the sparse vector technique over trajectory prefixes.

For a trajectory ``tau`` and experts ``Pi``, ``count_{tau_{1:k}}(Pi) = sum_i prod_{j <= k}
pi_i(a_j | s_j)`` (Sec. 4) is the expected number of experts that would take the prefix's
actions. Alg. 2 queries the prefixes ``tau_{1:1}, tau_{1:2}, ...`` of ``T`` reshuffled
trajectories against a noisy threshold and releases, noiselessly, the longest prefix before
the first rejection (``D_stable``); the rest of the data (``D_unst``) goes to DP-SGD (Alg. 3).

Counts are handled as logarithms: ``log count = logsumexp_i sum_{j <= k} log pi_i(a_j|s_j)``,
so that 1000-step prefixes of 3000 experts neither underflow nor lose precision.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import numpy as np
from numpy.typing import ArrayLike

from dprl.sharma2025.experts import pmin_levels
from dprl.validation import (frozen_copy, require_array, require_choice, require_delta,
                             require_epsilon, require_finite, require_int, require_positive,
                             require_probability)

#: Trajectory length L of each environment's demonstrations: 200 for Acrobot and CartPole
#: (Sec. 6), 50 steps for HIV (App. B.1); the paper gives none for LunarLander, where 1000
#: (Gymnasium's time limit for LunarLander-v3) reproduces its parameters
#: (``sharma2025-details.md``).
MAX_LENGTHS: dict[str, int] = {"Acrobot": 200, "CartPole": 200, "LunarLander": 1000, "HIV": 50}

#: Number of discrete actions |A| (Gymnasium's; HIV: two drugs on/off, Ernst et al. 2006).
N_ACTIONS: dict[str, int] = {"Acrobot": 3, "CartPole": 2, "LunarLander": 4, "HIV": 4}

#: App. B.3's number of queried trajectories T per environment and total eps (none where the
#: paper runs no release).
APPENDIX_B3_T: dict[str, dict[float, int]] = {
    "Acrobot": {10.0: 25, 7.5: 20, 5.0: 20},
    "LunarLander": {10.0: 100, 7.5: 62},
    "CartPole": {10.0: 25, 7.5: 20},
    "HIV": {10.0: 50, 7.5: 50},
}

#: Readings of the HIV budget split: App. B.3 (``eps1 = 3 eps / 4``, ``delta1 = 9 delta / 10``
#: at eps 7.5 and 10) or Sec. 6 (``eps1 = eps``, ``eps2 = 0`` "for Acrobot and HIVTreatment";
#: ``delta1 = delta`` then, as for Acrobot, since nothing spends ``delta2``).
HIV_SPLITS = ("appendix_b3", "section6")

#: Total eps values of Fig. 3 / App. B.3.
PAPER_EPSILONS = (5.0, 7.5, 10.0)


def _logsumexp0(x: np.ndarray) -> np.ndarray:
    """``log sum_i exp(x[i])`` over axis 0, each column summed as its own contiguous row
    (numpy's pairwise sum of ``m`` numbers), so a column's value does not depend on the
    other columns: chunked and full evaluations agree bit for bit."""
    rows = np.ascontiguousarray(np.moveaxis(x, 0, -1))
    top = np.max(rows, axis=-1, keepdims=True)
    return np.log(np.sum(np.exp(rows - top), axis=-1)) + top[..., 0]


def log_prefix_counts(log_probs: ArrayLike) -> np.ndarray:
    """``log count_{tau_{1:k}}(Pi)`` for every prefix length ``k = 1..L`` (Sec. 4, Alg. 1 line
    2): ``log_probs`` is ``(m, ..., L)``, ``log pi_i(a_j | s_j)`` of expert ``i`` along a
    trajectory (extra axes are a batch of trajectories); returns ``(..., L)``, the
    ``logsumexp`` over experts of the cumulative sums over steps."""
    log_probs = require_array("log_probs", log_probs)
    if log_probs.ndim < 2:
        raise ValueError(f"log_probs must be (m, ..., L), got shape {log_probs.shape}")
    if np.any(log_probs > 0):
        raise ValueError("log_probs must be <= 0 (log probabilities)")
    return _logsumexp0(np.cumsum(log_probs, axis=-1))


class LogProbMatrix(Protocol):
    """An ``(m, L_t)`` matrix of ``log pi_i(a_j | s_j)``: a numpy array, or any object with
    ``shape`` whose column slices ``matrix[:, a:b]`` evaluate lazily (e.g. expert networks
    run on the states ``a..b-1`` only when asked)."""

    shape: tuple[int, int]

    def __getitem__(self, key: tuple[slice, slice]) -> np.ndarray:
        """Columns ``a..b-1`` as an ``(m, b - a)`` array."""


def _passes(log_counts: np.ndarray, noise: np.ndarray, threshold_hat: float) -> np.ndarray:
    """Alg. 1 line 3: ``count + Lap(4/eps') > theta_hat`` with the noise drawn."""
    return np.exp(log_counts) + noise > threshold_hat


def prefix_query(log_count: ArrayLike, threshold_hat: float, eps_prime: float,
                 rng: np.random.Generator) -> np.ndarray:
    """PrefixQuery (Sharma et al. 2025, Alg. 1): ``True`` (top) where ``count +
    Lap(4/eps') > theta_hat``, one fresh ``rng.laplace(0, 4/eps')`` per entry of the
    ``log_count`` array (log counts, as from :func:`log_prefix_counts`)."""
    log_count = require_array("log_count", log_count)
    threshold_hat = require_finite("threshold_hat", threshold_hat)
    scale = 4 / require_epsilon(eps_prime, "eps_prime")
    _require_generator(rng)
    return _passes(log_count, rng.laplace(0.0, scale, size=log_count.shape), threshold_hat)


def stable_prefix_length(log_probs: LogProbMatrix, threshold_hat: float,
                         query_noise: ArrayLike, chunk: int = 32) -> int:
    """Length ``k`` of the prefix Alg. 2 releases from one trajectory (lines 9-14): the number
    of leading prefixes whose ``count + query_noise[i] > threshold_hat``, ``|tau|`` when all
    pass. Lazy: counts are computed ``chunk`` prefixes at a time and the walk stops at the
    first rejection; the result equals the full computation bit for bit (cumulative sums
    carry on sequentially, the logsumexp is per column)."""
    m, length = _matrix_shape(log_probs)
    query_noise = require_array("query_noise", query_noise, shape=(length,))
    chunk = require_int("chunk", chunk)
    carry = np.zeros((m, 1))
    for start in range(0, length, chunk):
        stop = min(start + chunk, length)
        block = require_array("log_probs columns", log_probs[:, start:stop],
                              shape=(m, stop - start))
        cumulative = np.cumsum(np.concatenate([carry, block], axis=1), axis=1)[:, 1:]
        passed = _passes(_logsumexp0(cumulative), query_noise[start:stop], threshold_hat)
        if not passed.all():
            return start + int(np.argmin(passed))
        carry = cumulative[:, -1:]
    return length


@dataclass(frozen=True)
class ReleaseParameters:
    """The constants of DataRelease (Sharma et al. 2025, Alg. 2 lines 2-4) for budget
    ``(eps1, delta1)``, ``T`` queried trajectories of length at most ``max_length`` (L) and
    minimum action probability ``p_min`` (Assumption 3.6). Build with
    :func:`release_parameters`."""

    eps1: float
    delta1: float
    n_queries: int
    max_length: int
    p_min: float

    @property
    def eps_prime(self) -> float:
        """Alg. 2 line 3: ``eps' = eps1 / sqrt(32 T log(2 / delta1))``."""
        return self.eps1 / math.sqrt(32 * self.n_queries * math.log(2 / self.delta1))

    @property
    def delta_prime(self) -> float:
        """Alg. 2 line 3: ``delta' = delta1 / (2 T L)``."""
        return self.delta1 / (2 * self.n_queries * self.max_length)

    @property
    def c_min(self) -> float:
        """Alg. 2 line 4: ``c_min = e^eps' / (e^eps' - 1)`` (Lemma 5.1's count)."""
        return 1 / -math.expm1(-self.eps_prime)

    @property
    def theta(self) -> float:
        """Alg. 2 line 4: ``theta = c_min / p_min``."""
        return self.c_min / self.p_min

    @property
    def offset(self) -> float:
        """Alg. 2 line 8's shift ``(4 / eps') log(1 / delta')`` of the threshold."""
        return 4 / self.eps_prime * math.log(1 / self.delta_prime)

    @property
    def threshold(self) -> float:
        """The noiseless threshold ``theta + (4 / eps') log(1 / delta')`` (Alg. 2 line 8)."""
        return self.theta + self.offset

    @property
    def threshold_scale(self) -> float:
        """Laplace scale ``2 / eps'`` of the threshold noise (Alg. 2 line 8)."""
        return 2 / self.eps_prime

    @property
    def query_scale(self) -> float:
        """Laplace scale ``4 / eps'`` of each query's noise (Alg. 1 line 3)."""
        return 4 / self.eps_prime

    def longest_unanimous_prefix(self, m: int, n_actions: int) -> int:
        """Largest ``k <= L`` with ``m (1 - (|A| - 1) p_min)^k > threshold``: the longest
        prefix that ``m`` App. B.1 experts who all agree on it pass in expectation (noise at
        its mean 0); 0 if none."""
        m = require_int("m", m)
        high, _ = pmin_levels(n_actions, self.p_min)
        room = math.log(m) - math.log(self.threshold)
        if room <= 0:
            return 0
        k = math.floor(room / -math.log(high))
        if m * high**k <= self.threshold:      # equality at an integer k is not a pass
            k -= 1
        return min(max(k, 0), self.max_length)

    def unanimous_prefix_pmf(self, m: int, n_actions: int,
                             length: int | None = None) -> np.ndarray:
        """Exact distribution of the prefix length ``k`` Alg. 2 releases from one trajectory
        on which ``m`` App. B.1 experts all agree (prefix counts ``m (1 - (|A| - 1)
        p_min)^i``, ``i = 1 .. length``, default ``L``): :func:`pass_probabilities`, shape
        ``(length + 1,)``, its last entry ``k = length`` (every prefix passed)."""
        m = require_int("m", m)
        length = self.max_length if length is None else require_int("length", length)
        high, _ = pmin_levels(n_actions, self.p_min)
        log_counts = math.log(m) + np.arange(1, length + 1) * math.log(high)
        return pass_probabilities(log_counts, self.eps_prime, self.threshold)


def release_parameters(eps1: float, delta1: float, n_queries: int, max_length: int,
                       p_min: float) -> ReleaseParameters:
    """The validated :class:`ReleaseParameters` of Alg. 2 (Sharma et al. 2025, lines 2-4):
    ``eps1 > 0``, ``delta1`` in (0, 1), ``T >= 1``, ``L >= 1``, ``p_min`` in (0, 1)."""
    return ReleaseParameters(eps1=require_epsilon(eps1, "eps1"),
                             delta1=require_delta(delta1, "delta1"),
                             n_queries=require_int("n_queries", n_queries),
                             max_length=require_int("max_length", max_length),
                             p_min=require_probability("p_min", p_min, open_low=True,
                                                       open_high=True))


class BudgetSplit(NamedTuple):
    """A total ``(eps, delta)`` split into the release's ``(eps1, delta1)`` and DP-SGD's
    ``(eps2, delta2)`` (Theorem 5.6), with the release's ``T`` (``None``: no release)."""

    eps1: float
    eps2: float
    delta1: float
    delta2: float
    n_queries: int | None


def appendix_b3_split(env: str, eps: float, m: int = 3000,
                      hiv_split: str = "appendix_b3") -> BudgetSplit:
    """The budget split of Sharma et al. (2025, App. B.3) at total ``(eps, delta = 1/m)``,
    ``eps`` in {5, 7.5, 10}: Acrobot ``eps1 = eps, delta1 = delta``; LunarLander, CartPole and
    HIV at ``eps = 5``: ``eps1 = delta1 = 0`` (pure DP-SGD, ``T = None``); otherwise
    ``eps1 = 3 eps / 4``, ``delta1 = 9 delta / 10``, with App. B.3's ``T``.

    The paper is inconsistent for HIV at eps 7.5 and 10: App. B.3 gives the 3/4 split
    (``hiv_split="appendix_b3"``, the default, which reproduces the parameter table of
    ``sharma2025-details.md``); Sec. 6 says ``eps1 = eps, eps2 = 0`` for HIV
    (``hiv_split="section6"``, with ``delta1 = delta``). Table 1 sides with Sec. 6 for CQL
    (p = 0: no DP-SGD) and with App. B.3 for BCQ (p = 0.9)."""
    require_choice("env", env, MAX_LENGTHS)
    eps = require_epsilon(eps)
    if eps not in PAPER_EPSILONS:
        raise ValueError(f"eps must be one of {PAPER_EPSILONS} (App. B.3), got {eps}")
    require_choice("hiv_split", hiv_split, HIV_SPLITS)
    delta = 1 / require_int("m", m, minimum=2)
    n_queries = APPENDIX_B3_T[env].get(eps)
    if n_queries is None:
        return BudgetSplit(0.0, eps, 0.0, delta, None)
    if env == "Acrobot" or (env == "HIV" and hiv_split == "section6"):
        return BudgetSplit(eps, 0.0, delta, 0.0, n_queries)
    return BudgetSplit(3 * eps / 4, eps / 4, 9 * delta / 10, delta / 10, n_queries)


def appendix_b3_parameters(env: str, eps: float, m: int = 3000,
                           hiv_split: str = "appendix_b3") -> ReleaseParameters | None:
    """Alg. 2's parameters under :func:`appendix_b3_split` with L = ``MAX_LENGTHS[env]`` and
    App. B.1's ``p_min = 0.02``; ``None`` where the paper runs no release."""
    split = appendix_b3_split(env, eps, m, hiv_split)
    if split.n_queries is None:
        return None
    return release_parameters(split.eps1, split.delta1, split.n_queries, MAX_LENGTHS[env], 0.02)


@dataclass(frozen=True)
class ReleaseResult:
    """Output of :func:`data_release`. ``order`` is the reshuffled order (Alg. 2 line 5);
    the first ``T`` entries were queried: ``prefix_lengths[c]`` is the stable prefix length
    ``k`` of trajectory ``order[c]`` (0: nothing released) and ``queried_lengths[c]`` its
    length ``|tau|``."""

    order: np.ndarray
    prefix_lengths: np.ndarray
    queried_lengths: np.ndarray

    @property
    def queried(self) -> np.ndarray:
        """Indices of the ``T`` queried trajectories, in query order."""
        return self.order[:len(self.prefix_lengths)]

    @property
    def stable(self) -> tuple[np.ndarray, np.ndarray]:
        """``D_stable`` (Alg. 2 lines 11-13): (trajectory indices, prefix lengths ``k >= 1``)
        in query order; the released data are ``tau_{1:k}``."""
        keep = self.prefix_lengths >= 1
        return self.queried[keep], self.prefix_lengths[keep]

    def unstable(self, lengths: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """``D_unst`` (Sec. 4) given every trajectory's length: (trajectory indices, start
        steps) of the non-empty tails ``tau_{k+1:|tau|}`` (0-based start ``k``) of the queried
        trajectories and of every trajectory not queried (start 0), by increasing index."""
        lengths = require_array("lengths", lengths, shape=(len(self.order),), dtype=np.int64)
        if not np.array_equal(lengths[self.queried], self.queried_lengths):
            raise ValueError("lengths disagree with the queried trajectories' lengths")
        start = np.zeros(len(lengths), dtype=np.int64)
        start[self.queried] = self.prefix_lengths
        keep = np.flatnonzero(start < lengths)
        return keep, start[keep]


def data_release(n_trajectories: int, log_probs_of: Callable[[int], LogProbMatrix],
                 params: ReleaseParameters, rng: np.random.Generator,
                 chunk: int = 32) -> ReleaseResult:
    """DataRelease (Sharma et al. 2025, Alg. 2) over ``n_trajectories`` (``N m``) trajectories.

    ``log_probs_of(t)`` gives trajectory ``t``'s ``(m, |tau_t|)`` matrix of
    ``log pi_i(a_j | s_j)`` (e.g. :func:`~dprl.sharma2025.experts.pmin_log_probabilities` of
    the experts' greedy actions), possibly lazy (:class:`LogProbMatrix`); it is called for
    the ``T`` queried trajectories only, so a caller may generate just those. Draws from
    ``rng``, in this order: the permutation ``rng.permutation(n_trajectories)`` (line 5);
    then per queried trajectory ``c = 1..T`` the threshold noise ``rng.laplace(0, 2/eps')``
    (line 8) and its ``|tau|`` query noises ``rng.laplace(0, 4/eps', |tau|)`` (Alg. 1, one
    per prefix, all drawn; those after the first rejection are unused, as the algorithm stops
    querying there). ``L = params.max_length`` must be at least every ``|tau|`` (line 2
    takes the maximum; a larger L only lowers ``delta'``, Sec. 5)."""
    n_trajectories = require_int("n_trajectories", n_trajectories)
    if not isinstance(params, ReleaseParameters):
        raise ValueError(f"params must be ReleaseParameters, got {type(params).__name__}")
    if params.n_queries > n_trajectories:
        raise ValueError(f"params.n_queries={params.n_queries} must be <= n_trajectories="
                         f"{n_trajectories} (Alg. 2 line 1: T <= N m)")
    _require_generator(rng)
    order = rng.permutation(n_trajectories)
    prefix_lengths = np.zeros(params.n_queries, dtype=np.int64)
    queried_lengths = np.zeros(params.n_queries, dtype=np.int64)
    for c, t in enumerate(order[:params.n_queries]):
        matrix = log_probs_of(int(t))
        length = _matrix_shape(matrix)[1]
        if not 1 <= length <= params.max_length:
            raise ValueError(f"log_probs_of({t}) has {length} columns; a trajectory's length "
                             f"must lie in [1, params.max_length={params.max_length}] "
                             "(Alg. 2 line 2)")
        threshold_hat = params.threshold + rng.laplace(0.0, params.threshold_scale)
        noise = rng.laplace(0.0, params.query_scale, size=length)
        prefix_lengths[c] = stable_prefix_length(matrix, threshold_hat, noise, chunk)
        queried_lengths[c] = length
    return ReleaseResult(order=frozen_copy(order), prefix_lengths=frozen_copy(prefix_lengths),
                         queried_lengths=frozen_copy(queried_lengths))


#: Gauss-Legendre rule used on every panel of :func:`pass_probabilities`.
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(10)
#: Half-width of the threshold-noise window, in units of its scale 2/eps' (mass e^-50 outside).
_WINDOW = 50.0
#: Panels of one scale 2/eps' across the window, plus one breakpoint per count.
_N_PANELS = 100


def _laplace_log_sf_cdf(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``log P(x + Lap(1) > 0)`` and ``log P(x + Lap(1) <= 0)``: a query's pass and failure
    when ``x = (count - threshold) / scale``, each without cancellation."""
    tail = np.exp(-np.abs(x))
    log_half = math.log(0.5)
    log_pass = np.where(x >= 0, np.log1p(-0.5 * tail), log_half + x)
    log_fail = np.where(x >= 0, log_half - x, np.log1p(-0.5 * tail))
    return log_pass, log_fail


def pass_probabilities(log_counts: ArrayLike, eps_prime: float,
                       threshold: float) -> np.ndarray:
    """Exact distribution of the prefix length ``k`` Alg. 2 releases from a trajectory with
    prefix counts ``exp(log_counts)`` (``(..., L)``; a batch of trajectories on the leading
    axes), noiseless ``threshold = theta + (4/eps') log(1/delta')``: returns ``(..., L+1)``
    with ``P(k) = E_v[prod_{i<=k} P(c_i + U > thr + v) P(c_{k+1} + U <= thr + v)]``,
    ``v ~ Lap(2/eps')`` the threshold noise, ``U ~ Lap(4/eps')`` (Alg. 1-2; ``k = L``: all
    pass). The integral over ``v`` is composite Gauss-Legendre on panels of width 2/eps'
    over +-50 scales, split at every kink (``v = 0`` and ``v = c_i - thr``)."""
    log_counts = require_array("log_counts", log_counts)
    if log_counts.ndim < 1:
        raise ValueError("log_counts must have a prefix axis")
    eps_prime = require_epsilon(eps_prime, "eps_prime")
    threshold = require_positive("threshold", threshold)
    scale_v, scale_u = 2 / eps_prime, 4 / eps_prime
    counts = np.exp(log_counts)
    width = _WINDOW * scale_v
    grid = np.linspace(-width, width, _N_PANELS + 1)
    kinks = np.clip(counts - threshold, -width, width)
    edges = np.sort(np.concatenate(
        [np.broadcast_to(grid, kinks.shape[:-1] + grid.shape), kinks], axis=-1), axis=-1)
    half = (edges[..., 1:] - edges[..., :-1]) / 2
    nodes = (edges[..., :-1] + half)[..., None] + half[..., None] * _GL_NODES
    weights = half[..., None] * _GL_WEIGHTS
    nodes = nodes.reshape(*counts.shape[:-1], -1)
    with np.errstate(divide="ignore"):          # empty panels (coinciding kinks) weigh 0
        log_weights = np.log(weights.reshape(nodes.shape)) - math.log(2 * scale_v) \
            - np.abs(nodes) / scale_v
    length = counts.shape[-1]
    result = np.zeros(counts.shape[:-1] + (length + 1,))
    block = max(1, 2_000_000 // max(1, counts.size))
    for start in range(0, nodes.shape[-1], block):
        v = nodes[..., start:start + block, None]
        log_pass, log_fail = _laplace_log_sf_cdf(
            (counts[..., None, :] - threshold - v) / scale_u)
        passed = np.concatenate([np.zeros(v.shape), np.cumsum(log_pass, axis=-1)], axis=-1)
        log_k = passed + np.concatenate([log_fail, np.zeros(v.shape)], axis=-1)
        result += np.sum(np.exp(log_k + log_weights[..., start:start + block, None]), axis=-2)
    return result


def _matrix_shape(matrix: LogProbMatrix) -> tuple[int, int]:
    """``(m, L_t)`` of a log-probability matrix, validated."""
    shape = getattr(matrix, "shape", None)
    if shape is None or len(shape) != 2 or shape[0] < 1 or shape[1] < 1:
        raise ValueError(f"log_probs must be a non-empty (m, L) matrix, got shape {shape}")
    return int(shape[0]), int(shape[1])


def _require_generator(rng: np.random.Generator) -> None:
    """Raise unless ``rng`` is a numpy Generator (randomness is always explicit)."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
