"""Xie, Thomas & Miklau (2019), Sec. 7: the HIV behaviour data and the public reference problem.

A data set is ``m`` patients of the behaviour (the softmax of the learned Q of
:mod:`~dprl.experiments.xie2019.hiv_policy`), simulated all at once, with the importance ratios
of the greedy target logged while simulating (:func:`behaviour_data`). Every run of
:mod:`~dprl.experiments.xie2019.hiv` measures its MSPBE under ``A, b, C`` (Eq. 2.1) of
``reference_episodes`` public behaviour episodes drawn with ``reference_seed``, the sample that
also decorrelates the value features (:func:`reference`). ``xie2019-hiv-reference`` holds
those statistics at the paper's settings: the experiments read it instead of simulating the
2000 patients again in every process (about 20 s, more than a trial recomputed alone).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from dprl.control import SoftmaxPolicy
from dprl.engine.registry import Experiment, TrialConfig, own_settings, register
from dprl.engine.results import stored_at_paper_settings
from dprl.envs.episodes import Episodes, feature_table, sample_actions
from dprl.envs.hiv import HIVTreatmentMDP
from dprl.envs.hiv_features import LOG10_BOX, value_features
from dprl.experiments.xie2019.hiv_policy import (BEHAVIOUR_TEMPERATURE, POLICY, behaviour_policy,
                                                 policy_degree, policy_weights)
from dprl.features import DecorrelatedFeatures
from dprl.xie2019.baselines import episode_statistics


def hiv_mdp(policy_scale: str) -> HIVTreatmentMDP:
    """The MDP of the policy at ``policy_scale`` (Ernst et al. 2006, ``horizon`` steps)."""
    return HIVTreatmentMDP(horizon=POLICY.config(policy_scale).horizon)


def reward_range(mdp: HIVTreatmentMDP) -> tuple[float, float]:
    """The declared bound of every reward: Ernst et al.'s reward
    ``-0.1 V - 2e4 e1^2 - 2e3 e2^2 + 1e3 E`` over the box :data:`LOG10_BOX` of states
    (``V <= 10^6.5``, ``E <= 10^6``) and the actions. Data outside it are rejected."""
    v_max, e_max = 10 ** LOG10_BOX[1][4], 10 ** LOG10_BOX[1][5]
    penalties = [-mdp.drug_penalties[0] * e1**2 - mdp.drug_penalties[1] * e2**2
                 for e1, e2 in mdp.actions]
    return (-mdp.virus_weight * v_max + min(penalties), mdp.effector_weight * e_max
            + max(penalties))


@dataclasses.dataclass(eq=False)
class _LoggedBehaviour:
    """The behaviour (a :class:`~dprl.control.SoftmaxPolicy`) as a simulator policy drawing
    the same actions, that also logs per call the behaviour's probability of each action
    drawn and whether the target, greedy in the same action values, takes it: one
    evaluation of Q per observation for both (no second pass over the data)."""

    behaviour: SoftmaxPolicy
    calls: list[tuple[np.ndarray, np.ndarray]] = dataclasses.field(default_factory=list)

    def __call__(self, observations: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        q = self.behaviour.action_values(observations)
        probabilities = self.behaviour.probabilities(observations, q)
        actions = sample_actions(probabilities, rng)
        self.calls.append((probabilities[np.arange(actions.size), actions],
                           actions == np.argmax(q, axis=1)))
        return actions

    def logged(self, groups: int, steps: int) -> tuple[np.ndarray, np.ndarray]:
        """The probabilities of the actions taken and the target's probabilities of them
        (1 or 0) ``(groups * n, steps)``, from a simulation of ``groups`` groups (one call
        per group and step, step by step)."""
        taken, greedy = (np.stack([call[k] for call in self.calls]) for k in (0, 1))
        return tuple(x.reshape(steps, groups, -1).transpose(1, 2, 0).reshape(-1, steps)
                     for x in (taken, greedy.astype(float)))


def behaviour_data(policy_scale: str, temperature: float, n_patients: int,
                   rng: np.random.Generator | Sequence[np.random.Generator]
                   ) -> tuple[Episodes, np.ndarray]:
    """``n_patients`` episodes of the behaviour (softmax of the learned Q of the policy at
    ``policy_scale``, at ``temperature``), all patients at once, as :class:`Episodes`
    (truncated at the horizon, with the behaviour's probabilities of the actions taken), and
    the importance ratios ``rho_t = pi(a_t | o_t) / pi_b(a_t | o_t)`` ``(n, H)`` of the
    greedy target (Xie et al. 2019, Eq. 2.1), both logged while simulating. A sequence of
    ``k`` generators gives ``k`` data sets ``(k, n)`` from one batched integration, each the
    same bits as its own call."""
    weights, degree = policy_weights(policy_scale), policy_degree(policy_scale)
    mdp = hiv_mdp(policy_scale)
    behaviour = _LoggedBehaviour(behaviour_policy(weights, temperature, degree))
    episodes = mdp.simulate(behaviour, n_patients, rng)
    n, steps = episodes.actions.shape
    taken, target = behaviour.logged(n // n_patients, steps)
    data = Episodes(episodes.observations, episodes.actions, episodes.rewards,
                    np.full(n, steps), np.zeros(n, dtype=bool), reward_range(mdp), taken)
    ratios = target / taken
    if isinstance(rng, np.random.Generator):
        return data, ratios
    batch = (n // n_patients, n_patients)
    return Episodes(*(getattr(data, name).reshape(*batch, *getattr(data, name).shape[1:])
                      for name in ("observations", "actions", "rewards", "lengths",
                                   "terminated")), data.reward_range,
                    taken.reshape(*batch, steps)), ratios.reshape(*batch, steps)


@dataclasses.dataclass(frozen=True)
class Reference:
    """The public reference sample's features and statistics: ``features`` (decorrelated on
    the sample), ``A, b, C`` of Eq. 2.1 in those features (``C`` ~ identity), and the
    condition number of the sample's ``C`` in the base features."""

    features: DecorrelatedFeatures
    statistics: tuple[np.ndarray, np.ndarray, np.ndarray]
    base_condition: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReferenceConfig(TrialConfig):
    """The reference sample's settings, as :class:`~dprl.experiments.xie2019.hiv.HIVConfig`
    names them: ``reference_episodes`` behaviour patients (the policy at ``policy_scale``,
    softmax at ``temperature``) from the public ``reference_seed``, in the value features of
    ``order``. One trial; its own stream is not used (every experiment measures against the
    same problem)."""

    policy_scale: str = "paper"
    temperature: float = BEHAVIOUR_TEMPERATURE
    order: int = 2
    reference_episodes: int = 2000
    reference_seed: int = 1



