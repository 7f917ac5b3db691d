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


def run_thetas(config: RunSettings, prepared: Prepared, rngs: Sequence[np.random.Generator],
               prefix: tuple[int, ...], runs: Sequence[tuple[float, float]]) -> np.ndarray:
    """GPOPE's released ``theta`` (Xie et al. 2019, Algorithm 1; GTD2 at ``eps = inf``)
    ``(trials, len(runs), n)`` for each ``(step, eps)`` of ``runs`` on each trial's data set
    of ``prepared``, ``N = epochs * m`` iterations. Run ``(step, eps)`` of trial ``g`` draws
    from ``named_stream(g, *prefix, level index, step_key(step))``, so the same run gives the
    same bits wherever it is computed. A run that diverges (GTD2 at too large a step) gives
    non-finite entries."""
    m = prepared.m
    keys = [(config.levels.index(eps), step_key(step)) for step, eps in runs]
    streams = [named_stream(rng, *prefix, *key) for rng in rngs for key in keys]
    with np.errstate(over="ignore", invalid="ignore"):
        theta, _ = gpope_runs(prepared, np.repeat(np.arange(len(rngs)), len(runs)),
                              [step for _ in rngs for step, _ in runs],
                              max(1, round(config.epochs * m)), config.clip,
                              [eps for _ in rngs for _, eps in runs], config.delta, streams)
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
               runs: Sequence[tuple[float, float]]) -> np.ndarray:
    """MSPBE ``(trials, len(runs))`` of the runs of :func:`run_thetas`."""
    return scored(run_thetas(config, prepared, rngs, prefix, runs), exact)


class RunTable:
    """Distinct ``(step, eps)`` runs at one batch size, each computed once."""

    def __init__(self) -> None:
        self.runs: dict[tuple[float, float], int] = {}

    def add(self, step: float, eps: float) -> int:
        """The column of run ``(step, eps)`` (added if new)."""
        return self.runs.setdefault((step, eps), len(self.runs))

    def compute(self, config: RunSettings, prepared: Prepared, exact, rngs,
                prefix: tuple[int, ...]) -> np.ndarray:
        """MSPBE ``(trials, runs)`` of every run added, in the order added."""
        return runs_mspbe(config, prepared, exact, rngs, prefix, list(self.runs))


def tuned_steps(values: np.ndarray, step_grid: Sequence[float]) -> tuple[tuple[float, ...], ...]:
    """The step of the grid with the least mean MSPBE over the public trials, for every batch
    size and level: ``values`` is ``(trials, sizes, levels, steps)``; returns ``sizes`` rows of
    ``levels`` steps. Diverged runs (``inf``) are never chosen unless every step diverged."""
    grid = np.asarray(step_grid, dtype=float)
    values = np.asarray(values, dtype=float)
    if values.ndim != 4 or values.shape[-1] != grid.size:
        raise ValueError(f"values must be (trials, sizes, levels, {grid.size} steps), got "
                         f"{values.shape}")
    best = grid[values.mean(axis=0).argmin(axis=-1)]
    return tuple(tuple(float(s) for s in row) for row in best)


__all__ = ["RunSettings", "RunTable", "run_thetas", "runs_mspbe", "scored", "step_key",
           "tuned_steps"]
