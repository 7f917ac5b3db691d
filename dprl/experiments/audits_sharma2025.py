"""Empirical privacy audits of Sharma et al. (2025)'s two mechanisms (issue 17; chapter
book/appendix/audits), on the conventions of :mod:`dprl.experiments.audits`.

- ``audit-sharma2025-release``: DataRelease (Alg. 2, the sparse vector technique over
  trajectory prefixes) as Sec. 5 analyses it: each of the ``T`` rounds draws an expert
  uniformly from the set and a trajectory from it on a tabular MDP (the privacy-analysis
  chapter's two-state, two-action MDP, ``L = 2``), queries its prefixes against the noisy
  threshold and releases the stable prefix (or nothing). Neighbours are add/remove-one expert
  sets, the relation of Theorems 5.3 and 5.5: ``D`` holds ``m - 1`` experts of App. B.1's kind
  that all prefer action 0; ``D'`` adds the canary, an expert that prefers action 1
  everywhere. The output of a round is discrete (nothing, or one of the enumerable prefixes),
  and its exact distribution under either set is
  :meth:`~dprl.sharma2025.privacy.OneRoundModel.distribution`; the mechanism is sampled
  step by step (expert, actions, transitions, Laplace noises) and each run is scored by the
  exact log-likelihood ratio of its ``T`` outputs, so thresholding the statistic tests the
  events of largest likelihood ratio (Neyman-Pearson). Black-box: the auditor sees the
  release only.
- ``audit-sharma2025-dp-sgd`` / ``audit-sharma2025-selective``: expert-level DP-SGD (Alg. 4)
  and the selective DP-SGD of Alg. 3, simulated as the released gradients rather than by
  training a network (white-box: every noisy clipped gradient sum is released, as the
  privacy proof assumes). Each step is a DP step with probability ``p`` (Alg. 3's coin; ``p =
  1``: Alg. 4); a DP step Poisson-samples experts at rate ``q = b/m`` and releases the sum of
  their clipped gradients plus ``N(0, s^2 C^2 I)``. The canary expert's clipped gradient is
  ``C u`` for a fixed unit ``u``; the other experts' gradients are known to the auditor
  (they set them), so only the projection on ``u`` in units of ``C`` matters: ``x_t ~ N(0,
  s^2)`` without the canary (``D``) and ``B_t + N(0, s^2)``, ``B_t ~ Bernoulli(q)``, with it
  (``D'``), the dominating pair of the Poisson-subsampled Gaussian mechanism under add/remove
  (Zhu, Dong & Wang 2022). The stable steps are noiseless, so the coins are visible to a
  white-box auditor; the statistic is the exact log-likelihood ratio of the DP steps,
  ``sum_t log(1 - q + q e^{(2 x_t - 1) / (2 s^2)})``. The noise multiplier is Sec. 6's PLD
  calibration (:func:`~dprl.sharma2025.accounting.noise_for_budget`) of ``N`` steps at the
  paper's rate ``p q`` (Sec. 4, App. B.2: the coins counted as subsampling).
"""

from __future__ import annotations

import dataclasses
import math
from functools import lru_cache

import numpy as np

from dprl.experiments.audits import (AuditConfig, Statistics, _register, accountant_epsilon,
                                     exact_gdp_mu, statistic_losses)
from dprl.sharma2025 import privacy as pv
from dprl.sharma2025.accounting import (ACCOUNTANTS, dp_sgd_epsilon, dp_steps_upper_bound,
                                        noise_for_budget)
from dprl.sharma2025.release import ReleaseParameters, release_parameters
from dprl.validation import require_int, require_positive, require_probability

#: The privacy-analysis chapter's tabular MDP: initial distribution and transitions (S, A, S).
TOY_INITIAL = (0.6, 0.4)
TOY_TRANSITIONS = (((0.8, 0.2), (0.3, 0.7)), ((0.5, 0.5), (0.1, 0.9)))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReleaseAuditConfig(AuditConfig):
    """DataRelease at ``(eps1, delta1) = (eps, delta)`` with ``T = n_queries`` rounds on the
    toy MDP with horizon ``length`` and App. B.1 experts of minimum action probability
    ``p_min``; ``m`` experts with the canary, of type ``canary_type`` (default: the last,
    which prefers action 1 everywhere). ``noise_factor`` scales both Laplace noises (1: Alg.
    2; below 1: under-noised, the threshold kept, for the tests)."""

    n_queries: int = 25
    length: int = 2
    p_min: float = 0.02
    m: int
    canary_type: int = -1
    noise_factor: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        require_int("m", self.m, minimum=2)
        require_positive("noise_factor", self.noise_factor)
        if not -self.n_types <= self.canary_type < self.n_types:
            raise ValueError(f"canary_type must index one of the {self.n_types} expert types, "
                             f"got {self.canary_type}")

    @property
    def n_types(self) -> int:
        """Number of App. B.1 expert types on the toy MDP, ``|A|^(L |S|)``."""
        return 2 ** (2 * self.length)

    @property
    def params(self) -> ReleaseParameters:
        """Alg. 2's constants (:func:`~dprl.sharma2025.release.release_parameters`)."""
        return release_parameters(self.eps, self.delta, self.n_queries, self.length, self.p_min)

    def multiplicities(self) -> tuple[np.ndarray, np.ndarray]:
        """Experts per type (:func:`~dprl.sharma2025.privacy.binary_policy_types` order)
        without (``D``) and with (``D'``) the canary: ``m - 1`` of type 0 (preferring action
        0 everywhere), plus one of ``canary_type``."""
        without = np.zeros(self.n_types, dtype=np.int64)
        without[0] = self.m - 1
        with_canary = without.copy()
        with_canary[self.canary_type] += 1
        return without, with_canary


