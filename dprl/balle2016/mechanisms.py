"""DP-LSW and DP-LSL (Balle et al. 2016, Algorithms 1 and 2) and, for comparison, the same
estimators with noise calibrated to a global (worst-case) sensitivity bound (Sec. 4.1 remark).

Both algorithms are ``(eps, delta)``-DP (Theorems 6 and 10) for neighbouring data sets of
``m`` trajectories that differ in one trajectory (replace-one), with every first-visit return
in ``[0, F_max]``, ``F_max`` public (``R_max / (1 - gamma)`` or smaller, Sec. 3.1).
Norms of matrices are spectral norms (``||Phi||_2``), the operator norms of the proofs.
Noise scales are deterministic and separate from the (random) releases.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dprl.balle2016.estimators import lsl, lsw
from dprl.balle2016.inputs import (features_matrix, regression_weights, ridge, state_weights,
                                   weighted_design)
from dprl.balle2016.smooth_sensitivity import (Constants, lsl_local_bound, lsl_smooth_bound,
                                               lsw_local_bound, lsw_smooth_bound,
                                               mechanism_constants)
from dprl.balle2016.statistics import FirstVisitSummary, Statistics, require_summary
from dprl.validation import require_array, require_int, require_positive


def ridge_threshold(features, rho) -> float:
    """``||Phi||_2^2 ||rho||_inf``: DP-LSL needs ``lambda`` above it (Cor. 8, Algorithm 2)."""
    features = require_array("features", features, ndim=2)
    rho = regression_weights(rho, features.shape[0])
    return float(np.linalg.norm(features, 2) ** 2 * rho.max())


def _ridge_margin(features, rho, lam: float) -> float:
    """``lambda - ||Phi||_2^2 ||rho||_inf``, refusing it unless > 0: the privacy analysis of
    DP-LSL (Lemma 7, Cor. 8) needs ``lambda > ||Phi^T Delta Gamma_rho Phi||``, which this
    bounds for every pair of neighbours."""
    lam, threshold = ridge(lam), ridge_threshold(features, rho)
    if lam <= threshold:
        raise ValueError(f"lam must exceed ||Phi||_2^2 ||rho||_inf = {threshold} for DP-LSL "
                         f"(Balle et al. 2016, Cor. 8), got {lam}")
    return lam - threshold


def ridge_constant(features, rho, lam: float) -> float:
    """``c_lambda = ||Phi||_2 ||rho||_inf / sqrt(2 lambda)`` (Sec. 3.2, Eq. 12), refusing
    ``lambda <= ||Phi||_2^2 ||rho||_inf``."""
    _ridge_margin(features, rho, lam)
    norm = np.linalg.norm(np.asarray(features, dtype=float), 2)
    return float(norm * np.max(rho) / np.sqrt(2 * lam))


def _lsw_scale(features, weights, return_bound: float, eps: float, delta: float,
               constants: Constants | None = None) -> float:
    """``alpha F_max ||(Gamma^{1/2} Phi)^+||_2`` (Algorithm 1; Eq. 14)."""
    features = require_array("features", features, ndim=2)
    design = weighted_design(features, state_weights("weights", weights, features.shape[0]))
    alpha, _ = mechanism_constants(eps, delta, features.shape[1], constants)
    pinv_norm = 1 / np.linalg.svd(design, compute_uv=False)[-1]
    return alpha * require_positive("return_bound", return_bound) * pinv_norm


def _lsl_scale(features, rho, lam: float, return_bound: float, eps: float,
               delta: float, constants: Constants | None = None) -> float:
    """``2 alpha F_max ||Phi||_2 / (lambda - ||Phi||_2^2 ||rho||_inf)`` (Algorithm 2; Cor. 8)."""
    margin = _ridge_margin(features, rho, lam)
    features = np.asarray(features, dtype=float)
    alpha, _ = mechanism_constants(eps, delta, features.shape[1], constants)
    return 2 * alpha * require_positive("return_bound", return_bound) \
        * np.linalg.norm(features, 2) / margin


def _data(data: Statistics, features) -> tuple[FirstVisitSummary, np.ndarray]:
    data = require_summary(data)
    return data, features_matrix(features, data.n_states)


def dp_lsw_noise_scale(data: Statistics, features, weights, eps: float, delta: float,
                       constants: Constants | None = None) -> np.ndarray:
    """``sigma_X = alpha F_max ||(Gamma^{1/2} Phi)^+||_2 sqrt(psi_X^w)`` of DP-LSW
    (Algorithm 1; ``psi_X^w`` of Eq. 9 with ``alpha, beta`` of Lemma 1, or ``constants``,
    see :func:`~dprl.balle2016.smooth_sensitivity.mechanism_constants`), ``(*datasets,)``."""
    data, features = _data(data, features)
    scale = _lsw_scale(features, weights, data.return_bound, eps, delta, constants)
    _, beta = mechanism_constants(eps, delta, features.shape[1], constants)
    return scale * np.sqrt(lsw_smooth_bound(data.counts, weights, beta))


def dp_lsl_noise_scale(data: Statistics, features, rho, lam: float, eps: float,
                       delta: float, lemma9_variant: str = "min",
                       constants: Constants | None = None) -> np.ndarray:
    """``sigma_X = 2 alpha F_max ||Phi||_2 sqrt(psi_X^lambda) / (lambda - ||Phi||_2^2
    ||rho||_inf)`` of DP-LSL (Algorithm 2; ``psi_X^lambda`` of Eq. 12), ``(*datasets,)``;
    ``constants`` as in :func:`dp_lsw_noise_scale`. ``lemma9_variant="max"`` (Lemma 9 as
    printed) is for comparison only: not beta-smooth."""
    data, features = _data(data, features)
    scale = _lsl_scale(features, rho, lam, data.return_bound, eps, delta, constants)
    _, beta = mechanism_constants(eps, delta, features.shape[1], constants)
    psi = lsl_smooth_bound(data.counts, data.n_trajectories, rho,
                           ridge_constant(features, rho, lam), beta, lemma9_variant)
    return scale * np.sqrt(psi)


def lsw_global_noise_scale(features, weights, return_bound: float, eps: float,
                           delta: float) -> float:
    """Noise for LSW from a global sensitivity bound: Cor. 3 maximised over all data sets
    (every ``|X_s| <= 1``) gives ``GS_2 <= F_max ||(Gamma^{1/2} Phi)^+||_2 sqrt(sum_s w_s)``,
    whatever ``m`` (Sec. 4.1 remark); a constant ``sigma = alpha GS_2`` meets Lemma 1."""
    features = require_array("features", features, ndim=2)
    counts = np.zeros(features.shape[0], dtype=np.int64)
    return float(_lsw_scale(features, weights, return_bound, eps, delta)
                 * np.sqrt(lsw_local_bound(counts, weights)))


def lsl_global_noise_scale(features, rho, lam: float, m: int, return_bound: float, eps: float,
                           delta: float) -> float:
    """Noise for LSL from a global sensitivity bound: Cor. 8 maximised over data sets of ``m``
    trajectories (every ``|X_s| = m``); a constant ``sigma = alpha GS_2`` meets Lemma 1."""
    features = require_array("features", features, ndim=2)
    m = require_int("m", m)
    counts = np.full(features.shape[0], m)
    phi = lsl_local_bound(counts, m, rho, ridge_constant(features, rho, lam))
    return float(_lsl_scale(features, rho, lam, return_bound, eps, delta) * np.sqrt(phi))


Generators = np.random.Generator | Sequence[np.random.Generator]


def _standard_normal(rng: Generators, shape: tuple[int, ...]) -> np.ndarray:
    """``N(0, 1)`` draws of ``shape = (*datasets, d)``: ``rng.standard_normal(shape)`` from one
    generator, or ``d`` draws from each of ``prod(datasets)`` generators in row-major order
    (one per data set, e.g. per trial, so a data set's noise is the same in any batch)."""
    if isinstance(rng, np.random.Generator):
        return rng.standard_normal(shape)
    rngs = list(rng) if isinstance(rng, Sequence) else []
    if len(rngs) != int(np.prod(shape[:-1])) or not all(
            isinstance(g, np.random.Generator) for g in rngs):
        raise ValueError(f"rng must be a numpy.random.Generator or a sequence of "
                         f"{int(np.prod(shape[:-1]))} of them (one per data set), got {rng!r}")
    return np.stack([g.standard_normal(shape[-1]) for g in rngs]).reshape(shape)


def gaussian_perturbation(theta, sigma, rng: Generators) -> np.ndarray:
    """``theta + sigma eta`` with ``eta ~ N(0, I_d)`` per data set: ``theta`` ``(*datasets, d)``,
    ``sigma`` ``(*datasets,)`` > 0; ``rng``: one generator, or one per data set."""
    theta = require_array("theta", theta)
    if theta.ndim == 0:
        raise ValueError("theta must have shape (*datasets, d), got a scalar")
    sigma = require_array("sigma", sigma, shape=theta.shape[:-1], nonempty=False)
    if np.any(sigma <= 0):
        raise ValueError(f"sigma must be > 0, got min {sigma.min()}")
    return theta + sigma[..., None] * _standard_normal(rng, theta.shape)


def dp_lsw(data: Statistics, features, weights, eps: float, delta: float,
           rng: Generators) -> np.ndarray:
    """DP-LSW (Algorithm 1): LSW (Eq. 8) plus ``N(0, sigma_X^2 I)``, ``(*datasets, d)``;
    ``(eps, delta)``-DP for replace-one neighbours (Theorem 6)."""
    sigma = dp_lsw_noise_scale(data, features, weights, eps, delta)
    return gaussian_perturbation(lsw(data, features, weights), sigma, rng)


def dp_lsl(data: Statistics, features, rho, lam: float, eps: float, delta: float,
           rng: Generators, lemma9_variant: str = "min") -> np.ndarray:
    """DP-LSL (Algorithm 2): LSL (Eq. 11) plus ``N(0, sigma_X^2 I)``, ``(*datasets, d)``;
    ``(eps, delta)``-DP for replace-one neighbours (Theorem 10) with the default variant."""
    sigma = dp_lsl_noise_scale(data, features, rho, lam, eps, delta, lemma9_variant)
    return gaussian_perturbation(lsl(data, features, rho, lam), sigma, rng)
