"""Demonstrations on demand: one expert's ``N`` trajectories, recomputed from its own stream.

App. B.1 of Sharma et al. (2025) records ``N = 20`` trajectories of each of ``m`` experts on
the default environment. Every expert's trajectories draw from the stream
``named_stream(data_rng, i)`` of its global index ``i`` (:mod:`dprl.sharma2025.datasets`),
so DataRelease (Alg. 2), which queries only ``T`` trajectories, needs to record only the
experts of those ``T``: trajectory ``t`` of the data set is trajectory ``t mod N`` of expert
``t // N``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dprl.sharma2025.datasets import ExpertData
from dprl.sharma2025.experts import ExpertPopulation, pmin_log_probabilities
from dprl.validation import require_int

#: ``record(experts, index, per_expert)``: the data of the experts ``index`` (a population
#: of ``len(index)`` experts), expert ``index[k]`` from its stream.
Recorder = Callable[[ExpertPopulation, np.ndarray, int], ExpertData]


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
        """Record the experts of ``trajectories`` in one batch (vectorised) and keep their
        data for :meth:`trajectory`; each expert's data are the same bits as alone."""
        wanted = np.unique(np.asarray(trajectories, dtype=np.int64) // self.per_expert)
        missing = [k for k in wanted.tolist() if k not in self._cache]
        if missing:
            index = self.members[missing]
            data = self.recorder(self.experts.select(index), index, self.per_expert)
            for row, k in enumerate(missing):
                self._cache[k] = ExpertData(*(field[row:row + 1] for field in (
                    data.observations, data.actions, data.rewards, data.lengths,
                    data.terminated)))

    def trajectory(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Observations ``(|tau| + 1, d)`` and actions ``(|tau|,)`` of trajectory ``t``."""
        t = require_int("t", t, minimum=0)
        self.prefetch(np.array([t]))
        data, j = self._cache[t // self.per_expert], t % self.per_expert
        length = int(data.lengths[0, j])
        return data.observations[0, j, :length + 1], data.actions[0, j, :length]

    def log_probs(self, t: int) -> LazyLogProbs:
        """``log pi_i(a_j | s_j)`` ``(m, |tau|)`` of every member on trajectory ``t``, the
        matrix PrefixQuery's count sums over (Alg. 1, App. B.1 experts), evaluated lazily
        column block by column block."""
        observations, actions = self.trajectory(t)
        return LazyLogProbs(self.experts.select(self.members), observations[:-1], actions,
                            self.p_min)

    def __post_init__(self) -> None:
        require_int("per_expert", self.per_expert)
        object.__setattr__(self, "_cache", {})


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
