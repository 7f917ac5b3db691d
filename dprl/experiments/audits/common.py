"""Empirical privacy audits of the code the book runs (issues 17, 29; book/appendix/audits).

Every audit samples the package function the book's results use (:data:`SAMPLED` names it
per audit), ``runs_per_trial`` times per trial on each of two neighbouring inputs ``D`` (the
null) and ``D'`` (the alternative), scores every run with the attack's statistic (large values
point to ``D'``) and stores its histograms over the config's ``edges``. The first
``pilot_trials`` trials (streams of their own) are the *pilot*: they choose the test
(threshold and direction); the other trials evaluate it, so the bound of
:func:`dprl.audit.held_out_lower_bound` holds at 95 % confidence and nearly all runs serve it.

:func:`audit_row` puts beside the bound what it must be read against: the claim, the exact eps
of the audited pair (:func:`pair_epsilon`), the tightest accountant's eps for the mechanism as
calibrated (:func:`accountant_epsilon`), and the best bound the design could reach on the pair
(:func:`dprl.audit.dp_reachable_bound`, on the mu-GDP curve where the pair is Gaussian).

- ``audit-gaussian``: :func:`dprl.mechanisms.gaussian_mechanism` (analytic calibration,
  Balle & Wang 2018) on a scalar query of sensitivity 1, ``f(D) = 0`` against ``f(D') = 1``;
  black-box, the statistic is the release in units of sigma (a monotone map of the privacy
  loss, so thresholding it is Neyman-Pearson).
- ``audit-laplace``: :func:`dprl.mechanisms.laplace_mechanism` (Dwork et al. 2006) on the
  same pair, the release in units of its scale.
- Balle 2016, Xie 2019, Wang 2019 and Sharma 2025: :mod:`dprl.experiments.audits.balle2016`,
  :mod:`~dprl.experiments.audits.xie2019`, :mod:`~dprl.experiments.audits.wang2019`,
  :mod:`~dprl.experiments.audits.sharma2025`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from functools import singledispatch

import numpy as np

from dprl import mechanisms
from dprl.audit import (Bound, TradeOff, dp_reachable_bound, gdp_mu_lower_bound,
                        gdp_reachable_bound, held_out_lower_bound, histogram, pilot_curves,
                        privacy_loss_delta)
from dprl.engine.registry import Experiment, TrialConfig, register
from dprl.mechanisms import analytic_gaussian_sigma, gaussian_epsilon, laplace_scale
from dprl.validation import require_int

#: (null, alternative) statistics of a trial's runs, each ``(runs,)``
Statistics = tuple[np.ndarray, np.ndarray]
#: audit id -> the package functions ("module.function") its samples come from
SAMPLED: dict[str, tuple[str, ...]] = {}
#: eps beyond which (eps, delta)-DP's trade-off curve is zero at every rate an audit resolves
_EPS_RESOLVED = 50.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class AuditConfig(TrialConfig):
    """Runs per trial and world, the pilot's trials, the claimed ``(eps, delta)`` and the
    histogram's edges (``n_edges`` equally spaced over ``[edge_low, edge_high]``: the
    thresholds tried)."""

    runs_per_trial: int
    pilot_trials: int
    eps: float = 1.0
    delta: float = 1e-5
    edge_low: float
    edge_high: float
    n_edges: int = 2001

    def __post_init__(self) -> None:
        super().__post_init__()
        require_int("runs_per_trial", self.runs_per_trial)
        require_int("pilot_trials", self.pilot_trials)
        if self.pilot_trials >= self.n_trials:
            raise ValueError(f"pilot_trials must leave trials to evaluate on: "
                             f"{self.pilot_trials} >= n_trials = {self.n_trials}")

    @property
    def edges(self) -> np.ndarray:
        """The thresholds of the audit's tests."""
        return np.linspace(self.edge_low, self.edge_high, self.n_edges)

    @property
    def evaluation_runs(self) -> int:
        """Runs per world that evaluate the pilot's test."""
        return self.runs_per_trial * (self.n_trials - self.pilot_trials)


def pilot_and_evaluation(config: AuditConfig, arrays: dict[str, np.ndarray]
                         ) -> tuple[TradeOff, TradeOff]:
    """The trade-off curves of the pilot's trials and of the evaluation trials
    (:func:`dprl.audit.pilot_curves`)."""
    return pilot_curves(arrays["null_counts"], arrays["alternative_counts"], config.edges,
                        config.pilot_trials)


