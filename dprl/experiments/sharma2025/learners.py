"""Sharma et al. (2025), Sec. 6: the offline-RL chapter's first look at the learners
(``sharma2025-offline-rl-curves``): non-private CQL and BCQ (App. B.3's 2 x 256 networks,
Adam) trained on the demonstrations of ``n_experts`` of the book's CartPole experts (every
``expert_stride``-th, ``per_expert`` trajectories of 200 steps at ``p_min``, recorded from
``data_seed``), uniform batches, a target copy every ``target_every`` steps; the greedy
policy's mean return on ``eval_episodes`` 500-step episodes (start states from ``eval_seed``)
before training and every ``every`` steps; the networks' products take the ``kernels`` path
(:mod:`dprl.kernels`, ``"portable"``: the same bits on every vendor's CPU). Trial ``i``
trains ``algorithms[i]`` with the torch stream of ``numpy.random.default_rng(seeds[i])``,
the seeds the chapter used before this was a registered result (its numbers unchanged); any
trial still recomputes alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from dprl.engine.registry import Experiment, TrialConfig, register
from dprl.envs.cartpole import CartPoleVariants
from dprl.experiments.sharma2025.experts import classic_experts, experts_id
from dprl.kernel_paths import require_kernels
from dprl.seeding import trial_index
from dprl.sharma2025.datasets import record
from dprl.validation import require_int, require_probability


@dataclasses.dataclass(frozen=True, kw_only=True)
class LearnersConfig(TrialConfig):
    """The data, the learners (one per trial) and the evaluation (module docstring)."""

    env: str = "CartPole"
    experts_scale: str = "paper"
    expert_stride: int = 100
    n_experts: int = 30
    per_expert: int = 20
    p_min: float = 0.02
    data_seed: int = 0
    algorithms: tuple[str, ...] = ("CQL", "BCQ")
    seeds: tuple[int, ...] = (1, 2)
    steps: int = 3000
    every: int = 500
    target_every: int = 100
    batch: int = 64
    learning_rate: float = 1e-3
    eval_episodes: int = 50
    eval_seed: int = 7
    kernels: str = "portable"

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("expert_stride", "n_experts", "per_expert", "steps", "every",
                     "target_every", "batch", "eval_episodes"):
            require_int(name, getattr(self, name))
        require_probability("p_min", self.p_min, open_low=True)
        require_kernels(self.kernels)
        if self.env != "CartPole":
            raise ValueError(f"env must be 'CartPole', got {self.env!r}")
        if not len(self.algorithms) == len(self.seeds) == self.n_trials:
            raise ValueError("algorithms and seeds must give one learner per trial")


@lru_cache(maxsize=2)
def _transitions(config: LearnersConfig):
    """The training transitions (``ExpertTransitions.transitions``) of ``config``'s data."""
    from dprl.sharma2025.offline_rl import expert_transitions

    index = np.arange(config.n_experts) * config.expert_stride
    experts = classic_experts("CartPole", config.experts_scale).select(index)
    data = record(CartPoleVariants(horizon=200), experts, index, config.per_expert,
                  config.p_min, np.random.default_rng(config.data_seed))
    return expert_transitions(data).transitions


def learner_trials(config: LearnersConfig,
                   rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Per trial, ``returns``: the greedy mean return at steps ``0, every, ..., steps``."""
    from dprl.determinism import deterministic_torch, torch_generator
    from dprl.sharma2025.offline_rl import (greedy_returns, make_optimizer, sample_uniform,
                                            sgd_step)
    from dprl.sharma2025.qnetworks import frozen_copy, update_target
    from dprl.sharma2025.training import make_learner

    deterministic_torch(1)
    transitions, env = _transitions(config), CartPoleVariants(horizon=500)

    def evaluated(learner) -> float:
        return greedy_returns(learner, env, config.eval_episodes,
                              np.random.default_rng(config.eval_seed)).mean()

    curves = []
    for rng in rngs:
        i = trial_index(rng)
        generator = torch_generator(np.random.default_rng(config.seeds[i]))
        learner = make_learner("CartPole", config.algorithms[i], generator, config.kernels)
        target = frozen_copy(learner.q)
        optimizer = make_optimizer(learner, "adam", config.learning_rate)
        curve = [evaluated(learner)]
        for step in range(1, config.steps + 1):
            sgd_step(learner, target, sample_uniform(transitions, config.batch, generator),
                     optimizer)
            if step % config.target_every == 0:
                update_target(target, learner.q)
            if step % config.every == 0:
                curve.append(evaluated(learner))
        curves.append(curve)
    return {"returns": np.asarray(curves)}


OFFLINE_RL_CURVES = register(Experiment(
    id="sharma2025-offline-rl-curves",
    title="Sharma et al. (2025), Sec. 6: non-private CQL and BCQ on 30 CartPole experts' "
          "data (the offline-RL chapter's learning curves)",
    chapter="book/sharma2025/offline-rl.ipynb",
    configs={"smoke": LearnersConfig(n_trials=2, root_seed=0, batch_size=2,
                                     experts_scale="smoke", expert_stride=1, n_experts=3,
                                     per_expert=2, steps=20, every=10, target_every=5,
                                     eval_episodes=2),
             "paper": LearnersConfig(n_trials=2, root_seed=0, batch_size=1)},
    run_trials=learner_trials, after=(experts_id("CartPole"),)))
