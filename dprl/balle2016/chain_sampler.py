"""Exact sampling of the first-visit statistics of ``m`` chain trajectories without simulating
them (for the experiments of Balle et al. 2016, Sec. 6, at any batch size).

LSW, LSL and their private versions see a data set only through its
:class:`~dprl.balle2016.statistics.FirstVisitSummary` (``|X_s|`` and ``sum_{x in X_s} F_{x,s}``).
On the chain (:class:`~dprl.envs.ChainMDP`) a trajectory from ``s_0`` holds ``G_i ~ Geom(1 - p)``
steps in each state ``i >= s_0``; with ``tau_s`` its first time in ``s`` and ``T = tau_goal``,
it visits ``s`` iff ``tau_s < H`` and, for ``s < goal``, ``F_{x,s} = gamma^{T - 1 - tau_s}``
if ``T <= H`` (the reward for entering the goal), else 0. Trajectories are exchangeable, so
only the numbers in each cell matter:

1. start states: ``Multinomial(m, start distribution)``; each start below the goal gets its
   label ``T`` (or "after ``H``") from the law of a sum of ``goal - s_0`` geometrics;
2. labelled trajectories in cell ``(tau_s = t, T)`` move to ``tau_{s+1} = t + k`` with the
   bridge law ``P(G = k) P(sum_{r-1} = T - t - k) / P(sum_r = T - t)``, ``r = goal - s``;
3. those that miss the goal before ``H`` move with the law conditioned on ``tau_goal > H``;
4. from the goal on, all trajectories move with the plain geometric law.

Every step is a multinomial split of cell counts, so the statistics have exactly the law of
those of ``m`` sampled trajectories (tested against :meth:`ChainMDP.sample`), at a cost
``O(N H^2)`` independent of ``m``; counts stay exact up to ``m = 2**53``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dprl.balle2016.statistics import FirstVisitSummary, return_bound
from dprl.envs import ChainMDP
from dprl.validation import require_int


class _Laws:
    """Holding-time laws of the chain on ``0..H`` plus an overflow entry (index ``H + 1``)."""

    def __init__(self, mdp: ChainMDP) -> None:
        H, p = mdp.horizon, mdp.stay_prob
        self.horizon = H
        geometric = np.zeros(H + 2)
        geometric[1:H + 1] = p ** np.arange(H) * (1 - p)
        geometric[H + 1] = p**H
        self.geometric = geometric
        sums = [np.eye(1, H + 2).ravel()]  # sum of 0 geometrics
        for _ in range(max(mdp.goal, 1)):
            sums.append(self._add_geometric(sums[-1]))
        self.sums = np.array(sums)  # sums[r, n] = P(G_1 + ... + G_r = n), overflow at H + 1
        self.survival = self.sums[:, ::-1].cumsum(axis=1)[:, ::-1]  # P(sum_r >= n)
        self._bridges: dict[tuple[int, int], np.ndarray] = {}

    def _add_geometric(self, law: np.ndarray) -> np.ndarray:
        H = self.horizon
        full = np.convolve(law[:H + 1], self.geometric[:H + 1])
        out = np.zeros(H + 2)
        out[:H + 1] = full[:H + 1]
        out[H + 1] = law[H + 1] + full[H + 1:].sum() + law[:H + 1].sum() * self.geometric[H + 1]
        return out

    def bridge(self, r: int, n: int) -> np.ndarray:
        """``P(G_1 = k | G_1 + ... + G_r = n)`` for ``k = 1 .. n``."""
        if (r, n) not in self._bridges:
            k = np.arange(1, n + 1)
            weights = self.geometric[k] * self.sums[r - 1, n - k]
            self._bridges[r, n] = weights / weights.sum()
        return self._bridges[r, n]

    def missing(self, r: int, t: int) -> np.ndarray:
        """``P(G_1 = k | t + G_1 + ... + G_r > H)`` for ``k = 1 .. H - 1 - t``, then the
        probability of ``t + G_1 >= H`` (no further visit)."""
        H = self.horizon
        k = np.arange(1, H - t)
        weights = self.geometric[k] * self.survival[r - 1, H - t - k + 1]
        total = self.survival[r, H - t + 1]
        return np.append(weights, total - weights.sum()) / total


def _split(rng: np.random.Generator, counts: np.ndarray, probabilities: np.ndarray) -> np.ndarray:
    """``Multinomial(counts[i], probabilities)`` for each ``i``, ``(len(counts), K)``.

    Trailing zero-probability categories are cut before the draw: numpy gives the last
    category whatever the rounding of the running probabilities leaves (with counts near
    ``1e15`` that can be a trajectory), and it must be a possible one."""
    probabilities = np.clip(probabilities, 0.0, None)
    support = int(np.flatnonzero(probabilities)[-1]) + 1
    draws = np.zeros((len(counts), probabilities.size), dtype=np.int64)
    kept = probabilities[:support]
    draws[:, :support] = rng.multinomial(counts, kept / kept.sum())
    return draws


class _Chain:
    """One draw of the statistics: cell counts moved state by state."""

    def __init__(self, mdp: ChainMDP, laws: _Laws, rng: np.random.Generator) -> None:
        self.mdp, self.laws, self.rng = mdp, laws, rng
        H, goal = mdp.horizon, mdp.goal
        self.counts = np.zeros(mdp.n_states, dtype=np.int64)
        self.sums = np.zeros(mdp.n_states)
        t, T = np.meshgrid(np.arange(H + 1), np.arange(H + 1), indexing="ij")
        self.discount = np.where(t < T, mdp.gamma ** np.maximum(T - 1 - t, 0), 0.0)
        self.labelled = np.zeros((H + 1, H + 1), dtype=np.int64)  # [tau_s, T], T <= H
        self.missing = np.zeros(H, dtype=np.int64)  # [tau_s], tau_goal > H
        self.free = np.zeros(H, dtype=np.int64)  # [tau_s], at or past the goal
        self.goal = goal

    def start(self, s: int, n: int) -> None:
        """``n`` trajectories start in ``s`` (time 0)."""
        if s < self.goal:
            labels = _split(self.rng, np.array([n]), self.laws.sums[self.goal - s])[0]
            self.labelled[0] += labels[:-1]
            self.missing[0] += labels[-1]
        else:
            self.free[0] += n

    def record(self, s: int) -> None:
        """Add the trajectories now in ``s`` to ``|X_s|`` and their returns to the sums."""
        self.counts[s] = self.labelled.sum() + self.missing.sum() + self.free.sum()
        self.sums[s] = (self.labelled * self.discount).sum()

    def advance_labelled(self, s: int) -> None:
        r, moved = self.goal - s, np.zeros_like(self.labelled)
        t, T = np.nonzero(self.labelled)
        for n in np.unique(T - t):
            cells = np.flatnonzero(T - t == n)
            draws = _split(self.rng, self.labelled[t[cells], T[cells]], self.laws.bridge(r, n))
            # the cells of one n have distinct T, so no target repeats
            moved[t[cells, None] + np.arange(1, n + 1), T[cells, None]] += draws
        self.labelled = moved

    def advance_missing(self, s: int) -> None:
        r, moved = self.goal - s, np.zeros_like(self.missing)
        for t in np.flatnonzero(self.missing):
            draws = _split(self.rng, self.missing[t:t + 1], self.laws.missing(r, t))[0]
            moved[t + 1:] += draws[:-1]
        self.missing = moved

    def reach_goal(self) -> None:
        """Labelled trajectories enter the goal at ``T``; they visit it iff ``T < H``."""
        self.free += np.diagonal(self.labelled)[:-1]
        self.labelled[:] = 0

    def advance_free(self) -> None:
        H = self.mdp.horizon
        draws = _split(self.rng, self.free, self.laws.geometric[1:])  # k = 1 .. H, overflow
        moved = np.zeros(2 * H + 1, dtype=np.int64)
        np.add.at(moved, np.arange(H)[:, None] + np.arange(1, H + 2), draws)
        self.free = moved[:H]


def _draw(mdp: ChainMDP, laws: _Laws, m: int, rng: np.random.Generator) -> tuple[np.ndarray,
                                                                                    np.ndarray]:
    starts = rng.multinomial(m, mdp.start_probabilities)
    chain, absorbing = _Chain(mdp, laws, rng), mdp.absorbing_state
    for s in range(absorbing):
        chain.start(s, starts[s])
        chain.record(s)
        if s < mdp.goal:
            chain.advance_labelled(s)
            chain.advance_missing(s)
        if s + 1 == mdp.goal:
            chain.reach_goal()
        elif s >= mdp.goal:
            chain.advance_free()
    chain.counts[absorbing] = starts[absorbing]  # one transition A -> A, reward 0
    return chain.counts, chain.sums


def sample_first_visit_summaries(mdp: ChainMDP, sizes: Sequence[int], rng: np.random.Generator,
                                 f_max: float | None = None) -> list[FirstVisitSummary]:
    """First-visit statistics of nested data sets of ``sizes[0] < sizes[1] < ...`` i.i.d.
    trajectories of ``mdp`` (the first ``sizes[j]`` of one sample), drawn exactly from their
    law (Balle et al. 2016, Sec. 2.2 statistics of the Sec. 6 chain) without simulating the
    trajectories. ``f_max``: the public return bound (default ``R_max / (1 - gamma)``)."""
    if not isinstance(mdp, ChainMDP):
        raise ValueError(f"mdp must be a ChainMDP, got {type(mdp).__name__}")
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    sizes = [require_int("sizes", m) for m in sizes]
    if not sizes or any(b <= a for a, b in zip(sizes, sizes[1:], strict=False)):
        raise ValueError(f"sizes must be a non-empty increasing sequence, got {sizes}")
    r_max = mdp.reward_range[1]
    bound = return_bound(r_max, mdp.gamma, f_max)
    if bound < r_max:  # one reward of r_max: entering the goal from the state before it
        raise ValueError(f"f_max must be at least the largest return on the chain, {r_max}, "
                         f"got {bound}")
    laws, summaries, previous = _Laws(mdp), [], 0
    for m in sizes:
        counts, sums = _draw(mdp, laws, m - previous, rng)
        part = FirstVisitSummary(counts, sums, m - previous, bound)
        summaries.append(part if not summaries else summaries[-1] + part)
        previous = m
    return summaries
