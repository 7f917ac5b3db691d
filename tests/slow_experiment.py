"""Registered test experiments, and the command line with them: the subprocess that the
tests interrupt with Ctrl-C, whose workers they kill or keep from the results folder.
Registered at import, so that the spawned workers (which import this script as their main
module) know them too.

- ``test-slow``: batches of 0.5 s (or ``DPRL_TEST_BATCH_SECONDS``: the real-Slurm test's run
  longer than a job's walltime, .ci/slurm-test);
- ``test-source`` and ``test-reader``, which reads its result (``after``) in the folder
  named by ``DPRL_TEST_RESULTS``; in a worker process (a child), that folder is hidden
  (every open, listing, write or removal under it raises PermissionError), as on a machine
  without the client's filesystem."""

import multiprocessing
import os
import signal
import sys
import time

import numpy as np

from dprl.__main__ import main
from dprl.engine.registry import Experiment, TrialConfig, register
from dprl.engine.results import load

CONFIG = TrialConfig(n_trials=24, root_seed=5, batch_size=2)
BATCH_SECONDS = float(os.environ.get("DPRL_TEST_BATCH_SECONDS", "0.5"))
RESULTS_ENV = "DPRL_TEST_RESULTS"
_PATH_EVENTS = {"open", "os.listdir", "os.scandir", "os.mkdir", "os.rename", "os.remove",
                "os.rmdir", "shutil.rmtree"}


def slow_trials(config: TrialConfig, rngs) -> dict[str, np.ndarray]:
    time.sleep(BATCH_SECONDS)
    return {"x": np.stack([rng.standard_normal(3) for rng in rngs])}


def reader_trials(config: TrialConfig, rngs) -> dict[str, np.ndarray]:
    source = load("test-source", "smoke", os.environ[RESULTS_ENV])["x"]
    return {"y": np.stack([source.sum(axis=0) + rng.standard_normal(3) for rng in rngs])}


def _hide(folder: str) -> None:
    """Every path event under ``folder`` raises PermissionError in this process."""
    def hook(event: str, args: tuple) -> None:
        if event in _PATH_EVENTS and any(
                isinstance(arg, (str, os.PathLike))
                and os.path.abspath(arg).startswith(folder) for arg in args[:2]):
            raise PermissionError(f"{args[0]}: hidden from the workers")

    sys.addaudithook(hook)


register(Experiment(id="test-slow", title="a slow test experiment", chapter="none",
                    configs={"smoke": CONFIG, "paper": CONFIG}, run_trials=slow_trials))
SOURCE = TrialConfig(n_trials=6, root_seed=7, batch_size=2)
register(Experiment(id="test-source", title="a result read by another", chapter="none",
                    configs={"smoke": SOURCE, "paper": SOURCE}, run_trials=slow_trials))
READER = TrialConfig(n_trials=4, root_seed=8, batch_size=1)
register(Experiment(id="test-reader", title="reads test-source", chapter="none",
                    configs={"smoke": READER, "paper": READER}, run_trials=reader_trials,
                    after=("test-source",)))
if os.environ.get(RESULTS_ENV) and multiprocessing.parent_process() is not None:
    _hide(os.path.abspath(os.environ[RESULTS_ENV]))

if __name__ == "__main__":
    # Python leaves SIGINT ignored when its parent ignored it (a test run started in the
    # background): restore Ctrl-C's KeyboardInterrupt, which the test sends.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main(sys.argv[1:]))
