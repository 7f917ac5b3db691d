"""Dask workers as Slurm jobs (``python -m dprl run --slurm N``), through dask-jobqueue.

Each job runs one single-threaded worker from this checkout, with this environment's Python
and the pinned floating point; the partition, account, walltime and memory come from dask's
``jobqueue.slurm`` configuration (``~/.config/dask/jobqueue.yaml``; memory 4 GB unless set).
The scheduler, its workers and the client speak TLS with credentials made for the run
(:func:`run_credentials`), which the jobs read from files on the filesystem they share with
this machine.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
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
    """A ``dask_jobqueue.SLURMCluster`` (as a context manager: :func:`_with_credentials`) whose
    ``workers`` jobs (submitted here) each run one single-threaded dask worker, every
    connection over TLS with the run's credentials; :class:`MissingExtra`, at once, without
    dask-jobqueue."""
    workers = require_int("workers", workers)
    try:
        import dask
        from dask_jobqueue import SLURMCluster
    except ImportError:
        raise MissingExtra("--slurm needs dask-jobqueue: pip install -e '.[slurm]' "
                           "(or pip install dask-jobqueue)") from None
    memory = None if dask.config.get("jobqueue.slurm.memory", None) else "4GB"
    return _with_credentials(functools.partial(
        SLURMCluster, cores=1, processes=1, memory=memory, python=sys.executable,
        job_name="dprl", job_script_prologue=job_script_prologue(), protocol="tls://"), workers)


@contextlib.contextmanager
def _with_credentials(cluster: Callable[..., Any], workers: int) -> Iterator[Any]:
    """``cluster(security=...)`` with the run's credentials (:func:`run_credentials`, in a
    private folder of :func:`credentials_parent`), scaled to ``workers`` jobs; on exit the
    cluster is closed (its jobs cancelled) and the folder removed."""
    with tempfile.TemporaryDirectory(prefix=".dprl-tls-", dir=credentials_parent()) as folder:
        with cluster(security=run_credentials(Path(folder))) as started:
            started.scale(jobs=workers)
            yield started
