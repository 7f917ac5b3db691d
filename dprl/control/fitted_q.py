"""Fitted Q iteration (Ernst, Geurts & Wehenkel 2005; Ernst et al. 2006 on the HIV domain)
with linear least-squares regression of the action values, one weight vector per action:
``Q(o, a) = w_a . phi(o)``.

Xie, Thomas & Miklau (2019, Sec. 7) obtain the evaluated HIV policy "using Q-learning"; FQI
is the batch Q-learning of Ernst et al. (2006), who introduced the HIV domain. Ernst et al.
regress with tree ensembles; here the regressor is ridge least squares on a fixed feature map
(e.g. :class:`dprl.features.PolynomialBasis`), so the learned Q is a fixed-size ``(A, d)`` weight matrix and
the greedy / softmax policies are those of :mod:`dprl.control.linear_q`. Least-squares FQI is
not a contraction, so the bootstrapped values are truncated to the range of discounted
returns that the rewards in the data allow, ``[min(r_min, 0), max(r_max, 0)] / (1 - gamma)``
(the truncation of Munos & Szepesvari 2008, "Finite-time bounds for fitted value iteration",
Sec. 3).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dprl.control.linear_q import FeatureMap
from dprl.validation import (frozen_copy, require_array, require_int, require_nonnegative,
                             require_probability)


@dataclass(frozen=True)
class Transitions:
    """One-step transitions ``(o, a, r, o', terminal)`` of any behaviour, the batch data of
    fitted Q iteration (Ernst et al. 2005, Sec. 3: the four-tuples ``F``):

    - ``observations``, ``next_observations``: ``(n, k)`` finite floats;
    - ``actions``: ``(n,)`` integers in ``[0, n_actions)``;
    - ``rewards``: ``(n,)`` finite floats;
    - ``terminal``: ``(n,)`` bool, True where ``o'`` is terminal (no bootstrap; a time-limit
      truncation is not terminal).

    Arrays are validated, copied and made read-only.
    """

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_observations: np.ndarray
    terminal: np.ndarray
    n_actions: int

    def __post_init__(self) -> None:
        observations = require_array("observations", self.observations, ndim=2)
        n, k = observations.shape
        actions = np.asarray(self.actions)
        n_actions = require_int("n_actions", self.n_actions)
        if not np.issubdtype(actions.dtype, np.integer) or actions.shape != (n,):
            raise ValueError(f"actions must be integers of shape {(n,)}, got {actions.dtype} "
                             f"{actions.shape}")
        if actions.min() < 0 or actions.max() >= n_actions:
            raise ValueError(f"actions must lie in [0, {n_actions - 1}], got values in "
                             f"[{actions.min()}, {actions.max()}]")
        terminal = np.asarray(self.terminal)
        if terminal.dtype != np.bool_ or terminal.shape != (n,):
            raise ValueError(f"terminal must be a bool array of shape {(n,)}, got "
                             f"{terminal.dtype} {terminal.shape}")
        fields = {"observations": observations, "actions": actions.astype(np.int64),
                  "rewards": require_array("rewards", self.rewards, shape=(n,)),
                  "next_observations": require_array("next_observations",
                                                     self.next_observations, shape=(n, k)),
                  "terminal": terminal}
        for name, value in fields.items():
            object.__setattr__(self, name, frozen_copy(value))
        object.__setattr__(self, "n_actions", n_actions)


@dataclass(frozen=True)
class FittedQResult:
    """``weights``: ``(A, d)`` with ``Q(o, a) = weights[a] . phi(o)``; ``last_change``: the
    largest change of a fitted value ``|Q_N - Q_{N-1}|`` over the data in the last iteration
    (a convergence check, in reward units)."""

    weights: np.ndarray
    last_change: float


def _regression_operators(phi: np.ndarray, actions: np.ndarray, n_actions: int,
                          ridge: float) -> list[np.ndarray]:
    """Per action ``a``: ``(Phi_a^T Phi_a + ridge n_a I)^{-1} Phi_a^T``, the ridge
    least-squares map from the targets of the ``n_a`` transitions with action ``a`` to
    ``w_a``."""
    operators = []
    for a in range(n_actions):
        rows = phi[actions == a]
        if rows.shape[0] == 0:
            raise ValueError(f"action {a} never occurs in the data: its values cannot be fitted")
        gram = rows.T @ rows + ridge * rows.shape[0] * np.eye(phi.shape[1])
        try:
            operators.append(np.linalg.solve(gram, rows.T))
        except np.linalg.LinAlgError as error:
            raise ValueError(f"the regression for action {a} is singular ({rows.shape[0]} "
                             "transitions); use ridge > 0") from error
    return operators


def fitted_q_iteration(data: Transitions, features: FeatureMap, gamma: float,
                       n_iterations: int, ridge: float = 0.0) -> FittedQResult:
    """Fitted Q iteration (Ernst et al. 2005, Algorithm 1, "FQI") with ridge least squares
    per action, from ``Q_0 = 0``: for ``N = 1 .. n_iterations``,

    ``y_i = r_i + gamma (1 - terminal_i) clip(max_b Q_{N-1}(o'_i, b), V_min, V_max)``,
    ``w_a = argmin_w sum_{i: a_i = a} (w . phi(o_i) - y_i)^2 + ridge n_a ||w||^2``,

    with ``[V_min, V_max] = [min(min_i r_i, 0), max(max_i r_i, 0)] / (1 - gamma)``, which
    holds every discounted return, terminated or not (the truncation of Munos & Szepesvari
    2008, which keeps least-squares FQI from diverging). Every action must occur in the data.
    With ``ridge = 0`` and tabular features this is exact value iteration on the empirical MDP
    of the data.
    """
    if not isinstance(data, Transitions):
        raise ValueError(f"data must be Transitions, got {type(data).__name__}")
    gamma = require_probability("gamma", gamma, open_high=True)
    n_iterations = require_int("n_iterations", n_iterations)
    ridge = require_nonnegative("ridge", ridge)
    phi, phi_next = features(data.observations), features(data.next_observations)
    operators = _regression_operators(phi, data.actions, data.n_actions, ridge)
    bounds = (min(data.rewards.min(), 0.0) / (1 - gamma),
              max(data.rewards.max(), 0.0) / (1 - gamma))
    bootstrap = gamma * ~data.terminal
    weights = previous = np.zeros((data.n_actions, phi.shape[1]))
    for _ in range(n_iterations):
        next_value = np.clip((phi_next @ weights.T).max(axis=1), *bounds)
        targets = data.rewards + bootstrap * next_value
        weights, previous = np.stack([op @ targets[data.actions == a]
                                      for a, op in enumerate(operators)]), weights
    change = np.einsum("nd,nd->n", phi, (weights - previous)[data.actions])
    return FittedQResult(frozen_copy(weights), float(np.max(np.abs(change))))


def action_values(weights: np.ndarray, features: FeatureMap,
                  observations: np.ndarray) -> np.ndarray:
    """``Q(o, a) = w_a . phi(o)``, ``(n, A)``, as an elementwise sum (a row's bits do not
    depend on its batch), for the weights of :func:`fitted_q_iteration`."""
    weights = require_array("weights", weights, ndim=2)
    return np.einsum("nd,ad->na", features(observations), weights)
