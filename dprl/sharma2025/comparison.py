"""Sharma et al. (2025), Sec. 6: the comparisons of Fig. 3, Table 1 and Table 2 computed on
scored training runs (:func:`dprl.sharma2025.scores.score_runs`), so that every population and
optimiser the book trains on is judged by the same code.

- Fig. 3's *cell* (environment, algorithm, eps at m = 3000): ours at Table 3's ``p`` against
  expert-level DP-SGD, paired by seed; decidable where the non-private learner beats the
  random policy by two standard errors (the trivial reference);
- Table 1's *sweep*: ours at every ``p`` of the grid on seed 0, the best ``p`` by final return;
- Table 2's *split*: ``eps1 = 0`` (the baseline) against ``eps1 = 3 eps / 4`` with ``p = 1``;
- ``D_stable`` *alone* (Table 1's ``p = 0`` at eps = 10) against the better of DP-SGD and the
  non-private learner;
- Fig. 4's *trend*: the gap of ours over DP-SGD against the number of experts (Acrobot, CQL).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import linregress
from scipy.stats import t as student_t

from dprl.claims import NULL_LEVEL, agreement_tail, graded
from dprl.sharma2025.accounting import table3_row
from dprl.sharma2025.protocol import ALGORITHMS, ours_split
from dprl.sharma2025.scores import PairedGap, Scored, above_random, paired_gap, select
from dprl.validation import require_positive

#: Fig. 3's privacy budgets.
EPSILONS = (5.0, 7.5, 10.0)
#: The experts of Fig. 3's runs.
N_EXPERTS = 3000


def fig3_runs(scored: Sequence[Scored], env: str, algorithm: str, eps: float, method: str,
              reading: str = "paper") -> list[Scored]:
    """Fig. 3's runs of a cell at m = 3000 by seed: the baseline (``"dpsgd"``) or ours at
    Table 3's ``p`` and split (``"ours"``; empty where ours is the baseline itself)."""
    p = table3_row(env, eps, algorithm).p if method == "ours" else 1.0
    split = ours_split(env, p) if method == "ours" else "appendix_b3"
    return select(scored, method=method, algorithm=algorithm, eps=eps, m=N_EXPERTS,
                  reading=reading, p=p, split=split)


def decidable(scored: Sequence[Scored], algorithm: str, margin_se: float = 2.0) -> bool:
    """Whether the non-private learner (m = 3000) beats the random policy by ``margin_se``
    standard errors over its seeds: only then does a normalised score have a scale."""
    require_positive("margin_se", margin_se)
    runs = select(scored, method="nonprivate", algorithm=algorithm, m=N_EXPERTS)
    return above_random(runs).better(margin_se)


def fig3_cells(scored: Sequence[Scored], env: str) -> list[dict[str, object]]:
    """Fig. 3's cells of one environment (algorithm by eps), each a mapping with the runs
    ``base``, ``ours``, ``visible`` (ours with the coins visible), ``decidable`` and the
    normalised paired gaps ``gap`` and ``gap_visible`` (None where ours has no runs)."""
    cells = []
    for algorithm in ALGORITHMS:
        scale = decidable(scored, algorithm)
        for eps in EPSILONS:
            base = fig3_runs(scored, env, algorithm, eps, "dpsgd")
            ours = fig3_runs(scored, env, algorithm, eps, "ours")
            visible = fig3_runs(scored, env, algorithm, eps, "ours", "visible_coins")
            cells.append(dict(env=env, algorithm=algorithm, eps=eps, base=base, ours=ours,
                              visible=visible, decidable=scale,
                              gap=paired_gap(ours, base) if ours else None,
                              gap_visible=paired_gap(visible, base) if visible else None))
    return cells


@dataclass(frozen=True)
class Fig3Count:
    """Fig. 3's comparison counted over cells: the cells where ours differs from the
    baseline (``distinct``), the decidable ones among them, and those where ours is ahead,
    significantly better (gap >= ``margin_se`` s.e. and mean score above ``floor``) or
    significantly worse."""

    distinct: list[dict[str, object]]
    decided: list[dict[str, object]]
    ahead: list[dict[str, object]]
    better: list[dict[str, object]]
    worse: list[dict[str, object]]


def fig3_count(cells: Sequence[Mapping[str, object]], margin_se: float = 2.0,
               floor: float = 0.1) -> Fig3Count:
    """Count Fig. 3's cells: a win needs the paired gap at ``margin_se`` standard errors and
    ours above the random policy by ``floor`` of the non-private margin (normalised score)."""
    require_positive("margin_se", margin_se)
    distinct = [c for c in cells if c["gap"] is not None]
    decided = [c for c in distinct if c["decidable"]]
    return Fig3Count(
        distinct, decided, [c for c in decided if c["gap"].mean > 0],
        [c for c in decided if c["gap"].better(margin_se)
         and np.mean([s.score for s in c["ours"]]) > floor],
        [c for c in decided if c["gap"].worse(margin_se)])


