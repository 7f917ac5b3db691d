"""Batches of trials: computing them, saving each to the partial folder of a run, reading
them back and assembling them in trial order.

A run of an experiment splits its trials into batches of the config's ``batch_size``
(:func:`trial_batches`); each finished batch is saved at once, atomically, as
``batch-<start>-<stop>.npz`` with its elapsed and CPU seconds and the dask workers that
computed it (:class:`Part`), so an interrupted run keeps its finished work and resumes from
it (:func:`prepare_partial`). Used by :mod:`dprl.engine.runner` (in this process) and
:mod:`dprl.engine.dask_engine` (as dask tasks).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import uuid
import warnings
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dprl.engine.provenance import git_state
from dprl.engine.registry import Experiment, TrialConfig, config_to_dict, get
from dprl.engine.storage import read_json, write_text
from dprl.seeding import trial_generators


def compute_trials(experiment: Experiment, config: TrialConfig,
                   indices: Sequence[int]) -> dict[str, np.ndarray]:
    """Run the trials ``indices`` of ``experiment`` (any subset, in one batch)."""
    rngs = trial_generators(config.root_seed, indices)
    arrays = experiment.run_trials(config, rngs)
    for name, array in arrays.items():
        if np.shape(array)[:1] != (len(indices),):
            raise ValueError(
                f"{experiment.id}: array {name!r} has shape {np.shape(array)}; "
                f"its leading axis must be the {len(indices)} trials of the batch")
    return {name: np.asarray(array) for name, array in arrays.items()}


@dataclass(frozen=True)
class Part:
    """Trials computed together (a batch, or an experiment's batches once assembled), the
    elapsed and CPU seconds of their computation, and the dask workers that computed them
    (:func:`~dprl.engine.provenance.worker_record`; empty when run here)."""

    arrays: dict[str, np.ndarray]
    seconds: float
    cpu_seconds: float
    workers: tuple[dict[str, Any], ...] = ()


def trial_batches(config: TrialConfig) -> list[tuple[int, int]]:
    """The ``(start, stop)`` of every batch of ``config``: ``batch_size`` trials each, the
    last one the rest."""
    size = config.batch_size
    return [(start, min(start + size, config.n_trials))
            for start in range(0, config.n_trials, size)]


_BATCH_FILE = re.compile(r"batch-(\d{6})-(\d{6})\.npz")


def batch_path(partial: Path, start: int, stop: int, prefix: str = "batch") -> Path:
    """Where trials ``start .. stop - 1`` are saved in ``partial`` (another ``prefix``: a
    temporary name, while being written)."""
    return partial / f"{prefix}-{start:06d}-{stop:06d}.npz"


def prepare_partial(partial: Path, config: TrialConfig, resume: bool) -> set[tuple[int, int]]:
    """Make the partial folder for ``config``; return the batches it already holds.

    Saved batches are resumed only when they were computed with the same config at the same
    commit (so a result never mixes batches of different code); batches of another config or
    commit, or whose record (``started.json``) is missing or unreadable, stop the run with a
    ValueError naming ``--restart``. Only ``resume=False`` (``--restart``) discards saved
    batches. A damaged batch is set aside (renamed ``*.damaged``, with a warning) and
    computed again alone.
    """
    if partial.exists() and not partial.is_dir():
        raise ValueError(f"{partial} should be the folder of the run's saved batches, but it is "
                         "a file: move it away")
    marker = partial / "started.json"
    wanted = {"config": config_to_dict(config), "commit": git_state()["commit"]}
    if partial.exists() and not resume:
        shutil.rmtree(partial)
    elif partial.exists() and saved_batches(partial):
        recorded = read_json(marker)
        if recorded != wanted:
            raise ValueError(_mismatch(partial, recorded, wanted))
    partial.mkdir(parents=True, exist_ok=True)
    write_text(marker, json.dumps(wanted, indent=1))
    return {(start, stop) for start, stop in sorted(saved_batches(partial))
            if _intact(batch_path(partial, start, stop), stop - start)}


def _mismatch(partial: Path, recorded: Any, wanted: dict[str, Any]) -> str:
    """Why the batches saved in ``partial`` cannot be resumed, and what to do."""
    advice = "rerun with --restart to discard them"
    if not isinstance(recorded, dict) or recorded.keys() != wanted.keys():
        why = (f"its record {partial / 'started.json'} is missing or unreadable, so they "
               "cannot be matched to a config and commit")
    elif recorded["config"] != wanted["config"]:
        why = "they were computed with another config"
    else:
        why = (f"they were computed at commit {recorded['commit']}, and this is "
               f"{wanted['commit']}")
        advice += f", or check out {recorded['commit']} to finish that run"
    return f"the saved batches in {partial} cannot be resumed: {why}; {advice}"


def _intact(path: Path, n_trials: int) -> bool:
    """Whether ``path`` is a readable batch of ``n_trials`` trials; a damaged one is renamed
    ``*.damaged`` (with a warning) so that its trials are computed again."""
    try:
        with np.load(path) as stored:
            problem = None if "__seconds__" in stored.files and all(
                stored[name].shape[:1] == (n_trials,) for name in stored.files
                if name not in _META) else "missing or misshapen arrays"
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        problem = f"{type(error).__name__}: {error}"
    if problem is None:
        return True
    aside = path.with_name(path.name + ".damaged")
    os.replace(path, aside)
    warnings.warn(f"the saved batch {path} is damaged ({problem}); it is set aside as "
                  f"{aside.name} and its trials are computed again", RuntimeWarning,
                  stacklevel=3)
    return False


def saved_batches(partial: Path) -> set[tuple[int, int]]:
    """The ``(start, stop)`` of every batch saved in ``partial``."""
    found = (_BATCH_FILE.fullmatch(path.name) for path in partial.iterdir())
    return {(int(m[1]), int(m[2])) for m in found if m}


def compute(experiment_id: str, scale: str, start: int, stop: int,
            workers: tuple[dict[str, Any], ...] = ()) -> Part:
    """Trials ``start .. stop - 1`` of ``experiment_id``, timed, computed by ``workers``."""
    experiment = get(experiment_id)
    started, cpu_started = time.perf_counter(), time.process_time()
    arrays = compute_trials(experiment, experiment.config(scale), range(start, stop))
    return Part(arrays, time.perf_counter() - started, time.process_time() - cpu_started,
                workers)


def compute_batch(experiment_id: str, scale: str, start: int, stop: int, partial: Path) -> int:
    """Compute trials ``start .. stop - 1`` here and save them as one batch; returns their
    number."""
    save_batch(partial, start, stop, compute(experiment_id, scale, start, stop))
    return stop - start


def save_batch(partial: Path, start: int, stop: int, part: Part) -> None:
    """Write one batch atomically (a crash leaves no half-written batch behind), with its
    elapsed and CPU seconds and its workers. The temporary file's name is unique: two
    workers that compute the same batch (one a cluster thought lost) cannot write into each
    other's."""
    final = batch_path(partial, start, stop)
    temporary = batch_path(partial, start, stop, f"tmp-{uuid.uuid4().hex}")
    np.savez(temporary, __seconds__=np.float64(part.seconds),
             __cpu_seconds__=np.float64(part.cpu_seconds),
             __workers__=np.str_(json.dumps(part.workers)), **part.arrays)
    os.replace(temporary, final)


_META = ("__seconds__", "__cpu_seconds__", "__workers__")


def read_batch(partial: Path, start: int, stop: int) -> Part:
    """The saved batch of trials ``start .. stop - 1`` (CPU seconds NaN, workers unknown,
    where a batch predates their recording)."""
    with np.load(batch_path(partial, start, stop)) as stored:
        return Part({name: stored[name] for name in stored.files if name not in _META},
                    float(stored["__seconds__"]),
                    float(stored["__cpu_seconds__"]) if "__cpu_seconds__" in stored.files
                    else float("nan"),
                    tuple(json.loads(str(stored["__workers__"])))
                    if "__workers__" in stored.files else ())


def assemble(*parts: Part) -> Part:
    """``parts`` (in trial order) as one: arrays concatenated, seconds summed."""
    names = parts[0].arrays.keys()
    return Part({name: np.concatenate([part.arrays[name] for part in parts]) for name in names},
                sum(part.seconds for part in parts), sum(part.cpu_seconds for part in parts),
                sum((part.workers for part in parts), ()))
