"""Small policy networks for many experts at once: ``obs -> h tanh units -> action logits``.

The CartPole and Acrobot experts of the book (a stand-in for the PPO agents of Sharma et al.
2025, App. B.1) are one-hidden-layer networks. ``m`` networks are held as one flat parameter
matrix ``(m, P)`` and evaluated together. Products are written as explicit sums over the
(few) inputs and hidden units, in a fixed order, with elementwise operations only: an
expert's outputs are then the same bits whatever other experts it is evaluated with.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dprl.validation import require_array, require_int


def n_parameters(obs_dim: int, n_hidden: int, n_actions: int) -> int:
    """Parameters of one network: ``W1 (d, h)``, ``b1 (h,)``, ``W2 (h, A)``, ``b2 (A,)``."""
    return obs_dim * n_hidden + n_hidden + n_hidden * n_actions + n_actions


@dataclass(frozen=True)
class TanhPolicies:
    """``m`` networks ``logits = b2 + W2^T tanh(b1 + W1^T o)`` with flat ``parameters``
    ``(m, P)`` laid out as ``W1, b1, W2, b2`` (row-major); greedy action = argmax of the
    logits (lowest index on ties). Implements
    :class:`dprl.sharma2025.experts.ExpertPopulation`."""

    parameters: np.ndarray
    obs_dim: int
    n_hidden: int
    n_actions: int

    def __post_init__(self) -> None:
        d = require_int("obs_dim", self.obs_dim)
        h = require_int("n_hidden", self.n_hidden)
        a = require_int("n_actions", self.n_actions, minimum=2)
        require_array("parameters", self.parameters, shape=(None, n_parameters(d, h, a)))

    @property
    def n_experts(self) -> int:
        """The number of networks ``m``."""
        return self.parameters.shape[0]

    def _layers(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        d, h, a = self.obs_dim, self.n_hidden, self.n_actions
        cuts = np.cumsum([d * h, h, h * a])
        w1, b1, w2, b2 = np.split(np.asarray(self.parameters, dtype=float), cuts, axis=1)
        return w1.reshape(-1, d, h), b1, w2.reshape(-1, h, a), b2

    def logits(self, observations: np.ndarray) -> np.ndarray:
        """Action logits ``(m, n, A)`` for observations ``(m, n, d)`` (expert ``i`` on
        ``observations[i]``) or ``(1, n, d)`` (every expert on the same ones)."""
        obs = require_array("observations", observations, ndim=3)
        if obs.shape[0] not in (1, self.n_experts) or obs.shape[2] != self.obs_dim:
            raise ValueError(f"observations must have shape (1 or {self.n_experts}, n, "
                             f"{self.obs_dim}), got {obs.shape}")
        w1, b1, w2, b2 = self._layers()
        hidden = np.broadcast_to(b1[:, None, :], (self.n_experts, obs.shape[1], self.n_hidden))
        for k in range(self.obs_dim):
            hidden = hidden + obs[:, :, k, None] * w1[:, None, k, :]
        hidden = np.tanh(hidden)
        out = np.broadcast_to(b2[:, None, :], (self.n_experts, obs.shape[1], self.n_actions))
        for j in range(self.n_hidden):
            out = out + hidden[:, :, j, None] * w2[:, None, j, :]
        return out

    def select(self, index: np.ndarray) -> TanhPolicies:
        """The networks ``index`` (integer indices), in that order."""
        return TanhPolicies(self.parameters[np.asarray(index, dtype=np.int64)], self.obs_dim,
                            self.n_hidden, self.n_actions)

    def greedy_actions(self, observations: np.ndarray) -> np.ndarray:
        """The most probable action of every expert at every observation, ``(m, n)`` int64."""
        return self.logits(observations).argmax(axis=2).astype(np.int64)
