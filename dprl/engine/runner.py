"""Running registered experiments: batched, resumable, with provenance.

Results go to ``<results_dir>/<id>.npz`` (paper scale) or ``<id>.<scale>.npz``, with a JSON
sidecar of the same stem that records, among the provenance, the SHA-256 of the arrays file
(a result whose arrays do not match it is reported, never used). While a run is in progress
each finished batch of trials is saved under ``<id>[.<scale>].partial/``; a rerun with the
same config at the same commit picks up from there.

With ``jobs > 1``, a dask scheduler's address (``scheduler``, or ``DPRL_SCHEDULER`` in the
environment) or ``slurm``, the batches are dask tasks (:mod:`dprl.engine.dask_engine`):
on a ``LocalCluster`` of ``jobs`` worker processes started here, on the workers of an
existing cluster, or on Slurm jobs'. :func:`run_many` (``run --all``) submits the batches of
several experiments at once, each experiment's after the results it reads. The batches
themselves (computing, saving, reading, assembling) are :mod:`dprl.engine.batches`, one
experiment of a run :class:`~dprl.engine.plan.Plan`; reading stored results back,
:mod:`dprl.engine.results`; writing files atomically and the sidecars' checksums,
:mod:`dprl.engine.storage`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tqdm import tqdm

from dprl.engine.batches import compute_trials
from dprl.engine.plan import Plan
from dprl.engine.results import (Result, ResultNotCurrent, load, recompute_requested,
                                 regenerate_command, result_paths, status)
from dprl.engine.registry import get, run_order
from dprl.engine.storage import write_sidecar
from dprl.paths import RESULTS_DIR
from dprl.validation import require_int


class Interrupted(KeyboardInterrupt):
    """A run (of ``what``: an experiment, or several) stopped by Ctrl-C: ``saved`` of its
    ``total`` trials are kept in finished batches, and the same command resumes from them."""

    def __init__(self, what: str, saved: int, total: int) -> None:
        super().__init__(f"{what}: {saved}/{total} trials saved; "
                         "rerun the same command to resume")


def run(experiment_id: str, scale: str = "smoke", results_dir: Path | str = RESULTS_DIR,
        resume: bool = True, progress: bool = True, jobs: int = 1,
        scheduler: str | None = None, slurm: int | None = None,
        shared_fs: bool | None = None) -> Result:
    """Run every trial of ``experiment_id`` at ``scale`` and write the result with provenance.

    Finished batches survive an interruption; with ``resume`` a rerun computes only the rest
    (the partial folder is discarded if its config differs from the current one). With
    ``jobs > 1`` batches run in that many worker processes at once (a dask ``LocalCluster``
    started for the run); with ``scheduler`` (the address of a running dask scheduler, such
    as ``tcp://host:8786``; default: ``DPRL_SCHEDULER`` in the environment, if set) on that
    cluster's workers, and with ``slurm`` on that many Slurm jobs' workers
    (:func:`dprl.engine.slurm.slurm_cluster`); the workers must be pinned like this
    process (:class:`~dprl.engine.dask_workers.WorkerRefused` otherwise).
    ``shared_fs``: whether the workers see the results folder (None: found out by asking
    them); without it the batches come back here to be saved. The result is the same bits
    either way, since every experiment is batch-invariant. Ctrl-C (KeyboardInterrupt)
    cancels the batches not yet started and raises :class:`Interrupted`; the finished
    batches are kept.
    """
    return run_many([experiment_id], scale, results_dir, resume, progress, jobs, scheduler,
                    slurm, shared_fs)[experiment_id]


def run_many(experiment_ids: Sequence[str], scale: str = "smoke",
             results_dir: Path | str = RESULTS_DIR, resume: bool = True, progress: bool = True,
             jobs: int = 1, scheduler: str | None = None, slurm: int | None = None,
             shared_fs: bool | None = None) -> dict[str, Result]:
    """:func:`run` for each of ``experiment_ids`` (each after those of its
    :attr:`~dprl.engine.registry.Experiment.after` among them), with one progress bar.

    On dask, every batch of every experiment is submitted at once to one client: an
    experiment's batches wait for the results of those it reads, assembled by a task of
    their own and handed to them (:func:`load` and :func:`status` on the worker return
    them), so its batches start as soon as those results exist."""
    from dprl.engine.dask_engine import dask_client, probe_scheduler, run_graph, scheduler_address

    jobs = require_int("jobs", jobs)
    if slurm is None:
        scheduler = scheduler_address(scheduler, jobs)
        if scheduler is not None:
            probe_scheduler(scheduler)  # before anything else: one line, within seconds
    else:
        require_int("slurm", slurm)
        if jobs > 1 or scheduler is not None:
            raise ValueError(f"slurm={slurm} starts the workers; give neither jobs > 1 nor "
                             f"a scheduler with it (got jobs={jobs}, scheduler={scheduler})")
    plans = [Plan.prepare(get(experiment_id), scale, results_dir, resume)
             for experiment_id in _in_order(experiment_ids)]
    total = sum(plan.config.n_trials for plan in plans)
    label = plans[0].experiment.id if len(plans) == 1 else f"{len(plans)} experiments"
    with tqdm(total=total, initial=sum(plan.saved_trials() for plan in plans), desc=label,
              unit="trial", disable=not progress) as bar:
        try:
            if jobs == 1 and scheduler is None and slurm is None:
                return {plan.experiment.id: plan.run_here(bar) for plan in plans}
            with dask_client(min(jobs, sum(len(plan.todo) for plan in plans) or 1),
                             scheduler, slurm) as client:
                return run_graph(client, plans, bar, shared_fs)
        except KeyboardInterrupt:
            raise Interrupted(label, sum(plan.saved_trials() for plan in plans),
                              total) from None


def _in_order(experiment_ids: Sequence[str]) -> list[str]:
    """``experiment_ids``, each after those of its ``after`` among them (:func:`~dprl.
    experiments.registry.run_order` restricted to them; a cycle is a ValueError)."""
    wanted = set(experiment_ids)
    return [name for name in run_order(experiment_ids) if name in wanted]


class NotReproduced(ValueError):
    """A recomputation of a stored result that did not give its bits."""


def remeasure(experiment_id: str, scale: str = "paper", results_dir: Path | str = RESULTS_DIR,
              jobs: int = 1, progress: bool = True, scheduler: str | None = None,
              slurm: int | None = None, shared_fs: bool | None = None) -> Result:
    """Recompute every trial of the current stored result of ``experiment_id`` (in
    ``<results_dir>/remeasure/``, resumable like :func:`run`), require the same bits, and
    record the recomputation's compute in the stored sidecar: ``cpu_time_s`` and a
    ``remeasured`` entry (its elapsed and CPU seconds, commit, date, machine, packages, and
    the CPU seconds recorded before, if any); ``jobs``, ``scheduler``, ``slurm`` and
    ``shared_fs`` as in :func:`run`. The arrays and
    the rest of the provenance are kept, so the result stays current. Raises
    :class:`NotReproduced`, naming the arrays that differ, without touching the result."""
    state = status(experiment_id, scale, results_dir)
    if state != "current":
        raise ValueError(f"{experiment_id}: the stored {scale} result is {state}; run it "
                         f"instead: {regenerate_command(experiment_id, scale, results_dir)}")
    stored = load(experiment_id, scale, results_dir)
    fresh = run(experiment_id, scale, Path(results_dir) / "remeasure", progress=progress,
                jobs=jobs, scheduler=scheduler, slurm=slurm, shared_fs=shared_fs)
    differing = sorted(name for name in set(stored.arrays) | set(fresh.arrays)
                       if name not in stored.arrays or name not in fresh.arrays
                       or stored[name].dtype != fresh[name].dtype
                       or not np.array_equal(stored[name], fresh[name], equal_nan=True))
    if differing:
        raise NotReproduced(f"{experiment_id}: the recomputation differs from the stored "
                            f"result in {', '.join(differing)}; the stored result is kept")
    remeasured = {name: fresh.provenance[name] for name in
                  ("wall_time_s", "cpu_time_s", "git", "created", "machine", "packages")}
    if "cpu_time_s" in stored.provenance:
        remeasured["previous_cpu_time_s"] = stored.provenance["cpu_time_s"]
    record = dict(stored.provenance, cpu_time_s=fresh.provenance["cpu_time_s"],
                  remeasured=remeasured)
    sidecar_path = result_paths(experiment_id, scale, results_dir)[1]
    write_sidecar(sidecar_path, record)
    for path in result_paths(experiment_id, scale, Path(results_dir) / "remeasure")[:2]:
        path.unlink()
    return Result(stored.arrays, record)


def load_or_run(experiment_id: str, scale: str = "paper", recompute: bool | None = None,
                results_dir: Path | str = RESULTS_DIR, progress: bool = True) -> Result:
    """The stored result of ``experiment_id`` when it is current: what chapters call.

    A missing, stale or corrupt result stops with :class:`ResultNotCurrent`, whose message
    names the command that regenerates it; it is computed here (resuming saved batches, with
    a progress bar) only when the reader asks: ``recompute=True``, or ``DPRL_RECOMPUTE=1`` in
    the environment when ``recompute`` is None. A current result is always loaded, never
    recomputed (``python -m dprl run`` does that).
    """
    get(experiment_id).config(scale)  # an unknown id or scale fails here, naming it
    state = status(experiment_id, scale, results_dir)
    if state == "current":
        return load(experiment_id, scale, results_dir)
    if not recompute_requested(recompute):
        raise ResultNotCurrent.of(experiment_id, scale, results_dir, state)
    return run(experiment_id, scale, results_dir, progress=progress)


def mismatched_trials(experiment_id: str, indices: Sequence[int], scale: str = "paper",
                      results_dir: Path | str = RESULTS_DIR) -> list[str]:
    """Recompute the trials ``indices`` alone and compare them with the stored result.

    Returns one line per disagreement (empty when every array matches exactly, NaNs equal);
    a stored config that differs from the registered one is itself a disagreement.
    """
    state = status(experiment_id, scale, results_dir)
    if state != "current":
        return [f"{experiment_id}: stored {scale} result is {state}"]
    stored = load(experiment_id, scale, results_dir)
    n_trials = stored.provenance["n_trials"]
    if not indices or any(not 0 <= int(i) < n_trials for i in indices):
        raise ValueError(f"indices must be a non-empty list of trials in [0, {n_trials}), "
                         f"got {list(indices)}")
    fresh = compute_trials(get(experiment_id), get(experiment_id).config(scale), indices)
    problems = []
    if set(fresh) != set(stored.arrays):
        problems.append(f"{experiment_id}: arrays {sorted(fresh)} != stored {sorted(stored.arrays)}")
    for name in sorted(set(fresh) & set(stored.arrays)):
        for row, index in enumerate(indices):
            if not np.array_equal(fresh[name][row], stored[name][index], equal_nan=True):
                problems.append(f"{experiment_id}: trial {index}, array {name!r} differs")
    return problems
