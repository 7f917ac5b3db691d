"""Experiments of the Xie et al. (2019) chapters: the chain of Sec. 7 (Fig. 1, App. Fig. 5).

On-policy chain (N = 40, p = 0.5, gamma = 0.99, uniform start, horizon 200), tabular
features, eps = 0.1, delta = 1e-5, m from 100 to 1e5 trajectories in half-decades. GPOPE runs
``N = m`` iterations (one pass on average) with a fixed clipping bound and a constant step,
under each of ``calibrations``: the paper's (Lemma 1, sensitivity ``h``) and the tightest
sound one (WBK Thm. 27, replace-one, ``2h``). GTD2 (no privacy) and LSTD (minimum-norm where
a state is unvisited) run on the same data. The MSPBE uses the exact ``A, b, C`` of Eq. 2.1
(dynamic programming). Data sets are nested: the first ``m`` trajectories of a trial's
sample. DP-LSW and DP-LSL (Balle et al. 2016) run on the same data sets at the same
``(eps, delta)``, with Lemma 1's constants and ``lambda = c sqrt(m)``. Every part of a trial
(data, each GPOPE / GTD2 run, each DP-LSW / DP-LSL release) draws from its own named stream.

- ``xie2019-chain-tuning``: the step sizes, chosen on *public* data (trials from another
  root seed, never the private runs): MSPBE of GPOPE under each calibration, and of GTD2, for
  every step of the grid and every m.
- ``xie2019-chain``: Fig. 1(a) (MSPBE against m for GPOPE at the tuned step, 0.1x and 10x,
  DP-LSW, DP-LSL, GTD2, LSTD) and Fig. 1(b) / App. Fig. 5 (MSPBE against the step at
  ``m_fixed``).
- ``xie2019-chain-iterations``: MSPBE against the number of iterations ``N`` at one ``m``,
  every step of the grid: whether GTD2, and GPOPE, had converged at ``N = m``.
- ``xie2019-chain-pld``: ``xie2019-chain``'s first 25 trials (the same data sets and, under
  RDP's calibration, the same runs) with GPOPE under RDP's calibration and the sound PLD's
  (:func:`~dprl.xie2019.privacy.pld_sigma`), both at RDP's tuned step: what the PLD's smaller
  noise buys.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from dprl.balle2016 import dp_lsl, dp_lsw, first_visit_data
from dprl.envs import ChainMDP, stack_trajectories
from dprl.experiments.xie2019.off_policy import Run, RunTable, runs_mspbe, tuned_steps
from dprl.engine.registry import Experiment, TrialConfig, register
from dprl.features import tabular_features
from dprl.policy_evaluation import exact_td_statistics, mspbe
from dprl.seeding import named_stream
from dprl.xie2019 import Prepared, prepare
from dprl.xie2019.baselines import prepared_least_squares


_DATA, _RUNS, _DP_LSW, _DP_LSL, _SWEEP, _PANEL = range(6)  # first names of a trial's streams


def half_decades(low: int, high: int) -> tuple[int, ...]:
    """``round(10^(k/2))`` for ``k = low .. high``: 100, 316, 1000, ... for ``(4, 10)``."""
    return tuple(round(10 ** (k / 2)) for k in range(low, high + 1))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChainConfig(TrialConfig):
    """The chain, privacy, GPOPE's fixed settings and the grids (stated in the chapter).

    ``tuned_steps[i]`` holds, at ``batch_sizes[i]``, GPOPE's step under each of
    ``calibrations``, then GTD2's (from ``xie2019-chain-tuning``; a test checks they are its
    argmins; empty for the tuning experiment itself)."""

    n_states: int = 40
    stay_prob: float = 0.5
    gamma: float = 0.99
    eps: float = 0.1
    delta: float = 1e-5
    batch_sizes: tuple[int, ...] = half_decades(4, 10)
    #: iterations per trajectory held: N = epochs * m
    epochs: float = 1.0
    clip: float = 0.01
    step_grid: tuple[float, ...] = tuple(float(10 ** (k / 2)) for k in range(-6, 3))
    calibrations: tuple[str, ...] = ("paper", "tightest")
    tuned_steps: tuple[tuple[float, ...], ...] = ()
    step_multipliers: tuple[float, ...] = (0.1, 1.0, 10.0)
    m_fixed: int = 1000
    ridge_scale: float = 100.0

    @property
    def mdp(self) -> ChainMDP:
        """The chain."""
        return ChainMDP(n_states=self.n_states, stay_prob=self.stay_prob, gamma=self.gamma)

    @property
    def levels(self) -> tuple[float, ...]:
        """The privacy levels of the runs: ``eps``, then ``inf`` (GTD2)."""
        return (self.eps, math.inf)


@dataclasses.dataclass(frozen=True, kw_only=True)
class IterationsConfig(ChainConfig):
    """The chain at one ``m``, with ``N = epochs * m`` for every ``epochs`` of the panel."""

    panel_m: int = 1000
    panel_epochs: tuple[float, ...] = (1.0, 3.0, 10.0, 30.0, 100.0)


def _setup(config: ChainConfig, rngs: Sequence[np.random.Generator], m: int):
    mdp = config.mdp
    features = tabular_features(mdp.n_states)
    exact = exact_td_statistics(mdp, features, normalisation="trajectories")
    sample = stack_trajectories([mdp.sample(m, named_stream(g, _DATA)) for g in rngs])
    return mdp, features, exact, sample


def _grid_runs(config: ChainConfig) -> list[Run]:
    """Every step of the grid for GPOPE under each calibration, then for GTD2."""
    return ([(step, config.eps, name) for name in config.calibrations
             for step in config.step_grid] + [(step, math.inf) for step in config.step_grid])


def _grid_mspbe(config: ChainConfig, prepared: Prepared, exact, rngs, prefix) -> np.ndarray:
    """MSPBE ``(trials, calibrations + 1, steps)`` of :func:`_grid_runs`."""
    values = runs_mspbe(config, prepared, exact, rngs, prefix, _grid_runs(config))
    return values.reshape(len(rngs), len(config.calibrations) + 1, len(config.step_grid))


def tuning_trials(config: ChainConfig,
                  rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """MSPBE ``(sizes, calibrations + 1, steps)`` per (public) trial: GPOPE under each
    calibration, then GTD2, at every step of the grid."""
    mdp, features, exact, sample = _setup(config, rngs, max(config.batch_sizes))
    out = np.empty((len(rngs), len(config.batch_sizes), len(config.calibrations) + 1,
                    len(config.step_grid)))
    whole = prepare(sample, features, mdp.gamma)
    for i, m in enumerate(config.batch_sizes):
        out[:, i] = _grid_mspbe(config, whole.first(m), exact, rngs, (_RUNS, i))
    return {"mspbe": out}


def _check_tuned(config: ChainConfig) -> None:
    width = len(config.calibrations) + 1
    if (len(config.tuned_steps) != len(config.batch_sizes)
            or any(len(row) != width for row in config.tuned_steps)):
        raise ValueError(f"tuned_steps must give {width} steps (calibrations, then GTD2) per "
                         f"batch size, got {config.tuned_steps}")
    if config.m_fixed not in config.batch_sizes:
        raise ValueError(f"m_fixed must be one of batch_sizes, got {config.m_fixed}")


def _output_perturbations(config: ChainConfig, mdp: ChainMDP, features, data, rngs,
                          i: int) -> tuple[np.ndarray, np.ndarray]:
    """DP-LSW's and DP-LSL's ``theta`` (Balle et al. 2016) at batch size index ``i``."""
    rho = mdp.start_probabilities
    summary = first_visit_data(data, mdp.gamma, mdp.n_states, 1.0).summary
    lsw_rngs = [named_stream(g, _DP_LSW, i) for g in rngs]
    lam = config.ridge_scale * np.sqrt(data.batch_shape[-1])
    lsl_rngs = [named_stream(g, _DP_LSL, i) for g in rngs]
    return (dp_lsw(summary, features, rho, config.eps, config.delta, lsw_rngs),
            dp_lsl(summary, features, rho, lam, config.eps, config.delta, lsl_rngs))


def chain_trials(config: ChainConfig,
                 rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Per trial, MSPBE of: GPOPE ``(sizes, calibrations, multipliers)``; GTD2, LSTD, DP-LSW
    and DP-LSL ``(sizes,)``; GPOPE under each calibration, then GTD2, at every step of the
    grid at ``m_fixed`` ``(calibrations + 1, steps)``."""
    _check_tuned(config)
    mdp, features, exact, sample = _setup(config, rngs, max(config.batch_sizes))
    n, sizes, cals = len(rngs), len(config.batch_sizes), len(config.calibrations)
    out = {"gpope": np.empty((n, sizes, cals, len(config.step_multipliers))),
           **{name: np.empty((n, sizes)) for name in ("gtd2", "lstd", "dp_lsw", "dp_lsl")}}
    whole = prepare(sample, features, mdp.gamma)  # the smaller data sets are its first m
    for i, m in enumerate(config.batch_sizes):
        data, prepared, table = sample.first(m), whole.first(m), RunTable()
        columns = [[table.add(factor * config.tuned_steps[i][c], config.eps, name)
                    for factor in config.step_multipliers]
                   for c, name in enumerate(config.calibrations)]
        gtd2 = table.add(config.tuned_steps[i][-1], math.inf)
        values = table.compute(config, prepared, exact, rngs, (_RUNS, i))
        out["gpope"][:, i] = values[:, columns]
        out["gtd2"][:, i] = values[:, gtd2]
        out["lstd"][:, i] = mspbe(prepared_least_squares(prepared, min_norm=True), *exact)
        lsw, lsl = _output_perturbations(config, mdp, features, data, rngs, i)
        out["dp_lsw"][:, i], out["dp_lsl"][:, i] = mspbe(lsw, *exact), mspbe(lsl, *exact)
    out["step_sweep"] = _grid_mspbe(config, whole.first(config.m_fixed), exact, rngs,
                                    (_SWEEP,))
    return out


