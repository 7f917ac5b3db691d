"""The experiment machinery: registry, batched resumable runs, provenance, loader, spot-check."""

import dataclasses
import hashlib
import json
import subprocess
import sys

import numpy as np
import pytest

from dprl.__main__ import main
from dprl.experiments import (RECOMPUTE_ENV, Experiment, ResultNotCurrent, TrialConfig, get, load,
                              load_or_run, mismatched_trials, register, result_paths, run, status)
from dprl.engine import batches, runner
from dprl.engine.batches import compute_trials
from dprl.engine.results import current_arrays


@dataclasses.dataclass(frozen=True, kw_only=True)
class ToyConfig(TrialConfig):
    size: int = 3


CALLS: list[tuple[int, ...]] = []
FAIL_AFTER: list[int] = []  # raise once this many batches have been computed
SHIFT: list[float] = []  # added to the totals: code that no longer gives the stored bits


def toy_trials(config: ToyConfig, rngs):
    if FAIL_AFTER and len(CALLS) >= FAIL_AFTER[0]:
        raise KeyboardInterrupt("simulated interruption")
    CALLS.append(len(rngs))
    draws = np.stack([rng.standard_normal(config.size) for rng in rngs])
    return {"draws": draws, "total": draws.sum(axis=1) + sum(SHIFT)}


TOY = register(Experiment(
    id="test-toy", title="toy", chapter="none",
    configs={"smoke": ToyConfig(n_trials=7, root_seed=11, batch_size=3),
             "paper": ToyConfig(n_trials=12, root_seed=5, batch_size=5, size=4)},
    run_trials=toy_trials))


@pytest.fixture(autouse=True)
def _reset():
    CALLS.clear()
    FAIL_AFTER.clear()
    SHIFT.clear()


def test_run_writes_arrays_and_provenance(tmp_path):
    result = run("test-toy", "smoke", tmp_path, progress=False)
    arrays_path, sidecar_path, partial = result_paths("test-toy", "smoke", tmp_path)
    assert arrays_path.name == "test-toy.smoke.npz" and not partial.exists()
    assert result["draws"].shape == (7, 3) and CALLS == [3, 3, 1]
    record = json.loads(sidecar_path.read_text())
    assert record["config"] == {"n_trials": 7, "root_seed": 11, "batch_size": 3, "size": 3}
    assert record["root_seed"] == 11 and record["scale"] == "smoke"
    assert set(record) >= {"git", "packages", "machine", "wall_time_s", "cpu_time_s",
                           "created", "command"}
    assert 0 <= record["cpu_time_s"] <= record["wall_time_s"] + 0.05  # one thread per batch
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


def _interrupted_after_two_batches(tmp_path):
    """A paper-scale toy run stopped after its first two batches (trials 0-4, 5-9)."""
    CALLS.clear()
    FAIL_AFTER.append(2)
    with pytest.raises(KeyboardInterrupt):
        run("test-toy", "paper", tmp_path, progress=False)
    FAIL_AFTER.clear()
    CALLS.clear()
    return result_paths("test-toy", "paper", tmp_path)[2]


@pytest.mark.parametrize("damage", ["truncated", "misshapen"])
def test_a_damaged_saved_batch_is_set_aside_and_computed_again_alone(damage, tmp_path):
    reference = run("test-toy", "paper", tmp_path / "ref", progress=False)
    partial = _interrupted_after_two_batches(tmp_path)
    batch = sorted(partial.glob("batch-*.npz"))[1]
    if damage == "truncated":
        batch.write_bytes(batch.read_bytes()[:100])
    else:
        np.savez(batch, __seconds__=1.0, draws=np.zeros((1, 4)), total=np.zeros(1))
    with pytest.warns(RuntimeWarning, match=f"{batch.name} is damaged .*computed again"):
        resumed = run("test-toy", "paper", tmp_path, progress=False)
    assert CALLS == [5, 2]  # the damaged batch and the one never computed; the first is kept
    np.testing.assert_array_equal(resumed["draws"], reference["draws"])
    assert not partial.exists()  # the result is written: the partial folder is gone


