"""Smooth upper bounds of the local sensitivities of LSW and LSL (Balle et al. 2016, Sec. 4).

Neighbouring data sets hold ``m`` trajectories and differ in one (replace-one), so their
signatures ``v = <X>`` (``v_s = |X_s|``) satisfy ``||v - v'||_inf <= 1`` (Sec. 4.1). A
function ``psi`` of the signature is a beta-smooth upper bound of ``phi`` if ``psi >= phi``
and ``psi(v) <= e^beta psi(v')`` for all such neighbours; Lemma 4 (Nissim et al. 2007) gives
the smallest, ``sup_k e^{-k beta} phi_k(v)`` with ``phi_k(v) = max_{||v'-v||_inf <= k} phi(v')``.
Signatures are integer arrays ``(..., N)``; results have their leading shape.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dprl.balle2016.inputs import regression_weights, signatures, state_weights
from dprl.validation import (require_choice, require_delta, require_epsilon, require_int,
                             require_positive)

LEMMA9_VARIANTS = ("min", "max")


def smoothing_constants(eps: float, delta: float, d: int) -> tuple[float, float]:
    """``alpha = 5 sqrt(2 ln(2/delta)) / eps`` and ``beta = eps / (4 (d + ln(2/delta)))`` of
    Lemma 1 (Nissim et al. 2011), as set in Algorithms 1 and 2."""
    eps, delta, d = require_epsilon(eps), require_delta(delta), require_int("d", d)
    log_term = np.log(2 / delta)
    return float(5 * np.sqrt(2 * log_term) / eps), float(eps / (4 * (d + log_term)))


Constants = tuple[float, float]


def mechanism_constants(eps: float, delta: float, d: int,
                        constants: Constants | None = None) -> Constants:
    """``(alpha, beta)``: Lemma 1's (:func:`smoothing_constants`) when ``constants`` is None,
    else ``constants`` checked to be two positive numbers. Other constants keep the release
    ``(eps, delta)``-DP only if they make the smoothed Gaussian mechanism so (Lemma 14's,
    :func:`~dprl.balle2016.elementary.lemma14_constants`, or an ``alpha`` from
    :func:`~dprl.balle2016.calibration.smooth_gaussian_alpha`)."""
    if constants is None:
        return smoothing_constants(eps, delta, d)
    if not isinstance(constants, tuple) or len(constants) != 2:
        raise ValueError(f"constants must be a pair (alpha, beta), got {constants!r}")
    return (require_positive("alpha", constants[0]), require_positive("beta", constants[1]))


def _variant(lemma9_variant: str) -> str:
    return require_choice("lemma9_variant", lemma9_variant, LEMMA9_VARIANTS)


def _lsw_local(v: np.ndarray, weights: np.ndarray, k: int | np.ndarray) -> np.ndarray:
    """phi_k^w at signatures ``v``; ``k`` may be an array broadcasting against ``v``."""
    return (weights / np.maximum(v - k, 1).astype(float) ** 2).sum(axis=-1)


def _lsl_local(v: np.ndarray, m: int, rho: np.ndarray, c_lambda: float, k: int | np.ndarray,
               variant: str) -> np.ndarray:
    """phi_k^lambda at signatures ``v``; ``k`` may be an array broadcasting against ``v``."""
    cap = np.minimum if variant == "min" else np.maximum
    spread = (rho * cap(v + k, m)).sum(axis=-1)
    return (c_lambda * np.sqrt(spread) + np.sqrt((rho**2).sum())) ** 2


def lsw_local_bound(counts, weights, k: int = 0) -> np.ndarray:
    """``phi_k^w(v) = sum_s w_s / max{v_s - k, 1}^2`` (Eq. 9, Lemma 5); ``k = 0`` is Eq. 15,
    the bound of Cor. 3 on the squared change of ``F_X`` in ``||.||_{2,Gamma}``, over
    ``F_max^2``, against any neighbour."""
    weights = state_weights("weights", weights)
    return _lsw_local(signatures(counts, weights.size), weights, require_int("k", k, minimum=0))


def lsl_local_bound(counts, m: int, rho, c_lambda: float, k: int = 0,
                    lemma9_variant: str = "min") -> np.ndarray:
    """``phi_k^lambda(v) = (c_lambda sqrt(sum_s rho_s min{v_s + k, m}) + ||rho||_2)^2``
    (Eq. 12 and Algorithm 2; Cor. 8 at ``k = 0``). ``lemma9_variant="max"`` uses
    ``max{v_s + k, m}`` as printed in Lemma 9 / Lemma 21, kept for comparison only: it is not
    the maximum over the signatures a data set of ``m`` trajectories can have."""
    rho, m = regression_weights(rho), require_int("m", m)
    return _lsl_local(signatures(counts, rho.size, m), m, rho,
                      require_positive("c_lambda", c_lambda), require_int("k", k, minimum=0),
                      _variant(lemma9_variant))


_BLOCK = 1024  # values of k evaluated at once
_ROWS = 64  # signatures evaluated at once (memory _ROWS * _BLOCK * N floats)


def _smooth_bound(local_bound: Callable[[np.ndarray, np.ndarray], np.ndarray],
                  v: np.ndarray, k_max: np.ndarray, beta: float) -> np.ndarray:
    """``max_{0 <= k <= k_max} e^{-k beta} phi_k(v)`` per signature ``v`` ``(..., N)``.

    ``local_bound(v, k)`` maps signatures ``(rows, 1, N)`` and ``k`` ``(1, B, 1)`` to
    ``phi_k`` ``(rows, B)`` and must be nondecreasing in ``k`` (both ``phi^w_k`` and
    ``phi^lambda_k`` are). ``k`` runs in blocks; a signature stops once
    ``e^{-k beta} phi_{k_max}`` cannot beat its best value, which is exact because every later
    term is below it. Cost ``O(min(k_max, ln(phi_{k_max}/phi_0)/beta) N)`` per signature, so
    ``m`` in the billions is as fast as ``m = 100``; a signature's value does not depend on
    the others in the batch.
    """
    rows = v.reshape(-1, 1, v.shape[-1])
    k_max = np.broadcast_to(k_max, v.shape[:-1]).reshape(-1)
    cap = local_bound(rows, k_max[:, None, None])[:, 0]
    best = np.full(k_max.shape, -np.inf)
    start = 0
    while True:
        active = np.flatnonzero((start <= k_max) & (np.exp(-start * beta) * cap > best))
        if active.size == 0:
            return best.reshape(v.shape[:-1])
        k = np.arange(start, start + _BLOCK)
        decay = np.exp(-k * beta)
        for chunk in np.array_split(active, -(-active.size // _ROWS)):
            values = decay * local_bound(rows[chunk], k[None, :, None])
            values = np.where(k <= k_max[chunk, None], values, -np.inf)
            best[chunk] = np.maximum(best[chunk], values.max(axis=-1))
        start += _BLOCK


def lsw_smooth_bound(counts, weights, beta: float) -> np.ndarray:
    """``psi_X^w = max_{0 <= k <= K_X} e^{-k beta} phi_k^w``, ``K_X = max_s v_s``
    (Algorithm 1, Eq. 9): by Lemmas 4 and 5 the smallest beta-smooth upper bound of
    ``phi^w`` (``phi_k^w`` is constant from ``k = K_X - 1`` on)."""
    weights, beta = state_weights("weights", weights), require_positive("beta", beta)
    v = signatures(counts, weights.size)
    return _smooth_bound(lambda rows, k: _lsw_local(rows, weights, k), v, v.max(axis=-1), beta)


def lsl_smooth_bound(counts, m: int, rho, c_lambda: float, beta: float,
                     lemma9_variant: str = "min") -> np.ndarray:
    """``psi_X^lambda = max_{0 <= k <= m} e^{-k beta} phi_k^lambda`` (Algorithm 2, Eq. 12).
    With ``"min"`` it is the smallest beta-smooth upper bound of ``phi^lambda`` (Lemma 4;
    ``phi_k`` is constant from ``k = m - min_s v_s`` on, so stopping at ``m`` loses nothing).
    With ``"max"`` (Lemma 9 as printed) ``phi_k`` keeps growing in ``k``, and cutting the
    maximum at ``m`` breaks beta-smoothness (see the tests)."""
    rho, m = regression_weights(rho), require_int("m", m)
    v = signatures(counts, rho.size, m)
    c_lambda, beta = require_positive("c_lambda", c_lambda), require_positive("beta", beta)
    variant = _variant(lemma9_variant)
    return _smooth_bound(lambda rows, k: _lsl_local(rows, m, rho, c_lambda, k, variant), v,
                         np.array(m), beta)
