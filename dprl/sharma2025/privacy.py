"""The privacy analysis of Sharma et al. (2025, Sec. 5 and App. A), checked exactly.

- Lemma 5.1: the ratio ``Pr(E_tau | Pi) / Pr(E_tau | Pi')`` of sampling a prefix under
  add/remove-one neighbouring expert sets, worst case over the changed expert.
- Lemma 5.2: the probability that a prefix below ``theta`` passes, in closed form.
- Theorem 5.3: the exact output distribution of one round ``A = A1 o A2`` (sample an expert
  and a trajectory, release the SVT-stable prefix) on a small tabular MDP whose prefixes can
  all be enumerated, and its hockey-stick divergence between neighbours.
- Theorem 5.5, the composition of the ``T`` rounds: :mod:`dprl.sharma2025.composition`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize

from dprl.sharma2025.release import pass_probabilities
from dprl.validation import (frozen_copy, require_array, require_delta, require_epsilon,
                             require_int, require_positive, require_probability)


# --- Lemma 5.1 ---------------------------------------------------------------------------

def count_ratio_bound(count: ArrayLike) -> np.ndarray:
    """Lemma 5.1's bound (App. A.1, eq. 18): ``Pr(E|Pi) / Pr(E|Pi') < count / (count - 1)``,
    which is ``<= e^eps'`` exactly when ``count >= c_min = e^eps' / (e^eps' - 1)``
    (``count > 1``)."""
    count = require_array("count", count)
    if np.any(count <= 1):
        raise ValueError("count must be > 1")
    return count / (count - 1)


def worst_count_ratio(count: ArrayLike, m: int, lower: float = 0.0,
                      upper: float = 1.0) -> np.ndarray:
    """Exact ``sup_{Pi'} Pr(E_tau | Pi) / Pr(E_tau | Pi') = count(Pi) m' / (count(Pi') m)``
    (App. A.1, eq. 13) over the add/remove-one neighbours ``Pi'`` of a set of ``m >= 2``
    experts with prefix count ``count``, when every expert's probability of the prefix lies
    in ``[lower, upper]`` (``[p_min^k, 1]`` for a ``k``-step prefix, Assumption 3.6). Adding
    an expert of probability ``lower`` gives ``count (m+1) / ((count + lower) m)``; removing
    the most probable expert the others allow gives ``count (m-1) / ((count - x) m)``,
    ``x = min(upper, count - (m-1) lower)`` (``inf`` if nothing remains)."""
    count = require_array("count", count)
    m = require_int("m", m, minimum=2)
    lower = require_probability("lower", lower)
    upper = require_probability("upper", upper, open_low=True)
    if lower > upper:
        raise ValueError(f"lower={lower} must be <= upper={upper}")
    if np.any(count < m * lower) or np.any(count > m * upper):
        raise ValueError(f"count must lie in [m lower, m upper] = [{m * lower}, {m * upper}]")
    add = count * (m + 1) / ((count + lower) * m)
    remaining = count - np.minimum(upper, count - (m - 1) * lower)
    with np.errstate(divide="ignore"):
        remove = np.where(remaining > 0, count * (m - 1) / (remaining * m), np.inf)
    return np.maximum(add, remove)


# --- Lemma 5.2 ---------------------------------------------------------------------------

def laplace_difference_tail(y: ArrayLike, scale_u: float, scale_v: float) -> np.ndarray:
    """``P(U - V > y)`` for independent ``U ~ Lap(scale_u)``, ``V ~ Lap(scale_v)`` in closed
    form (the tool of Lemma 5.2, App. A.2): for ``y >= 0`` and ``b_u != b_v``,
    ``(b_u^2 e^{-y/b_u} - b_v^2 e^{-y/b_v}) / (2 (b_u^2 - b_v^2))`` (partial fractions of the
    characteristic function ``1 / ((1 + b_u^2 t^2)(1 + b_v^2 t^2))``); ``e^{-y/b} (2 + y/b)
    / 4`` for equal scales; ``1 - P(U - V > -y)`` for ``y < 0`` (symmetry)."""
    y = require_array("y", y)
    bu, bv = require_positive("scale_u", scale_u), require_positive("scale_v", scale_v)
    z = np.abs(y)
    if bu == bv:
        tail = np.exp(-z / bu) * (2 + z / bu) / 4
    else:
        tail = (bu**2 * np.exp(-z / bu) - bv**2 * np.exp(-z / bv)) / (2 * (bu**2 - bv**2))
    return np.where(y >= 0, tail, 1 - tail)


def top_probability(count: ArrayLike, threshold: float, eps_prime: float) -> np.ndarray:
    """Exact ``P(count + Lap(4/eps') > threshold + Lap(2/eps'))``: PrefixQuery's (Alg. 1)
    pass probability with Alg. 2 line 8's noisy threshold, noiseless part ``threshold``."""
    eps_prime = require_epsilon(eps_prime, "eps_prime")
    count = require_array("count", count)
    return laplace_difference_tail(threshold - count, 4 / eps_prime, 2 / eps_prime)


