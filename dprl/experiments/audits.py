"""Empirical privacy audits of the book's mechanisms (issue 17; chapter book/appendix/audits).

Every audit runs a mechanism ``runs_per_trial`` times per trial on each of two neighbouring
inputs ``D`` (null) and ``D'`` (alternative), computes the attack's statistic (large values
point to ``D'``) and stores its histograms over the config's ``edges``; the chapter turns the
histograms into the held-out lower bound of :func:`dprl.audit.split_lower_bound` (the first
half of the trials choose the test, the second half evaluate it).

- ``audit-gaussian``: the Gaussian mechanism (analytic calibration, Balle & Wang 2018) on a
  scalar query of sensitivity 1, ``f(D) = 0`` against ``f(D') = 1``; black-box (the release is
  the output, the optimal statistic is the output itself).
- ``audit-laplace``: the Laplace mechanism (Dwork et al. 2006) on the same pair.
- ``audit-xie2019-paper`` / ``audit-xie2019-sound``: GPOPE's privatised gradient steps (Xie,
  Thomas & Miklau 2019, Alg. 1), white-box: every noisy gradient is released, as the privacy
  proof assumes, and the adversary sets the clipped gradients (the gradient canary of Nasr et
  al. 2021). In ``D`` all ``m`` trajectories have clipped gradient ``+h e_1``; ``D'`` replaces
  the canary by one with ``-h e_1`` (replace-one: a difference of ``2h``). Every other record
  sitting at the canary's gradient in ``D`` makes the pair ``N(1, sigma^2)`` against
  ``(1 - q) N(1, sigma^2) + q N(-1, sigma^2)`` per iteration (``q = 1/m``, units of ``h``): the
  dominating pair of a subsampled Gaussian (Zhu, Dong & Wang 2022); zero gradients for the
  others would give a weaker pair. Each of the ``N`` iterations samples one trajectory
  uniformly and adds ``h N(0, sigma^2 I)``; the coordinates other than ``e_1`` carry no
  information about the pair, so the statistic is the exact log-likelihood ratio of the
  ``e_1`` coordinates, ``sum_t log(1 + q (e^{-2 x_t / sigma^2} - 1))``.
  ``-paper`` uses the paper's Lemma 1 sigma (which assumes neighbours differ by ``h``),
  ``-sound`` the tightest sound accountant's (:func:`~dprl.xie2019.privacy.tightest_sigma`,
  ``2h``).
- ``audit-balle2016-lsw`` / ``audit-balle2016-lsl``: DP-LSW and DP-LSL (Balle, Gomrokchi &
  Precup 2016, Algs. 1-2) as released, noise scale computed from the data set, on neighbouring
  data sets of ``m`` trajectories of an ``N``-state chain (tabular features, uniform weights):
  ``m - 1`` trajectories start in the absorbing last state with return 0; the canary starts
  in state 0 (so visits every state) with first-visit return ``F_max`` everywhere, and its
  neighbour starts in the last state with return 0 (replace-one; returns at the ends of
  ``[0, F_max]``, the worst case the theorems cover). Black-box: the auditor sees the release
  ``N(theta_X, sigma_X^2 I)`` and uses the exact log-likelihood ratio of the two releases
  (different means and, for DP-LSL, different sigmas).
- ``audit-wang2019-proof`` / ``audit-wang2019-statement``: Algorithm 1 of Wang & Hegde (2019)
  at the book's assumed authors' setting (eps = 0.9, T/B = 39 updates, J = 39 paths, delta
  = 5e-5 for the mechanism and 5e-5 for the tail), sigma by Theorem 5 read with C inside the
  root (the proof) or outside it. White-box: every update's noisy function ``Q_t + g_t``,
  ``g_t ~ GP(0, sigma^2 exp(-beta |x - y|))``, is released, as the proof assumes. The canary
  moves each update by ``f_t - f'_t = Delta f`` with ``||Delta f||_H = sqrt(C)``, the proof's
  bound, approached by a sawtooth of slope +-L and vanishing amplitude at level ``v L``
  (sup norm ``v L``, Lipschitz ``L``, Lemma 6 with ``beta = 1/v``). The log-likelihood ratio
  of a Gaussian-process release is ``<g, Delta f>_H / sigma^2`` plus a constant (Hall,
  Rinaldo & Wasserman 2013), exactly normal: each update contributes
  ``y_t = z_t + [D'] sqrt(C) / sigma``, ``z_t ~ N(0, 1)``, and the statistic is
  ``sum_t y_t / sqrt(T/B)``, drawn directly as the normal variable it is.
  ``audit-wang2019-proof-updates`` / ``-statement-updates``: the same with T/B = J = 4873,
  every SGD update of the DQN-style run (book/wang2019/experiments), each with a fresh path as
  the proof assumes (that run draws 100 paths for its 4873 updates, a reuse outside the proof;
  not audited here). ``audit-wang2019-proof-one-update`` / ``-statement-one-update``: one
  update (T/B = J = 1), the functional mechanism of Prop. 4 / Lemma 6 alone.
- Sharma et al. (2025): :mod:`dprl.experiments.audits_sharma2025`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from functools import singledispatch

import numpy as np

from dprl.accounting import smallest_sufficient_scale
from dprl.audit import Bound, histogram, privacy_loss_delta, split_lower_bound
from dprl.balle2016 import (FirstVisitSummary, dp_lsl_noise_scale, dp_lsw_noise_scale, lsl,
                            lsw, smoothing_constants)
from dprl.balle2016.calibration import smooth_gaussian_delta
from dprl.experiments.registry import Experiment, TrialConfig, register
from dprl.mechanisms import analytic_gaussian_sigma, gaussian_epsilon, laplace_scale
from dprl.wang2019.calibration import Theorem5Calibration, authors_calibration
from dprl.xie2019.privacy import lemma1_sigma, tightest_epsilon, tightest_sigma

#: (null, alternative) statistics of a trial's runs, each ``(runs,)``
Statistics = tuple[np.ndarray, np.ndarray]


@dataclasses.dataclass(frozen=True, kw_only=True)
class AuditConfig(TrialConfig):
    """Runs per trial and world, the claimed ``(eps, delta)`` and the histogram's edges
    (``n_edges`` equally spaced over ``[edge_low, edge_high]``: the thresholds tried)."""

    runs_per_trial: int
    eps: float = 1.0
    delta: float = 1e-5
    edge_low: float
    edge_high: float
    n_edges: int = 2001

    @property
    def edges(self) -> np.ndarray:
        """The thresholds of the audit's tests."""
        return np.linspace(self.edge_low, self.edge_high, self.n_edges)


