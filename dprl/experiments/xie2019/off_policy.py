"""Pieces shared by the continuous-state experiments of Xie et al. (2019, Sec. 7) (Mountain
Car, HIV): GPOPE / GTD2 runs at constant steps, each on its own named stream, scored by the
MSPBE against reference statistics, and the steps tuned on public data.

A config passed here carries ``epochs`` (``N = epochs * m`` iterations), ``clip`` (the
clipping bound ``h``), ``delta`` and ``levels`` (the privacy levels of the runs, ``inf`` for
GTD2). Steps lie on the half-decade grid ``10^(k/2)`` so that they can name streams.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from dprl.policy_evaluation import mspbe
from dprl.seeding import named_stream
from dprl.xie2019 import Prepared, gpope_runs
from dprl.xie2019.privacy import CALIBRATIONS


class RunSettings(Protocol):
    """The GPOPE settings of an experiment config (see the module docstring)."""

    epochs: float
    clip: float
    delta: float

    @property
    def levels(self) -> tuple[float, ...]:
        """The privacy levels of the runs (``inf``: GTD2)."""


def step_key(step: float) -> int:
    """A step's half-decade exponent, offset to be non-negative (steps are ``10^(k/2)``)."""
    exponent = 2 * math.log10(step)
    if abs(exponent - round(exponent)) > 1e-9 or not -100 <= exponent < 100:
        raise ValueError(f"steps must be powers 10^(k/2) with |k| < 100, got {step}")
    return round(exponent) + 100


#: A run: ``(step, eps)`` (the book's calibration, ``"book"``) or ``(step, eps, calibration)``
#: with ``calibration`` one of :data:`~dprl.xie2019.privacy.CALIBRATIONS`.
Run = tuple


def _calibration(run: Run) -> str:
    return run[2] if len(run) == 3 else "book"


def _stream_key(config: RunSettings, run: Run) -> tuple[int, ...]:
    """The last names of a run's stream: (level index, step key[, calibration index])."""
    key = (config.levels.index(run[1]), step_key(run[0]))
    return (*key, CALIBRATIONS.index(run[2])) if len(run) == 3 else key


def run_thetas(config: RunSettings, prepared: Prepared, rngs: Sequence[np.random.Generator],
               prefix: tuple[int, ...], runs: Sequence[Run]) -> np.ndarray:
    """GPOPE's released ``theta`` (Xie et al. 2019, Algorithm 1; GTD2 at ``eps = inf``)
    ``(trials, len(runs), n)`` for each run ``(step, eps[, calibration])`` of ``runs`` on each
    trial's data set of ``prepared``, ``N = epochs * m`` iterations, all in one loop. Run
    ``(step, eps, calibration)`` of trial ``g`` draws from ``named_stream(g, *prefix, level
    index, step_key(step), calibration index)`` (a two-entry run: without the last name), so
    the same run gives the same bits wherever it is computed. A run that diverges (GTD2 at
    too large a step) gives non-finite entries."""
    if any(len(run) not in (2, 3) for run in runs):
        raise ValueError(f"runs must be (step, eps) or (step, eps, calibration), got {runs}")
    keys = [_stream_key(config, run) for run in runs]
    streams = [named_stream(rng, *prefix, *key) for rng in rngs for key in keys]
    with np.errstate(over="ignore", invalid="ignore"):
        theta, _ = gpope_runs(prepared, np.repeat(np.arange(len(rngs)), len(runs)),
                              [run[0] for _ in rngs for run in runs],
                              max(1, round(config.epochs * prepared.m)), config.clip,
                              [run[1] for _ in rngs for run in runs], config.delta, streams,
                              calibration=[_calibration(run) for _ in rngs for run in runs])
    return theta.reshape(len(rngs), len(runs), -1)


