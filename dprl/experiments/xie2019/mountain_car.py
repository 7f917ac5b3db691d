"""Experiments of Xie et al. (2019), Sec. 7 and App. D, on Mountain Car (Figs. 2, 3, App. Fig. 6).

- ``xie2019-mountain-car-policy`` (:mod:`~.mountain_car_policy`): the evaluated policy.
- ``xie2019-mountain-car-reference`` (:mod:`~.mountain_car_reference`): the reference problem
  of the MSPBE.
- ``xie2019-mountain-car-tuning``: the constant step of GPOPE at every privacy level, and of
  non-private GTD2, chosen on *public* data (another root seed) for every batch size.
- ``xie2019-mountain-car``: on-policy (the greedy learned policy): GPOPE at the tuned step,
  0.1x and 10x, DP-LSW, LSTD and GTD2 against m (Fig. 2(a)); GPOPE at several eps (Fig.
  3(a)); every step of the grid at ``m_fixed`` and every level (Fig. 2(b), App. Fig. 6).
  Off-policy (target: the uniform policy; behaviour: the learned policy epsilon-greedy):
  GPOPE at several eps, GTD2 and WIS-LSTD (Fig. 3(b)).

The value function is linear in the 36 Fourier features of the scaled state, gamma = 0.99 (the
paper does not state it), delta = 1e-5. GPOPE runs ``N = epochs * m`` iterations (the paper
does not state N; with one pass even noiseless GTD2 barely leaves theta = 0 here) with
clipping bound ``h``; the noise is calibrated for that N. Every run (policy, batch size, eps,
step) draws from its own named stream of the trial, so the same run is the same bits in every
figure. MSPBE uses ``A, b, C`` of Eq. 2.1 estimated from ``reference_episodes`` independent
episodes (a fixed public seed; ``xie2019-mountain-car-reference``,
:mod:`~.mountain_car_reference`). DP-LSW (Balle et al. 2016) needs finitely many states: it
runs on a public grid of ``grid_cells^2`` cells (first-visit returns per cell, features at the cell
centres, uniform ``rho``) on the cost ``-r = 1`` per step, whose returns lie in
``[0, 1/(1-gamma)]`` as its privacy proof requires; its estimate is negated.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from dprl.balle2016 import dp_lsw, first_visit_data
from dprl.control.linear_q import EpsilonGreedyPolicy
from dprl.envs import MountainCar, Trajectories, mountain_car_features
from dprl.envs.episodes import (Episodes, RecordingFeatures, feature_table, recorded_table,
                                stack_episodes)
from dprl.experiments.xie2019.off_policy import (RunTable, check_calibrations, check_tuned_steps,
                                                 tuned_steps)
from dprl.engine.registry import Experiment, TrialConfig, register
from dprl.experiments.xie2019.mountain_car_policy import POLICY, policy_weights
from dprl.experiments.xie2019.mountain_car_reference import (REFERENCE, importance_ratios,
                                                             policy_pair, reference_statistics)
from dprl.policy_evaluation import mspbe
from dprl.seeding import named_stream
from dprl.xie2019 import Prepared, prepare
from dprl.xie2019.baselines import prepared_least_squares


@dataclasses.dataclass(frozen=True, kw_only=True)
class MountainCarConfig(TrialConfig):
    """Privacy, GPOPE, the grids and the off-policy behaviour (stated in the chapter).

    GPOPE and GTD2 run ``N = epochs * m`` iterations with a constant step; every GPOPE run is
    calibrated by each of ``calibrations`` (:func:`~dprl.xie2019.privacy.calibrated_sigma`).
    The steps are tuned on public data (``xie2019-mountain-car-tuning``, another root seed) for
    every batch size, calibration and privacy level: ``tuned_steps[i][c][k]`` is the step at
    ``batch_sizes[i]``, ``calibrations[c]`` and ``levels[k]``, the last level GTD2's (no
    privacy: the same step under every calibration); likewise ``tuned_steps_off`` off-policy.
    Fig. 2(a) uses ``eps`` (one of ``eps_levels``); the step sweep (Fig. 2(b)) runs at
    ``m_fixed`` (None: none); ``off_policy=False`` leaves the off-policy runs out."""

    policy_scale: str = "paper"
    gamma: float = 0.99
    eps: float = 0.1
    delta: float = 1e-5
    eps_levels: tuple[float, ...] = (0.1, 1.0, 10.0)
    calibrations: tuple[str, ...] = ("paper", "tightest")
    batch_sizes: tuple[int, ...] = (1000, 3162, 10000)
    epochs: float = 1.0
    clip: float = 1.0
    step_grid: tuple[float, ...] = tuple(float(10 ** (k / 2)) for k in range(-8, 1))  # 1e-4..1
    tuned_steps: tuple[tuple[tuple[float, ...], ...], ...] = ()
    tuned_steps_off: tuple[tuple[tuple[float, ...], ...], ...] = ()
    step_multipliers: tuple[float, ...] = (0.1, 1.0, 10.0)
    m_fixed: int | None = 1000
    off_policy: bool = True
    behaviour_epsilon: float = 0.5
    reference_episodes: int = 20000
    reference_seed: int = 1
    grid_cells: int = 12

    @property
    def levels(self) -> tuple[float, ...]:
        """The privacy levels of the runs: ``eps_levels``, then ``inf`` (GTD2)."""
        return (*self.eps_levels, math.inf)


def _policies(config: MountainCarConfig):
    """The features, the evaluated (greedy) policy and the off-policy behaviour."""
    return policy_pair(config.policy_scale, config.behaviour_epsilon)


def evaluated_policy(config: MountainCarConfig) -> EpsilonGreedyPolicy:
    """The on-policy evaluated policy: greedy in the learned Q (``policy_scale``'s weights)."""
    return _policies(config)[1]


def _samples(config: MountainCarConfig, off_policy: bool,
             streams: Sequence[np.random.Generator]) -> tuple[Episodes, np.ndarray]:
    """Each trial's episodes at the largest batch size under the evaluated policy (on-policy)
    or the behaviour, and :func:`~dprl.envs.episodes.feature_table`'s table of them, kept from
    the policy's own evaluations of the features while simulating (the same bits)."""
    weights, features = policy_weights(config.policy_scale), mountain_car_features()
    episodes, recorders = [], []
    for stream in streams:
        recorders.append(RecordingFeatures(features))
        policy = EpsilonGreedyPolicy(weights, recorders[-1],
                                     config.behaviour_epsilon if off_policy else 0.0)
        episodes.append(MountainCar().simulate(max(config.batch_sizes), policy, stream))
    ends = np.cumsum([(e.lengths + 1).sum() for e in episodes])
    table = np.empty((ends[-1], features.n_features))
    for data, recorder, end in zip(episodes, recorders, ends):
        recorded_table(data, recorder, table[end - (data.lengths + 1).sum():end])
        recorder.rows.clear()  # let the recording go as soon as it is copied
    return stack_episodes(episodes), table


_DATA, _DP_LSW, _RUN, _PANEL = 0, 1, 2, 3  # first names of the data, DP-LSW, run streams


def _data(config: MountainCarConfig, rngs, off_policy: bool
          ) -> tuple[Episodes, Prepared, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Each trial's episodes at the largest batch size (the smaller data sets are their first
    ``m``), prepared once for every run on them (the feature table lives only here), and the
    reference statistics of the problem."""
    sample, table = _samples(config, off_policy,
                             [named_stream(g, _DATA, int(off_policy)) for g in rngs])
    ratios = importance_ratios(sample) if off_policy else None
    prepared = prepare(*feature_table(sample, None, table), config.gamma, ratios)
    return sample, prepared, reference_statistics(config, off_policy)


def _prefix(off_policy: bool, m: int) -> tuple[int, int, int]:
    """The first names of a run's stream: (runs, policy, batch size); the level, the step and
    the calibration follow (:func:`dprl.experiments.xie2019.off_policy.run_thetas`)."""
    return _RUN, int(off_policy), m


def _tuned_runs(config: MountainCarConfig, table: RunTable, steps) -> np.ndarray:
    """Columns ``(calibrations, levels)`` of the runs at the tuned ``steps[c][k]``."""
    return table.tuned(steps, config.levels, config.calibrations)


def _grid_runs(config: MountainCarConfig, table: RunTable) -> np.ndarray:
    """Columns ``(calibrations, levels, steps)`` of every step of the grid at every level."""
    return table.grid(config.step_grid, config.levels, config.calibrations)


def _cells(config: MountainCarConfig, observations: np.ndarray) -> np.ndarray:
    """The public grid cell of each observation (row-major over position, velocity)."""
    env, k = MountainCar(), config.grid_cells
    scaled = (observations - env.observation_low) / (env.observation_high - env.observation_low)
    # observations lie in the box; the upper edge belongs to the last cell
    index = np.minimum(np.floor(scaled * k).astype(np.int64), k - 1)
    return index[..., 0] * k + index[..., 1]


def cell_features(config: MountainCarConfig, features) -> np.ndarray:
    """The Fourier features of the grid cells' centres, ``(grid_cells^2, d)``."""
    env, k = MountainCar(), config.grid_cells
    centres = (np.arange(k) + 0.5) / k
    grid = np.stack(np.meshgrid(centres, centres, indexing="ij"), axis=-1).reshape(-1, 2)
    return features(env.observation_low + grid * (env.observation_high - env.observation_low))


def grid_costs(config: MountainCarConfig, data: Episodes) -> Trajectories:
    """``data`` as trajectories on the public grid's cells (the states of DP-LSW) with the
    cost ``-r = 1`` per step, so every first-visit return lies in ``[0, 1/(1 - gamma)]``
    (Balle et al. 2016, Sec. 2.2)."""
    cells = np.where(np.arange(data.horizon + 1) <= data.lengths[..., None],
                     _cells(config, np.nan_to_num(data.observations)), -1)
    return Trajectories(cells, -data.rewards, data.lengths, data.terminated, (0.0, 1.0))


def dp_lsw_theta(config: MountainCarConfig, data: Episodes, features, rngs) -> np.ndarray:
    """DP-LSW (Balle et al. 2016, Algorithm 1) on the grid cells, for the cost ``-r``; the
    value estimate is the negated weight vector ``(*datasets, d)``."""
    n_cells = config.grid_cells**2
    summary = first_visit_data(grid_costs(config, data), config.gamma, n_cells,
                               r_max=1.0).summary
    theta = dp_lsw(summary, cell_features(config, features), np.full(n_cells, 1 / n_cells),
                   config.eps, config.delta, rngs)
    return -theta


def tuning_trials(config: MountainCarConfig,
                  rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """MSPBE ``(sizes, calibrations, levels, steps)`` per (public) trial, on- and off-policy:
    GPOPE at each of ``eps_levels`` under each calibration and GTD2 (the last level, the same
    runs under every calibration), every step of the grid."""
    out = {}
    for name, off in (("on_policy", False), ("off_policy", True)):
        _, prepared, exact = _data(config, rngs, off)
        values = np.empty((len(rngs), len(config.batch_sizes), len(config.calibrations),
                           len(config.levels), len(config.step_grid)))
        for i, m in enumerate(config.batch_sizes):
            table = RunTable()
            columns = _grid_runs(config, table)
            values[:, i] = table.compute(config, prepared.first(m), exact, rngs,
                                         _prefix(off, m))[:, columns]
        out[name] = values
    return out


def _on_policy(config: MountainCarConfig, rngs, out: dict[str, np.ndarray]) -> None:
    features = _policies(config)[0]
    sample, prepared, exact = _data(config, rngs, False)
    main = config.eps_levels.index(config.eps)
    for i, m in enumerate(config.batch_sizes):
        part, steps, table = prepared.first(m), config.tuned_steps[i], RunTable()
        multiplied = [[table.add(factor * row[main], config.eps, calibration)
                       for factor in config.step_multipliers]
                      for row, calibration in zip(steps, config.calibrations)]
        levels = _tuned_runs(config, table, steps)
        sweep = _grid_runs(config, table) if m == config.m_fixed else None
        values = table.compute(config, part, exact, rngs, _prefix(False, m))
        out["gpope"][:, i] = values[:, multiplied]
        out["gpope_eps"][:, i] = values[:, levels[:, :-1]]
        out["gtd2"][:, i] = values[:, levels[0, -1]]
        if sweep is not None:
            out["step_sweep"][:] = values[:, sweep]
        out["lstd"][:, i] = mspbe(prepared_least_squares(part), *exact)
        noise = [named_stream(g, _DP_LSW, m) for g in rngs]
        out["dp_lsw"][:, i] = mspbe(dp_lsw_theta(config, sample.first(m), features, noise),
                                    *exact)


def _off_policy(config: MountainCarConfig, rngs, out: dict[str, np.ndarray]) -> None:
    _, prepared, exact = _data(config, rngs, True)
    for i, m in enumerate(config.batch_sizes):
        part, table = prepared.first(m), RunTable()
        levels = _tuned_runs(config, table, config.tuned_steps_off[i])
        values = table.compute(config, part, exact, rngs, _prefix(True, m))
        out["gpope_off"][:, i] = values[:, levels[:, :-1]]
        out["gtd2_off"][:, i] = values[:, levels[0, -1]]
        out["wis_lstd"][:, i] = mspbe(prepared_least_squares(part), *exact)


def _check(config: MountainCarConfig) -> None:
    """Tuned steps ``(sizes, calibrations, levels)`` with one GTD2 step per size; ``eps`` one
    of ``eps_levels``; ``m_fixed`` one of ``batch_sizes`` (or None)."""
    for name in ("tuned_steps",) + (("tuned_steps_off",) if config.off_policy else ()):
        check_tuned_steps(name, getattr(config, name), len(config.batch_sizes),
                          len(config.calibrations), len(config.levels))
    check_calibrations(config.calibrations)
    if config.eps not in config.eps_levels or config.m_fixed not in (None,
                                                                     *config.batch_sizes):
        raise ValueError("eps must be one of eps_levels and m_fixed one of batch_sizes")


def mountain_car_trials(config: MountainCarConfig,
                        rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Per trial, MSPBE of, on-policy: GPOPE at ``eps`` ``(sizes, calibrations,
    multipliers)`` (Fig. 2(a)) and at every level ``(sizes, calibrations, eps_levels)`` (Fig.
    3(a)), GTD2, LSTD and DP-LSW ``(sizes,)``, every step at ``m_fixed`` ``(calibrations,
    levels, steps)`` (Fig. 2(b), App. Fig. 6); off-policy: GPOPE ``(sizes, calibrations,
    eps_levels)``, GTD2 and WIS-LSTD ``(sizes,)`` (Fig. 3(b))."""
    _check(config)
    n, sizes, calibrations = len(rngs), len(config.batch_sizes), len(config.calibrations)
    levels = (n, sizes, calibrations, len(config.eps_levels))
    out = {"gpope": np.empty((n, sizes, calibrations, len(config.step_multipliers))),
           "gpope_eps": np.empty(levels), "gtd2": np.empty((n, sizes)),
           "lstd": np.empty((n, sizes)), "dp_lsw": np.empty((n, sizes))}
    if config.m_fixed is not None:
        out["step_sweep"] = np.empty((n, calibrations, len(config.levels),
                                      len(config.step_grid)))
    _on_policy(config, rngs, out)
    if config.off_policy:
        out.update(gpope_off=np.empty(levels), gtd2_off=np.empty((n, sizes)),
                   wis_lstd=np.empty((n, sizes)))
        _off_policy(config, rngs, out)
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class NPanelConfig(MountainCarConfig):
    """The N panel: on-policy at ``m_fixed`` (the only batch size), GTD2 and GPOPE at
    ``eps`` under each calibration, every step of the grid, for ``N = e m`` iterations with
    ``e`` in ``panel_epochs``."""

    panel_epochs: tuple[float, ...] = (1.0, 3.0, 10.0, 30.0)


def n_panel_trials(config: NPanelConfig,
                   rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Per trial, MSPBE of GTD2 ``(epochs, steps)`` and of GPOPE at ``eps`` ``(epochs,
    calibrations, steps)`` for every ``N = e m`` of ``panel_epochs`` at ``m = m_fixed``, and
    LSTD's on the same data: whether more iterations than the main runs' would have helped."""
    if config.batch_sizes != (config.m_fixed,) or config.eps not in config.eps_levels:
        raise ValueError("the N panel runs at batch_sizes = (m_fixed,), eps in eps_levels")
    _, prepared, exact = _data(config, rngs, False)
    shape = (len(rngs), len(config.panel_epochs), len(config.step_grid))
    out = {"gtd2": np.empty(shape), "lstd": mspbe(prepared_least_squares(prepared), *exact),
           "gpope": np.empty((shape[0], shape[1], len(config.calibrations), shape[2]))}
    for e, epochs in enumerate(config.panel_epochs):
        table = RunTable()
        gtd2 = [table.add(step, math.inf) for step in config.step_grid]
        gpope = [[table.add(step, config.eps, calibration) for step in config.step_grid]
                 for calibration in config.calibrations]
        values = table.compute(dataclasses.replace(config, epochs=epochs), prepared, exact,
                               rngs, (_PANEL, e))
        out["gtd2"][:, e], out["gpope"][:, e] = values[:, gtd2], values[:, gpope]
    return out


def tuned(result: dict[str, np.ndarray], step_grid: Sequence[float]
          ) -> dict[str, tuple[tuple[tuple[float, ...], ...], ...]]:
    """The step of the grid with the least mean MSPBE over the public trials, per batch size,
    calibration and level, on- and off-policy: the ``tuned_steps`` / ``tuned_steps_off`` of
    the private runs, from a ``xie2019-mountain-car-tuning`` result."""
    return {name: tuned_steps(result[key], step_grid)
            for name, key in (("tuned_steps", "on_policy"), ("tuned_steps_off", "off_policy"))}


_SMOKE = dict(policy_scale="smoke", eps=1.0, eps_levels=(1.0, 10.0), batch_sizes=(50, 100),
              epochs=2.0, step_grid=(1e-3, 1e-2), m_fixed=50, reference_episodes=2000)

TUNING = register(Experiment(
    id="xie2019-mountain-car-tuning",
    title="Xie et al. (2019), Mountain Car: GPOPE and GTD2 step sizes tuned on public data",
    chapter="book/xie2019/mountain-car.ipynb",
    configs={"smoke": MountainCarConfig(n_trials=2, root_seed=11, batch_size=2, **_SMOKE),
             "paper": MountainCarConfig(n_trials=10, root_seed=11, batch_size=5)},
    run_trials=tuning_trials, after=(POLICY.id, REFERENCE.id)))

_SMOKE_STEPS = (((1e-2, 1e-2, 1e-2),) * 2,) * 2


def _half_decades(*sizes: tuple[tuple[int, ...], ...]) -> tuple[tuple[tuple[float, ...], ...], ...]:
    """Steps ``10^(k/2)`` per batch size, calibration and level, as the step grid writes
    them."""
    return tuple(tuple(tuple(float(10 ** (k / 2)) for k in row) for row in size)
                 for size in sizes)


#: tuned(xie2019-mountain-car-tuning) (tested): per batch size, (paper, tightest) x levels
_TUNED = _half_decades(((-8, -5, -4, -1), (-8, -6, -6, -1)), ((-7, -4, -3, -1), (-8, -6, -5, -1)),
                       ((-6, -3, -2, -1), (-8, -6, -5, -1)))
_TUNED_OFF = _half_decades(((-7, -5, -3, -1), (-8, -7, -5, -1)),
                           ((-6, -4, -2, -1), (-7, -7, -5, -1)),
                           ((-5, -3, -2, -1), (-8, -6, -4, -1)))

MOUNTAIN_CAR = register(Experiment(
    id="xie2019-mountain-car",
    title="Xie et al. (2019), Figs. 2, 3 and App. Fig. 6: GPOPE on Mountain Car",
    chapter="book/xie2019/mountain-car.ipynb",
    configs={"smoke": MountainCarConfig(n_trials=2, root_seed=2020, batch_size=2,
                                        tuned_steps=_SMOKE_STEPS, tuned_steps_off=_SMOKE_STEPS,
                                        **_SMOKE),
             "paper": MountainCarConfig(n_trials=100, root_seed=2020, batch_size=2,
                                        tuned_steps=_TUNED, tuned_steps_off=_TUNED_OFF)},
    run_trials=mountain_car_trials, after=(POLICY.id, REFERENCE.id, TUNING.id)))

_LARGE = dict(batch_sizes=(31623, 100000), m_fixed=None, step_multipliers=(1.0,))

LARGE = register(Experiment(
    id="xie2019-mountain-car-large",
    title="Xie et al. (2019), Mountain Car at m = 10^4.5 and 10^5, on- and off-policy: GPOPE, "
          "GTD2, LSTD, WIS-LSTD and DP-LSW (3 trials, the steps tuned at m = 10^4)",
    chapter="book/xie2019/mountain-car.ipynb",
    configs={"smoke": MountainCarConfig(n_trials=2, root_seed=2021, batch_size=1,
                                        tuned_steps=_SMOKE_STEPS[:1] * 2,
                                        tuned_steps_off=_SMOKE_STEPS[:1] * 2,
                                        **{**_SMOKE, **_LARGE, "batch_sizes": (150, 200)}),
             "paper": MountainCarConfig(n_trials=3, root_seed=2021, batch_size=1,
                                        tuned_steps=_TUNED[-1:] * 2,
                                        tuned_steps_off=_TUNED_OFF[-1:] * 2, **_LARGE)},
    run_trials=mountain_car_trials, after=(POLICY.id, REFERENCE.id, TUNING.id)))

N_PANEL = register(Experiment(
    id="xie2019-mountain-car-n-panel",
    title="Xie et al. (2019), Mountain Car: MSPBE against the number of iterations N at fixed m "
          "(GTD2, GPOPE under both calibrations, every step)",
    chapter="book/xie2019/mountain-car.ipynb",
    configs={"smoke": NPanelConfig(n_trials=2, root_seed=2022, batch_size=2, panel_epochs=(1.0, 3.0),
                                   **{**_SMOKE, "batch_sizes": (50,)}),
             "paper": NPanelConfig(n_trials=30, root_seed=2022, batch_size=5, eps=10.0,
                                   batch_sizes=(1000,))},
    run_trials=n_panel_trials, after=(POLICY.id, REFERENCE.id)))

__all__ = ["LARGE", "MOUNTAIN_CAR", "N_PANEL", "TUNING", "MountainCarConfig",
           "NPanelConfig", "cell_features", "dp_lsw_theta", "evaluated_policy", "grid_costs",
           "tuned"]
