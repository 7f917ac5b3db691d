"""The runner on dask distributed: batches as tasks on a LocalCluster (--jobs N) or on the
workers of a running scheduler (--scheduler, DPRL_SCHEDULER) give the serial run's bits, also
when a worker is killed or the workers cannot see the results folder; a worker started with
other floating-point settings is refused before any batch is submitted."""

import ast
import json
import logging
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import dask
import numpy as np
import pytest
import psutil
from distributed import Client, LocalCluster

from dprl.__main__ import main
from dprl.engine import batches, dask_engine, dask_workers, plan, provenance, results, storage
from dprl.experiments import get, result_paths, run
from dprl.engine.runner import run_many
from dprl.engine.registry import config_to_dict, run_order
from dprl.floating_point import processor, settings
from dprl.paths import REPO_ROOT
from dprl.seeding import trial_generators

EXPERIMENT = "primer-policy-evaluation"  # smoke scale: 4 trials in 2 batches, about 2 s


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    """The smoke result computed here, one batch after another."""
    return run(EXPERIMENT, "smoke", tmp_path_factory.mktemp("serial"), progress=False)


def _assert_same_bits(expected, result) -> None:
    assert result.arrays.keys() == expected.arrays.keys()
    for name, array in expected.arrays.items():
        assert result[name].dtype == array.dtype and result[name].shape == array.shape, name
        assert result[name].tobytes() == array.tobytes(), name


def _nowhere_here(*args):
    raise AssertionError("a batch was computed in the test process, not on a dask worker")


def test_jobs_run_the_batches_on_a_local_cluster_with_the_serial_bits(serial, tmp_path):
    environment = dict(os.environ)
    result = run(EXPERIMENT, "smoke", tmp_path, progress=False, jobs=2)
    _assert_same_bits(serial, result)
    [machine] = result.provenance["workers"]  # the workers' machine: this one
    cpu = processor()
    assert machine["hostname"] == platform.node() and 1 <= machine["workers"] <= 2
    assert (machine["vendor"], machine["model"], machine["batches"]) == (
        cpu["vendor"], cpu["model"], 2)
    assert "workers" not in serial.provenance
    assert not result_paths(EXPERIMENT, "smoke", tmp_path)[2].exists()
    assert dict(os.environ) == environment  # the cluster's nannies leave no variable behind


def test_local_workers_start_without_the_nannys_malloc_trim_threshold():
    """dask's nanny sets MALLOC_TRIM_THRESHOLD_ (a training step then costs about twice the
    CPU time); a local cluster's workers start without it and with dask's other settings."""
    names = [*dask_workers.NANNY_UNSET, "OMP_NUM_THREADS"]
    assert set(dask_workers.NANNY_UNSET) <= set(dask.config.get(
        "distributed.nanny.pre-spawn-environ"))                    # dask's default sets them
    with dask_engine.dask_client(2, None) as client:
        states = client.run(dask_workers.environment_at_start, names)
    assert len(states) == 2
    assert all(state == {**dict.fromkeys(dask_workers.NANNY_UNSET), "OMP_NUM_THREADS": "1"}
               for state in states.values()), states


def test_the_shell_word_for_dask_worker_unsets_the_same_variables():
    """``env <nanny_environment()> dask worker ...``: the nanny's settings it reads drop
    :data:`NANNY_UNSET` and keep the rest."""
    name, value = dask_workers.nanny_environment().split("=", 1)
    code = ("import dask, distributed; "
            "print(dask.config.get('distributed.nanny.pre-spawn-environ'))")
    env = {**os.environ, name: subprocess.run(["bash", "-c", f"printf %s {value}"],
                                              capture_output=True, text=True).stdout}
    shown = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, check=True).stdout
    entries = ast.literal_eval(shown)
    assert {name: entries[name] for name in dask_workers.NANNY_UNSET} == dict.fromkeys(
        dask_workers.NANNY_UNSET)
    assert entries["OMP_NUM_THREADS"] == 1


