"""Speed benchmarks, reported as ratios against a reference run in the same process.

Each benchmark times a candidate (the vectorised code the book uses) and a reference (the
straightforward way) on the same workload and prints the throughput ratio; ratios, unlike
seconds, travel between machines. A scaling benchmark times one workload at several sizes and
prints the log-log slope of time against size, also free of the machine's speed. Either may
carry a goal, reported as met or missed. ``python -m dprl bench [name ...] [--quick]``.
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache, partial

import gymnasium
import numpy as np
import torch
from dp_accounting.rdp import rdp_privacy_accountant
from scipy.special import logsumexp

from dprl.balle2016 import dp_lsw, first_visit_data
from dprl.balle2016.chain_sampler import sample_first_visit_summaries
from dprl.control.linear_q import EpsilonGreedyPolicy
from dprl.envs import (CHAIN_ID, ChainMDP, hiv_model, mountain_car_features,
                       stack_trajectories)
from dprl.envs.episodes import (RecordingFeatures, UniformPolicy, feature_table,
                                recorded_table, stack_episodes)
from dprl.envs.hiv import HIVTreatmentMDP
from dprl.accounting import (sampled_without_replacement_gaussian_rdp,
                             sampled_without_replacement_gaussian_rdp_tight)
from dprl.accounting.logspace import log_abs_binom
from dprl.envs.mountain_car import GYMNASIUM_ID, MountainCar
from dprl.experiments.hiv import behaviour_data
from dprl.experiments.hiv_policy import BEHAVIOUR_TEMPERATURE, policy_weights
from dprl.features import tabular_features
from dprl.seeding import trial_generators
from dprl.sharma2025.dp_sgd import DPSGDConfig, expert_dp_sgd_step
from dprl.sharma2025.experts import pmin_log_probabilities
from dprl.sharma2025.offline_rl import (DiscreteCQL, ExpertTransitions, Transitions,
                                        sample_uniform, sgd_step)
from dprl.sharma2025.qnetworks import PAPER_HIDDEN, QNetwork, frozen_copy
from dprl.sharma2025.release import log_prefix_counts
from dprl.validation import require_int
from dprl.wang2019.benchmarks import (conditioning_setup, dense_conditioning, loglog_slope,
                                      ou_conditioning, query_times)
from dprl.xie2019 import gpope_runs, prepare, primal_dual_descent
from dprl.xie2019.baselines import episode_statistics, prepared_statistics
from dprl.xie2019.gpope import _Episodes
from dprl.xie2019.privacy import GPOPE_ORDERS


@dataclass(frozen=True)
class Benchmark:
    """``candidate(n)`` and ``reference(n)`` do the same work of size ``n``; ``setup(n)``, if
    given, prepares their shared input before either is timed."""

    name: str
    description: str
    unit: str
    candidate: Callable[[int], object]
    reference: Callable[[int], object]
    size: int
    quick_size: int
    repeats: int = 3
    setup: Callable[[int], object] | None = None
    goal: float | None = None  # the smallest acceptable speed-up
    at_most: bool = False  # True: ``goal`` is the largest acceptable ratio (an overhead)


@dataclass(frozen=True)
class Scaling:
    """``times(sizes)`` returns the seconds one workload takes at each size; the benchmark
    reports the log-log slope, which must stay at most ``goal``."""

    name: str
    description: str
    unit: str
    times: Callable[[Sequence[int]], Sequence[float]]
    sizes: tuple[int, ...]
    quick_sizes: tuple[int, ...]
    goal: float


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


#: DP-LSW workload: ``runs`` data sets of ``m`` chain trajectories (Balle et al. 2016, Sec. 6).
_DP_LSW_RUNS = 20
_EPS, _DELTA = 0.1, 0.1


def _dp_lsw_data(m: int):
    """The same trajectories for both DP-LSW timings, sampled once per size."""
    if m not in _DP_LSW_CACHE:
        mdp = ChainMDP()
        _DP_LSW_CACHE[m] = mdp, mdp.sample((_DP_LSW_RUNS, m), np.random.default_rng(0))
    return _DP_LSW_CACHE[m]


_DP_LSW_CACHE: dict[int, tuple] = {}


def _dp_lsw_vectorised(m: int) -> np.ndarray:
    mdp, trajectories = _dp_lsw_data(m)
    data = first_visit_data(trajectories, mdp.gamma, mdp.n_states, r_max=1.0)
    return dp_lsw(data, tabular_features(mdp.n_states), mdp.start_probabilities, _EPS, _DELTA,
                  trial_generators(0, _DP_LSW_RUNS))


def _dp_lsw_per_run_loop(m: int) -> list[np.ndarray]:
    """The straightforward way: one run at a time, one trajectory and one step at a time in
    Python for the first-visit returns, one k at a time for psi (Algorithm 1, tabular)."""
    mdp, trajectories = _dp_lsw_data(m)
    n, gamma, w = mdp.n_states, mdp.gamma, mdp.start_probabilities
    alpha = 5 * np.sqrt(2 * np.log(2 / _DELTA)) / _EPS
    beta = _EPS / (4 * (n + np.log(2 / _DELTA)))
    released = []
    for run, rng in enumerate(trial_generators(0, _DP_LSW_RUNS)):
        totals, counts = np.zeros(n), np.zeros(n)
        for x in range(m):
            length = int(trajectories.lengths[run, x])
            states, rewards = trajectories.states[run, x], trajectories.rewards[run, x]
            ret, first_return = 0.0, {}
            for t in reversed(range(length)):
                ret = rewards[t] + gamma * ret
                first_return[int(states[t])] = ret
            for s, value in first_return.items():
                totals[s] += value
                counts[s] += 1
        theta = totals / np.maximum(counts, 1)
        psi = max(np.exp(-k * beta) * sum(w[s] / max(counts[s] - k, 1) ** 2 for s in range(n))
                  for k in range(int(counts.max()) + 1))
        sigma = alpha / (1 - gamma) / np.sqrt(w.min()) * np.sqrt(psi)
        released.append(theta + sigma * rng.standard_normal(n))
    return released


_CHUNK = 20_000


def _statistics_exact(m: int) -> object:
    return sample_first_visit_summaries(ChainMDP(), [m], np.random.default_rng(0))[0]


def _statistics_simulated(m: int) -> object:
    """Simulate the trajectories (in chunks, to bound memory) and sum their statistics."""
    mdp, rng, total = ChainMDP(), np.random.default_rng(0), None
    for start in range(0, m, _CHUNK):
        trajectories = mdp.sample(min(_CHUNK, m - start), rng)
        part = first_visit_data(trajectories, mdp.gamma, mdp.n_states, r_max=1.0).summary
        total = part if total is None else total + part
    return total


#: GPOPE workload: 100 trials, each with its own data set of m chain trajectories (tabular).
_GPOPE_TRIALS, _GPOPE_M, _GPOPE_SIGMA, _GPOPE_CLIP, _GPOPE_STEP = 100, 100, 1.0, 1.0, 0.1


def _gpope_data(n_iterations: int):
    """The same data sets for both GPOPE timings (they do not depend on the size)."""
    if "gpope" not in _GPOPE_CACHE:
        mdp = ChainMDP()
        _GPOPE_CACHE["gpope"] = mdp, stack_trajectories(
            [mdp.sample(_GPOPE_M, g) for g in trial_generators(0, _GPOPE_TRIALS)])
    return _GPOPE_CACHE["gpope"]


_GPOPE_CACHE: dict[str, tuple] = {}


def _gpope_vectorised(n_iterations: int) -> tuple[np.ndarray, np.ndarray]:
    mdp, data = _gpope_data(n_iterations)
    return primal_dual_descent(data, tabular_features(mdp.n_states), mdp.gamma, _GPOPE_STEP,
                               n_iterations, trial_generators(1, _GPOPE_TRIALS),
                               clip=_GPOPE_CLIP, noise_scale=_GPOPE_SIGMA)


def _gpope_per_trial_loop(n_iterations: int) -> list[np.ndarray]:
    """Algorithm 1 as written, one trial at a time: A_i, b_i, C_i from the sampled
    trajectory's transitions (Eq. 2.2), B_i from the block matrix (Eq. 4.1), clip, noise,
    step; the same random draws as the vectorised run."""
    mdp, data = _gpope_data(n_iterations)
    Phi, n, gamma = tabular_features(mdp.n_states), mdp.n_states, mdp.gamma
    released = []
    for k, rng in enumerate(trial_generators(1, _GPOPE_TRIALS)):
        xi = np.zeros(2 * n)
        for start in range(0, n_iterations, 512):
            size = min(512, n_iterations - start)
            picks, noise = rng.integers(_GPOPE_M, size=size), rng.standard_normal((size, 2 * n))
            for j in range(size):
                i = picks[j]
                length, done = int(data.lengths[k, i]), bool(data.terminated[k, i])
                A, b, C = np.zeros((n, n)), np.zeros(n), np.zeros((n, n))
                for t in range(length):
                    phi = Phi[data.states[k, i, t]]
                    last = t == length - 1 and done
                    phi_next = np.zeros(n) if last else Phi[data.states[k, i, t + 1]]
                    A += np.outer(phi, phi - gamma * phi_next) / length
                    b += data.rewards[k, i, t] * phi / length
                    C += np.outer(phi, phi) / length
                grad = np.block([[np.zeros((n, n)), -A.T], [A, C]]) @ xi \
                    - np.concatenate([np.zeros(n), b])
                grad = grad / max(1.0, np.linalg.norm(grad) / _GPOPE_CLIP)
                xi = xi - _GPOPE_STEP * (grad + _GPOPE_CLIP * _GPOPE_SIGMA * noise[j])
        released.append(xi)
    return released


#: GPOPE calibration workload: RDP curves of one record of m = 10^4 sampled without
#: replacement at the noise multipliers a bisection visits (Xie et al. 2019, Sec. 5).
_CALIBRATION_M = 10_000


def _calibration_multipliers(n: int) -> np.ndarray:
    return np.geomspace(0.5, 50.0, n)


def _wbk9_vectorised(n: int) -> list[np.ndarray]:
    return [sampled_without_replacement_gaussian_rdp(GPOPE_ORDERS, s, 1, _CALIBRATION_M)
            for s in _calibration_multipliers(n)]


def _wbk9_per_order_loop(n: int) -> list[np.ndarray]:
    """WBK 2019, Thm. 9 as the book summed it before: one logsumexp per order."""
    curves = []
    log_gamma = -np.log(_CALIBRATION_M)
    for sigma in _calibration_multipliers(n):
        log_sums = []
        for alpha in GPOPE_ORDERS:
            j = np.arange(3, alpha + 1)
            higher = (np.log(2) + j * log_gamma + log_abs_binom(alpha, j)
                      + (j - 1) * j / (2 * sigma**2))
            second = (2 * log_gamma + log_abs_binom(alpha, 2)
                      + min(np.log(4) + np.log(np.expm1(1 / sigma**2)),
                            np.log(2) + 1 / sigma**2))
            log_sums.append(logsumexp(np.append(higher, second)))
        curves.append(np.logaddexp(0.0, log_sums) / (GPOPE_ORDERS - 1))
    return curves


_TIGHT_ORDERS = np.arange(2, 257)


def _wbk27_vectorised(n: int) -> list[np.ndarray]:
    return [sampled_without_replacement_gaussian_rdp_tight(_TIGHT_ORDERS, s, 1, _CALIBRATION_M)
            for s in _calibration_multipliers(n)]


def _wbk27_dp_accounting(n: int) -> list[np.ndarray]:
    return [rdp_privacy_accountant._compute_rdp_sample_wor_gaussian(
        1 / _CALIBRATION_M, s, [float(a) for a in _TIGHT_ORDERS])
        for s in _calibration_multipliers(n)]


#: HIV behaviour data workload (Xie et al. 2019, Sec. 7): patients per trial, policy scale.
_HIV_PATIENTS, _HIV_POLICY = 50, "smoke"


def _hiv_streams(trials: int) -> list[np.random.Generator]:
    return trial_generators(5, trials)


def _hiv_data_batched(trials: int) -> object:
    return behaviour_data(_HIV_POLICY, BEHAVIOUR_TEMPERATURE, _HIV_PATIENTS,
                          _hiv_streams(trials))


def _hiv_data_per_trial(trials: int) -> list[object]:
    """The previous way: one integration per trial (the same bits)."""
    return [behaviour_data(_HIV_POLICY, BEHAVIOUR_TEMPERATURE, _HIV_PATIENTS, g)
            for g in _hiv_streams(trials)]


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


_MC_DATA_SETS = 2
_MC_DATA_CACHE: dict[int, object] = {}


def _mountain_car_episodes(m: int):
    """``_MC_DATA_SETS`` data sets of ``m`` uniform-policy Mountain Car episodes (cached)."""
    if m not in _MC_DATA_CACHE:
        _MC_DATA_CACHE[m] = stack_episodes([MountainCar().simulate(m, UniformPolicy(3), g)
                                            for g in trial_generators(7, _MC_DATA_SETS)])
    return _MC_DATA_CACHE[m]


def _nested_sizes(m: int) -> tuple[int, ...]:
    return (m // 10, round(m / 10**0.5), m)  # xie2019-mountain-car's 1e3, 3162, 1e4


def _mountain_car_prepared_once(m: int) -> list[tuple[np.ndarray, ...]]:
    """xie2019-mountain-car's data path: the largest data set prepared once, the nested
    ones its first m, LSTD's statistics from the prepared matrices."""
    whole = prepare(*feature_table(_mountain_car_episodes(m), mountain_car_features()), 0.99)
    return [prepared_statistics(whole.first(k)) for k in _nested_sizes(m)]


