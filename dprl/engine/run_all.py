"""Regenerating the book's data in one command: every experiment in dependency order.

``python -m dprl run --all --scale paper`` computes each registered experiment after the ones
it reads (:attr:`~dprl.engine.registry.Experiment.after`; on dask, all at once, each
experiment's batches waiting for the results they read), skips results that are current,
recomputes those whose inputs are recomputed in the same call, and ends with a table of
compute times.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dprl.engine.registry import get, run_order
from dprl.paths import RESULTS_DIR
from dprl.engine.results import result_paths, status
from dprl.engine.runner import run_many


@dataclass(frozen=True)
class Step:
    """One experiment of a :func:`run_all` call: computed now or kept (its result was
    current), and the compute time its sidecar records."""

    experiment: str
    computed: bool
    compute_s: float


def run_all(scale: str = "paper", results_dir: Path | str = RESULTS_DIR, jobs: int = 1,
            progress: bool = True, runner: Callable | None = None,
            report: Callable[[str], None] = print, **options: Any) -> list[Step]:
    """Every experiment at ``scale`` in :func:`run_order`: a current result is kept unless
    one of its dependencies is computed in this call. ``runner`` computes the others in one
    call (default :func:`~dprl.engine.runner.run_many`, with ``options``: scheduler,
    slurm, shared_fs, resume); ``report`` receives a line per experiment, first."""
    order, computed = run_order(), []
    for number, experiment_id in enumerate(order, 1):
        state = status(experiment_id, scale, results_dir)
        changed_inputs = sorted(set(get(experiment_id).after) & set(computed))
        if state == "current" and not changed_inputs:
            report(f"[{number}/{len(order)}] {experiment_id}: current, kept")
            continue
        why = f"its inputs {', '.join(changed_inputs)} are recomputed" if (
            state == "current") else f"result {state}"
        report(f"[{number}/{len(order)}] {experiment_id}: computing ({why})")
        computed.append(experiment_id)
    if computed:
        (run_many if runner is None else runner)(computed, scale, results_dir,
                                                 progress=progress, jobs=jobs, **options)
    return [Step(experiment_id, experiment_id in computed,
                 _compute_time(experiment_id, scale, results_dir)) for experiment_id in order]


def _compute_time(experiment_id: str, scale: str, results_dir: Path | str) -> float:
    """The compute time recorded in a current result's sidecar, in seconds."""
    sidecar = result_paths(experiment_id, scale, results_dir)[1]
    return float(json.loads(sidecar.read_text())["wall_time_s"])


def compute_table(steps: list[Step]) -> str:
    """The compute time of every result of a :func:`run_all` call, and the totals."""
    width = max(len(step.experiment) for step in steps)
    lines = [f"{'experiment':{width}s}  {'result':8s}  {'compute':>12s}"]
    lines += [f"{step.experiment:{width}s}  {'computed' if step.computed else 'kept':8s}  "
              f"{_duration(step.compute_s):>12s}" for step in steps]
    now = sum(step.compute_s for step in steps if step.computed)
    lines.append(f"{'total':{width}s}  {'':8s}  {_duration(sum(s.compute_s for s in steps)):>12s}"
                 f"  ({_duration(now)} computed in this call)")
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    """Seconds as ``12.3 s``, ``4.6 min`` or ``2.05 h`` (4 significant digits at most)."""
    if seconds < 60:
        return f"{seconds:.3g} s"
    if seconds < 3600:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"
