"""The runner on dask distributed: batches as tasks on a LocalCluster (--jobs N) or on the
workers of a running scheduler (--scheduler, DPRL_SCHEDULER) give the serial run's bits; a
worker started with other floating-point settings is refused before any batch is submitted."""

import json
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import dask
import numpy as np
import pytest
from distributed import Client

from dprl.__main__ import main
from dprl.experiments import get, result_paths, run, runner
from dprl.experiments.registry import config_to_dict
from dprl.floating_point import settings
from dprl.paths import REPO_ROOT

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
    assert not result_paths(EXPERIMENT, "smoke", tmp_path)[2].exists()
    assert dict(os.environ) == environment  # the cluster's nannies leave no variable behind


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
        while not scheduler_file.exists() and time.monotonic() < deadline:
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
    monkeypatch.setattr(runner, "_compute_batch", _nowhere_here)
    monkeypatch.delenv(runner.SCHEDULER_ENV, raising=False)
    result = run(EXPERIMENT, "smoke", tmp_path / "argument", progress=False,
                 scheduler=cluster.address)
    _assert_same_bits(serial, result)
    # the command line, with the scheduler from the environment
    monkeypatch.setenv(runner.SCHEDULER_ENV, cluster.address)
    results_dir = tmp_path / "environment"
    assert main(["run", EXPERIMENT, "--results-dir", str(results_dir)]) == 0, cluster.logs()
    assert f"wrote {EXPERIMENT} (smoke): 4 trials" in capsys.readouterr().out
    _assert_same_bits(serial, runner.load(EXPERIMENT, "smoke", results_dir))


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
        monkeypatch.setattr(runner, "_compute_batch", _nowhere_here)
        with pytest.raises(runner.WorkerRefused) as refused:
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
    names = sorted(settings())
    wanted = runner._environment_at_start(names)
    other = dict(wanted, OPENBLAS_NUM_THREADS="7")
    with pytest.raises(runner.WorkerRefused, match=r"OPENBLAS_NUM_THREADS='1' \(here: '7'\)"):
        runner._compute_batch_checked(other, EXPERIMENT, "smoke", 0, 2, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_the_scheduler_comes_from_the_argument_or_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(runner.SCHEDULER_ENV, raising=False)
    assert runner._scheduler_address(None, 4) is None
    assert runner._scheduler_address(" tcp://a:1 ", 1) == "tcp://a:1"
    monkeypatch.setenv(runner.SCHEDULER_ENV, "")
    assert runner._scheduler_address(None, 1) is None
    monkeypatch.setenv(runner.SCHEDULER_ENV, "tcp://b:2")
    assert runner._scheduler_address(None, 1) == "tcp://b:2"
    assert runner._scheduler_address("tcp://a:1", 1) == "tcp://a:1"  # the argument wins
    with pytest.raises(ValueError, match=r"jobs=3 and a dask scheduler \(DPRL_SCHEDULER="
                                         r"tcp://b:2\) were both given"):
        run(EXPERIMENT, "smoke", tmp_path, progress=False, jobs=3)
    assert list(tmp_path.iterdir()) == []  # refused before anything was written
    monkeypatch.delenv(runner.SCHEDULER_ENV)
    with pytest.raises(ValueError, match=r"jobs=2 and a dask scheduler \(scheduler=tcp://a:1\)"):
        run(EXPERIMENT, "smoke", tmp_path, progress=False, jobs=2, scheduler="tcp://a:1")


def test_an_unreachable_scheduler_is_one_error(tmp_path, capsys):
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        with pytest.raises(ConnectionError, match="cannot connect to the dask scheduler at "
                                                  "tcp://127.0.0.1:9"):
            run(EXPERIMENT, "smoke", tmp_path, progress=False, scheduler="tcp://127.0.0.1:9")
        assert main(["run", EXPERIMENT, "--scheduler", "tcp://127.0.0.1:9",
                     "--results-dir", str(tmp_path)]) == 1
    assert capsys.readouterr().err.splitlines()[-1].startswith(
        "python -m dprl run: error: cannot connect to the dask scheduler at tcp://127.0.0.1:9")


def test_run_all_hands_the_scheduler_to_every_run(tmp_path, monkeypatch):
    import dprl.__main__ as command_line

    schedulers = []

    def instant(experiment_id, scale, results_dir, progress, jobs, scheduler):
        schedulers.append(scheduler)
        arrays, sidecar, _ = result_paths(experiment_id, scale, results_dir)
        record = {"config": config_to_dict(get(experiment_id).config(scale)), "wall_time_s": 1.0}
        runner._write_result(arrays, sidecar, {"x": np.arange(3.0)}, record)

    monkeypatch.setattr(command_line, "run", instant)
    assert main(["run", "--all", "--scheduler", "tcp://h:1", "--results-dir", str(tmp_path)]) == 0
    assert schedulers and set(schedulers) == {"tcp://h:1"}
