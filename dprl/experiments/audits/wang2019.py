"""White-box audits of Algorithm 1 of Wang & Hegde (2019) (chapter book/appendix/audits), on
the conventions of :mod:`dprl.experiments.audits.common`, sampling the package's own noise paths
(:class:`dprl.wang2019.run_paths.RunPaths`, the sampler behind :class:`~dprl.wang2019.run_paths.RunNoise`).

**Releases.** As the proof of Theorem 5 assumes, every update's noisy function ``Q_t + g_t``
is released, ``g ~ GP(0, sigma^2 exp(-beta |x - y|))``; the auditor reads it on a grid of
``grid_size`` states of its choosing (``grid_span / beta`` long, within [0, 1]). White-box,
the auditor knows ``Q_t``: under ``D`` it is 0 (any known function cancels), under ``D'``
the canary moves it by ``Delta f_t = s_t Delta f``, with ``Delta f`` the minimal-norm RKHS
interpolant of a sine bump on the grid, scaled to ``||Delta f||_H = sqrt(C)``, the proof's
bound (its squared norm is ``||w(Delta f)||^2``, ``w`` = :func:`~dprl.wang2019.calibration.
ou_whiten`; the piecewise-linear interpolant's :func:`~dprl.wang2019.calibration.
ou_rkhs_norm_squared` agrees to 0.1 %). sigma, beta and C are Theorem 5's at the book's
assumed authors' setting (eps = 0.9, delta = 5e-5 for the mechanism), the theorem read with C
inside the root (``"proof"``) or outside it (``"statement"``).

**Why the statistic is the exact log-likelihood ratio.** The OU process is Markov: its
values on a sorted grid factorise as ``p(v_1) prod_k p(v_k | v_{k-1})``, each factor
``N(rho_k v_{k-1}, sigma^2 (1 - rho_k^2))``, so the innovations ``w(v) / sigma`` of
:func:`~dprl.wang2019.calibration.ou_whiten` are i.i.d. N(0, 1), ``w`` is linear and
invertible, and ``<w(a), w(b)> = a^T K^{-1} b``. The density of a release ``r = Delta + g``
is thus ``prod_k phi((w(r) - w(Delta))_k / sigma)``, and ``ln p_D'(r) / p_D(r) = <w(r),
w(Delta f)> / sigma^2 - ||w(Delta f)||^2 / (2 sigma^2)``: ``<g, Delta f>_H / sigma^2`` plus a
constant, with no approximation for any grid. As ``Delta f`` lies in the span of the kernel
at the grid points, this is also the log-likelihood ratio of the whole released function
(Hall, Rinaldo & Wasserman 2013): the grid loses nothing.

**Fresh paths (the proof).** The ``T/B`` updates read independent paths (``J = T/B``),
drawn as the ``n_paths = T/B`` independent paths of one :meth:`RunPaths.refresh` per run at
the grid (the law of ``T/B`` successive refreshes; one call instead of ``T/B``). Their
log-likelihood ratios add; the statistic is their sum standardised, ``sum_t <w(r_t),
w(Delta f)> / (sigma ||w(Delta f)|| sqrt(T/B))``, exactly ``N(0, 1)`` under ``D`` and
``N(mu, 1)`` under ``D'``, ``mu = sqrt(T/B) sqrt(C) / sigma``. ``T/B`` = 1 (``-one-update``),
39 (Algorithm 1 read literally) or 4873 (``-updates``, every SGD update of the DQN-style run
of book/wang2019/experiments). The 4873-update audits draw 78k normals per run, so they use
600 runs per trial and world (4873 path values per grid point and run; ~2 ms a run).

**Path reuse (the runs, ``audit-wang2019-reuse``).** The DQN-style run of Fig. 2 (100
episodes of 50 steps, B = 128, a fresh path every 50 steps: 100 paths, the updates after
steps 127..4999) scores update ``t`` (after step ``s``) with path ``s // 50``, whose values the
reset stored (``q_learning._reset``): 98 paths serve the 4873 updates (23 for the first, 50
for the others), drawn here as one refresh of 98 paths per run. Updates sharing a path
release ``Q_t + Delta f_t + g``, so the difference of two releases of a block is
``Delta f_t - Delta f_{t+1}`` with no noise. With an alternating canary, ``s_t = (-1)^t``,
each update within the proof's bound, the releases under ``D`` and ``D'`` live on disjoint
sets: the pair's eps is infinite at every delta < 1. The statistic projects the within-block
differences on the canary's, in the whitened inner product: exactly 0 under ``D``, 1 (up to
rounding) under ``D'``; the bound is limited only by the runs. The claim is the run's, eps =
0.9 at the proof's calibration with T/B = 4873 and J = 100
(:func:`~dprl.wang2019.calibration.dqn_calibration`, reading ``"updates"``).
"""