def lemma52_top_probability(eps_prime: float, delta_prime: float,
                            below: ArrayLike = 0.0) -> np.ndarray:
    """Lemma 5.2 exactly: ``P(top)`` for a prefix of count ``theta - below`` (``below >= 0``),
    ``P(Lap(4/eps') > (4/eps') log(1/delta') + below + Lap(2/eps'))
    = (4 delta' e^{-below eps'/4} - delta'^2 e^{-below eps'/2}) / 6``; at ``below = 0``,
    ``2 delta'/3 - delta'^2/6 < delta'`` (the paper's integral, eq. 23, is ``2 delta'/3``)."""
    eps_prime = require_epsilon(eps_prime, "eps_prime")
    delta_prime = require_delta(delta_prime, "delta_prime")
    below = require_array("below", below)
    if np.any(below < 0):
        raise ValueError("below must be >= 0 (Lemma 5.2: count < theta)")
    offset = 4 / eps_prime * math.log(1 / delta_prime)
    return laplace_difference_tail(offset + below, 4 / eps_prime, 2 / eps_prime)


# --- Theorem 5.3 on an enumerable tabular MDP --------------------------------------------

def enumerate_trajectories(n_states: int, n_actions: int, length: int) -> np.ndarray:
    """Every trajectory ``(s_1, a_1, s_2, ..., a_L, s_{L+1})`` of a tabular MDP (Sec. 3.3's
    notation), ``(|S|^{L+1} |A|^L, 2L + 1)`` in lexicographic order, so that the trajectories
    sharing a ``k``-step prefix are consecutive."""
    n_states, n_actions = require_int("n_states", n_states), require_int("n_actions", n_actions)
    length = require_int("length", length)
    sizes = (n_states,) + (n_actions, n_states) * length
    return np.indices(sizes).reshape(len(sizes), -1).T


@dataclass(frozen=True)
class OneRoundModel:
    """Everything about one round ``A = A1 o A2`` of Alg. 2 (Sec. 5) on a tabular MDP that
    does not depend on the expert set: trajectories, their state-transition probabilities,
    and each candidate expert type's prefix probabilities. Build with
    :func:`one_round_model`."""

    n_states: int
    n_actions: int
    length: int
    p_min: float
    transition_probability: np.ndarray     # (n_traj,) rho_0(s_1) prod_j P(s_{j+1}|s_j,a_j)
    type_prefix_probability: np.ndarray    # (n_types, n_traj, L) prod_{j<=k} pi(a_j|s_j,j)

    @property
    def n_types(self) -> int:
        """Number of candidate expert policies."""
        return self.type_prefix_probability.shape[0]

    def prefix_sizes(self) -> list[int]:
        """Number of distinct ``k``-step prefixes ``|S|^{k+1} |A|^k``, ``k = 1..L``."""
        return [self.n_states ** (k + 1) * self.n_actions**k for k in range(1, self.length + 1)]

    def counts(self, multiplicities: ArrayLike) -> np.ndarray:
        """``count_{tau_{1:k}}(Pi)`` ``(n_traj, L)`` of the expert set with ``multiplicities``
        experts of each type (Sec. 4)."""
        multiplicities = _require_multiplicities(multiplicities, self.n_types)
        return np.einsum("t,tnk->nk", multiplicities, self.type_prefix_probability)

    def prefix_mass(self, multiplicities: ArrayLike) -> np.ndarray:
        """``Pr(E_tau | Pi)`` of every output prefix (``k = 1..L`` concatenated, as in
        :meth:`distribution` without its first entry): App. A.1 eq. 8."""
        multiplicities = _require_multiplicities(multiplicities, self.n_types)
        counts = self.counts(multiplicities)
        full = self.transition_probability * counts[:, -1] / multiplicities.sum()
        return np.concatenate([self._group(full, k) for k in range(1, self.length + 1)])

    def distribution(self, multiplicities: ArrayLike, eps_prime: float,
                     threshold: float) -> np.ndarray:
        """Exact output distribution of one round under the expert set: entry 0 is "nothing
        released" (``k = 0``), then the probabilities of releasing each ``k``-step prefix
        ``tau_{1:k}`` (including ``s_{k+1}``), ``k = 1..L`` in :func:`enumerate_trajectories`
        order. ``A1`` draws an expert uniformly and a trajectory from it; ``A2`` is the SVT
        of Alg. 2 lines 8-14 with noiseless threshold ``threshold``, integrated exactly by
        :func:`~dprl.sharma2025.release.pass_probabilities`."""
        multiplicities = _require_multiplicities(multiplicities, self.n_types)
        counts = self.counts(multiplicities)
        trajectory = self.transition_probability * counts[:, -1] / multiplicities.sum()
        unique, inverse = np.unique(counts, axis=0, return_inverse=True)
        k_given_counts = pass_probabilities(np.log(unique), eps_prime, threshold)
        released = trajectory[:, None] * k_given_counts[inverse.ravel()]
        return np.concatenate([[released[:, 0].sum()]] + [
            self._group(released[:, k], k) for k in range(1, self.length + 1)])

    def _group(self, weights: np.ndarray, k: int) -> np.ndarray:
        """Sum ``weights`` (n_traj,) over the trajectories sharing each ``k``-step prefix."""
        return weights.reshape(self.prefix_sizes()[k - 1], -1).sum(axis=1)


