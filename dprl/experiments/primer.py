"""Experiments of the primer chapters.

``primer-policy-evaluation``: estimation error of first-visit Monte Carlo, TD(0), GTD2 and LSTD
against the number of trajectories on the chain of Balle et al. (2016), tabular features.
Data sets are nested: the first ``m`` trajectories of a trial's sample form its data set of
size ``m``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from dprl.envs import ChainMDP, stack_trajectories
from dprl.engine.registry import Experiment, TrialConfig, register
from dprl.features import tabular_features
from dprl.policy_evaluation import gtd2, lstd, monte_carlo_values, rmse, td0

ESTIMATORS = ("Monte Carlo", "TD(0)", "GTD2", "LSTD")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PolicyEvaluationConfig(TrialConfig):
    """The chain (Balle 2016 / Xie 2019 constants), the batch sizes and the learners' steps.

    The constant step sizes were chosen on separate data (root seed 99, 4 data sets of 100
    trajectories, 10 epochs) from TD(0) in {0.05, 0.1, 0.2, 0.5} and GTD2 (theta, w) in
    {0.1, 0.3, 1} x {0.1, 0.5, 1}: the lowest error without divergence.
    """

    n_states: int = 40
    stay_prob: float = 0.5
    gamma: float = 0.99
    batch_sizes: tuple[int, ...] = (10, 30, 100, 300, 1000)
    td_step: float = 0.2
    gtd2_step_theta: float = 0.3
    gtd2_step_w: float = 0.5
    n_epochs: int = 10
    ridge: float = 1e-10


def policy_evaluation_trials(config: PolicyEvaluationConfig,
                             rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """RMSE over states of each estimator (axis 1, in ``ESTIMATORS`` order) for each batch
    size (axis 2). Unvisited states are estimated as 0 (Monte Carlo and LSTD's ridge)."""
    mdp = ChainMDP(n_states=config.n_states, stay_prob=config.stay_prob, gamma=config.gamma)
    features, truth = tabular_features(mdp.n_states), mdp.value_function()
    sample = stack_trajectories([mdp.sample(max(config.batch_sizes), rng) for rng in rngs])
    errors = np.empty((len(rngs), len(ESTIMATORS), len(config.batch_sizes)))
    for k, m in enumerate(config.batch_sizes):
        data = sample.first(m)
        thetas = (td0(data, features, mdp.gamma, config.td_step, n_epochs=config.n_epochs),
                  gtd2(data, features, mdp.gamma, config.gtd2_step_theta, config.gtd2_step_w,
                       n_epochs=config.n_epochs)[0],
                  lstd(data, features, mdp.gamma, ridge=config.ridge))
        monte_carlo = np.nan_to_num(monte_carlo_values(data, mdp.gamma, mdp.n_states)[0])
        values = [monte_carlo, *(np.einsum("...d,sd->...s", theta, features) for theta in thetas)]
        for j, value in enumerate(values):
            errors[:, j, k] = rmse(value, truth)
    return {"rmse": errors, "batch_sizes": np.tile(config.batch_sizes, (len(rngs), 1))}


POLICY_EVALUATION = register(Experiment(
    id="primer-policy-evaluation",
    title="Estimation error against the number of trajectories on the 40-state chain",
    chapter="book/primer/policy-evaluation.ipynb",
    configs={
        "smoke": PolicyEvaluationConfig(n_trials=4, root_seed=2016, batch_size=2,
                                        batch_sizes=(10, 30), n_epochs=2),
        "paper": PolicyEvaluationConfig(n_trials=20, root_seed=2016, batch_size=10),
    },
    run_trials=policy_evaluation_trials))