def p_sweep(scored: Sequence[Scored], algorithm: str, eps: float, steps: int
            ) -> dict[float, Scored | None]:
    """Table 1's sweep of one cell: ours by ``p`` on seed 0 (m = 3000, the paper's
    reading), None where the run trained on nothing (all ``steps`` skipped)."""
    runs = [s for s in scored if s["method"] == "ours" and s["algorithm"] == algorithm
            and s["eps"] == eps and s["reading"] == "paper" and s["seed"] == 0
            and s["m"] == N_EXPERTS]
    if len({s["p"] for s in runs}) != len(runs):
        raise ValueError(f"two runs share a p in the sweep of {algorithm} at eps = {eps}")
    return {s["p"]: (None if s["skipped_steps"] == steps else s) for s in runs}


def best_p(sweep: Mapping[float, Scored | None]) -> float:
    """The ``p`` of a sweep with the highest final return among the runs that trained."""
    feasible = {p: run.final for p, run in sweep.items() if run is not None}
    if not feasible:
        raise ValueError("no run of the sweep trained")
    return max(feasible, key=feasible.get)


#: Table 1's sweep of p (App. B.3's grid and p = 1), and the budgets at which ours has both a
#: release and DP steps.
P_GRID = (0.0, 0.5, 0.8, 0.9, 1.0)
TABLE1_EPSILONS = (7.5, 10.0)


@dataclass(frozen=True)
class Table1Tally:
    """Table 1 against the sweeps: a row per cell (final return by p, best p, the paper's),
    the cells that count (learner decidable, release not empty), how many agree, and each
    counted cell's chance of agreeing when its best p is a random choice among the p that
    trained."""

    rows: list[tuple[object, ...]]
    agree: int
    counted: int
    chances: list[float]
    left_out: list[str]

    @property
    def p_value(self) -> float:
        """The probability of at least this many agreements when every best p is random."""
        return agreement_tail(self.chances, self.agree) if self.counted else 1.0

    def needed(self, level: float = NULL_LEVEL) -> int | None:
        """The fewest agreements whose probability at random is at most ``level``."""
        return next((k for k in range(1, self.counted + 1)
                     if agreement_tail(self.chances, k) <= level), None)

    def null_probability(self, level: float = NULL_LEVEL) -> float:
        """The rule's chance of passing when every best p is random (0: unreachable)."""
        k = self.needed(level)
        return 0.0 if k is None else agreement_tail(self.chances, k)

    def partly(self, level: float = NULL_LEVEL) -> bool:
        """PARTIAL: so many agreements have probability <= ``level`` at random."""
        return self.p_value <= level

    def holds(self, level: float = NULL_LEVEL, share: float = 0.75) -> bool:
        """HOLDS: PARTIAL, and agreement in at least ``share`` of the counted cells."""
        return self.partly(level) and self.agree >= share * self.counted

    def verdict(self, level: float = NULL_LEVEL) -> str:
        """HOLDS, PARTIAL or FAILS, as :func:`dprl.claims.claim` grades the rule."""
        return graded(self.holds(level), self.partly(level))


def table1_tally(scored: Mapping[str, Sequence[Scored]], steps: Mapping[str, int],
                 paper: Mapping[tuple[str, str], Sequence[float]]) -> Table1Tally:
    """Tally Table 1's best ``p`` (``paper[(env, algorithm)]`` at eps 5, 7.5, 10) against
    the sweeps of the environments in ``scored`` (eps = 7.5, 10; seed 0)."""
    rows, agree, chances, left_out = [], 0, [], []
    for env, runs in scored.items():
        for algorithm in ALGORITHMS:
            scale = decidable(runs, algorithm)
            for eps in TABLE1_EPSILONS:
                sweep = p_sweep(runs, algorithm, eps, steps[env])
                best = best_p(sweep)
                paper_p = paper[(env, algorithm)][EPSILONS.index(eps)]
                # a cell decides only where its learner is decidable and its release is not
                # empty (an empty D_stable leaves p nothing to choose but the accounting)
                if scale and any(run["n_stable"] > 0 for run in sweep.values()
                                 if run is not None):
                    agree += best == paper_p
                    chances.append(1 / sum(run is not None for run in sweep.values()))
                else:
                    left_out.append(f"{env} {algorithm} {eps:g}")
                finals = [(np.inf if sweep[p] is None else sweep[p].final) if p in sweep
                          else None for p in P_GRID]
                rows.append((env, algorithm, eps, *finals, best, paper_p))
    return Table1Tally(rows, agree, len(chances), chances, left_out)


