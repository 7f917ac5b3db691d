"""Expert populations and the p_min modification of Sharma et al. (2025, App. B.1).

Every population of the book is a set of ``m`` experts with a *greedy* action per state (a
trained network's most probable action, a trained controller's action, or the argmax of a
learned Q). App. B.1 then modifies each expert so that, in every state, its greedy action has
probability ``1 - (|A| - 1) p_min`` and every other action ``p_min``; these modified experts
record the data, and their probabilities are what PrefixQuery (Alg. 1) queries
(Assumption 3.5), with ``p_min`` the minimum action probability of Assumption 3.6.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from dprl.validation import require_int, require_probability


@runtime_checkable
class ExpertPopulation(Protocol):
    """``m`` experts over ``n_actions`` discrete actions (Assumption 3.4)."""

    n_experts: int
    n_actions: int

    def select(self, index: np.ndarray) -> ExpertPopulation:
        """The experts ``index`` (integer indices), in that order, as a population."""

    def greedy_actions(self, observations: np.ndarray) -> np.ndarray:
        """Greedy actions ``(m, n)`` int64 for observations ``(m, n, d)`` (expert ``i`` acts
        on ``observations[i]``) or ``(1, n, d)`` (every expert on the same observations)."""


def pmin_levels(n_actions: int, p_min: float) -> tuple[float, float]:
    """The two probabilities of an App. B.1 expert: ``(1 - (|A| - 1) p_min, p_min)`` for its
    greedy action and for every other action; requires ``p_min <= 1 / |A|`` so that the
    greedy action stays the most probable."""
    n_actions = require_int("n_actions", n_actions, minimum=2)
    p_min = require_probability("p_min", p_min)
    if p_min > 1 / n_actions:
        raise ValueError(f"p_min must be <= 1 / n_actions = {1 / n_actions:.4g}, got {p_min}")
    return 1.0 - (n_actions - 1) * p_min, p_min


def pmin_log_probabilities(greedy: np.ndarray, actions: np.ndarray, n_actions: int,
                           p_min: float) -> np.ndarray:
    """``log pi_i(a | s)`` of App. B.1's modified experts: ``log(1 - (|A| - 1) p_min)`` where
    the taken ``actions`` equal the experts' ``greedy`` actions, ``log p_min`` elsewhere
    (arrays broadcast; ``p_min > 0`` so that every action has finite log probability)."""
    high, low = pmin_levels(n_actions, p_min)
    if low == 0:
        raise ValueError("p_min must be > 0 for finite log probabilities")
    greedy, actions = np.asarray(greedy), np.asarray(actions)
    for name, array in (("greedy", greedy), ("actions", actions)):
        if not np.issubdtype(array.dtype, np.integer):
            raise ValueError(f"{name} must be integers, got dtype {array.dtype}")
        if array.size and (array.min() < 0 or array.max() >= n_actions):
            raise ValueError(f"{name} must lie in [0, {n_actions - 1}]")
    return np.where(greedy == actions, np.log(high), np.log(low))


def pmin_actions(greedy: np.ndarray, uniforms: np.ndarray, n_actions: int,
                 p_min: float) -> np.ndarray:
    """Actions of App. B.1's modified experts by inversion of ``uniforms`` (one per entry of
    ``greedy``, same shape): the greedy action when ``u < 1 - (|A| - 1) p_min``, otherwise
    the ``k``-th other action for ``u`` in the ``k``-th of the remaining ``|A| - 1``
    intervals of width ``p_min``."""
    high, low = pmin_levels(n_actions, p_min)
    greedy, u = np.asarray(greedy), np.asarray(uniforms)
    if u.shape != greedy.shape:
        raise ValueError(f"uniforms must have the shape of greedy {greedy.shape}, got {u.shape}")
    other = np.minimum(((u - high) // low).astype(np.int64), n_actions - 2) if low > 0 else 0
    other = other + (other >= greedy)      # skip the greedy action
    return np.where(u < high, greedy, other).astype(np.int64)


def sample_pmin_actions(greedy: np.ndarray, n_actions: int, p_min: float,
                        rng: np.random.Generator) -> np.ndarray:
    """:func:`pmin_actions` with one uniform per entry of ``greedy`` drawn from ``rng``."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return pmin_actions(greedy, rng.random(np.shape(greedy)), n_actions, p_min)
