"""An off-policy version of the chain (for Xie, Thomas & Miklau 2019, Sec. 2; our construction:
the paper's chain has a single action).

Action 0 is the chain's own (stay with probability ``p``), action 1 stays with
``alternative_stay_prob``. The target policy always takes action 0, so its value function is
the chain's; the behaviour policy takes action 0 with probability ``behaviour_prob``, so
``rho_t = 1 / behaviour_prob`` after action 0 and 0 after action 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dprl.envs.chain import ChainMDP
from dprl.envs.trajectories import Trajectories
from dprl.validation import require_array, require_probability


@dataclass(frozen=True)
class OffPolicyChain:
    """The chain with a second action, a behaviour policy and a target policy."""

    chain: ChainMDP = field(default_factory=ChainMDP)
    alternative_stay_prob: float = 0.8
    behaviour_prob: float = 0.5

    def __post_init__(self) -> None:
        if not isinstance(self.chain, ChainMDP):
            raise ValueError(f"chain must be a ChainMDP, got {type(self.chain).__name__}")
        object.__setattr__(self, "alternative_stay_prob", require_probability(
            "alternative_stay_prob", self.alternative_stay_prob))
        object.__setattr__(self, "behaviour_prob", require_probability(
            "behaviour_prob", self.behaviour_prob, open_low=True))

    @property
    def behaviour_chain(self) -> ChainMDP:
        """The state process under the behaviour policy: a chain that stays with probability
        ``b p + (1 - b) p_alt``."""
        b = self.behaviour_prob
        stay = b * self.chain.stay_prob + (1 - b) * self.alternative_stay_prob
        return ChainMDP(n_states=self.chain.n_states, stay_prob=stay, goal=self.chain.goal,
                        horizon=self.chain.horizon, gamma=self.chain.gamma,
                        start_distribution=self.chain.start_distribution)

    def sample(self, n_trajectories: int | tuple[int, ...],
               rng: np.random.Generator) -> tuple[Trajectories, np.ndarray]:
        """Episodes of the behaviour policy and their importance ratios ``pi / pi_b``
        ``(*batch, H)`` (0 on padding)."""
        return self.chain._simulate(n_trajectories, rng,
                                    (self.alternative_stay_prob, self.behaviour_prob))

    def exact_statistics(self, features) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Exact off-policy ``(A, b, C)`` per transition (the ``"transitions"`` normalisation:
        sums over all transitions over their expected number): with ``D`` the behaviour's
        expected visits, ``C = Phi^T D Phi``, ``A = C - gamma Phi^T D P_pi Phi`` (the ratio
        turns the behaviour's next state into the target's), ``b = Phi^T D r_pi``."""
        features = require_array("features", features, shape=(self.chain.n_states, None))
        visits = self.behaviour_chain.expected_visit_counts()
        weights = visits / visits.sum()
        C = features.T @ (weights[:, None] * features)
        P = self.chain.live_matrix()
        A = C - self.chain.gamma * features.T @ (weights[:, None] * (P @ features))
        b = features.T @ (weights * self.chain.expected_rewards())
        return A, b, C
