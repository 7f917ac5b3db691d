"""Experiment of the Xie et al. (2019) utility chapter: does a diminishing step beat a constant
one "in the long term" (Sec. 6, after Theorem 3)?

Exact expected squared error ``E||xi_{N+1}||^2`` of the unclipped GPOPE recursion (C.1) by the
second-moment recursion (:class:`~dprl.xie2019.utility.MomentRecursion`: no Monte Carlo
error), on one data set of the utility chapter's small chain (5 states, ``p = 0.5``,
``gamma = 0.9``, uniform start, 30-step cap, tabular features, ``m = 3000`` trajectories; the
trial's generator samples it). For each ``eps`` and ``N``, the noise ``h sigma`` (``h = 1``) is
GPOPE's calibration for ``(eps, delta)`` by the tightest sound accountant
(:func:`~dprl.xie2019.tightest_sigma`), and:

- the *constant* step is the best of ``step_grid`` for that ``N`` (closed form);
- the *diminishing* schedule is ``beta_i = beta_0 / (1 + i / t_0)``, ``i = 0..N-1``, with
  ``beta_0`` that best constant step and ``t_0`` each of ``t0_fractions`` times ``N``;
- Theorem 3's schedule ``eta / (lambda_min(Q) (i + i_0))`` shifted to start at Lemma 2's
  largest step ``1 / lambda_max(Q)`` (``i_0 = eta lambda_max / lambda_min``, ``eta = 2``);
- Theorem 2's step ``beta = N^(-1/2)`` (``eta = 1``, ``k = 1/2``, the chapter's) for reference.

Deterministic given the data set: the recursion is exact, so a trial is one data set.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from dprl.envs import ChainMDP
from dprl.engine.registry import Experiment, TrialConfig, register
from dprl.features import tabular_features
from dprl.xie2019 import tightest_sigma
from dprl.xie2019.baselines import episode_statistics
from dprl.xie2019.utility import MomentRecursion, lemma2_eigenvalues


@dataclasses.dataclass(frozen=True, kw_only=True)
class StepScheduleConfig(TrialConfig):
    """The small chain, the privacy levels, the iteration counts and the two step grids."""

    n_states: int = 5
    stay_prob: float = 0.5
    gamma: float = 0.9
    horizon: int = 30
    m: int = 3000
    epsilons: tuple[float, ...] = (0.1, 1.0, 10.0)
    delta: float = 1e-5
    iterations: tuple[int, ...] = (1_000, 10_000, 100_000, 1_000_000)
    step_grid: tuple[float, ...] = tuple(float(10 ** (k / 10)) for k in range(-60, 6))
    t0_fractions: tuple[float, ...] = (1e-3, 1e-2, 1e-1, 1.0)
    #: Theorem 3's eta for the shifted schedule eta / (lambda_min (i + i0))
    eta: float = 2.0

    @property
    def mdp(self) -> ChainMDP:
        """The small chain."""
        return ChainMDP(n_states=self.n_states, stay_prob=self.stay_prob, gamma=self.gamma,
                        horizon=self.horizon)


def _schedules(b0: np.ndarray, n: np.ndarray, t0: np.ndarray) -> np.ndarray:
    """``(max N, columns)``: column ``j`` is ``b0_j / (1 + i / t0_j)``, ``i = 0..n_j - 1``,
    then zeros (which leave the moments unchanged)."""
    i = np.arange(n.max(), dtype=float)[:, None]
    return np.where(i < n, b0 / (1 + i / t0), 0.0)


def schedule_trials(config: StepScheduleConfig,
                    rngs: Sequence[np.random.Generator]) -> dict[str, np.ndarray]:
    """Per trial (data set), over ``(eps, N)``: ``sigma`` (and whether dp-accounting
    calibrated it), the best constant step and its
    error, Theorem 2's step's error, the diminishing schedules' errors ``(eps, N, t0s)``, the
    shifted Theorem 3 schedule's error; the error over the step grid ``(eps, N, steps)``;
    ``E||xi_1||^2`` (theta = w = 0) and ``lambda_min(Q)``, ``lambda_max``."""
    mdp = config.mdp
    features = tabular_features(mdp.n_states)
    n = np.array(config.iterations)
    fractions = np.array(config.t0_fractions)
    out: dict[str, list] = {}
    for rng in rngs:
        data = mdp.sample(config.m, rng)
        eigen = lemma2_eigenvalues(*episode_statistics(data, features, mdp.gamma)[::2])
        lam, lam_max = eigen["min_real"], eigen["max_modulus"]
        recursion = MomentRecursion(data, features, mdp.gamma)
        sigma = np.array([[tightest_sigma(eps, config.delta, int(k), config.m) for k in n]
                          for eps in config.epsilons])
        grid = np.array([[[recursion.constant_step_error(step, int(k), s) for step in
                           config.step_grid] for k, s in zip(n, row)] for row in sigma])
        best = np.asarray(config.step_grid)[grid.argmin(axis=-1)]
        theorem2 = np.array([[recursion.constant_step_error(float(k) ** -0.5, int(k), s)
                              for k, s in zip(n, row)] for row in sigma])
        # columns (eps, N, candidate): t0 = fraction * N from the best constant step, then
        # Theorem 3's eta / (lambda_min (i + i0)) from Lemma 2's largest step 1 / lambda_max
        shape = best.shape + (fractions.size + 1,)
        b0 = np.concatenate([np.repeat(best[..., None], fractions.size, axis=-1),
                             np.full(best.shape + (1,), 1 / lam_max)], axis=-1)
        lengths = np.broadcast_to(n[:, None], shape)
        t0 = np.concatenate([np.broadcast_to(n[:, None] * fractions, shape[:-1] + (
            fractions.size,)), np.full(best.shape + (1,), config.eta * lam_max / lam)], axis=-1)
        errors = recursion.error_after(
            _schedules(b0.ravel(), lengths.ravel(), t0.ravel()),
            np.repeat(sigma.ravel(), shape[-1])).reshape(shape)
        for key, value in (("sigma", sigma),
                           ("grid_error", grid), ("best_step", best),
                           ("constant_error", grid.min(axis=-1)), ("theorem2_error", theorem2),
                           ("diminishing_error", errors[..., :-1]),
                           ("theorem3_shifted_error", errors[..., -1]),
                           ("start_error", recursion.start_error),
                           ("lambda_min", lam), ("lambda_max", lam_max)):
            out.setdefault(key, []).append(value)
    return {key: np.array(value) for key, value in out.items()}


SCHEDULES = register(Experiment(
    id="xie2019-theorem3-schedules",
    title="Xie et al. (2019), Sec. 6: diminishing against the best constant step, exact "
          "expected error up to N = 10^6",
    chapter="book/xie2019/utility.ipynb",
    configs={
        "smoke": StepScheduleConfig(n_trials=1, root_seed=2606, batch_size=1, m=300,
                                    epsilons=(1.0,), iterations=(100, 300),
                                    step_grid=(0.01, 0.1), t0_fractions=(0.1, 1.0)),
        "paper": StepScheduleConfig(n_trials=1, root_seed=2606, batch_size=1),
    },
    run_trials=schedule_trials))
