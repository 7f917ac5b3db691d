"""Committed results must be what the code makes: recompute random trials, compare exactly."""

import json
import os

import numpy as np
import pytest

from dprl.experiments import RESULTS_DIR, all_experiments, get, load, mismatched_trials, status

COMMITTED = sorted(path for path in RESULTS_DIR.glob("*.json"))
# A fresh choice of trials on every run; set DPRL_SPOT_SEED to replay a failing choice.
SPOT_SEED = int(os.environ.get("DPRL_SPOT_SEED", np.random.SeedSequence().entropy % 2**32))


def test_every_result_file_has_a_sidecar_and_a_registered_experiment():
    for path in RESULTS_DIR.glob("*.npz"):
        assert path.with_suffix(".json").exists(), f"{path.name} has no provenance sidecar"
    for path in COMMITTED:
        record = json.loads(path.read_text())
        get(record["experiment"])
        assert record["scale"] == "paper", f"{path.name}: only paper-scale results are committed"


@pytest.mark.parametrize("sidecar", COMMITTED, ids=[p.stem for p in COMMITTED])
def test_random_trials_of_committed_result_recompute_exactly(sidecar):
    experiment_id = json.loads(sidecar.read_text())["experiment"]
    assert status(experiment_id) == "current", (
        f"{experiment_id}: committed result is stale; rerun python -m dprl run "
        f"{experiment_id} --scale paper")
    n_trials = load(experiment_id).provenance["n_trials"]
    rng = np.random.default_rng([SPOT_SEED, len(experiment_id)])
    indices = sorted(rng.choice(n_trials, size=min(2, n_trials), replace=False).tolist())
    assert mismatched_trials(experiment_id, indices) == [], (
        f"trials {indices} (DPRL_SPOT_SEED={SPOT_SEED})")


def test_every_registered_experiment_has_both_scales():
    for experiment in all_experiments():
        assert experiment.config("smoke").n_trials <= experiment.config("paper").n_trials


@pytest.mark.parametrize("experiment_id", [e.id for e in all_experiments()])
def test_every_experiment_is_batch_invariant_at_smoke_scale(experiment_id):
    from dprl.experiments.runner import compute_trials

    experiment = get(experiment_id)
    config = experiment.config("smoke")
    together = compute_trials(experiment, config, range(config.n_trials))
    for index in range(config.n_trials):
        alone = compute_trials(experiment, config, [index])
        for name, array in together.items():
            assert np.array_equal(alone[name][0], array[index], equal_nan=True), (
                f"{experiment_id}: trial {index}, array {name!r} depends on its batch")
