"""Speed workloads of Sharma et al. (2025) for ``python -m dprl bench`` (:mod:`dprl.bench`):
the release's prefix counts (Alg. 1), the expert-level DP-SGD step (Alg. 4) against
per-example gradients and against a plain step, what MKL's vendor-independent branch costs a
training trial, and the ceiling of batching training runs."""

from __future__ import annotations

from functools import lru_cache, partial

import numpy as np
import torch
from scipy.special import logsumexp

from dprl.benchmarking import Benchmark, Seconds
from dprl.sharma2025.dp_sgd import DPSGDConfig, expert_dp_sgd_step
from dprl.sharma2025.experts import pmin_log_probabilities
from dprl.sharma2025.offline_rl import (DiscreteCQL, ExpertTransitions, Transitions,
                                        sample_uniform, sgd_step)
from dprl.sharma2025.qnetworks import PAPER_HIDDEN, QNetwork, frozen_copy
from dprl.sharma2025.release import log_prefix_counts


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


#: The benchmarks of this module, for :data:`dprl.bench.BENCHMARKS`.
BENCHMARKS = (
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
)
