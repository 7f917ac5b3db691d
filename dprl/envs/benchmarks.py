"""Speed workloads of the book's environments for ``python -m dprl bench``
(:mod:`dprl.bench`): the vectorised chain and Mountain Car against stepping Gymnasium, and
the HIV treatment integrator (Ernst et al. 2006) against scipy and its previous
implementation (:func:`previous_hiv_integrator`, also the reference of tests/test_hiv.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import gymnasium
import numpy as np

from dprl.benchmarking import Benchmark
from dprl.envs import CHAIN_ID, ChainMDP, hiv_model
from dprl.envs.episodes import UniformPolicy
from dprl.envs.hiv import HIVTreatmentMDP
from dprl.envs.mountain_car import GYMNASIUM_ID, MountainCar


def _chain_vectorised(n: int) -> object:
    return ChainMDP().sample(n, np.random.default_rng(0))


def _chain_gymnasium(n: int) -> object:
    env = gymnasium.make(CHAIN_ID)
    env.reset(seed=0)
    for _ in range(n):
        env.reset()
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(0)
            done = terminated or truncated
    return env


def _mountain_car_vectorised(n: int) -> object:
    return MountainCar().simulate(n, UniformPolicy(3), np.random.default_rng(0))


def _mountain_car_gymnasium(n: int) -> object:
    env, rng = gymnasium.make(GYMNASIUM_ID), np.random.default_rng(0)
    env.reset(seed=0)
    for _ in range(n):
        env.reset()
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(int(rng.integers(3)))
            done = terminated or truncated
    return env


_HIV_STEPS = 10


def _hiv_plan(n: int) -> np.ndarray:
    """The same random treatment plans ``(n, 10)`` for both HIV timings."""
    return np.random.default_rng(0).integers(4, size=(n, _HIV_STEPS))


def _hiv_vectorised(n: int) -> object:
    return HIVTreatmentMDP().simulate_actions(_hiv_plan(n))


def _hiv_scipy(n: int) -> object:
    return HIVTreatmentMDP().simulate_actions_reference(_hiv_plan(n), "LSODA")


def _previous_invert(A: np.ndarray) -> np.ndarray:
    """The HIV integrator's 6 x 6 inverses before the sparse elimination: Gauss-Jordan on
    the diagonal with a dense rank-one update per pivot (the same bits)."""
    inverse, smallest_pivot = A.copy(), np.full(A.shape[2], np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        for c in range(6):
            pivot = inverse[c, c].copy()
            smallest_pivot = np.fmin(smallest_pivot, np.abs(pivot))
            inverse[c, c] = 1.0
            inverse[c] /= pivot
            factors = inverse[:, c].copy()
            factors[c] = 0.0
            inverse[:, c] = 0.0
            inverse[c, c] = 1.0 / pivot
            inverse -= factors[:, None] * inverse[c][None]
    fallback = ~(smallest_pivot >= hiv_model._MIN_PIVOT)
    if fallback.any():
        inverse[:, :, fallback] = hiv_model._pivoted_inverse(A[:, :, fallback])
    return inverse


def _previous_log_rhs(y: np.ndarray, rates: tuple[np.ndarray, ...], p) -> np.ndarray:
    """The log-model before the in-place evaluation: one temporary per operation."""
    t1, t2, i1, i2, v, e = np.exp(y)
    u1, u2, production = rates
    u1v, u2v, infected = u1 * v, u2 * v, i1 + i2
    g = np.empty(y.shape)
    g[0] = p.lambda1 / t1 - p.d1 - u1v
    g[1] = p.lambda2 / t2 - p.d2 - u2v
    g[2] = u1v * t1 / i1 - p.delta - p.m1 * e
    g[3] = u2v * t2 / i2 - p.delta - p.m2 * e
    g[4] = production * infected / v - p.c - p.rho1 * u1 * t1 - p.rho2 * u2 * t2
    g[5] = (p.lambda_e / e + p.b_e * infected / (infected + p.k_b)
            - p.d_e * infected / (infected + p.k_d) - p.delta_e)
    return g


#: The integrator's pieces before the speed-up (sparse elimination, matrices filled on the
#: Jacobian's pattern, in-place log-model, blocks of patients): the previous implementation.
_PREVIOUS_INTEGRATOR = {"_invert": _previous_invert, "_log_rhs": _previous_log_rhs,
                        "_NONZERO": tuple((i, j) for i in range(6) for j in range(6)),
                        "_BLOCK": 2**62}


@contextmanager
def previous_hiv_integrator() -> Iterator[None]:
    """Within the block, :func:`dprl.envs.hiv_model.integrate` runs its previous
    implementation (dense Gauss-Jordan, dense ``I - h J``, one temporary per operation, all
    patients in one block): the reference of bench ``hiv-integrator-speed`` (same bits)."""
    saved = {name: getattr(hiv_model, name) for name in _PREVIOUS_INTEGRATOR}
    try:
        for name, value in _PREVIOUS_INTEGRATOR.items():
            setattr(hiv_model, name, value)
        yield
    finally:
        for name, value in saved.items():
            setattr(hiv_model, name, value)


def _hiv_previous(n: int) -> object:
    with previous_hiv_integrator():
        return _hiv_vectorised(n)


#: The benchmarks of this module, for :data:`dprl.bench.BENCHMARKS`.
BENCHMARKS = (
    Benchmark("chain-sampler", "40-state chain trajectories: ChainMDP.sample (numpy, all at once) "
              "vs stepping the Gymnasium env", "trajectories", _chain_vectorised,
              _chain_gymnasium, size=20_000, quick_size=200),
    Benchmark("mountain-car", "MountainCar-v0 episodes under the uniform policy: the numpy twin "
              "(all cars at once, bit-identical dynamics) vs stepping the Gymnasium env",
              "episodes", _mountain_car_vectorised, _mountain_car_gymnasium, size=1000,
              quick_size=20),
    Benchmark("hiv-integrator", f"HIV treatment ODE (Ernst et al. 2006), {_HIV_STEPS} steps of 5 "
              "days under random plans: the vectorised extrapolated linearly-implicit Euler "
              "(all patients at once, tol 1e-8) vs scipy's LSODA per patient (rtol 1e-10); "
              "they agree to about 1e-7 relative", "patients", _hiv_vectorised, _hiv_scipy,
              size=200, quick_size=4, repeats=1),
    Benchmark("hiv-integrator-speed", f"HIV treatment ODE (Ernst et al. 2006), {_HIV_STEPS} "
              "steps of 5 days under random plans: the integrator (Gauss-Jordan skipping the "
              "structural zeros of I - h J, in-place log-model, blocks of 1024 patients) vs "
              "its previous implementation in the same process (same bits)", "patients",
              _hiv_vectorised, _hiv_previous, size=5000, quick_size=50, repeats=1),
)
