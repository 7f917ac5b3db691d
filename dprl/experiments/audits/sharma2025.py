"""Empirical privacy audits of Sharma et al. (2025)'s two mechanisms (issues 17, 29; chapter
book/appendix/audits), on the conventions of :mod:`dprl.experiments.audits.common`. Every sample is
drawn by the package's own code: :func:`dprl.sharma2025.release.data_release` (Alg. 2),
:func:`dprl.sharma2025.dp_sgd.expert_dp_sgd_step` (Alg. 4) and
:func:`dprl.sharma2025.dp_sgd.selective_dp_sgd_step` (Alg. 3).

- ``audit-sharma2025-release`` (black-box): DataRelease on the privacy-analysis chapter's
  two-state, two-action MDP (``L = 2``) with App. B.1 experts, as Sec. 5 models it: the data
  are the experts (add/remove-one expert sets, Theorems 5.3 and 5.5), and each run records
  ``N`` trajectories of every expert from the trial's generator, then calls
  ``data_release`` on the ``N m`` trajectories (it permutes them and queries ``T``). ``D``
  holds ``m - 1`` experts of type 0 (preferring action 0 everywhere), ``D'`` adds a canary
  of the same type, with its ``N`` trajectories. The output is the released prefix of each
  query (or nothing), in query order; trajectory indices are not released (they would
  reveal ``N m``). Because every expert has the same policy, the ``T`` queried trajectories
  (distinct, drawn without replacement by the permutation) are i.i.d. draws of that policy
  whatever the permutation, and the queries' noises are fresh: the ``T`` outputs are i.i.d.
  in both worlds with the one-round law
  :meth:`~dprl.sharma2025.privacy.OneRoundModel.distribution` of ``m - 1`` and ``m``
  experts. That is why the canary shares the majority's type: a canary of another type
  would make the outputs an exchangeable, not independent, mixture (hypergeometric in the
  number of its trajectories queried), whose exact privacy curve is out of reach. The
  canary then acts only through the counts, which ``m`` puts just above Alg. 2's threshold
  (where one expert moves the pass probabilities most): the pair's exact eps (0.27 at ``m
  = 886``) is three times that of the earlier pair of a canary preferring action 1 among
  1078 type-0 experts with rounds drawn with replacement (0.087). Each run is scored by the
  exact log-likelihood ratio of its ``T`` outputs (Neyman-Pearson), and the pair's exact
  eps is the ``T``-fold composition of the one-round pair's privacy loss distribution
  (dp-accounting, both orders).
- ``audit-sharma2025-dp-sgd`` / ``audit-sharma2025-selective`` (white-box): ``N`` real steps
  of Alg. 4 (``p = 1``) or Alg. 3 (``p < 1``) on a :class:`~dprl.sharma2025.offline_rl.
  DiscreteCQL` learner with a linear Q-network (no hidden layer, portable kernels, plain
  SGD), ``m`` experts, ``b/m`` Poisson sampling, clip ``C``. Expert ``r < R`` (``R =
  runs_per_trial``) is the canary of run ``r``: one terminal transition from state 1 taking
  action ``r`` with reward ``reward``, whose per-example gradient (``C``-clipped, of norm
  about ``reward sqrt 2 >> C``) lies in the Q-network's row ``r`` only: with CQL's weight
  ``alpha = 0`` (the DQN loss) the canaries' gradients are mutually orthogonal, so the
  ``R`` canaries of one training are ``R`` runs, each the others' "experts with gradients
  orthogonal to ``u``". ``D'``: every canary present; ``D``: every expert without
  transitions (Alg. 4 lines 4-5: a sampled expert without transitions contributes
  nothing, so ``m`` and ``q`` stay those of ``D'``); the other experts are empty in both.
  The auditor reads each step's noisy gradient sum ``b (phi_t - phi_{t+1}) / eta`` and
  projects it on the canary's unit clipped-gradient direction ``u`` at ``phi_t``: the
  projection in units of ``C`` is ``x ~ N(0, s^2)`` under ``D`` and ``B + N(0, s^2)``, ``B
  ~ Bernoulli(q)``, under ``D'`` (the noise is isotropic, so the projections on orthogonal
  ``u`` are independent; the parameters' float32 rounding moves ``x`` by ~1e-5), given any
  past: this is the dominating pair of the Poisson-subsampled Gaussian mechanism under
  add/remove (Zhu, Dong & Wang 2022), composed adaptively, and the statistic is its exact
  log-likelihood ratio summed over the DP steps, ``sum_t log(1 - q + q e^{(2 x_t - 1) / (2
  s^2)})``. Alg. 3's stable steps (on one stable transition of the canaries' state 0) are
  noiseless and the step reports its coin: the coins are visible to a white-box auditor. The
  noise multiplier is Sec. 6's PLD calibration of ``N`` steps at the paper's rate ``p b/m``
  (the coins counted as subsampling). The pair's exact eps is the PLD of ``N`` steps whose
  loss is 0 with probability ``1 - p`` and the subsampled Gaussian's otherwise (the mixture
  over the Binomial(N, p) number of DP steps); for ``p = 1``, the accountant's.
  The ``R`` runs of a training share its coins: given them they are independent, so for
  ``p < 1`` the bound holds for the coins as drawn in the ``n_trials`` trainings (whose DP
  step counts sample Binomial(N, p)), not for independent coins per run.
"""

