"""Running registered experiments: batched, resumable, with provenance.

Results go to ``<results_dir>/<id>.npz`` (paper scale) or ``<id>.<scale>.npz``, with a JSON
sidecar of the same stem that records, among the provenance, the SHA-256 of the arrays file
(a result whose arrays do not match it is reported, never used). While a run is in progress
each finished batch of trials is saved under ``<id>[.<scale>].partial/``; a rerun with the
same config at the same commit picks up from there.

With ``jobs > 1``, a dask scheduler's address (``scheduler``, or ``DPRL_SCHEDULER`` in the
environment) or ``slurm``, the batches are dask tasks (:mod:`dprl.experiments.dask_engine`):
on a ``LocalCluster`` of ``jobs`` worker processes started here, on the workers of an
existing cluster, or on Slurm jobs'. :func:`run_many` (``run --all``) submits the batches of
several experiments at once, each experiment's after the results it reads. The batches
themselves (computing, saving, reading, assembling) are :mod:`dprl.experiments.batches`;
writing files atomically and the sidecars' checksums, :mod:`dprl.experiments.storage`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from dprl.experiments.batches import (Part, assemble, compute_batch, compute_trials,
                                      prepare_partial, read_batch, saved_batches, trial_batches)
from dprl.experiments.provenance import provenance
from dprl.experiments.registry import Experiment, TrialConfig, config_to_dict, get, run_order
from dprl.experiments.storage import read_sidecar, sha256, write_result, write_sidecar
from dprl.paths import RESULTS_DIR
from dprl.validation import require_int


@dataclass(frozen=True)
class Result:
    """Per-trial arrays (leading axis = trial) and their provenance."""

    arrays: dict[str, np.ndarray]
    provenance: dict[str, Any]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]

    @property
    def config(self) -> dict[str, Any]:
        return self.provenance["config"]


class Interrupted(KeyboardInterrupt):
    """A run (of ``what``: an experiment, or several) stopped by Ctrl-C: ``saved`` of its
    ``total`` trials are kept in finished batches, and the same command resumes from them."""

    def __init__(self, what: str, saved: int, total: int) -> None:
        super().__init__(f"{what}: {saved}/{total} trials saved; "
                         "rerun the same command to resume")


def result_paths(experiment_id: str, scale: str,
                 results_dir: Path | str = RESULTS_DIR) -> tuple[Path, Path, Path]:
    """(arrays file, provenance sidecar, partial folder) of a result."""
    stem = experiment_id if scale == "paper" else f"{experiment_id}.{scale}"
    base = Path(results_dir)
    return base / f"{stem}.npz", base / f"{stem}.json", base / f"{stem}.partial"


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
    (:func:`dprl.experiments.slurm.slurm_cluster`); the workers must be pinned like this
    process (:class:`~dprl.experiments.dask_engine.WorkerRefused` otherwise).
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
    :attr:`~dprl.experiments.registry.Experiment.after` among them), with one progress bar.

    On dask, every batch of every experiment is submitted at once to one client: an
    experiment's batches wait for the results of those it reads, assembled by a task of
    their own and handed to them (:func:`load` and :func:`status` on the worker return
    them), so its batches start as soon as those results exist."""
    from dprl.experiments.dask_engine import (dask_client, probe_scheduler, run_graph,
                                              scheduler_address)

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


@dataclass(frozen=True)
class Plan:
    """One experiment of a run: its config, files, batches and those already saved."""

    experiment: Experiment
    scale: str
    config: TrialConfig
    results_dir: Path
    batches: tuple[tuple[int, int], ...]
    done: frozenset[tuple[int, int]]

    @classmethod
    def prepare(cls, experiment: Experiment, scale: str, results_dir: Path | str,
                resume: bool) -> Plan:
        """The plan of ``experiment``, its partial folder made (:func:`prepare_partial`)."""
        config = experiment.config(scale)
        partial = result_paths(experiment.id, scale, results_dir)[2]
        done = prepare_partial(partial, config, resume)
        return cls(experiment, scale, config, Path(results_dir).absolute(),
                   tuple(trial_batches(config)), frozenset(done))

    @property
    def partial(self) -> Path:
        return result_paths(self.experiment.id, self.scale, self.results_dir)[2]

    @property
    def todo(self) -> list[tuple[int, int]]:
        return [batch for batch in self.batches if batch not in self.done]

    def saved_trials(self) -> int:
        """Trials saved so far: all, once the result is written."""
        if not self.partial.exists():
            return self.config.n_trials
        return sum(stop - start for start, stop in saved_batches(self.partial))

    def run_here(self, bar: tqdm) -> Result:
        """Compute the batches left in this process, one after another; write the result."""
        for start, stop in self.todo:
            bar.update(compute_batch(self.experiment.id, self.scale, start, stop,
                                     self.partial))
        return self.write(assemble(*(read_batch(self.partial, start, stop)
                                     for start, stop in self.batches)))

    def write(self, part: Part) -> Result:
        """Write the assembled ``part`` as the result, with provenance; drop the batches."""
        record = provenance(self.experiment, self.scale, self.config, part.arrays,
                            part.seconds, part.cpu_seconds, part.workers)
        arrays_path, sidecar_path, partial = result_paths(self.experiment.id, self.scale,
                                                          self.results_dir)
        write_result(arrays_path, sidecar_path, part.arrays, record)
        shutil.rmtree(partial)
        return Result(part.arrays, record)


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