def _written(path) -> bool:
    """Whether ``path`` holds a whole JSON document (the scheduler creates its file before
    it writes the address into it)."""
    try:
        json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return False
    return True


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A ``dask scheduler`` and two ``dask worker`` processes started here (with this
    process's environment, pinned), as on a cluster; ``start`` adds a worker; every process
    is stopped at the end."""
    folder = tmp_path_factory.mktemp("cluster")
    processes: list[subprocess.Popen] = []

    def start(name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        with open(folder / f"{name}.log", "w") as log:
            process = subprocess.Popen([sys.executable, "-m", "dask", *args], cwd=REPO_ROOT,
                                       env=env, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        processes.append(process)
        return process

    def worker(name: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        return start(name, "worker", address, "--name", name, "--nthreads", "1",
                     "--nworkers", "1", "--memory-limit", "0", "--no-dashboard", env=env)

    def logs() -> str:
        return "\n".join(f"--- {path.name}\n{path.read_text()[-2000:]}"
                         for path in sorted(folder.glob("*.log")))

    client = None
    try:
        scheduler_file = folder / "scheduler.json"
        start("scheduler", "scheduler", "--scheduler-file", str(scheduler_file), "--host",
              "127.0.0.1", "--port", "0", "--no-dashboard")
        deadline = time.monotonic() + 120
        while not _written(scheduler_file) and time.monotonic() < deadline:
            assert processes[0].poll() is None, logs()
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        for number in range(2):
            worker(f"good-{number}")
        client = Client(address, set_as_default=False)
        try:
            client.wait_for_workers(2, timeout=120)
        except TimeoutError:
            pytest.fail(f"the workers did not start:\n{logs()}")
        yield SimpleNamespace(address=address, client=client, worker=worker, stop=_stop,
                              logs=logs)
    finally:
        if client is not None:
            client.close()
        for process in reversed(processes):
            _stop(process)


def _stop(process: subprocess.Popen) -> None:
    """Stop a dask process started by the fixture, and its own children (its session)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


def test_the_workers_of_a_running_scheduler_give_the_serial_bits(cluster, serial, tmp_path,
                                                                 monkeypatch, capsys):
    monkeypatch.setattr(plan, "compute_batch", _nowhere_here)
    monkeypatch.delenv(dask_engine.SCHEDULER_ENV, raising=False)
    result = run(EXPERIMENT, "smoke", tmp_path / "argument", progress=False,
                 scheduler=cluster.address)
    _assert_same_bits(serial, result)
    # the command line, with the scheduler from the environment
    monkeypatch.setenv(dask_engine.SCHEDULER_ENV, cluster.address)
    results_dir = tmp_path / "environment"
    assert main(["run", EXPERIMENT, "--results-dir", str(results_dir)]) == 0, cluster.logs()
    assert f"wrote {EXPERIMENT} (smoke): 4 trials" in capsys.readouterr().out
    _assert_same_bits(serial, results.load(EXPERIMENT, "smoke", results_dir))


def test_a_worker_with_other_floating_point_settings_is_refused_before_any_batch(
        cluster, tmp_path, monkeypatch, capsys):
    pinned = settings()
    environment = dict(os.environ, OPENBLAS_NUM_THREADS="2")
    unset = next((name for name in pinned if name != "OPENBLAS_NUM_THREADS"), None)
    if unset is not None:  # on an x86-64-v3 machine: a variable missing, too
        del environment[unset]
    bad = cluster.worker("bad", env=environment)
    try:
        cluster.client.wait_for_workers(3, timeout=120)
        workers = cluster.client.scheduler_info(n_workers=-1)["workers"]
        names = {info["name"]: address for address, info in workers.items()}
        monkeypatch.setattr(plan, "compute_batch", _nowhere_here)
        with pytest.raises(dask_workers.WorkerRefused) as refused:
            run(EXPERIMENT, "smoke", tmp_path, progress=False, scheduler=cluster.address)
        message = str(refused.value)
        assert message.startswith("1 of 3 dask workers would not compute the same bits")
        assert f"{names['bad']}: " in message
        assert not any(f"{names[name]}: " in message for name in ("good-0", "good-1"))
        assert "OPENBLAS_NUM_THREADS='2' (here: '1')" in message
        if unset is not None:
            assert f"{unset} unset (here: {pinned[unset]!r})" in message
        partial = result_paths(EXPERIMENT, "smoke", tmp_path)[2]
        assert not list(partial.glob("batch-*")) and not list(partial.glob("tmp-*"))
        # the command line: the same refusal as one error, exit status 1
        assert main(["run", EXPERIMENT, "--scheduler", cluster.address,
                     "--results-dir", str(tmp_path)]) == 1
        err = capsys.readouterr().err
        assert "\npython -m dprl run: error: 1 of 3 dask workers would not" in err
        assert "OPENBLAS_NUM_THREADS='2'" in err and "Traceback" not in err
    finally:
        cluster.stop(bad)


def test_a_batch_on_a_worker_that_joined_after_the_check_is_refused(tmp_path):
    wanted = dask_workers.expected()
    wanted["environ"] = dict(dask_workers.environment_at_start(sorted(settings())),
                             OPENBLAS_NUM_THREADS="7")
    with pytest.raises(dask_workers.WorkerRefused, match=r"OPENBLAS_NUM_THREADS='1' \(here: '7'\)"):
        dask_workers.batch_task(wanted, EXPERIMENT, "smoke", 0, 2, tmp_path)
    wanted = dict(dask_workers.expected(), source="0" * 64)
    with pytest.raises(dask_workers.WorkerRefused, match=r"other dprl sources .* sources 000000000000"):
        dask_workers.batch_task(wanted, EXPERIMENT, "smoke", 0, 2, tmp_path)
    assert list(tmp_path.iterdir()) == []


def _changed_checkout(folder):
    """A copy of this checkout's dprl package with one comment more (other sources, the
    same bits) in ``folder``, to put first on a worker's PYTHONPATH."""
    shutil.copytree(REPO_ROOT / "dprl", folder / "dprl",
                    ignore=shutil.ignore_patterns("__pycache__"))
    with open(folder / "dprl" / "seeding.py", "a") as source:
        source.write("# an uncommitted edit\n")
    return folder


def test_a_worker_with_other_sources_joining_late_computes_nothing_and_leaves(
        serial, tmp_path, monkeypatch, capsys):
    """A worker whose dprl differs by an uncommitted edit, joined after the run's check
    (simulated: the check is skipped), refuses its batch, is reported in one line and
    leaves; the other worker computes every batch, with the serial bits."""
    changed = _changed_checkout(tmp_path / "checkout")
    environment = dict(os.environ, PYTHONPATH=str(changed))
    monkeypatch.setattr(dask_engine, "_check_workers", lambda client: dask_workers.expected())
    with dask_engine._environment_kept(), LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, memory_limit=0,
            dashboard_address=None, silence_logs=logging.ERROR) as local:
        late = subprocess.Popen(
            [sys.executable, "-m", "dask", "worker", local.scheduler_address, "--name", "late",
             "--nthreads", "1", "--memory-limit", "0", "--no-dashboard"], cwd=tmp_path,
            env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        try:
            with Client(local.scheduler_address, set_as_default=False) as client:
                client.wait_for_workers(2, timeout=120)
                [late_address] = [a for a, info in client.scheduler_info(n_workers=-1)[
                    "workers"].items() if info["name"] == "late"]
                result = run(EXPERIMENT, "smoke", tmp_path / "results", progress=False,
                             scheduler=local.scheduler_address)
                _assert_same_bits(serial, result)
                line = (f"a dask worker refused to compute and left the run: {late_address}: "
                        f"other dprl sources")
                assert line in capsys.readouterr().err
                late.wait(timeout=60)          # closed, with its nanny
                assert late_address not in client.scheduler_info(n_workers=-1)["workers"]
            [machine] = result.provenance["workers"]   # every batch from this checkout
            assert machine["source"] == provenance.source_digest() and machine["batches"] == 2
        finally:
            _stop(late)


def test_the_scheduler_comes_from_the_argument_or_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(dask_engine.SCHEDULER_ENV, raising=False)
    assert dask_engine.scheduler_address(None, 4) is None
    assert dask_engine.scheduler_address(" tcp://a:1 ", 1) == "tcp://a:1"
    monkeypatch.setenv(dask_engine.SCHEDULER_ENV, "")
    assert dask_engine.scheduler_address(None, 1) is None
    monkeypatch.setenv(dask_engine.SCHEDULER_ENV, "tcp://b:2")
    assert dask_engine.scheduler_address(None, 1) == "tcp://b:2"
    assert dask_engine.scheduler_address("tcp://a:1", 1) == "tcp://a:1"  # the argument wins
    with pytest.raises(ValueError, match=r"jobs=3 and a dask scheduler \(DPRL_SCHEDULER="
                                         r"tcp://b:2\) were both given"):
        run(EXPERIMENT, "smoke", tmp_path, progress=False, jobs=3)
    assert list(tmp_path.iterdir()) == []  # refused before anything was written
    monkeypatch.delenv(dask_engine.SCHEDULER_ENV)
    with pytest.raises(ValueError, match=r"jobs=2 and a dask scheduler \(scheduler=tcp://a:1\)"):
        run(EXPERIMENT, "smoke", tmp_path, progress=False, jobs=2, scheduler="tcp://a:1")


def test_an_unreachable_scheduler_is_one_error(tmp_path, capsys):
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        with pytest.raises(ConnectionError, match="cannot reach a dask scheduler at "
                                                  "tcp://127.0.0.1:9"):
            run(EXPERIMENT, "smoke", tmp_path, progress=False, scheduler="tcp://127.0.0.1:9")
        assert main(["run", EXPERIMENT, "--scheduler", "tcp://127.0.0.1:9",
                     "--results-dir", str(tmp_path)]) == 1
    assert capsys.readouterr().err.splitlines()[-1].startswith(
        "python -m dprl run: error: cannot reach a dask scheduler at tcp://127.0.0.1:9")


def test_run_all_hands_the_workers_to_one_call(tmp_path, monkeypatch):
    from dprl.engine import run_all

    calls = []

    def instant(experiment_ids, scale, results_dir, **options):
        calls.append((list(experiment_ids), options))
        for experiment_id in experiment_ids:
            arrays, sidecar, _ = result_paths(experiment_id, scale, results_dir)
            record = {"config": config_to_dict(get(experiment_id).config(scale)),
                      "wall_time_s": 1.0}
            storage.write_result(arrays, sidecar, {"x": np.arange(3.0)}, record)

    monkeypatch.setattr(run_all, "run_many", instant)
    assert main(["run", "--all", "--scheduler", "tcp://h:1", "--no-shared-fs",
                 "--results-dir", str(tmp_path)]) == 0
    [(computed, options)] = calls
    assert computed == run_order()
    assert options == {"progress": True, "jobs": 1, "scheduler": "tcp://h:1", "slurm": None,
                       "shared_fs": False, "resume": True}


def _batches(partial) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in partial.glob("batch-*.npz")}


