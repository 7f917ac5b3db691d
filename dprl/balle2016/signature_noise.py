"""Noise scales of DP-LSW and DP-LSL at a given signature (Balle et al. 2016, Algorithms 1-2).

``sigma_X`` depends on the data set ``X`` only through its signature ``<X>(s) = |X_s|``
(Sec. 4.1), so it can be evaluated at any signature, e.g. the expected one ``m p_s`` of ``m``
i.i.d. trajectories, without sampling ``m`` trajectories. The maximum over ``k`` in
``psi = max_k e^{-k beta} phi_k`` is taken over blocks of ``k`` at once (the same ``phi_k``
functions), stopping once no later ``k`` can win: the same numbers as
:func:`~dprl.balle2016.lsw_smooth_bound` / :func:`~dprl.balle2016.lsl_smooth_bound`, fast
enough for ``m`` in the millions.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dprl.balle2016.inputs import regression_weights, signatures, state_weights
from dprl.balle2016.mechanisms import _lsl_scale, _lsw_scale, ridge_constant
from dprl.balle2016.smooth_sensitivity import _lsl_local, _lsw_local, smoothing_constants
from dprl.validation import require_int, require_positive

_BLOCK = 4096


def _blocked_max(local: Callable[[np.ndarray], np.ndarray], k_max: int, beta: float,
                 cap: float) -> float:
    """``max_{0 <= k <= k_max} e^{-k beta} local(k)``, ``local`` vectorised over ``k`` and
    bounded by ``cap`` for every ``k``: the blocks stop once ``e^{-k beta} cap`` cannot beat
    the best value found (exact, as every later term is below it)."""
    best = -np.inf
    for start in range(0, k_max + 1, _BLOCK):
        if np.exp(-start * beta) * cap < best:
            break
        k = np.arange(start, min(start + _BLOCK, k_max + 1))
        best = max(best, float((np.exp(-k * beta) * local(k)).max()))
    return best


def lsw_noise_scale_at(counts, features, weights, return_bound: float, eps: float,
                       delta: float) -> float:
    """``sigma = alpha F_max ||(Gamma^{1/2} Phi)^+||_2 sqrt(psi^w(v))`` of DP-LSW (Algorithm 1,
    Eq. 9) at one signature ``v = counts`` ``(N,)``; equals
    :func:`~dprl.balle2016.dp_lsw_noise_scale` for a data set with that signature."""
    features = np.asarray(features, dtype=float)
    weights = state_weights("weights", weights, features.shape[0])
    v = signatures(counts, weights.size)
    if v.ndim != 1:
        raise ValueError(f"counts must be one signature of shape (N,), got {v.shape}")
    scale = _lsw_scale(features, weights, return_bound, eps, delta)
    _, beta = smoothing_constants(eps, delta, features.shape[1])
    psi = _blocked_max(lambda k: _lsw_local(v, weights, k[:, None]), int(v.max()), beta,
                       float(weights.sum()))
    return float(scale * np.sqrt(psi))


def lsl_noise_scale_at(counts, m: int, features, rho, lam: float, return_bound: float,
                       eps: float, delta: float) -> float:
    """``sigma = 2 alpha F_max ||Phi||_2 sqrt(psi^lambda(v)) / (lambda - ||Phi||_2^2
    ||rho||_inf)`` of DP-LSL (Algorithm 2, Eq. 12, the ``min{v_s + k, m}`` form) at one
    signature ``v = counts`` of a data set of ``m`` trajectories; equals
    :func:`~dprl.balle2016.dp_lsl_noise_scale` for a data set with that signature."""
    features = np.asarray(features, dtype=float)
    rho, m = regression_weights(rho, features.shape[0]), require_int("m", m)
    v = signatures(counts, rho.size, m)
    if v.ndim != 1:
        raise ValueError(f"counts must be one signature of shape (N,), got {v.shape}")
    scale = _lsl_scale(features, rho, lam, require_positive("return_bound", return_bound),
                       eps, delta)
    c_lambda = ridge_constant(features, rho, lam)
    _, beta = smoothing_constants(eps, delta, features.shape[1])
    psi = _blocked_max(lambda k: _lsl_local(v, m, rho, c_lambda, k[:, None], "min"), m, beta,
                       float(_lsl_local(np.full_like(v, m), m, rho, c_lambda, 0, "min")))
    return float(scale * np.sqrt(psi))