def load(experiment_id: str, scale: str = "paper",
         results_dir: Path | str = RESULTS_DIR) -> Result:
    """The stored result of ``experiment_id`` at ``scale`` (on a dask worker, the one the
    run hands to the batch, if any: its provenance then holds only the config)."""
    provided = _provided_arrays(experiment_id, scale, results_dir)
    if provided is not None:
        return Result(provided, {"config": config_to_dict(get(experiment_id).config(scale))})
    arrays_path, sidecar_path, _ = result_paths(experiment_id, scale, results_dir)
    if not arrays_path.exists() or not sidecar_path.exists():
        raise FileNotFoundError(
            f"no stored result for {experiment_id!r} at scale {scale!r} in {results_dir}; "
            f"run: {regenerate_command(experiment_id, scale, results_dir)}")
    record = read_sidecar(sidecar_path)
    if record is None:
        raise ValueError(f"{sidecar_path} is unreadable; regenerate it: "
                         f"{regenerate_command(experiment_id, scale, results_dir)}")
    if record["sha256"] != sha256(arrays_path):
        raise ValueError(f"{arrays_path} does not match the checksum in {sidecar_path.name}; "
                         f"regenerate it: {regenerate_command(experiment_id, scale, results_dir)}")
    with np.load(arrays_path) as stored:
        arrays = {name: stored[name] for name in stored.files}
    return Result(arrays, record)


def status(experiment_id: str, scale: str = "paper",
           results_dir: Path | str = RESULTS_DIR) -> str:
    """'missing', 'corrupt' (the sidecar is unreadable or the arrays do not match its
    checksum), 'stale' (the stored config differs from the registered one) or 'current'
    (also a result the run hands to a batch on a dask worker)."""
    if _provided_arrays(experiment_id, scale, results_dir) is not None:
        return "current"
    arrays_path, sidecar_path, _ = result_paths(experiment_id, scale, results_dir)
    if not (arrays_path.exists() and sidecar_path.exists()):
        return "missing"
    record = read_sidecar(sidecar_path)
    if record is None or record["sha256"] != sha256(arrays_path):
        return "corrupt"
    current = record["config"] == config_to_dict(get(experiment_id).config(scale))
    return "current" if current else "stale"


RECOMPUTE_ENV = "DPRL_RECOMPUTE"
_STATES = {"missing": "is missing",
           "corrupt": "is corrupt (its sidecar is unreadable or its arrays do not match its checksum)",
           "stale": "is stale (computed with a config that differs from the registered one)"}


class ResultNotCurrent(RuntimeError):
    """A chapter asked for a stored result that is missing, stale or corrupt."""


def regenerate_command(experiment_id: str, scale: str = "paper",
                       results_dir: Path | str = RESULTS_DIR) -> str:
    """The command line that (re)computes and stores a result."""
    command = f"python -m dprl run {experiment_id} --scale {scale}"
    if Path(results_dir).resolve() != RESULTS_DIR.resolve():
        command += f" --results-dir {results_dir}"
    return command


def recompute_requested(recompute: bool | None = None) -> bool:
    """``recompute`` when given, else the environment variable ``DPRL_RECOMPUTE`` (1/0,
    true/false, yes/no; unset or empty means no)."""
    if recompute is not None:
        return bool(recompute)
    value = os.environ.get(RECOMPUTE_ENV, "").strip().lower()
    if value not in {"", "0", "1", "false", "true", "no", "yes"}:
        raise ValueError(f"{RECOMPUTE_ENV} must be 1 or 0 (true/false, yes/no), got {value!r}")
    return value in {"1", "true", "yes"}


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
        raise ResultNotCurrent(
            f"the stored {scale}-scale result of {experiment_id!r} in {results_dir} "
            f"{_STATES[state]}. Regenerate it with:\n    "
            f"{regenerate_command(experiment_id, scale, results_dir)}\n"
            f"(or compute it here, with a progress bar: pass recompute=True, or set "
            f"{RECOMPUTE_ENV}=1 in the environment)")
    return run(experiment_id, scale, results_dir, progress=progress)


_PROVIDED = threading.local()


def folder_key(results_dir: Path | str) -> str:
    """A results folder as a key of provided results: '' for the default one (wherever a
    worker's checkout is), else its absolute path."""
    folder = Path(results_dir).resolve()
    return "" if folder == RESULTS_DIR.resolve() else str(folder)


@contextlib.contextmanager
def provided_results(inputs: Sequence[tuple[str, str, str, Any]]) -> Iterator[None]:
    """Within the block, in this thread, :func:`load` and :func:`status` answer for each
    ``(experiment_id, scale, folder key, part)`` of ``inputs`` with its arrays (current)
    instead of reading the results folder."""
    _PROVIDED.results = {(name, scale, key): part.arrays for name, scale, key, part in inputs}
    try:
        yield
    finally:
        _PROVIDED.results = {}


def _provided_arrays(experiment_id: str, scale: str,
                     results_dir: Path | str) -> dict[str, np.ndarray] | None:
    """The arrays :func:`provided_results` gives for this result, or None."""
    return getattr(_PROVIDED, "results", {}).get(
        (experiment_id, scale, folder_key(results_dir)))


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