def _slow_command(results_dir, jobs: int) -> list[str]:
    return [sys.executable, "tests/slow_experiment.py", "run", "test-slow",
            "--results-dir", str(results_dir), "--jobs", str(jobs)]


def test_a_killed_worker_loses_no_finished_batch_and_the_rerun_gives_the_serial_bits(tmp_path):
    """A worker process killed mid-run (the scheduler told to retry nothing): one error line,
    exit status 1; every batch saved before is still there, the same bytes; the same command
    resumes from them and gives the bits of the trials computed alone (a serial run's)."""
    partial = result_paths("test-slow", "smoke", tmp_path / "dask")[2]
    process = subprocess.Popen(_slow_command(tmp_path / "dask", 2), cwd=REPO_ROOT, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True, env=dict(
                                   os.environ, DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="0"))
    deadline = time.monotonic() + 300
    while len(_batches(partial)) < 2 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.02)
    saved = _batches(partial)
    assert process.poll() is None and len(saved) >= 2, "the run did not get going"
    workers = [child for child in psutil.Process(process.pid).children()
               if "spawn_main" in " ".join(child.cmdline())]
    assert len(workers) == 2
    workers[0].kill()
    _, err = process.communicate(timeout=120)
    assert process.returncode == 1, err
    assert "error: a dask worker died computing a batch" in err and "Traceback" not in err, err
    assert {name: _batches(partial).get(name) for name in saved} == saved
    resumed = subprocess.run(_slow_command(tmp_path / "dask", 2), cwd=REPO_ROOT, text=True,
                             capture_output=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert int(re.search(r"(\d+)/24", resumed.stderr)[1]) >= 2 * len(saved), resumed.stderr
    alone = np.stack([g.standard_normal(3) for g in trial_generators(5, 24)])  # serial bits
    with np.load(result_paths("test-slow", "smoke", tmp_path / "dask")[0]) as stored:
        np.testing.assert_array_equal(stored["x"], alone)


@pytest.fixture
def hidden(tmp_path, monkeypatch):
    """A LocalCluster whose two workers cannot open, list or write anything in the results
    folder ``tmp_path / 'hidden'`` (tests/slow_experiment.py, preloaded, hides it), as
    workers on machines without the client's filesystem; the test experiments registered
    here and there."""
    import slow_experiment

    folder = tmp_path / "hidden"
    monkeypatch.setenv(slow_experiment.RESULTS_ENV, str(folder))
    with dask_engine._environment_kept(), LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, memory_limit=0,
            dashboard_address=None, silence_logs=logging.ERROR,
            preload=["slow_experiment"]) as local, Client(
                local, set_as_default=False) as client:
        yield SimpleNamespace(folder=folder, client=client, address=local.scheduler_address)


