"""Empirical privacy audits: a statistically valid lower bound on eps from an attack's success.

An auditor runs a mechanism many times on two neighbouring inputs ``D`` (the *null*) and ``D'``
(the *alternative*) and records a test statistic ``s`` oriented so that large values point to
``D'``. The test "say D' when s >= t" has false-positive rate ``FPR(t) = P_D(s >= t)`` and
false-negative rate ``FNR(t) = P_D'(s < t)``; (eps, delta)-DP forces, for every test,

    FPR + e^eps FNR >= 1 - delta   and   FNR + e^eps FPR >= 1 - delta

(Kairouz, Oh & Viswanath 2015, Thm. 2.1), so with Clopper-Pearson upper bounds on both rates

    eps >= max( log((1 - delta - FPR_hi) / FNR_hi), log((1 - delta - FNR_hi) / FPR_hi) )

(Jagielski, Ullman & Oprea 2020; Nasr et al. 2021, 2023). Each rate's bound is one-sided at
level ``1 - (1 - confidence) / 2`` (the upper end of the two-sided Clopper-Pearson interval at
``confidence``), so by a union bound the eps bound holds with probability >= ``confidence`` for a
threshold fixed in advance. :func:`held_out_lower_bound` fixes it in advance: it chooses the
threshold and direction on one set of runs and evaluates the bound on fresh runs.

The curves the claims imply, in the f-DP view (Dong, Roth & Su 2022): mu-Gaussian DP has the
trade-off ``f(alpha) = Phi(Phi^{-1}(1 - alpha) - mu)`` (Def. 2.7), (eps, delta)-DP the trade-off
``max(0, 1 - delta - e^eps alpha, e^{-eps} (1 - delta - alpha))`` (Prop. 2.5).

Statistics are kept as histograms over fixed bin edges (the experiments store those, not the
raw samples): cell ``j`` of :func:`histogram` counts the samples ``s`` with
``edges[j-1] <= s < edges[j]``, so the counts at or above ``edges[j]`` are cells ``j+1, ...``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import special, stats

from dprl.validation import (require_array, require_delta, require_epsilon, require_int,
                             require_nonnegative, require_probability)


def _require_confidence(confidence: float) -> float:
    return require_probability("confidence", confidence, open_low=True, open_high=True)


def family_confidence(confidence: float, audits: int) -> float:
    """The level ``1 - (1 - confidence) / audits`` at which each of ``audits`` bounds must hold
    for all of them to hold at once with probability >= ``confidence`` (Bonferroni: a union
    bound over the audits' failures)."""
    return 1 - (1 - _require_confidence(confidence)) / require_int("audits", audits)


def _require_edges(edges: ArrayLike) -> np.ndarray:
    edges = require_array("edges", edges, ndim=1)
    if edges.size == 0 or np.any(np.diff(edges) <= 0):
        raise ValueError("edges must be a non-empty, strictly increasing 1-D array")
    return edges


def histogram(samples: ArrayLike, edges: ArrayLike) -> np.ndarray:
    """Counts ``(..., len(edges) + 1)`` of ``samples`` along their last axis in the cells cut
    by ``edges`` (cell ``j`` holds ``edges[j-1] <= s < edges[j]``; the first and last cells are
    unbounded), one histogram per leading index: exact integers, vectorised over trials."""
    samples = require_array("samples", samples)
    edges = _require_edges(edges)
    if samples.ndim == 0 or samples.shape[-1] == 0 or not np.all(np.isfinite(samples)):
        raise ValueError("samples must be finite with a non-empty last axis")
    cells = np.searchsorted(edges, samples, side="right")
    rows = cells.reshape(-1, samples.shape[-1])
    n_cells = edges.size + 1
    offsets = np.arange(rows.shape[0])[:, None] * n_cells
    counts = np.bincount((rows + offsets).ravel(), minlength=rows.shape[0] * n_cells)
    return counts.reshape(*samples.shape[:-1], n_cells)


@dataclass(frozen=True)
class TradeOff:
    """The empirical trade-off of the tests "say D' when s >= thresholds[j]": false-positive
    and false-negative counts out of ``n_null`` and ``n_alternative`` runs."""

    thresholds: np.ndarray
    false_positives: np.ndarray
    false_negatives: np.ndarray
    n_null: int
    n_alternative: int

    @property
    def fpr(self) -> np.ndarray:
        """Empirical P_D(s >= t)."""
        return self.false_positives / self.n_null

    @property
    def fnr(self) -> np.ndarray:
        """Empirical P_D'(s < t)."""
        return self.false_negatives / self.n_alternative


def trade_off_from_histograms(null_counts: ArrayLike, alternative_counts: ArrayLike,
                              edges: ArrayLike) -> TradeOff:
    """:class:`TradeOff` at every edge from the :func:`histogram` counts of the statistic
    under ``D`` and ``D'`` (each ``(len(edges) + 1,)``, or ``(trials, len(edges) + 1)``, summed
    over trials)."""
    edges = _require_edges(edges)
    counts = []
    for name, value in (("null_counts", null_counts),
                        ("alternative_counts", alternative_counts)):
        value = require_array(name, value)
        value = value.reshape(-1, value.shape[-1]).sum(axis=0) if value.ndim > 1 else value
        if value.shape != (edges.size + 1,) or np.any(value < 0) or value.sum() == 0:
            raise ValueError(f"{name} must be non-negative counts over {edges.size + 1} "
                             f"cells, not all zero, got shape {value.shape}")
        counts.append(value.astype(np.int64))
    null, alternative = counts
    at_or_above = np.cumsum(null[::-1])[::-1][1:]  # samples >= edges[j]
    below = np.cumsum(alternative)[:-1]  # samples < edges[j]
    return TradeOff(edges, at_or_above, below, int(null.sum()), int(alternative.sum()))


def trade_off(null: ArrayLike, alternative: ArrayLike,
              thresholds: ArrayLike | None = None) -> TradeOff:
    """:class:`TradeOff` of samples of the statistic under ``D`` (``null``) and ``D'``
    (``alternative``), both 1-D, at ``thresholds`` (default: every distinct sample)."""
    null = require_array("null", null, ndim=1)
    alternative = require_array("alternative", alternative, ndim=1)
    if thresholds is None:
        thresholds = np.unique(np.concatenate([null, alternative]))
    return trade_off_from_histograms(histogram(null, thresholds),
                                     histogram(alternative, thresholds), thresholds)


def clopper_pearson(successes: ArrayLike, trials: int,
                    confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided Clopper-Pearson (1934) interval at ``confidence`` for a binomial proportion:
    ``Beta(a/2; k, n - k + 1)`` and ``Beta(1 - a/2; k + 1, n - k)`` quantiles,
    ``a = 1 - confidence`` (0 and 1 at the ends)."""
    trials = require_int("trials", trials)
    confidence = _require_confidence(confidence)
    k = require_array("successes", successes)
    if np.any(k < 0) or np.any(k > trials) or np.any(k != np.round(k)):
        raise ValueError(f"successes must be integers in [0, {trials}]")
    tail = (1 - confidence) / 2
    with np.errstate(invalid="ignore"):
        low = np.where(k > 0, stats.beta.ppf(tail, k, trials - k + 1), 0.0)
        high = np.where(k < trials, stats.beta.ppf(1 - tail, k + 1, trials - k), 1.0)
    return low, high


def epsilon_bounds(fpr: ArrayLike, fnr: ArrayLike, delta: float) -> tuple[np.ndarray,
                                                                         np.ndarray]:
    """The two lower bounds ``log((1 - delta - FPR) / FNR)`` and ``log((1 - delta - FNR) /
    FPR)`` on eps per test (Kairouz et al. 2015, Thm. 2.1); ``-inf`` where the numerator is
    not positive (no evidence), ``inf`` where only the denominator vanishes."""
    fpr = require_array("fpr", fpr)
    fnr = require_array("fnr", fnr)
    for name, rate in (("fpr", fpr), ("fnr", fnr)):
        if np.any((rate < 0) | (rate > 1)):
            raise ValueError(f"{name} must lie in [0, 1]")
    delta = require_nonnegative("delta", delta)
    if delta >= 1:
        raise ValueError(f"delta must be in [0, 1), got {delta}")

    def ratio(top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.where(top > 0, np.log(np.maximum(top, 1e-300)) - np.log(bottom),
                            -np.inf)

    return ratio(1 - delta - fpr, fnr), ratio(1 - delta - fnr, fpr)


@dataclass(frozen=True)
class Bound:
    """An audited lower bound ``eps`` at ``delta`` and ``confidence``, from the test at
    ``threshold`` in ``direction`` (0: the FNR term, 1: the FPR term), with the point
    estimates and Clopper-Pearson upper bounds of both rates there."""

    eps: float
    delta: float
    confidence: float
    threshold: float
    direction: int
    fpr: float
    fnr: float
    fpr_high: float
    fnr_high: float


def _gdp_mus(curve: TradeOff, confidence: float) -> np.ndarray:
    """``Phi^{-1}(1 - FPR_high) - Phi^{-1}(FNR_high)`` at every threshold of ``curve``."""
    fpr_high, fnr_high = _upper_rates(curve, confidence)
    with np.errstate(invalid="ignore"):
        mus = special.ndtri(1 - fpr_high) - special.ndtri(fnr_high)
    return np.where(np.isnan(mus), -np.inf, mus)


def gdp_mu_lower_bound(selection: TradeOff, evaluation: TradeOff,
                       confidence: float = 0.95) -> float:
    """A lower bound on ``mu``, at ``confidence``, for a pair *assumed* to have the
    mu-Gaussian-DP trade-off ``G_mu`` (Dong, Roth & Su 2022, Def. 2.7; the GDP fit of Nasr et
    al. 2023): every test of such a pair has ``FNR >= G_mu(FPR)``, i.e. ``mu >= Phi^{-1}(1 -
    FPR) - Phi^{-1}(FNR)``, and the rates' Clopper-Pearson upper ends (union bound) make the
    right-hand side smaller. The threshold with the largest value on ``selection`` is
    evaluated on ``evaluation``, as in :func:`held_out_lower_bound`. 0 where negative; no
    bound at all when the assumption fails."""
    confidence = _require_confidence(confidence)
    _require_same_thresholds(selection, evaluation)
    index = int(np.argmax(_gdp_mus(selection, confidence)))
    return float(max(_gdp_mus(evaluation, confidence)[index], 0.0))


def _upper_rates(curve: TradeOff, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """The Clopper-Pearson upper ends of FPR and FNR at every threshold of ``curve``."""
    return (clopper_pearson(curve.false_positives, curve.n_null, confidence)[1],
            clopper_pearson(curve.false_negatives, curve.n_alternative, confidence)[1])


def _require_same_thresholds(selection: TradeOff, evaluation: TradeOff) -> None:
    if not np.array_equal(selection.thresholds, evaluation.thresholds):
        raise ValueError("selection and evaluation must share their thresholds")


def _bounds(curve: TradeOff, delta: float, confidence: float) -> np.ndarray:
    """(2, thresholds) lower bounds of both directions from the rates' upper bounds."""
    return np.stack(epsilon_bounds(*_upper_rates(curve, confidence), delta))


def _bound_at(curve: TradeOff, delta: float, confidence: float, index: int,
              direction: int) -> Bound:
    fpr_high = clopper_pearson(curve.false_positives[index], curve.n_null, confidence)[1]
    fnr_high = clopper_pearson(curve.false_negatives[index], curve.n_alternative,
                               confidence)[1]
    eps = epsilon_bounds(fpr_high, fnr_high, delta)[direction]
    return Bound(float(max(eps, 0.0)), delta, confidence, float(curve.thresholds[index]),
                 direction, float(curve.fpr[index]), float(curve.fnr[index]),
                 float(fpr_high), float(fnr_high))


def _best(curve: TradeOff, delta: float, confidence: float) -> tuple[int, int]:
    """(direction, threshold index) of the largest bound on ``curve``."""
    direction, index = np.unravel_index(np.argmax(_bounds(curve, delta, confidence)),
                                        (2, curve.thresholds.size))
    return int(direction), int(index)


def epsilon_lower_bound(curve: TradeOff, delta: float, confidence: float = 0.95) -> Bound:
    """The largest bound over every threshold and both directions of ``curve`` (as Jagielski
    et al. 2020 and Nasr et al. 2021 report it). Chosen on the same runs it is evaluated
    on, it is valid at ``confidence`` only up to the choice; see
    :func:`held_out_lower_bound`. Negative bounds are reported as 0."""
    delta, confidence = _require_audit_delta(delta), _require_confidence(confidence)
    direction, index = _best(curve, delta, confidence)
    return _bound_at(curve, delta, confidence, index, direction)


def held_out_lower_bound(selection: TradeOff, evaluation: TradeOff, delta: float,
                         confidence: float = 0.95) -> Bound:
    """The threshold and direction with the largest bound on the ``selection`` runs,
    evaluated on the independent ``evaluation`` runs (same thresholds): a lower bound on eps
    that holds with probability >= ``confidence`` (the test is fixed before the evaluation
    runs are seen; union bound over the two rates)."""
    delta, confidence = _require_audit_delta(delta), _require_confidence(confidence)
    _require_same_thresholds(selection, evaluation)
    direction, index = _best(selection, delta, confidence)
    return _bound_at(evaluation, delta, confidence, index, direction)


def pilot_curves(null_counts: ArrayLike, alternative_counts: ArrayLike, edges: ArrayLike,
                 pilot_trials: int) -> tuple[TradeOff, TradeOff]:
    """The trade-off curves of the pilot (the first ``pilot_trials`` trials of per-trial
    histograms ``(trials, len(edges) + 1)``) and of the other trials, which evaluate."""
    null_counts = require_array("null_counts", null_counts, ndim=2)
    alternative_counts = require_array("alternative_counts", alternative_counts, ndim=2)
    pilot = require_int("pilot_trials", pilot_trials)
    if alternative_counts.shape[0] != null_counts.shape[0] or null_counts.shape[0] <= pilot:
        raise ValueError(f"null_counts and alternative_counts need the same number of trials, "
                         f"more than pilot_trials = {pilot}, got {null_counts.shape[0]} and "
                         f"{alternative_counts.shape[0]}")
    return tuple(trade_off_from_histograms(null_counts[part], alternative_counts[part], edges)
                 for part in (slice(None, pilot), slice(pilot, None)))


def pilot_lower_bound(null_counts: ArrayLike, alternative_counts: ArrayLike, edges: ArrayLike,
                      delta: float, pilot_trials: int, confidence: float = 0.95) -> Bound:
    """:func:`held_out_lower_bound` of the :func:`pilot_curves`: the pilot selects the test,
    the other trials evaluate it."""
    return held_out_lower_bound(*pilot_curves(null_counts, alternative_counts, edges,
                                              pilot_trials), delta, confidence)


def privacy_loss_delta(alternative_counts: ArrayLike, losses: ArrayLike,
                       eps: float) -> tuple[float, float]:
    """Estimate and standard error of ``delta(eps) = E_{D'}[(1 - e^{eps - L})_+]``, the
    hockey-stick divergence of ``D'`` from ``D`` (Balle & Wang 2018, Thm. 5), from the
    :func:`histogram` counts of a statistic under ``D'`` whose value is the privacy loss
    ``L = ln p_D'/p_D`` through the increasing map ``losses`` (the loss at each edge). Each
    cell takes the loss at its lower edge (minus infinity below the first), so the estimate
    errs low. A point estimate, not a bound: it shows where a claimed ``delta`` is exceeded
    by an amount too small for the runs to certify."""
    losses = require_array("losses", losses, ndim=1)
    counts = require_array("alternative_counts", alternative_counts)
    counts = counts.reshape(-1, counts.shape[-1]).sum(axis=0) if counts.ndim > 1 else counts
    if counts.shape != (losses.size + 1,) or counts.sum() == 0 or np.any(counts < 0):
        raise ValueError(f"alternative_counts must be counts over {losses.size + 1} cells")
    eps = require_nonnegative("eps", eps)
    values = np.concatenate([[0.0], np.maximum(-np.expm1(eps - losses), 0.0)])
    n = counts.sum()
    mean = float((counts * values).sum() / n)
    spread = float(np.sqrt(max((counts * values**2).sum() / n - mean**2, 0.0) / n))
    return mean, spread


def _require_audit_delta(delta: float) -> float:
    """delta in [0, 1): pure DP (delta = 0) is audited too."""
    return 0.0 if delta == 0 else require_delta(delta)


def gaussian_dp_trade_off(alpha: ArrayLike, mu: float) -> np.ndarray:
    """The trade-off curve of mu-Gaussian DP, ``Phi(Phi^{-1}(1 - alpha) - mu)`` (Dong, Roth &
    Su 2022, Def. 2.7): the smallest FNR at FPR ``alpha`` when telling N(0, 1) from
    N(mu, 1), i.e. the Gaussian mechanism with ``mu = sensitivity / sigma``."""
    alpha = _require_rates("alpha", alpha)
    mu = require_nonnegative("mu", mu)
    return special.ndtr(special.ndtri(1 - alpha) - mu)


def dp_trade_off(alpha: ArrayLike, eps: float, delta: float) -> np.ndarray:
    """The trade-off curve of (eps, delta)-DP, ``max(0, 1 - delta - e^eps alpha,
    e^{-eps} (1 - delta - alpha))`` (Dong, Roth & Su 2022, Prop. 2.5; Kairouz et al. 2015)."""
    alpha = _require_rates("alpha", alpha)
    eps = require_epsilon(eps)
    delta = _require_audit_delta(delta)
    with np.errstate(over="ignore", invalid="ignore"):  # e^eps = inf past eps = 709: its limit
        scaled = np.where(alpha > 0, np.exp(eps) * alpha, 0.0)
    return np.maximum.reduce([np.zeros_like(alpha), 1 - delta - scaled,
                              np.exp(-eps) * (1 - delta - alpha)]) + 0.0  # no -0.0


def _require_rates(name: str, value: ArrayLike) -> np.ndarray:
    value = require_array(name, value)
    if np.any((value < 0) | (value > 1)):
        raise ValueError(f"{name} must lie in [0, 1]")
    return value


def simultaneous_band(curve: TradeOff, confidence: float = 0.95
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(fpr_low, fpr_high, fnr_low, fnr_high)`` at every threshold of ``curve``: two-sided
    Clopper-Pearson intervals at level ``1 - (1 - confidence) / (2 K)`` for the ``2 K`` rates
    of its ``K`` thresholds, so that by a union bound all of them cover their rates at once
    with probability >= ``confidence`` (Bonferroni). A threshold whose corner
    ``(fpr_high, fnr_high)`` lies below an (eps, delta) curve shows, at that simultaneous
    confidence, a test no (eps, delta)-DP mechanism has."""
    confidence = _require_confidence(confidence)
    level = 1 - (1 - confidence) / (2 * curve.thresholds.size)
    fpr_low, fpr_high = clopper_pearson(curve.false_positives, curve.n_null, level)
    fnr_low, fnr_high = clopper_pearson(curve.false_negatives, curve.n_alternative, level)
    return fpr_low, fpr_high, fnr_low, fnr_high


def expected_count_bound(fpr: ArrayLike, fnr: ArrayLike, delta: float, n_null: int,
                         n_alternative: int, confidence: float = 0.95) -> float:
    """The bound :func:`epsilon_lower_bound` returns when the tests of a trade-off curve
    ``(fpr, fnr)`` (the exact rates of some pair) are each run ``n_null`` and
    ``n_alternative`` times and every count equals its expectation, rounded to the nearest
    integer; the threshold is taken as known (a pilot that finds it loses nothing). What an
    audit of that size can certify about that pair, at best typical luck."""
    fpr, fnr = _require_rates("fpr", fpr), _require_rates("fnr", fnr)
    n_null, n_alternative = require_int("n_null", n_null), require_int("n_alternative",
                                                                       n_alternative)
    delta, confidence = _require_audit_delta(delta), _require_confidence(confidence)
    fpr_high = clopper_pearson(np.rint(fpr * n_null), n_null, confidence)[1]
    fnr_high = clopper_pearson(np.rint(fnr * n_alternative), n_alternative, confidence)[1]
    return float(max(np.max(np.stack(epsilon_bounds(fpr_high, fnr_high, delta))), 0.0))


def _alpha_grid(n_null: int, n_alternative: int) -> np.ndarray:
    """False-positive rates from a tenth of one run to 1 (geometric)."""
    n = min(require_int("n_null", n_null), require_int("n_alternative", n_alternative))
    return np.concatenate([[0.0], np.geomspace(0.1 / n, 1.0, 4000)])


def dp_reachable_bound(eps: float, delta: float, n_null: int, n_alternative: int,
                       confidence: float = 0.95) -> float:
    """The best bound an audit of ``n_null`` and ``n_alternative`` runs can reach on a pair
    whose exact privacy is ``(eps, delta)``: :func:`expected_count_bound` on the trade-off
    curve of (eps, delta)-DP itself (:func:`dp_trade_off`), the most distinguishable pair
    with that eps (every (eps, delta)-DP pair has larger error rates at every threshold)."""
    alpha = _alpha_grid(n_null, n_alternative)
    return expected_count_bound(alpha, dp_trade_off(alpha, eps, delta), delta, n_null,
                                n_alternative, confidence)


def gdp_reachable_bound(mu: float, delta: float, n_null: int, n_alternative: int,
                        confidence: float = 0.95) -> float:
    """:func:`expected_count_bound` on the mu-Gaussian-DP curve (:func:`gaussian_dp_trade_off`):
    the best bound an audit of that size can reach on a Gaussian pair ``N(0, 1)`` against
    ``N(mu, 1)`` at ``delta``."""
    alpha = _alpha_grid(n_null, n_alternative)
    return expected_count_bound(alpha, gaussian_dp_trade_off(alpha, mu), delta, n_null,
                                n_alternative, confidence)
