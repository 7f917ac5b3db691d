"""Sharma et al. (2025), Sec. 3.2: what trajectory-level DP-SGD promises an expert who
contributes ``k`` trajectories (``sharma2025-group-attack``).

The run: ``experts`` experts of ``per_expert`` trajectories each, batches of ``batch``
trajectories Poisson-sampled at ``q = b / n``, ``steps`` steps, ``delta = 1/m``; its noise
multiplier ``s`` is the smallest that certifies ``target_eps`` at the trajectory level
(dp-accounting's PLD, to ``rtol``: :func:`dprl.sharma2025.accounting.noise_for_budget`).
Trial ``i`` is the lower bound on the expert-level eps of that run which the aligned attack
attains with ``k = group_sizes[i]`` planted trajectories
(:func:`dprl.sharma2025.expert_level.aligned_group_epsilon`), beside ``s`` and the
trajectory-level eps it certifies.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from dprl.accounting.pld import poisson_gaussian_epsilon
from dprl.engine.registry import Experiment, TrialConfig, register
from dprl.seeding import trial_index
from dprl.sharma2025.accounting import noise_for_budget
from dprl.sharma2025.expert_level import aligned_group_epsilon
from dprl.validation import require_epsilon, require_int, require_positive


@dataclasses.dataclass(frozen=True, kw_only=True)
class GroupAttackConfig(TrialConfig):
    """The trajectory-level run and the attack's group sizes (one per trial)."""

    experts: int = 3000
    per_expert: int = 20
    batch: int = 128
    steps: int = 5000
    target_eps: float = 1.0
    rtol: float = 1e-4
    group_sizes: tuple[int, ...] = (1, 2, 5, 10, 20)

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("experts", "per_expert", "batch", "steps"):
            require_int(name, getattr(self, name))
        require_epsilon(self.target_eps, "target_eps")
        require_positive("rtol", self.rtol)
        if self.batch > self.experts * self.per_expert:
            raise ValueError(f"batch must be at most the {self.experts * self.per_expert} "
                             f"trajectories, got {self.batch}")
        if len(self.group_sizes) != self.n_trials:
            raise ValueError(f"group_sizes must give one size per trial ({self.n_trials}), got "
                             f"{len(self.group_sizes)}")

    @property
    def trajectory_rate(self) -> float:
        """``q = b / n``, ``n`` the number of trajectories."""
        return self.batch / (self.experts * self.per_expert)

    @property
    def delta(self) -> float:
        """``1 / m``."""
        return 1 / self.experts


def group_attack_trials(config: GroupAttackConfig,
                        rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Per trial: the group size ``k``, the attack's expert-level eps, the noise multiplier
    and the trajectory-level eps it certifies (the same in every trial)."""
    s = noise_for_budget(config.target_eps, config.delta, config.trajectory_rate, config.steps,
                         rtol=config.rtol)
    eps = poisson_gaussian_epsilon(s, config.trajectory_rate, config.steps, config.delta)
    k = np.array([config.group_sizes[trial_index(rng)] for rng in rngs])
    attack = [aligned_group_epsilon(s, config.trajectory_rate, int(size), config.steps,
                                    config.delta) for size in k]
    return {"group_size": k, "expert_level_eps": np.array(attack),
            "noise_multiplier": np.full(k.shape, s), "trajectory_level_eps": np.full(k.shape, eps)}


GROUP_ATTACK = register(Experiment(
    id="sharma2025-group-attack",
    title="Sharma et al. (2025), Sec. 3.2: the expert-level eps an aligned attack attains "
          "against trajectory-level DP-SGD, by trajectories per expert",
    chapter="book/sharma2025/setting.ipynb",
    configs={"smoke": GroupAttackConfig(n_trials=2, root_seed=0, batch_size=2, experts=300,
                                        steps=50, target_eps=0.3, rtol=1e-2,
                                        group_sizes=(1, 3)),
             "paper": GroupAttackConfig(n_trials=5, root_seed=0, batch_size=5)},
    run_trials=group_attack_trials))
