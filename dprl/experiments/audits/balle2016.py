"""Black-box audits of DP-LSW and DP-LSL (Balle, Gomrokchi & Precup 2016, Algs. 1-2; chapter
book/appendix/audits), on the conventions of :mod:`dprl.experiments.audits.common`.

``audit-balle2016-lsw`` / ``audit-balle2016-lsl`` call :func:`dprl.balle2016.dp_lsw` and
:func:`dprl.balle2016.dp_lsl` (noise scale computed from each data set, as released) on
neighbouring data sets of ``m`` trajectories of an ``N``-state chain (tabular features,
uniform weights): ``m - 1`` trajectories start in the absorbing last state with return 0; the
canary starts in state 0 (so visits every state) with first-visit return ``F_max`` everywhere,
and its neighbour starts in the last state with return 0 (replace-one; returns at the ends of
``[0, F_max]``, the worst case the theorems cover). Every run is one data set of the batch the
function takes. The auditor sees the release ``N(theta_X, sigma_X^2 I)`` and scores it by the
exact log-likelihood ratio of the two releases (different means and, for DP-LSL, different
sigmas).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dprl import balle2016
from dprl.accounting import smallest_sufficient_scale
from dprl.balle2016 import (FirstVisitSummary, dp_lsl_noise_scale, dp_lsw_noise_scale, lsl, lsw,
                            smoothing_constants)
from dprl.balle2016.calibration import gaussian_pair_delta, smooth_gaussian_delta
from dprl.experiments.audits.common import (AuditConfig, Statistics, register_audit,
                                            accountant_epsilon, exact_gdp_mu, pair_epsilon,
                                            statistic_losses)
from dprl.validation import require_choice

#: the estimators audited, by the name of the package function that releases them
ESTIMATORS = {"DP-LSW": "dp_lsw", "DP-LSL": "dp_lsl"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class BalleAuditConfig(AuditConfig):
    """The chain's ``N``, the data sets' ``m``, ``F_max``, the estimator and DP-LSL's ridge."""

    estimator: str = "DP-LSW"
    n_states: int = 5
    m: int = 10
    return_bound: float = 1.0
    lam: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        require_choice("estimator", self.estimator, ESTIMATORS)

    def pair(self, runs: int | None = None) -> tuple[FirstVisitSummary, FirstVisitSummary]:
        """The data sets ``X`` (with the canary) and ``X'`` (module docstring); with
        ``runs``, each repeated as a batch of ``runs`` data sets."""
        counts = np.zeros((2, self.n_states), dtype=np.int64)
        counts[:, -1] = self.m - 1
        counts[0] += 1  # the canary visits every state
        counts[1, -1] += 1  # its neighbour only the last
        sums = np.where(np.arange(2)[:, None] == 0, self.return_bound, 0.0) * (counts > 0)
        sums[:, -1] = np.array([self.return_bound, 0.0])
        shape = (self.n_states,) if runs is None else (runs, self.n_states)
        return tuple(FirstVisitSummary(np.broadcast_to(c, shape), np.broadcast_to(s, shape),
                                       self.m, self.return_bound)
                     for c, s in zip(counts, sums))

    @property
    def design(self) -> tuple[np.ndarray, np.ndarray]:
        """Tabular features and uniform weights ``rho``."""
        return np.eye(self.n_states), np.full(self.n_states, 1 / self.n_states)

    def release(self, data: FirstVisitSummary, rng: np.random.Generator) -> np.ndarray:
        """The estimator's release on ``data`` (:func:`dprl.balle2016.dp_lsw` or
        :func:`~dprl.balle2016.dp_lsl`, called through the package)."""
        features, rho = self.design
        function = getattr(balle2016, ESTIMATORS[self.estimator])
        if self.estimator == "DP-LSW":
            return function(data, features, rho, self.eps, self.delta, rng)
        return function(data, features, rho, self.lam, self.eps, self.delta, rng)

    def releases(self) -> tuple[tuple[np.ndarray, float], tuple[np.ndarray, float]]:
        """(mean, sigma) of the release on ``X`` and on ``X'`` (the estimate and the noise
        scale of Algorithm 1 or 2), for the auditor's log-likelihood ratio."""
        features, rho = self.design
        if self.estimator == "DP-LSW":
            return tuple((lsw(x, features, rho),
                          float(dp_lsw_noise_scale(x, features, rho, self.eps, self.delta)))
                         for x in self.pair())
        return tuple((lsl(x, features, rho, self.lam),
                      float(dp_lsl_noise_scale(x, features, rho, self.lam, self.eps,
                                               self.delta)))
                     for x in self.pair())


