"""Text reports on the registered experiments and their committed results."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

from dprl.engine.registry import SCALES, all_experiments, config_to_dict
from dprl.paths import RESULTS_DIR
from dprl.engine.results import load, status
from dprl.tables import Table
from dprl.validation import require_int


#: The width of the listing's lines (long settings wrap, indented under their scale).
WIDTH = 100


def listing(scales: tuple[str, ...] = SCALES, results_dir: Path | str = RESULTS_DIR,
            width: int = WIDTH) -> str:
    """Every experiment, its chapter, its settings at each of ``scales`` and the status of
    its result there (in ``results_dir``), in lines of at most ``width`` characters."""
    width = require_int("width", width, minimum=20)
    lines = []
    for experiment in all_experiments():
        lines += [textwrap.fill(f"{experiment.id}: {experiment.title}", width=width,
                                subsequent_indent="    ", break_on_hyphens=False),
                  f"  chapter: {experiment.chapter}"]
        for scale in scales:
            settings = ", ".join(f"{key}={_short(value)}" for key, value in
                                 config_to_dict(experiment.config(scale)).items())
            lines.append(textwrap.fill(
                f"{scale:5s} [{status(experiment.id, scale, results_dir)}] {settings}",
                width=width, initial_indent="  ", subsequent_indent="      ",
                break_on_hyphens=False))
    return "\n".join(lines)


def _short(value: object) -> str:
    """A setting as printed: a list of records (a training experiment's runs) by its length
    only (the sidecar holds them in full)."""
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return f"[{len(value)} runs]"
    return str(value)


def provenance_summary() -> Table:
    """For each committed paper-scale result: commit (marked * when the tree had
    uncommitted changes), root seed, trials, compute time, cores, numpy, whether numpy's
    floating point was pinned (:mod:`dprl.floating_point`) and the command regenerating it."""
    rows = []
    for experiment in all_experiments():
        if status(experiment.id) == "missing":
            continue
        record = load(experiment.id).provenance
        commit = (record["git"]["commit"] or "unknown")[:10] + ("*" if record["git"]["dirty"]
                                                                 else "")
        pinned = ("floating_point" in record["machine"]
                  and not record["machine"]["unpinned"])
        rows.append((experiment.id, commit, record["root_seed"], record["n_trials"],
                     record["wall_time_s"], record["machine"]["cpu_count"],
                     record["packages"]["numpy"], "yes" if pinned else "NO",
                     record["command"]))
    return Table(("result", "commit", "root seed", "trials", "compute (s)", "cores", "numpy",
                  "pinned", "regenerate"), rows)


def measured_on(record: dict) -> str:
    """The processor whose CPU seconds a sidecar records (a remeasurement's where there is
    one), as ``vendor model``; "unrecorded" for sidecars older than that record."""
    machine = record.get("remeasured", record)["machine"]
    cpu = machine.get("cpu")
    return "unrecorded" if cpu is None else f"{cpu['vendor']} {cpu['model']}"


def current_records(results_dir: Path | str = RESULTS_DIR) -> Iterator[tuple[str, dict]]:
    """``(id, provenance)`` of every registered experiment whose paper-scale result in
    ``results_dir`` is current, in registry order."""
    for experiment in all_experiments():
        if status(experiment.id, "paper", results_dir) == "current":
            yield experiment.id, load(experiment.id, "paper", results_dir).provenance


def remeasurements(results_dir: Path | str = RESULTS_DIR) -> Table:
    """Every current paper-scale result whose CPU time was remeasured (``python -m dprl run
    <id> --remeasure``) after one was recorded: the CPU seconds before and after, their
    ratio (NaN where nothing was recorded before), and when and on which processor."""
    rows = []
    for experiment_id, record in current_records(results_dir):
        again = record.get("remeasured")
        if again is None or "previous_cpu_time_s" not in again:
            continue
        before, after = again["previous_cpu_time_s"], again["cpu_time_s"]
        rows.append((experiment_id, before, after, after / before if before else float("nan"),
                     again["created"][:10], measured_on(record)))
    return Table(("result", "CPU s before", "CPU s now", "now / before", "remeasured",
                  "on"), rows)


#: Experiment-id endings that make a part of their own (:func:`part_of`): extensions of
#: Sharma et al. beyond the book's capped setting (issue 28) and its first populations (issue 40).
EXTENSIONS = {"-long": "longer runs", "-sgd": "Alg. 4's SGD",
              "-converged": "experts trained to convergence"}


def part_of(experiment_id: str) -> str:
    """The part of the book an experiment belongs to: its id up to the first '-', followed
    by the name of an extension (:data:`EXTENSIONS`) its id ends with; audits have none
    (``audit-sharma2025-dp-sgd`` audits Alg. 4, it is not the SGD extension)."""
    part = experiment_id.split("-")[0]
    extension = None if part == "audit" else next(
        (name for end, name in EXTENSIONS.items() if experiment_id.endswith(end)), None)
    return part if extension is None else f"{part}, {extension}"


def paper_of(experiment_id: str) -> str:
    """The paper an experiment reproduces or audits: its id's first part, the second for an
    audit (``audit-sharma2025-release``: ``sharma2025``; ``audit-gaussian``: ``gaussian``)."""
    parts = experiment_id.split("-")
    return parts[1] if parts[0] == "audit" and len(parts) > 1 else parts[0]


def compute_by_part(results_dir: Path | str = RESULTS_DIR,
                    part: Callable[[str], str] = part_of) -> Table:
    """The compute the committed paper-scale results of each part of the book (``part`` of
    an id: :func:`part_of`, or :func:`paper_of`) record: CPU seconds summed over their
    sidecars, for how many of them, as minutes on a 2-core machine (CPU seconds / 2 / 60),
    and the processors they were measured on; a last row sums the book."""
    parts: dict[str, list[dict]] = {}
    for experiment_id, record in current_records(results_dir):
        parts.setdefault(part(experiment_id), []).append(record)
    parts["all"] = [record for records in list(parts.values()) for record in records]
    rows = []
    for name, records in parts.items():
        timed = [r for r in records if "cpu_time_s" in r]
        cpu = float(sum(r["cpu_time_s"] for r in timed))
        rows.append((name, len(records), f"{len(timed)} of {len(records)}", cpu, cpu / 120,
                     ", ".join(sorted({measured_on(r) for r in timed})) or None))
    return Table(("part", "results", "CPU time recorded for", "CPU s", "2-core min",
                  "measured on"), rows)