def audited_bound(config: AuditConfig, arrays: dict[str, np.ndarray],
                  confidence: float = 0.95) -> Bound:
    """The lower bound on eps at the config's delta: the test with the largest bound on the
    pilot's trials, evaluated on the other trials (:func:`dprl.audit.held_out_lower_bound`)."""
    return held_out_lower_bound(*pilot_and_evaluation(config, arrays), config.delta,
                                confidence)


@singledispatch
def accountant_epsilon(config: AuditConfig) -> float:
    """The tightest accountant's eps at the config's delta for the audited mechanism as
    calibrated: the exact Gaussian profile (Balle & Wang 2018, Thm. 8), the Laplace
    mechanism's eps. The other audit modules register theirs."""
    if config.delta == 0:
        return config.eps
    return gaussian_epsilon(config.delta, 1.0,
                            analytic_gaussian_sigma(1.0, config.eps, config.delta))


@singledispatch
def pair_epsilon(config: AuditConfig) -> float:
    """The exact eps at the config's delta of the pair the audit samples (both orders of
    ``D, D'``): for the Gaussian and Laplace pairs, the accountant's eps (their pairs are the
    worst cases); the other audit modules register theirs."""
    return accountant_epsilon(config)


@singledispatch
def exact_gdp_mu(config: AuditConfig) -> float | None:
    """``mu`` of the audit's pair where it is exactly Gaussian with one sigma (its trade-off
    is then ``G_mu``, Dong, Roth & Su 2022): ``1/sigma`` for the Gaussian mechanism; None
    otherwise. The other audit modules register theirs."""
    if config.delta == 0:
        return None
    return 1 / analytic_gaussian_sigma(1.0, config.eps, config.delta)


@singledispatch
def statistic_losses(config: AuditConfig) -> np.ndarray | None:
    """The privacy loss ``ln p_D'/p_D`` at each edge where the statistic determines it:
    ``mu s - mu^2/2`` for a Gaussian pair of :func:`exact_gdp_mu` (statistic in units of
    sigma); None for the Laplace mechanism. The other audit modules register theirs."""
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


@dataclasses.dataclass(frozen=True)
class AuditRow:
    """One audit read against what it can show: the held-out ``bound``, the ``claimed`` eps,
    the audited pair's exact eps, the accountant's eps for the mechanism, the best bound the
    design can reach on the pair (``reachable``) and on a pair leaking twice as much in the
    most distinguishable shape (``reachable_if_doubled``); where the pair is Gaussian, the
    95 % lower bound on its mu from the GDP fit (``gdp_mu_bound``, None otherwise)."""

    experiment: str
    sampled: tuple[str, ...]
    claimed: float
    delta: float
    pair_eps: float
    accountant_eps: float
    reachable: float
    reachable_if_doubled: float
    bound: Bound
    gdp_mu_bound: float | None = None

    @property
    def gdp_eps_bound(self) -> float | None:
        """The eps at delta that the fitted mu implies (the Gaussian mechanism's exact
        profile): a lower bound on eps if the pair is Gaussian, as assumed."""
        if self.gdp_mu_bound is None:
            return None
        return gaussian_epsilon(self.delta, self.gdp_mu_bound, 1.0) if self.gdp_mu_bound else 0.0

    @property
    def violation(self) -> bool:
        """The bound exceeds the claim: the claim is false, at 95 % confidence."""
        return self.bound.eps > self.claimed

    @property
    def informative(self) -> bool:
        """The audit could have failed: it did, or a pair leaking twice the audited pair's
        exact eps would typically have given a bound above the claim."""
        return self.violation or self.reachable_if_doubled > self.claimed

    @property
    def outcome(self) -> str:
        """"violation shown", "consistent" or "not informative" (the pair's exact eps is
        too far below the claim for this design to exceed it even at twice the eps)."""
        if self.violation:
            return "violation shown"
        return "consistent" if self.informative else "not informative"


