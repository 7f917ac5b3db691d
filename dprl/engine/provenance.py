"""Provenance of a result: config, root seed, code version, packages, machine, compute time."""

from __future__ import annotations

import datetime
import functools
import hashlib
import importlib.metadata
import os
import platform
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dprl import floating_point
from dprl.engine.registry import Experiment, TrialConfig, config_to_dict
from dprl.paths import REPO_ROOT

#: The package whose sources :func:`source_digest` reads.
PACKAGE_DIR = Path(__file__).resolve().parents[1]
PACKAGES = ("dprl", "numpy", "scipy", "torch", "gymnasium", "box2d", "matplotlib",
            "dp-accounting")


def git_state(root: Path = REPO_ROOT) -> dict[str, Any]:
    """The commit checked out at ``root`` and whether the tree has uncommitted changes
    (results under ``data/results/``, what runs write, do not count)."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                                  text=True, timeout=30, check=True)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip()

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--", ".", ":(exclude)data/results")
    return {"commit": commit, "dirty": None if status is None else bool(status)}


@functools.lru_cache(maxsize=None)
def source_digest(package: Path = PACKAGE_DIR) -> str:
    """The sha256 of dprl's Python sources (each ``*.py`` file's path below ``package`` and
    bytes, in sorted order), read once per process: two processes with the same digest run
    the same dprl code, whatever their commits or uncommitted changes."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        if "__pycache__" not in path.parts:
            digest.update(path.relative_to(package).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


@functools.lru_cache(maxsize=None)
def process_commit() -> str | None:
    """The commit of this process's checkout when first asked (a worker's, at its first
    batch)."""
    return git_state()["commit"]


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages a result depends on (None when absent)."""
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def machine() -> dict[str, Any]:
    """The machine a result was computed on, its processor (vendor, model, SIMD flags:
    :func:`dprl.floating_point.processor`) and its floating-point pinning
    (:mod:`dprl.floating_point`: the variables in effect, and what kept it from them)."""
    pinned = {name: os.environ.get(name) for name in floating_point.settings()}
    return {"platform": platform.platform(), "processor": platform.machine(),
            "cpu": floating_point.processor(),
            "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "floating_point": pinned, "unpinned": floating_point.problems()}


def provenance(experiment: Experiment, scale: str, config: TrialConfig,
               arrays: dict[str, np.ndarray], wall_time_s: float,
               cpu_time_s: float, workers: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The JSON sidecar written next to every result file. ``wall_time_s``: the elapsed
    seconds of every batch, summed (one core's time on a quiet machine); ``cpu_time_s``: the
    CPU seconds of the processes that computed them, summed (what a loaded machine does
    not inflate). ``machine`` is this process's; ``workers`` (only when dask workers
    computed batches: :func:`worker_record` per batch) their machines
    (:func:`workers_summary`)."""
    record = {
        "experiment": experiment.id,
        "title": experiment.title,
        "chapter": experiment.chapter,
        "scale": scale,
        "root_seed": config.root_seed,
        "n_trials": config.n_trials,
        "config": config_to_dict(config),
        "arrays": {name: {"shape": list(a.shape), "dtype": str(a.dtype)}
                   for name, a in sorted(arrays.items())},
        "git": git_state(),
        "packages": package_versions(),
        "machine": machine(),
        "wall_time_s": round(wall_time_s, 3),
        "cpu_time_s": round(cpu_time_s, 3),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": f"python -m dprl run {experiment.id} --scale {scale}",
    }
    if workers:
        record["workers"] = workers_summary(workers)
    return record



def worker_record() -> dict[str, Any]:
    """The dask worker computing a batch: its host name, processor vendor and model, process
    id, the commit of its checkout and the digest of its dprl sources."""
    cpu = floating_point.processor()
    return {"hostname": platform.node(), "vendor": cpu["vendor"], "model": cpu["model"],
            "pid": os.getpid(), "commit": process_commit(), "source": source_digest()}


#: The fields of :func:`worker_record` that :func:`workers_summary` groups by.
MACHINE_FIELDS = ("hostname", "vendor", "model", "commit", "source")


def workers_summary(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The machines and code of the workers ``records`` (:func:`worker_record`, one per
    batch): per host name, processor, commit and source digest, how many worker processes
    computed how many batches."""
    machines: dict[tuple, list[int]] = {}
    for record in records:
        key = tuple(record.get(name) for name in MACHINE_FIELDS)
        machines.setdefault(key, []).append(record["pid"])
    return [{**dict(zip(MACHINE_FIELDS, key)), "workers": len(set(pids)),
             "batches": len(pids)}
            for key, pids in sorted(machines.items(), key=str)]