@dataclasses.dataclass(frozen=True, kw_only=True)
class GPOPEAuditConfig(AuditConfig):
    """GPOPE's iterations ``N``, trajectories ``m`` and which calibration sets sigma."""

    n_iterations: int = 100
    m: int = 100
    calibration: str = "paper"

    @property
    def sigma(self) -> float:
        """Noise multiplier: Lemma 1's (``"paper"``) or the tightest sound accountant's
        (``"sound"``, WBK Thm. 27 under replace-one)."""
        if self.calibration == "paper":
            return lemma1_sigma(self.eps, self.delta, self.n_iterations, self.m)
        if self.calibration == "sound":
            return tightest_sigma(self.eps, self.delta, self.n_iterations, self.m)
        raise ValueError(f"calibration must be 'paper' or 'sound', got {self.calibration!r}")


def audited_bound(config: AuditConfig, arrays: dict[str, np.ndarray],
                  confidence: float = 0.95) -> Bound:
    """The held-out lower bound on eps at the config's delta from an audit's stored
    histograms (:func:`dprl.audit.split_lower_bound`)."""
    return split_lower_bound(arrays["null_counts"], arrays["alternative_counts"], config.edges,
                             config.delta, confidence)


@singledispatch
def accountant_epsilon(config: AuditConfig) -> float:
    """The tightest accountant's eps at the config's delta for the audited mechanism: the
    exact Gaussian profile (Balle & Wang 2018, Thm. 8), the Laplace mechanism's eps, and for
    GPOPE the tightest sound bound under replace-one
    (:func:`~dprl.xie2019.privacy.tightest_epsilon`, WBK Thm. 27, sensitivity 2h) at the
    calibration's sigma, for DP-LSW / DP-LSL the smoothed Gaussian
    mechanism's exact profile at Lemma 1's constants (:func:`smoothed_gaussian_epsilon`),
    for Wang 2019's T/B Gaussian-process releases one Gaussian mechanism of sensitivity
    ``sqrt(T/B) sqrt(C)`` (:func:`~dprl.wang2019.calibration.exact_composition_delta`).
    Other modules register their configs' accountants (``accountant_epsilon.register``)."""
    if isinstance(config, GPOPEAuditConfig):
        return tightest_epsilon(config.sigma, config.delta, config.n_iterations, config.m)
    if isinstance(config, WangAuditConfig):
        return gaussian_epsilon(config.delta, np.sqrt(config.n_updates) * config.shift, 1.0)
    if isinstance(config, BalleAuditConfig):
        return smoothed_gaussian_epsilon(config.eps, config.delta, config.n_states)
    if config.delta == 0:
        return config.eps
    return gaussian_epsilon(config.delta, 1.0,
                            analytic_gaussian_sigma(1.0, config.eps, config.delta))