def split_gap(scored: Sequence[Scored], eps: float) -> tuple[list[Scored], list[Scored],
                                                              PairedGap]:
    """Table 2's split with BCQ at ``eps``: ours with ``eps1 = 3 eps / 4`` and ``p = 1``,
    the baseline (``eps1 = 0``) at the same learning rate and batch, and the paired gap in
    returns, baseline minus the 3/4 split."""
    quarter = select(scored, method="ours", split="three_quarters", eps=eps, algorithm="BCQ")
    if not quarter:
        raise ValueError(f"no split-ablation runs at eps = {eps}")
    whole = select(scored, method="dpsgd", eps=eps, algorithm="BCQ", m=N_EXPERTS,
                   learning_rate=quarter[0]["learning_rate"],
                   batch_size=quarter[0]["batch_size"])
    return quarter, whole, paired_gap(whole, quarter, raw=True)


@dataclass(frozen=True)
class Alone:
    """Ours on ``D_stable`` alone in one cell: its runs, its margin over the random policy,
    the better of DP-SGD and the non-private learner (``best``, by mean final return) and
    the paired return gap to it."""

    runs: list[Scored]
    margin: PairedGap
    best: str
    best_runs: list[Scored]
    gap: PairedGap

    def suffices(self, margin_se: float = 2.0) -> bool:
        """Above the random policy by ``margin_se`` s.e., and no worse than the better of
        the others by ``margin_se`` s.e."""
        return self.margin.better(margin_se) and self.gap.mean >= -margin_se * self.gap.se


def stable_alone(scored: Sequence[Scored], env: str, algorithm: str, eps: float = 10.0
                 ) -> Alone:
    """Sec. 6's "just D_stable suffices" in one cell: ours at Table 3's ``p = 0``."""
    runs = fig3_runs(scored, env, algorithm, eps, "ours")
    if not runs or {s["p"] for s in runs} != {0.0}:
        raise ValueError(f"ours has no p = 0 runs in {env} {algorithm} at eps = {eps}")
    others = {"DP-SGD": fig3_runs(scored, env, algorithm, eps, "dpsgd"),
              "non-private": select(scored, method="nonprivate", algorithm=algorithm,
                                    m=N_EXPERTS)}
    best = max(others, key=lambda name: np.mean([s.final for s in others[name]]))
    return Alone(runs, above_random(runs), best, others[best],
                 paired_gap(runs, others[best], raw=True))


#: Fig. 4's numbers of experts (nested: the first m of one public permutation).
FIG4_EXPERTS = (1000, 2000, 3000)


def fig4_runs(scored: Sequence[Scored], method: str, m: int) -> list[Scored]:
    """Fig. 4's runs (Acrobot, CQL, eps = 10; the non-private learner without eps) at ``m``."""
    return select(scored, method=method, algorithm="CQL", m=m,
                  eps=0.0 if method == "nonprivate" else 10.0, reading="paper")


@dataclass(frozen=True)
class Fig4Trend:
    """Fig. 4's paired return gaps ours - DP-SGD at each m, and their least-squares slope in
    m over every seed's gap with a one-sided t test at ``level`` (no trend: slope 0)."""

    gaps: list[PairedGap]
    slope: float
    stderr: float
    t_needed: float

    @property
    def rises(self) -> bool:
        return self.slope >= self.t_needed * self.stderr

    @property
    def growing(self) -> bool:
        return all(a.mean < b.mean for a, b in zip(self.gaps, self.gaps[1:]))

    def holds(self, margin_se: float = 2.0) -> bool:
        """Rising, increasing at each m, and ahead by ``margin_se`` s.e. at the largest m."""
        return self.rises and self.growing and self.gaps[-1].better(margin_se)

    @property
    def partly(self) -> bool:
        """Rising, and ahead of DP-SGD at the largest m (no improvement to grow otherwise)."""
        return self.rises and self.gaps[-1].mean > 0


def fig4_trend(scored: Sequence[Scored], experts: Sequence[int] = FIG4_EXPERTS,
               level: float = NULL_LEVEL) -> Fig4Trend:
    """Fig. 4's claim measured: the improvement over DP-SGD against ``m``."""
    gaps = [paired_gap(fig4_runs(scored, "ours", m), fig4_runs(scored, "dpsgd", m), raw=True)
            for m in experts]
    trend = linregress(np.repeat(experts, [len(g.differences) for g in gaps]),
                       np.concatenate([g.differences for g in gaps]))
    t_needed = float(student_t.ppf(1 - level, sum(len(g.differences) for g in gaps) - 2))
    return Fig4Trend(gaps, float(trend.slope), float(trend.stderr), t_needed)
