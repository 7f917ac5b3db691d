"""Speed workloads of Xie et al. (2019) for ``python -m dprl bench`` (:mod:`dprl.bench`):
GPOPE vectorised over trials and on tabular features, its calibration's RDP curves, the HIV
behaviour data, and the Mountain Car data path of its experiments, each against the
straightforward or previous way."""

from __future__ import annotations

from functools import lru_cache, partial

import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant
from scipy.special import logsumexp

from dprl.accounting import (sampled_without_replacement_gaussian_rdp,
                             sampled_without_replacement_gaussian_rdp_tight)
from dprl.accounting.logspace import log_abs_binom
from dprl.benchmarking import Benchmark
from dprl.control.linear_q import EpsilonGreedyPolicy
from dprl.envs import ChainMDP, mountain_car_features, stack_trajectories
from dprl.envs.episodes import (RecordingFeatures, UniformPolicy, feature_table, recorded_table,
                                stack_episodes)
from dprl.envs.mountain_car import MountainCar
from dprl.experiments.xie2019.hiv_data import behaviour_data
from dprl.experiments.xie2019.hiv_policy import BEHAVIOUR_TEMPERATURE, policy_weights
from dprl.features import tabular_features
from dprl.seeding import trial_generators
from dprl.xie2019 import gpope_runs, prepare, primal_dual_descent
from dprl.xie2019.baselines import episode_statistics, prepared_statistics
from dprl.xie2019.prepared import _Episodes
from dprl.xie2019.privacy import GPOPE_ORDERS


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


#: The benchmarks of this module, for :data:`dprl.bench.BENCHMARKS`.
BENCHMARKS = (
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
)
