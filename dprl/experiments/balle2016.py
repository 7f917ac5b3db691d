"""Experiments of the Balle et al. (2016) chapters.

``balle2016-figure1``: Figure 1 of Sec. 6 (all four panels) on the chain (N = 40, p = 0.5,
gamma = 0.99, uniform start, horizon 200), eps = delta = 0.1, F_max = R_max / (1 - gamma).
Each trial draws one nested sequence of data sets (the first ``m`` trajectories of one sample,
for every batch size ``m``) with the exact sampler of the first-visit statistics
(:mod:`dprl.balle2016.chain_sampler`), so batch sizes reach 10^15; every algorithm processes
the same data sets (as in the paper). Regression weights ``rho`` = the start distribution and
LSW weights ``w = rho`` (Gamma = diag(rho)). Error measure: the rho-weighted RMSE of
``Phi theta`` against the exact ``V`` (uniform rho, so the RMSE over the 40 states).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from dprl.balle2016 import (dp_lsl, dp_lsl_noise_scale, dp_lsw, dp_lsw_noise_scale, lsl, lsw,
                            ridge_threshold)
from dprl.balle2016.authors_code import (authors_dp_lsl, authors_dp_lsw, authors_lsw_noise_scale,
                                         authors_ridge_threshold)
from dprl.balle2016.chain_sampler import sample_first_visit_summaries
from dprl.balle2016.statistics import FirstVisitSummary, return_bound, stack_summaries
from dprl.balle2016.utility import lsl_excess_risk, lsw_excess_risk
from dprl.envs import ChainMDP
from dprl.engine.registry import Experiment, TrialConfig, register
from dprl.seeding import trial_index
from dprl.features import aggregation_features
from dprl.policy_evaluation import weighted_rmse


def _half_decades(low: int, high: int) -> tuple[int, ...]:
    """``round(10^(k/2))`` from ``10^low`` to ``10^high``."""
    return tuple(int(round(10 ** (k / 2))) for k in range(2 * low, 2 * high + 1))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Figure1Config(TrialConfig):
    """Figure 1's settings. DP-LSL's ridge follows schedules ``lambda = c m^q`` for every
    ``c`` in ``ridge_scales`` and ``q`` in ``ridge_powers`` (the authors' code searched
    c in {0.1, ..., 1e4}, q in {0.1, ..., 0.7}; q = 0 and 1 added for Corollary 13's
    extremes). Panel (b) uses the batch sizes ``panel_b_sizes`` (members of ``batch_sizes``)
    and the fixed ridges ``panel_b_ridges``; ``group_sizes`` are the aggregation levels
    (1 = tabular)."""

    n_states: int = 40
    stay_prob: float = 0.5
    gamma: float = 0.99
    horizon: int = 200
    eps: float = 0.1
    delta: float = 0.1
    batch_sizes: tuple[int, ...] = _half_decades(1, 15)
    group_sizes: tuple[int, ...] = (1, 2, 4, 8)
    ridge_scales: tuple[float, ...] = (0.1, 1.0, 10.0, 100.0, 1e3, 1e4)
    ridge_powers: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 1.0)
    panel_b_sizes: tuple[int, ...] = (100_000, 100_000_000)
    panel_b_ridges: tuple[float, ...] = tuple(float(10 ** (k / 2)) for k in range(-2, 17))

    def __post_init__(self) -> None:
        super().__post_init__()
        if not set(self.panel_b_sizes) <= set(self.batch_sizes):
            raise ValueError("panel_b_sizes must be among batch_sizes (the same data sets)")

    @property
    def mdp(self) -> ChainMDP:
        """The chain."""
        return ChainMDP(n_states=self.n_states, stay_prob=self.stay_prob, gamma=self.gamma,
                        horizon=self.horizon)

    def ridges(self, m: int) -> np.ndarray:
        """``c m^q`` for every schedule, ``(len(ridge_scales), len(ridge_powers))``."""
        return np.outer(self.ridge_scales, float(m) ** np.array(self.ridge_powers))


def _data_sets(config: Figure1Config, rngs: Sequence[np.random.Generator]
               ) -> list[FirstVisitSummary]:
    """Per batch size, the trials' nested data sets stacked, datasets shape ``(trials,)``."""
    per_trial = [sample_first_visit_summaries(config.mdp, config.batch_sizes, rng)
                 for rng in rngs]
    return [stack_summaries(list(sets)) for sets in zip(*per_trial, strict=True)]


