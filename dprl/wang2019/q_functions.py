"""The action-value functions of Wang & Hegde (2019)'s Q-learning
(:mod:`dprl.wang2019.q_learning`), batched over runs: the authors' ReLU DQN (:class:`MLPQ`, 1-16-16-2, PyTorch's initialisation,
hand-written backpropagation) and linear action values (:class:`LinearQ`; one-hot bins make
it tabular Q-learning, :func:`tabular_q`). Parameters carry a leading run axis
(:data:`Params`), and every operation acts on each run separately.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dprl.envs.line_mdp import N_ACTIONS
from dprl.validation import require_int

#: Parameters of R runs: a tuple of arrays, each with a leading run axis.
Params = tuple[np.ndarray, ...]


@dataclass(frozen=True)
class MLPQ:
    """A ReLU network ``s -> (Q(s, a))_a`` (the authors' DQN: 1-16-16-2), with PyTorch's
    default ``nn.Linear`` initialisation ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` for weights
    and biases and hand-written backpropagation, batched over runs (float64; activations
    kept feature-major, (R, features, N), so the long axis is innermost)."""

    hidden: tuple[int, ...] = (16, 16)
    n_actions: int = N_ACTIONS

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden", tuple(require_int("hidden", h) for h in self.hidden))
        object.__setattr__(self, "n_actions", require_int("n_actions", self.n_actions, 2))

    def init(self, rng: np.random.Generator) -> Params:
        """One run's initial parameters ``(W_0, b_0, W_1, b_1, ...)`` of the authors' DQN
        (Wang & Hegde 2019, Sec. 4; PyTorch's ``nn.Linear`` law), ``W_k`` shaped (out, in),
        each weight matrix drawn before its bias."""
        sizes, params = (1, *self.hidden, self.n_actions), []
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            bound = 1 / math.sqrt(fan_in)
            params += [rng.uniform(-bound, bound, (fan_out, fan_in)),
                       rng.uniform(-bound, bound, fan_out)]
        return tuple(params)

    def forward(self, params: Params, states: np.ndarray) -> tuple[np.ndarray, list]:
        """``Q_theta`` of Wang & Hegde (2019, Alg. 1) at ``states`` (R, N) as (R, N, A), and
        the activations for :meth:`backward` (the first layer, of width 1, as an outer
        product)."""
        x, cache = states[:, None, :], []
        for k in range(0, len(params), 2):
            z = params[k] * x if k == 0 else np.matmul(params[k], x)
            z += params[k + 1][..., None]
            cache.append((x, z))
            x = np.maximum(z, 0.0) if k + 2 < len(params) else z
        return x.transpose(0, 2, 1), cache

    @staticmethod
    def backward(params: Params, cache: list, dq: np.ndarray) -> Params:
        """Gradients of ``sum(dq * Q)`` with respect to every parameter, for the SGD step of
        Wang & Hegde (2019, Alg. 1 line 22), by backpropagation (Rumelhart, Hinton & Williams
        1986; ReLU' = 1{z > 0}, as PyTorch)."""
        grads, upstream = [], dq.transpose(0, 2, 1)
        for k in reversed(range(len(cache))):
            x, z = cache[k]
            if k + 1 < len(cache):
                upstream = upstream * (z > 0)
            grads = [np.matmul(upstream, x.transpose(0, 2, 1)), upstream.sum(axis=2)] + grads
            if k:
                upstream = np.matmul(params[2 * k].transpose(0, 2, 1), upstream)
        return tuple(grads)


@dataclass(frozen=True, eq=False)
class LinearQ:
    """Linear action values ``Q(s, a) = phi(s) . w_a`` from zero weights; ``features`` maps
    states (R, N) to (R, N, n_features). One-hot bins (:func:`tabular_q`) make it tabular
    Q-learning on a discretised state space (Watkins 1989)."""

    features: Callable[[np.ndarray], np.ndarray]
    n_features: int
    n_actions: int = N_ACTIONS

    def __post_init__(self) -> None:
        if not callable(self.features):
            raise ValueError("features must be callable")
        object.__setattr__(self, "n_features", require_int("n_features", self.n_features))
        object.__setattr__(self, "n_actions", require_int("n_actions", self.n_actions, 2))

    def init(self, rng: np.random.Generator) -> Params:
        """Zero initial weights ``(W,)`` of linear Q-learning (Watkins 1989), W shaped
        (n_features, A) (``rng`` unused: no randomness)."""
        return (np.zeros((self.n_features, self.n_actions)),)

    def forward(self, params: Params, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``Q_theta = phi(s) W`` (Wang & Hegde 2019, Alg. 1, with a linear Q) at ``states``
        (R, N) as (R, N, A), and the features."""
        phi = self.features(states)
        return np.matmul(phi, params[0]), phi

    @staticmethod
    def backward(params: Params, phi: np.ndarray, dq: np.ndarray) -> Params:
        """Gradient of ``sum(dq * Q)``, ``phi^T dq``, for the SGD step of Wang & Hegde (2019,
        Alg. 1 line 22)."""
        return (np.matmul(phi.transpose(0, 2, 1), dq),)


def tabular_q(n_bins: int, n_actions: int = N_ACTIONS) -> LinearQ:
    """Tabular Q-learning (Watkins 1989) on ``n_bins`` equal cells of [0, 1] as a
    :class:`LinearQ` with one-hot features (s = 1 falls in the last cell)."""
    n_bins = require_int("n_bins", n_bins)
    eye = np.eye(n_bins)

    def one_hot(states: np.ndarray) -> np.ndarray:
        return eye[np.minimum((states * n_bins).astype(np.int64), n_bins - 1)]

    return LinearQ(one_hot, n_bins, n_actions)


Learner = MLPQ | LinearQ
