"""Speed benchmarks, reported as ratios against a reference run in the same process.

Each benchmark times a candidate (the vectorised code the book uses) and a reference (the
straightforward way) on the same workload and prints the throughput ratio; ratios, unlike
seconds, travel between machines. ``python -m dprl bench [name ...] [--quick]``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import gymnasium
import numpy as np

from dprl.envs import CHAIN_ID, ChainMDP


@dataclass(frozen=True)
class Benchmark:
    """``candidate(n)`` and ``reference(n)`` do the same work of size ``n``."""

    name: str
    description: str
    unit: str
    candidate: Callable[[int], object]
    reference: Callable[[int], object]
    size: int
    quick_size: int


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


BENCHMARKS = {b.name: b for b in [
    Benchmark("chain-sampler", "40-state chain trajectories: ChainMDP.sample (numpy, all at once) "
              "vs stepping the Gymnasium env", "trajectories", _chain_vectorised,
              _chain_gymnasium, size=20_000, quick_size=200),
]}


def best_time(function: Callable[[int], object], size: int, repeats: int = 3) -> float:
    """The fastest of ``repeats`` wall-clock timings of ``function(size)``, in seconds."""
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        function(size)
        timings.append(time.perf_counter() - start)
    return min(timings)


def run_benchmarks(names: Sequence[str] = (), quick: bool = False) -> list[dict[str, float]]:
    """Run the named benchmarks (all when none) and print each throughput ratio."""
    unknown = set(names) - set(BENCHMARKS)
    if unknown:
        raise ValueError(f"unknown benchmarks {sorted(unknown)}; known: {sorted(BENCHMARKS)}")
    reports = []
    for name in names or sorted(BENCHMARKS):
        bench = BENCHMARKS[name]
        size = bench.quick_size if quick else bench.size
        candidate, reference = best_time(bench.candidate, size), best_time(bench.reference, size)
        reports.append({"name": name, "size": size, "candidate_s": candidate,
                        "reference_s": reference, "speedup": reference / candidate})
        print(f"{name}: {bench.description}\n  {size} {bench.unit}: candidate {candidate:.3g} s, "
              f"reference {reference:.3g} s, speed-up x{reference / candidate:.3g}")
    return reports