@lru_cache(maxsize=8)
def _release_model(length: int, p_min: float) -> pv.OneRoundModel:
    """One round of Alg. 2 on the toy MDP over every App. B.1 expert type."""
    return pv.one_round_model(np.array(TOY_INITIAL), np.array(TOY_TRANSITIONS),
                              pv.binary_policy_types(2, 2, length, p_min), length, p_min)


@lru_cache(maxsize=8)
def release_log_ratios(config: ReleaseAuditConfig) -> np.ndarray:
    """``log P(o | D') - log P(o | D)`` for every output ``o`` of one round (nothing
    released, then the prefixes by length, as :meth:`~dprl.sharma2025.privacy.OneRoundModel.
    distribution` orders them), floored at probability 1e-300."""
    model, params = _release_model(config.length, config.p_min), config.params
    eps_noise = params.eps_prime / config.noise_factor
    null, alternative = (np.maximum(model.distribution(x, eps_noise, params.threshold), 1e-300)
                         for x in config.multiplicities())
    return np.log(alternative) - np.log(null)


def _categorical(probabilities: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw per row of ``probabilities`` (..., k), by inverting the cumulative sums."""
    edges = np.cumsum(probabilities, axis=-1)[..., :-1]
    return (rng.random(probabilities.shape[:-1])[..., None] >= edges).sum(axis=-1)


def release_outputs(config: ReleaseAuditConfig, multiplicities: np.ndarray, n: int,
                    rng: np.random.Generator) -> np.ndarray:
    """Indices (:func:`release_log_ratios` order) of ``n`` independent rounds of Alg. 2 on
    the expert set ``multiplicities``: draw an expert and its trajectory on the toy MDP,
    the threshold noise ``Lap(2/eps')`` and one ``Lap(4/eps')`` per prefix, and release the
    prefix before the first rejection (Alg. 1-2)."""
    model, params = _release_model(config.length, config.p_min), config.params
    policies = pv.binary_policy_types(2, 2, config.length, config.p_min)
    transitions = np.array(TOY_TRANSITIONS)
    expert = _categorical(np.broadcast_to(multiplicities / multiplicities.sum(),
                                          (n, len(multiplicities))), rng)
    state = _categorical(np.broadcast_to(np.array(TOY_INITIAL), (n, 2)), rng)
    trajectory = state
    for step in range(config.length):
        action = _categorical(policies[expert, step, state], rng)
        state = _categorical(transitions[state, action], rng)
        trajectory = (trajectory * 2 + action) * 2 + state
    scale = config.noise_factor / params.eps_prime
    threshold = params.threshold + rng.laplace(0.0, 2 * scale, n)
    noise = rng.laplace(0.0, 4 * scale, (n, config.length))
    passed = model.counts(multiplicities)[trajectory] + noise > threshold[:, None]
    k = np.cumprod(passed, axis=1).sum(axis=1)
    offsets = np.concatenate([[1], 1 + np.cumsum(model.prefix_sizes())])
    prefix = trajectory // 4 ** (config.length - k)
    return np.where(k == 0, 0, offsets[np.maximum(k - 1, 0)] + prefix)


def release_statistics(config: ReleaseAuditConfig, rng: np.random.Generator) -> Statistics:
    """Per run, the exact log-likelihood ratio of the ``T`` released outputs under ``D``
    (without the canary) and ``D'`` (with it)."""
    log_ratios = release_log_ratios(config)
    shape = (config.runs_per_trial, config.n_queries)
    return tuple(log_ratios[release_outputs(config, x, math.prod(shape), rng).reshape(shape)]
                 .sum(axis=-1) for x in config.multiplicities())


@accountant_epsilon.register
def _(config: ReleaseAuditConfig) -> float:
    """The book's accounting of Alg. 2: Theorem 5.3's per-round ``(2 eps', delta1/(2T))``
    composed optimally over ``T`` rounds (Kairouz, Oh & Viswanath 2015;
    :func:`~dprl.sharma2025.privacy.composition_totals`)."""
    return pv.composition_totals(config.eps, config.delta, config.n_queries).kov


@dataclasses.dataclass(frozen=True, kw_only=True)
class DPSGDAuditConfig(AuditConfig):
    """``n_steps`` steps of (selective) DP-SGD at rate ``sampling_rate`` = b/m, each a DP
    step with probability ``p`` (Alg. 3; 1: Alg. 4), calibrated to ``(eps, delta)`` at the
    paper's rate ``p b/m`` over all steps by ``accountant`` (``"pld"``, Sec. 6's; ``"rdp"``
    at smoke scale, where PLD's calibration would take most of a test's time)."""

    sampling_rate: float
    n_steps: int
    p: float = 1.0
    accountant: str = "pld"
    noise_factor: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        require_probability("sampling_rate", self.sampling_rate, open_low=True)
        require_int("n_steps", self.n_steps)
        require_probability("p", self.p, open_low=True)
        require_positive("noise_factor", self.noise_factor)
        if self.accountant not in ACCOUNTANTS:
            raise ValueError(f"accountant must be one of {ACCOUNTANTS}, got {self.accountant!r}")

    @property
    def noise_multiplier(self) -> float:
        """Sec. 6's calibration: :func:`~dprl.sharma2025.accounting.noise_for_budget` of
        ``n_steps`` steps at rate ``p b/m``, times ``noise_factor`` (1; below 1:
        under-noised, for the tests)."""
        return self.noise_factor * _noise_for_budget(
            self.eps, self.delta, self.p * self.sampling_rate, self.n_steps, self.accountant)


_noise_for_budget = lru_cache(maxsize=16)(noise_for_budget)


def dp_step_log_likelihood_ratio(x: np.ndarray, noise_multiplier: float,
                                 q: float) -> np.ndarray:
    """Per DP step, ``log((1 - q) phi_s(x) + q phi_s(x - 1)) - log phi_s(x)`` ``= log(1 + q
    (e^{(2x - 1) / (2 s^2)} - 1))``: the privacy loss of the canary's presence (Poisson rate
    ``q``, clipped gradient 1) seen in a noisy gradient's projection ``x``."""
    return np.log1p(q * np.expm1((2 * x - 1) / (2 * noise_multiplier**2)))


def dp_sgd_statistics(config: DPSGDAuditConfig, rng: np.random.Generator) -> Statistics:
    """White-box audit (module docstring): per run and world, the coins of the ``N`` steps
    (drawn only when ``p < 1``), the canary's Poisson draws (``D'`` only) and the noise of
    every step; the statistic sums the log-likelihood ratio over the DP steps."""
    s, q = config.noise_multiplier, config.sampling_rate
    shape = (config.runs_per_trial, config.n_steps)
    statistics = []
    for canary in (False, True):
        dp_step = rng.random(shape) < config.p if config.p < 1 else np.ones(shape, dtype=bool)
        x = s * rng.standard_normal(shape)
        if canary:
            x += rng.random(shape) < q
        statistics.append(np.where(dp_step, dp_step_log_likelihood_ratio(x, s, q), 0.0)
                          .sum(axis=-1))
    return statistics[0], statistics[1]


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
                         m=1079, edge_low=-1.0, edge_high=2.0, n_edges=3001)
