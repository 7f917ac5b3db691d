"""How ``python -m dprl run --all --scale paper`` would scale with workers: a simulation from
the CPU seconds the committed results record.

The work is a graph of tasks, one per batch of trials of every paper-scale result
(:func:`task_graph`): the registered paper config gives the batches (what ``run --all``
computes), the sidecar the cost of a trial (its ``cpu_time_s`` over its ``n_trials``). An
experiment's batches wait for every batch of the experiments in its
:attr:`~dprl.engine.registry.Experiment.after`, whose results they read.

:func:`simulate` schedules the graph on identical workers by list scheduling with critical-path
priority: whenever a worker is free it starts, of the tasks whose inputs are done, the one with
the longest path of work from its start to the end of the graph. Any list schedule ends within
total / W + (1 - 1/W) x critical path, hence within (2 - 1/W) times the optimum (Graham, R. L.
(1969), Bounds on multiprocessing timing anomalies, SIAM J. Appl. Math. 17(2), 416-429), and no
schedule ends before max(total / W, critical path) (:func:`lower_bound`). Both add the
costs exactly (as fractions) and round only their answer, so the bound holds in floating point
as it does in exact arithmetic, whatever order the additions take.

Assumed: a trial costs on every worker the CPU seconds measured on the machine its sidecar
records, every trial of an experiment costs the same, a worker is one single-threaded process
on its own core, and reading inputs and writing results costs nothing.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from dprl.engine.batches import trial_batches
from dprl.engine.registry import get, run_order
from dprl.paths import RESULTS_DIR
from dprl.engine.results import result_paths
from dprl.engine.storage import read_sidecar
from dprl.tables import Table
from dprl.validation import require_folder, require_int, require_nonnegative

#: The numbers of workers of the scaling table.
WORKERS = (2, 8, 32, 128)


@dataclass(frozen=True)
class Task:
    """Trials ``start .. stop - 1`` of ``experiment`` (one batch), costing ``cost_s`` CPU
    seconds."""

    experiment: str
    start: int
    stop: int
    cost_s: float


@dataclass(frozen=True)
class TaskGraph:
    """``tasks`` and, for each, the indices of the tasks it waits for (``after``);
    ``unmeasured``: the experiments left out for want of a recorded CPU time."""

    tasks: tuple[Task, ...]
    after: tuple[tuple[int, ...], ...]
    unmeasured: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.after) != len(self.tasks):
            raise ValueError(f"after must list the predecessors of each of the "
                             f"{len(self.tasks)} tasks, got {len(self.after)} entries")
        for task in self.tasks:
            require_nonnegative("cost_s", task.cost_s)
        for index, predecessors in enumerate(self.after):
            if any(not 0 <= p < len(self.tasks) or p == index for p in predecessors):
                raise ValueError(f"after[{index}] must name other tasks of the graph, "
                                 f"got {predecessors}")
        _topological_order(self)  # a cycle fails here

    @property
    def total_s(self) -> float:
        """The CPU seconds of every task together (one worker's wall time)."""
        return math.fsum(task.cost_s for task in self.tasks)


def task_graph(results_dir: Path | str = RESULTS_DIR) -> TaskGraph:
    """One task per batch of every registered experiment's paper config whose paper-scale
    sidecar in ``results_dir`` records its CPU seconds, each batch costing the sidecar's
    CPU seconds per trial times its trials; an experiment's batches wait for every batch of
    the experiments in its ``after``. Experiments without a recorded CPU time are left out
    (named in ``unmeasured``), and what waits for them waits for nothing."""
    results_dir = require_folder("results_dir", results_dir)
    tasks: list[Task] = []
    after: list[tuple[int, ...]] = []
    batches: dict[str, tuple[int, ...]] = {}
    unmeasured: list[str] = []
    for experiment_id in run_order():
        per_trial = _cpu_seconds_per_trial(experiment_id, results_dir)
        if per_trial is None:
            unmeasured.append(experiment_id)
            continue
        waits = tuple(index for dependency in sorted(get(experiment_id).after)
                      for index in batches.get(dependency, ()))
        first = len(tasks)
        for start, stop in trial_batches(get(experiment_id).config("paper")):
            tasks.append(Task(experiment_id, start, stop, per_trial * (stop - start)))
            after.append(waits)
        batches[experiment_id] = tuple(range(first, len(tasks)))
    return TaskGraph(tuple(tasks), tuple(after), tuple(unmeasured))


def _cpu_seconds_per_trial(experiment_id: str, results_dir: Path | str) -> float | None:
    """The CPU seconds per trial a paper-scale sidecar records; None without a readable
    sidecar or a finite ``cpu_time_s``."""
    record = read_sidecar(result_paths(experiment_id, "paper", results_dir)[1])
    if record is None:
        return None
    cpu = record.get("cpu_time_s")
    if cpu is None or not math.isfinite(cpu):
        return None
    return cpu / record["n_trials"]


def _topological_order(graph: TaskGraph) -> list[int]:
    """The task indices, each after its predecessors (Kahn's algorithm); raises on a cycle."""
    successors = _successors(graph)
    waiting = [len(set(predecessors)) for predecessors in graph.after]
    order = [index for index, count in enumerate(waiting) if count == 0]
    for index in order:  # grows while it is read
        for successor in successors[index]:
            waiting[successor] -= 1
            if waiting[successor] == 0:
                order.append(successor)
    if len(order) != len(graph.tasks):
        raise ValueError("graph: its tasks wait for each other in a cycle")
    return order


def _successors(graph: TaskGraph) -> list[list[int]]:
    """For each task, the tasks that wait for it."""
    successors: list[list[int]] = [[] for _ in graph.tasks]
    for index, predecessors in enumerate(graph.after):
        for predecessor in set(predecessors):
            successors[predecessor].append(index)
    return successors


def _remaining(graph: TaskGraph) -> list[Fraction]:
    """For each task, the CPU seconds of the longest path from its start to the end of the
    graph (its own cost included), added exactly."""
    successors = _successors(graph)
    remaining = [Fraction(0)] * len(graph.tasks)
    for index in reversed(_topological_order(graph)):
        remaining[index] = Fraction(graph.tasks[index].cost_s) + max(
            (remaining[s] for s in successors[index]), default=Fraction(0))
    return remaining


def remaining_paths(graph: TaskGraph) -> list[float]:
    """For each task, the CPU seconds of the longest path from its start to the end of the
    graph (its own cost included), each rounded once from the exact sum: the priority of
    :func:`simulate`; the largest is the critical path."""
    return [float(r) for r in _remaining(graph)]


def critical_path(graph: TaskGraph) -> tuple[Task, ...]:
    """The tasks of a longest path through ``graph``, in order (empty for an empty graph)."""
    remaining = _remaining(graph)
    successors = _successors(graph)
    sources = [i for i, predecessors in enumerate(graph.after) if not predecessors]
    path: list[Task] = []
    candidates = sources
    while candidates:
        index = max(candidates, key=lambda i: (remaining[i], -i))
        path.append(graph.tasks[index])
        candidates = successors[index]
    return tuple(path)


def simulate(graph: TaskGraph, workers: int) -> float:
    """The wall time in seconds (makespan) of list scheduling ``graph`` on ``workers``
    identical workers with critical-path priority: whenever a worker is free, it starts the
    ready task with the longest remaining path (:func:`remaining_paths`, compared exactly;
    ties: the earlier task); a task is ready when every task it waits for has finished.
    Times are added exactly; the makespan is rounded to the nearest float."""
    workers = require_int("workers", workers)
    remaining = _remaining(graph)
    successors = _successors(graph)
    waiting = [len(set(predecessors)) for predecessors in graph.after]
    ready = [(-remaining[i], i) for i, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    running: list[tuple[Fraction, int]] = []  # (exact finish time, task)
    now = Fraction(0)
    while ready or running:
        while ready and len(running) < workers:
            _, index = heapq.heappop(ready)
            heapq.heappush(running, (now + Fraction(graph.tasks[index].cost_s), index))
        now = running[0][0]
        while running and running[0][0] == now:
            _, index = heapq.heappop(running)
            for successor in successors[index]:
                waiting[successor] -= 1
                if waiting[successor] == 0:
                    heapq.heappush(ready, (-remaining[successor], successor))
    return float(now)


def simulate_in_turn(graph: TaskGraph, workers: int) -> float:
    """The wall time in seconds of running the experiments one after another, in the order
    of ``graph``'s tasks, each experiment's batches list-scheduled on ``workers`` workers
    (:func:`simulate`), waiting for every batch of an experiment before starting the next:
    how ``python -m dprl run --all --jobs W`` ran them before it submitted one graph."""
    workers = require_int("workers", workers)
    experiments: dict[str, list[int]] = {}
    for index, task in enumerate(graph.tasks):
        experiments.setdefault(task.experiment, []).append(index)
    return math.fsum(simulate(_subgraph(graph, indices), workers)
                     for indices in experiments.values())


def _subgraph(graph: TaskGraph, indices: Sequence[int]) -> TaskGraph:
    """The tasks ``indices`` of ``graph`` and the waits among them."""
    position = {index: new for new, index in enumerate(indices)}
    return TaskGraph(tuple(graph.tasks[i] for i in indices),
                     tuple(tuple(position[p] for p in graph.after[i] if p in position)
                           for i in indices))


def lower_bound(graph: TaskGraph, workers: int) -> float:
    """No schedule of ``graph`` on ``workers`` workers ends sooner: max(total CPU seconds /
    workers, critical path), in seconds, computed exactly and rounded to the nearest float
    (rounding being monotone, never above :func:`simulate`'s makespan)."""
    workers = require_int("workers", workers)
    total = sum((Fraction(task.cost_s) for task in graph.tasks), Fraction(0))
    return float(max(total / workers, max(_remaining(graph), default=Fraction(0))))


def scaling_table(graph: TaskGraph | None = None,
                  workers: Sequence[int] = WORKERS) -> Table:
    """For each number of ``workers``: the simulated wall time of ``graph`` (default: the
    committed results' :func:`task_graph`) in hours, its two lower bounds (total CPU hours /
    workers and the critical path), the efficiency (total CPU / (workers x wall time), the
    fraction of the workers' time spent computing) and the wall time of the experiments run
    in turn (:func:`simulate_in_turn`)."""
    graph = task_graph() if graph is None else graph
    if isinstance(workers, (str, bytes)) or not isinstance(workers, Sequence) or not workers:
        raise ValueError(f"workers must be a non-empty sequence of integers, got {workers!r}")
    workers = [require_int("workers", w) for w in workers]
    path_h = float(max(_remaining(graph), default=Fraction(0))) / 3600
    rows = []
    for w in workers:
        wall = simulate(graph, w)
        efficiency = graph.total_s / (w * wall) if wall > 0 else None
        rows.append((w, wall / 3600, graph.total_s / w / 3600, path_h, efficiency,
                     simulate_in_turn(graph, w) / 3600))
    return Table(("workers", "simulated wall time (h)", "total CPU h / workers",
                  "critical path (h)", "efficiency", "experiments in turn (h)"), rows)
