"""Xie, Thomas & Miklau (2019), Sec. 7, Fig. 4: off-policy GPOPE on the HIV simulator.

The evaluated policy is greedy in the Q learned by fitted Q iteration and the behaviour is the
softmax of that Q (:mod:`dprl.experiments.xie2019.hiv_policy`); episodes are the paper's (Ernst et al.
2006): 200 steps of 5 days from the unhealthy steady state, gamma = 0.98. A data set is ``m``
behaviour patients, simulated all at once.

- Value features: :func:`dprl.envs.hiv_features.value_features` (order-2 squashed Fourier
  basis on ``log10`` T1, V, E; 10 features, each in ``[-1, 1]``) decorrelated on public data
  (:class:`dprl.features.DecorrelatedFeatures` with the ``C`` of the reference sample), so
  that ``C`` is near the identity on every data set instead of having condition number ~1e4.
- ``xie2019-hiv-tuning``: the constant step of GPOPE at every privacy level and calibration,
  and of GTD2, chosen on *public* data (another root seed) for every batch size.
- ``xie2019-hiv``: GPOPE at every level under both calibrations, GTD2 (same ``N``) and
  WIS-LSTD against ``m``; their MSPBE, their estimate of the value of the start state, the
  conditioning of ``C`` on every data set, the behaviour's importance ratios, GPOPE's noise,
  and an N panel (GTD2 and GPOPE for ``N = m .. 30 m`` at one ``m``).

GPOPE runs ``N = epochs * m`` iterations with clipping bound ``h = clip`` in reward units
(rewards are ~1e8 per step under the evaluated policy; the per-trajectory gradients' median
norm is ~3e7 on public data, so clipping changes most updates) and the noise calibrated for
that ``N`` by the paper's Lemma 1 (``"paper"``, sensitivity ``h``) and by the tightest sound
accountant (``"tightest"``, WBK Thm. 27, sensitivity ``2h``). Every run (batch size, level,
step, calibration) draws from its own named stream of the trial. The MSPBE is taken under
``A, b, C`` (Eq. 2.1) of ``reference_episodes`` public behaviour episodes
(``reference_seed``), the sample that also decorrelates the features.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from dprl.envs.episodes import Episodes, feature_table
from dprl.envs.hiv import HIVTreatmentMDP
from dprl.experiments.xie2019.hiv_data import (REFERENCE, Reference, behaviour_data, hiv_mdp,
                                               reference)
from dprl.experiments.xie2019.hiv_policy import BEHAVIOUR_TEMPERATURE, POLICY
from dprl.experiments.xie2019.off_policy import (RunTable, check_calibrations, check_tuned_steps,
                                                 run_thetas, scored, tuned_steps)
from dprl.engine.registry import Experiment, TrialConfig, register
from dprl.policy_evaluation import mspbe
from dprl.seeding import named_stream
from dprl.xie2019 import Prepared, prepare
from dprl.xie2019.gpope import gradient_norms
from dprl.xie2019.baselines import episode_statistics, wis_lstd
from dprl.xie2019.privacy import calibrated_sigma, lemma1_sigma, tightest_epsilon

_DATA, _RUN, _PANEL = 0, 2, 3  # first names of a trial's data, run and N-panel streams


@dataclasses.dataclass(frozen=True, kw_only=True)
class HIVConfig(TrialConfig):
    """Privacy, GPOPE, the grids and the behaviour (stated in the chapter).

    Every GPOPE run is calibrated by each of ``calibrations``
    (:func:`~dprl.xie2019.privacy.calibrated_sigma`). ``tuned_steps[i][c][k]`` is the step
    at ``batch_sizes[i]``, ``calibrations[c]`` and ``levels[k]`` (the last GTD2's, the same
    under every calibration), chosen on public data by ``xie2019-hiv-tuning``. The N panel
    runs GTD2 and GPOPE at ``panel_eps``, every step of the grid, for ``N = e m`` with ``e``
    in ``panel_epochs`` at ``m = panel_m`` (None: no panel)."""

    policy_scale: str = "paper"
    temperature: float = BEHAVIOUR_TEMPERATURE
    order: int = 2
    eps_levels: tuple[float, ...] = (1.0, 3.0, 10.0)
    delta: float = 1e-5
    calibrations: tuple[str, ...] = ("paper", "tightest")
    batch_sizes: tuple[int, ...] = (50, 100, 200, 400, 1000)
    epochs: float = 10.0
    clip: float = 1e7
    step_grid: tuple[float, ...] = tuple(float(10 ** (k / 2)) for k in range(-10, 1))
    tuned_steps: tuple[tuple[tuple[float, ...], ...], ...] = ()
    panel_m: int | None = None
    panel_epochs: tuple[float, ...] = (1.0, 3.0, 10.0, 30.0)
    panel_eps: float = 10.0
    reference_episodes: int = 2000
    reference_seed: int = 1

    @property
    def levels(self) -> tuple[float, ...]:
        """The privacy levels of the runs: ``eps_levels``, then ``inf`` (GTD2)."""
        return (*self.eps_levels, math.inf)


def _samples(config: HIVConfig, rngs: Sequence[np.random.Generator]
             ) -> tuple[Episodes, np.ndarray]:
    """Each trial's ``max(batch_sizes)`` behaviour episodes (its own stream), ``(trials, m)``,
    all trials' patients integrated at once."""
    return behaviour_data(config.policy_scale, config.temperature, max(config.batch_sizes),
                          [named_stream(g, _DATA) for g in rngs])