from __future__ import annotations

import dataclasses
import math
from functools import lru_cache

import numpy as np

from dprl.accounting.pld import pmf_pair_epsilon, poisson_gaussian_or_idle_epsilon
from dprl.experiments.audits.sharma2025_dp_sgd import DPSGDAuditConfig
from dprl.experiments.audits.common import (AuditConfig, Statistics, register_audit,
                                            accountant_epsilon, exact_gdp_mu, pair_epsilon,
                                            statistic_losses)
from dprl.sharma2025 import privacy as pv
from dprl.sharma2025.composition import composition_totals
from dprl.sharma2025 import release as release_module
from dprl.sharma2025.accounting import dp_sgd_epsilon, dp_steps_upper_bound
from dprl.validation import require_int, require_positive

#: The privacy-analysis chapter's tabular MDP: initial distribution and transitions (S, A, S).
TOY_INITIAL = (0.6, 0.4)
TOY_TRANSITIONS = (((0.8, 0.2), (0.3, 0.7)), ((0.5, 0.5), (0.1, 0.9)))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReleaseAuditConfig(AuditConfig):
    """DataRelease with ``T = n_queries`` rounds on the toy MDP with horizon ``length``, App.
    B.1 experts of minimum action probability ``p_min``, ``m`` experts with the canary and
    ``per_expert`` (``N``) trajectories each. The claim is ``(eps1, delta1) = (eps, delta)``;
    Alg. 2 runs with the parameters of ``eps / noise_factor`` (1: as claimed; below 1:
    under-noised, for the tests)."""

    n_queries: int = 25
    length: int = 2
    p_min: float = 0.02
    m: int
    per_expert: int = 20
    noise_factor: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        require_int("m", self.m, minimum=2)
        require_int("per_expert", self.per_expert)
        require_positive("noise_factor", self.noise_factor)

    @property
    def params(self) -> release_module.ReleaseParameters:
        """Alg. 2's constants (:func:`~dprl.sharma2025.release.release_parameters`)."""
        return release_module.release_parameters(self.eps / self.noise_factor, self.delta,
                                                 self.n_queries, self.length, self.p_min)

    @property
    def policy(self) -> np.ndarray:
        """Every expert's policy ``(L, S, A)``: App. B.1's type 0, action 0 everywhere
        (:func:`~dprl.sharma2025.privacy.binary_policy_types`)."""
        return pv.binary_policy_types(2, 2, self.length, self.p_min)[0]


@lru_cache(maxsize=8)
def _release_model(length: int, p_min: float) -> pv.OneRoundModel:
    """One round of Alg. 2 on the toy MDP with experts of App. B.1's type 0."""
    policy = pv.binary_policy_types(2, 2, length, p_min)[:1]
    return pv.one_round_model(np.array(TOY_INITIAL), np.array(TOY_TRANSITIONS), policy,
                              length, p_min)


def release_distributions(config: ReleaseAuditConfig) -> tuple[np.ndarray, np.ndarray]:
    """The exact one-round output distributions under ``D`` (``m - 1`` experts) and ``D'``
    (``m``): nothing released, then the prefixes by length
    (:meth:`~dprl.sharma2025.privacy.OneRoundModel.distribution`)."""
    model, params = _release_model(config.length, config.p_min), config.params
    return tuple(model.distribution(np.array([n]), params.eps_prime, params.threshold)
                 for n in (config.m - 1, config.m))


@lru_cache(maxsize=8)
def release_log_ratios(config: ReleaseAuditConfig) -> np.ndarray:
    """``log P(o | D') - log P(o | D)`` per one-round output ``o``, probabilities floored at
    1e-300."""
    null, alternative = (np.maximum(x, 1e-300) for x in release_distributions(config))
    return np.log(alternative) - np.log(null)


