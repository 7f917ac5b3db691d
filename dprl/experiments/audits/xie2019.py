"""White-box audits of GPOPE (Xie, Thomas & Miklau 2019, Alg. 1; chapter book/appendix/audits),
on the conventions of :mod:`dprl.experiments.audits.common`.

``audit-xie2019-paper`` / ``audit-xie2019-sound`` / ``audit-xie2019-pld`` run the package's
GPOPE (:func:`dprl.xie2019.gpope.gpope_runs`, noise calibrated inside by the paper's Lemma 1,
which assumes neighbours differ by ``h``, by the tightest sound RDP accountant, replace-one
``2h``, or by the sound symmetrised PLD, :func:`~dprl.xie2019.privacy.pld_sigma`) on neighbouring
data sets of ``m`` real trajectories and release every iterate, as the privacy proof assumes
(white-box). The trajectory ``tau`` is the episode ``0 -> 1 -> 2`` of a
three-state chain (Balle et al. 2016; Xie et al. 2019, Sec. 7: state 1 the goal, 2 absorbing)
with its reward scaled to ``R``; in ``D`` all ``m`` trajectories are ``tau``; ``D'`` replaces
the canary by ``tau'``, the same states with the reward ``-R`` (replace-one). Their gradients
(Eq. 4.1) differ only in ``-b``, of norm ``R / 2``, far above the clip ``h`` and the iterates'
``A theta + C w``: both are clipped to ``h`` in opposite directions at every iterate
(``||g - g'|| = 2h`` to ~1e-11, tested).

The auditor recovers each released noisy gradient ``y_t = (xi_{t-1} - xi_t) / beta`` from
consecutive iterates, computes the clipped gradients ``g, g'`` of ``tau, tau'`` at
``xi_{t-1}`` with the package's gradient code, and scores a run by the exact log-likelihood
ratio of ``D'`` against ``D`` (under ``D`` every sampled gradient is ``g``; under ``D'`` the
canary's ``g'`` with probability ``q = 1/m``, noise ``N(0, sigma^2 h^2 I)``):

    sum_t log((1 - q) phi(y_t - g) + q phi(y_t - g')) - log phi(y_t - g).

The pair is, per iteration, the Poisson-subsampled Gaussian's (sensitivity ``2``, rate
``q``) composed ``N`` times: :func:`pair_epsilon` is its eps by dp-accounting's PLD. At
eps = 1, delta = 1e-5, N = m = 100 that is 4.13 under Lemma 1's sigma (the accountant: 6.01)
and 0.44 under the tightest sound sigma, whose RDP accountant certifies 1: under half the
claim, so ``-sound`` cannot be informative (no audit of this pair can exceed the claim). Under
the PLD's smaller sigma (1.83 against RDP's 2.42) it is 0.95, and the PLD certifies 1: the
pair is nearly the worst case, so ``-pld`` tests the claim almost where it binds.
"""

from __future__ import annotations

import dataclasses
import importlib

import numpy as np

from dprl.accounting.pld import poisson_gaussian_epsilon
from dprl.envs import ChainMDP, Trajectories
from dprl.experiments.audits.common import (AuditConfig, Statistics, register_audit,
                                            accountant_epsilon, exact_gdp_mu, pair_epsilon,
                                            statistic_losses)
from dprl.features import tabular_features
from dprl.seeding import named_stream
from dprl.validation import require_choice, require_positive
from dprl.xie2019.gpope import clip_gradients
from dprl.xie2019.prepared import Prepared, prepare
from dprl.xie2019.privacy import CALIBRATIONS, calibrated_sigma, certified_epsilon

#: the three-state chain whose episode ``0 -> 1 -> 2`` is ``tau`` (module docstring)
CHAIN = ChainMDP(n_states=3, horizon=2, gamma=0.99)
_EPISODE = np.array([0, 1, 2])
#: the module (the package re-exports the function ``gpope`` under its name)
gpope_module = importlib.import_module("dprl.xie2019.gpope")


