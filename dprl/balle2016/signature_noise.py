"""Noise scales of DP-LSW and DP-LSL at given signatures (Balle et al. 2016, Algorithms 1-2).

``sigma_X`` depends on the data set ``X`` only through ``m`` and its signature
``<X>(s) = |X_s|`` (Sec. 4.1), so it can be evaluated at any signature, e.g. the expected one
``m p_s`` of ``m`` i.i.d. trajectories, without sampling a data set: these evaluate
:func:`~dprl.balle2016.dp_lsw_noise_scale` / :func:`~dprl.balle2016.dp_lsl_noise_scale` on a
:class:`~dprl.balle2016.statistics.FirstVisitSummary` with that signature.
"""

from __future__ import annotations

import numpy as np

from dprl.balle2016.inputs import signatures
from dprl.balle2016.mechanisms import dp_lsl_noise_scale, dp_lsw_noise_scale
from dprl.balle2016.smooth_sensitivity import Constants
from dprl.balle2016.statistics import FirstVisitSummary


def _summary(counts, m: int | None, return_bound: float) -> FirstVisitSummary:
    """A summary with signature ``counts`` and zero returns (which ``sigma_X`` ignores)."""
    v = signatures(counts, None, m)
    return FirstVisitSummary(v, np.zeros(v.shape), int(v.max()) if m is None else m,
                             return_bound)


def lsw_noise_scale_at(counts, features, weights, return_bound: float, eps: float,
                       delta: float, constants: Constants | None = None) -> np.ndarray | float:
    """``sigma = alpha F_max ||(Gamma^{1/2} Phi)^+||_2 sqrt(psi^w(v))`` of DP-LSW (Algorithm 1,
    Eq. 9) at signatures ``v = counts`` ``(..., N)``; a float for one signature."""
    sigma = dp_lsw_noise_scale(_summary(counts, None, return_bound), features, weights, eps,
                               delta, constants)
    return sigma if sigma.ndim else float(sigma)


def lsl_noise_scale_at(counts, m: int, features, rho, lam: float, return_bound: float,
                       eps: float, delta: float,
                       constants: Constants | None = None) -> np.ndarray | float:
    """``sigma = 2 alpha F_max ||Phi||_2 sqrt(psi^lambda(v)) / (lambda - ||Phi||_2^2
    ||rho||_inf)`` of DP-LSL (Algorithm 2, Eq. 12, the ``min{v_s + k, m}`` form) at signatures
    ``v = counts`` ``(..., N)`` of data sets of ``m`` trajectories; a float for one signature."""
    sigma = dp_lsl_noise_scale(_summary(counts, m, return_bound), features, rho, lam, eps,
                               delta, constants=constants)
    return sigma if sigma.ndim else float(sigma)
