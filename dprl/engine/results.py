"""Stored results: where a result's files live, reading one back (checksum verified), whether
it is current, and the message that names the command regenerating it.

On a dask worker a run hands each batch the results it reads (:func:`provided_results`), and
:func:`load` and :func:`status` answer from them instead of the results folder."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dprl.engine.registry import TrialConfig, config_to_dict, get, own_settings
from dprl.engine.storage import read_sidecar, sha256
from dprl.paths import RESULTS_DIR


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


def result_paths(experiment_id: str, scale: str,
                 results_dir: Path | str = RESULTS_DIR) -> tuple[Path, Path, Path]:
    """(arrays file, provenance sidecar, partial folder) of a result."""
    stem = experiment_id if scale == "paper" else f"{experiment_id}.{scale}"
    base = Path(results_dir)
    return base / f"{stem}.npz", base / f"{stem}.json", base / f"{stem}.partial"


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


def current_arrays(experiment_id: str, results_dir: Path | str = RESULTS_DIR
                   ) -> dict[str, np.ndarray]:
    """The arrays of the stored paper-scale result of ``experiment_id``, read as another
    experiment's input (an evaluated policy, experts, a reference problem): it must be
    current, else a ``ValueError`` names its state and the command that regenerates it."""
    state = status(experiment_id, "paper", results_dir)
    if state != "current":
        raise ValueError(f"the stored {experiment_id} result {_STATES[state]}; run: "
                         f"{regenerate_command(experiment_id, 'paper', results_dir)}")
    return load(experiment_id, "paper", results_dir).arrays


def stored_at_paper_settings(experiment_id: str, config: TrialConfig,
                             results_dir: Path | str = RESULTS_DIR
                             ) -> dict[str, np.ndarray] | None:
    """A shared input (a reference problem) where it was committed: the arrays of
    ``experiment_id`` (:func:`current_arrays`, so it must be current) when ``config`` (any
    config with the fields of its paper config's class) has the paper config's own settings
    (:func:`~dprl.engine.registry.own_settings`), else None (the caller computes it)."""
    paper = get(experiment_id).config("paper")
    if own_settings(config, type(paper)) != own_settings(paper, type(paper)):
        return None
    return current_arrays(experiment_id, results_dir)


RECOMPUTE_ENV = "DPRL_RECOMPUTE"


_STATES = {"missing": "is missing",
           "corrupt": "is corrupt (its sidecar is unreadable or its arrays do not match its checksum)",
           "stale": "is stale (computed with a config that differs from the registered one)"}


class ResultNotCurrent(RuntimeError):
    """A chapter asked for a stored result that is missing, stale or corrupt."""

    @classmethod
    def of(cls, experiment_id: str, scale: str, results_dir: Path | str,
           state: str) -> ResultNotCurrent:
        """The error for the result in ``state`` (:func:`status`), naming the command that
        regenerates it and how to compute it in place instead."""
        return cls(f"the stored {scale}-scale result of {experiment_id!r} in {results_dir} "
                   f"{_STATES[state]}. Regenerate it with:\n    "
                   f"{regenerate_command(experiment_id, scale, results_dir)}\n"
                   f"(or compute it here, with a progress bar: pass recompute=True, or set "
                   f"{RECOMPUTE_ENV}=1 in the environment)")


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
