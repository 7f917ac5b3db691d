"""Fitted Q iteration (Ernst, Geurts & Wehenkel 2005, Algorithm 1) for many experts at once:
:func:`dprl.control.fitted_q.fitted_q_iteration`'s linear, truncated FQI for ``G x K``
experts, each on its group's transitions under its own sample weights (bootstrap counts), as
stacked matrix products of a fixed shape per expert, so that an expert's bits do not depend
on how many are fitted with it. Used by :mod:`dprl.sharma2025.hiv_experts` for Sharma et al.
(2025)'s HIV populations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dprl.validation import (frozen_copy, require_array, require_int, require_nonnegative,
                             require_probability)

_GRAM_CHUNK = 64  # groups whose Gram matrices are formed at once


@dataclass(frozen=True)
class BatchedFittedQ:
    """``weights`` ``(G, K, A, d)``: expert ``(g, k)``'s ``Q(o, a) = weights[g, k, a] .
    phi(o)``; ``last_change`` ``(G, K)``: its largest ``|Q_N - Q_{N-1}|`` over its data
    (rows of positive weight) in the last iteration."""

    weights: np.ndarray
    last_change: np.ndarray


def _grams(features: np.ndarray, indicator: np.ndarray, sample_weights: np.ndarray,
           ridge: float) -> np.ndarray:
    """``sum_i w_i 1{a_i = a} phi_i phi_i^T + ridge n_a I`` ``(G, K, A, d, d)``, ``n_a`` the
    weighted count of action ``a``; stacked products of fixed shape, a few groups at a time."""
    G, K, n = sample_weights.shape
    A, d = indicator.shape[1], features.shape[2]
    counts = np.einsum("gkn,gan->gka", sample_weights, indicator)
    empty = np.argwhere(counts == 0)
    if empty.size:
        g, k, a = empty[0]
        raise ValueError(f"action {a} has zero weight for expert ({g}, {k}): its values "
                         "cannot be fitted")
    grams = np.empty((G, K, A, d, d))
    for start in range(0, G, _GRAM_CHUNK):
        part = slice(start, start + _GRAM_CHUNK)
        phi = features[part]
        for a in range(A):
            weighted = (sample_weights[part] * indicator[part, None, a])[..., None] * phi[:, None]
            grams[part, :, a] = np.matmul(weighted.swapaxes(-1, -2), phi[:, None])
    return grams + ridge * counts[..., None, None] * np.eye(d)


def batched_fitted_q(features: np.ndarray, actions: np.ndarray, rewards: np.ndarray,
                     next_features: np.ndarray, sample_weights: np.ndarray, n_actions: int,
                     gamma: float, n_iterations: int, ridge: float = 0.0) -> BatchedFittedQ:
    """Fitted Q iteration (Ernst et al. 2005, Algorithm 1) for ``G x K`` experts at once:
    :func:`dprl.control.fitted_q.fitted_q_iteration` for expert ``(g, k)`` on group ``g``'s
    non-terminal transitions (``features``, ``next_features`` ``(G, n, d)``, ``actions``,
    ``rewards`` ``(G, n)``), each transition repeated ``sample_weights[g, k, i] >= 0`` times
    (e.g. bootstrap counts; real weights are allowed): from ``Q_0 = 0``,

    ``y_i = r_i + gamma clip(max_b Q_{N-1}(o'_i, b), V_min, V_max)``,
    ``w_a = argmin_w sum_i w_i 1{a_i = a} (w . phi_i - y_i)^2 + ridge n_a ||w||^2``,

    ``[V_min, V_max]`` from the rewards of the expert's positively weighted transitions. The
    normal equations are stacked ``(G, K, A, d, d)`` systems (``numpy.linalg.solve``); every
    matrix product is stacked with a fixed shape per expert, so an expert's bits do not
    depend on ``G`` or ``K``."""
    features = require_array("features", features, ndim=3)
    G, n, d = features.shape
    next_features = require_array("next_features", next_features, shape=(G, n, d))
    rewards = require_array("rewards", rewards, shape=(G, n))
    sample_weights = require_array("sample_weights", sample_weights, shape=(G, None, n))
    if sample_weights.min() < 0:
        raise ValueError("sample_weights must be >= 0")
    n_actions = require_int("n_actions", n_actions, minimum=2)
    actions = np.asarray(actions)
    if not np.issubdtype(actions.dtype, np.integer) or actions.shape != (G, n) \
            or actions.min() < 0 or actions.max() >= n_actions:
        raise ValueError(f"actions must be integers in [0, {n_actions}) of shape {(G, n)}")
    gamma = require_probability("gamma", gamma, open_high=True)
    n_iterations = require_int("n_iterations", n_iterations)
    ridge = require_nonnegative("ridge", ridge)

    indicator = (actions[:, None, :] == np.arange(n_actions)[:, None]).astype(float)
    grams = _grams(features, indicator, sample_weights, ridge)
    used = sample_weights > 0
    low = np.minimum(np.where(used, rewards[:, None], np.inf).min(axis=2), 0.0) / (1 - gamma)
    high = np.maximum(np.where(used, rewards[:, None], -np.inf).max(axis=2), 0.0) / (1 - gamma)
    weights = previous = np.zeros((G, sample_weights.shape[1], n_actions, d))
    for _ in range(n_iterations):
        next_q = np.matmul(next_features[:, None], weights.swapaxes(-1, -2))
        targets = rewards[:, None] + gamma * np.clip(next_q.max(axis=3), low[..., None],
                                                     high[..., None])
        weighted = (sample_weights * targets)[:, :, None, :] * indicator[:, None]
        rhs = np.matmul(weighted, features[:, None])
        try:
            solved = np.linalg.solve(grams, rhs[..., None])[..., 0]
        except np.linalg.LinAlgError as error:
            raise ValueError("a regression is singular; use ridge > 0") from error
        weights, previous = solved, weights
    change = np.matmul(features[:, None], (weights - previous).swapaxes(-1, -2))
    change = np.take_along_axis(change, np.broadcast_to(actions[:, None, :, None],
                                                        change.shape[:3] + (1,)), axis=3)
    last = np.where(used, np.abs(change[..., 0]), 0.0).max(axis=2)
    return BatchedFittedQ(frozen_copy(weights), frozen_copy(last))
