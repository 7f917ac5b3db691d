"""Privacy auditing with one training run (Steinke, Nasr & Jagielski 2023, NeurIPS).

``m`` canaries are each included independently with probability 1/2 in one run of a
mechanism; an auditor guesses "included" (+1) or "excluded" (-1) for ``r`` of them and
abstains on the rest; ``v`` guesses are correct. Their main theorem (its p-value is what
their App. D's code computes; the book has no copy of the paper to confirm its number): if
the mechanism is ``(eps, delta)``-DP, then for every ``v``

``P[W >= v] <= P[W' >= v] + 2 m delta max_{1 <= i <= v} P[v > W' >= v - i] / i``,

``W'`` ~ Binomial(r, e^eps / (1 + e^eps)): up to the delta term, the number of correct
guesses ``W`` is stochastically dominated by that of ``r`` independent eps-DP randomized
responses. Its right-hand side is a p-value for the hypothesis "``(eps, delta)``-DP"
(:func:`p_value`, App. D's ``p_value_DP_audit``); the largest eps it rejects at level
``1 - confidence`` is the audit's lower bound (:func:`epsilon_lower_bound`, App. D's
``get_eps_audit``: a bracket, then bisection, returning the low end).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import binom

from dprl.validation import require_array, require_int, require_nonnegative, require_probability

#: Bisection steps of :func:`epsilon_lower_bound` after bracketing (App. D: 30).
BISECTION_STEPS = 40
#: The most correct guesses :func:`p_value` takes where delta > 0: its worst case over the
#: ``v`` tails needs ``v`` floats (80 MB here); audits of more canaries split them into runs
#: of at most this.
MAX_CORRECT = 10**7
#: The same for :func:`epsilon_lower_bound`, which evaluates :func:`p_value` some 50 times,
#: about 0.15 s each at 10^6 (1.6 s at :data:`MAX_CORRECT`).
MAX_BOUND_CORRECT = 10**6


def correct_guess_probability(eps: float) -> float:
    """``e^eps / (1 + e^eps)``: the accuracy of eps-DP randomized response, the best an
    eps-DP mechanism allows a guess of one canary's bit."""
    return 1.0 / (1.0 + math.exp(-require_nonnegative("eps", eps)))


def _counts(m: int, r: int, v: int) -> tuple[int, int, int]:
    """``(m, r, v)`` validated: ``0 <= v <= r <= m``, ``m >= 1``."""
    m, r, v = require_int("m", m), require_int("r", r, minimum=0), require_int("v", v, minimum=0)
    if r > m:
        raise ValueError(f"r must be <= m = {m}, got {r}")
    if v > r:
        raise ValueError(f"v must be <= r = {r}, got {v}")
    return m, r, v


def p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """The main theorem's bound on ``P[W >= v]`` for ``m`` canaries, ``r`` guesses and ``v``
    correct under ``(eps, delta)``-DP (module docstring), capped at 1."""
    m, r, v = _counts(m, r, v)
    q = correct_guess_probability(eps)
    delta = require_probability("delta", delta, open_high=True)
    if delta > 0 and v > MAX_CORRECT:
        raise ValueError(f"v must be <= MAX_CORRECT = {MAX_CORRECT} (the bound needs v floats "
                         f"where delta > 0), got {v}: audit fewer canaries per run")
    tail = float(binom.sf(v - 1, r, q))
    if delta == 0 or v == 0:
        return min(tail, 1.0)
    below = np.cumsum(binom.pmf(np.arange(v - 1, -1, -1), r, q))   # P[v > W' >= v - i]
    worst = float(np.max(below / np.arange(1, v + 1)))
    return min(tail + 2 * m * delta * worst, 1.0)


def epsilon_lower_bound(m: int, r: int, v: int, delta: float,
                        confidence: float = 0.95) -> float:
    """The largest eps (to :data:`BISECTION_STEPS` halvings of a unit bracket) whose
    :func:`p_value` stays below ``1 - confidence``: with that confidence the mechanism is
    not ``(eps, delta)``-DP for any smaller eps. 0 where no eps is rejected. Where
    ``delta > 0``, at most :data:`MAX_BOUND_CORRECT` correct guesses (about 10 s)."""
    m, r, v = _counts(m, r, v)
    delta = require_probability("delta", delta, open_high=True)
    if delta > 0 and v > MAX_BOUND_CORRECT:
        raise ValueError(f"v must be <= MAX_BOUND_CORRECT = {MAX_BOUND_CORRECT} where delta > 0 "
                         f"(the bisection takes ~50 p-values of v floats), got {v}: audit fewer "
                         f"canaries per run, or test chosen eps with p_value")
    level = 1 - require_probability("confidence", confidence, open_low=True, open_high=True)

    def rejected(eps: float) -> bool:
        return p_value(m, r, v, eps, delta) < level

    low, high = 0.0, 1.0
    if not rejected(low):
        return 0.0
    while rejected(high):
        low, high = high, high + 1.0
    for _ in range(BISECTION_STEPS):
        middle = (low + high) / 2
        low, high = (middle, high) if rejected(middle) else (low, middle)
    return low


def guesses(scores: np.ndarray, k_plus: int, k_minus: int) -> np.ndarray:
    """The auditor's guesses ``(m,)`` int8: +1 ("included") for the ``k_plus`` highest
    ``scores``, -1 for the ``k_minus`` lowest, 0 (abstain) otherwise; ties broken by index
    (a stable sort)."""
    scores = require_array("scores", scores, ndim=1)
    k_plus, k_minus = require_int("k_plus", k_plus, 0), require_int("k_minus", k_minus, 0)
    if k_plus + k_minus > len(scores):
        raise ValueError(f"k_plus + k_minus must be <= the {len(scores)} scores, got "
                         f"{k_plus + k_minus}")
    order = np.argsort(scores, kind="stable")
    out = np.zeros(len(scores), dtype=np.int8)
    out[order[:k_minus]] = -1
    out[order[len(scores) - k_plus:]] = 1
    return out


def correct_guesses(guessed: np.ndarray, included: np.ndarray) -> int:
    """The number of correct guesses: +1 on an included canary, -1 on an excluded one."""
    if not np.isin(np.asarray(guessed), (-1, 0, 1)).all():  # before any cast (257 is not 1)
        raise ValueError("guessed must hold only -1, 0 and 1")
    guessed = require_array("guessed", guessed, ndim=1, dtype=np.int8)
    included = np.asarray(included)
    if included.dtype != np.bool_ or included.shape != guessed.shape:
        raise ValueError(f"included must be a bool array of shape {guessed.shape}")
    return int(np.sum(np.where(included, guessed == 1, guessed == -1)))