@pytest.mark.parametrize("record", ["empty", "garbled", "other commit", "other config",
                                    "missing"])
def test_saved_batches_are_never_discarded_without_restart(record, tmp_path, capsys):
    partial = _interrupted_after_two_batches(tmp_path)
    marker = partial / "started.json"
    started = json.loads(marker.read_text())
    if record == "missing":
        marker.unlink()
    else:
        marker.write_text({"empty": "", "garbled": '{"config": ',
                           "other commit": json.dumps(dict(started, commit="0" * 40)),
                           "other config": json.dumps(dict(started, config={"size": 9}))}[record])
    saved = {path.name: path.read_bytes() for path in partial.glob("batch-*.npz")}
    with pytest.raises(ValueError, match="cannot be resumed.*--restart"):
        run("test-toy", "paper", tmp_path, progress=False)
    assert main(["run", "test-toy", "--scale", "paper", "--results-dir", str(tmp_path)]) == 1
    error = capsys.readouterr().err
    assert "--restart" in error and (record != "other commit" or "0" * 40 in error)
    assert {path.name: path.read_bytes() for path in partial.glob("batch-*.npz")} == saved
    assert CALLS == []
    assert main(["run", "test-toy", "--scale", "paper", "--restart",
                 "--results-dir", str(tmp_path)]) == 0
    assert CALLS == [5, 5, 2]


def test_a_partial_path_that_is_a_file_is_refused(tmp_path):
    result_paths("test-toy", "paper", tmp_path)[2].write_text("not a folder")
    with pytest.raises(ValueError, match="it is a file: move it away"):
        run("test-toy", "paper", tmp_path, progress=False)
    assert CALLS == []


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
    first = load_or_run("test-toy", "paper", recompute=True, results_dir=tmp_path,
                        progress=False)
    assert status("test-toy", "paper", tmp_path) == "current"
    CALLS.clear()
    np.testing.assert_array_equal(load_or_run("test-toy", "paper", results_dir=tmp_path)["draws"],
                                  first["draws"])
    assert CALLS == []  # loaded, not recomputed

    arrays_path, sidecar_path, _ = result_paths("test-toy", "paper", tmp_path)
    record = json.loads(sidecar_path.read_text())
    assert record["sha256"] == hashlib.sha256(arrays_path.read_bytes()).hexdigest()
    tampered = dict(first.arrays, total=first["total"] + np.eye(12, 1)[:, 0] * 1e-12)
    np.savez(arrays_path, **tampered)
    assert status("test-toy", "paper", tmp_path) == "corrupt"
    assert mismatched_trials("test-toy", [0], "paper", tmp_path) == [
        "test-toy: stored paper result is corrupt"]
    with pytest.raises(ValueError, match="does not match the checksum"):
        load("test-toy", "paper", tmp_path)

    # arrays regenerated by other code, with a matching checksum: the trials themselves differ
    record["sha256"] = hashlib.sha256(arrays_path.read_bytes()).hexdigest()
    sidecar_path.write_text(json.dumps(record))
    assert mismatched_trials("test-toy", [0, 1], "paper", tmp_path) == [
        "test-toy: trial 0, array 'total' differs"]
    with pytest.raises(ValueError, match=r"indices must be .* in \[0, 12\)"):
        mismatched_trials("test-toy", [12], "paper", tmp_path)

    record["config"]["size"] = 99
    sidecar_path.write_text(json.dumps(record))
    assert status("test-toy", "paper", tmp_path) == "stale"
    assert mismatched_trials("test-toy", [0], "paper", tmp_path) == [
        "test-toy: stored paper result is stale"]
    arrays_path.unlink()
    assert status("test-toy", "paper", tmp_path) == "missing"