def scored(theta: np.ndarray, exact: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
    """MSPBE (Sutton et al. 2009; Xie et al. 2019, Eq. 2.1) of every ``theta`` ``(..., n)``
    under the reference ``exact = (A, b, C)``; ``inf`` for a diverged run (``theta`` not
    finite, or so large that its MSPBE overflows)."""
    finite = np.isfinite(theta).all(axis=-1)
    values = np.full(finite.shape, np.inf)
    if finite.any():
        with np.errstate(over="ignore", invalid="ignore"):
            values[finite] = mspbe(theta[finite], *exact)
    return np.where(np.isnan(values), np.inf, values)


def runs_mspbe(config: RunSettings, prepared: Prepared, exact, rngs, prefix: tuple[int, ...],
               runs: Sequence[Run]) -> np.ndarray:
    """MSPBE ``(trials, len(runs))`` of the runs of :func:`run_thetas`."""
    return scored(run_thetas(config, prepared, rngs, prefix, runs), exact)


class RunTable:
    """Distinct runs ``(step, eps[, calibration])`` at one batch size, each computed once."""

    def __init__(self) -> None:
        self.runs: dict[Run, int] = {}

    def add(self, step: float, eps: float, calibration: str | None = None) -> int:
        """The column of run ``(step, eps[, calibration])`` (added if new). GTD2 (``eps =
        inf``, neither clipped nor noised) is one run ``(step, inf)`` whatever the
        calibration."""
        plain = calibration is None or math.isinf(eps)
        run = (step, eps) if plain else (step, eps, calibration)
        return self.runs.setdefault(run, len(self.runs))

    def tuned(self, steps, levels: Sequence[float], calibrations: Sequence[str]) -> np.ndarray:
        """Columns ``(calibrations, levels)`` of the runs at the tuned ``steps[c][k]``."""
        return np.array([[self.add(step, eps, calibration) for step, eps in zip(row, levels)]
                         for row, calibration in zip(steps, calibrations)])

    def grid(self, step_grid: Sequence[float], levels: Sequence[float],
             calibrations: Sequence[str]) -> np.ndarray:
        """Columns ``(calibrations, levels, steps)`` of every step of ``step_grid`` at every
        level under every calibration."""
        return np.array([[[self.add(step, eps, calibration) for step in step_grid]
                          for eps in levels] for calibration in calibrations])

    def compute(self, config: RunSettings, prepared: Prepared, exact, rngs,
                prefix: tuple[int, ...]) -> np.ndarray:
        """MSPBE ``(trials, runs)`` of every run added, in the order added."""
        return runs_mspbe(config, prepared, exact, rngs, prefix, list(self.runs))


def check_calibrations(calibrations: Sequence[str]) -> None:
    """At least one calibration, each a name of :data:`~dprl.xie2019.privacy.CALIBRATIONS`."""
    if not calibrations or not set(calibrations) <= set(CALIBRATIONS):
        raise ValueError(f"calibrations must be names of {CALIBRATIONS}, got {calibrations}")


def check_tuned_steps(name: str, steps, sizes: int, calibrations: int, levels: int) -> None:
    """Tuned steps ``(sizes, calibrations, levels)`` (the last level GTD2's), with the same
    GTD2 step under every calibration of a size."""
    shape = (sizes, calibrations, levels)
    if np.shape(steps) != shape or any(len({row[-1] for row in size}) != 1 for size in steps):
        raise ValueError(f"{name} must give one step per batch size, calibration and level "
                         f"{shape}, the same GTD2 step under every calibration, got {steps}")


def tuned_steps(values: np.ndarray, step_grid: Sequence[float]) -> tuple:
    """The step of the grid with the least mean MSPBE over the public trials, for every
    setting: ``values`` is ``(trials, *settings, steps)`` (e.g. ``settings = (sizes,
    levels)``); returns nested tuples of shape ``settings``. Diverged runs (``inf``) are never
    chosen unless every step diverged."""
    grid = np.asarray(step_grid, dtype=float)
    values = np.asarray(values, dtype=float)
    if values.ndim < 3 or values.shape[-1] != grid.size:
        raise ValueError(f"values must be (trials, *settings, {grid.size} steps), got "
                         f"{values.shape}")
    return _nested(grid[values.mean(axis=0).argmin(axis=-1)])


def _nested(array: np.ndarray) -> tuple:
    """An array as nested tuples of floats."""
    if array.ndim == 1:
        return tuple(float(v) for v in array)
    return tuple(_nested(row) for row in array)


__all__ = ["Run", "RunSettings", "RunTable", "check_calibrations", "check_tuned_steps",
           "run_thetas", "runs_mspbe", "scored", "step_key", "tuned_steps"]
