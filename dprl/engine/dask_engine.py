"""The dask engine of :mod:`dprl.engine.runner`: the batches of a run as tasks of a
dask cluster (a ``LocalCluster`` of worker processes started here, a running scheduler's
workers, or Slurm jobs'), each experiment's after the results it reads.

Every worker is checked before anything is submitted: it must have started with this
process's floating-point settings (:mod:`dprl.floating_point`) and run the same dprl sources
(the digest of :func:`~dprl.engine.provenance.source_digest`, which sees uncommitted
changes as well as other commits; :class:`WorkerRefused` otherwise), so a batch computes the
same bits wherever it runs. A worker that joins later is checked the same way before each
batch it is given: one that differs computes nothing, closes, and reports why on
:data:`REFUSED_TOPIC` (printed here in one line); its batch goes to another worker.

Only the run's own processes connect to a cluster started here: its scheduler and workers
speak TLS with temporary credentials made for the run (dask's ``Security.temporary()``),
which every connection must present, and a local cluster listens on :data:`LOOPBACK` only. A
running scheduler at a ``tls://`` address is reached with the credentials of dask's
configuration (``distributed.comm.tls.*``).

On a filesystem the workers share (found out by asking them) each worker saves the batches
it computes; otherwise the batches come back here to be saved, and the results an
experiment reads are sent to the workers.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import ssl
import struct
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from dprl.engine.batches import assemble, read_batch, save_batch
from dprl.engine.dask_workers import (REFUSED_TOPIC, WorkerRefused, batch_task, expected,
                                      mismatch, nanny_config, report_refusal, worker_state)
from dprl.engine.plan import Plan
from dprl.engine.results import Result, folder_key, load, status
from dprl.engine.storage import read_json, write_text

#: The environment variable that names a running dask scheduler (``tcp://host:port``, or
#: ``tls://host:port`` with the credentials of dask's configuration).
SCHEDULER_ENV = "DPRL_SCHEDULER"
#: The address a local cluster's scheduler and workers listen on: this machine only.
LOOPBACK = "127.0.0.1"
#: How long a run waits for a dask worker (seconds), at its start or after the last one left,
#: before it stops with one line.
WORKER_WAIT_S = 600.0


def scheduler_address(scheduler: str | None, jobs: int) -> str | None:
    """The dask scheduler a run uses: ``scheduler``, else ``DPRL_SCHEDULER`` in the
    environment (unset or empty: none). One with ``jobs > 1`` is refused: the cluster's
    workers decide how many batches run at once."""
    source = "scheduler"
    if scheduler is None:
        scheduler, source = os.environ.get(SCHEDULER_ENV) or None, SCHEDULER_ENV
    if scheduler is not None:
        scheduler = scheduler.strip()
        if not scheduler:
            raise ValueError("scheduler must be a dask scheduler's address, such as "
                             "tcp://host:8786 or tls://host:8786, got ''")
        if jobs > 1:
            raise ValueError(f"jobs={jobs} and a dask scheduler ({source}={scheduler}) were "
                             "both given: the cluster's workers decide how many batches run "
                             "at once; give one of them")
    return scheduler


#: Seconds a dask scheduler has to answer a new connection with its handshake
PROBE_TIMEOUT_S = 10.0


def probe_scheduler(address: str, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Return when a dask scheduler answers at ``address``; else, within ``timeout`` seconds,
    a ValueError (an address that is none) or a ConnectionError naming the cause. A dask
    listener sends its handshake as soon as a connection opens, framed by dask's TCP
    protocol (the message's length, then its number of frames, each a little-endian 8-byte
    integer); what answers otherwise, or not at all, is not a dask scheduler. A ``tls://``
    address is probed over TLS with the credentials of dask's configuration
    (:func:`configured_tls`): a handshake that fails (the scheduler refuses them, or they
    refuse it) is a ConnectionError. (An in-process address is checked by the client's own
    connection, under the same timeout.)"""
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, location = parse_address(address)
        if scheme not in ("tcp", "tls"):
            return
        host, port = parse_host_port(location)
    except ValueError:
        raise ValueError(f"scheduler must be a dask scheduler's address, such as "
                         f"tcp://host:8786 or tls://host:8786, got {address!r}") from None
    context = configured_tls(address) if scheme == "tls" else None
    try:
        connection = socket.create_connection((host, port), timeout=timeout)
    except OSError as error:
        raise ConnectionError(f"cannot reach a dask scheduler at {address} within {timeout:g} "
                              f"s: {error}") from None
    header = b""
    try:
        with connection, contextlib.suppress(TimeoutError):  # silent: no handshake (below)
            with (connection if context is None else
                  context.wrap_socket(connection)) as stream:
                while len(header) < 16 and (chunk := stream.recv(16 - len(header))):
                    header += chunk
    except OSError as error:
        if context is None:
            raise ConnectionError(f"cannot reach a dask scheduler at {address} within "
                                  f"{timeout:g} s: {error}") from None
        raise ConnectionError(f"the TLS handshake with the dask scheduler at {address} failed "
                              f"({getattr(error, 'reason', None) or error}): a TLS scheduler "
                              "admits only clients with its credentials; check dask's "
                              "distributed.comm.tls settings (ca-file, client.cert, "
                              "client.key) and that the scheduler speaks TLS") from None
    length, frames = struct.unpack("<QQ", header) if len(header) == 16 else (0, 0)
    if not (1 <= frames <= 64 and 16 <= length < 2**25):
        raise ConnectionError(f"{address} answers, but not as a dask scheduler (no dask "
                              f"handshake within {timeout:g} s): is it the scheduler's "
                              f"address and port?")