def one_round_model(initial: ArrayLike, transitions: ArrayLike, policies: ArrayLike,
                    length: int, p_min: float) -> OneRoundModel:
    """The :class:`OneRoundModel` of a tabular MDP with initial distribution ``initial``
    ``(S,)``, transitions ``(S, A, S)``, and candidate expert policies ``(n_types, L, S, A)``
    (time-dependent ``pi(a | s, j)``) or ``(n_types, S, A)`` (stationary), each
    ``>= p_min > 0`` everywhere (Assumption 3.6)."""
    initial = require_array("initial", initial, ndim=1)
    n_states = len(initial)
    transitions = require_array("transitions", transitions, ndim=3)
    n_actions = transitions.shape[1]
    if transitions.shape != (n_states, n_actions, n_states):
        raise ValueError(f"transitions must be (S, A, S) = ({n_states}, A, {n_states}), "
                         f"got {transitions.shape}")
    _require_distributions("initial", initial)
    _require_distributions("transitions", transitions)
    length = require_int("length", length)
    p_min = require_probability("p_min", p_min, open_low=True)
    policies = require_array("policies", policies)
    if policies.ndim == 3:
        policies = np.repeat(policies[:, None], length, axis=1)
    if policies.shape[1:] != (length, n_states, n_actions):
        raise ValueError(f"policies must be (n_types, L, S, A) or (n_types, S, A), got "
                         f"{policies.shape} for L={length}, S={n_states}, A={n_actions}")
    _require_distributions("policies", policies)
    if policies.min() < p_min:
        raise ValueError(f"policies must be >= p_min={p_min} (Assumption 3.6)")
    trajectories = enumerate_trajectories(n_states, n_actions, length)
    states, actions = trajectories[:, 0::2], trajectories[:, 1::2]
    steps = np.arange(length)
    transition_probability = initial[states[:, 0]] * np.prod(
        transitions[states[:, :-1], actions, states[:, 1:]], axis=1)
    action_probability = policies[:, steps, states[:, :-1], actions]
    return OneRoundModel(n_states=n_states, n_actions=n_actions, length=length, p_min=p_min,
                         transition_probability=frozen_copy(transition_probability),
                         type_prefix_probability=frozen_copy(
                             np.cumprod(action_probability, axis=-1)))


def hockey_stick(p: ArrayLike, q: ArrayLike, eps: ArrayLike) -> np.ndarray:
    """Hockey-stick divergence ``sum_o max(p(o) - e^eps q(o), 0)`` of two distributions on
    the same outputs (the ``delta`` of Theorem 5.3's eq. 48 at ``eps``); ``eps`` may be an
    array."""
    p, q = require_array("p", p, ndim=1), require_array("q", q, shape=(len(p),))
    eps = require_array("eps", eps)
    return np.sum(np.maximum(p - np.exp(eps)[..., None] * q, 0.0), axis=-1)