@dataclasses.dataclass(frozen=True, kw_only=True)
class GPOPEAuditConfig(AuditConfig):
    """GPOPE's iterations ``N``, trajectories ``m``, calibration (a name of
    :data:`~dprl.xie2019.privacy.CALIBRATIONS`), clip ``h``, constant step ``beta`` and the
    canary's reward scale ``R``."""

    n_iterations: int = 100
    m: int = 100
    calibration: str = "paper"
    clip: float = 1.0
    step_size: float = 0.01
    reward_scale: float = 1e6

    def __post_init__(self) -> None:
        super().__post_init__()
        require_choice("calibration", self.calibration, CALIBRATIONS)
        for name in ("clip", "step_size", "reward_scale"):
            require_positive(name, getattr(self, name))

    @property
    def sigma(self) -> float:
        """GPOPE's noise multiplier as :func:`~dprl.xie2019.gpope.gpope_runs` calibrates it
        (:func:`~dprl.xie2019.privacy.calibrated_sigma`)."""
        return calibrated_sigma(self.calibration, self.eps, self.delta, self.n_iterations,
                                self.m)

    def datasets(self) -> Trajectories:
        """``D`` (``m`` copies of ``tau``) and ``D'`` (the canary, index 0, replaced by
        ``tau'``): trajectories of batch shape ``(2, m)``."""
        rewards = np.zeros((2, self.m, 2))
        rewards[:, :, 0] = self.reward_scale
        rewards[1, 0, 0] = -self.reward_scale
        return Trajectories(np.broadcast_to(_EPISODE, (2, self.m, 3)), rewards,
                            np.full((2, self.m), 2), np.ones((2, self.m), dtype=bool),
                            (-self.reward_scale, self.reward_scale))

    def prepared(self) -> Prepared:
        """:func:`~dprl.xie2019.prepared.prepare` of :meth:`datasets` (tabular features)."""
        return prepare(self.datasets(), tabular_features(CHAIN.n_states), CHAIN.gamma)