def _spoil(state: str, tmp_path) -> None:
    """Leave the toy's smoke result in ``tmp_path`` missing, stale or corrupt."""
    if state == "missing":
        return
    run("test-toy", "smoke", tmp_path, progress=False)
    arrays_path, sidecar_path, _ = result_paths("test-toy", "smoke", tmp_path)
    if state == "stale":
        record = json.loads(sidecar_path.read_text())
        record["config"]["n_trials"] = 6
        sidecar_path.write_text(json.dumps(record))
    elif state == "corrupt-arrays":
        arrays_path.write_bytes(arrays_path.read_bytes()[:-7])
    else:  # a truncated sidecar
        sidecar_path.write_text(sidecar_path.read_text()[:40])
    CALLS.clear()


@pytest.mark.parametrize("state", ["missing", "stale", "corrupt-arrays", "corrupt-sidecar"])
def test_load_or_run_stops_with_the_command_and_computes_nothing(state, tmp_path, monkeypatch):
    monkeypatch.delenv(RECOMPUTE_ENV, raising=False)
    _spoil(state, tmp_path)
    arrays_path, sidecar_path, _ = result_paths("test-toy", "smoke", tmp_path)
    before = {path: path.read_bytes() for path in (arrays_path, sidecar_path) if path.exists()}
    with pytest.raises(ResultNotCurrent) as stopped:
        load_or_run("test-toy", "smoke", results_dir=tmp_path)
    message = str(stopped.value)
    assert f"is {state.split('-')[0]}" in message
    assert f"python -m dprl run test-toy --scale smoke --results-dir {tmp_path}" in message
    assert RECOMPUTE_ENV in message and "recompute=True" in message
    assert CALLS == []  # nothing computed, nothing written
    assert {path: path.read_bytes() for path in before} == before
    assert not result_paths("test-toy", "smoke", tmp_path)[2].exists()


@pytest.mark.parametrize("how", ["argument", "environment"])
@pytest.mark.parametrize("state", ["missing", "stale", "corrupt-arrays"])
def test_load_or_run_computes_when_asked_with_a_progress_bar(state, how, tmp_path, monkeypatch,
                                                             capsys):
    reference = run("test-toy", "smoke", tmp_path / "ref", progress=False)
    _spoil(state, tmp_path)
    CALLS.clear()
    capsys.readouterr()
    if how == "environment":
        monkeypatch.setenv(RECOMPUTE_ENV, "1")
        result = load_or_run("test-toy", "smoke", results_dir=tmp_path)
    else:
        monkeypatch.setenv(RECOMPUTE_ENV, "0")  # the argument wins over the environment
        result = load_or_run("test-toy", "smoke", recompute=True, results_dir=tmp_path)
    assert CALLS == [3, 3, 1] and status("test-toy", "smoke", tmp_path) == "current"
    np.testing.assert_array_equal(result["draws"], reference["draws"])
    bar = capsys.readouterr().err
    assert "test-toy: 100%" in bar and "7/7" in bar  # the progress bar, finished
    CALLS.clear()
    load_or_run("test-toy", "smoke", results_dir=tmp_path)
    assert CALLS == []  # current now: loaded, even with recomputation allowed


