"""DP-LSW and DP-LSL with two choices of the authors' public experiment code (Balle et al.
2016, Sec. 6), NOT the paper's formulas; for comparison only.

The code (``MCPE.DPLSW`` / ``MCPE.DPLSL`` of the authors' repository, 2016 version) differs from
Algorithms 1 and 2 in two ways that these functions reproduce:

- **Gamma overwritten by Gamma^{1/2}.** DP-LSW takes the square root of ``Gamma`` in place
  (an aliasing bug) before computing the smooth bound, so ``psi_X^w`` (Eq. 9) is evaluated
  with weights ``w_s^{1/2}`` instead of ``w_s``.
- **Frobenius norms.** Every matrix norm is ``numpy.linalg.norm``'s default, the Frobenius
  norm: ``||(Gamma^{1/2} Phi)^+||_F`` in DP-LSW's scale, ``||Phi||_F`` in DP-LSL's scale, in
  ``c_lambda`` and in the ridge threshold ``||Phi||^2 ||rho||_inf``.

Both choices only raise the noise (``w_s^{1/2} >= w_s`` for ``w_s <= 1``, and the Frobenius
norm bounds the spectral one), so the releases stay ``(eps, delta)``-DP. The code's other
departures (its LSW weights ``rho_s |X_s| / m``, its sum over all states but the last in
``psi^lambda``) are not reproduced.
"""

from __future__ import annotations

import numpy as np

from dprl.balle2016.estimators import lsl, lsw
from dprl.balle2016.inputs import (features_matrix, regression_weights, ridge, state_weights,
                                   weighted_design)
from dprl.balle2016.mechanisms import Generators, gaussian_perturbation
from dprl.balle2016.smooth_sensitivity import (lsl_smooth_bound, lsw_smooth_bound,
                                               smoothing_constants)
from dprl.balle2016.statistics import Statistics, require_summary


def authors_lsw_noise_scale(data: Statistics, features, weights, eps: float,
                            delta: float) -> np.ndarray:
    """``alpha F_max ||(Gamma^{1/2} Phi)^+||_F sqrt(psi_X^{w^{1/2}})``: DP-LSW's noise as the
    authors' code computes it (module docstring), ``(*datasets,)``."""
    data = require_summary(data)
    features = features_matrix(features, data.n_states)
    weights = state_weights("weights", weights, features.shape[0])
    design = weighted_design(features, weights)
    alpha, beta = smoothing_constants(eps, delta, features.shape[1])
    pinv_norm = np.linalg.norm(np.linalg.pinv(design), "fro")
    psi = lsw_smooth_bound(data.counts, np.sqrt(weights), beta)
    return alpha * data.return_bound * pinv_norm * np.sqrt(psi)


def authors_ridge_threshold(features, rho) -> float:
    """``||Phi||_F^2 ||rho||_inf``: the smallest ridge the authors' code's DP-LSL accepts."""
    features = np.asarray(features, dtype=float)
    rho = regression_weights(rho, features.shape[0])
    return float(np.linalg.norm(features, "fro") ** 2 * rho.max())


def authors_lsl_noise_scale(data: Statistics, features, rho, lam: float, eps: float,
                            delta: float) -> np.ndarray:
    """``2 alpha F_max ||Phi||_F sqrt(psi_X^lambda) / (lambda - ||Phi||_F^2 ||rho||_inf)``
    with ``c_lambda = ||Phi||_F ||rho||_inf / sqrt(2 lambda)`` in ``psi_X^lambda`` (Eq. 12):
    DP-LSL's noise as the authors' code computes it, ``(*datasets,)``."""
    data = require_summary(data)
    features = features_matrix(features, data.n_states)
    rho = regression_weights(rho, features.shape[0])
    lam, threshold = ridge(lam), authors_ridge_threshold(features, rho)
    if lam <= threshold:
        raise ValueError(f"lam must exceed ||Phi||_F^2 ||rho||_inf = {threshold}, got {lam}")
    alpha, beta = smoothing_constants(eps, delta, features.shape[1])
    norm = np.linalg.norm(features, "fro")
    c_lambda = norm * rho.max() / np.sqrt(2 * lam)
    psi = lsl_smooth_bound(data.counts, data.n_trajectories, rho, c_lambda, beta)
    return 2 * alpha * data.return_bound * norm / (lam - threshold) * np.sqrt(psi)


def authors_dp_lsw(data: Statistics, features, weights, eps: float, delta: float,
                   rng: Generators) -> np.ndarray:
    """LSW (Eq. 8) plus ``N(0, sigma^2 I)`` with :func:`authors_lsw_noise_scale`."""
    sigma = authors_lsw_noise_scale(data, features, weights, eps, delta)
    return gaussian_perturbation(lsw(data, features, weights), sigma, rng)


def authors_dp_lsl(data: Statistics, features, rho, lam: float, eps: float, delta: float,
                   rng: Generators) -> np.ndarray:
    """LSL (Eq. 11) plus ``N(0, sigma^2 I)`` with :func:`authors_lsl_noise_scale`."""
    sigma = authors_lsl_noise_scale(data, features, rho, lam, eps, delta)
    return gaussian_perturbation(lsl(data, features, rho, lam), sigma, rng)
