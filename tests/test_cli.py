"""The command line as a user meets it: one-line errors and exit statuses, help texts,
Ctrl-C during a parallel run and its resumption, corrupt sidecars, and run --all's order."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dprl.__main__ import main
from dprl.bench import BENCHMARKS
from dprl.experiments import all_experiments, get, load, result_paths, status
from dprl.engine.registry import config_to_dict, run_order
from dprl.engine.run_all import compute_table, run_all
from dprl.engine.storage import write_result
from dprl.paths import REPO_ROOT
from dprl.seeding import trial_generators


@pytest.mark.parametrize("args,message", [
    (["run", "nosuch"], "python -m dprl run: error: argument experiment: unknown experiment "
                        "'nosuch' (python -m dprl list shows them all)"),
    (["run", "xie2019-chain", "--jobs", "-1"],
     "python -m dprl run: error: argument --jobs: must be an integer >= 1, got '-1'"),
    (["run", "xie2019-chain", "--jobs", "two"],
     "python -m dprl run: error: argument --jobs: must be an integer >= 1, got 'two'"),
    (["run"], "python -m dprl run: error: give one experiment id or --all"),
    (["run", "xie2019-chain", "--all"], "python -m dprl run: error: give one experiment id or --all"),
    (["run", "xie2019-chain", "--scale", "huge"], "python -m dprl run: error: argument --scale: "
                                                  "invalid choice: 'huge'"),
    (["bench", "nosuch"], "python -m dprl bench: error: argument name: unknown benchmark "
                          "'nosuch'; known: batching-ceiling, chain-sampler,"),
])
def test_bad_arguments_give_one_line_and_exit_status_2(args, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(args)
    out, err = capsys.readouterr()
    assert exit_.value.code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(message), err


def test_an_unknown_experiment_ends_the_process_without_a_traceback():
    done = subprocess.run([sys.executable, "-m", "dprl", "run", "nosuch"], cwd=REPO_ROOT,
                          text=True, capture_output=True, timeout=300)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == ("python -m dprl run: error: argument experiment: unknown experiment "
                           "'nosuch' (python -m dprl list shows them all)\n")


def test_run_help_documents_every_argument_with_its_default(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--help"])
    text = capsys.readouterr().out
    assert exit_.value.code == 0 and "`" not in text
    for argument, default in [("--scale", "smoke"), ("--jobs", "1"),
                              ("--results-dir", "data/results")]:
        help_ = re.search(rf"\n  {argument}.*?(?=\n  -|\Z)", text, re.S)[0]
        unwrapped = re.sub(r"(?<=-)\n\s+", "", help_)  # argparse also wraps at a path's hyphens
        assert re.search(rf"\(default:\s+\S*{default}\)", unwrapped), (argument, help_)
    for flag in ("--all", "--restart", "--no-shared-fs", "--remeasure"):  # off unless given
        help_ = re.search(rf"\n  {flag}.*?(?=\n  -|\Z)", text, re.S)[0]
        assert "default" not in help_, (flag, help_)
    assert text.count("(default:") == 3 and "(default: False)" not in text
    assert re.search(r"\n  experiment\s+experiment id", text)


def test_bench_help_lists_every_benchmark(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    text = capsys.readouterr().out
    assert "`" not in text
    for name in BENCHMARKS:
        assert f"\n  {name}: " in text


def test_top_help_has_no_rst_markup(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "`" not in capsys.readouterr().out


def test_quick_benchmark_goals_are_not_judged(capsys):
    assert main(["bench", "--quick", "prefix-counts", "ou-scaling"]) == 0
    out = capsys.readouterr().out
    assert out.count("n/a at quick size") == 2 and "MISSED" not in out and ": met" not in out


def _result_files(tmp_path: Path, experiment_id: str, scale: str = "smoke") -> tuple[Path, Path]:
    arrays, sidecar, _ = result_paths(experiment_id, scale, tmp_path)
    record = {"config": config_to_dict(get(experiment_id).config(scale)), "wall_time_s": 2.5}
    write_result(arrays, sidecar, {"x": np.arange(3.0)}, record)
    return arrays, sidecar


@pytest.mark.parametrize("damage", ["truncate", "not-a-record", "unreadable"])
def test_list_reports_a_damaged_sidecar_as_corrupt(tmp_path, capsys, damage):
    _, sidecar = _result_files(tmp_path, "xie2019-chain")
    assert status("xie2019-chain", "smoke", tmp_path) == "current"
    if damage == "truncate":
        sidecar.write_text(sidecar.read_text()[:40])
    elif damage == "not-a-record":
        sidecar.write_text("[1, 2]")
    else:
        sidecar.unlink()
        sidecar.mkdir()  # exists, cannot be read as a file
    assert main(["list", "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"xie2019-chain: .*\n  chapter: .*\n  smoke \[corrupt\]", out)
    with pytest.raises(ValueError, match="unreadable; regenerate it: python -m dprl run "
                                         "xie2019-chain --scale smoke"):
        load("xie2019-chain", "smoke", tmp_path)


def _saved(partial: Path) -> int:
    return 2 * len(list(partial.glob("batch-*.npz"))) if partial.exists() else 0


def test_ctrl_c_keeps_finished_batches_and_the_same_command_resumes(tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) during run --jobs 2:
    the queued batches are cancelled at once, the finished ones kept, one message and exit
    status 130, no traceback; the same command resumes from the saved count and gives the
    same bits as trials computed alone."""
    command = [sys.executable, "tests/slow_experiment.py", "run", "test-slow", "--jobs", "2",
               "--results-dir", str(tmp_path)]
    partial = result_paths("test-slow", "smoke", tmp_path)[2]
    process = subprocess.Popen(command, cwd=REPO_ROOT, text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 600
    while _saved(partial) < 4 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.02)
    assert process.poll() is None and _saved(partial) >= 4, "the run did not get going"
    before = _saved(partial)
    os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=120)
    saved = _saved(partial)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert f"test-slow: {saved}/24 trials saved; rerun the same command to resume" in err
    # the queued batches never started: at most what the 2 workers held finished after Ctrl-C,
    # each worker 2 batches of 2 trials (dask's worker-saturation 1.1 gives a one-thread worker
    # a running and a ready batch, and the ready one may start as the signal arrives)
    assert before <= saved <= before + 2 * 2 * 2 and saved < 24
    time.sleep(1.0)
    assert _saved(partial) == saved, "a worker kept computing after the interruption"

    resumed = subprocess.run(command, cwd=REPO_ROOT, text=True, capture_output=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert re.search(r"(\d+)/24", resumed.stderr)[1] == str(saved), resumed.stderr
    assert "wrote test-slow (smoke): 24 trials" in resumed.stdout
    stored = np.load(result_paths("test-slow", "smoke", tmp_path)[0])["x"]
    alone = np.stack([g.standard_normal(3) for g in trial_generators(5, 24)])
    np.testing.assert_array_equal(stored, alone)


def test_every_dependency_comes_first_and_is_registered():
    order = run_order()
    assert sorted(order) == sorted(e.id for e in all_experiments())
    for experiment in all_experiments():
        for dependency in experiment.after:
            assert order.index(dependency) < order.index(experiment.id)
    assert run_order(["xie2019-hiv"]) == ["xie2019-hiv-policy", "xie2019-hiv-reference",
                                          "xie2019-hiv-tuning", "xie2019-hiv"]


def test_experiments_reading_other_results_declare_them():
    """A paper config that reads results (a ``*_scale`` field at paper scale: the evaluated
    policy, experts, releases) or holds another's outcome (tuned steps: its own tuning's or,
    for a variant of a base experiment (a larger-m extension, another calibration), the
    base's; the training step cap the curves choose) lists that experiment in ``after``."""
    for experiment in all_experiments():
        fields, after = config_to_dict(experiment.config("paper")), experiment.after
        reads = [name for name, value in fields.items()
                 if name.endswith("_scale") and value == "paper"]
        assert bool(reads) <= bool(after), experiment.id
        if fields.get("tuned_steps"):  # its own tuning, or the one whose steps it reuses
            tunings = [name.removesuffix("-tuning") for name in after
                       if name.endswith("-tuning")]
            assert any(experiment.id.startswith(base) for base in tunings), experiment.id
        if experiment.id.endswith("-training"):
            assert experiment.id.replace("-training", "-curves") in after
    assert get("xie2019-mountain-car").after == ("xie2019-mountain-car-policy",
                                                  "xie2019-mountain-car-reference",
                                                  "xie2019-mountain-car-tuning")


def test_run_all_keeps_current_results_and_recomputes_what_depends_on_a_new_one(tmp_path):
    """run_all's plan with a stand-in runner that writes a current result instantly."""
    computed: list[str] = []

    def runner(experiment_ids, scale, results_dir, progress, jobs):
        computed.extend(experiment_ids)
        for experiment_id in experiment_ids:
            _result_files(Path(results_dir), experiment_id, scale)

    steps = run_all("smoke", tmp_path, runner=runner, report=lambda line: None)
    assert computed == run_order() and all(step.computed for step in steps)
    computed.clear()
    steps = run_all("smoke", tmp_path, runner=runner, report=lambda line: None)
    assert computed == [] and not any(step.computed for step in steps)
    result_paths("xie2019-hiv-policy", "smoke", tmp_path)[1].write_text("{")  # corrupt
    lines: list[str] = []
    steps = run_all("smoke", tmp_path, runner=runner, report=lines.append)
    assert computed == ["xie2019-hiv-policy", "xie2019-hiv-reference", "xie2019-hiv-tuning",
                        "xie2019-hiv", "xie2019-hiv-large"]
    assert any("xie2019-hiv-policy: computing (result corrupt)" in line for line in lines)
    assert any("xie2019-hiv: computing (its inputs xie2019-hiv-policy, xie2019-hiv-reference, "
               "xie2019-hiv-tuning are recomputed)" in line for line in lines)
    table = compute_table(steps)
    assert len(table.splitlines()) == len(run_order()) + 2
    assert re.search(r"xie2019-hiv-tuning\s+computed\s+2.5 s", table)
    assert re.search(r"balle2016-figure1\s+kept\s+2.5 s", table)
    total = f"{len(run_order()) * 2.5 / 60:.3g} min"  # every result's sidecar records 2.5 s
    computed_s = f"{len(computed) * 2.5:.3g} s"
    assert re.search(rf"total\s+{re.escape(total)}\s+\({computed_s} computed in this call\)",
                     table)


def test_run_all_from_the_command_line_ends_with_the_table(tmp_path, monkeypatch, capsys):
    import dprl.engine.run_all as plan

    monkeypatch.setattr(plan, "run_many", lambda ids, scale, results_dir, **options: [
        _result_files(Path(results_dir), experiment_id, scale) for experiment_id in ids])
    assert main(["run", "--all", "--results-dir", str(tmp_path), "--jobs", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"[1/{len(run_order())}] ") and out[-1].startswith("total")
    assert json.loads(result_paths("xie2019-hiv", "smoke", tmp_path)[1].read_text())


@pytest.mark.parametrize("command", [["list"], ["run", "xie2019-chain"]])
def test_a_results_dir_that_is_not_a_folder_is_one_line_and_status_2(command, tmp_path):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    missing = [] if command == ["run", "xie2019-chain"] else [str(tmp_path / "nonexistent")]
    for value in [str(not_a_folder)] + missing:
        done = subprocess.run([sys.executable, "-m", "dprl", *command, "--results-dir", value],
                              text=True, capture_output=True, timeout=300)
        assert done.returncode == 2 and done.stdout == "", done.stderr
        assert done.stderr.count("\n") == 1 and "--results-dir" in done.stderr
        assert "folder" in done.stderr and "Traceback" not in done.stderr
