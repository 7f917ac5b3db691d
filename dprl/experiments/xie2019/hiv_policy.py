"""Xie, Thomas & Miklau (2019), Sec. 7, HIV simulator: the evaluated policy and the behaviour.

The paper obtains the evaluated policy "using Q-learning" and takes as behaviour "a policy
that is softmax w.r.t. the optimal Q function". Here Q is learned by fitted Q iteration
(FQI; Ernst et al. 2005) with the data-collection protocol of Ernst et al. (2006), who
introduced the domain: a first round of ``patients_per_round`` patients under the uniform
random policy, then ``n_rounds - 1`` rounds of as many patients under the
``exploration_epsilon``-greedy policy of the current Q, FQI refitted from scratch on all the
data after every round. The regressor is ridge least squares per action on the degree-4
polynomial features of the ``log10`` state (:func:`dprl.envs.hiv_features.q_features`, 210
features), with truncated bootstraps (:func:`dprl.control.fitted_q.fitted_q_iteration`).

- evaluated (target) policy: greedy in the learned Q (deterministic);
- behaviour: softmax of the learned Q at temperature :data:`BEHAVIOUR_TEMPERATURE`, so the
  per-step ratio is ``rho_t = 1{a_t greedy} / pi_b(a_t | o_t)`` (:func:`dprl.envs.episodes.importance_ratios`).
  The greedy action is the most probable under the softmax, so ``rho_t`` lies in
  ``{0} U [1, 4]`` at any temperature; the temperature instead sets how far the behaviour's
  patients get towards the states the target visits (immune control, ``E ~ 1e5``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from dprl.control.fitted_q import Transitions, fitted_q_iteration
from dprl.control.linear_q import EpsilonGreedyPolicy, SoftmaxPolicy, greedy_policy
from dprl.envs.episodes import UniformPolicy
from dprl.envs.hiv import HIVEpisodes, HIVTreatmentMDP
from dprl.envs.hiv_features import q_features
from dprl.engine.registry import Experiment, TrialConfig, register
from dprl.engine.results import current_arrays
from dprl.seeding import trial_generator
from dprl.validation import require_positive, require_probability

#: The behaviour's softmax temperature (reward units) for the paper-scale policy, of the order
#: of the gaps between the learned action values (the values are ~2e9): about half of the
#: behaviour's actions are the target's and most of its patients
#: still reach immune control, so its data cover the target's states. Colder (1e7), the
#: behaviour is nearly the target (95 % of its actions); hotter (3e8), every action keeps
#: probability >= 0.05 but the patients stay near the unhealthy state, where the target's
#: value is not identifiable (numbers in the chapter).
BEHAVIOUR_TEMPERATURE = 1e8

#: A throwaway generator for greedy rollouts: the greedy policy draws uniforms that cannot
#: change its actions, and must not consume the trial's stream.
_GREEDY_SEED = 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class HIVPolicyConfig(TrialConfig):
    """FQI settings for the evaluated HIV policy (stated in the chapter); the MDP is
    :class:`HIVTreatmentMDP`'s default (Ernst et al. 2006: 5-day steps, gamma = 0.98) with
    ``horizon`` steps (200 in the paper)."""

    horizon: int = 200
    degree: int = 4
    n_rounds: int = 10
    patients_per_round: int = 30
    exploration_epsilon: float = 0.15
    n_iterations: int = 300
    ridge: float = 1e-6


def transitions(episodes: Sequence[HIVEpisodes], n_actions: int) -> Transitions:
    """Every one-step transition of ``episodes`` as FQI data (Ernst et al. 2005's four-tuples);
    the last step of an episode is a time-limit truncation, never terminal."""
    obs = np.concatenate([e.observations for e in episodes])
    return Transitions(obs[:, :-1].reshape(-1, 6),
                       np.concatenate([e.actions for e in episodes]).ravel(),
                       np.concatenate([e.rewards for e in episodes]).ravel(),
                       obs[:, 1:].reshape(-1, 6), np.zeros(obs[:, 1:, 0].size, dtype=bool),
                       n_actions)


def greedy_episode(mdp: HIVTreatmentMDP, weights: np.ndarray, degree: int = 4) -> HIVEpisodes:
    """One patient from the initial state under the greedy policy of ``weights`` (the
    system is deterministic, so this is the policy's exact discounted return)."""
    policy = greedy_policy(weights, q_features(degree))
    return mdp.simulate(policy, 1, np.random.default_rng(_GREEDY_SEED))


def learn_policy(config: HIVPolicyConfig, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Ernst et al. (2006)'s protocol with FQI (module docstring) for one trial: the final
    weights ``(4, d)``, each round's greedy return and FQI's last change ``(n_rounds,)``."""
    mdp, features = HIVTreatmentMDP(horizon=config.horizon), q_features(config.degree)
    epsilon = require_probability("exploration_epsilon", config.exploration_epsilon)
    policy, episodes, returns, changes = UniformPolicy(mdp.n_actions), [], [], []
    for _ in range(config.n_rounds):
        episodes.append(mdp.simulate(policy, config.patients_per_round, rng))
        fit = fitted_q_iteration(transitions(episodes, mdp.n_actions), features, mdp.gamma,
                                 config.n_iterations, config.ridge)
        policy = EpsilonGreedyPolicy(fit.weights, features, epsilon)
        returns.append(greedy_episode(mdp, fit.weights, config.degree)
                       .discounted_returns(mdp.gamma)[0])
        changes.append(fit.last_change)
    return {"weights": np.array(fit.weights), "round_returns": np.array(returns),
            "last_changes": np.array(changes)}


def constant_returns(mdp: HIVTreatmentMDP) -> np.ndarray:
    """The discounted return of each constant-action policy from the initial state, ``(A,)``
    (the baselines the learned policy must beat)."""
    plan = np.repeat(np.arange(mdp.n_actions)[:, None], mdp.horizon, axis=1)
    return mdp.simulate_actions(plan).discounted_returns(mdp.gamma)


def policy_trials(config: HIVPolicyConfig,
                  rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Per trial (each computed alone, so batch-invariant): the FQI weights ``(4, d)``, each
    round's greedy return and last FQI change ``(n_rounds,)``, the final greedy policy's
    discounted return, ``log10`` states ``(H + 1, 6)``, actions and rewards ``(H,)``, and the
    constant-action returns ``(4,)``."""
    mdp = HIVTreatmentMDP(horizon=config.horizon)
    constants = constant_returns(mdp)
    out: dict[str, list] = {key: [] for key in ("weights", "round_returns", "last_changes",
                                                "greedy_return", "greedy_observations",
                                                "greedy_actions", "greedy_rewards",
                                                "constant_returns")}
    for rng in rngs:
        learned = learn_policy(config, rng)
        greedy = greedy_episode(mdp, learned["weights"], config.degree)
        for key, value in learned.items():
            out[key].append(value)
        out["greedy_return"].append(greedy.discounted_returns(mdp.gamma)[0])
        out["greedy_observations"].append(greedy.observations[0])
        out["greedy_actions"].append(greedy.actions[0])
        out["greedy_rewards"].append(greedy.rewards[0])
        out["constant_returns"].append(constants)
    return {key: np.stack(value) for key, value in out.items()}


POLICY = register(Experiment(
    id="xie2019-hiv-policy",
    title="Xie et al. (2019), HIV: the evaluated policy (fitted Q iteration, Ernst et al. 2006)",
    chapter="book/xie2019/hiv.ipynb",
    configs={"smoke": HIVPolicyConfig(n_trials=1, root_seed=2006, batch_size=1, horizon=20,
                                      degree=2, n_rounds=2, patients_per_round=3,
                                      n_iterations=20),
             "paper": HIVPolicyConfig(n_trials=1, root_seed=2006, batch_size=1)},
    run_trials=policy_trials))


@lru_cache(maxsize=2)
def policy_weights(scale: str) -> np.ndarray:
    """The evaluated policy's weights ``(4, d)``: trial 0 of ``xie2019-hiv-policy`` at
    ``scale``. At paper scale they are read from the committed result (recomputing them takes
    minutes; the spot-check of committed results recomputes that trial), which must be
    current; at smoke scale they are recomputed."""
    if scale != "paper":
        config = POLICY.config(scale)
        return learn_policy(config, trial_generator(config.root_seed, 0))["weights"]
    return current_arrays(POLICY.id)["weights"][0]


def policy_degree(scale: str) -> int:
    """The degree of the action-value features of the policy at ``scale``."""
    return POLICY.config(scale).degree


def target_policy(weights: np.ndarray, degree: int = 4) -> EpsilonGreedyPolicy:
    """The evaluated policy of Xie et al. (2019, Sec. 7): greedy in the learned Q."""
    return greedy_policy(weights, q_features(degree))


def behaviour_policy(weights: np.ndarray, temperature: float,
                     degree: int = 4) -> SoftmaxPolicy:
    """The behaviour of Xie et al. (2019, Sec. 7): softmax of the learned Q,
    ``pi_b(a | o)`` proportional to ``exp(Q(o, a) / temperature)`` (reward units)."""
    return SoftmaxPolicy(weights, q_features(degree),
                         require_positive("temperature", temperature))


def behaviour_probabilities(weights: np.ndarray, temperature: float,
                            observations: np.ndarray, degree: int = 4) -> np.ndarray:
    """``pi_b(. | o)`` ``(n, 4)`` of :func:`behaviour_policy` at ``observations``
    ``(n, 6)`` (``log10`` states)."""
    return behaviour_policy(weights, temperature, degree).probabilities(observations)


__all__ = ["BEHAVIOUR_TEMPERATURE", "POLICY", "HIVPolicyConfig", "behaviour_policy",
           "behaviour_probabilities", "constant_returns", "greedy_episode",
           "learn_policy", "policy_degree", "policy_trials", "policy_weights", "target_policy",
           "transitions"]