def configured_tls(address: str) -> ssl.SSLContext:
    """The TLS context a client connects to the ``tls://`` scheduler at ``address`` with: from
    the credentials of dask's configuration (``distributed.comm.tls.ca-file``,
    ``distributed.comm.tls.client.cert`` and ``.key``, which ``Security()`` reads); a
    ConnectionError naming them when they are missing or cannot be loaded."""
    from distributed.security import Security

    settings = ("dask's distributed.comm.tls.ca-file, distributed.comm.tls.client.cert and "
                "distributed.comm.tls.client.key (~/.config/dask/*.yaml, or the "
                "DASK_DISTRIBUTED__COMM__TLS__... variables)")
    try:
        context = Security().get_connection_args("client")["ssl_context"]
    except (OSError, ValueError) as error:
        raise ConnectionError(f"cannot load the TLS credentials for {address} from "
                              f"{settings}: {error}") from None
    if context is None:
        raise ConnectionError(f"{address} is a TLS scheduler: it admits only clients with its "
                              f"credentials, and none are set; give them in {settings}")
    return context


class WorkerLost(RuntimeError):
    """No dask worker to compute the run: one died (or was stopped) while computing a batch,
    too often for the scheduler to retry it (the batches finished before are saved); none
    connected within :data:`WORKER_WAIT_S` (at the start, or after the last one left); or
    the cluster cannot start any (a Slurm job that ``sbatch`` refused)."""


def run_graph(client: Any, plans: Sequence[Plan], bar: tqdm,
              shared_fs: bool | None) -> dict[str, Result]:
    """Submit every batch of ``plans`` and each plan's assembly to the dask ``client`` at
    once (after :func:`_check_workers`); save the batches as they complete (the workers do,
    on a shared filesystem; this process, otherwise) and write each result once its batches
    are assembled. A run left without workers stops (:class:`_Watch`). Pending tasks are
    cancelled on any error or KeyboardInterrupt."""
    from distributed import KilledWorker

    wanted = _check_workers(client)
    client.subscribe_topic(REFUSED_TOPIC, report_refusal)
    if shared_fs is None:
        shared_fs = _shared_filesystem(client, plans[0].results_dir)
    inputs: dict[str, Any] = {}
    batches: dict[Any, tuple[Plan, int, int]] = {}
    assemblies: dict[Any, Plan] = {}
    for plan in plans:
        parts = _submit_plan(client, plan, wanted, shared_fs, _inputs(client, plan, inputs))
        batches.update((future, (plan, *batch)) for batch, future in parts.items()
                       if batch not in plan.done)
        inputs[plan.experiment.id] = client.submit(
            assemble, *(parts[batch] for batch in plan.batches), pure=False)
        assemblies[inputs[plan.experiment.id]] = plan
    results = {}
    try:
        for future, value in _completed(client, [*batches, *assemblies], _Watch(client)):
            if future in assemblies:
                plan = assemblies[future]
                results[plan.experiment.id] = plan.write(value)
                continue
            plan, start, stop = batches[future]
            if not shared_fs:
                save_batch(plan.partial, start, stop, value)
            bar.update(stop - start)
    except KilledWorker as error:
        raise WorkerLost(f"a dask worker died computing a batch ({error}); the finished "
                         "batches are saved: rerun the same command to resume") from None
    finally:
        client.cancel(list(batches) + list(inputs.values()))
    return results