def gaussian_log_likelihood_ratio(outputs: np.ndarray, null: tuple[np.ndarray, float],
                                  alternative: tuple[np.ndarray, float]) -> np.ndarray:
    """``log N(o; mu', sigma'^2 I) - log N(o; mu, sigma^2 I)`` over the last axis of
    ``outputs``, for ``null = (mu, sigma)`` and ``alternative = (mu', sigma')``."""
    (mean, sigma), (mean_alt, sigma_alt) = null, alternative
    return (((outputs - mean) ** 2 / (2 * sigma**2)
             - (outputs - mean_alt) ** 2 / (2 * sigma_alt**2)).sum(axis=-1)
            - outputs.shape[-1] * np.log(sigma_alt / sigma))


def balle_statistics(config: BalleAuditConfig, rng: np.random.Generator) -> Statistics:
    """``runs_per_trial`` releases of DP-LSW or DP-LSL on ``X`` and on ``X'`` (one call of
    the package function each, the runs as a batch of data sets), scored by the exact
    log-likelihood ratio (black-box)."""
    null, alternative = config.releases()
    return tuple(gaussian_log_likelihood_ratio(config.release(x, rng), null, alternative)
                 for x in config.pair(config.runs_per_trial))


def smoothed_gaussian_epsilon(eps: float, delta: float, d: int) -> float:
    """The smallest eps' at which Lemma 1's smoothed Gaussian mechanism, with the constants
    ``alpha, beta`` it sets for ``(eps, delta)`` in dimension ``d``, is ``(eps', delta)``-DP
    by the exact profile of :func:`~dprl.balle2016.calibration.smooth_gaussian_delta` (a
    numerical calibration over Lemma 1's allowed pairs, not a proof)."""
    alpha, beta = smoothing_constants(eps, delta, d)
    return smallest_sufficient_scale(lambda e: smooth_gaussian_delta(e, alpha, beta, d),
                                     delta, initial=eps, rtol=1e-4)


@accountant_epsilon.register
def _(config: BalleAuditConfig) -> float:
    """The smoothed Gaussian mechanism's exact profile at Lemma 1's constants
    (:func:`smoothed_gaussian_epsilon`): what the calibration guarantees for every pair."""
    return smoothed_gaussian_epsilon(config.eps, config.delta, config.n_states)


@pair_epsilon.register
def _(config: BalleAuditConfig) -> float:
    """The exact eps of the audited pair ``N(theta_X, sigma_X^2 I)``, ``N(theta_X',
    sigma_X'^2 I)``: the larger hockey-stick divergence of the two orders
    (:func:`~dprl.balle2016.calibration.gaussian_pair_delta`), inverted at delta."""
    (mean, sigma), (mean_neighbour, sigma_neighbour) = config.releases()
    distance = float(np.linalg.norm(mean - mean_neighbour))

    def delta_at(eps: float) -> float:
        return max(gaussian_pair_delta(eps, distance / s, np.log(t / s), config.n_states)
                   for s, t in ((sigma, sigma_neighbour), (sigma_neighbour, sigma)))

    return smallest_sufficient_scale(delta_at, config.delta, initial=config.eps, rtol=1e-6)


@exact_gdp_mu.register
def _(config: BalleAuditConfig) -> float | None:
    """``||theta_X - theta_X'|| / sigma`` where both releases have the same sigma."""
    (mean, sigma), (mean_neighbour, sigma_neighbour) = config.releases()
    return (float(np.linalg.norm(mean - mean_neighbour) / sigma)
            if sigma == sigma_neighbour else None)


@statistic_losses.register
def _(config: BalleAuditConfig) -> np.ndarray:
    """The statistic is the log-likelihood ratio itself."""
    return config.edges


def _balle_audit(estimator: str, root_seed: int) -> None:
    """DP-LSW or DP-LSL at eps = 1, delta = 1e-5, N = 5, m = 10 (module docstring)."""
    settings = dict(estimator=estimator, edge_low=-0.4, edge_high=0.4, n_edges=2001)
    register_audit(
        f"audit-balle2016-{estimator[3:].lower()}",
        f"Black-box audit of {estimator} on neighbouring chain data sets "
        "(eps = 1, delta = 1e-5, N = 5, m = 10)", balle_statistics,
        BalleAuditConfig(n_trials=4, root_seed=root_seed, batch_size=4, runs_per_trial=2000,
                         pilot_trials=1, **settings),
        BalleAuditConfig(n_trials=100, root_seed=root_seed, batch_size=5,
                         runs_per_trial=50_000, pilot_trials=10, **settings),
        sampled=(f"dprl.balle2016.{ESTIMATORS[estimator]}",))


_balle_audit("DP-LSW", 1705)
_balle_audit("DP-LSL", 1706)
