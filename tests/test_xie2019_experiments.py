"""The chain experiments' step sizes are the ones tuned on public data (never typed in)."""

import numpy as np
import pytest

from dprl.experiments import load, status
from dprl.experiments.xie2019 import CHAIN, TUNING


@pytest.mark.skipif(status(TUNING.id) != "current", reason="no committed tuning result")
def test_tuned_steps_are_the_argmins_of_the_public_tuning_run():
    tuning, paper = TUNING.config("paper"), CHAIN.config("paper")
    mspbe = load(TUNING.id)["mspbe"].mean(axis=0)  # (sizes, steps)
    best = np.array(tuning.step_grid)[mspbe.argmin(axis=1)]
    assert paper.batch_sizes == tuning.batch_sizes and paper.step_grid == tuning.step_grid
    assert tuple(best) == paper.tuned_steps
    assert TUNING.config("paper").root_seed != paper.root_seed  # public data, other seeds


def test_private_and_public_configs_differ_only_where_they_must():
    tuning, paper = TUNING.config("paper"), CHAIN.config("paper")
    shared = ("n_states", "stay_prob", "gamma", "eps", "delta", "batch_sizes", "epochs", "clip")
    assert all(getattr(tuning, name) == getattr(paper, name) for name in shared)
