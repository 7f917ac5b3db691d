"""What the papers' own scale would cost, from the CPU seconds the committed results record.

Two settings of the book are smaller than the papers':

- **Sharma et al. (2025), Sec. 6** train "for as long as possible with the given value of
  eps2" at Table 3's noise multiplier (App. B.3); the book caps every run at its
  environment's step cap. A run's paper-scale length (:func:`sharma_paper_steps`) is the
  number of steps that spends its ``(eps2, delta2)`` at Table 3's ``s`` and the paper's rate
  ``q = p b / m``, by the RDP accountant (Opacus's, which the paper's own code would have
  used; dp-accounting's PLD allows about 15 % more steps). Runs with nothing to spend
  (non-private, ``p = 0``) or whose ``s`` Table 3 does not give (the baseline where Table 3's
  row has ``p = 0``) keep the cap. A step costs the CPU seconds per executed step of the
  environment's training result (evaluation included).
- **Xie et al. (2019), Sec. 7** report 100 trials at every batch size; the book's largest
  batch sizes (``xie2019-*-large``) have 2-3. Paper scale: 100 trials at the trial cost
  the sidecar records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from dprl.engine.registry import get
from dprl.paths import RESULTS_DIR
from dprl.engine.results import result_paths
from dprl.engine.scaling import Task, TaskGraph, task_graph
from dprl.engine.storage import read_sidecar
from dprl.tables import Table
from dprl.validation import require_choice, require_folder, require_int

#: Sharma et al.'s training results and Xie et al.'s largest-m results.
SHARMA_RESULTS = tuple(f"sharma2025-{env}-training"
                       for env in ("cartpole", "acrobot", "lunarlander", "hiv"))
XIE_RESULTS = ("xie2019-mountain-car-large", "xie2019-hiv-large")
#: Trials per batch size in Xie et al. (2019), Sec. 7.
XIE_TRIALS = 100


@dataclass(frozen=True)
class Cost:
    """A result at the book's and at the paper's scale: CPU seconds, and the longest single
    run (a sequential lower bound on the wall time with any number of workers)."""

    experiment: str
    book_s: float
    paper_s: float
    longest_run_s: float

    @property
    def factor(self) -> float:
        return self.paper_s / self.book_s


@lru_cache(maxsize=None)
def _steps_for_budget(eps2: float, delta2: float, sigma: float, rate: float) -> int:
    from dprl.sharma2025.accounting import steps_for_budget

    return steps_for_budget(eps2, delta2, sigma, rate, "rdp")


def sharma_paper_steps(env: str, run) -> int | None:
    """The paper-scale length of a :class:`~dprl.experiments.sharma2025.training.Run` (module
    docstring): the steps that spend its budget at Table 3's ``s`` (the row of its
    ``eps``, or the ``eps = 5`` row for the split ablation's other budgets) and
    ``q = p b / m``; None where the paper gives nothing to train to (non-private, ``p = 0``,
    or no ``s`` in Table 3)."""
    from dprl.experiments.sharma2025.training import run_budget
    from dprl.sharma2025.accounting import table3_row

    p = 1.0 if run.method == "dpsgd" else run.p
    if run.method == "nonprivate" or p == 0:
        return None
    sigma = table3_row(env, run.eps if run.eps in (5.0, 7.5, 10.0) else 5.0,
                       run.algorithm).noise_multiplier
    if math.isnan(sigma):
        return None
    eps2, delta2, _ = run_budget(env, run)
    return _steps_for_budget(eps2, delta2, sigma, p * run.batch_size / run.m)


def _record(experiment_id: str, results_dir: Path | str) -> dict:
    record = read_sidecar(result_paths(experiment_id, "paper",
                                       require_folder("results_dir", results_dir))[1])
    if record is None or record.get("cpu_time_s") is None:
        raise ValueError(f"{experiment_id} has no committed paper-scale result with its CPU "
                         f"time in {results_dir}")
    return record


def _sharma_run_costs(experiment_id: str, results_dir: Path | str
                      ) -> tuple[float, float, list[float]]:
    """The recorded CPU seconds of a Sharma training result; the same at the paper's
    lengths, the recorded seconds times the ratio of the paper's steps to the book's
    (exactly the recorded seconds where every run keeps the cap); and each run's at its
    paper length."""
    require_choice("experiment_id", experiment_id, SHARMA_RESULTS)
    config = get(experiment_id).config("paper")
    book_s = _record(experiment_id, results_dir)["cpu_time_s"]
    book_steps = config.steps * config.n_trials
    steps = [sharma_paper_steps(config.env, run) or config.steps for run in config.runs]
    return (book_s, book_s * (sum(steps) / book_steps),
            [book_s * (n / book_steps) for n in steps])


def sharma_cost(experiment_id: str, results_dir: Path | str = RESULTS_DIR) -> Cost:
    """A Sharma training result at the paper's lengths (module docstring)."""
    book_s, paper_s, runs = _sharma_run_costs(experiment_id, results_dir)
    return Cost(experiment_id, book_s, paper_s, max(runs))


