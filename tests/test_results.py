"""Committed results: sidecars, registration, both scales, batch invariance at smoke scale
(the spot-check of their trials is in test_spot_check_*.py)."""

import json
import zlib

import numpy as np
import pytest
from spot_check import COMMITTED, FAMILIES, SPOT_SEED, experiment_id

from dprl.experiments import RESULTS_DIR, all_experiments, get


def test_every_result_file_has_a_sidecar_and_a_registered_experiment():
    for path in RESULTS_DIR.glob("*.npz"):
        assert path.with_suffix(".json").exists(), f"{path.name} has no provenance sidecar"
    for path in COMMITTED:
        record = json.loads(path.read_text())
        get(record["experiment"])
        assert record["scale"] == "paper", f"{path.name}: only paper-scale results are committed"


def test_every_committed_result_is_spot_checked_by_exactly_one_family():
    for path in COMMITTED:
        families = [name for name, prefixes in FAMILIES.items()
                    if experiment_id(path).startswith(prefixes)]
        assert len(families) == 1, f"{path.name}: spot-check families {families}"


def test_every_registered_experiment_has_both_scales():
    for experiment in all_experiments():
        assert experiment.config("smoke").n_trials <= experiment.config("paper").n_trials


def alone_trials(n_trials: int, experiment_id: str) -> list[int]:
    """The trials that :func:`test_every_experiment_is_batch_invariant_at_smoke_scale`
    recomputes alone: the last (computed after every other in the batch, the one a stream or
    state shared across trials changes) and one drawn afresh each session (``SPOT_SEED``,
    as the spot-checks draw), so that over sessions every trial is recomputed alone."""
    key = zlib.crc32(experiment_id.encode())
    drawn = int(np.random.default_rng([SPOT_SEED, key]).integers(n_trials))
    return sorted({n_trials - 1, drawn})


@pytest.mark.parametrize("experiment_id", [e.id for e in all_experiments()])
def test_every_experiment_is_batch_invariant_at_smoke_scale(experiment_id):
    """Every trial of the smoke config computed in one batch; the trials of
    :func:`alone_trials` recomputed alone have the same bits."""
    from dprl.engine.batches import compute_trials

    experiment = get(experiment_id)
    config = experiment.config("smoke")
    together = compute_trials(experiment, config, range(config.n_trials))
    for index in alone_trials(config.n_trials, experiment_id):
        alone = compute_trials(experiment, config, [index])
        for name, array in together.items():
            assert np.array_equal(alone[name][0], array[index], equal_nan=True), (
                f"{experiment_id}: trial {index}, array {name!r} depends on its batch "
                f"(DPRL_SPOT_SEED={SPOT_SEED})")