def _mountain_car_prepared_per_size(m: int) -> list[tuple[np.ndarray, ...]]:
    """The previous path: feature table and preparation per batch size, LSTD's statistics
    by a second pass over the transitions."""
    statistics = []
    for k in _nested_sizes(m):
        data = feature_table(_mountain_car_episodes(m).first(k), mountain_car_features())
        prepare(*data, 0.99)
        statistics.append(episode_statistics(*data, 0.99, normalisation="trajectories"))
    return statistics


def _mountain_car_policy(features):
    """A fixed epsilon-greedy linear policy (seeded weights) on ``features`` (36 of them)."""
    return EpsilonGreedyPolicy(np.random.default_rng(3).standard_normal((3, 36)), features, 0.5)


def _mountain_car_recorded(m: int) -> np.ndarray:
    """Episodes and feature table, the rows kept from the policy's own evaluations."""
    recorder = RecordingFeatures(mountain_car_features())
    episodes = MountainCar().simulate(m, _mountain_car_policy(recorder), np.random.default_rng(0))
    return recorded_table(episodes, recorder)


def _mountain_car_recomputed(m: int) -> np.ndarray:
    """Episodes, then the feature table computed again from their observations."""
    features = mountain_car_features()
    episodes = MountainCar().simulate(m, _mountain_car_policy(features), np.random.default_rng(0))
    return feature_table(episodes, features)[1]


