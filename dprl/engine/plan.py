"""One experiment of a run (:class:`Plan`): its config, files and batches, those already
saved, computing the rest in this process and writing the result with its provenance."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from dprl.engine.batches import (Part, assemble, compute_batch, prepare_partial, read_batch,
                                 saved_batches, trial_batches)
from dprl.engine.results import Result, result_paths
from dprl.engine.provenance import provenance
from dprl.engine.registry import Experiment, TrialConfig
from dprl.engine.storage import write_result


@dataclass(frozen=True)
class Plan:
    """One experiment of a run: its config, files, batches and those already saved."""

    experiment: Experiment
    scale: str
    config: TrialConfig
    results_dir: Path
    batches: tuple[tuple[int, int], ...]
    done: frozenset[tuple[int, int]]

    @classmethod
    def prepare(cls, experiment: Experiment, scale: str, results_dir: Path | str,
                resume: bool) -> Plan:
        """The plan of ``experiment``, its partial folder made (:func:`prepare_partial`)."""
        config = experiment.config(scale)
        partial = result_paths(experiment.id, scale, results_dir)[2]
        done = prepare_partial(partial, config, resume)
        return cls(experiment, scale, config, Path(results_dir).absolute(),
                   tuple(trial_batches(config)), frozenset(done))

    @property
    def partial(self) -> Path:
        return result_paths(self.experiment.id, self.scale, self.results_dir)[2]

    @property
    def todo(self) -> list[tuple[int, int]]:
        return [batch for batch in self.batches if batch not in self.done]

    def saved_trials(self) -> int:
        """Trials saved so far: all, once the result is written."""
        if not self.partial.exists():
            return self.config.n_trials
        return sum(stop - start for start, stop in saved_batches(self.partial))

    def run_here(self, bar: tqdm) -> Result:
        """Compute the batches left in this process, one after another; write the result."""
        for start, stop in self.todo:
            bar.update(compute_batch(self.experiment.id, self.scale, start, stop,
                                     self.partial))
        return self.write(assemble(*(read_batch(self.partial, start, stop)
                                     for start, stop in self.batches)))

    def write(self, part: Part) -> Result:
        """Write the assembled ``part`` as the result, with provenance; drop the batches."""
        record = provenance(self.experiment, self.scale, self.config, part.arrays,
                            part.seconds, part.cpu_seconds, part.workers)
        arrays_path, sidecar_path, partial = result_paths(self.experiment.id, self.scale,
                                                          self.results_dir)
        write_result(arrays_path, sidecar_path, part.arrays, record)
        shutil.rmtree(partial)
        return Result(part.arrays, record)
