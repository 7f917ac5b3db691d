"""What runs on a dask worker: the check that it computes this process's bits (the same
floating-point settings at its start and the same dprl sources), a batch computed and saved
there, the refusal of a worker that differs (reported on :data:`REFUSED_TOPIC`, which
:mod:`dprl.engine.dask_engine` prints and :mod:`dprl.engine.slurm` does not count as a death),
and the dask setting a dprl worker starts without (:data:`NANNY_UNSET`)."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from dprl import floating_point
from dprl.engine.provenance import process_commit, source_digest, worker_record
from dprl.engine.batches import Part, compute, save_batch
from dprl.engine.results import provided_results

#: The dask event topic on which a worker that refuses a batch says why (``ADDRESS: why
#: (worker NAME)``).
REFUSED_TOPIC = "dprl-worker-refused"
#: What a dask nanny puts in its worker's environment (``distributed.nanny.pre-spawn-environ``)
#: and dprl's workers start without. ``MALLOC_TRIM_THRESHOLD_=65536``, there to hand freed
#: memory back to the OS at once, also fixes glibc's mmap threshold at 128 KiB: every larger
#: array is mapped afresh and zero-filled page by page, and unmapped when freed. A training
#: step of Sharma et al.'s networks then takes about 2.3 times the CPU time, half of it in the
#: kernel (2000 DP-SGD CQL steps on CartPole: 4.9 CPU s, 11.7 with the variable).
NANNY_UNSET = ("MALLOC_TRIM_THRESHOLD_",)


def nanny_config() -> dict[str, None]:
    """dask settings (for ``dask.config.set``) under which a nanny starts its worker without
    the variables :data:`NANNY_UNSET` (dask drops a ``pre-spawn-environ`` entry set to None)."""
    return {f"distributed.nanny.pre-spawn-environ.{name}": None for name in NANNY_UNSET}


def nanny_environment() -> str:
    """The same as one ``NAME=value`` shell word, for the shell that starts ``dask worker``:
    dask reads ``DASK_DISTRIBUTED__NANNY__PRE_SPAWN_ENVIRON`` as a Python literal merged into
    its ``pre-spawn-environ``."""
    entries = ",".join(f'"{name}":None' for name in NANNY_UNSET)
    return "DASK_DISTRIBUTED__NANNY__PRE_SPAWN_ENVIRON=" + shlex.quote("{" + entries + "}")


class WorkerRefused(RuntimeError):
    """A dask worker that would not compute the same bits as this process: started with
    other floating-point settings, or running other dprl sources (or none)."""


def expected() -> dict[str, Any]:
    """What every worker must match: this process's floating-point settings (the variables
    of :func:`dprl.floating_point.settings`, None where unset) and its dprl sources (their
    digest; the commit is named in messages)."""
    return {"environ": {name: os.environ.get(name) for name in floating_point.settings()},
            "source": source_digest(), "commit": process_commit()}


def mismatch(state: dict[str, Any], wanted: dict[str, Any]) -> str:
    """How a worker's :func:`worker_state` differs from ``wanted`` (empty if it does not)."""
    problems = [differing_settings(state["environ"], wanted["environ"])]
    if state["source"] != wanted["source"]:
        problems.append(f"other dprl sources (commit {state['commit']}, sources "
                        f"{state['source'][:12]}; here: commit {wanted['commit']}, sources "
                        f"{wanted['source'][:12]})")
    return ", ".join(problem for problem in problems if problem)


def differing_settings(found: dict[str, str | None], wanted: dict[str, str | None]) -> str:
    """The variables of ``wanted`` whose values in ``found`` differ, as
    ``NAME='value' (here: 'value')`` or ``NAME unset (here: 'value')``, comma-separated
    (empty when they all agree)."""
    def there(name: str) -> str:
        return f"{name} unset" if found.get(name) is None else f"{name}={found[name]!r}"

    return ", ".join(f"{there(name)} (here: {'unset' if value is None else repr(value)})"
                     for name, value in sorted(wanted.items()) if found.get(name) != value)


def environment_at_start(names: Sequence[str]) -> dict[str, str | None]:
    """The values of ``names`` (None where unset) in this process's environment as it
    started, which is what numpy, OpenBLAS and torch read: from ``/proc/self/environ``
    where it exists (a dask worker imports numpy before dprl, whose pinning of the unset
    variables then comes too late), else from ``os.environ``."""
    try:
        with open("/proc/self/environ", "rb") as environ:
            entries = environ.read().split(b"\0")
    except OSError:
        return {name: os.environ.get(name) for name in names}
    start = dict(entry.decode(errors="replace").split("=", 1) for entry in entries
                 if b"=" in entry)
    return {name: start.get(name) for name in names}


def worker_state(names: Sequence[str]) -> dict[str, Any]:
    """A worker's environment at its start (the variables ``names``), the digest of its
    dprl sources and its checkout's commit: run on every worker by :func:`_check_workers`,
    and before each batch by :func:`batch_task`."""
    return {"environ": environment_at_start(names), "source": source_digest(),
            "commit": process_commit()}


def batch_task(wanted: dict[str, Any], experiment_id: str, scale: str, start: int,
                stop: int, partial: Path | None, inputs: tuple = ()) -> Part:
    """Trials ``start .. stop - 1`` computed on a dask worker, with the results ``inputs``
    (:func:`~dprl.engine.results.provided_results`), and saved in ``partial`` unless
    None (no shared filesystem); refused unless the worker matches ``wanted``
    (:func:`expected`): one that joined the cluster after :func:`_check_workers` is
    checked here, and :func:`refuse` takes it out of the run."""
    problem = mismatch(worker_state(list(wanted["environ"])), wanted)
    if problem:
        refuse(problem)
    with provided_results(inputs):
        part = compute(experiment_id, scale, start, stop, (worker_record(),))
    if partial is not None:
        save_batch(partial, start, stop, part)
    return part


def refuse(problem: str) -> None:
    """Take the dask worker running this task out of the run: report ``problem`` on
    :data:`REFUSED_TOPIC`, close the worker (and its nanny), and hand the task back to the
    scheduler for another worker. Outside a dask worker, :class:`WorkerRefused`."""
    from distributed import Reschedule, get_worker

    try:
        worker = get_worker()
    except ValueError:
        raise WorkerRefused(f"this process would not compute the run's bits: {problem}") \
            from None
    worker.log_event(REFUSED_TOPIC, f"{worker.address}: {problem} (worker {worker.name})")
    worker.loop.add_callback(worker.close, reason="dprl: would not compute the run's bits")
    raise Reschedule()


def report_refusal(event: tuple[float, str]) -> None:
    """One line for a worker that refused a batch (:func:`refuse`)."""
    tqdm.write(f"a dask worker refused to compute and left the run: {event[1]}",
               file=sys.stderr)