def figure1_trials(config: Figure1Config,
                   rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Per trial: RMSE (``*_rmse``), noise scale (``*_sigma``) and realised excess empirical
    risk (``*_excess``, each algorithm against its own objective) of LSW / DP-LSW
    ``(groups, sizes)`` and LSL / DP-LSL ``(groups, scales, powers, sizes)``, and panel (b)'s
    ``(panel_b_sizes, panel_b_ridges)`` RMSE of tabular LSL / DP-LSL. DP-LSL entries are NaN
    where the schedule's ``lambda`` is at or below ``||Phi||^2 ||rho||_inf`` (no release)."""
    mdp = config.mdp
    rho, truth = mdp.start_probabilities, mdp.value_function()
    data_sets = _data_sets(config, rngs)
    shape = (len(rngs), len(config.group_sizes), len(config.batch_sizes))
    lsl_shape = (*shape[:2], len(config.ridge_scales), len(config.ridge_powers), shape[2])
    out = {name: np.empty(shape) for name in
           ("lsw_rmse", "dp_lsw_rmse", "dp_lsw_sigma", "dp_lsw_excess")}
    out |= {name: np.empty(lsl_shape) for name in
            ("lsl_rmse", "dp_lsl_rmse", "dp_lsl_sigma", "dp_lsl_excess")}
    privacy = (config.eps, config.delta)

    def error(features: np.ndarray, theta: np.ndarray) -> np.ndarray:
        return _rmse(features, theta, truth, rho)

    for g, group_size in enumerate(config.group_sizes):
        features = aggregation_features(mdp.n_states, group_size)
        threshold = ridge_threshold(features, rho)
        for j, data in enumerate(data_sets):
            out["lsw_rmse"][:, g, j] = error(features, lsw(data, features, rho))
            out["dp_lsw_sigma"][:, g, j] = dp_lsw_noise_scale(data, features, rho, *privacy)
            released = dp_lsw(data, features, rho, *privacy, rngs)
            out["dp_lsw_rmse"][:, g, j] = error(features, released)
            out["dp_lsw_excess"][:, g, j] = lsw_excess_risk(data, features, rho, released)
            for index, lam in np.ndenumerate(config.ridges(data.n_trajectories)):
                at = (slice(None), g, *index, j)
                out["lsl_rmse"][at] = error(features, lsl(data, features, rho, lam))
                if lam <= threshold:  # DP-LSL refuses it (Cor. 8): no release
                    for name in ("dp_lsl_sigma", "dp_lsl_rmse", "dp_lsl_excess"):
                        out[name][at] = np.nan
                    continue
                out["dp_lsl_sigma"][at] = dp_lsl_noise_scale(data, features, rho, lam, *privacy)
                released = dp_lsl(data, features, rho, lam, *privacy, rngs)
                out["dp_lsl_rmse"][at] = error(features, released)
                out["dp_lsl_excess"][at] = lsl_excess_risk(data, features, rho, lam, released)
    return out | _panel_b(config, data_sets, rngs)


def _rmse(features: np.ndarray, theta: np.ndarray, truth: np.ndarray,
          rho: np.ndarray) -> np.ndarray:
    """The rho-weighted RMSE of ``Phi theta`` ``(datasets, d)`` against the exact ``V``."""
    return weighted_rmse((features * theta[:, None, :]).sum(axis=-1), truth, rho)


def _panel_b(config: Figure1Config, data_sets: list[FirstVisitSummary],
             rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Tabular LSL and DP-LSL against the ridge at ``panel_b_sizes``."""
    mdp = config.mdp
    rho, truth, features = mdp.start_probabilities, mdp.value_function(), np.eye(mdp.n_states)
    shape = (len(rngs), len(config.panel_b_sizes), len(config.panel_b_ridges))
    out = {"panel_b_lsl_rmse": np.empty(shape), "panel_b_dp_lsl_rmse": np.empty(shape)}
    for i, m in enumerate(config.panel_b_sizes):
        data = data_sets[config.batch_sizes.index(m)]
        for k, lam in enumerate(config.panel_b_ridges):
            out["panel_b_lsl_rmse"][:, i, k] = weighted_rmse(lsl(data, features, rho, lam),
                                                             truth, rho)
            released = dp_lsl(data, features, rho, lam, config.eps, config.delta, rngs)
            out["panel_b_dp_lsl_rmse"][:, i, k] = weighted_rmse(released, truth, rho)
    return out


FIGURE1 = register(Experiment(
    id="balle2016-figure1",
    title="Balle et al. (2016), Figure 1: private and non-private LSW and LSL on the chain",
    chapter="book/balle2016/experiments.ipynb",
    configs={
        "smoke": Figure1Config(n_trials=3, root_seed=1606, batch_size=2,
                               batch_sizes=(10, 1000, 100_000), group_sizes=(1, 2),
                               ridge_scales=(1.0, 100.0), ridge_powers=(0.5,),
                               panel_b_sizes=(1000,), panel_b_ridges=(1.0, 1e3)),
        "paper": Figure1Config(n_trials=20, root_seed=1606, batch_size=5),
    },
    run_trials=figure1_trials))


def ridge_schedule_trials(config: Figure1Config,
                          rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Per trial, DP-LSL's RMSE ``(groups, scales, powers, sizes)`` for every schedule
    ``lambda = c m^q`` of ``config`` (NaN where refused), on Figure 1's data sets (the same
    root seed draws the same data sets; the noise draws differ)."""
    mdp = config.mdp
    rho, truth = mdp.start_probabilities, mdp.value_function()
    data_sets = _data_sets(config, rngs)
    shape = (len(rngs), len(config.group_sizes), len(config.ridge_scales),
             len(config.ridge_powers), len(config.batch_sizes))
    rmse = np.full(shape, np.nan)
    for g, group_size in enumerate(config.group_sizes):
        features = aggregation_features(mdp.n_states, group_size)
        threshold = ridge_threshold(features, rho)
        for j, data in enumerate(data_sets):
            for index, lam in np.ndenumerate(config.ridges(data.n_trajectories)):
                if lam > threshold:  # DP-LSL refuses the others (Cor. 8)
                    released = dp_lsl(data, features, rho, lam, config.eps, config.delta, rngs)
                    rmse[(slice(None), g, *index, j)] = _rmse(features, released, truth, rho)
    return {"dp_lsl_rmse": rmse}


RIDGE_SCHEDULES = register(Experiment(
    id="balle2016-ridge-schedules",
    title="Balle et al. (2016), Sec. 6: DP-LSL's ridge schedules lambda = c m^q on a wide grid",
    chapter="book/balle2016/experiments.ipynb",
    configs={
        "smoke": Figure1Config(n_trials=2, root_seed=1606, batch_size=2,
                               batch_sizes=(10, 1000, 100_000), group_sizes=(1, 2),
                               ridge_scales=(1.0, 100.0), ridge_powers=(0.3, 0.5),
                               panel_b_sizes=(1000,)),
        "paper": Figure1Config(n_trials=20, root_seed=1606, batch_size=5, group_sizes=(1, 2),
                               ridge_scales=tuple(float(10 ** (k / 2)) for k in range(-2, 17)),
                               ridge_powers=tuple(k / 10 for k in range(11))),
    },
    run_trials=ridge_schedule_trials))


def authors_code_trials(config: Figure1Config,
                        rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Figure 1's DP-LSW and DP-LSL with the authors' code's choices
    (:mod:`dprl.balle2016.authors_code`) on Figure 1's data sets: per trial LSW's RMSE and
    DP-LSW's RMSE and noise scale ``(groups, sizes)``, DP-LSL's RMSE
    ``(groups, scales, powers, sizes)`` (NaN where the code's threshold refuses it)."""
    mdp = config.mdp
    rho, truth = mdp.start_probabilities, mdp.value_function()
    data_sets = _data_sets(config, rngs)
    shape = (len(rngs), len(config.group_sizes), len(config.batch_sizes))
    out = {name: np.empty(shape) for name in ("lsw_rmse", "dp_lsw_rmse", "dp_lsw_sigma")}
    out["dp_lsl_rmse"] = np.full((*shape[:2], len(config.ridge_scales),
                                  len(config.ridge_powers), shape[2]), np.nan)
    privacy = (config.eps, config.delta)
    for g, group_size in enumerate(config.group_sizes):
        features = aggregation_features(mdp.n_states, group_size)
        threshold = authors_ridge_threshold(features, rho)
        for j, data in enumerate(data_sets):
            out["lsw_rmse"][:, g, j] = _rmse(features, lsw(data, features, rho), truth, rho)
            out["dp_lsw_sigma"][:, g, j] = authors_lsw_noise_scale(data, features, rho, *privacy)
            released = authors_dp_lsw(data, features, rho, *privacy, rngs)
            out["dp_lsw_rmse"][:, g, j] = _rmse(features, released, truth, rho)
            for index, lam in np.ndenumerate(config.ridges(data.n_trajectories)):
                if lam > threshold:
                    released = authors_dp_lsl(data, features, rho, lam, *privacy, rngs)
                    out["dp_lsl_rmse"][(slice(None), g, *index, j)] = _rmse(
                        features, released, truth, rho)
    return out


AUTHORS_CODE = register(Experiment(
    id="balle2016-figure1-authors-code",
    title="Balle et al. (2016), Figure 1 with two choices of the authors' code (Gamma^{1/2} in "
          "DP-LSW's smooth bound, Frobenius norms): not the paper's formulas",
    chapter="book/balle2016/experiments.ipynb",
    configs={
        "smoke": Figure1Config(n_trials=2, root_seed=1606, batch_size=2,
                               batch_sizes=(10, 1000, 100_000), group_sizes=(1, 2),
                               ridge_scales=(100.0,), ridge_powers=(0.5,),
                               panel_b_sizes=(1000,)),
        "paper": Figure1Config(n_trials=20, root_seed=1606, batch_size=5, group_sizes=(1, 2),
                               ridge_scales=(100.0, 1e3, 1e4), ridge_powers=(0.3, 0.4, 0.5)),
    },
    run_trials=authors_code_trials))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExactSamplerConfig(TrialConfig):
    """Nested data sets of ``sizes`` trajectories of the Sec. 6 chain (``F_max = R_max /
    (1 - gamma)``), one run per trial. Trial ``r`` draws from
    ``numpy.random.default_rng(first_seed + r)``, the seeds the utility chapter drew these
    runs with before they were a registered result, so that its numbers stay the ones it
    printed; any trial still recomputes alone. The sampler checks ``sizes``."""

    sizes: tuple[int, ...]
    first_seed: int = 7000


def exact_sampler_trials(config: ExactSamplerConfig,
                         rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Per trial (run) and size, the signature ``|X_s|`` (``counts``) and the first-visit
    return sums (``return_sums``) of the nested data sets
    (:func:`~dprl.balle2016.chain_sampler.sample_first_visit_summaries`)."""
    runs = [sample_first_visit_summaries(ChainMDP(), list(config.sizes), np.random.default_rng(
        config.first_seed + trial_index(rng))) for rng in rngs]
    return {"counts": np.stack([[s.counts for s in run] for run in runs]),
            "return_sums": np.stack([[s.return_sums for s in run] for run in runs])}


def exact_sampler_summaries(arrays: dict[str, np.ndarray], config: ExactSamplerConfig
                            ) -> list[FirstVisitSummary]:
    """The runs of a ``balle2016-utility-large`` result as one summary per size, the runs
    stacked on the first axis."""
    chain = ChainMDP()
    bound = return_bound(chain.reward_range[1], chain.gamma)
    return [FirstVisitSummary(arrays["counts"][:, j], arrays["return_sums"][:, j], m, bound)
            for j, m in enumerate(config.sizes)]


UTILITY_LARGE = register(Experiment(
    id="balle2016-utility-large",
    title="Balle et al. (2016), Sec. 5: nested chain data sets of 10^3 to 10^8 trajectories "
          "from the exact sampler (20 runs), for the excess risk of Corollaries 12 and 13",
    chapter="book/balle2016/utility.ipynb",
    configs={"smoke": ExactSamplerConfig(n_trials=2, root_seed=0, batch_size=2,
                                         sizes=(100, 1000)),
             "paper": ExactSamplerConfig(n_trials=20, root_seed=0, batch_size=5,
                                         sizes=_half_decades(3, 8))},
    run_trials=exact_sampler_trials))
