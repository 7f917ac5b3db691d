"""Dask workers as Slurm jobs (``python -m dprl run --slurm N``), through dask-jobqueue,
configured as its users configure it.

The settings are dask's ``jobqueue.slurm`` configuration (``~/.config/dask/jobqueue.yaml``, the
``DASK_JOBQUEUE__SLURM__*`` variables), over which ``--slurm-option KEY=VALUE``
(:func:`slurm_config`) wins. To them dprl adds (:func:`cluster_options`): its job-script
prologue after the user's (to this checkout, the pinned floating point), this environment's
Python, single-threaded workers (as many per job as cores; 1 core and 4 GB a worker unless
set), TLS with credentials made for the run (:func:`run_credentials`), which the jobs read from
files on the filesystem they share with this machine, and job lifetimes shorter than the
walltime (:func:`job_lifetime`): a job that reaches its lifetime is replaced and its workers
retired once the batches they were computing are done, so a run longer than one job's
walltime finishes (dask-jobqueue's ``adapt`` does not replace jobs: dask/dask-jobqueue#691).
A job that ``sbatch`` refuses is reported with sbatch's error.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tqdm import tqdm

from dprl.engine.slurm_options import cluster_options, credentials_parent, job_lifetime
from dprl.validation import require_int


class MissingExtra(ImportError):
    """An optional dependency that an option needs is not installed."""


def run_credentials(folder: Path) -> Any:
    """A dask ``Security`` of temporary credentials for one run (``Security.temporary()``: a
    self-signed certificate and its key, which the scheduler, every worker and the client
    present and require of each other), written to ``cert.pem`` and ``key.pem`` in
    ``folder`` (readable by this user only) and named by their paths, which the job script
    passes to the workers."""
    from distributed.security import Security

    temporary = Security.temporary()
    files = {"cert": folder / "cert.pem", "key": folder / "key.pem"}
    for part, path in files.items():
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as file:
            file.write(getattr(temporary, f"tls_worker_{part}"))
    return Security(require_encryption=True, tls_ca_file=str(files["cert"]),
                    **{f"tls_{role}_{part}": str(path) for role in ("client", "scheduler", "worker")
                       for part, path in files.items()})


def slurm_cluster(workers: int) -> contextlib.AbstractContextManager[Any]:
    """A ``dask_jobqueue.SLURMCluster`` (as a context manager) of ``workers`` dask workers
    (``ceil(workers / processes)`` jobs, submitted here; :func:`cluster_options`), every
    connection over TLS with the run's credentials; on exit its jobs are cancelled and the
    credentials removed. A job that reaches its lifetime (:func:`job_lifetime`) is replaced,
    and its workers retired once the batches they were computing then are done (at the
    latest a third of the way from the lifetime's end to the walltime); jobs whose workers
    have all left are replaced. ``problem()`` says why the run cannot go on (sbatch refused
    its jobs, they ended before their workers connected, a batch did not finish within a
    worker's lifetime), ``describe()`` the states of its jobs. :class:`MissingExtra`, at
    once, without dask-jobqueue."""
    workers = require_int("workers", workers)
    cluster_class = _cluster_class()  # first: dask-jobqueue's defaults enter dask's config
    options = cluster_options()
    return _started(cluster_class, options, math.ceil(workers / options["processes"]),
                    job_lifetime())


#: Seconds between two looks for Slurm jobs whose workers have all left
KEEP_INTERVAL_S = 1.0
#: Seconds between two ``squeue`` calls for jobs that ended before their workers connected
SQUEUE_INTERVAL_S = 10.0


@functools.cache
def _cluster_class() -> type:
    """The ``SLURMCluster`` of :func:`slurm_cluster`, made at the first call (dask-jobqueue
    imported then, with this process's Ctrl-C handler kept: dask_jobqueue.runner replaces it
    with ``sys.exit()`` on import, which would end a run with status 0)."""
    from distributed.core import Status

    from dprl.engine.dask_workers import REFUSED_TOPIC

    handler = signal.getsignal(signal.SIGINT)
    try:
        from dask_jobqueue.slurm import SLURMCluster, SLURMJob
    except ImportError:
        raise MissingExtra("--slurm needs dask-jobqueue: pip install -e '.[slurm]' "
                           "(or pip install dask-jobqueue)") from None
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, handler)

    class Job(SLURMJob):
        """A Slurm job whose refusal by ``sbatch`` (or sbatch missing) is recorded in
        ``sbatch_errors``, not raised into the event loop (where it would print tracebacks and
        leave the run waiting): the job counts as started, with no job id."""

        def __init__(self, *args: Any, sbatch_errors: list[str], **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.sbatch_errors = sbatch_errors

        async def start(self) -> None:
            try:
                await super().start()
            except (RuntimeError, OSError) as error:
                self.sbatch_errors.append(_sbatch_error(error))
                self.status = Status.running

    class Cluster(SLURMCluster):
        """dask-jobqueue's ``SLURMCluster`` with unique job names, whose jobs are kept at
        ``jobs`` and retired at their lifetime (:meth:`keep`); see :func:`slurm_cluster`."""

        job_cls = Job

        def __init__(self, **options: Any) -> None:
            self.sbatch_errors: list[str] = []
            self.jobs = 0
            self.lifetime: tuple[float, float, float] | None = None
            self.overlong: str | None = None  # why a batch cannot be computed here
            self._reported = 0
            self._seen: set[str] = set()  # the jobs whose workers are connected
            self._connected: set[str] = set()  # the jobs whose workers ever connected
            self._ends: dict[str, tuple[float, float]] = {}  # job: (lifetime's end, latest)
            self._draining: dict[str, set[Any]] = {}  # job: the tasks it is left to finish
            self._looked = 0.0
            self._numbers = itertools.count()
            super().__init__(sbatch_errors=self.sbatch_errors, **options)

        def _new_worker_name(self, worker_number: int) -> str:
            return f"{self._name}-{next(self._numbers)}"

        def keep(self, jobs: int, lifetime: tuple[float, float, float] | None) -> None:
            """Submit ``jobs`` jobs, and replace each one whose workers have all connected
            and left, unless one refused to compute (other dprl sources: the replacement
            would too); given ``lifetime`` (:func:`job_lifetime`), also each one that
            reaches it (:meth:`_retire`). Checked every :data:`KEEP_INTERVAL_S` seconds."""
            from tornado.ioloop import PeriodicCallback

            self.jobs, self.lifetime = jobs, lifetime
            self.scale(jobs=jobs)
            keeper = PeriodicCallback(self._keep, KEEP_INTERVAL_S * 1000)
            self.periodic_callbacks["dprl-keep-jobs"] = keeper  # stopped on close
            self.loop.add_callback(keeper.start)

        async def _keep(self) -> None:
            present: dict[str, list[Any]] = {}  # job: its connected workers
            names = {f"{name}{suffix}": name for name, spec in self.worker_spec.items()
                     for suffix in spec.get("group", [""])}
            for state in list(self.scheduler.workers.values()):
                if str(state.name) in names:
                    present.setdefault(names[str(state.name)], []).append(state)
            refused = {names.get(match[1]) for _, event in self.scheduler.get_events(
                REFUSED_TOPIC) if (match := re.search(r"\(worker (\S+)\)$", str(event)))}
            ended, dropped = [], []
            for name in list(self.worker_spec):
                if name in present and name not in refused:
                    self._seen.add(name)
                    self._connected.add(name)
                    if self.lifetime and name not in self._ends:
                        self._ends[name] = self._lifetime_ends()
                elif name in self._seen or name in refused:
                    self._seen.discard(name)
                    self._ends.pop(name, None)
                    del self.worker_spec[name]
                    job = getattr(self.workers.get(name), "job_id", None) or name
                    if name in refused:
                        dropped.append(str(job))
                    elif self._draining.pop(name, None) is None:  # else replaced already
                        ended.append(str(job))
            if self.problem() is None:  # else the run stops, saying why
                for refusal in self.sbatch_errors[self._reported:]:
                    tqdm.write(f"slurm: sbatch refused a job: {refusal}", file=sys.stderr)
                self._reported = len(self.sbatch_errors)
            if ended:
                tqdm.write(f"slurm: the workers of job {', '.join(ended)} left (stopped, or "
                           "their lifetime reached); submitting a replacement", file=sys.stderr)
            if dropped:
                self.jobs -= len(dropped)
                tqdm.write(f"slurm: job {', '.join(dropped)} not replaced: its worker refused "
                           f"to compute; {self.jobs} job(s) left", file=sys.stderr)
            retiring = [name for name, (end, _) in self._ends.items()
                        if name in present and name not in refused and time.monotonic() >= end]
            for name in retiring:
                await self._retire(name, present[name])
            if ended or dropped or retiring or set(self.worker_spec) - set(self.workers):
                self.scale(jobs=self.jobs + len(self._draining))

        def _lifetime_ends(self) -> tuple[float, float]:
            """When a job whose workers connect now reaches its lifetime (the lifetime give
            or take the stagger, at random), and the latest time its workers are retired (a
            third of the way from the latest end of a lifetime to the walltime, which began
            before they connected)."""
            lifetime, stagger, walltime = self.lifetime
            now = time.monotonic()
            return (now + lifetime + random.uniform(-stagger, stagger),
                    now + lifetime + stagger + (walltime - lifetime - stagger) / 3)

        async def _retire(self, name: str, workers: list[Any]) -> None:
            """Retire the ``workers`` of job ``name``, which reached its lifetime: replace the
            job (at once), then retire them (their data moved to other workers, their
            queued tasks given to others) once the tasks they were computing at the
            lifetime's end are done, or at the latest time (those tasks computed again
            elsewhere; a task that had run for a whole lifetime by then sets
            :attr:`overlong`, which stops the run)."""
            if name not in self._draining:
                self._draining[name] = {task for worker in workers for task in worker.executing}
                tqdm.write(f"slurm: job {getattr(self.workers.get(name), 'job_id', name)} "
                           "reached its lifetime; submitting a replacement, and retiring its "
                           "workers once their batches are done", file=sys.stderr)
            running = {task for task in self._draining[name] if task.processing_on in workers}
            stimulus = f"dprl-lifetime-{time.time()}"
            if not running:
                await self.scheduler.retire_workers(
                    workers=[worker.address for worker in workers], close_workers=True,
                    remove=True, stimulus_id=stimulus)
                return
            if time.monotonic() < self._ends[name][1]:
                return
            lifetime, stagger, walltime = self.lifetime
            overlong = [(duration, task.key) for worker in workers for task, duration
                        in worker.executing.items() if duration >= lifetime - stagger]
            if overlong:
                duration, key = max(overlong)
                self.overlong = (f"the batch {str(key).rsplit('-', 1)[0]} ran {duration:.0f} s "
                                 f"without finishing, and a worker lives {lifetime - stagger:.0f}"
                                 f"-{lifetime + stagger:.0f} s (jobs of {walltime:.0f} s): give "
                                 "the jobs a longer walltime (--slurm-option walltime=...)")
                return
            for worker in workers:
                await self.scheduler.remove_worker(worker.address, expected=True,
                                                   stimulus_id=stimulus)

        def problem(self) -> str | None:
            """Why the run cannot go on, if the cluster knows: a batch ran for a worker's
            whole lifetime (:meth:`_retire`); the worker of every job refused to compute
            (not replaced: :meth:`keep`); sbatch refused its jobs (every job it holds), in
            sbatch's words; or every job it holds has ended (``squeue`` lists none, looked up
            every :data:`SQUEUE_INTERVAL_S` seconds at most) before its workers connected."""
            if self.overlong:
                return self.overlong
            if self.jobs == 0:
                return "no Slurm job left: the workers of every job refused to compute"
            held = {name: job.job_id for name, job in list(self.workers.items()) if job.job_id}
            if self.sbatch_errors and not held:
                return f"sbatch refused the Slurm job: {self.sbatch_errors[-1]}"
            jobs = [job for name, job in held.items() if name not in self._connected]
            if not jobs or len(jobs) < len(held) or (
                    time.monotonic() - self._looked < SQUEUE_INTERVAL_S):
                return None
            self._looked = time.monotonic()
            states = self._states(jobs)
            if states is None or any(job in states for job in jobs):
                return None
            return (f"the Slurm job{'s' if len(jobs) > 1 else ''} {', '.join(jobs)} ended "
                    f"before {'their workers' if len(jobs) > 1 else 'its worker'} connected "
                    f"(see {self._output(jobs[0])})")

        def describe(self) -> str:
            """The states of the cluster's Slurm jobs (``squeue``), for a message."""
            jobs = [job.job_id for job in list(self.workers.values()) if job.job_id]
            states = self._states(jobs) if jobs else {}
            if not jobs:
                return "no Slurm job submitted"
            if states is None:
                return f"Slurm jobs {', '.join(jobs)}: squeue failed"
            return "Slurm jobs: " + ", ".join(
                f"{job} {states[job]}" if job in states else
                f"{job} ended (its output: {self._output(job)})" for job in jobs)

        @staticmethod
        def _states(jobs: list[str]) -> dict[str, str] | None:
            """``squeue``'s state and reason of each of ``jobs`` it lists (the ones that have
            not ended); None if squeue fails."""
            try:
                listed = subprocess.run(["squeue", "--noheader", "--format=%i %T %r",
                                         f"--jobs={','.join(jobs)}"], capture_output=True,
                                        text=True, timeout=30)
            except (OSError, subprocess.SubprocessError):
                return None
            if listed.returncode and "Invalid job id" not in listed.stderr:
                return None
            return dict(line.strip().split(" ", 1) for line in listed.stdout.splitlines()
                        if " " in line.strip())

        def _output(self, job_id: str) -> Path:
            """The file of a job's output (dask-jobqueue's name for it in the configured
            ``log-directory``, else Slurm's default in the directory it was submitted from)."""
            folder = self._dummy_job.log_directory
            if folder:
                return Path(folder, f"{self._dummy_job.job_name}-{job_id}.out").absolute()
            return Path(f"slurm-{job_id}.out").absolute()

    return Cluster


