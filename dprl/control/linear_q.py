"""Q-learning (Watkins 1989) with linear action values ``Q(o, a) = w_a . phi(o)``, and the
policies it yields, for any vectorised environment (:class:`dprl.envs.episodes.VectorEnv`) and
feature map ``phi`` (e.g. the Fourier basis of Konidaris et al. 2011).

Xie, Thomas & Miklau (2019, Sec. 7) evaluate a Mountain Car policy "obtained by Q-learning with
the fifth order Fourier basis", and off-policy use it as the behaviour policy; the learned
weights give the greedy policy, and :class:`EpsilonGreedyPolicy` / :class:`SoftmaxPolicy` make
it stochastic with known action probabilities (for importance ratios).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dprl.envs.episodes import VectorEnv, sample_actions
from dprl.validation import (frozen_copy, require_array, require_int, require_positive,
                             require_probability)

#: ``phi``: observations ``(n, d_obs)`` to features ``(n, d)``.
FeatureMap = Callable[[np.ndarray], np.ndarray]


def epsilon_greedy_probabilities(q: np.ndarray, epsilon: float) -> np.ndarray:
    """``(n, A)`` epsilon-greedy probabilities for action values ``q`` ``(n, A)``:
    ``epsilon / A`` on every action plus ``1 - epsilon`` on the first maximiser."""
    epsilon = require_probability("epsilon", epsilon)
    greedy = np.zeros(q.shape)
    greedy[np.arange(q.shape[0]), np.argmax(q, axis=1)] = 1.0
    return epsilon / q.shape[1] + (1.0 - epsilon) * greedy


def _weights(weights) -> np.ndarray:
    """Read-only ``(A, d)`` linear action-value weights, ``A >= 2``."""
    weights = require_array("weights", weights, ndim=2)
    if weights.shape[0] < 2:
        raise ValueError(f"weights must have one row per action (>= 2), got {weights.shape}")
    return frozen_copy(weights)


@dataclass(frozen=True, eq=False)
class EpsilonGreedyPolicy:
    """Epsilon-greedy in the linear action values ``w_a . phi(o)`` (Sutton & Barto 2018,
    Sec. 2.2); ``epsilon = 0`` is the greedy policy (ties to the lowest action)."""

    weights: np.ndarray
    features: FeatureMap
    epsilon: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", _weights(self.weights))
        object.__setattr__(self, "epsilon", require_probability("epsilon", self.epsilon))

    def probabilities(self, observations: np.ndarray) -> np.ndarray:
        """``(n, A)`` action probabilities at ``observations`` ``(n, d_obs)``."""
        q = self.features(observations) @ self.weights.T
        return epsilon_greedy_probabilities(q, self.epsilon)

    def __call__(self, observations: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Actions drawn from :meth:`probabilities` (one uniform per observation)."""
        return sample_actions(self.probabilities(observations), rng)