def clipped_gradients(config: GPOPEAuditConfig, prepared: Prepared, xi: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """The clipped gradients ``clip_h(B)`` (Alg. 1, line 5; Eq. 4.1) of ``tau`` and of the
    canary ``tau'`` at the points ``xi = (theta, w)``, ``(R, 2n)`` each, by the package's
    :meth:`~dprl.xie2019.prepared.Prepared.gradient` and :func:`~dprl.xie2019.gpope.
    clip_gradients`."""
    n, runs = prepared.n_features, xi.shape[0]
    clipped = []
    for dataset in (0, 1):  # trajectory 0 of D is tau, of D' the canary tau'
        clipped.append(clip_gradients(prepared.gradient(
            np.full(runs, dataset), np.zeros(runs, dtype=np.int64), xi[:, :n], xi[:, n:]),
            config.clip))
    return clipped[0], clipped[1]


def canary_log_likelihood_ratio(config: GPOPEAuditConfig, prepared: Prepared,
                                iterates: np.ndarray) -> np.ndarray:
    """The exact log-likelihood ratio of ``D'`` against ``D`` (module docstring) of runs'
    iterates ``(R, N + 1, 2n)``: the released noisy gradients ``(xi_{t-1} - xi_t) / beta``
    scored against ``N(g, s^2 I)`` and ``(1 - q) N(g, s^2 I) + q N(g', s^2 I)``, ``s = sigma
    h``, ``q = 1/m``, ``g, g'`` the clipped gradients at ``xi_{t-1}``, summed over ``t``."""
    scale, q = config.sigma * config.clip, 1 / config.m
    total = np.zeros(iterates.shape[0])
    for t in range(1, iterates.shape[1]):
        released = (iterates[:, t - 1] - iterates[:, t]) / config.step_size
        g, g_canary = clipped_gradients(config, prepared, iterates[:, t - 1])
        log_ratio = (((released - g) ** 2 - (released - g_canary) ** 2).sum(axis=-1)
                     / (2 * scale**2))
        total += np.logaddexp(np.log1p(-q), np.log(q) + log_ratio)
    return total


def gpope_statistics(config: GPOPEAuditConfig, rng: np.random.Generator) -> Statistics:
    """``runs_per_trial`` runs of GPOPE on ``D`` and on ``D'`` (one call of
    :func:`~dprl.xie2019.gpope.gpope_runs` with every iterate; run ``r`` draws from
    ``named_stream(rng, r)``), each scored by :func:`canary_log_likelihood_ratio`."""
    runs = config.runs_per_trial
    prepared = config.prepared()
    theta, w = gpope_module.gpope_runs(
        prepared, np.repeat([0, 1], runs), np.full(2 * runs, config.step_size),
        config.n_iterations, config.clip, config.eps, config.delta,
        [named_stream(rng, r) for r in range(2 * runs)], calibration=config.calibration,
        iterates=True)
    scores = canary_log_likelihood_ratio(config, prepared, np.concatenate([theta, w], axis=-1))
    return scores[:runs], scores[runs:]


def pair_sensitivity(config: GPOPEAuditConfig) -> float:
    """``||g - g'|| / h`` at GPOPE's start ``0`` (2 up to rounding; module docstring)."""
    prepared = config.prepared()
    g, g_canary = clipped_gradients(config, prepared, np.zeros((1, 2 * prepared.n_features)))
    return float(np.linalg.norm(g - g_canary)) / config.clip


@accountant_epsilon.register
def _(config: GPOPEAuditConfig) -> float:
    """A sound bound under replace-one (sensitivity 2h) at the calibration's sigma
    (:func:`~dprl.xie2019.privacy.certified_epsilon`)."""
    return certified_epsilon(config.calibration, config.sigma, config.delta,
                             config.n_iterations, config.m)


@pair_epsilon.register
def _(config: GPOPEAuditConfig) -> float:
    """The exact eps of the audited pair: ``N`` compositions of ``N(0, sigma^2)`` against
    ``(1 - q) N(0, sigma^2) + q N(Delta, sigma^2)`` in both orders, ``Delta`` =
    :func:`pair_sensitivity`, ``q = 1/m``: dp-accounting's PLD of the Poisson-subsampled
    Gaussian (add-or-remove, the larger of both directions;
    :func:`~dprl.accounting.pld.poisson_gaussian_epsilon`)."""
    return poisson_gaussian_epsilon(config.sigma / pair_sensitivity(config), 1 / config.m,
                                    config.n_iterations, config.delta)


@exact_gdp_mu.register
def _(config: GPOPEAuditConfig) -> None:
    """A subsampled Gaussian pair is not Gaussian."""
    return None


@statistic_losses.register
def _(config: GPOPEAuditConfig) -> np.ndarray:
    """The statistic is the log-likelihood ratio itself."""
    return config.edges


def _gpope_audit(name: str, calibration: str, root_seed: int, edge_low: float,
                 edge_high: float, n_edges: int) -> None:
    """GPOPE's white-box audit at eps = 1, delta = 1e-5, N = m = 100 (module docstring):
    2.25 x 10^6 evaluation runs per data set (each N = 100 iterations)."""
    settings = dict(edge_low=edge_low, edge_high=edge_high, n_edges=n_edges,
                    calibration=calibration)
    register_audit(
        f"audit-xie2019-{name}",
        f"White-box audit of GPOPE on neighbouring trajectory sets, {name} calibration "
        "(eps = 1, delta = 1e-5, N = m = 100)", gpope_statistics,
        GPOPEAuditConfig(n_trials=4, root_seed=root_seed, batch_size=4, runs_per_trial=5000,
                         pilot_trials=1, **settings),
        GPOPEAuditConfig(n_trials=250, root_seed=root_seed, batch_size=10,
                         runs_per_trial=10_000, pilot_trials=25, **settings),
        sampled=("dprl.xie2019.gpope.gpope_runs",))


_gpope_audit("paper", "paper", 1703, -1.0, 6.0, 3501)
_gpope_audit("sound", "tightest", 1704, -0.5, 1.5, 2001)
_gpope_audit("pld", "pld", 1717, -1.0, 2.5, 3501)