def test_workers_without_the_results_folder_get_their_inputs_from_here(hidden, tmp_path,
                                                                       monkeypatch):
    """run_many on workers that cannot see the results folder (found out by asking them):
    test-reader's batches get test-source's result, computed in the same call, from here,
    and the batches come back here to be saved; the same bits as a serial run."""
    hidden.folder.mkdir()
    assert not dask_engine._shared_filesystem(hidden.client, hidden.folder)
    found = run_many(["test-reader", "test-source"], "smoke", hidden.folder, progress=False,
                     scheduler=hidden.address)
    monkeypatch.setenv("DPRL_TEST_RESULTS", str(tmp_path / "serial"))
    serial = run_many(["test-source", "test-reader"], "smoke", tmp_path / "serial",
                      progress=False)
    for name in ("test-source", "test-reader"):
        _assert_same_bits(serial[name], found[name])
        assert found[name].provenance["workers"][0]["batches"] == len(
            batches.trial_batches(get(name).config("smoke")))
        assert results.load(name, "smoke", hidden.folder).arrays.keys() == found[name].arrays.keys()
    # the reader's trials read the source's result: without it, they fail
    monkeypatch.setenv("DPRL_TEST_RESULTS", str(tmp_path / "empty"))
    with pytest.raises(FileNotFoundError, match="no stored result for 'test-source'"):
        run_many(["test-reader"], "smoke", tmp_path / "empty", progress=False)


