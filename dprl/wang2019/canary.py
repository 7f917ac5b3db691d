"""Canaries inside the premises of the proof of Theorem 5 of Wang & Hegde (2019): the largest
RKHS norm one update's ``Delta f = Q - Q'`` can have when ``|Delta f| <= v L`` and its slope is
at most L (:func:`admissible_norm_sup`), the sawtooths that approach it
(:func:`sawtooth_canary`), and the strongest white-box audit of Algorithm 1 such canaries allow
(:func:`theorem5_canary_limit`; chapter book/appendix/audits)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from dprl.mechanisms import gaussian_epsilon
from dprl.validation import (require_array, require_delta, require_int, require_positive,
                             require_probability)
from dprl.wang2019.calibration import AUTHORS_SETTING, Theorem5Calibration, lemma6_norm_bound


def admissible_norm_sup(sup_norm: float, lipschitz: float, beta: float,
                        length: float = 1.0) -> float:
    """The supremum of ||f||_H, in the RKHS of exp(-beta |x - y|) on [0, ``length``], over
    the f that obey the premises of the proof of Theorem 5 (Wang & Hegde 2019): ``|f| <=
    sup_norm`` (one update's ``||Q - Q'||_inf <= v L``) and ``|f'| <= lipschitz`` (L).

    The norm is ``(1/(2 beta)) int (f'^2 + beta^2 f^2) + (f(0)^2 + f(length)^2) / 2`` (Lemma 6;
    :func:`ou_rkhs_norm_squared`), so every admissible f has ``||f||_H^2 <= length (L^2 /
    (2 beta) + beta m^2 / 2) + m^2`` (``m`` = ``sup_norm``), the bound of Lemma 6 the proof
    uses (:func:`~dprl.wang2019.calibration.lemma6_norm_bound`). The bound is the supremum: :func:`sawtooth_canary` with teeth of width t is
    admissible, and (length a multiple of 2 t) its squared norm falls short of it by
    ``length beta (m L t - L^2 t^2 / 3) / 2``, which vanishes with t. No admissible f attains
    it (that needs ``|f'| = L`` and ``|f| = m`` almost everywhere). The function that rises at
    slope L to m and stays there reaches less: ``f'^2`` counts only while it rises. On [0, 1]
    with ``beta = 1/v``, ``m = v L`` it is Theorem 5's ``C = (v^2 + v) L^2``: the proof's
    sensitivity bound is tight under its premises."""
    return math.sqrt(lemma6_norm_bound(sup_norm, lipschitz, beta, length))


def sawtooth_canary(x: ArrayLike, sup_norm: float, lipschitz: float,
                    tooth: float) -> np.ndarray:
    """``m - L d(x)``, ``d(x)`` the distance from x to the nearest even multiple of ``tooth``:
    a sawtooth between ``m - L tooth`` and ``m`` = ``sup_norm`` with slopes ``+-L``, kinks at
    the multiples of ``tooth``. It obeys both premises of the proof of Theorem 5 (Wang &
    Hegde 2019; ``|f| <= m`` needs ``L tooth <= 2 m``), and its RKHS norm tends to
    :func:`admissible_norm_sup` as ``tooth`` -> 0 (the near-maximisers)."""
    x = require_array("x", x)
    m = require_positive("sup_norm", sup_norm)
    lipschitz = require_positive("lipschitz", lipschitz)
    tooth = require_positive("tooth", tooth)
    if lipschitz * tooth > 2 * m:
        raise ValueError(f"tooth must be at most 2 sup_norm / lipschitz = {2 * m / lipschitz} "
                         f"(else |f| exceeds sup_norm), got {tooth}")
    phase = np.mod(x, 2 * tooth)
    return m - lipschitz * np.minimum(phase, 2 * tooth - phase)


@dataclass(frozen=True)
class CanaryLimit:
    """The strongest white-box audit of Algorithm 1 (Wang & Hegde 2019) whose canary obeys
    the proof of Theorem 5's premises: ``norm``, the supremum of one update's ``||Delta
    f||_H`` (:func:`admissible_norm_sup`) against ``sqrt_constant`` = sqrt(C), the bound the
    proof calibrates with; ``mu``, the shift of the audit statistic, N(0, 1) against
    N(mu, 1); ``eps``, the exact eps of that Gaussian pair at the audit's delta."""

    sup_norm: float
    norm: float
    sqrt_constant: float
    mu: float
    eps: float


def theorem5_canary_limit(calibration: Theorem5Calibration, n_updates: int, delta: float, *,
                          lipschitz: float = AUTHORS_SETTING["lipschitz"],
                          length: float = 1.0) -> CanaryLimit:
    """How far a white-box audit of ``n_updates`` = T/B fresh-path releases of Algorithm 1
    (Wang & Hegde 2019, Thm. 5) can go with canaries inside the proof's premises: each
    update's ``Delta f_t`` on [0, ``length``] (the proof's state space is [0, 1]) with
    ``||Delta f_t||_inf <= v L`` and Lipschitz constant L, ``v = 1 / beta`` (the proof's
    kernel choice, :func:`theorem5_beta`). The log-likelihood ratio of the releases is
    N(0, 1) against N(mu, 1) with ``mu = sqrt(sum_t ||Delta f_t||_H^2) / sigma`` (the module
    docstring of :mod:`dprl.experiments.audits.wang2019`), so the supremum is ``mu =
    sqrt(T/B) norm / sigma``, norm from :func:`admissible_norm_sup`, and its exact eps at
    ``delta`` (:func:`dprl.mechanisms.gaussian_epsilon`) bounds every such audit. A supremum:
    each canary reaches less, :func:`sawtooth_canary` any fraction below 1."""
    if not isinstance(calibration, Theorem5Calibration):
        raise ValueError(f"calibration must be a Theorem5Calibration, got "
                         f"{type(calibration).__name__}")
    n_updates = require_int("n_updates", n_updates)
    delta = require_delta(delta)
    lipschitz = require_positive("lipschitz", lipschitz)
    length = require_probability("length", length, open_low=True)
    sup_norm = lipschitz / calibration.beta
    norm = admissible_norm_sup(sup_norm, lipschitz, calibration.beta, length)
    mu = math.sqrt(n_updates) * norm / calibration.sigma
    return CanaryLimit(sup_norm, norm, math.sqrt(calibration.constant), mu,
                       gaussian_epsilon(delta, mu, 1.0))