@lru_cache(maxsize=4)
def simulated_statistics(policy_scale: str, temperature: float, order: int, n_episodes: int,
                         seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``A, b, C`` (Eq. 2.1) in the base value features of ``order`` from ``n_episodes``
    behaviour episodes drawn with the public ``seed`` (cached)."""
    data, ratios = behaviour_data(policy_scale, temperature, n_episodes,
                                  np.random.default_rng([seed]))
    return episode_statistics(*feature_table(data, value_features(order)),
                              hiv_mdp(policy_scale).gamma, ratios)


def reference(config: TrialConfig) -> Reference:
    """:class:`Reference` of ``config`` (any config with :class:`ReferenceConfig`'s fields):
    its statistics read from the committed ``xie2019-hiv-reference`` where the settings are
    its paper settings (that result must be current), else simulated."""
    stored = stored_at_paper_settings(REFERENCE.id, config)
    if stored is None:
        A, b, C = simulated_statistics(*own_settings(config, ReferenceConfig))
    else:
        A, b, C = (stored[name][0] for name in "AbC")
    features = DecorrelatedFeatures(value_features(config.order), C)
    T = features.transform
    return Reference(features, (T @ A @ T.T, T @ b, T @ C @ T.T), float(np.linalg.cond(C)))


def reference_trials(config: ReferenceConfig,
                     rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """``A``, ``b`` and ``C`` in the base features, simulated (the same in every trial)."""
    statistics = simulated_statistics(*own_settings(config, ReferenceConfig))
    return {name: np.stack([statistics[k]] * len(rngs)) for k, name in enumerate("AbC")}


REFERENCE = register(Experiment(
    id="xie2019-hiv-reference",
    title="Xie et al. (2019), HIV: the reference problem of the MSPBE (A, b, C from 2000 "
          "public behaviour patients)",
    chapter="book/xie2019/hiv.ipynb",
    configs={"smoke": ReferenceConfig(n_trials=1, root_seed=1, batch_size=1,
                                      policy_scale="smoke", reference_episodes=40),
             "paper": ReferenceConfig(n_trials=1, root_seed=1, batch_size=1)},
    run_trials=reference_trials, after=(POLICY.id,)))
