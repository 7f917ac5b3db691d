"""Utility of Algorithm 1 in a discrete state space: Proposition 10 of Wang & Hegde (2019)
and the tabular simulation it is checked against.

**The bound.** For n states, J = 1 (one noise path for the whole run) and gamma < 1,
Prop. 10 states ``E[(1/n) ||v' - v*||_1] <= 2 sqrt(2) sigma / (sqrt(n pi) (1 - gamma))``,
v' the value function learned, v* the optimal one. Our copy of the paper is garbled at the
denominator; we read ``sqrt(n pi)`` (the ``E|Z| = sigma sqrt(2/pi)`` of a Gaussian averaged
over n independent states gives exactly this form). Appendix D (the proof, via the linear
program of the MDP) is not public.

**The simulation.** Tabular Algorithm 1 in its synchronous (generative-model) form: every
iteration draws one next state for every (state, action) and updates
``Q(s, a) += alpha_k (r + gamma max_b [Q(s', b) + g_b(s')] - Q(s, a) - g_a(s))`` (Alg. 1
lines 19-22 with a table for Q), g the noise at the n states, fixed for the whole run
(J = 1), step ``alpha_k = 1 / (1 + (1 - gamma) (k + 1))`` (the rescaled linear step of
synchronous Q-learning). In terms of the released ``Q~ = Q + g`` the update is ordinary
Q-learning started from ``Q~_0 = g``, so the released function tends to Q* whatever sigma,
while the table Q itself tends to ``Q* - g``.

**The MDP.** The line MDP of Sec. 4 (:mod:`dprl.envs.line_mdp`) on n evenly spaced states
``x_i = i / (n - 1)``: a move by ``max_move u``, ``u ~ U[0, 1)``, up (action 0) or down
(action 1) is rounded to the nearest state (capped at the ends); the reward is
``0.5 - |x' - 0.5|`` at the state reached; discounted by gamma.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from dprl.envs.line_mdp import N_ACTIONS, LineMDP
from dprl.validation import (require_array, require_in_bounds, require_int, require_nonnegative,
                             require_positive, require_probability)


@dataclass(frozen=True)
class DiscreteLine:
    """The line MDP of Wang & Hegde (2019, Sec. 4) on ``n_states`` evenly spaced states of
    [0, 1] with discount ``gamma`` (module docstring): exact transition matrices and
    expected rewards, and sampling of next states for many runs at once."""

    n_states: int
    gamma: float
    max_move: float = 0.25

    def __post_init__(self) -> None:
        require_int("n_states", self.n_states, minimum=2)
        require_probability("gamma", self.gamma, open_high=True)
        require_positive("max_move", self.max_move)
        if self.max_move > 1:
            raise ValueError(f"max_move must be <= 1, got {self.max_move}")

    @property
    def states(self) -> np.ndarray:
        """The state positions x_i = i / (n - 1), (n,)."""
        return np.linspace(0.0, 1.0, self.n_states)

    @property
    def rewards(self) -> np.ndarray:
        """Reward on reaching each state, ``0.5 - |x - 0.5|`` (n,) (App. E.1)."""
        return LineMDP.reward(self.states)

    def _lowest_targets(self) -> np.ndarray:
        """The lower end of the uniform target window of each (action, state), (A, n)."""
        return self.states - np.array([0.0, self.max_move])[:, None]

    def transition_matrices(self) -> np.ndarray:
        """``P[a, i, j]``, the chance that action a moves state i to state j (A, n, n):
        the uniform window ``[low, low + max_move]`` cut by the rounding cells
        ``[x_j - h/2, x_j + h/2)`` (the end cells unbounded, which is the cap)."""
        h = 1.0 / (self.n_states - 1)
        edges = self.states[:-1] + h / 2
        low = self._lowest_targets()[..., None]
        below = np.clip((edges - low) / self.max_move, 0.0, 1.0)
        zeros, ones = np.zeros(low.shape), np.ones(low.shape)
        return np.diff(np.concatenate([zeros, below, ones], axis=-1), axis=-1)

    def expected_rewards(self) -> np.ndarray:
        """``R[a, i] = sum_j P[a, i, j] r(x_j)`` (A, n)."""
        return self.transition_matrices() @ self.rewards

    def next_states(self, uniforms: ArrayLike) -> np.ndarray:
        """Indices of the next states for uniforms (..., A, n) in [0, 1): state i under
        action a moves to the state nearest ``low[a, i] + max_move u`` (clipped to [0, 1])."""
        uniforms = require_in_bounds("uniforms", require_array("uniforms", uniforms), 0.0, 1.0)
        if uniforms.shape[-2:] != (N_ACTIONS, self.n_states):
            raise ValueError(f"uniforms must end with shape ({N_ACTIONS}, {self.n_states}), "
                             f"got {uniforms.shape}")
        target = self._lowest_targets() + self.max_move * uniforms
        index = np.rint(target * (self.n_states - 1)).astype(np.int64)
        return np.clip(index, 0, self.n_states - 1)

    def optimal_q(self, tol: float = 1e-12) -> np.ndarray:
        """Q* (A, n) by value iteration (Bellman 1957), ``Q <- R + gamma P max_a Q``, until
        successive iterates differ by at most ``tol`` (then ``||Q - Q*||_inf <= tol gamma /
        (1 - gamma)``)."""
        tol = require_positive("tol", tol)
        matrices, rewards = self.transition_matrices(), self.expected_rewards()
        q = np.zeros_like(rewards)
        while True:
            new = rewards + self.gamma * matrices @ q.max(axis=0)
            if np.max(np.abs(new - q)) <= tol:
                return new
            q = new


def prop10_bound(sigma: float, n_states: int, gamma: float) -> float:
    """Prop. 10 of Wang & Hegde (2019), as we read it: ``E[(1/n) ||v' - v*||_1] <=
    2 sqrt(2) sigma / (sqrt(n pi) (1 - gamma))`` for J = 1 (module docstring)."""
    sigma = require_nonnegative("sigma", sigma)
    n_states = require_int("n_states", n_states)
    gamma = require_probability("gamma", gamma, open_high=True)
    return 2 * math.sqrt(2) * sigma / (math.sqrt(n_states * math.pi) * (1 - gamma))


def noisy_q_learning(mdp: DiscreteLine, noise: ArrayLike, n_iterations: int,
                     rngs: Sequence[np.random.Generator]) -> np.ndarray:
    """Tabular Algorithm 1 of Wang & Hegde (2019) with J = 1, synchronous form (module
    docstring): R runs, run r with the fixed noise ``noise[r]`` (A, n) at the states and
    one ``random((A, n))`` draw from ``rngs[r]`` per iteration. Returns the table Q
    (R, A, n); the released function is ``Q + noise``."""
    if not isinstance(mdp, DiscreteLine):
        raise ValueError(f"mdp must be a DiscreteLine, got {type(mdp).__name__}")
    rngs = list(rngs)
    noise = require_array("noise", noise, shape=(len(rngs), N_ACTIONS, mdp.n_states))
    if not all(isinstance(rng, np.random.Generator) for rng in rngs):
        raise ValueError("rngs must be numpy Generators, one per run")
    n_iterations = require_int("n_iterations", n_iterations)
    rewards, runs = mdp.rewards, np.arange(len(rngs))[:, None, None]
    q = np.zeros(noise.shape)
    for k in range(n_iterations):
        following = mdp.next_states(np.stack([rng.random(noise.shape[1:]) for rng in rngs]))
        released = q + noise
        target = rewards[following] + mdp.gamma * released.max(axis=1)[runs, following]
        q += (target - released) / (1 + (1 - mdp.gamma) * (k + 1))
    return q


def mean_absolute_error(values: ArrayLike, reference: ArrayLike) -> np.ndarray:
    """``(1/n) ||v - v*||_1`` over the last axis (the states), the utility loss of
    Prop. 10 (Wang & Hegde 2019)."""
    values = require_array("values", values)
    reference = require_array("reference", reference)
    if values.shape[-1:] != reference.shape[-1:]:
        raise ValueError(f"values {values.shape} and reference {reference.shape} must have "
                         "the same number of states")
    return np.mean(np.abs(values - reference), axis=-1)
