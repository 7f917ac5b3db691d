"""HIV treatment experts for Sharma et al. (2025, App. B.1), by batched fitted Q iteration.

The paper trains PPO agents (one hidden layer of 512) on 2000 settings of the HIV simulator
(Ernst et al. 2006; 20-day steps x 50, :meth:`dprl.envs.hiv.HIVTreatmentMDP.sharma2025`):
drug-1 penalty in 50 values over [18750, 21250] x drug-2 penalty in 20 values over
[1850, 2150] x efficacy noise in {none, Gaussian s.d. 0.01}
(:data:`dprl.sharma2025.variants.GRIDS`). It keeps the best agent of every setting and the
1000 best of the settings' second-best agents: 3000 experts. PPO on 2000 settings is out of
reach on two CPU cores; the book's substitute is the batch Q-learning that Ernst et al.
(2006) introduced with the domain, fitted Q iteration (FQI; Ernst, Geurts & Wehenkel 2005)
with linear action values ``Q(o, a) = w_a . phi(o)`` on the polynomial features of the
``log10`` state (:func:`dprl.envs.hiv_features.q_features`), as
:mod:`dprl.experiments.xie2019.hiv_policy` learns Xie et al. (2019)'s HIV policy.

The setting's model (:mod:`dprl.sharma2025.hiv_settings`): in a noisy
setting, *every patient at every step* gets independent Gaussian noise of s.d. ``sigma`` on
each efficacy ``(e1, e2)`` of its action, clipped to [0, 1], held for the step's 20 days;
the reward penalises the *prescribed* dose, ``-0.1 V - p1 e1^2 - p2 e2^2 + 1e3 E`` with the
action's nominal efficacies and the setting's penalties ``(p1, p2)``, so it is a function of
the post-step state and the action.

The protocol (:class:`HIVExpertProtocol`, :func:`train_candidates`), all settings at once,
all their patients in one batched integration per step:

1. data: ``n_rounds`` rounds of ``patients_per_round`` patients per setting from the
   unhealthy steady state; round 1 acts uniformly at random, later rounds epsilon-greedily
   in the setting's FQI fit (unit weights) to all its earlier data (Ernst et al. 2006);
2. candidates: ``n_candidates`` FQI fits per setting to all its data, each with its own
   Poisson(1) bootstrap weight per transition (so candidates of one setting differ), its
   setting's rewards, ridge least squares per action
   (:func:`~dprl.control.batched_fitted_q.batched_fitted_q`);
3. selection (App. B.1, :func:`select_experts`): every candidate's undiscounted return on its
   own setting (one episode if noise-free, the mean of ``n_noisy_evaluations`` if noisy);
   the best candidate of every setting, then the ``n_second_best`` best second-best ones.

Every draw of a setting comes from its own named stream (:func:`dprl.seeding.named_stream`,
keyed by the setting's grid index), and every per-setting computation (integrator, stacked
matrix products of fixed shape, stacked solves) is batch-invariant: a setting's candidates
are the same bits whichever settings it is trained with.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from dprl.control.batched_fitted_q import BatchedFittedQ, batched_fitted_q
from dprl.envs.episodes import Episodes
from dprl.envs.hiv import HIVTreatmentMDP
from dprl.envs.hiv_features import q_features
from dprl.features import PolynomialBasis
from dprl.seeding import named_stream
from dprl.sharma2025.datasets import checked_picks, pick
from dprl.sharma2025.experts import pmin_actions, pmin_levels
from dprl.sharma2025.hiv_settings import HIVSettings, _simulate, penalised_rewards
from dprl.validation import (frozen_copy, require_array, require_int, require_nonnegative,
                             require_probability)

_COLLECT, _BOOTSTRAP, _EVALUATE = 0, 1, 2   # named streams of a setting


def _greedy(weights: np.ndarray, features: PolynomialBasis,
            observations: np.ndarray) -> np.ndarray:
    """``argmax_a weights[g, a] . phi(observations[g, j])`` ``(G, n)`` for weights
    ``(G, A, d)`` and observations ``(G or 1, n, 6)`` (ties to the lowest action)."""
    phi = features(observations.reshape(-1, 6)).reshape(*observations.shape[:2], -1)
    return np.argmax(np.einsum("...nd,...ad->...na", phi, weights), axis=-1)


@dataclass(frozen=True, eq=False)
class HIVExperts:
    """App. B.1's HIV experts (Sharma et al. 2025), greedy in linear action values:
    ``weights`` ``(m, A, d)`` on :func:`~dprl.envs.hiv_features.q_features` of ``degree``;
    ``settings`` the setting each was trained on (``m`` entries), ``ranks`` ``(m,)`` 0 for
    its setting's best candidate, 1 for the second best, and ``own_returns`` ``(m,)`` its
    return on that setting. An :class:`~dprl.sharma2025.experts.ExpertPopulation`."""

    weights: np.ndarray
    degree: int
    settings: HIVSettings
    ranks: np.ndarray
    own_returns: np.ndarray

    def __post_init__(self) -> None:
        degree = require_int("degree", self.degree)
        weights = require_array("weights", self.weights, ndim=3)
        m, A, d = weights.shape
        if A < 2 or d != q_features(degree).n_features:
            raise ValueError(f"weights must have shape (m, A >= 2, {q_features(degree).n_features}"
                             f"), got {weights.shape}")
        if not isinstance(self.settings, HIVSettings) or self.settings.n_settings != m:
            raise ValueError(f"settings must be HIVSettings with {m} entries")
        ranks = np.asarray(self.ranks)
        if not np.issubdtype(ranks.dtype, np.integer) or ranks.shape != (m,):
            raise ValueError(f"ranks must be {m} integers, got {ranks.dtype} {ranks.shape}")
        for name, value in (("weights", weights), ("ranks", ranks.astype(np.int64)),
                            ("own_returns", require_array("own_returns", self.own_returns,
                                                          shape=(m,)))):
            object.__setattr__(self, name, frozen_copy(value))
        object.__setattr__(self, "degree", degree)

    @property
    def n_experts(self) -> int:
        """``m``."""
        return self.weights.shape[0]

    @property
    def n_actions(self) -> int:
        """``|A|`` (4: Ernst et al. 2006's drug combinations)."""
        return self.weights.shape[1]

    def select(self, index: np.ndarray) -> HIVExperts:
        """The experts ``index`` (integer indices), in that order, as a population."""
        index = np.asarray(index)
        if index.ndim != 1 or not np.issubdtype(index.dtype, np.integer) or index.size == 0 \
                or index.min() < 0 or index.max() >= self.n_experts:
            raise ValueError(f"index must be a non-empty 1-D array of integers in "
                             f"[0, {self.n_experts - 1}], got {index.dtype} {index.shape}")
        return HIVExperts(self.weights[index], self.degree, self.settings.take(index),
                          self.ranks[index], self.own_returns[index])

    def greedy_actions(self, observations: np.ndarray) -> np.ndarray:
        """Each expert's greedy action ``argmax_a Q_i(o, a)`` ``(m, n)`` int64 at ``log10``
        states ``(m, n, 6)`` (expert ``i`` on ``observations[i]``) or ``(1, n, 6)`` (all on
        the same); ties to the lowest action."""
        observations = require_array("observations", observations, ndim=3)
        if observations.shape[0] not in (1, self.n_experts) or observations.shape[2] != 6:
            raise ValueError(f"observations must have shape (1 or {self.n_experts}, n, 6), "
                             f"got {observations.shape}")
        return _greedy(self.weights, q_features(self.degree), observations).astype(np.int64)


@dataclass(frozen=True)
class HIVExpertProtocol:
    """The settings of :func:`train_candidates` and :func:`select_experts` (module
    docstring): data rounds and patients per round and setting, the exploration of rounds
    2.., FQI's feature ``degree`` (28 features for 2), ``n_iterations`` and ``ridge`` (FQI
    discounts by the MDP's ``gamma``, 0.98), the candidates per setting, the episodes of a
    noisy setting's evaluation and the number of second-best experts kept."""

    degree: int = 2
    n_rounds: int = 3
    patients_per_round: int = 4
    exploration_epsilon: float = 0.15
    n_iterations: int = 50
    ridge: float = 1e-6
    n_candidates: int = 2
    n_noisy_evaluations: int = 3
    n_second_best: int = 1000

    def __post_init__(self) -> None:
        for name in ("degree", "n_rounds", "patients_per_round", "n_iterations",
                     "n_noisy_evaluations"):
            require_int(name, getattr(self, name))
        require_int("n_candidates", self.n_candidates, minimum=2)
        require_int("n_second_best", self.n_second_best, minimum=0)
        require_probability("exploration_epsilon", self.exploration_epsilon)
        require_nonnegative("ridge", self.ridge)


@dataclass(frozen=True)
class HIVCandidates:
    """Every setting's FQI candidates (:func:`train_candidates`): ``weights``
    ``(S, K, A, d)``, ``own_returns`` ``(S, K)`` (undiscounted, on the own setting),
    ``last_change`` ``(S, K)`` (FQI's convergence check) and ``n_transitions`` per setting."""

    weights: np.ndarray
    own_returns: np.ndarray
    last_change: np.ndarray
    n_transitions: int


def _streams(rng: np.random.Generator, settings: HIVSettings,
             *key: int) -> list[np.random.Generator]:
    """Each setting's generator for ``key`` (named by its grid index)."""
    return [named_stream(rng, *key, int(i)) for i in settings.ids]


def _epsilon_greedy(greedy: np.ndarray, uniforms: np.ndarray, epsilon: float,
                    n_actions: int) -> np.ndarray:
    """Epsilon-greedy actions from one uniform ``u`` each: action ``floor(u A / epsilon)``
    if ``u < epsilon`` (uniform over the ``A`` actions), else the greedy action."""
    if epsilon == 0:
        return greedy
    explore = np.minimum((uniforms / epsilon * n_actions).astype(np.int64), n_actions - 1)
    return np.where(uniforms < epsilon, explore, greedy)


def _collect_round(mdp: HIVTreatmentMDP, settings: HIVSettings, weights: np.ndarray,
                   epsilon: float, features: PolynomialBasis, patients: int,
                   streams: list[np.random.Generator]) -> tuple[np.ndarray, np.ndarray]:
    """One data round: ``patients`` per setting, epsilon-greedy in the setting's ``weights``
    ``(S, A, d)``; states ``(S, P, H + 1, 6)`` and actions ``(S, P, H)``."""
    S, H = settings.n_settings, mdp.horizon
    uniforms = np.stack([g.random((patients, H)) for g in streams])
    normals = np.stack([g.standard_normal((patients, H, 2)) for g in streams])

    def choose(t: int, observations: np.ndarray) -> np.ndarray:
        greedy = _greedy(weights, features, observations.reshape(S, patients, 6))
        return _epsilon_greedy(greedy, uniforms[:, :, t], epsilon, mdp.n_actions).ravel()

    noise = (np.repeat(settings.efficacy_noise, patients), normals.reshape(S * patients, H, 2))
    states, actions = _simulate(mdp, choose, S * patients, noise)
    return states.reshape(S, patients, H + 1, 6), actions.reshape(S, patients, H)


def _fit(mdp: HIVTreatmentMDP, settings: HIVSettings, states: np.ndarray, actions: np.ndarray,
         sample_weights: np.ndarray, features: PolynomialBasis,
         protocol: HIVExpertProtocol) -> BatchedFittedQ:
    """FQI of every setting's candidates on its episodes (states ``(S, N, H + 1, 6)``,
    actions ``(S, N, H)``) with its own penalties."""
    S = settings.n_settings
    rewards = penalised_rewards(mdp, states[:, :, 1:], actions,
                                settings.drug_penalties[:, None, None, :])
    phi = features(np.log10(states).reshape(-1, 6)).reshape(*states.shape[:3], -1)
    return batched_fitted_q(phi[:, :, :-1].reshape(S, -1, phi.shape[-1]),
                            actions.reshape(S, -1), rewards.reshape(S, -1),
                            phi[:, :, 1:].reshape(S, -1, phi.shape[-1]), sample_weights,
                            mdp.n_actions, mdp.gamma, protocol.n_iterations, protocol.ridge)


def own_returns(mdp: HIVTreatmentMDP, settings: HIVSettings, weights: np.ndarray,
                degree: int, n_noisy_evaluations: int, rng: np.random.Generator) -> np.ndarray:
    """The undiscounted return ``(S, K)`` of the greedy policies ``weights`` ``(S, K, A, d)``
    (on :func:`~dprl.envs.hiv_features.q_features` of ``degree``) on their own settings,
    penalties and noise (App. B.1's selection criterion): one episode in a noise-free setting
    (deterministic), the mean of ``n_noisy_evaluations`` in a noisy one, all in one batch,
    setting ``s``'s noise from its own stream of ``rng``."""
    weights = require_array("weights", weights, ndim=4)
    S, K, A, d = weights.shape
    if S != settings.n_settings:
        raise ValueError(f"weights must hold {settings.n_settings} settings, got {S}")
    n_noisy_evaluations = require_int("n_noisy_evaluations", n_noisy_evaluations)
    features = q_features(degree)
    if features.n_features != d:
        raise ValueError(f"weights must have {features.n_features} features, got {d}")
    episodes = np.where(settings.efficacy_noise > 0, n_noisy_evaluations, 1)
    normals = [g.standard_normal((K, e, mdp.horizon, 2)).reshape(-1, mdp.horizon, 2)
               for g, e in zip(_streams(rng, settings, _EVALUATE), episodes)]
    candidate = np.concatenate([np.repeat(np.arange(s * K, (s + 1) * K), e)
                                for s, e in enumerate(episodes)])
    setting = candidate // K
    patient_weights = weights.reshape(S * K, A, d)[candidate]
    noise = (settings.efficacy_noise[setting], np.concatenate(normals))
    states, actions = _simulate(
        mdp, lambda t, obs: _greedy(patient_weights, features, obs[:, None])[:, 0],
        candidate.size, noise)
    returns = penalised_rewards(mdp, states[:, 1:], actions,
                                settings.drug_penalties[setting][:, None]).sum(axis=1)
    totals = np.bincount(candidate, weights=returns, minlength=S * K)
    return (totals / np.repeat(episodes, K)).reshape(S, K)


def train_candidates(mdp: HIVTreatmentMDP, settings: HIVSettings, protocol: HIVExpertProtocol,
                     rng: np.random.Generator) -> HIVCandidates:
    """Sharma et al. (2025, App. B.1)'s per-setting agents, by FQI in place of PPO (module
    docstring, steps 1-2), evaluated on their own settings (:func:`own_returns`). ``mdp``
    gives the dynamics, horizon and discount (:meth:`HIVTreatmentMDP.sharma2025`); each
    setting's penalties and noise replace its own. Each setting draws from its own named
    streams of ``rng`` only."""
    if not isinstance(mdp, HIVTreatmentMDP):
        raise ValueError(f"mdp must be an HIVTreatmentMDP, got {type(mdp).__name__}")
    if not isinstance(settings, HIVSettings) or not isinstance(protocol, HIVExpertProtocol):
        raise ValueError("settings must be HIVSettings and protocol an HIVExpertProtocol")
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    features = q_features(protocol.degree)
    S, P = settings.n_settings, protocol.patients_per_round
    weights = np.zeros((S, mdp.n_actions, features.n_features))
    states, actions = np.empty((S, 0, mdp.horizon + 1, 6)), np.empty((S, 0, mdp.horizon), int)
    for r in range(protocol.n_rounds):
        epsilon = 1.0 if r == 0 else protocol.exploration_epsilon
        new_states, new_actions = _collect_round(mdp, settings, weights, epsilon, features, P,
                                                 _streams(rng, settings, _COLLECT, r))
        states = np.concatenate([states, new_states], axis=1)
        actions = np.concatenate([actions, new_actions], axis=1)
        if r < protocol.n_rounds - 1:
            ones = np.ones((S, 1, actions[0].size))
            weights = _fit(mdp, settings, states, actions, ones, features, protocol).weights[:, 0]
    n = actions[0].size
    boot = np.stack([g.poisson(1.0, (protocol.n_candidates, n)).astype(float)
                     for g in _streams(rng, settings, _BOOTSTRAP)])
    fit = _fit(mdp, settings, states, actions, boot, features, protocol)
    returns = own_returns(mdp, settings, fit.weights, protocol.degree,
                          protocol.n_noisy_evaluations, rng)
    return HIVCandidates(fit.weights, frozen_copy(returns), fit.last_change, n)


def select_experts(own_returns: np.ndarray,
                   n_second_best: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """App. B.1's selection (Sharma et al. 2025) from candidates' returns ``(S, K)`` on their
    own settings: every setting's best candidate, then the ``n_second_best`` best of the
    settings' second-best candidates, ranked by those returns across settings. Ties go to the
    lower candidate index within a setting and to the lower setting index across settings.
    Returns ``(setting, candidate, rank)`` ``(S + n_second_best,)``: the best in setting
    order, then the kept second-best in setting order; ``rank`` is 0 or 1."""
    own_returns = require_array("own_returns", own_returns, ndim=2)
    S, K = own_returns.shape
    if K < 2:
        raise ValueError(f"own_returns must hold >= 2 candidates per setting, got {K}")
    n_second_best = require_int("n_second_best", n_second_best, minimum=0)
    if n_second_best > S:
        raise ValueError(f"n_second_best must be <= the {S} settings, got {n_second_best}")
    order = np.argsort(-own_returns, axis=1, kind="stable")
    second = own_returns[np.arange(S), order[:, 1]]
    kept = np.sort(np.argsort(-second, kind="stable")[:n_second_best])
    setting = np.concatenate([np.arange(S), kept])
    candidate = np.concatenate([order[:, 0], order[kept, 1]])
    rank = np.repeat([0, 1], [S, kept.size])
    return setting, candidate, rank


def train_hiv_experts(mdp: HIVTreatmentMDP, settings: HIVSettings, protocol: HIVExpertProtocol,
                      rng: np.random.Generator) -> tuple[HIVExperts, HIVCandidates]:
    """Sharma et al. (2025, App. B.1)'s HIV experts with FQI in place of PPO: the candidates
    of :func:`train_candidates` and the experts that :func:`select_experts` keeps (``S +
    n_second_best``; 3000 for the 2000 settings of
    :func:`~dprl.sharma2025.hiv_settings.hiv_settings`)."""
    candidates = train_candidates(mdp, settings, protocol, rng)
    setting, candidate, rank = select_experts(candidates.own_returns, protocol.n_second_best)
    experts = HIVExperts(candidates.weights[setting, candidate], protocol.degree,
                         settings.take(setting), rank,
                         candidates.own_returns[setting, candidate])
    return experts, candidates


def _check_experts(experts: HIVExperts, mdp: HIVTreatmentMDP) -> None:
    if not isinstance(experts, HIVExperts):
        raise ValueError(f"experts must be HIVExperts, got {type(experts).__name__}")
    if not isinstance(mdp, HIVTreatmentMDP) or mdp.n_actions != experts.n_actions:
        raise ValueError(f"mdp must be an HIVTreatmentMDP with {experts.n_actions} actions")


def default_returns(experts: HIVExperts, mdp: HIVTreatmentMDP) -> np.ndarray:
    """Each (greedy) expert's undiscounted return ``(m,)`` on ``mdp`` (App. B.1's default
    setting: :meth:`HIVTreatmentMDP.sharma2025`, penalties 2e4 / 2e3, no noise; one episode,
    the system being deterministic): the returns of Sharma et al. (2025), Fig. 2 (right,
    shown divided by 1e6)."""
    _check_experts(experts, mdp)
    return policy_returns(mdp, lambda t, obs: experts.greedy_actions(obs[:, None])[:, 0],
                          experts.n_experts)


def policy_returns(mdp: HIVTreatmentMDP, choose: Callable[[int, np.ndarray], np.ndarray],
                   n: int) -> np.ndarray:
    """Undiscounted returns ``(n,)`` of ``n`` patients of ``mdp`` treated by
    ``choose(t, log10 observations (n, 6))`` -> actions ``(n,)``, all integrated at once."""
    n = require_int("n", n)
    states, actions = _simulate(mdp, choose, n)
    return mdp.rewards(states[:, 1:].reshape(-1, 6), actions.ravel()).reshape(n, -1).sum(axis=1)


def record_trajectories(experts: HIVExperts, mdp: HIVTreatmentMDP, n_trajectories: int,
                        rngs: Sequence[np.random.Generator], p_min: float = 0.02,
                        picks: np.ndarray | None = None) -> Episodes:
    """``n_trajectories`` demonstrations of each expert on ``mdp`` (the default setting),
    acting by App. B.1's ``p_min`` modification
    (:func:`~dprl.sharma2025.experts.pmin_actions`; Sharma et al. 2025, Sec. 6's
    aggregated data set): :class:`~dprl.envs.episodes.Episodes` of batch shape ``(m, N)``
    with ``log10`` observations ``(m, N, H + 1, 6)``, actions and rewards ``(m, N, H)``, the
    probabilities of the taken actions as ``behaviour_probabilities`` and the observed range
    of rewards as ``reward_range`` (the HIV reward has no a-priori bound). All ``m N``
    patients step in one integration; expert ``i`` draws from ``rngs[i]`` only, all its
    ``H x N`` action uniforms at once (step-major, the order of ``N`` draws per step). With
    ``picks``, only trajectory ``picks[i]`` of expert ``i`` is recorded (same bits), one per
    expert."""
    _check_experts(experts, mdp)
    n_trajectories = require_int("n_trajectories", n_trajectories)
    rngs = list(rngs)
    if len(rngs) != experts.n_experts or not all(isinstance(g, np.random.Generator)
                                                 for g in rngs):
        raise ValueError(f"rngs must hold one numpy.random.Generator per expert "
                         f"({experts.n_experts})")
    high, low = pmin_levels(experts.n_actions, p_min)
    if picks is not None:
        picks = checked_picks(picks, experts.n_experts, n_trajectories)
    uniforms = pick(np.stack([g.random((mdp.horizon, n_trajectories)).T for g in rngs]), picks)
    m, N, H = experts.n_experts, uniforms.shape[1], mdp.horizon
    probabilities = []

    def choose(t: int, observations: np.ndarray) -> np.ndarray:
        greedy = experts.greedy_actions(observations.reshape(m, N, 6))
        actions = pmin_actions(greedy, uniforms[:, :, t], experts.n_actions, p_min)
        probabilities.append(np.where(actions == greedy, high, low))
        return actions.ravel()

    states, actions = _simulate(mdp, choose, m * N)
    rewards = mdp.rewards(states[:, 1:].reshape(-1, 6), actions.ravel()).reshape(m, N, H)
    return Episodes(np.log10(states).reshape(m, N, H + 1, 6), actions.reshape(m, N, H), rewards,
                    np.full((m, N), H), np.zeros((m, N), dtype=bool),
                    (float(rewards.min()), float(rewards.max())),
                    np.stack(probabilities, axis=-1))