def xie_cost(experiment_id: str, trials: int = XIE_TRIALS,
             results_dir: Path | str = RESULTS_DIR) -> Cost:
    """A Xie largest-m result at ``trials`` trials, each costing the recorded mean."""
    require_choice("experiment_id", experiment_id, XIE_RESULTS)
    record = _record(experiment_id, results_dir)
    per_trial = record["cpu_time_s"] / record["n_trials"]
    return Cost(experiment_id, record["cpu_time_s"],
                per_trial * require_int("trials", trials), per_trial)


def paper_scale_table(results_dir: Path | str = RESULTS_DIR) -> Table:
    """Each result of :data:`SHARMA_RESULTS` and :data:`XIE_RESULTS` at the book's and the
    paper's scale (CPU hours), the factor, the 2-core days and the longest run (hours), with a
    total row."""
    costs = ([sharma_cost(e, results_dir) for e in SHARMA_RESULTS]
             + [xie_cost(e, results_dir=results_dir) for e in XIE_RESULTS])
    total = Cost("total", sum(c.book_s for c in costs), sum(c.paper_s for c in costs),
                 max(c.longest_run_s for c in costs))
    return Table(("result", "book (CPU h)", "paper scale (CPU h)", "factor",
                  "paper scale (2-core days)", "longest run (h)"),
                 [(c.experiment, c.book_s / 3600, c.paper_s / 3600, c.factor,
                   c.paper_s / 2 / 86400, c.longest_run_s / 3600) for c in costs + [total]])


def paper_scale_graph(results_dir: Path | str = RESULTS_DIR) -> TaskGraph:
    """:func:`~dprl.engine.scaling.task_graph` of the committed results with Sharma's
    training runs at their paper lengths (a batch costs its runs') and Xie's largest-m
    results at :data:`XIE_TRIALS` trials (one task per trial); the dependencies are the
    same."""
    graph = task_graph(results_dir)
    order: dict[str, list[int]] = {}
    for index, task in enumerate(graph.tasks):
        order.setdefault(task.experiment, []).append(index)
    tasks: list[Task] = []
    after: list[tuple[int, ...]] = []
    placed: dict[str, tuple[int, ...]] = {}
    for experiment, indices in order.items():
        waits = tuple(i for dependency in sorted({graph.tasks[p].experiment
                                                  for p in graph.after[indices[0]]})
                      for i in placed[dependency])
        first = len(tasks)
        tasks += _paper_tasks(experiment, [graph.tasks[i] for i in indices], results_dir)
        after += [waits] * (len(tasks) - first)
        placed[experiment] = tuple(range(first, len(tasks)))
    return TaskGraph(tuple(tasks), tuple(after), graph.unmeasured)


def _paper_tasks(experiment: str, book: list[Task], results_dir: Path | str) -> list[Task]:
    """An experiment's tasks at the paper's scale (:func:`paper_scale_graph`)."""
    if experiment in SHARMA_RESULTS:
        _, _, runs = _sharma_run_costs(experiment, results_dir)
        return [Task(experiment, t.start, t.stop, math.fsum(runs[t.start:t.stop])) for t in book]
    if experiment in XIE_RESULTS:
        per_trial = xie_cost(experiment, 1, results_dir).paper_s
        return [Task(experiment, i, i + 1, per_trial) for i in range(XIE_TRIALS)]
    return book