def test_slurm_jobs_start_pinned_workers_from_this_checkout(monkeypatch):
    """The job script of ``--slurm`` (built, not submitted): to the checkout, the pinned
    floating point exported, one single-threaded worker of this Python; a ValueError for a
    bad count; a one-line error naming pip install dask-jobqueue without it."""
    from dprl.engine import slurm, slurm_options

    with pytest.raises(ValueError, match="slurm must be >= 1, got 0"):
        run(EXPERIMENT, "smoke", progress=False, slurm=0)
    with pytest.raises(ValueError, match="slurm=2 starts the workers"):
        run(EXPERIMENT, "smoke", progress=False, slurm=2, jobs=2)
    try:
        import dask_jobqueue  # noqa: F401
    except ImportError:
        monkeypatch.setitem(sys.modules, "dask_jobqueue", None)
        with pytest.raises(slurm.MissingExtra, match="pip install dask-jobqueue"):
            slurm.slurm_cluster(1)
        pytest.skip("dask-jobqueue is not installed (pip install dask-jobqueue)")
    monkeypatch.setattr(dask_jobqueue.SLURMCluster, "scale", lambda self, jobs: None)
    with slurm.slurm_cluster(2) as cluster:
        script = cluster.job_script()
    lines = script.splitlines()
    cd, export, nanny = slurm_options.job_script_prologue()
    assert cd == f"cd {REPO_ROOT}" and export == f"export $({sys.executable} -m dprl env)"
    assert nanny == f"export {dask_workers.nanny_environment()}"
    worker = next(line for line in lines if "distributed.cli.dask_worker" in line)
    assert lines.index(cd) < lines.index(export) < lines.index(nanny) < lines.index(worker)
    assert worker.startswith(sys.executable) and "--nthreads 1" in worker
    assert "#SBATCH -J dprl" in script


def test_a_scheduler_without_workers_is_one_error_after_the_wait(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(dask_engine, "WORKER_WAIT_S", 2.0)
    with LocalCluster(n_workers=0, processes=True, dashboard_address=None,
                      silence_logs=logging.ERROR) as empty:
        started = time.monotonic()
        assert main(["run", EXPERIMENT, "--scheduler", empty.scheduler_address,
                     "--results-dir", str(tmp_path)]) == 1
        assert time.monotonic() - started < 30
    err = capsys.readouterr().err
    assert f"error: no dask worker connected to {empty.scheduler_address} within 2 s" in err
    assert "Traceback" not in err
