"""Speed workloads of Balle et al. (2016) for ``python -m dprl bench`` (:mod:`dprl.bench`):
DP-LSW vectorised over runs against a per-run loop, and the exact sampler of first-visit
statistics against simulating the trajectories."""

from __future__ import annotations

import numpy as np

from dprl.balle2016 import dp_lsw, first_visit_data
from dprl.balle2016.chain_sampler import sample_first_visit_summaries
from dprl.benchmarking import Benchmark
from dprl.envs import ChainMDP
from dprl.features import tabular_features
from dprl.seeding import trial_generators


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


#: The benchmarks of this module, for :data:`dprl.bench.BENCHMARKS`.
BENCHMARKS = (
    Benchmark("dp-lsw", f"DP-LSW on {_DP_LSW_RUNS} runs of chain data (tabular, eps = delta = "
              "0.1): dprl.balle2016 (vectorised over runs and states) vs a per-run Python loop",
              "trajectories per run", _dp_lsw_vectorised, _dp_lsw_per_run_loop,
              size=10_000, quick_size=100, repeats=1, setup=_dp_lsw_data),
    Benchmark("chain-statistics", "first-visit statistics of m chain trajectories (Balle et al. "
              "2016, Sec. 6): the exact sampler (cost independent of m) vs simulating the "
              "trajectories", "trajectories", _statistics_exact, _statistics_simulated,
              size=1_000_000, quick_size=20_000, repeats=1),
)