_TRANSITION_RUNS = 7  # the runs of one xie2019-mountain-car-large trial


@lru_cache(maxsize=1)
def _transition_draws(n: int) -> tuple:
    """Transitions of 2000 uniform-policy episodes (two data sets) and ``n`` iterations'
    picks and points of ``_TRANSITION_RUNS`` runs (cached: the benchmark's setup)."""
    data = feature_table(_mountain_car_episodes(2000), mountain_car_features())
    episodes = _Episodes.of(*data, None)
    rng = np.random.default_rng(5)
    datasets = rng.integers(_MC_DATA_SETS, size=_TRANSITION_RUNS)
    picks = rng.integers(2000, size=(n, _TRANSITION_RUNS))
    points = rng.standard_normal((n, 2, _TRANSITION_RUNS, 36))
    return episodes, datasets, picks, points


def _transition_gradients(n: int) -> list[np.ndarray]:
    """GPOPE's ``B_i`` from the transitions as the descent computes it now."""
    episodes, datasets, picks, points = _transition_draws(n)
    return [episodes.gradient(p, theta, w, 0.99, datasets)
            for p, (theta, w) in zip(picks, points)]


def _previous_transition_gradients(n: int) -> list[np.ndarray]:
    """The previous ``B_i`` from the transitions: elementwise products and sums."""
    episodes, datasets, picks, points = _transition_draws(n)
    out = []
    for picked, (theta, w) in zip(picks, points):
        phi = episodes.table[episodes.sources[datasets, picked]]
        diff = phi - 0.99 * episodes.table[episodes.nexts[datasets, picked]]
        per_step = episodes.inverse_lengths[datasets, picked]
        weight = per_step * episodes.ratios[datasets, picked]
        phi_w = (phi * w[:, None, :]).sum(axis=-1)
        a_theta = ((weight * (diff * theta[:, None, :]).sum(axis=-1))[..., None] * phi).sum(1)
        a_t_w = ((weight * phi_w)[..., None] * diff).sum(axis=1)
        c_w = ((per_step * phi_w)[..., None] * phi).sum(axis=1)
        b = ((weight * episodes.rewards[datasets, picked])[..., None] * phi).sum(axis=1)
        out.append(np.concatenate([-a_t_w, a_theta + c_w - b], axis=-1))
    return out


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


