"""A registered experiment whose batches take 0.5 s, and the command line with it: the
subprocess that tests/test_cli.py interrupts with Ctrl-C. Registered at import, so that the
spawned workers (which import this script as their main module) know it too."""

import signal
import sys
import time

import numpy as np

from dprl.__main__ import main
from dprl.experiments.registry import Experiment, TrialConfig, register

CONFIG = TrialConfig(n_trials=24, root_seed=5, batch_size=2)
BATCH_SECONDS = 0.5


def slow_trials(config: TrialConfig, rngs) -> dict[str, np.ndarray]:
    time.sleep(BATCH_SECONDS)
    return {"x": np.stack([rng.standard_normal(3) for rng in rngs])}


register(Experiment(id="test-slow", title="a slow test experiment", chapter="none",
                    configs={"smoke": CONFIG, "paper": CONFIG}, run_trials=slow_trials))

if __name__ == "__main__":
    # Python leaves SIGINT ignored when its parent ignored it (a test run started in the
    # background): restore Ctrl-C's KeyboardInterrupt, which the test sends.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main(sys.argv[1:]))