@dataclasses.dataclass(frozen=True, kw_only=True)
class BalleAuditConfig(AuditConfig):
    """The chain's ``N``, the data sets' ``m``, ``F_max``, the estimator and DP-LSL's ridge."""

    estimator: str = "DP-LSW"
    n_states: int = 5
    m: int = 10
    return_bound: float = 1.0
    lam: float = 1.0

    def pair(self) -> tuple[FirstVisitSummary, FirstVisitSummary]:
        """The data sets ``X`` (with the canary) and ``X'`` (module docstring)."""
        counts = np.zeros((2, self.n_states), dtype=np.int64)
        counts[:, -1] = self.m - 1
        counts[0] += 1  # the canary visits every state
        counts[1, -1] += 1  # its neighbour only the last
        sums = np.where(np.arange(2)[:, None] == 0, self.return_bound, 0.0) * (counts > 0)
        sums[:, -1] = np.array([self.return_bound, 0.0])
        return (FirstVisitSummary(counts[0], sums[0], self.m, self.return_bound),
                FirstVisitSummary(counts[1], sums[1], self.m, self.return_bound))

    def releases(self) -> tuple[tuple[np.ndarray, float], tuple[np.ndarray, float]]:
        """(mean, sigma) of the release on ``X`` and on ``X'`` (Algorithm 1 or 2)."""
        features, rho = np.eye(self.n_states), np.full(self.n_states, 1 / self.n_states)
        if self.estimator == "DP-LSW":
            return tuple((lsw(x, features, rho),
                          float(dp_lsw_noise_scale(x, features, rho, self.eps, self.delta)))
                         for x in self.pair())
        if self.estimator == "DP-LSL":
            return tuple((lsl(x, features, rho, self.lam),
                          float(dp_lsl_noise_scale(x, features, rho, self.lam, self.eps,
                                                   self.delta)))
                         for x in self.pair())
        raise ValueError(f"estimator must be 'DP-LSW' or 'DP-LSL', got {self.estimator!r}")


def gaussian_log_likelihood_ratio(outputs: np.ndarray, null: tuple[np.ndarray, float],
                                  alternative: tuple[np.ndarray, float]) -> np.ndarray:
    """``log N(o; mu', sigma'^2 I) - log N(o; mu, sigma^2 I)`` over the last axis of
    ``outputs``, for ``null = (mu, sigma)`` and ``alternative = (mu', sigma')``."""
    (mean, sigma), (mean_alt, sigma_alt) = null, alternative
    return (((outputs - mean) ** 2 / (2 * sigma**2)
             - (outputs - mean_alt) ** 2 / (2 * sigma_alt**2)).sum(axis=-1)
            - outputs.shape[-1] * np.log(sigma_alt / sigma))


def balle_statistics(config: BalleAuditConfig, rng: np.random.Generator) -> Statistics:
    """Releases of DP-LSW or DP-LSL on ``X`` and ``X'``, scored by the exact log-likelihood
    ratio (black-box)."""
    null, alternative = config.releases()
    shape = (config.runs_per_trial, config.n_states)
    return tuple(gaussian_log_likelihood_ratio(mean + sigma * rng.standard_normal(shape),
                                               null, alternative)
                 for mean, sigma in (null, alternative))


