"""Text reports on the registered experiments and their committed results."""

from __future__ import annotations

import textwrap
from pathlib import Path

from dprl.experiments.registry import SCALES, all_experiments, config_to_dict
from dprl.experiments.runner import RESULTS_DIR, load, status
from dprl.tables import Table


#: The width of the listing's lines (long settings wrap, indented under their scale).
WIDTH = 100


def listing(scales: tuple[str, ...] = SCALES, results_dir: Path | str = RESULTS_DIR) -> str:
    """Every experiment, its chapter, its settings at each of ``scales`` and the status of
    its result there (in ``results_dir``)."""
    lines = []
    for experiment in all_experiments():
        lines += [textwrap.fill(f"{experiment.id}: {experiment.title}", width=WIDTH,
                                subsequent_indent="    "), f"  chapter: {experiment.chapter}"]
        for scale in scales:
            settings = ", ".join(f"{key}={_short(value)}" for key, value in
                                 config_to_dict(experiment.config(scale)).items())
            lines.append(textwrap.fill(
                f"{scale:5s} [{status(experiment.id, scale, results_dir)}] {settings}",
                width=WIDTH, initial_indent="  ", subsequent_indent="      ",
                break_on_hyphens=False))
    return "\n".join(lines)


def _short(value: object) -> str:
    """A setting as printed: a list of records (a training experiment's runs) by its length
    only (the sidecar holds them in full)."""
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return f"[{len(value)} runs]"
    return str(value)


def provenance_summary() -> str:
    """For each committed paper-scale result: commit, seed, trials, machine, compute time and
    whether numpy's floating point was pinned (:mod:`dprl.floating_point`)."""
    lines = []
    for experiment in all_experiments():
        if status(experiment.id) == "missing":
            continue
        record = load(experiment.id).provenance
        commit = (record["git"]["commit"] or "unknown")[:12]
        dirty = " (uncommitted changes)" if record["git"]["dirty"] else ""
        pinned = ("pinned" if "floating_point" in record["machine"]
                  and not record["machine"]["unpinned"] else "NOT pinned")
        lines.append(
            f"{experiment.id}: commit {commit}{dirty}, root seed {record['root_seed']}, "
            f"{record['n_trials']} trials, {record['wall_time_s']:.4g} s of compute on "
            f"{record['machine']['cpu_count']} cores, numpy {record['packages']['numpy']}, "
            f"floating point {pinned}; regenerate: {record['command']}")
    return "\n".join(lines) or "no committed paper-scale results"


def measured_on(record: dict) -> str:
    """The processor whose CPU seconds a sidecar records (a remeasurement's where there is
    one), as ``vendor model``; "unrecorded" for sidecars older than that record."""
    machine = record.get("remeasured", record)["machine"]
    cpu = machine.get("cpu")
    return "unrecorded" if cpu is None else f"{cpu['vendor']} {cpu['model']}"


#: Experiment-id endings that make a part of their own (:func:`part_of`): Sharma et al.'s
#: longer runs, an extension beyond the book's capped setting (issue 28).
EXTENSIONS = {"-long": "longer runs"}


def part_of(experiment_id: str) -> str:
    """The part of the book an experiment belongs to: its id up to the first '-', followed
    by the name of an extension (:data:`EXTENSIONS`) its id ends with."""
    part = experiment_id.split("-")[0]
    extension = next((name for end, name in EXTENSIONS.items() if experiment_id.endswith(end)),
                     None)
    return part if extension is None else f"{part}, {extension}"


def compute_by_part(results_dir: Path | str = RESULTS_DIR) -> Table:
    """The compute the committed paper-scale results of each part of the book
    (:func:`part_of`) record: CPU seconds summed over their sidecars, for how many of them,
    as minutes on a 2-core machine (CPU seconds / 2 / 60), and the processors they were
    measured on; a last row sums the book."""
    parts: dict[str, list[dict]] = {}
    for experiment in all_experiments():
        if status(experiment.id, "paper", results_dir) == "current":
            record = load(experiment.id, "paper", results_dir).provenance
            parts.setdefault(part_of(experiment.id), []).append(record)
    parts["all"] = [record for records in list(parts.values()) for record in records]
    rows = []
    for part, records in parts.items():
        timed = [r for r in records if "cpu_time_s" in r]
        cpu = float(sum(r["cpu_time_s"] for r in timed))
        rows.append((part, len(records), f"{len(timed)} of {len(records)}", cpu, cpu / 120,
                     ", ".join(sorted({measured_on(r) for r in timed})) or None))
    return Table(("part", "results", "CPU time recorded for", "CPU s", "2-core min",
                  "measured on"), rows)