_PREFIX_LENGTH = 200


@lru_cache(maxsize=2)
def _prefix_log_probs(m: int) -> np.ndarray:
    """App. B.1 expert log probabilities ``(m, 200)`` on one trajectory (3 actions)."""
    rng = np.random.default_rng(0)
    greedy, actions = rng.integers(3, size=(m, _PREFIX_LENGTH)), rng.integers(3, size=_PREFIX_LENGTH)
    return pmin_log_probabilities(greedy, actions[None, :], 3, 0.02)


def _prefix_counts_cumulative(m: int) -> np.ndarray:
    return log_prefix_counts(_prefix_log_probs(m))


def _prefix_counts_per_prefix(m: int) -> list[float]:
    """count_tau for every prefix separately: a product over its steps for every expert,
    summed over experts (Sharma et al. 2025, Alg. 1 line 2 as written), in log space."""
    log_probs = _prefix_log_probs(m)
    return [float(logsumexp(log_probs[:, :k].sum(axis=1)))
            for k in range(1, log_probs.shape[1] + 1)]


#: DP-SGD workload: b = 256 (expected), m = 3000 experts of 20 transitions, 4-D inputs (the
#: CartPole shape), 2 actions, the paper's 2 x 256 Q-network (Sharma et al. 2025, Sec. 6).
_DP_BATCH, _DP_EXPERTS, _DP_PER_EXPERT = 256, 3000, 20