from __future__ import annotations

import dataclasses
import math
from functools import cached_property

import numpy as np

from dprl.experiments.audits.common import (AuditConfig, Statistics, register_audit,
                                            accountant_epsilon, exact_gdp_mu, pair_epsilon)
from dprl.experiments.wang2019 import FIGURE2, figure2_dqn
from dprl.mechanisms import gaussian_epsilon
from dprl.seeding import named_stream
from dprl.validation import require_choice, require_int, require_positive
from dprl.wang2019 import run_paths as run_paths_module
from dprl.wang2019.baselines import dp_sgd_updates, n_rewards
from dprl.wang2019.calibration import (SIGMA_VARIANTS, Theorem5Calibration, authors_calibration,
                                       dqn_calibration, ou_whiten)
from dprl.wang2019.q_learning import QLearningConfig

#: released grid values held at once (runs x grid x updates), bounding a chunk's memory
_CHUNK_VALUES = 2**21


@dataclasses.dataclass(frozen=True, kw_only=True)
class WangAuditConfig(AuditConfig):
    """Theorem 5's reading (``"proof"``: C inside the root, ``"statement"``: outside), the
    number of updates T/B (= fresh paths J) at the authors' assumed setting, and the grid
    (``grid_size`` states over ``grid_span`` correlation lengths ``1/beta``)."""

    variant: str = "proof"
    n_updates: int = 39
    grid_size: int = 16
    grid_span: float = 2.0

    def __post_init__(self) -> None:
        super().__post_init__()
        require_choice("variant", self.variant, SIGMA_VARIANTS)
        require_int("n_updates", self.n_updates)
        require_int("grid_size", self.grid_size, minimum=2)
        require_positive("grid_span", self.grid_span)

    @cached_property
    def calibration(self) -> Theorem5Calibration:
        """Theorem 5's k, beta, C, sigma (:func:`~dprl.wang2019.calibration.
        authors_calibration`, J = T/B)."""
        return authors_calibration(self.eps, self.n_updates, self.n_updates,
                                   variant=self.variant)

    @cached_property
    def grid(self) -> np.ndarray:
        """The states the auditor reads each release at."""
        return np.linspace(0.0, min(1.0, self.grid_span / self.calibration.beta),
                           self.grid_size)

    @cached_property
    def canary(self) -> np.ndarray:
        """``Delta f`` on the grid: a sine bump whose minimal-norm interpolant has
        ``||Delta f||_H = sqrt(C)`` (norm from :func:`~dprl.wang2019.calibration.ou_whiten`)."""
        bump = np.sin(np.pi * np.arange(1, self.grid_size + 1) / (self.grid_size + 1))
        norm = np.sqrt(np.sum(ou_whiten(self.grid, bump, self.calibration.beta) ** 2))
        return np.sqrt(self.calibration.constant) * bump / norm

    @property
    def update_paths(self) -> np.ndarray:
        """The path each update's release reads: a fresh one per update (the proof)."""
        return np.arange(self.n_updates)

    @property
    def canary_signs(self) -> np.ndarray:
        """``s_t`` of ``Delta f_t = s_t Delta f``: the same canary at every update."""
        return np.ones(self.n_updates)

    @cached_property
    def canaries(self) -> np.ndarray:
        """``Delta f_t`` on the grid, (grid, updates)."""
        return self.canary[:, None] * self.canary_signs

    def score(self, releases: np.ndarray) -> np.ndarray:
        """The standardised log-likelihood ratio (module docstring) of releases
        (runs, grid, updates) read from independent paths."""
        scale = self.calibration.sigma * np.sqrt(whitened_inner(self, self.canaries,
                                                                self.canaries))
        return whitened_inner(self, releases, self.canaries) / scale


