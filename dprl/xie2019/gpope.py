"""GPOPE (Xie, Thomas & Miklau 2019, Algorithm 1) and the per-trajectory GTD2 it perturbs
(Eq. 2.3), vectorised over independent data sets (trials).

The data are prepared once (:mod:`dprl.xie2019.prepared`: the per-trajectory ``A_i, b_i,
C_i`` of Eq. 2.2 and the primal-dual gradient ``B_i(theta, w)`` of Eq. 4.1). Each iteration
samples one trajectory per data set, computes ``B_i``, clips, perturbs and steps. Every data
set draws its trajectory indices and noise from its own generator, in chunks of iterations,
so a trial's result does not depend on the trials computed with it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dprl.envs import Trajectories
from dprl.validation import (initial_vectors, require_array, require_int,
                             require_nonnegative, require_positive, require_probability)
from dprl.xie2019.privacy import calibrated_sigma
from dprl.xie2019.prepared import Prepared, _prepared

_CHUNK = 512  # iterations whose random draws are made at once, per data set


def _steps(step_size, n_iterations: int) -> np.ndarray:
    """A constant step (scalar) or a schedule ``beta_1 .. beta_N``, all > 0."""
    steps = require_array("step_size", step_size)
    if steps.ndim == 0:
        steps = np.full(n_iterations, float(steps))
    if steps.shape != (n_iterations,) or steps.min() <= 0:
        raise ValueError(f"step_size must be > 0, a scalar or {n_iterations} values, "
                         f"got shape {steps.shape}")
    return steps


def _generators(rngs, count: int, per: str = "data set") -> list[np.random.Generator]:
    rngs = list(rngs) if isinstance(rngs, Sequence) else []
    if len(rngs) != count or not all(isinstance(g, np.random.Generator) for g in rngs):
        raise ValueError(f"rngs must be a sequence of {count} numpy Generators, one per {per}")
    return rngs


def clip_gradients(grad: np.ndarray, clips) -> np.ndarray:
    """``clip_h(B)`` (Alg. 1, line 5): each row of ``grad`` ``(R, 2n)`` scaled to norm at most
    its clip ``h`` (a scalar, or one per row)."""
    norms = np.sqrt((grad**2).sum(axis=-1))
    return grad / np.maximum(1.0, norms / clips)[:, None]


def _descend(data: Prepared, datasets: np.ndarray, schedule: np.ndarray, steps: np.ndarray,
             clips: np.ndarray | None, noise_scales: np.ndarray,
             rngs: Sequence[np.random.Generator], xi: np.ndarray,
             iterates: bool = False) -> np.ndarray:
    """``N = len(schedule)`` iterations of ``xi_r -= schedule_j steps_r (clip_{h_r}(B_i) +
    h_r sigma_r zeta)`` for every run ``r`` on data set ``datasets[r]``, one uniformly sampled
    trajectory per iteration and run, drawn with the noise from ``rngs[r]`` in chunks (a run
    with ``sigma_r = 0`` draws no noise). Each run's bits depend only on its own arguments.
    Returns the last ``xi``, or with ``iterates`` every one, ``(runs, N + 1, 2n)`` (the start
    first; the same draws and bits)."""
    n = data.n_features
    path = [xi] if iterates else None
    noisy = noise_scales > 0
    amplitudes = np.zeros(noise_scales.shape)
    if noisy.any():  # callers give every noisy run a clipping bound
        amplitudes[noisy] = clips[noisy] * noise_scales[noisy]
    for start in range(0, schedule.size, _CHUNK):
        size = min(_CHUNK, schedule.size - start)
        picks = np.stack([g.integers(data.m, size=size) for g in rngs], axis=1)
        noise = (np.stack([g.standard_normal((size, 2 * n)) if on else np.zeros((size, 2 * n))
                           for g, on in zip(rngs, noisy)], axis=1) if noisy.any() else None)
        for j in range(size):
            grad = data.gradient(datasets, picks[j], xi[:, :n], xi[:, n:])
            if clips is not None:
                grad = clip_gradients(grad, clips)
            if noise is not None:
                grad = grad + amplitudes[:, None] * noise[j]
            xi = xi - (schedule[start + j] * steps)[:, None] * grad
            if iterates:
                path.append(xi)
    return np.stack(path, axis=1) if iterates else xi


def primal_dual_descent(trajectories: Trajectories, features, gamma: float, step_size,
                        n_iterations: int, rngs: Sequence[np.random.Generator], *,
                        clip: float | None = None, noise_scale: float = 0.0, ratios=None,
                        theta0=None, w0=None, prepared: Prepared | None = None
                        ) -> tuple[np.ndarray, np.ndarray]:
    """``N`` iterations of ``(theta, w) -= beta_i (clip_h(B_i) + h zeta)``, one uniformly
    sampled trajectory per iteration and data set: GTD2 (Eq. 2.3, ``clip=None``,
    ``noise_scale=0``) or GPOPE's loop (Algorithm 1, lines 2-7; ``zeta ~ N(0, sigma^2 I)``,
    ``noise_scale = sigma``). Returns ``(theta, w)``, each ``(*datasets, n)``. ``prepared``:
    :func:`~dprl.xie2019.prepared.prepare` of the same data (checked against ``gamma``, ``m``
    and ``ratios``)."""
    gamma = require_probability("gamma", gamma)
    data = _prepared(trajectories, features, gamma, ratios, prepared)
    n_iterations = require_int("n_iterations", n_iterations)
    schedule = _steps(step_size, n_iterations)
    h = None if clip is None else require_positive("clip", clip)
    sigma = require_nonnegative("noise_scale", noise_scale)
    if sigma > 0 and h is None:
        raise ValueError("noise needs a clipping bound h (the noise is h N(0, sigma^2 I))")
    n, datasets = data.n_features, data.n_datasets
    rngs = _generators(rngs, datasets)
    xi = np.concatenate([initial_vectors("theta0", theta0, data.datasets, n),
                         initial_vectors("w0", w0, data.datasets, n)], axis=1)
    xi = _descend(data, np.arange(datasets), schedule, np.ones(datasets),
                  None if h is None else np.full(datasets, h), np.full(datasets, sigma),
                  rngs, xi)
    shape = (*data.datasets, n)
    return xi[:, :n].reshape(shape), xi[:, n:].reshape(shape)


def gradient_norms(trajectories: Trajectories, features, gamma: float, theta, w,
                   ratios=None) -> np.ndarray:
    """``||B_i(theta, w)||_2`` (Eq. 4.1) of every trajectory ``i`` of every data set at the
    point ``(theta, w)`` (``(*datasets, n)`` each, or ``(n,)`` for all), ``(*datasets, m)``:
    the fraction above ``h`` is the fraction of GPOPE's updates there that clipping changes
    (Algorithm 1, line 5)."""
    gamma = require_probability("gamma", gamma)
    data = _prepared(trajectories, features, gamma, ratios, None)
    datasets, n = data.n_datasets, data.n_features
    theta = initial_vectors("theta", theta, data.datasets, n)
    w = initial_vectors("w", w, data.datasets, n)
    every = np.arange(datasets)
    norms = np.stack([np.sqrt((data.gradient(every, np.full(datasets, i), theta, w) ** 2)
                              .sum(axis=-1)) for i in range(data.m)], axis=-1)
    return norms.reshape(*data.datasets, data.m)


def gpope(trajectories: Trajectories, features, gamma: float, step_size, n_iterations: int,
          clip: float, eps: float, delta: float, rngs: Sequence[np.random.Generator], *,
          ratios=None, theta0=None, w0=None, sensitivity: float = 2.0,
          prepared: Prepared | None = None, calibration: str = "tightest"
          ) -> tuple[np.ndarray, np.ndarray]:
    """GPOPE (Xie et al. 2019, Algorithm 1): ``(eps, delta)``-DP for data sets of ``m``
    trajectories differing in one (replace-one), with ``sigma`` calibrated from ``(eps,
    delta, N, m)`` by the tightest sound accountant
    (:func:`~dprl.xie2019.privacy.tightest_sigma`: WBK Thm. 27, clipped gradients of
    neighbours differing by ``sensitivity * h``). Returns the released ``(theta, w)``, each
    ``(*datasets, n)``. ``prepared``: :func:`~dprl.xie2019.prepared.prepare` of the same
    data, to share the preprocessing between runs. ``calibration``: ``"tightest"``, ``"book"`` (WBK Thm. 9,
    :func:`~dprl.xie2019.privacy.gpope_sigma`) or ``"paper"`` (Lemma 1, sensitivity ``h``:
    not sound; :func:`~dprl.xie2019.privacy.calibrated_sigma`)."""
    if not isinstance(trajectories, Trajectories):  # m, the data-set size, comes from them
        raise ValueError(f"trajectories must be Trajectories (episodes of batch shape "
                         f"(*datasets, m), e.g. from ChainMDP.sample), got "
                         f"{type(trajectories).__name__}")
    sigma = calibrated_sigma(calibration, eps, delta,
                             require_int("n_iterations", n_iterations),
                             trajectories.batch_shape[-1], sensitivity)
    return primal_dual_descent(trajectories, features, gamma, step_size, n_iterations, rngs,
                               clip=clip, noise_scale=sigma, ratios=ratios, theta0=theta0,
                               w0=w0, prepared=prepared)


def gpope_runs(prepared: Prepared, datasets, step_sizes, n_iterations: int, clip: float,
               eps, delta: float, rngs: Sequence[np.random.Generator], *,
               sensitivity: float = 2.0, calibration: str | Sequence[str] = "tightest",
               iterates: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``R`` independent runs of GPOPE (Xie et al. 2019, Algorithm 1) on prepared data, in
    one loop: run ``r`` works on data set ``datasets[r]`` with the constant step
    ``step_sizes[r]``, ``N`` iterations, clipping bound ``clip`` and the noise calibrated for
    ``(eps[r], delta, N, m)`` by ``calibration`` (as in :func:`gpope`; one name for every run,
    or one per run), drawing from ``rngs[r]`` alone (so a run's bits do not depend on the
    other runs). ``eps[r] = inf`` is GTD2 (Eq. 2.3): neither clipped nor noised. Returns
    ``(theta, w)``, each ``(R, n)``; with ``iterates``, every iterate of the descent, each
    ``(R, N + 1, n)`` (the start ``0`` first, the release last; the same draws and bits), from
    which a white-box auditor recovers each released noisy gradient ``(xi_{j-1} - xi_j) /
    beta``."""
    if not isinstance(prepared, Prepared):
        raise ValueError(f"prepared must come from prepare(), got {type(prepared).__name__}")
    datasets = require_array("datasets", datasets, ndim=1)
    runs = datasets.size
    if runs == 0 or np.any(datasets != np.round(datasets)) or not (
            0 <= datasets.min() and datasets.max() < prepared.n_datasets):
        raise ValueError(f"datasets must be a non-empty list of data-set indices in "
                         f"[0, {prepared.n_datasets}), got {datasets}")
    steps = require_array("step_sizes", step_sizes, shape=(runs,))
    if steps.min() <= 0:
        raise ValueError(f"step_sizes must be > 0, got min {steps.min()}")
    levels = np.broadcast_to(np.asarray(eps, dtype=float), (runs,))
    if np.any(np.isnan(levels)) or levels.min() <= 0:
        raise ValueError(f"eps must be > 0 (inf for GTD2 without privacy), got {levels}")
    n_iterations, h = require_int("n_iterations", n_iterations), require_positive("clip", clip)
    names = [calibration] * runs if isinstance(calibration, str) else list(calibration)
    if len(names) != runs:
        raise ValueError(f"calibration must be one name or {runs} names, got {len(names)}")
    settings = list(zip(levels.tolist(), names))
    calibrated = {(e, name): 0.0 if math.isinf(e) else  # once per setting, not per run
                  calibrated_sigma(name, e, delta, n_iterations, prepared.m, sensitivity)
                  for e, name in dict.fromkeys(settings)}
    sigmas = np.array([calibrated[setting] for setting in settings])
    clips = np.where(np.isinf(levels), np.inf, h)
    n = prepared.n_features
    xi = _descend(prepared, datasets.astype(np.int64), np.ones(n_iterations), steps, clips,
                  sigmas, _generators(rngs, runs, "run"), np.zeros((runs, 2 * n)),
                  bool(iterates))
    return xi[..., :n], xi[..., n:]