@lru_cache(maxsize=1)
def _dp_sgd_state(steps: int = 0) -> tuple:
    """Synthetic expert transitions, a CQL learner, its target, plain SGD and a generator,
    shared by the DP-SGD timings; torch on one thread."""
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    n = _DP_EXPERTS * _DP_PER_EXPERT
    transitions = Transitions(torch.randn(n, 4, generator=generator),
                              torch.randint(2, (n,), generator=generator), torch.ones(n),
                              torch.randn(n, 4, generator=generator),
                              (torch.rand(n, generator=generator) < 0.05).float())
    pool = ExpertTransitions(transitions, torch.full((_DP_EXPERTS,), _DP_PER_EXPERT))
    learner = DiscreteCQL(QNetwork(4, 2, PAPER_HIDDEN, generator=generator))
    optimizer = torch.optim.SGD(learner.parameters(), lr=1e-3)
    return pool, learner, frozen_copy(learner.q), optimizer, generator


def _dp_sgd_steps(clipping: str, steps: int) -> None:
    """``steps`` expert-level DP-SGD steps (Alg. 4, s = 1, C = 1) with ``clipping``."""
    pool, learner, target, optimizer, generator = _dp_sgd_state()
    for _ in range(steps):
        expert_dp_sgd_step(learner, target, pool, DPSGDConfig(_DP_BATCH, 1.0), optimizer,
                           generator, clipping)


def _plain_sgd_steps(steps: int) -> None:
    """``steps`` non-private steps on uniform batches of 256 (Alg. 3, line 6)."""
    pool, learner, target, optimizer, generator = _dp_sgd_state()
    for _ in range(steps):
        sgd_step(learner, target, sample_uniform(pool.transitions, _DP_BATCH, generator),
                 optimizer)


def _intel_training(cbwr: str, steps: int) -> Seconds:
    """A training trial of ``steps`` steps (:data:`dprl.vendors.TRAINING_TRIAL`) in a process
    where MKL takes Intel's code (natively on an Intel CPU, by :mod:`dprl.vendors`'s stand-in
    elsewhere) under ``MKL_CBWR=cbwr``: the seconds its steps took."""
    from dprl.vendors import INTEL, native_vendor, training_trial

    return Seconds(training_trial(steps, "portable", native_vendor() != INTEL,
                                  MKL_CBWR=cbwr)["seconds"])


