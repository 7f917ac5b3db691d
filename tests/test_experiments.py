"""The experiment machinery: registry, batched resumable runs, provenance, loader, spot-check."""

import dataclasses
import json

import numpy as np
import pytest

from dprl.__main__ import main
from dprl.experiments import (Experiment, TrialConfig, get, load, load_or_run,
                              mismatched_trials, register, result_paths, run, status)
from dprl.experiments.runner import compute_trials


@dataclasses.dataclass(frozen=True, kw_only=True)
class ToyConfig(TrialConfig):
    size: int = 3


CALLS: list[tuple[int, ...]] = []
FAIL_AFTER: list[int] = []  # raise once this many batches have been computed


def toy_trials(config: ToyConfig, rngs):
    if FAIL_AFTER and len(CALLS) >= FAIL_AFTER[0]:
        raise KeyboardInterrupt("simulated interruption")
    CALLS.append(len(rngs))
    draws = np.stack([rng.standard_normal(config.size) for rng in rngs])
    return {"draws": draws, "total": draws.sum(axis=1)}


TOY = register(Experiment(
    id="test-toy", title="toy", chapter="none",
    configs={"smoke": ToyConfig(n_trials=7, root_seed=11, batch_size=3),
             "paper": ToyConfig(n_trials=12, root_seed=5, batch_size=5, size=4)},
    run_trials=toy_trials))


@pytest.fixture(autouse=True)
def _reset():
    CALLS.clear()
    FAIL_AFTER.clear()


def test_run_writes_arrays_and_provenance(tmp_path):
    result = run("test-toy", "smoke", tmp_path, progress=False)
    arrays_path, sidecar_path, partial = result_paths("test-toy", "smoke", tmp_path)
    assert arrays_path.name == "test-toy.smoke.npz" and not partial.exists()
    assert result["draws"].shape == (7, 3) and CALLS == [3, 3, 1]
    record = json.loads(sidecar_path.read_text())
    assert record["config"] == {"n_trials": 7, "root_seed": 11, "batch_size": 3, "size": 3}
    assert record["root_seed"] == 11 and record["scale"] == "smoke"
    assert set(record) >= {"git", "packages", "machine", "wall_time_s", "created", "command"}
    assert record["packages"]["numpy"] == np.__version__
    assert len(record["git"]["commit"] or "0" * 40) == 40
    assert record["arrays"]["draws"] == {"shape": [7, 3], "dtype": "float64"}
    assert result_paths("test-toy", "paper", tmp_path)[0].name == "test-toy.npz"


def test_any_trial_recomputed_alone_matches_its_batch(tmp_path):
    result = run("test-toy", "smoke", tmp_path, progress=False)
    for index in range(7):
        alone = compute_trials(TOY, TOY.config("smoke"), [index])
        np.testing.assert_array_equal(alone["draws"][0], result["draws"][index])
    assert mismatched_trials("test-toy", [0, 4, 6], "smoke", tmp_path) == []


def test_interrupted_run_resumes_without_recomputing_finished_batches(tmp_path):
    reference = run("test-toy", "paper", tmp_path / "ref", progress=False)
    CALLS.clear()
    FAIL_AFTER.append(2)
    with pytest.raises(KeyboardInterrupt):
        run("test-toy", "paper", tmp_path, progress=False)
    partial = result_paths("test-toy", "paper", tmp_path)[2]
    assert len(list(partial.glob("batch-*.npz"))) == 2
    FAIL_AFTER.clear()
    CALLS.clear()
    resumed = run("test-toy", "paper", tmp_path, progress=False)
    assert CALLS == [2]  # only the last batch (trials 10, 11) was computed
    np.testing.assert_array_equal(resumed["draws"], reference["draws"])


def test_restart_discards_partial_batches(tmp_path):
    FAIL_AFTER.append(1)
    with pytest.raises(KeyboardInterrupt):
        run("test-toy", "paper", tmp_path, progress=False)
    FAIL_AFTER.clear()
    CALLS.clear()
    run("test-toy", "paper", tmp_path, resume=False, progress=False)
    assert CALLS == [5, 5, 2]


def test_status_loader_and_spot_check_detect_stale_or_tampered_results(tmp_path):
    assert status("test-toy", "paper", tmp_path) == "missing"
    with pytest.raises(FileNotFoundError, match="python -m dprl run test-toy --scale paper"):
        load("test-toy", "paper", tmp_path)
    first = load_or_run("test-toy", "paper", results_dir=tmp_path)
    assert status("test-toy", "paper", tmp_path) == "current"
    CALLS.clear()
    np.testing.assert_array_equal(load_or_run("test-toy", "paper", results_dir=tmp_path)["draws"],
                                  first["draws"])
    assert CALLS == []  # loaded, not recomputed

    arrays_path, sidecar_path, _ = result_paths("test-toy", "paper", tmp_path)
    tampered = dict(first.arrays, total=first["total"] + np.eye(12, 1)[:, 0] * 1e-12)
    np.savez(arrays_path, **tampered)
    assert mismatched_trials("test-toy", [0, 1], "paper", tmp_path) == [
        "test-toy: trial 0, array 'total' differs"]

    record = json.loads(sidecar_path.read_text())
    record["config"]["size"] = 99
    sidecar_path.write_text(json.dumps(record))
    assert status("test-toy", "paper", tmp_path) == "stale"
    assert mismatched_trials("test-toy", [0], "paper", tmp_path)[0].endswith(
        "stored config differs from the registered paper config")


def test_registry_rejects_bad_experiments():
    with pytest.raises(ValueError, match="already registered"):
        register(dataclasses.replace(TOY, title="other"))
    with pytest.raises(ValueError, match="exactly the scales"):
        Experiment(id="x", title="x", chapter="x", configs={"smoke": TOY.config("smoke")},
                   run_trials=toy_trials)
    with pytest.raises(ValueError, match="unknown experiment"):
        get("no-such-experiment")
    with pytest.raises(ValueError, match="unknown scale"):
        TOY.config("huge")
    with pytest.raises(ValueError, match="n_trials must be >= 1"):
        ToyConfig(n_trials=0, root_seed=1)


def test_batch_with_wrong_leading_axis_is_rejected():
    bad = Experiment(id="bad", title="bad", chapter="none", configs=TOY.configs,
                     run_trials=lambda config, rngs: {"x": np.zeros(len(rngs) + 1)})
    with pytest.raises(ValueError, match="leading axis must be the 2 trials"):
        compute_trials(bad, bad.config("smoke"), [0, 1])


def test_command_line_run_and_list(tmp_path, capsys):
    assert main(["run", "test-toy", "--results-dir", str(tmp_path)]) == 0
    assert "wrote test-toy (smoke): 7 trials" in capsys.readouterr().out
    assert main(["list"]) == 0
    listing = capsys.readouterr().out
    assert "test-toy: toy" in listing and "paper" in listing
