"""The scaling simulation of ``run --all`` (dprl.engine.scaling): list scheduling against
hand-computed schedules, Graham's bounds on random graphs, and the committed results' graph."""

import json
import math

import numpy as np
import pytest

from dprl.engine.registry import get
from dprl.paths import RESULTS_DIR
from dprl.engine.scaling import (WORKERS, Task, TaskGraph, critical_path, lower_bound,
                                 remaining_paths, scaling_table, simulate, simulate_in_turn,
                                 task_graph)


def graph(costs, after, experiments=None):
    """A graph of tasks named by their index (or ``experiments``), with ``costs``."""
    experiments = experiments or [str(i) for i in range(len(costs))]
    return TaskGraph(tuple(Task(e, 0, 1, float(c)) for e, c in zip(experiments, costs)),
                     tuple(tuple(a) for a in after))


CHAIN = graph([1, 2, 3], [(), (0,), (1,)])
EQUAL = graph([2] * 5, [()] * 5)
DIAMOND = graph([1, 2, 3, 1], [(), (0,), (0,), (1, 2)])


@pytest.mark.parametrize("workers", [1, 2, 8])
def test_chain_takes_its_length_on_any_number_of_workers(workers):
    assert simulate(CHAIN, workers) == 6
    assert lower_bound(CHAIN, workers) == 6


@pytest.mark.parametrize(("workers", "wall"), [(1, 10), (2, 6), (3, 4), (4, 4), (5, 2), (9, 2)])
def test_independent_equal_tasks_run_in_waves(workers, wall):
    assert simulate(EQUAL, workers) == wall


@pytest.mark.parametrize(("workers", "wall"), [(1, 7), (2, 5), (3, 5)])
def test_diamond(workers, wall):
    # two workers: a (0-1), then b (1-3) beside c (1-4), then d (4-5)
    assert simulate(DIAMOND, workers) == wall
    assert [t.experiment for t in critical_path(DIAMOND)] == ["0", "2", "3"]
    assert remaining_paths(DIAMOND) == [5, 3, 4, 1]


def test_the_longest_remaining_path_starts_first():
    # a(3); b(1) -> c(3); d(1): b and a start first (remaining 4 and 3), c follows b at 1,
    # d follows a at 3: both end at 4 = total / 2. Starting a and d first would end at 5.
    tasks = graph([3, 1, 3, 1], [(), (), (1,), ()])
    assert simulate(tasks, 2) == 4


def test_empty_graph():
    empty = TaskGraph((), ())
    assert simulate(empty, 4) == 0 and lower_bound(empty, 4) == 0
    assert critical_path(empty) == ()


def random_graph(rng, n_tasks):
    """Tasks with random costs, each waiting for a random subset of the earlier ones."""
    costs = rng.exponential(1.0, n_tasks) * rng.choice([0.1, 1.0, 10.0], n_tasks)
    after = [tuple(int(j) for j in np.flatnonzero(rng.random(i) < 3 / (i + 1)))
             for i in range(n_tasks)]
    return graph(costs, after)


@pytest.mark.parametrize("seed", range(20))
def test_within_graham_bounds_on_random_graphs(seed):
    rng = np.random.default_rng(seed)
    tasks = random_graph(rng, int(rng.integers(1, 60)))
    path = max(remaining_paths(tasks))
    assert simulate(tasks, 1) == tasks.total_s  # both the exact sum, rounded once
    for workers in (1, 2, 3, 5, 16, 100):
        wall, bound = simulate(tasks, workers), lower_bound(tasks, workers)
        assert wall >= bound  # exact sums rounded once: no allowance for rounding
        assert wall >= path * (1 - 1e-12) and wall >= tasks.total_s / workers * (1 - 1e-12)
        # Graham (1969): any list schedule ends by total / W + (1 - 1/W) path
        graham = tasks.total_s / workers + (1 - 1 / workers) * path
        assert wall <= graham * (1 + 1e-12) <= (2 - 1 / workers) * bound * (1 + 1e-9)
        assert wall <= simulate_in_turn(tasks, workers) * (1 + 1e-12)


