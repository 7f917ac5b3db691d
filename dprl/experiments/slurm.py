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
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from dprl.paths import REPO_ROOT
from dprl.validation import require_int, require_positive


class MissingExtra(ImportError):
    """An optional dependency that an option needs is not installed."""


#: The keys of ``--slurm-option KEY=VALUE`` (``_`` and ``-`` alike): the key of dask's
#: ``jobqueue.slurm`` configuration each sets, and the kind of value it takes
#: (``job-extra-directives`` adds one ``#SBATCH`` line to the configured ones; ``dashboard-address``
#: is the scheduler's, in ``scheduler-options``)
OPTIONS: dict[str, tuple[str, str]] = {
    "partition": ("queue", "text"), "queue": ("queue", "text"),
    "account": ("account", "text"), "walltime": ("walltime", "walltime"),
    "memory": ("memory", "bytes"), "cores": ("cores", "count"),
    "processes": ("processes", "count"), "job-cpu": ("job-cpu", "count"),
    "job-mem": ("job-mem", "text"), "interface": ("interface", "text"),
    "log-directory": ("log-directory", "text"), "local-directory": ("local-directory", "text"),
    "shared-temp-directory": ("shared-temp-directory", "text"),
    "death-timeout": ("death-timeout", "seconds"),
    "job-extra-directives": ("job-extra-directives", "text"),
    "dashboard-address": ("scheduler-options", "text"),
}
#: Memory per worker (dask's ``jobqueue.slurm.memory`` is per job) unless configured
WORKER_MEMORY_GB = 4


def slurm_option(option: str) -> tuple[str, Any]:
    """``option`` (``KEY=VALUE``, a key of :data:`OPTIONS`) as ``(key, value)``: the key
    spelled as in :data:`OPTIONS`, a count as an int, seconds as a float; a ValueError
    naming the option and what is wrong with it."""
    if not isinstance(option, str) or "=" not in option:
        raise ValueError(f"slurm option {option!r} must be KEY=VALUE, such as "
                         "partition=debug or walltime=02:00:00")
    key, value = (part.strip() for part in option.split("=", 1))
    key = key.lower().replace("_", "-")
    if key not in OPTIONS:
        raise ValueError(f"slurm option {option!r}: unknown key {key!r}; known: "
                         f"{', '.join(sorted(OPTIONS))}")
    if not value:
        raise ValueError(f"slurm option {option!r}: the value is empty")
    kind = OPTIONS[key][1]
    try:
        if kind == "count":
            return key, require_int(key, int(value) if value.isdigit() else value)
        if kind == "seconds":
            return key, require_positive(key, float(value))
        if kind == "walltime" and walltime_seconds(value) is None and value.upper() not in (
                "UNLIMITED", "INFINITE"):
            raise ValueError("is no walltime")
        if kind == "bytes":
            from dask.utils import parse_bytes

            parse_bytes(value)
    except ValueError as error:
        raise ValueError(f"slurm option {option!r}: {error} (expected {_EXPECTED[kind]})"
                         ) from None
    return key, value


_EXPECTED = {"count": "an integer >= 1", "seconds": "a number of seconds > 0",
             "walltime": "a Slurm time: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or "
                         "D-HH:MM:SS", "bytes": "an amount of memory, such as 8GB",
             "text": "text"}


def slurm_config(options: Sequence[str]) -> dict[str, Any]:
    """The settings of dask's configuration (``jobqueue.slurm.*`` keys, for
    ``dask.config.set``) that the ``KEY=VALUE`` strings ``options`` give
    (:func:`slurm_option`; a later one wins), merged with the configuration's own:
    ``job-extra-directives`` appended to the configured ones, ``dashboard-address`` added
    to the configured ``scheduler-options``."""
    import dask

    if isinstance(options, str) or not isinstance(options, Sequence):
        raise ValueError(f"options must be a sequence of KEY=VALUE strings, got {options!r}")
    settings: dict[str, Any] = {}
    for key, value in map(slurm_option, options):
        name = f"jobqueue.slurm.{OPTIONS[key][0]}"
        if key == "job-extra-directives":
            value = [*settings.get(name, dask.config.get(name, None) or []), value]
        elif key == "dashboard-address":
            value = {**settings.get(name, dask.config.get(name, None) or {}),
                     "dashboard_address": value}
        settings[name] = value
    return settings


_WALLTIME = re.compile(r"(?:(?P<days>\d+)-)?(?P<a>\d+)(?::(?P<b>\d+))?(?::(?P<c>\d+))?")