def profile_epsilon(p: ArrayLike, q: ArrayLike, delta: float) -> float:
    """Smallest ``eps >= 0`` with ``max(H_eps(p||q), H_eps(q||p)) <= delta``: the privacy
    profile of the pair read at ``delta`` (``inf`` if mass on outputs the other distribution
    never produces exceeds ``delta``)."""
    p, q = require_array("p", p, ndim=1), require_array("q", q, shape=(len(p),))
    delta = require_probability("delta", delta)

    def excess(eps: float) -> float:
        return max(hockey_stick(p, q, eps), hockey_stick(q, p, eps)) - delta

    if excess(0.0) <= 0:
        return 0.0
    both = (p > 0) & (q > 0)
    top = np.max(np.abs(np.log(p[both] / q[both]))) if both.any() else 0.0
    if excess(top) > 0:
        return math.inf
    return float(optimize.brentq(excess, 0.0, top, xtol=1e-14, rtol=1e-12))


@dataclass(frozen=True)
class NeighbourAudit:
    """Theorem 5.3 checked for one expert set against all its add/remove-one neighbours
    (``changed[j] = (type, +1 | -1)``): ``delta_at_2eps[j]`` = ``max`` of both hockey-stick
    directions at ``2 eps'``; ``eps_at_bound[j]`` = the pair's smallest eps at the theorem's
    ``bound = L delta'``; ``eps_at_zero[j]`` = its largest ``|log p/q|`` over outputs (the
    eps at ``delta = 0``); ``nothing_excess[j]`` = the "nothing released" output's term of the
    hockey-stick at ``2 eps'`` (App. A's proof sums over prefixes only); ``eq4_excess[j]`` =
    ``max_tau [Pr(A(Pi)=tau) - e^{2eps'} Pr(A(Pi')=tau) - Pr(E_tau|Pi) delta']`` over prefix
    outputs and both directions (Lemma 5.4's eq. 4; ``<= 0`` if it holds)."""

    eps_prime: float
    delta_prime: float
    bound: float
    changed: np.ndarray
    delta_at_2eps: np.ndarray
    eps_at_bound: np.ndarray
    eps_at_zero: np.ndarray
    nothing_excess: np.ndarray
    eq4_excess: np.ndarray

    @property
    def holds(self) -> bool:
        """Whether every neighbour pair meets Theorem 5.3's ``(2 eps', L delta')``."""
        return bool(np.all(self.delta_at_2eps <= self.bound))


def algorithm2_threshold(eps_prime: float, delta_prime: float, p_min: float) -> float:
    """Alg. 2's noiseless threshold ``theta + (4/eps') log(1/delta')``, ``theta = c_min /
    p_min``, for explicit ``eps'``, ``delta'`` (rather than through ``T``, ``delta1``)."""
    eps_prime = require_epsilon(eps_prime, "eps_prime")
    delta_prime = require_delta(delta_prime, "delta_prime")
    p_min = require_probability("p_min", p_min, open_low=True)
    return 1 / -math.expm1(-eps_prime) / p_min + 4 / eps_prime * math.log(1 / delta_prime)


def audit_neighbours(model: OneRoundModel, multiplicities: ArrayLike, eps_prime: float,
                     delta_prime: float, add_types: ArrayLike | None = None,
                     threshold: float | None = None) -> NeighbourAudit:
    """Theorem 5.3 (Sharma et al. 2025) for the expert set ``multiplicities`` and each of its
    neighbours: adding one expert of any type in ``add_types`` (default: all) and removing
    one expert of any present type (if ``m >= 2``). The round uses Alg. 2's threshold
    (:func:`algorithm2_threshold`) unless ``threshold`` is given (e.g. a lower one, to see
    the inequality fail)."""
    base = _require_multiplicities(multiplicities, model.n_types)
    eps_prime = require_epsilon(eps_prime, "eps_prime")
    delta_prime = require_delta(delta_prime, "delta_prime")
    add_types = np.arange(model.n_types) if add_types is None else np.asarray(add_types)
    if threshold is None:
        threshold = algorithm2_threshold(eps_prime, delta_prime, model.p_min)
    changed = [(t, 1) for t in add_types]
    if base.sum() >= 2:
        changed += [(t, -1) for t in np.flatnonzero(base)]
    p = model.distribution(base, eps_prime, threshold)
    mass = model.prefix_mass(base)
    factor = math.exp(2 * eps_prime)
    results = []
    for t, sign in changed:
        other = base.copy()
        other[t] += sign
        q = model.distribution(other, eps_prime, threshold)
        other_mass = model.prefix_mass(other)
        eq4 = max(np.max(p[1:] - factor * q[1:] - mass * delta_prime),
                  np.max(q[1:] - factor * p[1:] - other_mass * delta_prime))
        nothing = max(p[0] - factor * q[0], q[0] - factor * p[0], 0.0)
        results.append((max(hockey_stick(p, q, 2 * eps_prime), hockey_stick(q, p, 2 * eps_prime)),
                        profile_epsilon(p, q, model.length * delta_prime),
                        _max_log_ratio(p, q), nothing, eq4))
    columns = np.array(results).T
    return NeighbourAudit(eps_prime=eps_prime, delta_prime=delta_prime,
                          bound=model.length * delta_prime, changed=np.array(changed),
                          delta_at_2eps=columns[0], eps_at_bound=columns[1],
                          eps_at_zero=columns[2], nothing_excess=columns[3],
                          eq4_excess=columns[4])


