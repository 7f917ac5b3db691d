"""Xie et al. (2019), Sec. 7: the policy evaluated on Mountain Car
(``xie2019-mountain-car-policy``), learned by Watkins's Q(lambda) with the order-5 Fourier
basis (Konidaris et al. 2011; the paper says "Q-learning"; one-step Q-learning did not reach
the goal reliably in our runs, lambda = 0.9 does): its weights, its learning curve and the
returns of its greedy policy. The runs that evaluate it: :mod:`~.mountain_car`."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from dprl.control.linear_q import greedy_policy, q_learning
from dprl.envs import MountainCar, mountain_car_features
from dprl.engine.registry import Experiment, TrialConfig, register
from dprl.engine.results import current_arrays
from dprl.seeding import trial_generator


@dataclasses.dataclass(frozen=True, kw_only=True)
class PolicyConfig(TrialConfig):
    """Q(lambda) settings for the evaluated policy (stated in the chapter)."""

    order: int = 5
    step: float = 0.002
    trace_decay: float = 0.9
    n_episodes: int = 300
    n_evaluation: int = 1000


def policy_trials(config: PolicyConfig,
                  rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Per trial: Q(lambda) weights ``(3, d)``, the learning curve and the greedy returns."""
    features = mountain_car_features(config.order)
    env = MountainCar()
    out = {"weights": [], "training_returns": [], "greedy_returns": []}
    for rng in rngs:
        learned = q_learning(env, features, config.step * features.step_size_scaling(),
                             config.n_episodes, rng, epsilon=0.0,
                             trace_decay=config.trace_decay)
        episodes = env.simulate(config.n_evaluation, greedy_policy(learned.weights[0],
                                                                   features), rng)
        out["weights"].append(learned.weights[0])
        out["training_returns"].append(learned.returns[0])
        out["greedy_returns"].append(episodes.rewards.sum(axis=-1))
    return {key: np.stack(value) for key, value in out.items()}


POLICY = register(Experiment(
    id="xie2019-mountain-car-policy",
    title="Xie et al. (2019), Mountain Car: the evaluated policy (Q(lambda), Fourier order 5)",
    chapter="book/xie2019/mountain-car.ipynb",
    configs={"smoke": PolicyConfig(n_trials=1, root_seed=1998, batch_size=1, n_episodes=30,
                                   n_evaluation=5),
             "paper": PolicyConfig(n_trials=1, root_seed=1998, batch_size=1)},
    run_trials=policy_trials))


@lru_cache(maxsize=4)
def policy_weights(scale: str) -> np.ndarray:
    """The evaluated policy's weights ``(3, 36)``: trial 0 of ``xie2019-mountain-car-policy``
    at ``scale``. At paper scale they are read from the committed result, which must be
    current (the spot-check of committed results recomputes that trial); at smoke scale
    they are recomputed."""
    if scale == "paper":
        return current_arrays(POLICY.id)["weights"][0]
    config = POLICY.config(scale)
    return policy_trials(config, [trial_generator(config.root_seed, 0)])["weights"][0]
