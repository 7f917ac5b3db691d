"""Dask workers as Slurm jobs (``python -m dprl run --slurm N``), through dask-jobqueue.

Each job runs one single-threaded worker from this checkout, with this environment's Python
and the pinned floating point; the partition, account, walltime and memory come from dask's
``jobqueue.slurm`` configuration (``~/.config/dask/jobqueue.yaml``; memory 4 GB unless set).
"""

from __future__ import annotations

import shlex
import sys
from typing import Any

from dprl.paths import REPO_ROOT
from dprl.validation import require_int


class MissingExtra(ImportError):
    """An optional dependency that an option needs is not installed."""


def job_script_prologue() -> list[str]:
    """The job script's lines before the worker starts: to this checkout, and the pinned
    floating point (``python -m dprl env``) exported."""
    python = shlex.quote(sys.executable)
    return [f"cd {shlex.quote(str(REPO_ROOT))}", f"export $({python} -m dprl env)"]


def slurm_cluster(workers: int) -> Any:
    """A ``dask_jobqueue.SLURMCluster`` whose ``workers`` jobs (submitted here) each run one
    single-threaded dask worker; :class:`MissingExtra` without dask-jobqueue."""
    workers = require_int("workers", workers)
    try:
        import dask
        from dask_jobqueue import SLURMCluster
    except ImportError:
        raise MissingExtra("--slurm needs dask-jobqueue: pip install -e '.[slurm]' "
                           "(or pip install dask-jobqueue)") from None
    memory = None if dask.config.get("jobqueue.slurm.memory", None) else "4GB"
    cluster = SLURMCluster(cores=1, processes=1, memory=memory, python=sys.executable,
                           job_name="dprl", job_script_prologue=job_script_prologue())
    cluster.scale(jobs=workers)
    return cluster