def walltime_seconds(walltime: str) -> int | None:
    """A Slurm time limit (``minutes``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``,
    ``D-HH:MM:SS``) in seconds; None for one that is none of these (such as ``UNLIMITED``)."""
    if not isinstance(walltime, str):
        raise ValueError(f"walltime must be a Slurm time such as '01:30:00', got {walltime!r}")
    match = _WALLTIME.fullmatch(walltime.strip())
    if match is None:
        return None
    days, *parts = (int(part) if part else None for part in match.group("days", "a", "b", "c"))
    if days is None:  # minutes, MM:SS or HH:MM:SS
        known = [part for part in parts if part is not None]
        units = {1: (60,), 2: (60, 1), 3: (3600, 60, 1)}[len(known)]
        return sum(part * unit for part, unit in zip(known, units))
    hours, minutes, seconds = (part or 0 for part in parts)
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def worker_lifetime(walltime_s: float) -> tuple[float, float]:
    """``(lifetime, stagger)`` in seconds for the workers of jobs of ``walltime_s`` seconds:
    each is retired after ``lifetime`` give or take up to ``stagger`` (as dask's
    ``--lifetime`` and ``--lifetime-stagger``), which ends before the walltime by a margin (a
    tenth of it, 10 s to 10 min) for the worker's start and its last batch."""
    walltime_s = require_positive("walltime_s", walltime_s)
    stagger = min(walltime_s / 20, 300.0)
    return walltime_s - stagger - min(max(walltime_s / 10, 10.0), 600.0), stagger


def job_script_prologue() -> list[str]:
    """dprl's lines of the job script, after the user's: to this checkout, and the pinned
    floating point (``python -m dprl env``) exported."""
    python = shlex.quote(sys.executable)
    return [f"cd {shlex.quote(str(REPO_ROOT))}", f"export $({python} -m dprl env)"]


def cluster_options() -> dict[str, Any]:
    """The keyword arguments dprl gives ``SLURMCluster`` besides the credentials, from dask's
    ``jobqueue.slurm`` configuration (which dask-jobqueue reads for every other setting):
    ``cores`` (1 unless set) single-threaded workers a job (``processes``, the same unless
    set: another number is a ValueError), ``memory`` (4 GB a worker unless set), this
    environment's Python, the configured ``job-script-prologue`` with
    :func:`job_script_prologue` after it."""
    import dask

    def setting(name: str) -> Any:
        return dask.config.get(f"jobqueue.slurm.{name}", None)

    cores = setting("cores") or 1
    processes = setting("processes") or cores
    if processes != cores:
        raise ValueError(f"processes={processes} with cores={cores} (jobqueue.slurm) would give "
                         "each dask worker several threads; dprl's workers are single-threaded: "
                         "set processes to cores, or leave it unset")
    return {"cores": cores, "processes": processes,
            "memory": setting("memory") or f"{WORKER_MEMORY_GB * processes}GB",
            "walltime": setting("walltime"), "python": sys.executable, "job_name": "dprl",
            "job_script_prologue": [*(setting("job-script-prologue") or setting("env-extra")
                                      or []), *job_script_prologue()],
            "worker_extra_args": list(setting("worker-extra-args") or setting("extra") or []),
            "protocol": "tls://"}


def job_lifetime() -> tuple[float, float, float] | None:
    """``(lifetime, stagger, walltime)`` in seconds (:func:`worker_lifetime`) of the jobs of
    dask's configured ``jobqueue.slurm.walltime``, after which the cluster retires their
    workers (:func:`slurm_cluster`); None without a walltime, or when the configured
    ``worker-extra-args`` give one (dask's ``--lifetime``: the workers retire themselves)."""
    import dask

    walltime = dask.config.get("jobqueue.slurm.walltime", None)
    arguments = dask.config.get("jobqueue.slurm.worker-extra-args", None) or []
    seconds = walltime_seconds(str(walltime)) if walltime is not None else None
    if not seconds or any(str(argument).startswith("--lifetime") for argument in arguments):
        return None
    return (*worker_lifetime(seconds), float(seconds))


def credentials_parent() -> Path:
    """Where a run's credentials folder is made: dask's ``jobqueue.slurm.shared-temp-directory``
    if set, else this checkout (the jobs run from it, so they see it)."""
    import dask

    shared = dask.config.get("jobqueue.slurm.shared-temp-directory", None)
    return Path(os.path.expandvars(shared)).expanduser() if shared else REPO_ROOT


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

    from dprl.experiments.dask_engine import REFUSED_TOPIC

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
