"""The Lipschitz constant L of the Q-network in the state, the constant of Theorem 5 of Wang &
Hegde (2019) ("L is the Lipschitz constant of the value function approximation"; Sec. 4 and
App. E.3 do not give its value, the book assumes L = 1).

For the authors' ReLU network with a one-dimensional state, ``s -> Q_theta(s, a)`` is piecewise
linear on [0, 1], so its Lipschitz constant is the largest absolute slope of its pieces.
:func:`exact_lipschitz` finds every kink (layer by layer: between two kinks of the earlier
layers each pre-activation is affine, so its zero is found exactly by interpolation) and
takes the slope of each piece from the network's input gradient at the piece's midpoint.
Two checks bracket it: :func:`spectral_lipschitz`, the product of the layers' spectral norms
(an upper bound, ReLU being 1-Lipschitz; Szegedy et al. 2014), and
:func:`finite_difference_lipschitz`, the largest difference quotient on a grid (a lower bound).
All take :class:`~dprl.wang2019.q_functions.MLPQ` parameters of R runs (leading run axis) and
return (R, A), one constant per run and action.
"""

from __future__ import annotations

import numpy as np

from dprl.validation import require_int
from dprl.wang2019.q_functions import MLPQ, Params


def _check(params: Params) -> Params:
    """MLP parameters ``(W_0, b_0, ...)`` with a run axis and a one-dimensional input."""
    if not isinstance(params, tuple) or len(params) < 4 or len(params) % 2:
        raise ValueError("params must be a tuple (W_0, b_0, W_1, b_1, ...) of at least 2 layers")
    if np.ndim(params[0]) != 3 or np.shape(params[0])[2] != 1:
        raise ValueError(f"W_0 must have shape (runs, units, 1), got {np.shape(params[0])}")
    return tuple(np.asarray(p, dtype=float) for p in params)


def _pre_activations(params: Params, run: int, states: np.ndarray) -> list[np.ndarray]:
    """Pre-activations (N, units) of every hidden layer of run ``run`` at ``states`` (N,)."""
    x, layers = states[:, None], []
    for k in range(0, len(params) - 2, 2):
        z = x @ params[k][run].T + params[k + 1][run]
        layers.append(z)
        x = np.maximum(z, 0.0)
    return layers


def _input_gradient(params: Params, run: int, states: np.ndarray) -> np.ndarray:
    """dQ(s, a)/ds (N, A) of run ``run`` at ``states`` (N,), none of them at a kink."""
    layers = _pre_activations(params, run, states)
    slope = np.broadcast_to(params[0][run][:, 0], layers[0].shape) * (layers[0] > 0)
    for k, z in zip(range(2, len(params) - 2, 2), layers[1:]):
        slope = (slope @ params[k][run].T) * (z > 0)
    return slope @ params[-2][run].T


def _kinks(params: Params, run: int) -> np.ndarray:
    """Sorted points of [0, 1] where a hidden unit of run ``run`` changes sign, with 0 and 1."""
    points = np.array([0.0, 1.0])
    for layer in range(len(params) // 2 - 1):
        z = _pre_activations(params, run, points)[layer]
        lo, hi = z[:-1], z[1:]
        i, j = np.nonzero(lo * hi < 0)
        cross = points[i] + lo[i, j] * (points[i + 1] - points[i]) / (lo[i, j] - hi[i, j])
        points = np.unique(np.concatenate([points, cross]))
    return points


def exact_lipschitz(params: Params) -> np.ndarray:
    """The Lipschitz constant on [0, 1] of ``s -> Q_theta(s, a)`` for each run and action,
    (R, A): the largest absolute slope of the linear pieces of the ReLU network (the L of
    Wang & Hegde 2019, Thm. 5)."""
    params = _check(params)
    constants = []
    for run in range(params[0].shape[0]):
        kinks = _kinks(params, run)
        midpoints = (kinks[:-1] + kinks[1:]) / 2
        constants.append(np.abs(_input_gradient(params, run, midpoints)).max(axis=0))
    return np.array(constants)


def spectral_lipschitz(params: Params) -> np.ndarray:
    """Upper bound (R, A) on the Lipschitz constant of ``s -> Q_theta(s, a)``: the product of
    the hidden layers' spectral norms and the norm of the output row of action a (ReLU is
    1-Lipschitz; Szegedy et al. 2014), for Theorem 5's L (Wang & Hegde 2019)."""
    params = _check(params)
    product = np.ones(params[0].shape[0])
    for k in range(0, len(params) - 2, 2):
        product = product * np.linalg.norm(params[k], ord=2, axis=(1, 2))
    return product[:, None] * np.linalg.norm(params[-2], axis=2)


def finite_difference_lipschitz(params: Params, n_points: int = 1001) -> np.ndarray:
    """Lower bound (R, A) on the Lipschitz constant of ``s -> Q_theta(s, a)``: the largest
    difference quotient between neighbours of an even grid of ``n_points`` on [0, 1]
    (the empirical L of Wang & Hegde 2019, Thm. 5)."""
    params = _check(params)
    grid = np.linspace(0.0, 1.0, require_int("n_points", n_points, minimum=2))
    states = np.broadcast_to(grid, (params[0].shape[0], grid.size))
    q = MLPQ(hidden=tuple(p.shape[1] for p in params[0:-2:2]),
             n_actions=params[-1].shape[1]).forward(params, states)[0]
    return np.abs(np.diff(q, axis=1)).max(axis=1) / (grid[1] - grid[0])
