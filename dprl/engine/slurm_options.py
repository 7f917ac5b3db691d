"""The settings of ``python -m dprl run --slurm N``: ``--slurm-option KEY=VALUE`` over dask's
``jobqueue.slurm`` configuration, what dprl adds to it (its job-script prologue, this
environment's Python, single-threaded workers, memory per worker) and the jobs' lifetimes
derived from their walltime (:mod:`dprl.engine.slurm` starts the cluster)."""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


from dprl.engine.dask_workers import nanny_environment
from dprl.paths import REPO_ROOT
from dprl.validation import require_int, require_positive


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
    """dprl's lines of the job script, after the user's: to this checkout, the pinned
    floating point (``python -m dprl env``) exported, and the nanny told to start its workers
    without :data:`~dprl.engine.dask_workers.NANNY_UNSET`."""
    python = shlex.quote(sys.executable)
    return [f"cd {shlex.quote(str(REPO_ROOT))}", f"export $({python} -m dprl env)",
            f"export {nanny_environment()}"]


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
