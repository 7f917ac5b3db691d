"""First-visit statistics of data sets of trajectories (Balle et al. 2016, Sec. 2.2).

For a data set ``X`` of ``m`` trajectories: the first-visit returns ``F_{x,s}``, the
signature ``|X_s|`` (trajectories visiting ``s``), ``F_X`` (Eq. 4), ``K_X = max_s |X_s|``
(Sec. 3.1) and the diagonal of ``Gamma_X``, ``rho_s |X_s| / m`` (Sec. 2.2).

LSW, LSL, DP-LSW and DP-LSL see a data set only through ``m``, the signature and the
per-state sums ``sum_{x in X_s} F_{x,s}``: :class:`FirstVisitSummary` holds exactly these
(any size ``m``, e.g. drawn without simulating the trajectories), :class:`FirstVisitData`
the per-trajectory returns (needed by the objective ``J_X`` of Eq. 3).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from dprl.balle2016.inputs import regression_weights, signatures
from dprl.envs import Trajectories
from dprl.policy_evaluation import first_visit_returns
from dprl.validation import (frozen_copy, require_array, require_in_bounds, require_int,
                              require_positive)


MAX_TRAJECTORIES = 2**53  # counts and sums stay exact integers in float64 up to here


@dataclass(frozen=True)
class FirstVisitSummary:
    """The sufficient statistics of data sets of ``m`` trajectories, batch ``(*datasets,)``.

    - ``counts``: ``(*datasets, N)`` int64, the signature ``|X_s|`` (Sec. 4.1), in ``[0, m]``.
    - ``return_sums``: ``(*datasets, N)``, ``sum_{x in X_s} F_{x,s}``, in
      ``[0, |X_s| F_max]``.
    - ``n_trajectories``: ``m`` (at most ``2**53``); ``return_bound``: the public ``F_max``.

    Arrays are validated, copied and made read-only.
    """

    counts: np.ndarray
    return_sums: np.ndarray
    n_trajectories: int
    return_bound: float

    def __post_init__(self) -> None:
        bound = require_positive("return_bound", self.return_bound)
        m = require_int("n_trajectories", self.n_trajectories)
        if m > MAX_TRAJECTORIES:
            raise ValueError(f"n_trajectories must be at most 2**53, got {m}")
        counts = signatures(self.counts, None, m)
        sums = require_array("return_sums", self.return_sums, shape=counts.shape)
        if np.any(sums < 0) or np.any(sums > counts * bound):
            raise ValueError("return_sums must lie in [0, |X_s| F_max] (every first-visit "
                             "return in [0, F_max], 0 where no trajectory visits s)")
        object.__setattr__(self, "counts", frozen_copy(counts))
        object.__setattr__(self, "return_sums", frozen_copy(sums))
        object.__setattr__(self, "n_trajectories", m)
        object.__setattr__(self, "return_bound", bound)

    @property
    def datasets_shape(self) -> tuple[int, ...]:
        """The leading (independent data set) axes."""
        return self.counts.shape[:-1]

    @property
    def n_states(self) -> int:
        """``N``."""
        return self.counts.shape[-1]

    @property
    def max_count(self) -> np.ndarray:
        """``K_X = max_s |X_s|`` (Sec. 3.1), ``(*datasets,)``."""
        return self.counts.max(axis=-1)

    @property
    def mean_returns(self) -> np.ndarray:
        """``F_X`` (Eq. 4): the mean first-visit return over ``X_s``, 0 where ``|X_s| = 0``;
        ``(*datasets, N)``."""
        return self.return_sums / np.maximum(self.counts, 1)

    def __add__(self, other: FirstVisitSummary) -> FirstVisitSummary:
        """The summary of the union of two disjoint data sets (sizes add)."""
        if not isinstance(other, FirstVisitSummary) or other.return_bound != self.return_bound:
            raise ValueError("only summaries with the same return bound can be added")
        return FirstVisitSummary(self.counts + other.counts,
                                 self.return_sums + other.return_sums,
                                 self.n_trajectories + other.n_trajectories, self.return_bound)


def stack_summaries(summaries: list[FirstVisitSummary]) -> FirstVisitSummary:
    """Summaries of data sets of the same size ``m`` and bound, stacked on a new first axis."""
    if not summaries or not all(isinstance(x, FirstVisitSummary) for x in summaries):
        raise ValueError("summaries must be a non-empty list of FirstVisitSummary")
    first = summaries[0]
    if any((x.n_trajectories, x.return_bound) != (first.n_trajectories, first.return_bound)
           for x in summaries):
        raise ValueError("stacked summaries must share n_trajectories and return_bound")
    return FirstVisitSummary(np.stack([x.counts for x in summaries]),
                             np.stack([x.return_sums for x in summaries]),
                             first.n_trajectories, first.return_bound)


@dataclass(frozen=True)
class FirstVisitData:
    """First-visit returns of data sets of ``m`` trajectories, batch shape ``(*datasets, m)``.

    - ``returns``: ``(*datasets, m, N)``, ``F_{x,s}`` (0 where ``x`` does not visit ``s``).
    - ``visited``: ``(*datasets, m, N)`` bool, ``s in S_x``.
    - ``return_bound``: the public bound ``F_max`` on every return (Sec. 3.1), which every
      ``F_{x,s}`` must respect; the privacy proofs (Lemma 16, Cor. 20) need ``0 <= F <= F_max``.

    Arrays are validated, copied and made read-only.
    """

    returns: np.ndarray
    visited: np.ndarray
    return_bound: float

    def __post_init__(self) -> None:
        bound = require_positive("return_bound", self.return_bound)
        returns = require_array("returns", self.returns)
        if returns.ndim < 2:
            raise ValueError(f"returns must have shape (*datasets, m, N), got {returns.shape}")
        visited = np.asarray(self.visited)
        if visited.dtype != np.bool_ or visited.shape != returns.shape:
            raise ValueError(f"visited must be a bool array of shape {returns.shape}, "
                             f"got {visited.dtype} {visited.shape}")
        if np.any(returns[~visited] != 0):
            raise ValueError("returns must be 0 where the state is not visited")
        require_in_bounds("returns", returns, 0.0, bound)
        object.__setattr__(self, "returns", frozen_copy(returns))
        object.__setattr__(self, "visited", frozen_copy(visited))
        object.__setattr__(self, "return_bound", bound)

    @property
    def datasets_shape(self) -> tuple[int, ...]:
        """The leading (independent data set) axes."""
        return self.returns.shape[:-2]

    @property
    def n_trajectories(self) -> int:
        """``m``, the trajectories per data set."""
        return self.returns.shape[-2]

    @property
    def n_states(self) -> int:
        """``N``."""
        return self.returns.shape[-1]

    @property
    def counts(self) -> np.ndarray:
        """The signature ``|X_s|`` (Sec. 4.1), ``(*datasets, N)`` int64."""
        return self.visited.sum(axis=-2, dtype=np.int64)

    @cached_property
    def summary(self) -> FirstVisitSummary:
        """The sufficient statistics (computed once); sums along a contiguous last axis
        (batch-invariant)."""
        totals = np.ascontiguousarray(np.swapaxes(self.returns, -1, -2)).sum(axis=-1)
        return FirstVisitSummary(self.counts, totals, self.n_trajectories, self.return_bound)

    @property
    def max_count(self) -> np.ndarray:
        """``K_X = max_s |X_s|`` (Sec. 3.1), ``(*datasets,)``."""
        return self.counts.max(axis=-1)

    @property
    def mean_returns(self) -> np.ndarray:
        """``F_X`` (Eq. 4), ``(*datasets, N)``, as :attr:`FirstVisitSummary.mean_returns`."""
        return self.summary.mean_returns


def return_bound(r_max: float, gamma: float, f_max: float | None = None) -> float:
    """``F_max`` (Sec. 3.1): the public bound ``f_max`` on every return where one is given,
    else ``R_max / (1 - gamma)``."""
    return r_max / (1 - gamma) if f_max is None else require_positive("f_max", f_max)


def first_visit_data(trajectories: Trajectories, gamma: float, n_states: int, r_max: float,
                     f_max: float | None = None) -> FirstVisitData:
    """:class:`FirstVisitData` of ``trajectories`` (batch ``(*datasets, m)``), refusing any
    reward outside ``[0, r_max]`` (Sec. 2.2). ``f_max``: a public return bound replacing
    ``R_max / (1 - gamma)`` (Sec. 3.1); every first-visit return must respect it."""
    r_max = require_positive("r_max", r_max)
    if not isinstance(trajectories, Trajectories):
        raise ValueError(f"trajectories must be a Trajectories, got {type(trajectories).__name__}")
    require_in_bounds("rewards", trajectories.rewards[trajectories.transition_mask], 0.0, r_max)
    returns, visited = first_visit_returns(trajectories, gamma, n_states)
    return FirstVisitData(returns, visited, return_bound(r_max, gamma, f_max))


def require_first_visit_data(data: FirstVisitData) -> FirstVisitData:
    """``data``, or a ValueError unless it is a :class:`FirstVisitData`."""
    if not isinstance(data, FirstVisitData):
        raise ValueError(f"data must be a FirstVisitData, got {type(data).__name__}")
    return data


Statistics = FirstVisitData | FirstVisitSummary


def require_summary(data: Statistics) -> FirstVisitSummary:
    """The :class:`FirstVisitSummary` of ``data`` (a summary or a :class:`FirstVisitData`)."""
    if isinstance(data, FirstVisitSummary):
        return data
    if isinstance(data, FirstVisitData):
        return data.summary
    raise ValueError(f"data must be a FirstVisitData or a FirstVisitSummary, "
                     f"got {type(data).__name__}")


def visit_weights(data: Statistics, rho) -> np.ndarray:
    """The diagonal of ``Gamma_X``, ``rho_s |X_s| / m`` (Sec. 2.2, before Eq. 5),
    ``(*datasets, N)``."""
    data = require_summary(data)
    rho = regression_weights(rho, data.n_states)
    return rho * data.counts / data.n_trajectories