def search_worst_expert_set(model: OneRoundModel, m: int, eps_prime: float,
                            delta_prime: float, rng: np.random.Generator, n_moves: int,
                            concentration: float = 0.1) -> tuple[np.ndarray, NeighbourAudit]:
    """Adversarial search for Theorem 5.3: hill climbing over sets of ``m`` experts drawn from
    the model's types, maximising the largest privacy-profile eps at the theorem's
    ``delta = L delta'`` over all neighbours (the theorem holds iff it stays ``<= 2 eps'``).
    Start: ``rng.multinomial(m, rng.dirichlet(concentration 1))``; each move shifts one
    expert to another type (both drawn uniformly from ``rng``) and is kept unless it lowers
    the objective. Returns the best multiplicities and their audit."""
    m = require_int("m", m, minimum=2)
    n_moves = require_int("n_moves", n_moves, minimum=0)
    concentration = require_positive("concentration", concentration)
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    best = rng.multinomial(m, rng.dirichlet(np.full(model.n_types, concentration)))
    audit = audit_neighbours(model, best, eps_prime, delta_prime)
    for _ in range(n_moves):
        source = rng.choice(np.flatnonzero(best))
        target = rng.integers(model.n_types)
        trial = best.copy()
        trial[source] -= 1
        trial[target] += 1
        candidate = audit_neighbours(model, trial, eps_prime, delta_prime)
        if candidate.eps_at_bound.max() >= audit.eps_at_bound.max():
            best, audit = trial, candidate
    return best, audit


def binary_policy_types(n_states: int, n_actions: int, length: int,
                        p_min: float) -> np.ndarray:
    """Every time-dependent App. B.1 expert on a tabular MDP: in each (step, state) one
    greedy action of probability ``1 - (|A| - 1) p_min``, the others ``p_min``;
    ``(|A|^{L |S|}, L, S, A)``."""
    n_states, n_actions = require_int("n_states", n_states), require_int("n_actions", n_actions)
    length = require_int("length", length)
    p_min = require_probability("p_min", p_min, open_low=True)
    greedy = np.indices((n_actions,) * (length * n_states)).reshape(length * n_states, -1).T
    onehot = greedy.reshape(-1, length, n_states)[..., None] == np.arange(n_actions)
    return np.where(onehot, 1 - (n_actions - 1) * p_min, p_min)


def _max_log_ratio(p: np.ndarray, q: np.ndarray) -> float:
    """``max_o |log p(o)/q(o)|`` over outputs either distribution produces (``inf`` if one
    produces an output the other never does)."""
    either = (p > 0) | (q > 0)
    if np.any((p[either] == 0) | (q[either] == 0)):
        return math.inf
    return float(np.max(np.abs(np.log(p[either] / q[either]))))


def _require_multiplicities(multiplicities: ArrayLike, n_types: int) -> np.ndarray:
    """Integer numbers of experts per type, ``>= 0``, at least one expert."""
    multiplicities = require_array("multiplicities", multiplicities, shape=(n_types,),
                                   dtype=np.int64)
    if multiplicities.min() < 0 or multiplicities.sum() < 1:
        raise ValueError("multiplicities must be >= 0 with at least one expert")
    return multiplicities


def _require_distributions(name: str, array: np.ndarray) -> None:
    """Raise unless ``array`` holds probability distributions along its last axis."""
    if array.min() < 0 or not np.allclose(array.sum(axis=-1), 1.0, atol=1e-12):
        raise ValueError(f"{name} must be non-negative and sum to 1 along its last axis")