def _check_sizes(config: HIVConfig) -> None:
    """Increasing batch sizes (nested data sets) and known calibrations."""
    sizes = list(config.batch_sizes)
    if not sizes or sizes != sorted(set(sizes)):
        raise ValueError(f"batch_sizes must be increasing (data sets are nested: the first m "
                         f"patients), got {config.batch_sizes}")
    check_calibrations(config.calibrations)


def _prepared(config: HIVConfig, data: Episodes, ratios: np.ndarray, features):
    trajectories, table = feature_table(data, features)
    gamma = hiv_mdp(config.policy_scale).gamma
    return trajectories, table, prepare(trajectories, table, gamma, ratios)


def _grid_runs(config: HIVConfig, table: RunTable, levels: Sequence[float]) -> np.ndarray:
    """Columns ``(calibrations, levels, steps)`` of every step of the grid at ``levels``."""
    return table.grid(config.step_grid, levels, config.calibrations)


def tuning_trials(config: HIVConfig, rngs: Sequence[np.random.Generator]
                  ) -> dict[str, np.ndarray]:
    """MSPBE ``(sizes, calibrations, levels, steps)`` per (public) trial of GPOPE at each of
    ``eps_levels`` under each calibration and GTD2 (the last level, the same runs under
    every calibration), every step of the grid."""
    _check_sizes(config)
    ref = reference(config)
    data, ratios = _samples(config, rngs)
    values = np.empty((len(rngs), len(config.batch_sizes), len(config.calibrations),
                       len(config.levels), len(config.step_grid)))
    for i, m in enumerate(config.batch_sizes):
        *_, prepared = _prepared(config, data.first(m), ratios[:, :m], ref.features)
        table = RunTable()
        columns = _grid_runs(config, table, config.levels)
        values[:, i] = table.compute(config, prepared, ref.statistics, rngs,
                                     (_RUN, m))[:, columns]
    return {"mspbe": values}


def _start_values(theta: np.ndarray, features, mdp: HIVTreatmentMDP) -> np.ndarray:
    """``theta . phi(o_0)``: the estimated value of the start state (the unhealthy steady
    state), for ``theta`` ``(..., d)``."""
    phi = features(np.log10(np.array(mdp.initial_state))[None])[0]
    return (theta * phi).sum(axis=-1)


def mean_ratios(ratios: np.ndarray) -> np.ndarray:
    """Each data set's mean importance ratio, ``ratios`` ``(trials, m, H)``: summed over the
    patients at each step, then over the steps in order, so that a trial's bits depend
    neither on its batch nor on the array's layout (a mean over both axes at once sums in
    memory order, which differs between a batch and one trial alone)."""
    return np.array([np.cumsum(np.asfortranarray(r).sum(axis=0))[-1] / r.size
                     for r in ratios])


def _check_steps(config: HIVConfig) -> None:
    """Tuned steps ``(sizes, calibrations, levels)``, one GTD2 step per size; the panel's
    ``m`` one of ``batch_sizes`` and its ``eps`` one of ``eps_levels``."""
    check_tuned_steps("tuned_steps", config.tuned_steps, len(config.batch_sizes),
                      len(config.calibrations), len(config.levels))
    if config.panel_m not in (None, *config.batch_sizes) or (
            config.panel_eps not in config.eps_levels):
        raise ValueError("panel_m must be one of batch_sizes (or None) and panel_eps one of "
                         "eps_levels")


def _n_panel(config: HIVConfig, prepared: Prepared, ref: Reference, rngs,
             out: dict[str, np.ndarray]) -> None:
    """MSPBE of GTD2 ``(epochs, steps)`` and of GPOPE at ``panel_eps`` ``(epochs,
    calibrations, steps)`` for every ``N = e m`` of ``panel_epochs``: whether more (or
    fewer) iterations than the main runs' would have helped."""
    out["panel_gtd2"] = np.empty((len(rngs), len(config.panel_epochs), len(config.step_grid)))
    out["panel_gpope"] = np.empty((len(rngs), len(config.panel_epochs),
                                   len(config.calibrations), len(config.step_grid)))
    for e, epochs in enumerate(config.panel_epochs):
        table = RunTable()
        gtd2 = [table.add(step, math.inf) for step in config.step_grid]
        gpope = _grid_runs(config, table, (config.panel_eps,))[:, 0]
        values = table.compute(dataclasses.replace(config, epochs=epochs), prepared,
                               ref.statistics, rngs, (_PANEL, e))
        out["panel_gtd2"][:, e], out["panel_gpope"][:, e] = values[:, gtd2], values[:, gpope]