RELEASE = _register(
    "audit-sharma2025-release",
    "Black-box audit of Sharma 2025's DataRelease (Alg. 2) on add/remove-one expert sets "
    "(Acrobot's eps1 = 10, delta1 = 1/3000, T = 25; toy MDP, L = 2, m = 1079)",
    release_statistics,
    ReleaseAuditConfig(n_trials=4, root_seed=1711, batch_size=4, runs_per_trial=2000,
                       **_RELEASE_SETTINGS),
    ReleaseAuditConfig(n_trials=100, root_seed=1711, batch_size=10, runs_per_trial=10000,
                       **_RELEASE_SETTINGS))


def _dp_sgd_audit(name: str, p: float, root_seed: int, edge_high: float):
    """Expert-level DP-SGD (``p = 1``) or selective DP-SGD (``p < 1``) at CartPole's eps2 =
    2.5, delta2 = 1/30000 (eps = 10, App. B.3), b/m = 256/3000, N = 200 steps."""
    settings = dict(eps=2.5, delta=1 / 30000, sampling_rate=256 / 3000, n_steps=200, p=p,
                    edge_low=-4.0, edge_high=edge_high, n_edges=3001)
    return _register(
        f"audit-sharma2025-{name}",
        f"White-box audit of Sharma 2025's {name} (p = {p}) with an expert canary "
        "(eps2 = 2.5, delta2 = 1/30000, b/m = 256/3000, N = 200)", dp_sgd_statistics,
        DPSGDAuditConfig(n_trials=4, root_seed=root_seed, batch_size=4, runs_per_trial=2000,
                         accountant="rdp", **settings),
        DPSGDAuditConfig(n_trials=100, root_seed=root_seed, batch_size=10,
                         runs_per_trial=10000, **settings))


DP_SGD = _dp_sgd_audit("dp-sgd", 1.0, 1712, 8.0)
SELECTIVE = _dp_sgd_audit("selective", 0.5, 1713, 12.0)
