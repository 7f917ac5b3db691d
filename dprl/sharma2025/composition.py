"""Theorem 5.5 of Sharma et al. (2025, App. A): the composition of the release's ``T`` rounds.
Each round is ``(eps1 / T, delta1 / T)``-DP (:func:`per_round_guarantee`); the paper composes
them by Dwork & Roth (2014) Cor. 3.21, checked here beside Thm. 3.20 and the optimal
composition of Kairouz, Oh & Viswanath (2015) (:func:`kov_delta`, :func:`kov_epsilon`,
:func:`composition_totals`), and App. B.3's table of parameters is recomputed from them
(:func:`appendix_b3_table`). The single rounds are analysed in :mod:`dprl.sharma2025.privacy`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, special

from dprl.accounting import advanced_composition
from dprl.accounting.logspace import log_abs_binom
from dprl.sharma2025.release import (APPENDIX_B3_T, N_ACTIONS, appendix_b3_parameters,
                                     appendix_b3_split, release_parameters)
from dprl.validation import (require_array, require_delta, require_epsilon, require_int,
                             require_probability)


def per_round_guarantee(eps1: float, delta1: float, n_queries: int) -> tuple[float, float]:
    """Theorem 5.3's per-round guarantee ``(2 eps', delta1 / (2T))``, ``2 eps' = eps1 /
    sqrt(8 T log(2/delta1))`` (Theorem 5.5's proof), for Alg. 2's ``eps'``."""
    params = release_parameters(eps1, delta1, n_queries, 1, 0.5)
    return 2 * params.eps_prime, params.delta1 / (2 * params.n_queries)


def kov_delta(eps_total: ArrayLike, eps0: float, delta0: float, k: int) -> np.ndarray:
    """Exact ``delta(eps_total)`` of the ``k``-fold adaptive composition of
    ``(eps0, delta0)``-DP mechanisms (Kairouz, Oh & Viswanath 2015, Thm. 3.3): the
    hockey-stick divergence of the ``k``-fold product of the dominating pair,
    ``1 - (1 - delta0)^k + (1 - delta0)^k sum_l C(k, l) [e^{(k-l) eps0} - e^{eps_total + l
    eps0}]_+ / (1 + e^{eps0})^k`` (at ``eps_total = (k - 2i) eps0`` this is KOV's
    ``1 - (1-delta0)^k (1 - delta_i)``); log-space binomials."""
    eps_total = require_array("eps_total", eps_total)
    if np.any(eps_total < 0):
        raise ValueError("eps_total must be >= 0")
    eps0, k = require_epsilon(eps0, "eps0"), require_int("k", k)
    delta0 = require_probability("delta0", delta0, open_high=True)
    l = np.arange(k + 1)
    gap = (k - 2 * l) * eps0 - eps_total[..., None]
    log_terms = np.where(gap > 0, log_abs_binom(k, l) + (k - l) * eps0
                         - k * np.logaddexp(0.0, eps0)
                         + np.log(-np.expm1(-np.maximum(gap, 1e-300))), -np.inf)
    pure = np.exp(special.logsumexp(log_terms, axis=-1))
    kept = (1 - delta0) ** k
    return 1 - kept + kept * pure


def kov_epsilon(delta_total: float, eps0: float, delta0: float, k: int) -> float:
    """Smallest ``eps_total >= 0`` with :func:`kov_delta` ``<= delta_total``: the optimal
    composition of Kairouz, Oh & Viswanath (2015, Thm. 3.3) read at ``delta_total``
    (``inf`` if ``1 - (1 - delta0)^k > delta_total``)."""
    delta_total = require_delta(delta_total, "delta_total")

    def excess(eps: float) -> float:
        return float(kov_delta(eps, eps0, delta0, k)) - delta_total

    if excess(k * eps0) > 0:
        return math.inf
    if excess(0.0) <= 0:
        return 0.0
    return float(optimize.brentq(excess, 0.0, k * eps0, xtol=1e-14, rtol=1e-12))


def kov_round_epsilon(eps_total: float, delta_total: float, delta0: float, k: int) -> float:
    """Largest per-round ``eps0`` whose ``k``-fold optimal composition (Kairouz, Oh &
    Viswanath 2015) with per-round ``delta0`` stays within ``(eps_total, delta_total)``:
    how large Theorem 5.3's ``2 eps'`` could be for Theorem 5.5's target."""
    eps_total = require_epsilon(eps_total, "eps_total")
    k = require_int("k", k)
    if kov_epsilon(delta_total, eps_total / k, delta0, k) > eps_total:
        raise ValueError("no eps0 > 0 reaches the target: k delta0 exhausts delta_total")
    return float(optimize.brentq(
        lambda e: kov_epsilon(delta_total, e, delta0, k) - eps_total, eps_total / k, eps_total,
        xtol=1e-13, rtol=1e-12))


@dataclass(frozen=True)
class CompositionTotals:
    """Theorem 5.5's T-fold composition of rounds ``(eps0, delta0) = (2 eps', delta1/(2T))``
    at total ``delta1``: the paper's claim ``eps1`` by Dwork & Roth Cor. 3.21 (which requires
    ``eps1 < 1``: ``corollary_applies``), Dwork & Roth Thm. 3.20 (with ``delta_hat =
    delta1 - T delta0 = delta1 / 2``, the only split reaching total ``delta1``), and the
    optimal composition of Kairouz, Oh & Viswanath (2015)."""

    eps1: float
    delta1: float
    n_queries: int
    eps0: float
    delta0: float
    theorem320: float
    kov: float

    @property
    def corollary_applies(self) -> bool:
        """Cor. 3.21's hypothesis ``0 < eps < 1`` for the target ``eps = eps1``."""
        return self.eps1 < 1

    @property
    def achieved(self) -> dict[str, bool]:
        """Whether each bound gives at most the paper's ``eps1`` at ``delta1``."""
        return {"corollary321": self.corollary_applies, "theorem320": self.theorem320 <= self.eps1,
                "kov": self.kov <= self.eps1}


def composition_totals(eps1: float, delta1: float, n_queries: int) -> CompositionTotals:
    """Theorem 5.5 (Sharma et al. 2025) recomputed: the total eps of ``T`` rounds of
    Theorem 5.3's ``(2 eps', delta1/(2T))`` at total ``delta1`` under Dwork & Roth (2014)
    Thm. 3.20 (``eps = sqrt(2T ln(1/delta_hat)) eps0 + T eps0 (e^eps0 - 1)``, ``delta_hat =
    delta1/2``) and under Kairouz, Oh & Viswanath (2015)."""
    eps0, delta0 = per_round_guarantee(eps1, delta1, n_queries)
    delta_hat = delta1 - n_queries * delta0
    theorem320, _ = advanced_composition(eps0, delta0, n_queries, delta_hat)
    return CompositionTotals(eps1=eps1, delta1=delta1, n_queries=n_queries, eps0=eps0,
                             delta0=delta0, theorem320=theorem320,
                             kov=kov_epsilon(delta1, eps0, delta0, n_queries))


def appendix_b3_table(m: int = 3000, hiv_split: str = "appendix_b3") -> list[dict]:
    """Per App. B.3 release (environment, total eps with ``T``; ``delta = 1/m``): Alg. 2's
    parameters (``sharma2025-details.md``'s table), the longest unanimous prefix of ``m``
    experts, and the composition totals of :func:`composition_totals`."""
    rows = []
    for env, by_eps in APPENDIX_B3_T.items():
        for eps in by_eps:
            params = appendix_b3_parameters(env, eps, m, hiv_split)
            split = appendix_b3_split(env, eps, m, hiv_split)
            rows.append({"env": env, "eps": eps, "split": split, "params": params,
                         "longest": params.longest_unanimous_prefix(m, N_ACTIONS[env]),
                         "composition": composition_totals(split.eps1, split.delta1,
                                                           split.n_queries)})
    return rows