def audit_row(experiment_id: str, config: AuditConfig, arrays: dict[str, np.ndarray],
              confidence: float = 0.95) -> AuditRow:
    """The :class:`AuditRow` of a stored audit result."""
    n = config.evaluation_runs
    pair = pair_epsilon(config)
    mu = exact_gdp_mu(config)
    curves = pilot_and_evaluation(config, arrays)

    def reach(eps: float) -> float:
        return dp_reachable_bound(min(eps, _EPS_RESOLVED), config.delta, n, n, confidence)

    if mu is None:
        reachable, mu_bound = reach(pair), None
    else:
        reachable = gdp_reachable_bound(mu, config.delta, n, n, confidence)
        mu_bound = gdp_mu_lower_bound(*curves, confidence)
    return AuditRow(experiment_id, SAMPLED[experiment_id], config.eps, config.delta, pair,
                    accountant_epsilon(config), reachable, reach(2 * pair),
                    held_out_lower_bound(*curves, config.delta, confidence), mu_bound)


def _histogram_trials(config: AuditConfig, rngs: Sequence[np.random.Generator],
                      sample: Callable[[AuditConfig, np.random.Generator], Statistics]
                      ) -> dict[str, np.ndarray]:
    """Per-trial histograms of both worlds' statistics, each trial from its own generator."""
    pairs = [sample(config, rng) for rng in rngs]
    return {"null_counts": np.stack([histogram(null, config.edges) for null, _ in pairs]),
            "alternative_counts": np.stack([histogram(alt, config.edges) for _, alt in pairs])}


def gaussian_statistics(config: AuditConfig, rng: np.random.Generator) -> Statistics:
    """Releases / sigma of :func:`dprl.mechanisms.gaussian_mechanism` (analytic sigma) on
    ``f(D) = 0`` and ``f(D') = 1``, ``runs_per_trial`` each."""
    sigma = analytic_gaussian_sigma(1.0, config.eps, config.delta)
    return tuple(mechanisms.gaussian_mechanism(np.full(config.runs_per_trial, value), 1.0,
                                               config.eps, config.delta, rng,
                                               calibration="analytic") / sigma
                 for value in (0.0, 1.0))


def laplace_statistics(config: AuditConfig, rng: np.random.Generator) -> Statistics:
    """Releases / b of :func:`dprl.mechanisms.laplace_mechanism` (``b = 1/eps``) on
    ``f(D) = 0`` and ``f(D') = 1``."""
    scale = laplace_scale(1.0, config.eps)
    return tuple(mechanisms.laplace_mechanism(np.full(config.runs_per_trial, value), 1.0,
                                              config.eps, rng) / scale
                 for value in (0.0, 1.0))


def register_audit(id: str, title: str, sample, smoke: AuditConfig, paper: AuditConfig,
              sampled: tuple[str, ...]) -> Experiment:
    """Register an audit whose ``sample`` draws through the package functions ``sampled``."""
    SAMPLED[id] = sampled
    return register(Experiment(
        id=id, title=title, chapter="book/appendix/audits.ipynb",
        configs={"smoke": smoke, "paper": paper},
        run_trials=lambda config, rngs: _histogram_trials(config, rngs, sample)))


_GAUSSIAN_EDGES = dict(edge_low=-6.0, edge_high=7.0, n_edges=2601)
GAUSSIAN = register_audit(
    "audit-gaussian", "Audit of the analytic Gaussian mechanism (eps = 1, delta = 1e-5)",
    gaussian_statistics,
    AuditConfig(n_trials=4, root_seed=1701, batch_size=4, runs_per_trial=5000,
                pilot_trials=1, **_GAUSSIAN_EDGES),
    AuditConfig(n_trials=100, root_seed=1701, batch_size=5, runs_per_trial=1_000_000,
                pilot_trials=10, **_GAUSSIAN_EDGES),
    sampled=("dprl.mechanisms.gaussian_mechanism",))

_LAPLACE_EDGES = dict(edge_low=-18.0, edge_high=19.0, n_edges=3701)
LAPLACE = register_audit(
    "audit-laplace", "Audit of the Laplace mechanism (eps = 1)", laplace_statistics,
    AuditConfig(n_trials=4, root_seed=1702, batch_size=4, runs_per_trial=5000, delta=0.0,
                pilot_trials=1, **_LAPLACE_EDGES),
    AuditConfig(n_trials=100, root_seed=1702, batch_size=5, runs_per_trial=1_000_000,
                delta=0.0, pilot_trials=10, **_LAPLACE_EDGES),
    sampled=("dprl.mechanisms.laplace_mechanism",))
