"""Least-squares first-visit Monte Carlo estimators of Balle et al. (2016): the objectives
``J_X`` (Eq. 3), ``J_X^w`` (Eq. 6), ``J_X^lambda`` (Eq. 10) and the closed-form minimisers
LSW (Eq. 8) and LSL (Eq. 11).

The objective ``J_X`` needs per-trajectory returns (:class:`~dprl.balle2016.statistics.
FirstVisitData`, batch ``(*datasets, m)``); everything else also takes the sufficient statistics
(:class:`~dprl.balle2016.statistics.FirstVisitSummary`). Results have shape
``(*datasets, ...)``. Products are broadcast elementwise and summed along the last axis (no
BLAS products over data sets), so every data set's result is batch-invariant.
"""

from __future__ import annotations

import numpy as np

from dprl.balle2016.inputs import (features_matrix, regression_weights, ridge, state_weights,
                                   weighted_design)
from dprl.balle2016.statistics import (FirstVisitData, Statistics, require_first_visit_data,
                                       require_summary, visit_weights)
from dprl.validation import require_array


def _theta(theta, data: Statistics, d: int) -> np.ndarray:
    """A parameter per data set, ``(*datasets, d)``."""
    return require_array("theta", theta, shape=(*data.datasets_shape, d))


def _predictions(features: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """``Phi theta`` per data set, ``(*datasets, N)``."""
    return (features * theta[..., None, :]).sum(axis=-1)


def _normal_equations(features: np.ndarray, weights: np.ndarray,
                      targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``Phi^T diag(weights) Phi`` and ``Phi^T diag(weights) targets`` (leading axes of
    ``weights``/``targets`` broadcast)."""
    gram = (features.T[:, None, :] * features.T[None, :, :] * weights[..., None, None, :])
    return gram.sum(axis=-1), (features.T * (weights * targets)[..., None, :]).sum(axis=-1)


def objective(data: FirstVisitData, features, rho, theta) -> np.ndarray:
    """``J_X(theta) = (1/m) sum_i sum_{s in S_{x_i}} rho_s (F_{x_i,s} - phi_s^T theta)^2``
    (Balle et al. 2016, Eq. 3), ``(*datasets,)``."""
    data = require_first_visit_data(data)
    features = features_matrix(features, data.n_states)
    rho = regression_weights(rho, data.n_states)
    prediction = _predictions(features, _theta(theta, data, features.shape[1]))
    residuals = np.where(data.visited, data.returns - prediction[..., None, :], 0.0)
    return (rho * residuals**2).sum(axis=-1).sum(axis=-1) / data.n_trajectories


def weighted_objective(data: Statistics, features, weights, theta) -> np.ndarray:
    """``J_X^w(theta) = sum_s w_s (F_{X,s} - phi_s^T theta)^2`` (Eq. 6), ``(*datasets,)``."""
    data = require_summary(data)
    features = features_matrix(features, data.n_states)
    weights = state_weights("weights", weights, data.n_states)
    prediction = _predictions(features, _theta(theta, data, features.shape[1]))
    return (weights * (data.mean_returns - prediction) ** 2).sum(axis=-1)


def ridge_objective(data: FirstVisitData, features, rho, lam: float, theta) -> np.ndarray:
    """``J_X^lambda(theta) = J_X(theta) + lambda/(2m) ||theta||^2`` (Eq. 10)."""
    value = objective(data, features, rho, theta)  # validates data and theta first
    penalty = ridge(lam) / (2 * data.n_trajectories)
    return value + penalty * (np.asarray(theta, dtype=float) ** 2).sum(axis=-1)


def lsw(data: Statistics, features, weights) -> np.ndarray:
    """LSW, ``theta_X^w = (Phi^T Gamma Phi)^{-1} Phi^T Gamma F_X`` with ``Gamma = diag(w)``
    (Eq. 8), ``(*datasets, d)``; ``Phi^T Gamma Phi`` must be invertible."""
    data = require_summary(data)
    features = features_matrix(features, data.n_states)
    weights = state_weights("weights", weights, data.n_states)
    weighted_design(features, weights)
    gram, moments = _normal_equations(features, weights, data.mean_returns)
    return np.linalg.solve(gram, moments[..., None])[..., 0]


def lsl(data: Statistics, features, rho, lam: float) -> np.ndarray:
    """LSL, ``theta_X^lambda = (Phi^T Gamma_X Phi + lambda/(2m) I)^{-1} Phi^T Gamma_X F_X``
    (Eq. 11), ``Gamma_X = diag(rho_s |X_s| / m)``; ``(*datasets, d)``. Any ``lambda > 0``
    (DP-LSL needs more, see :func:`~dprl.balle2016.mechanisms.ridge_threshold`)."""
    data = require_summary(data)
    features = features_matrix(features, data.n_states)
    gram, moments = _normal_equations(features, visit_weights(data, rho), data.mean_returns)
    shift = ridge(lam) / (2 * data.n_trajectories) * np.eye(features.shape[1])
    return np.linalg.solve(gram + shift, moments[..., None])[..., 0]
