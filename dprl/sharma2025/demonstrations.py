"""Demonstrations on demand: any trajectory of the data set, recomputed from its expert's stream.

App. B.1 of Sharma et al. (2025) records ``N = 20`` trajectories of each of ``m`` experts on
the default environment. Every expert's trajectories draw from the stream
``named_stream(data_rng, i)`` of its global index ``i`` (:mod:`dprl.sharma2025.datasets`),
and an expert's draws for all ``N`` are made before any is simulated, so DataRelease
(Alg. 2), which queries only ``T`` trajectories, records just those: trajectory ``t`` of the
data set is trajectory ``t mod N`` of expert ``t // N``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dprl.sharma2025.datasets import ExpertData
from dprl.sharma2025.experts import ExpertPopulation, pmin_log_probabilities
from dprl.validation import require_int

#: ``record(experts, index, per_expert, picks)``: trajectory ``picks[k]`` (of ``per_expert``)
#: of each expert ``index[k]`` (a population of ``len(index)`` experts), from its stream, as
#: :class:`~dprl.sharma2025.datasets.ExpertData` with one trajectory per expert.
Recorder = Callable[[ExpertPopulation, np.ndarray, int, np.ndarray], ExpertData]


@dataclass(frozen=True, eq=False)
class Demonstrations:
    """The data set ``D^Pi`` of the experts ``members`` (global indices into ``experts``) with
    ``per_expert`` trajectories each and App. B.1's ``p_min``, recorded on demand by
    ``recorder``."""

    experts: ExpertPopulation
    members: np.ndarray
    per_expert: int
    p_min: float
    recorder: Recorder

    @property
    def n_trajectories(self) -> int:
        """``N m``, the number of trajectories in the data set."""
        return len(self.members) * self.per_expert

    def prefetch(self, trajectories: np.ndarray) -> None:
        """Record ``trajectories`` in one batch (vectorised) and keep them for
        :meth:`trajectory`; each is the same bits as recorded alone."""
        wanted = np.unique(np.asarray(trajectories, dtype=np.int64))
        missing = np.array([t for t in wanted.tolist() if t not in self._cache], dtype=np.int64)
        if missing.size:
            index = self.members[missing // self.per_expert]
            data = self.recorder(self.experts.select(index), index, self.per_expert,
                                 missing % self.per_expert)
            for row, t in enumerate(missing.tolist()):
                length = int(data.lengths[row, 0])
                self._cache[t] = (data.observations[row, 0, :length + 1],
                                  data.actions[row, 0, :length])

    def trajectory(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Observations ``(|tau| + 1, d)`` and actions ``(|tau|,)`` of trajectory ``t``
        (trajectory ``t mod N`` of member ``t // N``)."""
        t = require_int("t", t, minimum=0)
        if t >= self.n_trajectories:
            raise ValueError(f"t must be < {self.n_trajectories}, got {t}")
        self.prefetch(np.array([t]))
        return self._cache[t]

    def log_probs(self, t: int) -> LazyLogProbs:
        """``log pi_i(a_j | s_j)`` ``(m, |tau|)`` of every member on trajectory ``t``, the
        matrix PrefixQuery's count sums over (Alg. 1, App. B.1 experts), evaluated lazily
        column block by column block."""
        observations, actions = self.trajectory(t)
        return LazyLogProbs(self._population, observations[:-1], actions, self.p_min)

    def __post_init__(self) -> None:
        require_int("per_expert", self.per_expert)
        object.__setattr__(self, "_cache", {})
        object.__setattr__(self, "_population", self.experts.select(self.members))


@dataclass(frozen=True, eq=False)
class LazyLogProbs:
    """The ``(m, L)`` matrix ``log pi_i(a_j | s_j)`` of App. B.1 experts on one trajectory
    (states ``(L, d)``, actions ``(L,)``); a column slice runs the experts on those states
    only (:class:`dprl.sharma2025.release.LogProbMatrix`)."""

    experts: ExpertPopulation
    observations: np.ndarray
    actions: np.ndarray
    p_min: float

    @property
    def shape(self) -> tuple[int, int]:
        return self.experts.n_experts, len(self.actions)

    def __getitem__(self, key: tuple[slice, slice]) -> np.ndarray:
        rows, columns = key
        if rows != slice(None):
            raise ValueError("only column slices [:, a:b] are supported")
        greedy = self.experts.greedy_actions(self.observations[None, columns])
        return pmin_log_probabilities(greedy, self.actions[None, columns],
                                      self.experts.n_actions, self.p_min)
