"""Xie et al. (2019), Sec. 7: the reference problem of the Mountain Car MSPBE
(``xie2019-mountain-car-reference``): ``A, b, C`` of Eq. 2.1 estimated from
``reference_episodes`` episodes drawn with a fixed public seed, on-policy (the evaluated,
greedy policy; trial 0) and off-policy (its epsilon-greedy behaviour with the uniform target;
trial 1). Every run of :mod:`~.mountain_car` measures its MSPBE against them; at paper scale
they read this committed result instead of simulating the 2 x 20 000 episodes again."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from dprl.control.linear_q import EpsilonGreedyPolicy, greedy_policy
from dprl.engine.registry import Experiment, TrialConfig, own_settings, register
from dprl.engine.results import stored_at_paper_settings
from dprl.envs import MountainCar, mountain_car_features
from dprl.envs.episodes import Episodes, UniformPolicy, feature_table
from dprl.envs.episodes import importance_ratios as episode_ratios
from dprl.experiments.xie2019.mountain_car_policy import POLICY, policy_weights
from dprl.seeding import trial_index
from dprl.xie2019.baselines import episode_statistics

#: Episodes simulated at once; the statistics are the mean of the chunks' means.
_REFERENCE_CHUNK = 2000


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReferenceConfig(TrialConfig):
    """The reference problem's settings, as :class:`~.mountain_car.MountainCarConfig` names
    them; trial 0 is on-policy, trial 1 off-policy, each from the public ``reference_seed``
    (the trial's own stream is not used: every experiment measures against the same
    problem)."""

    policy_scale: str = "paper"
    behaviour_epsilon: float = 0.5
    gamma: float = 0.99
    reference_episodes: int = 20000
    reference_seed: int = 1


def policy_pair(policy_scale: str, behaviour_epsilon: float):
    """The features, the evaluated (greedy) policy and the off-policy behaviour
    (epsilon-greedy in the same learned Q)."""
    weights, features = policy_weights(policy_scale), mountain_car_features()
    behaviour = EpsilonGreedyPolicy(weights, features, behaviour_epsilon)
    return features, greedy_policy(weights, features), behaviour


def importance_ratios(episodes: Episodes) -> np.ndarray:
    """``rho_t = pi(a_t | o_t) / pi_b(a_t | o_t)`` for the uniform target (1/3 each), 0 on
    padding, from the behaviour probabilities the episodes recorded."""
    return episode_ratios(UniformPolicy(MountainCar().n_actions), episodes)


def reference_statistics(config: TrialConfig, off_policy: bool
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``A, b, C`` (Eq. 2.1) of the on- or off-policy problem of ``config`` (any config with
    :class:`ReferenceConfig`'s fields): read from the committed
    ``xie2019-mountain-car-reference`` where the settings are its paper settings (that
    result must be current), else simulated (:func:`simulated_statistics`)."""
    stored = stored_at_paper_settings(REFERENCE.id, config)
    if stored is None:
        return simulated_statistics(*own_settings(config, ReferenceConfig), off_policy)
    return tuple(stored[name][int(off_policy)] for name in ("A", "b", "C"))



@lru_cache(maxsize=8)
def simulated_statistics(policy_scale: str, behaviour_epsilon: float, gamma: float,
                         n_episodes: int, seed: int, off_policy: bool) -> tuple:
    """``A, b, C`` from ``n_episodes`` episodes drawn with the public ``seed``, in chunks
    (mean of chunk means)."""
    features, target, behaviour = policy_pair(policy_scale, behaviour_epsilon)
    rng = np.random.default_rng([seed, int(off_policy)])
    parts = []
    for _ in range(0, n_episodes, _REFERENCE_CHUNK):
        episodes = MountainCar().simulate(_REFERENCE_CHUNK, behaviour if off_policy else target,
                                          rng)
        trajectories, table = feature_table(episodes, features)
        ratios = importance_ratios(episodes) if off_policy else None
        parts.append(episode_statistics(trajectories, table, gamma, ratios))
    return tuple(np.mean([p[k] for p in parts], axis=0) for k in range(3))


def reference_trials(config: ReferenceConfig,
                     rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Per trial (0: on-policy, 1: off-policy), ``A``, ``b`` and ``C`` simulated."""
    settings = own_settings(config, ReferenceConfig)
    parts = [simulated_statistics(*settings, bool(trial_index(rng))) for rng in rngs]
    return {name: np.stack([part[k] for part in parts]) for k, name in enumerate("AbC")}


REFERENCE = register(Experiment(
    id="xie2019-mountain-car-reference",
    title="Xie et al. (2019), Mountain Car: the reference problem of the MSPBE (A, b, C from "
          "2 x 20 000 episodes, on- and off-policy)",
    chapter="book/xie2019/mountain-car.ipynb",
    configs={"smoke": ReferenceConfig(n_trials=2, root_seed=1, batch_size=2,
                                      policy_scale="smoke", reference_episodes=2000),
             "paper": ReferenceConfig(n_trials=2, root_seed=1, batch_size=1)},
    run_trials=reference_trials, after=(POLICY.id,)))