@dataclasses.dataclass(frozen=True, kw_only=True)
class WangReuseAuditConfig(WangAuditConfig):
    """The DQN-style run of Fig. 2 (``n_episodes``, a fresh path every ``reset_period``
    steps) at the proof's calibration, updates sharing paths as the run does; ``n_updates``
    must be its SGD updates."""

    n_updates: int = 4873
    n_episodes: int = FIGURE2.config("paper").n_episodes
    reset_period: int = FIGURE2.config("paper").reset_period

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.variant != "proof":
            raise ValueError(f"variant must be 'proof' (the run's calibration), got "
                             f"{self.variant!r}")
        updates = dp_sgd_updates(self.dqn)
        if self.n_updates != updates:
            raise ValueError(f"n_updates must be the run's {updates} SGD updates, got "
                             f"{self.n_updates}")

    @property
    def dqn(self) -> QLearningConfig:
        """The run's training config (:func:`dprl.experiments.wang2019.figure2_dqn`)."""
        return dataclasses.replace(figure2_dqn(FIGURE2.config("paper")),
                                   n_episodes=self.n_episodes, reset_period=self.reset_period)

    @cached_property
    def calibration(self) -> Theorem5Calibration:
        """The run's calibration: :func:`~dprl.wang2019.calibration.dqn_calibration`,
        reading ``"updates"`` (T/B = its updates, J = its paths)."""
        return dqn_calibration(self.eps, self.dqn, "updates")

    @property
    def update_paths(self) -> np.ndarray:
        """Path of each update, numbered from 0 over the paths that serve updates: the update
        after step ``s`` (``B - 1 <= s < T``) reads path ``s // reset_period``."""
        steps = np.arange(self.dqn.batch_size - 1, n_rewards(self.dqn))
        return np.unique(steps // self.reset_period, return_inverse=True)[1]

    @property
    def canary_signs(self) -> np.ndarray:
        """``s_t = (-1)^t``: the canary alternates between updates."""
        return np.where(np.arange(self.n_updates) % 2 == 0, 1.0, -1.0)

    def score(self, releases: np.ndarray) -> np.ndarray:
        """Projection of the differences of consecutive releases on one path on the
        canary's differences, normalised to 1 under ``D'`` (0 under ``D``)."""
        shared = np.flatnonzero(np.diff(self.update_paths) == 0)
        target = self.canaries[:, shared] - self.canaries[:, shared + 1]
        differences = releases[:, :, shared] - releases[:, :, shared + 1]
        return whitened_inner(self, differences, target) / whitened_inner(self, target, target)


def whitened_inner(config: WangAuditConfig, values: np.ndarray,
                   canaries: np.ndarray) -> np.ndarray | float:
    """``sum_t <w(v_t), w(Delta f_t)>`` over the updates (last axis) of grid values
    (..., grid, updates): the RKHS inner products of the minimal-norm interpolants (module
    docstring), summed."""
    whiten = [ou_whiten(config.grid, np.moveaxis(a, -2, -1), config.calibration.beta)
              for a in (values, canaries)]
    return (whiten[0] * whiten[1]).sum(axis=(-2, -1))


def released_values(config: WangAuditConfig, rngs: list[np.random.Generator],
                    world: int) -> np.ndarray:
    """The releases ``Q_t + g`` of one run per generator on the grid, (runs, grid, updates),
    under ``D`` (``world`` 0: ``Q_t = 0``) or ``D'`` (1: ``Q_t = Delta f_t``): the paths
    from one :meth:`~dprl.wang2019.run_paths.RunPaths.refresh` per run, each update reading
    its path (:attr:`WangAuditConfig.update_paths`)."""
    calibration, paths = config.calibration, config.update_paths
    sampler = run_paths_module.RunPaths(np.full(len(rngs), calibration.sigma),
                                        calibration.beta, rngs, int(paths.max()) + 1)
    values = sampler.refresh(np.broadcast_to(config.grid, (len(rngs), config.grid_size)))
    return values[:, :, paths] + world * config.canaries


def world_statistics(config: WangAuditConfig, rng: np.random.Generator,
                     world: int) -> np.ndarray:
    """The statistic of the trial's ``runs_per_trial`` runs in one world, run ``i`` on its
    own stream ``named_stream(rng, world, i)`` (in chunks bounding memory)."""
    runs = config.runs_per_trial
    chunk = max(1, _CHUNK_VALUES // (config.grid_size * config.n_updates))
    return np.concatenate([
        config.score(released_values(config, [named_stream(rng, world, i) for i in
                                              range(start, min(start + chunk, runs))], world))
        for start in range(0, runs, chunk)])


def wang_statistics(config: WangAuditConfig, rng: np.random.Generator) -> Statistics:
    """White-box audit of Algorithm 1's releases (module docstring) under ``D`` and
    ``D'``."""
    return world_statistics(config, rng, 0), world_statistics(config, rng, 1)


@accountant_epsilon.register
def _(config: WangAuditConfig) -> float:
    """The T/B Gaussian-process releases with fresh paths composed exactly: one Gaussian
    mechanism of sensitivity ``sqrt(T/B) sqrt(C)`` (:func:`~dprl.wang2019.calibration.
    exact_composition_delta`), what the calibration guarantees when every update has its own
    path."""
    calibration = config.calibration
    return gaussian_epsilon(config.delta, math.sqrt(config.n_updates * calibration.constant)
                            / calibration.sigma, 1.0)


@exact_gdp_mu.register
def _(config: WangAuditConfig) -> float:
    """``sqrt(sum_t ||Delta f_t||_H^2) / sigma`` of the canary (``sqrt(T/B) sqrt(C) /
    sigma``): the statistic is ``N(0, 1)`` against ``N(mu, 1)``."""
    return float(np.sqrt(whitened_inner(config, config.canaries, config.canaries))
                 / config.calibration.sigma)


@pair_epsilon.register
def _(config: WangAuditConfig) -> float:
    """The Gaussian mechanism's exact eps at ``mu`` (:func:`dprl.mechanisms.
    gaussian_epsilon`): the pair is ``N(0, 1)`` against ``N(mu, 1)``, symmetric."""
    return gaussian_epsilon(config.delta, exact_gdp_mu(config), 1.0)


@exact_gdp_mu.register
def _(config: WangReuseAuditConfig) -> None:
    """None: with reused paths the two releases are not Gaussian shifts of each other."""
    return None


@pair_epsilon.register
def _(config: WangReuseAuditConfig) -> float:
    """Infinite: under ``D`` the releases on one path differ by nothing, under ``D'`` by
    the canary's changes, so the event "they differ" has probability 1 under ``D'`` and 0
    under ``D`` (module docstring)."""
    return math.inf


_SETTINGS = dict(eps=0.9, delta=5e-5, pilot_trials=10, n_trials=100, batch_size=10)
_SMOKE = dict(n_trials=4, pilot_trials=1, batch_size=4)
#: runs per trial and world (smoke, paper): 4873 updates cost ~2 ms a run
_RUNS = {1: (2000, 50_000), 39: (2000, 20_000), 4873: (100, 600)}


def _wang_audit(variant: str, n_updates: int, root_seed: int, edge_high: float) -> None:
    """Algorithm 1 of Wang & Hegde (2019) under one reading of Theorem 5 (module docstring),
    with ``n_updates`` = T/B: 1 (one functional-noise update, Prop. 4 / Lemma 6), 39
    (Algorithm 1 read literally) or 4873 (every SGD update of the DQN-style run of the
    experiments chapter)."""
    settings = dict(_SETTINGS, variant=variant, n_updates=n_updates, edge_low=-6.0,
                    edge_high=edge_high, n_edges=round((edge_high + 6.0) * 200) + 1)
    smoke_runs, paper_runs = _RUNS[n_updates]
    suffix = {1: "-one-update", 39: "", 4873: "-updates"}[n_updates]
    register_audit(
        f"audit-wang2019-{variant}{suffix}",
        f"White-box audit of Wang 2019's Algorithm 1 on its noise paths, Theorem 5 read as "
        f"the {variant} (eps = 0.9, T/B = {n_updates})", wang_statistics,
        WangAuditConfig(**dict(settings, **_SMOKE), root_seed=root_seed,
                        runs_per_trial=smoke_runs),
        WangAuditConfig(**settings, root_seed=root_seed, runs_per_trial=paper_runs),
        sampled=("dprl.wang2019.run_paths.RunPaths",))


_wang_audit("proof", 39, 1707, 7.5)
_wang_audit("statement", 39, 1708, 10.0)
_wang_audit("proof", 4873, 1709, 7.5)
_wang_audit("statement", 4873, 1710, 7.5)
_wang_audit("proof", 1, 1714, 7.5)
_wang_audit("statement", 1, 1715, 12.0)

_REUSE = dict(_SETTINGS, edge_low=-0.5, edge_high=1.5, n_edges=201)
REUSE = register_audit(
    "audit-wang2019-reuse",
    "White-box audit of Wang 2019's Algorithm 1 as the DQN-style run reuses its noise paths "
    "(100 paths for 4873 updates; claimed eps = 0.9)", wang_statistics,
    WangReuseAuditConfig(**dict(_REUSE, **_SMOKE), root_seed=1716, runs_per_trial=100),
    WangReuseAuditConfig(**_REUSE, root_seed=1716, runs_per_trial=1000),
    sampled=("dprl.wang2019.run_paths.RunPaths",))
