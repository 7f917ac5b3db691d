"""What a speed benchmark is (``python -m dprl bench``, :mod:`dprl.bench`): a candidate timed
against a reference on the same workload (:class:`Benchmark`), or one workload timed at
several sizes (:class:`Scaling`), and the timer they share (:func:`best_time`). Each part of
the book keeps its benchmarks beside the code they measure (``dprl/<part>/benchmarks.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dprl.validation import require_int


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
