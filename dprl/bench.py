"""Speed benchmarks, reported as ratios against a reference run in the same process.

Each benchmark times a candidate (the vectorised code the book uses) and a reference (the
straightforward way) on the same workload and prints the throughput ratio; ratios, unlike
seconds, travel between machines. A scaling benchmark times one workload at several sizes and
prints the log-log slope of time against size, also free of the machine's speed. Either may
carry a goal, reported as met or missed. ``python -m dprl bench [name ...] [--quick]``. The
benchmarks live beside what they measure (``dprl/<part>/benchmarks.py``, built on
:mod:`dprl.benchmarking`); this module gathers and runs them.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import numpy as np

from dprl.balle2016 import benchmarks as balle2016
from dprl.benchmarking import Benchmark, Scaling, best_time
from dprl.envs import benchmarks as envs
from dprl.sharma2025 import benchmarks as sharma2025
from dprl.wang2019 import benchmarks as wang2019
from dprl.wang2019.benchmarks import loglog_slope
from dprl.xie2019 import benchmarks as xie2019

#: Every benchmark by name, from the modules beside the code they measure.
BENCHMARKS: dict[str, Benchmark | Scaling] = {
    bench.name: bench for part in (envs, balle2016, xie2019, wang2019, sharma2025)
    for bench in part.BENCHMARKS}


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
    """The benchmark's best time of each side and their ratio; ``quick``: at its quick size,
    timed once (a check that it runs, not a measurement)."""
    size, repeats = (bench.quick_size, 1) if quick else (bench.size, bench.repeats)
    if bench.setup is not None:
        bench.setup(size)
    candidate = best_time(bench.candidate, size, repeats)
    reference = best_time(bench.reference, size, repeats)
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