@lru_cache(maxsize=64)
def _paper_epsilon(eps: float, delta: float, n_iterations: int, m: int) -> float:
    """The eps at ``delta`` that the paper's sigma (Lemma 1) certifies by the tightest sound
    accountant (replace-one, sensitivity ``2h``), cached per process."""
    return tightest_epsilon(lemma1_sigma(eps, delta, n_iterations, m), delta, n_iterations, m)


def _noise(config: HIVConfig, n: int) -> dict[str, np.ndarray]:
    """The same in every trial: GPOPE's ``sigma`` ``(sizes, calibrations, eps_levels)`` (in
    units of ``h``, for ``N = epochs * m``) and :func:`_paper_epsilon` ``(sizes,
    eps_levels)``."""
    iterations = [max(1, round(config.epochs * m)) for m in config.batch_sizes]
    sigma = [[[calibrated_sigma(calibration, eps, config.delta, N, m) for eps in config.eps_levels]
              for calibration in config.calibrations]
             for N, m in zip(iterations, config.batch_sizes)]
    paper = [[_paper_epsilon(eps, config.delta, N, m) for eps in config.eps_levels]
             for N, m in zip(iterations, config.batch_sizes)]
    return {"sigma": np.tile(sigma, (n, 1, 1, 1)), "paper_epsilon": np.tile(paper, (n, 1, 1))}


def hiv_trials(config: HIVConfig, rngs: Sequence[np.random.Generator]
               ) -> dict[str, np.ndarray]:
    """Per trial, at every batch size: the MSPBE and the start-state value estimate of GPOPE
    ``(sizes, calibrations, eps_levels)`` at the tuned steps, of GTD2 (same ``N``) and
    WIS-LSTD ``(sizes,)``; the condition number of the data set's ``C`` in the decorrelated
    and the base features ``(sizes,)``; the N panel at ``panel_m`` (:func:`_n_panel`). Per
    trial ``()``: the MSPBE of ``theta = 0``; the behaviour's mean ratio and fraction of
    target actions; the fraction of the per-trajectory gradients ``||B_i||`` above ``h`` at
    ``theta = w = 0`` and at WIS-LSTD's solution (with ``w = 0``, the data set's saddle
    point), at the largest ``m``; and, the same in every trial, the noise (:func:`_noise`),
    the condition number of the reference ``C`` in the base features, the norm bound of the
    decorrelated features and the eigenvalues ``(d,)`` of the reference ``A^T C^{-1} A`` (the
    MSPBE's Hessian, which sets GTD2's rate)."""
    _check_sizes(config)
    _check_steps(config)
    ref, mdp, n = reference(config), hiv_mdp(config.policy_scale), len(rngs)
    data, ratios = _samples(config, rngs)
    sizes, shape = len(config.batch_sizes), (len(config.calibrations), len(config.eps_levels))
    out = {name: np.empty((n, sizes, *shape)) for name in ("gpope", "gpope_start")}
    out |= {name: np.empty((n, sizes)) for name in
            ("gtd2", "gtd2_start", "wis_lstd", "wis_lstd_start", "condition",
             "base_condition")}
    transform = np.linalg.inv(ref.features.transform)
    for i, m in enumerate(config.batch_sizes):
        trajectories, table, prepared = _prepared(config, data.first(m), ratios[:, :m],
                                                  ref.features)
        runs = RunTable()
        levels = runs.tuned(config.tuned_steps[i], config.levels, config.calibrations)
        theta = run_thetas(config, prepared, rngs, (_RUN, m), list(runs.runs))
        values, start = scored(theta, ref.statistics), _start_values(theta, ref.features, mdp)
        out["gpope"][:, i], out["gtd2"][:, i] = values[:, levels[:, :-1]], values[:, levels[0, -1]]
        out["gpope_start"][:, i] = start[:, levels[:, :-1]]
        out["gtd2_start"][:, i] = start[:, levels[0, -1]]
        wis = wis_lstd(trajectories, table, mdp.gamma, ratios[:, :m],
                       normalisation="trajectories")
        out["wis_lstd"][:, i] = scored(wis, ref.statistics)
        out["wis_lstd_start"][:, i] = _start_values(wis, ref.features, mdp)
        C = episode_statistics(trajectories, table, mdp.gamma, ratios[:, :m])[2]
        base_C = np.einsum("ij,djk,lk->dil", transform, C, transform)
        out["condition"][:, i] = np.linalg.cond(C)
        out["base_condition"][:, i] = np.linalg.cond(base_C)
        if m == config.panel_m:
            _n_panel(config, prepared, ref, rngs, out)
    out |= _noise(config, n)
    d = ref.features.n_features
    out["mspbe_zero"] = np.full(n, mspbe(np.zeros(d), *ref.statistics))
    out["reference_condition"] = np.full(n, ref.base_condition)
    A, _, C = ref.statistics
    out["reference_eigenvalues"] = np.tile(np.linalg.eigvalsh(A.T @ np.linalg.solve(C, A)),
                                            (n, 1))
    out["feature_bound"] = np.full(n, ref.features.norm_bound())
    for name, point in (("clipped_at_zero", np.zeros((n, d))), ("clipped_at_wis", wis)):
        norms = gradient_norms(trajectories, table, mdp.gamma, point, np.zeros((n, d)),
                               ratios[:, :m])
        out[name] = (norms > config.clip).mean(axis=-1)
    out["ratio_mean"] = mean_ratios(ratios)
    out["target_fraction"] = (ratios > 0).mean(axis=(1, 2))
    return out