def _categorical(probabilities: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw per row of ``probabilities`` (..., k), by inverting the cumulative sums."""
    edges = np.cumsum(probabilities, axis=-1)[..., :-1]
    return (rng.random(probabilities.shape[:-1])[..., None] >= edges).sum(axis=-1)


def record_toy_trajectories(policy: np.ndarray, n: int,
                            rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` trajectories of ``policy`` ``(L, S, A)`` on the toy MDP: states ``(n, L + 1)``
    and actions ``(n, L)``, step by step (initial state, then action and next state)."""
    transitions = np.array(TOY_TRANSITIONS)
    states = [_categorical(np.broadcast_to(np.array(TOY_INITIAL), (n, 2)), rng)]
    actions = []
    for step in range(policy.shape[0]):
        actions.append(_categorical(policy[step, states[-1]], rng))
        states.append(_categorical(transitions[states[-1], actions[-1]], rng))
    return np.stack(states, axis=1), np.stack(actions, axis=1)


def release_outputs(config: ReleaseAuditConfig, m: int, rng: np.random.Generator) -> np.ndarray:
    """One run on ``m`` experts: record ``N`` trajectories of each, call
    :func:`~dprl.sharma2025.release.data_release` on them (the ``m`` experts' log
    probabilities along each queried trajectory), and return the ``T`` outputs' indices in
    :func:`release_distributions` order (0: nothing; else the released prefix)."""
    policy, params = config.policy, config.params
    states, actions = record_toy_trajectories(policy, config.per_expert * m, rng)
    steps = np.arange(config.length)
    log_policy = np.log(policy[steps, states[:, :-1], actions])        # (N m, L)

    def log_probs_of(t: int) -> np.ndarray:
        return np.broadcast_to(log_policy[t], (m, config.length))

    result = release_module.data_release(len(actions), log_probs_of, params, rng)
    k = result.prefix_lengths
    code = states[:, 0]
    for step in steps:
        code = (code * 2 + actions[:, step]) * 2 + states[:, step + 1]
    prefix = code[result.queried] // 4 ** (config.length - k)
    offsets = np.concatenate([[1], 1 + np.cumsum(_release_model(config.length,
                                                                config.p_min).prefix_sizes())])
    return np.where(k == 0, 0, offsets[np.maximum(k - 1, 0)] + prefix)


def release_statistics(config: ReleaseAuditConfig, rng: np.random.Generator) -> Statistics:
    """Per run, the exact log-likelihood ratio of its ``T`` outputs, on ``D`` (``m - 1``
    experts) and ``D'`` (``m``), runs alternating between the worlds."""
    log_ratios = release_log_ratios(config)
    runs = [[log_ratios[release_outputs(config, m, rng)].sum() for m in (config.m - 1, config.m)]
            for _ in range(config.runs_per_trial)]
    return tuple(np.array(world) for world in zip(*runs))


@pair_epsilon.register
def _(config: ReleaseAuditConfig) -> float:
    """The ``T``-fold composition of the one-round pair (the rounds are i.i.d. in both
    worlds: module docstring), by :func:`~dprl.accounting.pld.pmf_pair_epsilon`."""
    return pmf_pair_epsilon(*({i: math.log(v) for i, v in enumerate(p) if v > 0}
                              for p in release_distributions(config)),
                            config.n_queries, config.delta)


@accountant_epsilon.register
def _(config: ReleaseAuditConfig) -> float:
    """The book's accounting of Alg. 2: Theorem 5.3's per-round ``(2 eps', delta1/(2T))``
    composed optimally over ``T`` rounds (Kairouz, Oh & Viswanath 2015;
    :func:`~dprl.sharma2025.composition.composition_totals`), at the parameters run."""
    return composition_totals(config.eps / config.noise_factor, config.delta,
                                 config.n_queries).kov


def dp_sgd_statistics(config: DPSGDAuditConfig, rng: np.random.Generator) -> Statistics:
    """White-box audit (module docstring): one training without the canaries (``D``) and one
    with them (``D'``), each from its own torch stream of the trial
    (:func:`~dprl.experiments.audits.sharma2025_training.training_statistics`; torch loads
    here, not when the catalogue registers the audit)."""
    from dprl.experiments.audits.sharma2025_training import training_statistics
    return training_statistics(config, rng)


@accountant_epsilon.register
def _(config: DPSGDAuditConfig) -> float:
    """PLD (:func:`~dprl.sharma2025.accounting.dp_sgd_epsilon`) of the steps as the auditor
    sees them: Alg. 4 (``p = 1``) composes ``N`` steps at ``b/m``; with visible coins
    (``p < 1``) at most ``k`` DP steps at ``b/m`` with probability ``1 - delta/2``
    (:func:`~dprl.sharma2025.accounting.dp_steps_upper_bound`), so ``eps(k)`` at
    ``delta/2`` plus that tail is an ``(eps, delta)`` guarantee."""
    if config.p == 1:
        return dp_sgd_epsilon(config.noise_multiplier, config.sampling_rate, config.n_steps,
                              config.delta, config.accountant)
    steps = dp_steps_upper_bound(config.n_steps, config.p, config.delta / 2)
    return dp_sgd_epsilon(config.noise_multiplier, config.sampling_rate, steps,
                          config.delta / 2, config.accountant)


@pair_epsilon.register
def _(config: DPSGDAuditConfig) -> float:
    """The audited pair's exact eps (module docstring):
    :func:`~dprl.accounting.pld.poisson_gaussian_or_idle_epsilon`."""
    return poisson_gaussian_or_idle_epsilon(config.noise_multiplier, config.sampling_rate, config.n_steps,
                                config.p, config.delta)


@statistic_losses.register(ReleaseAuditConfig)
@statistic_losses.register(DPSGDAuditConfig)
def _(config: AuditConfig) -> np.ndarray:
    """Both statistics are the privacy loss itself (the exact log-likelihood ratio)."""
    return config.edges


@exact_gdp_mu.register(ReleaseAuditConfig)
@exact_gdp_mu.register(DPSGDAuditConfig)
def _(config: AuditConfig) -> None:
    """Neither pair is Gaussian: no mu-GDP curve."""
    return None


_RELEASE_SETTINGS = dict(eps=10.0, delta=1 / 3000, n_queries=25, length=2, p_min=0.02,
                         m=886, per_expert=20, edge_low=-1.5, edge_high=2.5, n_edges=4001)
RELEASE = register_audit(
    "audit-sharma2025-release",
    "Black-box audit of Sharma 2025's DataRelease (Alg. 2) on add/remove-one expert sets "
    "(Acrobot's eps1 = 10, delta1 = 1/3000, T = 25; toy MDP, L = 2, m = 886, N = 20)",
    release_statistics,
    ReleaseAuditConfig(n_trials=4, root_seed=1711, batch_size=4, runs_per_trial=100,
                       pilot_trials=1, **_RELEASE_SETTINGS),
    ReleaseAuditConfig(n_trials=100, root_seed=1711, batch_size=10, runs_per_trial=1000,
                       pilot_trials=10, **_RELEASE_SETTINGS),
    sampled=("dprl.sharma2025.release.data_release",))


def _dp_sgd_audit(name: str, p: float, root_seed: int, edge_high: float, runs: int,
                  n_trials: int):
    """Expert-level DP-SGD (``p = 1``) or selective DP-SGD (``p < 1``) at CartPole's eps2 =
    2.5, delta2 = 1/30000 (eps = 10, App. B.3), b/m = 256/3000, N = 200 steps."""
    settings = dict(eps=2.5, delta=1 / 30000, expected_batch=256, n_experts=3000, n_steps=200,
                    p=p, edge_low=-4.0, edge_high=edge_high, n_edges=3001)
    function = "expert_dp_sgd_step" if p == 1 else "selective_dp_sgd_step"
    return register_audit(
        f"audit-sharma2025-{name}",
        f"White-box audit of Sharma 2025's {name} (p = {p}) with expert canaries "
        "(eps2 = 2.5, delta2 = 1/30000, b/m = 256/3000, N = 200)", dp_sgd_statistics,
        DPSGDAuditConfig(n_trials=4, root_seed=root_seed, batch_size=4, runs_per_trial=200,
                         pilot_trials=1, accountant="rdp", **settings),
        DPSGDAuditConfig(n_trials=n_trials, root_seed=root_seed, batch_size=10,
                         runs_per_trial=runs, pilot_trials=n_trials // 10, **settings),
        sampled=(f"dprl.sharma2025.dp_sgd.{function}",))


DP_SGD = _dp_sgd_audit("dp-sgd", 1.0, 1712, 8.0, 1000, 100)
SELECTIVE = _dp_sgd_audit("selective", 0.5, 1713, 12.0, 1000, 300)