#: Seconds between two looks at a cluster's workers while a run waits (:class:`_Watch`)
WATCH_INTERVAL_S = 1.0
#: Seconds between two looks for a completed task
POLL_S = 0.05


class _Watch:
    """Stops a run that cannot go on: at once when its cluster says why (a cluster started
    here may have a ``problem()`` method, which returns a reason to stop, such as a Slurm job
    that ``sbatch`` refused or a batch longer than a worker's lifetime, or None), else once
    it has had no dask worker for
    :data:`WORKER_WAIT_S` seconds; that message adds the cluster's ``describe()`` (the
    states of its Slurm jobs), when it has one."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.cluster = getattr(client, "cluster", None)
        self.since: float | None = None

    def wait(self, computed: bool) -> None:
        """Return once the cluster has a worker (:meth:`check`, every
        :data:`WATCH_INTERVAL_S` seconds)."""
        while not self.check(computed):
            time.sleep(WATCH_INTERVAL_S)

    def check(self, computed: bool) -> bool:
        """Whether the cluster has a worker now; :class:`WorkerLost` if it cannot go on
        (``computed``: whether batches may have been saved, for the message)."""
        then = ("the finished batches are saved: rerun the same command to resume" if computed
                else "nothing was computed")
        problem = self.cluster.problem() if hasattr(self.cluster, "problem") else None
        if problem:
            raise WorkerLost(f"{problem}; {then}")
        if self.client.scheduler_info(n_workers=0)["n_workers"]:
            self.since = None
            return True
        address = self.client.scheduler.address
        if self.since is None:
            self.since = time.monotonic()
            tqdm.write(f"waiting for a dask worker to connect to {address}", file=sys.stderr)
        if time.monotonic() - self.since >= WORKER_WAIT_S:
            jobs = (self.cluster.describe() if hasattr(self.cluster, "describe") else
                    "with --slurm: are the jobs queued or failing? see squeue and the jobs' "
                    "logs")
            raise WorkerLost(f"no dask worker connected to {address} within "
                             f"{WORKER_WAIT_S:g} s ({jobs}); {then}")
        return False


def _completed(client: Any, futures: Sequence[Any], watch: _Watch) -> Iterator[tuple[Any, Any]]:
    """``(future, result)`` for each of ``futures`` as it completes (its error raised), while
    ``watch`` checks, every :data:`WATCH_INTERVAL_S` seconds of waiting, that the cluster has
    workers (:class:`WorkerLost` otherwise)."""
    from distributed import as_completed

    completed = as_completed(futures, loop=client.loop, with_results=True)
    checked = time.monotonic()
    while not completed.is_empty():
        if completed.has_ready():
            yield next(completed)
            continue
        if time.monotonic() - checked >= WATCH_INTERVAL_S:
            watch.check(computed=True)
            checked = time.monotonic()
        time.sleep(POLL_S)


def _submit_plan(client: Any, plan: Plan, wanted: dict[str, str | None], shared_fs: bool,
                 inputs: tuple) -> dict[tuple[int, int], Any]:
    """A future per batch of ``plan``: a :func:`batch_task` for each batch left (its key
    ``<experiment>-trials-<start>-<stop>-<token>``), its saved part scattered for each one
    done."""
    partial = plan.partial if shared_fs else None
    parts = {batch: client.submit(
        batch_task, wanted, plan.experiment.id, plan.scale, *batch, partial, inputs,
        key=f"{plan.experiment.id}-trials-{batch[0]}-{batch[1]}-{uuid.uuid4().hex}")
        for batch in plan.todo}
    for batch in sorted(plan.done):
        parts[batch] = client.scatter([read_batch(plan.partial, *batch)], hash=False)[0]
    return parts


def _inputs(client: Any, plan: Plan, known: dict[str, Any]) -> tuple:
    """The results ``plan``'s batches read, as ``(experiment_id, scale, folder key,
    future)`` for :func:`~dprl.engine.results.provided_results`: for each experiment of
    its ``after``, the future of its assembly in this run, else (added to ``known``) its
    current stored result scattered; one neither computed nor current is left to the
    experiment to report."""
    found = []
    for name in plan.experiment.after:
        if name not in known and status(name, plan.scale, plan.results_dir) == "current":
            known[name] = client.scatter([load(name, plan.scale, plan.results_dir)],
                                         hash=False)[0]
        if name in known:
            found.append((name, plan.scale, folder_key(plan.results_dir), known[name]))
    return tuple(found)


def _shared_filesystem(client: Any, results_dir: Path) -> bool:
    """Whether every worker of ``client`` reads a file written here in ``results_dir``."""
    token = uuid.uuid4().hex
    probe = results_dir / f".probe-{token}.json"
    results_dir.mkdir(parents=True, exist_ok=True)
    write_text(probe, json.dumps(token))
    try:
        seen = client.run(read_json, probe)
    finally:
        probe.unlink()
    return all(value == token for value in seen.values())


@contextlib.contextmanager
def dask_client(jobs: int, scheduler: str | None, slurm: int | None = None) -> Iterator[Any]:
    """A dask ``Client`` of the running ``scheduler`` (at a ``tls://`` address: with the
    credentials of dask's configuration); of ``slurm`` Slurm jobs' workers
    (:func:`dprl.engine.slurm.slurm_cluster`); or of a ``LocalCluster`` of ``jobs``
    single-threaded worker processes (no memory limit, no dashboard), which listen on
    :data:`LOOPBACK` only and speak TLS with temporary credentials of their own (in this
    process's memory, handed to the workers as they start), whose workers ignore SIGINT and
    inherit this process's environment, the floating-point settings :mod:`dprl` pinned at
    import included, without the nanny's :data:`~dprl.engine.dask_workers.NANNY_UNSET`. A
    cluster started here is closed on exit."""
    import dask
    from distributed import Client, LocalCluster
    from distributed.security import Security

    with contextlib.ExitStack() as stack:
        if slurm is not None:
            from dprl.engine.slurm import slurm_cluster

            target = stack.enter_context(slurm_cluster(slurm))
        elif scheduler is None:
            stack.enter_context(_environment_kept())
            stack.enter_context(dask.config.set(nanny_config()))
            with _sigint_ignored():
                target = stack.enter_context(LocalCluster(
                    n_workers=jobs, threads_per_worker=1, processes=True, memory_limit=0,
                    host=LOOPBACK, protocol="tls://", security=Security.temporary(),
                    dashboard_address=None, silence_logs=logging.ERROR))
        else:
            target = scheduler
        try:
            client = stack.enter_context(Client(target, set_as_default=False,
                                                timeout=f"{PROBE_TIMEOUT_S:g}s"))
        except OSError as error:
            raise ConnectionError(f"cannot connect to the dask scheduler at {scheduler} "
                                  f"(--scheduler or {SCHEDULER_ENV}): {error}") from None
        yield client


@contextlib.contextmanager
def _environment_kept() -> Iterator[None]:
    """``os.environ`` restored on exit: a ``LocalCluster``'s nannies, which run in this
    process, set their workers' thread counts (``OMP_NUM_THREADS=1``, ...) in it before
    starting a worker."""
    before = dict(os.environ)
    try:
        yield
    finally:
        for name in set(os.environ) - set(before):
            del os.environ[name]
        os.environ.update(before)


def _check_workers(client: Any) -> dict[str, Any]:
    """What a worker must match (:func:`expected`), once every worker of ``client``
    (waiting for one, when there is none yet: :class:`_Watch`) is found to match it;
    :class:`WorkerRefused` otherwise, naming each refused worker and what differs, before
    any batch is submitted."""
    wanted = expected()
    _Watch(client).wait(computed=False)
    states = client.run(worker_state, sorted(wanted["environ"]), on_error="return")
    refused = []
    for address, state in sorted(states.items()):
        problem = (f"cannot run dprl ({type(state).__name__}: {state})"
                   if isinstance(state, BaseException) else mismatch(state, wanted))
        if problem:
            refused.append(f"{address}: {problem}")
    if refused:
        raise WorkerRefused(
            f"{len(refused)} of {len(states)} dask workers would not compute the same bits "
            "as this process; start them from a checkout with the same dprl sources (here: "
            f"commit {wanted['commit']}, no other change) with "
            "`env $(python -m dprl env) dask worker ...`:\n  " + "\n  ".join(refused))
    return wanted


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored inside the block (in the main thread; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