def _sbatch_error(error: Exception) -> str:
    """The words of a failed submission: sbatch's standard error (from dask-jobqueue's
    RuntimeError, which prints it after ``stderr:``) or the OSError, in one line."""
    text = str(error)
    if isinstance(error, RuntimeError) and "stderr:" in text:
        text = text.split("stderr:", 1)[1]
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


@contextlib.contextmanager
def _started(cluster_class: type, options: dict[str, Any], jobs: int,
             lifetime: tuple[float, float, float] | None) -> Iterator[Any]:
    """A ``cluster_class`` of ``options`` and the run's credentials (:func:`run_credentials`,
    in a private folder of :func:`credentials_parent`) keeping ``jobs`` jobs of ``lifetime``
    (:func:`job_lifetime`), with one line on where its scheduler and dashboard are; on exit
    the cluster is closed (its jobs cancelled) and the folder removed."""
    with tempfile.TemporaryDirectory(prefix=".dprl-tls-", dir=credentials_parent()) as folder:
        with cluster_class(security=run_credentials(Path(folder)), **options) as cluster:
            cluster.keep(jobs, lifetime)
            retired = (f"workers retired after {lifetime[0]:.0f} s, once their batches are "
                       "done, and replaced" if lifetime else
                       "no lifetime set by dprl" if options["walltime"] else
                       "workers run until the walltime")
            tqdm.write(f"slurm: {jobs} job(s) of {options['cores']} single-threaded worker(s), "
                       f"walltime {options['walltime'] or 'unset'} ({retired}); scheduler "
                       f"{cluster.scheduler_address}, dashboard {cluster.dashboard_link}",
                       file=sys.stderr)
            yield cluster