_SMOKE = dict(policy_scale="smoke", eps_levels=(10.0,), batch_sizes=(5, 10), epochs=2.0,
              step_grid=(1e-2, 1e-1), reference_episodes=40)

#: tuned(xie2019-hiv-tuning) as half-decade exponents k (step 10^(k/2)): per batch size, per
#: calibration (paper, tightest), eps = 1, 3, 10 and GTD2
_TUNED_EXPONENTS = (((-6, -4, -3, -1), (-8, -10, -9, -1)), ((-8, -4, -3, -1), (-10, -5, -4, -1)),
                    ((-5, -4, -2, -1), (-8, -4, -4, -1)), ((-4, -2, -2, -1), (-5, -4, -4, -1)),
                    ((-3, -2, -1, -1), (-5, -4, -3, -1)))
_TUNED = tuple(tuple(tuple(float(10 ** (k / 2)) for k in row) for row in size)
               for size in _TUNED_EXPONENTS)

TUNING = register(Experiment(
    id="xie2019-hiv-tuning",
    title="Xie et al. (2019), HIV: GPOPE and GTD2 step sizes tuned on public data",
    chapter="book/xie2019/hiv.ipynb",
    configs={"smoke": HIVConfig(n_trials=2, root_seed=13, batch_size=2, **_SMOKE),
             "paper": HIVConfig(n_trials=10, root_seed=13, batch_size=5)},
    run_trials=tuning_trials, after=(POLICY.id, REFERENCE.id)))

HIV = register(Experiment(
    id="xie2019-hiv",
    title="Xie et al. (2019), Fig. 4: off-policy GPOPE on the HIV simulator",
    chapter="book/xie2019/hiv.ipynb",
    configs={"smoke": HIVConfig(n_trials=2, root_seed=2019, batch_size=2, panel_m=10,
                                tuned_steps=(((1e-1, 1e-1),) * 2,) * 2, **_SMOKE),
             # tuned(xie2019-hiv-tuning) (tested)
             "paper": HIVConfig(n_trials=50, root_seed=2019, batch_size=5, panel_m=400,
                                tuned_steps=_TUNED)},
    run_trials=hiv_trials, after=(POLICY.id, REFERENCE.id, TUNING.id)))


LARGE = register(Experiment(
    id="xie2019-hiv-large",
    title="Xie et al. (2019), Fig. 4 extended to m = 3000 and 10^4: off-policy GPOPE on the "
          "HIV simulator (2 trials, the steps tuned at m = 1000)",
    chapter="book/xie2019/hiv.ipynb",
    configs={"smoke": HIVConfig(n_trials=2, root_seed=2023, batch_size=1,
                                tuned_steps=(((1e-1, 1e-1),) * 2,) * 2,
                                **{**_SMOKE, "batch_sizes": (15, 20)}),
             "paper": HIVConfig(n_trials=2, root_seed=2023, batch_size=1,
                                batch_sizes=(3000, 10000), tuned_steps=_TUNED[-1:] * 2)},
    run_trials=hiv_trials, after=(POLICY.id, REFERENCE.id, TUNING.id)))


def tuned(result: dict[str, np.ndarray], step_grid: Sequence[float]
          ) -> tuple[tuple[tuple[float, ...], ...], ...]:
    """The ``tuned_steps`` of the private runs from a ``xie2019-hiv-tuning`` result."""
    return tuned_steps(result["mspbe"], step_grid)


__all__ = ["HIV", "LARGE", "TUNING", "HIVConfig", "hiv_trials", "mean_ratios", "tuned",
           "tuning_trials"]