@lru_cache(maxsize=1)
def _plain_step_products(_: int = 0) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """The operands of every matrix product of one plain CQL step (:func:`_plain_sgd_steps`),
    as :func:`dprl.kernels.matmul` receives them (transposed views included)."""
    import dprl.kernels

    products, real = [], dprl.kernels.matmul

    def recording(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        products.append((a.detach().numpy(), b.detach().numpy()))
        return real(a, b)

    dprl.kernels.matmul = recording
    try:
        _plain_sgd_steps(1)
    finally:
        dprl.kernels.matmul = real
    return tuple(products)


def _step_products_only(steps: int) -> None:
    """The matrix products of ``steps`` plain CQL steps and nothing else: numpy's pinned
    ``matmul`` on the recorded operands."""
    products = _plain_step_products()
    for _ in range(steps):
        for a, b in products:
            np.matmul(a, b)


_OU_QUERY_BATCH = 1000


#: The chain experiment's GPOPE workload (xie2019-chain): 5 trials of m chain trajectories,
#: 7 runs each (3 steps x 2 calibrations, GTD2), N = m iterations.
_CHAIN_TRIALS = 5


def _chain_gpope_data(m: int):
    if ("chain", m) not in _GPOPE_CACHE:
        mdp = ChainMDP()
        _GPOPE_CACHE[("chain", m)] = mdp, stack_trajectories(
            [mdp.sample(m, g) for g in trial_generators(2, _CHAIN_TRIALS)])
    return _GPOPE_CACHE[("chain", m)]


def _chain_gpope(m: int, tabular: bool) -> np.ndarray:
    """Preparation and descent of the chain experiment's runs at ``m`` (one size)."""
    mdp, data = _chain_gpope_data(m)
    prepared = prepare(data, tabular_features(mdp.n_states), mdp.gamma, tabular=tabular)
    per_trial = ["paper"] * 3 + ["tightest"] * 3 + ["tightest"]  # the last: GTD2 (eps = inf)
    runs = len(per_trial)
    theta, _ = gpope_runs(prepared, np.repeat(np.arange(_CHAIN_TRIALS), runs),
                          np.full(_CHAIN_TRIALS * runs, 0.01), m, 0.01,
                          np.tile([0.1] * (runs - 1) + [np.inf], _CHAIN_TRIALS), 1e-5,
                          trial_generators(3, _CHAIN_TRIALS * runs),
                          calibration=per_trial * _CHAIN_TRIALS)
    return theta


def _ou_query_times(sizes: Sequence[int]) -> np.ndarray:
    """Prop. 9's workload at each size, the fastest of 3 timings (Wang & Hegde 2019)."""
    return np.min([query_times(sizes, _OU_QUERY_BATCH, seed) for seed in range(3)], axis=0)


BENCHMARKS: dict[str, Benchmark | Scaling] = {b.name: b for b in [
    Benchmark("chain-sampler", "40-state chain trajectories: ChainMDP.sample (numpy, all at once) "
              "vs stepping the Gymnasium env", "trajectories", _chain_vectorised,
              _chain_gymnasium, size=20_000, quick_size=200),
    Benchmark("dp-lsw", f"DP-LSW on {_DP_LSW_RUNS} runs of chain data (tabular, eps = delta = "
              "0.1): dprl.balle2016 (vectorised over runs and states) vs a per-run Python loop",
              "trajectories per run", _dp_lsw_vectorised, _dp_lsw_per_run_loop,
              size=10_000, quick_size=100, repeats=1, setup=_dp_lsw_data),
    Benchmark("chain-statistics", "first-visit statistics of m chain trajectories (Balle et al. "
              "2016, Sec. 6): the exact sampler (cost independent of m) vs simulating the "
              "trajectories", "trajectories", _statistics_exact, _statistics_simulated,
              size=1_000_000, quick_size=20_000, repeats=1),
    Benchmark("gpope", f"GPOPE (Xie et al. 2019, Algorithm 1) on {_GPOPE_TRIALS} trials of "
              f"{_GPOPE_M} chain trajectories (tabular): dprl.xie2019 (all trials at once, "
              "B_i from per-trajectory entries formed once) vs Algorithm 1 as written, trial "
              "by trial; N = 1000", "iterations",
              _gpope_vectorised, _gpope_per_trial_loop, size=1000, quick_size=5,
              repeats=1, setup=_gpope_data),
    Benchmark("gpope-tabular", f"GPOPE runs of the chain experiment ({_CHAIN_TRIALS} trials x 7 "
              "runs, N = m, preparation included): per-trajectory A_i, b_i, C_i stored by their "
              "non-zero entries (tabular features) vs the previous dense (n x n) matrices",
              "trajectories m", partial(_chain_gpope, tabular=True),
              partial(_chain_gpope, tabular=False), size=3000, quick_size=100, repeats=1,
              setup=_chain_gpope_data),
    Benchmark("gpope-calibration-wbk9", "RDP of GPOPE's step (one of m = 10^4 records "
              "sampled without replacement, Gaussian; the book's WBK 2019 Thm. 9 bound) at its "
              "286 orders 2..1024, at n noise multipliers: all orders in one sum vs the "
              "previous loop over orders (one logsumexp each)", "RDP curves",
              _wbk9_vectorised, _wbk9_per_order_loop, size=40, quick_size=2, repeats=1),
    Benchmark("gpope-calibration-wbk27", "RDP of the same step by the tightest accountant "
              "(WBK 2019 Thm. 27, orders 2..256): dprl's vectorised forward differences and "
              "sum vs dp-accounting 0.6.0's per-order loops", "RDP curves", _wbk27_vectorised,
              _wbk27_dp_accounting, size=10, quick_size=1, repeats=1),
    Benchmark("hiv-behaviour-data", f"HIV behaviour data of Xie et al. (2019, Sec. 7), "
              f"{_HIV_PATIENTS} patients per trial, 200 steps: all trials' patients in one "
              "integration (xie2019-hiv's data) vs the previous one integration per trial "
              "(same bits)", "trials", _hiv_data_batched, _hiv_data_per_trial, size=5,
              quick_size=2, repeats=1, setup=lambda _: policy_weights(_HIV_POLICY)),
    Benchmark("mountain-car", "MountainCar-v0 episodes under the uniform policy: the numpy twin "
              "(all cars at once, bit-identical dynamics) vs stepping the Gymnasium env",
              "episodes", _mountain_car_vectorised, _mountain_car_gymnasium, size=1000,
              quick_size=20),
    Benchmark("mountain-car-data", f"xie2019-mountain-car's data path on {_MC_DATA_SETS} "
              "data sets of m uniform-policy episodes, nested batch sizes m/10, m/sqrt(10), "
              "m: feature table and per-trajectory matrices once at the largest m and sliced, "
              "LSTD's statistics from the matrices, vs the previous per-size feature tables, "
              "matrices and second pass", "episodes (largest m)", _mountain_car_prepared_once,
              _mountain_car_prepared_per_size, size=2000, quick_size=100, repeats=1,
              setup=_mountain_car_episodes),
    Benchmark("mountain-car-recorded-table", "Mountain Car episodes of a linear 0.5-greedy "
              "policy on the order-5 Fourier basis and their feature table: the rows kept from "
              "the policy's evaluations while simulating (RecordingFeatures, the same bits) vs "
              "computed again afterwards", "episodes", _mountain_car_recorded,
              _mountain_car_recomputed, size=2000, quick_size=50, repeats=1),
    Benchmark("gpope-transitions", f"GPOPE's per-trajectory gradient B_i (Eq. 4.1) from the "
              f"transitions (data above the matrix budget: xie2019-mountain-car-large), "
              f"{_TRANSITION_RUNS} runs per iteration, 2000 uniform-policy episodes: four "
              "matrix-vector products per run vs the previous elementwise products and sums",
              "iterations", _transition_gradients, _previous_transition_gradients, size=2000,
              quick_size=20, repeats=1, setup=_transition_draws),
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
    Benchmark("ou-conditioning", "Ornstein-Uhlenbeck path at 100 new points given n sampled "
              "ones (Wang & Hegde 2019, Prop. 9): nearest-neighbour bridges vs dense Gaussian "
              "conditioning (Cholesky)", "sampled points", ou_conditioning, dense_conditioning,
              size=10_000, quick_size=500, repeats=1, setup=conditioning_setup, goal=100.0),
    Benchmark("prefix-counts", "count_tau of all 200 prefixes of a trajectory over m experts "
              "(Sharma et al. 2025, Alg. 1): cumulative log sums (release.log_prefix_counts) vs "
              "one product per prefix", "experts", _prefix_counts_cumulative, _prefix_counts_per_prefix,
              size=3000, quick_size=300, setup=_prefix_log_probs, goal=3.0),
    Benchmark("dp-sgd-step", "expert-level DP-SGD steps (Sharma et al. 2025, Alg. 4; CQL, "
              "2 x 256 Q-net, 4-D inputs, b = 256): per-example norms by the linear-layer "
              "identity (dp_sgd.clipped_gradient_sum) vs per-example gradients by "
              "torch.func vmap(grad); 1 thread", "steps", partial(_dp_sgd_steps, "layer_identity"),
              partial(_dp_sgd_steps, "vmap"), size=100, quick_size=3, setup=_dp_sgd_state,
              goal=10.0),
    Benchmark("dp-sgd-overhead", "cost of privacy per step: a non-private CQL step on 256 "
              "uniform transitions (candidate) vs the expert-level DP-SGD step with layer-"
              "identity norms (reference); the ratio is the DP step's time in plain steps, "
              "which should stay <= 1.6; 1 thread", "steps", _plain_sgd_steps,
              partial(_dp_sgd_steps, "layer_identity"), size=500, quick_size=5,
              setup=_dp_sgd_state, goal=1.6, at_most=True),
    Benchmark("mkl-compatible-cost", "what the vendor-independent vector math costs on an "
              "Intel CPU (simulated by dprl.vendors on others; on AMD CPUs MKL takes the same "
              "branch either way): a training trial (CQL and BCQ, 2 x 256, half the steps "
              "expert-level DP-SGD, Adam, evaluation) under MKL_CBWR=COMPATIBLE, dprl's pin "
              "(candidate), vs AVX2, MKL's Intel AVX2 branch (reference); a ratio below 1 is "
              "the cost; child processes on 1 thread", "steps",
              partial(_intel_training, "COMPATIBLE"), partial(_intel_training, "AVX2"),
              size=1000, quick_size=10, repeats=2),
    Benchmark("batching-ceiling", "what training runs batched could gain at most (issue 27, "
              "item 6): the matrix products of a plain CQL step (2 x 256, b = 256; their bits "
              "are the run's, so they stay one run's each) replayed alone (candidate) vs the "
              "whole step (reference); the ratio bounds the per-step speed-up of any batching "
              "that leaves the products as they are, even if all else cost nothing; the "
              "issue's 2.5x needs it >= 2.5; 1 thread", "steps", _step_products_only,
              _plain_sgd_steps, size=500, quick_size=5, setup=_plain_step_products),
    Scaling("ou-scaling", "Ornstein-Uhlenbeck path answering N uniform queries in batches of "
            f"{_OU_QUERY_BATCH} (Wang & Hegde 2019, Prop. 9: O(N log N), slope about 1; "
            "O(N^2) would be 2)", "queries", _ou_query_times,
            sizes=(10_000, 100_000, 1_000_000), quick_sizes=(1_000, 10_000), goal=1.2),
]}


class Seconds(float):
    """Seconds a workload timed itself (in a child process, leaving out the child's start);
    :func:`best_time` takes them instead of its own clock."""


def best_time(function: Callable[[int], object], size: int, repeats: int = 3) -> float:
    """The fastest of ``repeats`` wall-clock timings of ``function(size)``, in seconds (the
    function's own where it returns :class:`Seconds`)."""
    timings = []
    for _ in range(require_int("repeats", repeats)):
        start = time.perf_counter()
        result = function(size)
        timings.append(result if isinstance(result, Seconds) else time.perf_counter() - start)
    return min(timings)


def run_benchmarks(names: Sequence[str] = (), quick: bool = False) -> list[dict[str, float]]:
    """Run the named benchmarks (all when none) and print each throughput ratio or slope."""
    unknown = set(names) - set(BENCHMARKS)
    if unknown:
        raise ValueError(f"unknown benchmarks {sorted(unknown)}; known: {sorted(BENCHMARKS)}")
    return [(_run_scaling if isinstance(BENCHMARKS[name], Scaling) else _run_ratio)(
        BENCHMARKS[name], quick) for name in names or sorted(BENCHMARKS)]


def listing() -> str:
    """Every benchmark's name and description, as ``python -m dprl bench --help`` shows."""
    return "\n".join(textwrap.fill(f"{name}: {BENCHMARKS[name].description}", width=88,
                                   initial_indent="  ", subsequent_indent="      ")
                     for name in sorted(BENCHMARKS))


def _verdict(goal: float | None, value: float, at_least: bool, quick: bool) -> str:
    """The goal and whether it is met; goals are set for the full sizes, so the quick sizes
    cannot decide them."""
    if goal is None:
        return ""
    met = value >= goal if at_least else value <= goal
    outcome = "n/a at quick size" if quick else "met" if met else "MISSED"
    return f" (goal {'>=' if at_least else '<='} {goal:g}: {outcome})"


def _run_ratio(bench: Benchmark, quick: bool) -> dict[str, float]:
    size = bench.quick_size if quick else bench.size
    if bench.setup is not None:
        bench.setup(size)
    candidate = best_time(bench.candidate, size, bench.repeats)
    reference = best_time(bench.reference, size, bench.repeats)
    speedup = reference / candidate
    print(f"{bench.name}: {bench.description}\n  {size} {bench.unit}: candidate {candidate:.3g} "
          f"s, reference {reference:.3g} s, speed-up x{speedup:.3g}"
          + _verdict(bench.goal, speedup, at_least=not bench.at_most, quick=quick))
    return {"name": bench.name, "size": size, "candidate_s": candidate,
            "reference_s": reference, "speedup": speedup}


def _run_scaling(bench: Scaling, quick: bool) -> dict[str, float]:
    sizes = bench.quick_sizes if quick else bench.sizes
    times = np.asarray(bench.times(sizes), dtype=float)
    slope = loglog_slope(sizes, times)
    print(f"{bench.name}: {bench.description}\n  "
          + ", ".join(f"{n} {bench.unit} {t:.3g} s" for n, t in zip(sizes, times))
          + f"; log-log slope {slope:.3g}" + _verdict(bench.goal, slope, at_least=False,
                                                      quick=quick))
    return {"name": bench.name, "sizes": sizes, "times_s": times.tolist(), "slope": slope}