def test_experiments_in_turn_wait_for_each_other():
    # experiment "x": two tasks of 3; "y": three tasks of 1, independent of "x"
    tasks = graph([3, 3, 1, 1, 1], [()] * 5, ["x", "x", "y", "y", "y"])
    assert simulate(tasks, 4) == 3
    assert simulate_in_turn(tasks, 4) == 4
    assert simulate_in_turn(tasks, 1) == simulate(tasks, 1) == 9


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, "2", None])
def test_workers_are_validated(bad):
    for call in (simulate, simulate_in_turn, lower_bound):
        with pytest.raises(ValueError, match="workers"):
            call(DIAMOND, bad)
    with pytest.raises(ValueError, match="workers"):
        scaling_table(DIAMOND, [2, bad])


@pytest.mark.parametrize("bad", [[], (), "8", 8])
def test_table_workers_must_be_a_sequence(bad):
    with pytest.raises(ValueError, match="workers"):
        scaling_table(DIAMOND, bad)


def test_graphs_are_validated():
    with pytest.raises(ValueError, match="cycle"):
        graph([1, 1], [(1,), (0,)])
    with pytest.raises(ValueError, match="after"):
        graph([1, 1], [(), (2,)])
    with pytest.raises(ValueError, match="after"):
        graph([1, 1], [(0,), ()])
    with pytest.raises(ValueError, match="after"):
        TaskGraph((Task("a", 0, 1, 1.0),), ())
    with pytest.raises(ValueError, match="cost_s"):
        graph([-1.0], [()])
    with pytest.raises(ValueError, match="cost_s"):
        graph([math.nan], [()])


def test_table_of_a_small_graph():
    table = scaling_table(DIAMOND, (1, 2))
    assert table.columns[0] == "workers"
    assert [row[0] for row in table.rows] == [1, 2]
    one, two = table.rows
    assert math.isclose(one[1], 7 / 3600) and math.isclose(two[1], 5 / 3600)
    assert math.isclose(two[2], 3.5 / 3600) and math.isclose(two[3], 5 / 3600)
    assert math.isclose(one[4], 1.0) and math.isclose(two[4], 7 / 10)


@pytest.fixture(scope="module")
def committed():
    return task_graph()


def test_committed_graph_is_acyclic_and_waits_for_what_it_reads(committed):
    # TaskGraph refuses a cycle; the tasks come in run order, each after what it waits for
    first = {}
    for index, (task, waits) in enumerate(zip(committed.tasks, committed.after)):
        first.setdefault(task.experiment, index)
        assert all(w < first[task.experiment] for w in waits)
        assert {committed.tasks[w].experiment for w in waits} == (
            set(get(task.experiment).after) - set(committed.unmeasured))


def test_every_paper_scale_sidecar_contributes_its_batches(committed):
    sidecars = [path for path in RESULTS_DIR.glob("*.json") if "." not in path.stem]
    assert sidecars
    for path in sidecars:
        record = json.loads(path.read_text())
        config = get(path.stem).config("paper")
        tasks = [t for t in committed.tasks if t.experiment == path.stem]
        assert len(tasks) == math.ceil(config.n_trials / config.batch_size), path.stem
        assert sum(t.stop - t.start for t in tasks) == config.n_trials
        per_trial = record["cpu_time_s"] / record["n_trials"]
        assert math.isclose(sum(t.cost_s for t in tasks), per_trial * config.n_trials)
    assert set(committed.unmeasured).isdisjoint(path.stem for path in sidecars)


def test_committed_graph_scales_within_its_bounds(committed):
    walls = [simulate(committed, w) for w in (1, *WORKERS, 1024)]
    assert walls[0] == committed.total_s
    assert all(later <= earlier for earlier, later in zip(walls, walls[1:]))
    for workers, wall in zip((1, *WORKERS, 1024), walls):
        assert lower_bound(committed, workers) <= wall
        assert wall <= simulate_in_turn(committed, workers) * (1 + 1e-12)
    path = critical_path(committed)
    assert math.isclose(sum(t.cost_s for t in path), max(remaining_paths(committed)))
    assert math.isclose(walls[-1], sum(t.cost_s for t in path))  # enough workers: the path
    table = scaling_table(committed)
    assert [row[0] for row in table.rows] == list(WORKERS)


def test_task_graph_refuses_a_results_folder_that_does_not_exist(tmp_path):
    from dprl.engine.scaling import task_graph
    with pytest.raises(ValueError, match="results_dir"):
        task_graph(tmp_path / "nonexistent")


def test_task_graph_refuses_a_results_folder_that_is_not_a_path():
    with pytest.raises(ValueError, match="results_dir must be an existing folder, got 3"):
        task_graph(3)