def smoothed_gaussian_epsilon(eps: float, delta: float, d: int) -> float:
    """The smallest eps' at which Lemma 1's smoothed Gaussian mechanism, with the constants
    ``alpha, beta`` it sets for ``(eps, delta)`` in dimension ``d``, is ``(eps', delta)``-DP
    by the exact profile of :func:`~dprl.balle2016.calibration.smooth_gaussian_delta` (a
    numerical calibration over Lemma 1's allowed pairs, not a proof)."""
    alpha, beta = smoothing_constants(eps, delta, d)
    return smallest_sufficient_scale(lambda e: smooth_gaussian_delta(e, alpha, beta, d),
                                     delta, initial=eps, rtol=1e-4)


@dataclasses.dataclass(frozen=True, kw_only=True)
class WangAuditConfig(AuditConfig):
    """Theorem 5's reading (``"proof"``: C inside the root, ``"statement"``: outside) and
    the number of updates T/B (= paths J) at the authors' assumed setting."""

    variant: str = "proof"
    n_updates: int = 39

    @property
    def calibration(self) -> Theorem5Calibration:
        """Theorem 5's k, beta, C, sigma (:func:`~dprl.wang2019.calibration.
        authors_calibration`)."""
        return authors_calibration(self.eps, self.n_updates, self.n_updates,
                                   variant=self.variant)

    @property
    def shift(self) -> float:
        """Per-update shift ``sqrt(C) / sigma`` of the whitened release."""
        calibration = self.calibration
        return float(np.sqrt(calibration.constant) / calibration.sigma)


def wang_statistics(config: WangAuditConfig, rng: np.random.Generator) -> Statistics:
    """White-box audit of Algorithm 1's releases (module docstring): ``sum_t y_t /
    sqrt(T/B)`` under ``D`` and ``D'``. The ``T/B`` whitened projections ``y_t`` are
    independent ``N(shift, 1)``, so their sum is drawn as one ``N((T/B) shift, T/B)`` variable
    (the same law, ``T/B`` times cheaper: the composed run's 4873 updates cost no more than
    39)."""
    scale = np.sqrt(config.n_updates)
    return tuple(shift * scale + rng.standard_normal(config.runs_per_trial)
                 for shift in (0.0, config.shift))


@singledispatch
def exact_gdp_mu(config: AuditConfig) -> float | None:
    """``mu`` of the audit's pair where it is exactly Gaussian with one sigma (its trade-off
    is then ``G_mu``, Dong, Roth & Su 2022): the Gaussian mechanism ``1/sigma``, Wang 2019's
    ``sqrt(T/B) sqrt(C)/sigma``, DP-LSW ``||theta_X - theta_X'|| / sigma``; None otherwise."""
    if isinstance(config, WangAuditConfig):
        return float(np.sqrt(config.n_updates) * config.shift)
    if isinstance(config, BalleAuditConfig):
        (mean, sigma), (mean_neighbour, sigma_neighbour) = config.releases()
        return (float(np.linalg.norm(mean - mean_neighbour) / sigma)
                if sigma == sigma_neighbour else None)
    if isinstance(config, GPOPEAuditConfig) or config.delta == 0:
        return None
    return 1 / analytic_gaussian_sigma(1.0, config.eps, config.delta)


@singledispatch
def statistic_losses(config: AuditConfig) -> np.ndarray | None:
    """The privacy loss ``ln p_D'/p_D`` at each edge where the audit's statistic determines
    it: the log-likelihood ratio itself (GPOPE, DP-LSW, DP-LSL), ``mu s - mu^2/2`` for the
    Gaussian pairs with ``mu`` of :func:`exact_gdp_mu` (statistic in units of sigma);
    None for the Laplace mechanism."""
    if isinstance(config, (GPOPEAuditConfig, BalleAuditConfig)):
        return config.edges
    mu = exact_gdp_mu(config)
    return None if mu is None else mu * config.edges - mu**2 / 2


def audit_delta(config: AuditConfig, arrays: dict[str, np.ndarray],
                eps: float) -> tuple[float, float]:
    """Estimated ``delta`` at ``eps`` of the audit's pair from its runs under ``D'``, with
    its standard error (:func:`dprl.audit.privacy_loss_delta`)."""
    losses = statistic_losses(config)
    if losses is None:
        raise ValueError(f"the statistic of {type(config).__name__} is not the privacy loss")
    return privacy_loss_delta(arrays["alternative_counts"], losses, eps)