@dataclass(frozen=True, eq=False)
class SoftmaxPolicy:
    """Softmax (Boltzmann) in the linear action values: ``pi(a | o)`` proportional to
    ``exp(w_a . phi(o) / temperature)`` (the HIV behaviour policy of Xie et al. 2019, Sec. 7)."""

    weights: np.ndarray
    features: FeatureMap
    temperature: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", _weights(self.weights))
        object.__setattr__(self, "temperature",
                           require_positive("temperature", self.temperature))

    def action_values(self, observations: np.ndarray) -> np.ndarray:
        """``(n, A)`` linear action values ``w_a . phi(o)`` at ``observations`` ``(n, d_obs)``."""
        return self.features(observations) @ self.weights.T

    def probabilities(self, observations: np.ndarray,
                      action_values: np.ndarray | None = None) -> np.ndarray:
        """``(n, A)`` action probabilities at ``observations`` ``(n, d_obs)``, from their
        :meth:`action_values` when given (the same bits)."""
        q = self.action_values(observations) if action_values is None else action_values
        z = q / self.temperature
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def __call__(self, observations: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Actions drawn from :meth:`probabilities` (one uniform per observation)."""
        return sample_actions(self.probabilities(observations), rng)


def greedy_policy(weights, features: FeatureMap) -> EpsilonGreedyPolicy:
    """The greedy policy ``argmax_a w_a . phi(o)`` (epsilon-greedy with ``epsilon = 0``)."""
    return EpsilonGreedyPolicy(weights, features, 0.0)


@dataclass(frozen=True)
class QLearningResult:
    """``weights``: ``(n_agents, A, d)`` final weights of each agent; ``returns`` and
    ``lengths``: ``(n_agents, n_episodes)`` undiscounted return and length of every training
    episode (the learning curve)."""

    weights: np.ndarray
    returns: np.ndarray
    lengths: np.ndarray


def _step_sizes(step_sizes, d: int) -> np.ndarray:
    """Per-feature step sizes as a ``(d,)`` array of positive numbers (a scalar is broadcast)."""
    step_sizes = np.broadcast_to(require_array("step_sizes", step_sizes), (d,))
    if np.any(step_sizes <= 0):
        raise ValueError("step_sizes must be > 0")
    return step_sizes


def q_learning(env: VectorEnv, features: FeatureMap, step_sizes, n_episodes: int,
               rng: np.random.Generator, *, epsilon: float, gamma: float = 1.0,
               trace_decay: float = 0.0, n_agents: int = 1) -> QLearningResult:
    """Watkins's Q(lambda) (Watkins 1989; Sutton & Barto 2018, Sec. 12.10) with linear action
    values ``w_a . phi(o)``, from ``w = 0``, epsilon-greedy behaviour and per-feature
    ``step_sizes`` (scalar or ``(d,)``, e.g. ``alpha * FourierBasis.step_size_scaling()``,
    Konidaris et al. 2011). With ``trace_decay = lambda = 0`` it is one-step Q-learning:

    ``delta = r + gamma * max_b w_b . phi(o') - w_a . phi(o)``;
    ``z <- gamma * lambda * 1{a greedy} * z``, ``z_a <- z_a + phi(o)``; ``w <- w + step_sizes *
    delta * z`` (accumulating traces, cut after an exploratory action).

    No bootstrap on termination; bootstrapping from ``o'`` on truncation at ``env.horizon``
    (a time limit, not a terminal state). ``n_agents`` independent agents learn at once, each
    on its own copy of the environment, their episodes in lockstep.
    """
    n_episodes, n_agents = require_int("n_episodes", n_episodes), require_int("n_agents", n_agents)
    hyper = (require_probability("epsilon", epsilon), require_probability("gamma", gamma),
             require_probability("trace_decay", trace_decay))
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    returns, lengths = np.zeros((n_agents, n_episodes)), np.zeros((n_agents, n_episodes), int)
    weights = steps = None
    for episode in range(n_episodes):
        states = env.reset(n_agents, rng)
        if weights is None:
            d = features(env.observe(states)).shape[1]
            weights, steps = np.zeros((n_agents, env.n_actions, d)), _step_sizes(step_sizes, d)
        returns[:, episode], lengths[:, episode] = _learn_episode(
            env, features, weights, steps, states, rng, *hyper)
    return QLearningResult(weights, returns, lengths)


def _learn_episode(env: VectorEnv, features: FeatureMap, weights: np.ndarray,
                   steps: np.ndarray, states: np.ndarray, rng: np.random.Generator,
                   epsilon: float, gamma: float, trace_decay: float
                   ) -> tuple[np.ndarray, np.ndarray]:
    """One episode of every agent from ``states``, updating ``weights`` in place; returns
    each agent's undiscounted return and episode length."""
    n_agents = weights.shape[0]
    returns, lengths = np.zeros(n_agents), np.zeros(n_agents, dtype=int)
    live, phi, traces = np.arange(n_agents), features(env.observe(states)), np.zeros_like(weights)
    for _ in range(env.horizon):
        rows = np.arange(live.size)
        q = np.einsum("kad,kd->ka", weights[live], phi)
        actions = sample_actions(epsilon_greedy_probabilities(q, epsilon), rng)
        states, rewards, done = env.step(states, actions)
        phi_next = features(env.observe(states))
        q_next = np.einsum("kad,kd->ka", weights[live], phi_next).max(axis=1)
        delta = rewards + gamma * np.where(done, 0.0, q_next) - q[rows, actions]
        greedy = actions == np.argmax(q, axis=1)
        traces[live] *= (gamma * trace_decay * greedy)[:, None, None]
        traces[live, actions] += phi
        weights[live] += steps * delta[:, None, None] * traces[live]
        returns[live] += rewards
        lengths[live] += 1
        live, states, phi = live[~done], states[~done], phi_next[~done]
        if live.size == 0:
            break
    return returns, lengths