def iterations_trials(config: IterationsConfig,
                      rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """MSPBE ``(panel_epochs, calibrations + 1, steps)`` per trial at ``m = panel_m``: GPOPE
    under each calibration (its noise calibrated for each ``N``), then GTD2, at every step
    of the grid, ``N = epochs * m``; and LSTD's ``()``."""
    mdp, features, exact, sample = _setup(config, rngs, config.panel_m)
    prepared = prepare(sample, features, mdp.gamma)
    values = np.stack([_grid_mspbe(dataclasses.replace(config, epochs=epochs), prepared,
                                   exact, rngs, (_PANEL, k))
                       for k, epochs in enumerate(config.panel_epochs)], axis=1)
    return {"mspbe": values,
            "lstd": mspbe(prepared_least_squares(prepared, min_norm=True), *exact)}


def tuned(result: dict[str, np.ndarray], step_grid: Sequence[float]
          ) -> tuple[tuple[float, ...], ...]:
    """The ``tuned_steps`` of the private runs from a ``xie2019-chain-tuning`` result: per
    batch size, the step with the least mean public MSPBE under each calibration, then
    GTD2's."""
    return tuned_steps(result["mspbe"], step_grid)


_SMOKE = dict(eps=1.0, batch_sizes=(200, 400), epochs=0.25, step_grid=(0.1, 1.0), m_fixed=200)

TUNING = register(Experiment(
    id="xie2019-chain-tuning",
    title="Xie et al. (2019), chain: GPOPE and GTD2 step sizes tuned on public data",
    chapter="book/xie2019/chain-experiments.ipynb",
    configs={
        "smoke": ChainConfig(n_trials=2, root_seed=7, batch_size=2, **_SMOKE),
        "paper": ChainConfig(n_trials=10, root_seed=7, batch_size=5),
    },
    run_trials=tuning_trials))

CHAIN = register(Experiment(
    id="xie2019-chain",
    title="Xie et al. (2019), Fig. 1 and App. Fig. 5: GPOPE, DP-LSW and DP-LSL on the chain",
    chapter="book/xie2019/chain-experiments.ipynb",
    configs={
        "smoke": ChainConfig(n_trials=3, root_seed=2019, batch_size=2,
                             tuned_steps=((0.1, 0.1, 1.0),) * 2, **_SMOKE),
        # tuned_steps: tuned(xie2019-chain-tuning) (tested), as half-decade exponents
        "paper": ChainConfig(n_trials=100, root_seed=2019, batch_size=5, tuned_steps=tuple(
            tuple(float(10 ** (k / 2)) for k in row)
            for row in ((-5, -4, 1), (-3, -4, 1), (-2, -3, 1), (-2, -3, 1), (-2, -4, 1),
                        (-2, -4, 1), (-2, -4, 1)))),
    },
    run_trials=chain_trials, after=(TUNING.id,)))


def _tightest_twice(steps: tuple[tuple[float, ...], ...]) -> tuple[tuple[float, ...], ...]:
    """Rows ``(paper, tightest, GTD2)`` of tuned steps as ``(tightest, tightest, GTD2)``: the
    PLD's runs at RDP's step (not tuned for it), so that only the noise differs."""
    return tuple((row[1], row[1], row[2]) for row in steps)


PLD = register(Experiment(
    id="xie2019-chain-pld",
    title="Xie et al. (2019), chain: GPOPE at RDP's and at the sound PLD's sigma",
    chapter="book/xie2019/privacy-analysis.ipynb",
    configs={
        "smoke": dataclasses.replace(CHAIN.configs["smoke"], calibrations=("tightest", "pld")),
        # xie2019-chain's first 25 of its 100 trials (353 CPU s on a loaded machine)
        "paper": dataclasses.replace(
            CHAIN.configs["paper"], n_trials=25, calibrations=("tightest", "pld"),
            tuned_steps=_tightest_twice(CHAIN.configs["paper"].tuned_steps)),
    },
    run_trials=chain_trials, after=(TUNING.id,)))

ITERATIONS = register(Experiment(
    id="xie2019-chain-iterations",
    title="Xie et al. (2019), chain: MSPBE against the number of iterations N at m = 1000",
    chapter="book/xie2019/chain-experiments.ipynb",
    configs={
        "smoke": IterationsConfig(n_trials=2, root_seed=2021, batch_size=2, panel_m=200,
                                  panel_epochs=(0.25, 1.0), **_SMOKE),
        # 20 trials: 27 runs of up to N = 100 m each (see the chapter)
        "paper": IterationsConfig(n_trials=20, root_seed=2021, batch_size=10),
    },
    run_trials=iterations_trials))