def _histogram_trials(config: AuditConfig, rngs: Sequence[np.random.Generator],
                      sample: Callable[[AuditConfig, np.random.Generator], Statistics]
                      ) -> dict[str, np.ndarray]:
    """Per-trial histograms of both worlds' statistics, each trial from its own generator."""
    pairs = [sample(config, rng) for rng in rngs]
    return {"null_counts": np.stack([histogram(null, config.edges) for null, _ in pairs]),
            "alternative_counts": np.stack([histogram(alt, config.edges) for _, alt in pairs])}


def gaussian_statistics(config: AuditConfig, rng: np.random.Generator) -> Statistics:
    """Outputs / sigma of the analytic Gaussian mechanism on f(D) = 0 and f(D') = 1."""
    sigma = analytic_gaussian_sigma(1.0, config.eps, config.delta)
    null = rng.normal(0.0, sigma, config.runs_per_trial)
    alternative = 1.0 + rng.normal(0.0, sigma, config.runs_per_trial)
    return null / sigma, alternative / sigma


def laplace_statistics(config: AuditConfig, rng: np.random.Generator) -> Statistics:
    """Outputs / b of the Laplace mechanism (b = 1/eps) on f(D) = 0 and f(D') = 1."""
    scale = laplace_scale(1.0, config.eps)
    null = rng.laplace(0.0, scale, config.runs_per_trial)
    alternative = 1.0 + rng.laplace(0.0, scale, config.runs_per_trial)
    return null / scale, alternative / scale


def gpope_log_likelihood_ratio(x: np.ndarray, sigma: float, q: float) -> np.ndarray:
    """Sum over the last axis (iterations) of the log-likelihood ratio of ``D'`` (the canary's
    gradient ``-1``, sampled with probability ``q``, the others ``+1``) against ``D`` (every
    gradient ``+1``) for noisy gradient coordinates ``x`` of noise ``N(0, sigma^2)``, in units
    of ``h``: ``log((1 - q) phi(x - 1) + q phi(x + 1)) - log phi(x - 1)``
    ``= log(1 + q (e^{-2x/sigma^2} - 1))``."""
    return np.log1p(q * np.expm1(-2 * x / sigma**2)).sum(axis=-1)


def gpope_statistics(config: GPOPEAuditConfig, rng: np.random.Generator) -> Statistics:
    """White-box GPOPE audit (module docstring): per run, ``N`` iterations each sampling one
    of the ``m`` trajectories and releasing its clipped gradient's ``e_1`` coordinate plus
    ``N(0, sigma^2)``: always ``+1`` in ``D``; in ``D'``, ``-1`` when the canary (index 0) is
    sampled."""
    sigma = config.sigma
    shape = (config.runs_per_trial, config.n_iterations)
    statistics = []
    for replaced in (False, True):
        canary = (rng.integers(config.m, size=shape) == 0) & replaced
        x = np.where(canary, -1.0, 1.0) + rng.normal(0.0, sigma, shape)
        statistics.append(gpope_log_likelihood_ratio(x, sigma, 1 / config.m))
    return statistics[0], statistics[1]


def _register(id: str, title: str, sample, smoke: AuditConfig, paper: AuditConfig) -> Experiment:
    return register(Experiment(
        id=id, title=title, chapter="book/appendix/audits.ipynb",
        configs={"smoke": smoke, "paper": paper},
        run_trials=lambda config, rngs: _histogram_trials(config, rngs, sample)))


_GAUSSIAN_EDGES = dict(edge_low=-6.0, edge_high=6.5, n_edges=2501)
GAUSSIAN = _register(
    "audit-gaussian", "Audit of the analytic Gaussian mechanism (eps = 1, delta = 1e-5)",
    gaussian_statistics,
    AuditConfig(n_trials=4, root_seed=1701, batch_size=4, runs_per_trial=5000,
                **_GAUSSIAN_EDGES),
    AuditConfig(n_trials=100, root_seed=1701, batch_size=10, runs_per_trial=10000,
                **_GAUSSIAN_EDGES))