def test_load_or_run_loads_a_current_result_and_names_the_default_command(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setenv(RECOMPUTE_ENV, "yes")
    run("test-toy", "smoke", tmp_path, progress=False)
    CALLS.clear()
    load_or_run("test-toy", "smoke", results_dir=tmp_path)
    assert CALLS == []
    monkeypatch.setenv(RECOMPUTE_ENV, "sometimes")
    with pytest.raises(ValueError, match=f"{RECOMPUTE_ENV} must be 1 or 0"):
        load_or_run("test-toy", "smoke", results_dir=tmp_path / "empty")
    monkeypatch.delenv(RECOMPUTE_ENV)
    with pytest.raises(ValueError, match="unknown experiment 'test-tyo'"):
        load_or_run("test-tyo", "smoke", results_dir=tmp_path)
    with pytest.raises(ValueError, match="unknown scale 'huge'"):
        load_or_run("test-toy", "huge", results_dir=tmp_path)
    with pytest.raises(ResultNotCurrent, match=r"(?m)^    python -m dprl run test-toy "
                                               r"--scale paper$"):
        load_or_run("test-toy")  # the committed results folder holds no toy result


def test_saved_batches_of_another_commit_are_not_resumed(tmp_path, monkeypatch):
    FAIL_AFTER.append(2)
    with pytest.raises(KeyboardInterrupt):
        run("test-toy", "paper", tmp_path, progress=False)
    FAIL_AFTER.clear()
    CALLS.clear()
    monkeypatch.setattr(batches, "git_state", lambda: {"commit": "f" * 40, "dirty": False})
    with pytest.raises(ValueError, match="computed at commit .* and this is f{40}.*--restart"):
        run("test-toy", "paper", tmp_path, progress=False)
    run("test-toy", "paper", tmp_path, resume=False, progress=False)
    assert CALLS == [5, 5, 2]  # everything recomputed at the new commit, after --restart


def test_stray_files_in_the_partial_folder_are_ignored(tmp_path):
    partial = result_paths("test-toy", "paper", tmp_path)[2]
    FAIL_AFTER.append(1)
    with pytest.raises(KeyboardInterrupt):
        run("test-toy", "paper", tmp_path, progress=False)
    FAIL_AFTER.clear()
    (partial / "batch-notes.npz").write_text("not a batch")
    (partial / "tmp-000005-000010.npz").write_text("half written")
    CALLS.clear()
    result = run("test-toy", "paper", tmp_path, progress=False)
    assert CALLS == [5, 2] and result["draws"].shape == (12, 4)


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
    assert max(len(line) for line in listing.splitlines()) <= 100  # long settings wrap


def test_list_does_not_load_torch():
    """The catalogue (and so `python -m dprl list`) loads without torch, which takes
    seconds to import: torch loads only where a run computes."""
    done = subprocess.run([sys.executable, "-c", "import sys, dprl.experiments.catalogue; "
                           "print('torch' in sys.modules)"], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"


def test_parallel_batches_give_the_same_result(tmp_path):
    serial = run("primer-policy-evaluation", "smoke", tmp_path / "serial", progress=False)
    parallel = run("primer-policy-evaluation", "smoke", tmp_path / "parallel", progress=False,
                   jobs=2)
    assert serial.arrays.keys() == parallel.arrays.keys()
    for name, array in serial.arrays.items():
        assert np.array_equal(array, parallel[name], equal_nan=True), name
    with pytest.raises(ValueError, match="jobs"):
        run("primer-policy-evaluation", "smoke", tmp_path / "bad", jobs=0)


def test_results_written_by_runs_do_not_make_the_tree_dirty(tmp_path):
    import subprocess

    from dprl.engine.provenance import git_state

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "data" / "results").mkdir(parents=True)
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "data" / "results" / "r.json").write_text("{}\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    (tmp_path / "data" / "results" / "r.json").write_text('{"new": 1}\n')
    (tmp_path / "data" / "results" / "other.npz").write_bytes(b"0")
    assert git_state(tmp_path)["dirty"] is False
    (tmp_path / "code.py").write_text("x = 2\n")
    assert git_state(tmp_path)["dirty"] is True


def test_compute_by_part_sums_the_recorded_seconds(tmp_path):
    from dprl import floating_point
    from dprl.engine.report import compute_by_part

    record = run("test-toy", "paper", tmp_path, progress=False).provenance
    table = compute_by_part(tmp_path)
    rows = {row[0]: row for row in table.rows}
    assert rows.keys() == {"test", "all"} and rows["all"] == ("all",) + rows["test"][1:]
    assert rows["test"][1:3] == (1, "1 of 1")
    assert rows["test"][3] == pytest.approx(record["cpu_time_s"], abs=1e-3)
    assert rows["test"][4] == pytest.approx(record["cpu_time_s"] / 120, abs=1e-3)
    here = floating_point.processor()
    assert rows["test"][5] == f"{here['vendor']} {here['model']}"
    assert "<table" in table._repr_html_() and table.text().splitlines()[0].startswith("part")


def test_each_result_belongs_to_its_part_and_extensions_make_their_own():
    from dprl.engine.report import paper_of, part_of

    assert part_of("sharma2025-cartpole-training") == "sharma2025"
    assert part_of("sharma2025-hiv-long") == "sharma2025, longer runs"
    assert part_of("audit-xie2019-paper") == part_of("audit-sharma2025-dp-sgd") == "audit"
    assert paper_of("sharma2025-hiv-long") == paper_of("audit-sharma2025-release") == "sharma2025"
    assert paper_of("audit-gaussian") == "gaussian" and paper_of("primer-policy-evaluation") == "primer"


def test_compute_by_paper_adds_up_the_parts_of_each_paper():
    from dprl.engine.report import compute_by_part, paper_of

    parts, papers = ({row[0]: row[3] for row in compute_by_part(part=grouping).rows}
                     for grouping in (lambda i: i, paper_of))
    sharma = [seconds for name, seconds in parts.items() if "sharma2025" in name]
    assert len(sharma) > 40 and papers["sharma2025"] == pytest.approx(sum(sharma))
    assert papers["all"] == pytest.approx(parts["all"])


def test_remeasure_records_the_compute_of_an_identical_recomputation(tmp_path, capsys):
    run("test-toy", "smoke", tmp_path, progress=False)
    sidecar = result_paths("test-toy", "smoke", tmp_path)[1]
    record = json.loads(sidecar.read_text())
    del record["cpu_time_s"]  # as in the sidecars made before CPU time was recorded
    sidecar.write_text(json.dumps(record))
    assert main(["run", "test-toy", "--remeasure", "--results-dir", str(tmp_path)]) == 0
    assert "the same bits" in capsys.readouterr().out
    remeasured = json.loads(sidecar.read_text())
    assert status("test-toy", "smoke", tmp_path) == "current"
    assert remeasured["cpu_time_s"] == remeasured["remeasured"]["cpu_time_s"] >= 0
    assert remeasured["remeasured"]["machine"]["cpu"].keys() == {"vendor", "model", "flags"}
    assert {k: v for k, v in remeasured.items() if k not in ("cpu_time_s", "remeasured")} == record
    assert not any((tmp_path / "remeasure").iterdir())
    runner.remeasure("test-toy", "smoke", tmp_path, progress=False)  # a second time
    again = json.loads(sidecar.read_text())
    assert again["remeasured"]["previous_cpu_time_s"] == remeasured["cpu_time_s"]


def test_remeasurements_list_each_result_remeasured_after_a_recorded_time(tmp_path):
    from dprl.engine.report import remeasurements

    first = run("test-toy", "paper", tmp_path, progress=False).provenance["cpu_time_s"]
    assert not remeasurements(tmp_path).rows  # computed, never remeasured
    again = runner.remeasure("test-toy", "paper", tmp_path, progress=False).provenance
    (row,) = remeasurements(tmp_path).rows
    assert row[:3] == ("test-toy", first, again["cpu_time_s"])
    assert row[3] == pytest.approx(again["cpu_time_s"] / first) if first else np.isnan(row[3])
    assert row[4] == again["remeasured"]["created"][:10]


def test_remeasure_refuses_other_bits_and_keeps_the_stored_result(tmp_path, capsys):
    run("test-toy", "smoke", tmp_path, progress=False)
    sidecar = result_paths("test-toy", "smoke", tmp_path)[1]
    before = sidecar.read_text()
    SHIFT.append(1e-12)
    with pytest.raises(runner.NotReproduced, match="differs from the stored result in total;"):
        runner.remeasure("test-toy", "smoke", tmp_path, progress=False)
    assert sidecar.read_text() == before and status("test-toy", "smoke", tmp_path) == "current"
    assert main(["run", "test-toy", "--remeasure", "--results-dir", str(tmp_path)]) == 1
    assert "differs from the stored result" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", "--all", "--remeasure"])
    with pytest.raises(ValueError, match="is missing"):
        runner.remeasure("test-toy", "smoke", tmp_path / "other", progress=False)


def test_the_listing_wraps_at_the_width_asked_for():
    from dprl.engine.report import listing

    text = listing(scales=("smoke",), width=60)
    assert max(map(len, text.splitlines())) <= 60
    with pytest.raises(ValueError, match="width"):
        listing(width=5)


def test_the_provenance_summary_has_a_row_per_committed_result():
    from dprl.experiments import all_experiments
    from dprl.engine.report import provenance_summary

    table = provenance_summary()
    committed = [e.id for e in all_experiments() if status(e.id) != "missing"]
    assert [row[0] for row in table.rows] == committed
    assert all(row[-1] == f"python -m dprl run {row[0]} --scale paper" for row in table.rows)
    assert "<table" in table._repr_html_()


def test_an_input_is_read_only_from_a_current_paper_result(tmp_path):
    """``current_arrays`` (what experiments read their inputs with) returns the stored
    arrays of a current paper-scale result and refuses any other with its state and the
    command that regenerates it."""
    with pytest.raises(ValueError, match=r"test-toy result is missing; run: python -m dprl run "
                                         rf"test-toy --scale paper --results-dir {tmp_path}"):
        current_arrays("test-toy", tmp_path)
    stored = run("test-toy", "paper", tmp_path, progress=False)
    arrays = current_arrays("test-toy", tmp_path)
    assert arrays.keys() == stored.arrays.keys()
    assert all(np.array_equal(arrays[name], stored[name]) for name in arrays)
    sidecar_path = result_paths("test-toy", "paper", tmp_path)[1]
    record = json.loads(sidecar_path.read_text())
    record["config"]["size"] = 99
    sidecar_path.write_text(json.dumps(record))
    with pytest.raises(ValueError, match="test-toy result is stale"):
        current_arrays("test-toy", tmp_path)


def test_own_settings_are_the_fields_a_config_kind_adds_in_its_order():
    from dprl.engine.registry import own_settings

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Shared(TrialConfig):
        b: int = 1
        a: str = "x"

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Wider(TrialConfig):
        a: str = "y"
        c: float = 0.5
        b: int = 2

    wider = Wider(n_trials=3, root_seed=4, batch_size=2)
    assert own_settings(wider, Shared) == (2, "y")
    assert own_settings(Shared(n_trials=1, root_seed=0), Shared) == (1, "x")
    with pytest.raises(AttributeError):
        own_settings(TrialConfig(n_trials=1, root_seed=0), Shared)


def test_a_shared_input_is_read_where_committed_and_left_to_the_caller_elsewhere():
    """stored_at_paper_settings: the committed arrays for a config with the paper config's own
    settings, whatever its trials and seed; None for other settings (smoke)."""
    from dprl.engine.results import load, stored_at_paper_settings
    from dprl.experiments.xie2019.hiv import HIV

    committed = load("xie2019-hiv-reference").arrays
    stored = stored_at_paper_settings("xie2019-hiv-reference", HIV.config("paper"))
    assert stored.keys() == committed.keys()
    for name, array in committed.items():
        np.testing.assert_array_equal(stored[name], array)
    assert stored_at_paper_settings("xie2019-hiv-reference", HIV.config("smoke")) is None