_LAPLACE_EDGES = dict(edge_low=-15.0, edge_high=16.0, n_edges=3101)
LAPLACE = _register(
    "audit-laplace", "Audit of the Laplace mechanism (eps = 1)", laplace_statistics,
    AuditConfig(n_trials=4, root_seed=1702, batch_size=4, runs_per_trial=5000, delta=0.0,
                **_LAPLACE_EDGES),
    AuditConfig(n_trials=100, root_seed=1702, batch_size=10, runs_per_trial=10000,
                delta=0.0, **_LAPLACE_EDGES))


def _gpope_audit(calibration: str, root_seed: int, edge_low: float,
                 edge_high: float) -> Experiment:
    """GPOPE's white-box audit at eps = 1, delta = 1e-5, N = m = 100 (sigma by Lemma 1, or by
    the tightest sound accountant): 2 x 10^5 runs per input (each run draws N = 100 noisy
    gradients)."""
    edges = dict(edge_low=edge_low, edge_high=edge_high, n_edges=3001, calibration=calibration)
    return _register(
        f"audit-xie2019-{calibration}",
        f"White-box audit of GPOPE's gradient steps, {calibration} calibration "
        "(eps = 1, delta = 1e-5, N = m = 100)", gpope_statistics,
        GPOPEAuditConfig(n_trials=4, root_seed=root_seed, batch_size=4, runs_per_trial=1000,
                         **edges),
        GPOPEAuditConfig(n_trials=20, root_seed=root_seed, batch_size=2,
                         runs_per_trial=10000, **edges))


XIE2019_PAPER = _gpope_audit("paper", 1703, -1.0, 8.0)
XIE2019_SOUND = _gpope_audit("sound", 1704, -0.5, 1.5)


def _balle_audit(estimator: str, root_seed: int) -> Experiment:
    """DP-LSW or DP-LSL at eps = 1, delta = 1e-5, N = 5, m = 10 (module docstring)."""
    settings = dict(estimator=estimator, edge_low=-0.4, edge_high=0.4, n_edges=2001)
    return _register(
        f"audit-balle2016-{estimator[3:].lower()}",
        f"Black-box audit of {estimator} on neighbouring chain data sets "
        "(eps = 1, delta = 1e-5, N = 5, m = 10)", balle_statistics,
        BalleAuditConfig(n_trials=4, root_seed=root_seed, batch_size=4, runs_per_trial=2000,
                         **settings),
        BalleAuditConfig(n_trials=100, root_seed=root_seed, batch_size=10,
                         runs_per_trial=10000, **settings))


BALLE2016_LSW = _balle_audit("DP-LSW", 1705)
BALLE2016_LSL = _balle_audit("DP-LSL", 1706)


def _wang_audit(variant: str, n_updates: int, root_seed: int, edge_high: float) -> Experiment:
    """Algorithm 1 of Wang & Hegde (2019) under one reading of Theorem 5 (module docstring),
    with ``n_updates`` = T/B: 1 (one functional-noise update, Prop. 4 / Lemma 6), 39
    (Algorithm 1 read literally) or 4873 (every SGD update of the DQN-style run of the
    experiments chapter)."""
    settings = dict(variant=variant, n_updates=n_updates, eps=0.9, delta=5e-5, edge_low=-6.0,
                    edge_high=edge_high, n_edges=3001)
    suffix = {1: "-one-update", 39: "", 4873: "-updates"}[n_updates]
    return _register(
        f"audit-wang2019-{variant}{suffix}",
        f"White-box audit of Wang 2019's Algorithm 1, Theorem 5 read as the {variant} "
        f"(eps = 0.9, T/B = {n_updates})", wang_statistics,
        WangAuditConfig(n_trials=4, root_seed=root_seed, batch_size=4, runs_per_trial=2000,
                        **settings),
        WangAuditConfig(n_trials=100, root_seed=root_seed, batch_size=10,
                        runs_per_trial=10000, **settings))


WANG2019_PROOF = _wang_audit("proof", 39, 1707, 7.5)
WANG2019_STATEMENT = _wang_audit("statement", 39, 1708, 27.0)
WANG2019_PROOF_UPDATES = _wang_audit("proof", 4873, 1709, 7.5)
WANG2019_STATEMENT_UPDATES = _wang_audit("statement", 4873, 1710, 7.5)
WANG2019_PROOF_ONE = _wang_audit("proof", 1, 1711, 7.5)
WANG2019_STATEMENT_ONE = _wang_audit("statement", 1, 1712, 12.0)
