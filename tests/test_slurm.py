"""--slurm as dask-jobqueue users configure it (issue 43, items 2 and 3): --slurm-option over
dask's jobqueue.slurm configuration, merged with it (the user's prologue kept before dprl's,
their cores and memory), job lifetimes shorter than the walltime, an sbatch error in one
line, Ctrl-C's handler kept; no run waits forever for workers that are gone. On a fake sbatch
that runs the job script here, with DPRL_SLURM_TESTS=1 (make test-slurm; tens of seconds):
jobs replaced at their lifetime with the serial bits, a batch longer than a lifetime stopping
the run. The same on a real Slurm: .ci/slurm-test (make test-slurm)."""

import logging
import os
import stat
import subprocess
import sys
import threading
import time

import dask
import pytest
from distributed import Client, LocalCluster

from dprl.__main__ import main
from dprl.engine import dask_engine, slurm, slurm_options
from dprl.experiments import result_paths, run
from dprl.paths import REPO_ROOT

EXPERIMENT = "primer-policy-evaluation"  # smoke scale: 4 trials in 2 batches, about 2 s


def test_slurm_options_set_dask_config_merged_with_the_users():
    with dask.config.set({"jobqueue.slurm.job-extra-directives": ["--qos=low"],
                          "jobqueue.slurm.scheduler-options": {"port": 8786}}):
        assert slurm_options.slurm_config(["partition=debug", "Account = lab", "walltime=1-02:00",
                                   "job_extra_directives=--gres=gpu:1", "cores=8",
                                   "dashboard-address=:0", "memory=32GB"]) == {
            "jobqueue.slurm.queue": "debug", "jobqueue.slurm.account": "lab",
            "jobqueue.slurm.walltime": "1-02:00", "jobqueue.slurm.cores": 8,
            "jobqueue.slurm.job-extra-directives": ["--qos=low", "--gres=gpu:1"],
            "jobqueue.slurm.scheduler-options": {"port": 8786, "dashboard_address": ":0"},
            "jobqueue.slurm.memory": "32GB"}
    assert slurm_options.slurm_config(["job-extra-directives=-C a", "job-extra-directives=-C b"])[
        "jobqueue.slurm.job-extra-directives"] == ["-C a", "-C b"]
    assert slurm_options.slurm_option("death-timeout=30") == ("death-timeout", 30.0)


@pytest.mark.parametrize("option, message", [
    ("partitoin=debug", "slurm option 'partitoin=debug': unknown key 'partitoin'; known: "
                        "account, cores,"),
    ("walltime=soon", "slurm option 'walltime=soon': .* a Slurm time"),
    ("cores=0", "slurm option 'cores=0': cores must be >= 1, got 0"),
    ("cores=two", "slurm option 'cores=two': .*integer"),
    ("memory=lots", "slurm option 'memory=lots': .*an amount of memory"),
    ("account=", "slurm option 'account=': the value is empty"),
    ("debug", "slurm option 'debug' must be KEY=VALUE"),
])
def test_a_bad_slurm_option_is_named(option, message, capsys):
    with pytest.raises(ValueError, match=message):
        slurm_options.slurm_option(option)
    with pytest.raises(SystemExit) as exit_status:
        main(["run", "--all", "--slurm", "1", "--slurm-option", option])
    assert exit_status.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"argument --slurm-option: slurm option {option!r}" in err


def test_slurm_options_need_slurm(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--all", "--slurm-option", "partition=debug"])
    assert "error: --slurm-option needs --slurm" in capsys.readouterr().err
    with pytest.raises(ValueError, match="options must be a sequence of KEY=VALUE strings"):
        slurm_options.slurm_config("partition=debug")


def test_walltimes_in_every_slurm_format_and_lifetimes_that_end_before_them():
    assert [slurm_options.walltime_seconds(text) for text in (
        "30", "05:30", "01:00:00", "2-0", "1-01:30", "0-00:00:45", "UNLIMITED", "1:2:3:4")] == [
        1800, 330, 3600, 172800, 91800, 45, None, None]
    for walltime in (60, 600, 1800, 3600, 86400, 7 * 86400):
        lifetime, stagger = slurm_options.worker_lifetime(walltime)
        margin = walltime - lifetime - stagger  # the latest retirement, before the walltime
        assert min(walltime / 10, 10) <= margin <= 600 and lifetime - stagger > walltime / 2
    assert slurm_options.worker_lifetime(3600) == (3060.0, 180.0)
    with pytest.raises(ValueError, match="walltime_s must be > 0"):
        slurm_options.worker_lifetime(0)
    with pytest.raises(ValueError, match="walltime must be a Slurm time"):
        slurm_options.walltime_seconds(60)


def test_the_users_configuration_is_kept_and_dprls_added():
    """The job-script prologue of jobqueue.yaml first, then dprl's; cores and memory from it,
    one single-threaded worker a core; the user's worker arguments; a lifetime from the
    walltime, unless they set one."""
    user = {"jobqueue.slurm.job-script-prologue": ["module load python", "conda activate x"],
            "jobqueue.slurm.cores": 8, "jobqueue.slurm.memory": "64GB",
            "jobqueue.slurm.walltime": "01:00:00",
            "jobqueue.slurm.worker-extra-args": ["--resources", "io=1"]}
    with dask.config.set(user):
        options = slurm_options.cluster_options()
    assert options["job_script_prologue"] == [*user["jobqueue.slurm.job-script-prologue"],
                                              *slurm_options.job_script_prologue()]
    assert (options["cores"], options["processes"], options["memory"]) == (8, 8, "64GB")
    assert options["worker_extra_args"] == ["--resources", "io=1"]
    assert options["python"] == sys.executable and options["protocol"] == "tls://"
    with dask.config.set(user):
        assert slurm_options.job_lifetime() == (3060.0, 180.0, 3600.0)
    with dask.config.set({**user, "jobqueue.slurm.worker-extra-args": ["--lifetime", "50m"]}):
        assert slurm_options.cluster_options()["worker_extra_args"] == ["--lifetime", "50m"]
        assert slurm_options.job_lifetime() is None  # dask's: the workers retire themselves
    with dask.config.set({"jobqueue.slurm.env-extra": ["source env.sh"],  # deprecated name
                          "jobqueue.slurm.walltime": None, "jobqueue.slurm.cores": None,
                          "jobqueue.slurm.memory": None, "jobqueue.slurm.processes": None}):
        options = slurm_options.cluster_options()
        assert slurm_options.job_lifetime() is None  # no walltime
    assert options["job_script_prologue"][0] == "source env.sh"
    assert options["worker_extra_args"] == []
    assert (options["cores"], options["processes"], options["memory"]) == (1, 1, "4GB")
    with dask.config.set({"jobqueue.slurm.cores": 3, "jobqueue.slurm.processes": None,
                          "jobqueue.slurm.memory": None}):
        assert slurm_options.cluster_options()["memory"] == "12GB"  # 4 GB a worker
    with dask.config.set({"jobqueue.slurm.cores": 8, "jobqueue.slurm.processes": 2}):
        with pytest.raises(ValueError, match="processes=2 with cores=8 .* single-threaded"):
            slurm_options.cluster_options()


def test_importing_dask_jobqueue_keeps_the_ctrl_c_handler():
    """dask_jobqueue.runner replaces Python's SIGINT handler with sys.exit() on import (a
    Ctrl-C would end a run with status 0); the cluster class keeps the one before."""
    pytest.importorskip("dask_jobqueue")
    check = ("import signal; before = signal.getsignal(signal.SIGINT); {}; "
             "print(signal.getsignal(signal.SIGINT) is before)")
    outputs = [subprocess.run([sys.executable, "-c", check.format(statement)], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=60).stdout.strip()
               for statement in ("import dask_jobqueue",
                                 "from dprl.engine import slurm; slurm._cluster_class()")]
    assert outputs == ["False", "True"]


def test_the_job_script_has_the_users_prologue_then_dprls_and_the_options(monkeypatch):
    dask_jobqueue = pytest.importorskip("dask_jobqueue")
    monkeypatch.setattr(dask_jobqueue.SLURMCluster, "scale", lambda self, jobs: None)
    settings = slurm_options.slurm_config(["partition=short", "walltime=00:20:00", "memory=6GB",
                                   "job-extra-directives=--qos=debug"])
    with dask.config.set({"jobqueue.slurm.job-script-prologue": ["module load gcc"],
                          **settings}), slurm.slurm_cluster(1) as cluster:
        lines = cluster.job_script().splitlines()
    worker = next(line for line in lines if "distributed.cli.dask_worker" in line)
    assert lines.index("module load gcc") < lines.index(f"cd {REPO_ROOT}") < lines.index(worker)
    for directive in ("#SBATCH -p short", "#SBATCH -t 00:20:00", "#SBATCH --mem=6G",
                      "#SBATCH --qos=debug", "#SBATCH --cpus-per-task=1"):
        assert directive in lines
    assert "--lifetime" not in worker and "--nthreads 1" in worker  # retired by the cluster


def _fake_slurm(folder, sbatch_error=None):
    """``sbatch`` and ``scancel`` in ``folder``: sbatch runs a copy of the job script (which
    dask-jobqueue removes once sbatch returns) here in a session of its own (its id the job
    id) or, given ``sbatch_error``, prints it and fails; scancel stops the session."""
    folder.mkdir()
    sbatch = (f"echo {sbatch_error!r} >&2; exit 1" if sbatch_error else
              f'script=$(mktemp {folder}/job.XXXXXX); cp "$1" "$script"\n'
              f'setsid bash "$script" >>{folder}/jobs.log 2>&1 </dev/null &\n'
              'echo "Submitted batch job $!"')
    scripts = {"sbatch": sbatch, "scancel": 'kill -TERM -- "-$1" 2>/dev/null; exit 0'}
    for name, body in scripts.items():
        (folder / name).write_text(f"#!/bin/bash\n{body}\n")
        (folder / name).chmod(stat.S_IRWXU)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


def test_an_sbatch_error_stops_the_run_in_one_line(tmp_path):
    """sbatch refusing the jobs (an invalid partition): one line with sbatch's words, exit
    status 1, within seconds; no traceback, no wait."""
    pytest.importorskip("dask_jobqueue")
    path = _fake_slurm(tmp_path / "bin", "sbatch: error: invalid partition specified: nope")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "dprl", "run", EXPERIMENT, "--slurm", "2",
                           "--results-dir", str(tmp_path / "results"), "--slurm-option",
                           f"shared-temp-directory={tmp_path}"], cwd=REPO_ROOT, text=True,
                          capture_output=True, timeout=120, env=dict(os.environ, PATH=path))
    assert done.returncode == 1, done.stderr
    assert time.monotonic() - started < 60
    assert ("python -m dprl run: error: sbatch refused the Slurm job: sbatch: error: invalid "
            "partition specified: nope; nothing was computed") in done.stderr
    assert "Traceback" not in done.stderr and "Task exception" not in done.stderr, done.stderr


#: The tests that take tens of seconds (jobs living a few batches), run by make test-slurm
slow_slurm = pytest.mark.skipif(os.environ.get("DPRL_SLURM_TESTS") != "1",
                                reason="tens of seconds: set DPRL_SLURM_TESTS=1 (make test-slurm)")


def _run_slow_on_fake_slurm(tmp_path, monkeypatch, walltime, batch_seconds, jobs):
    """test-slow's smoke run (12 batches of ``batch_seconds``) on ``jobs`` jobs of
    ``walltime`` (fake sbatch: nothing ends them but the cluster)."""
    pytest.importorskip("dask_jobqueue")
    import slow_experiment  # noqa: F401  (test-slow, registered here and in the workers)

    monkeypatch.setenv("PATH", _fake_slurm(tmp_path / "bin"))
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT / "tests"))  # the workers' preload
    monkeypatch.setenv("DPRL_TEST_BATCH_SECONDS", str(batch_seconds))
    monkeypatch.setattr(dask_engine, "WORKER_WAIT_S", 60.0)
    with dask.config.set({"jobqueue.slurm.shared-temp-directory": str(tmp_path),
                          "jobqueue.slurm.walltime": walltime,
                          "jobqueue.slurm.worker-extra-args": ["--preload", "slow_experiment"]}):
        return run("test-slow", "smoke", tmp_path / "slurm", progress=False, slurm=jobs)


@slow_slurm
def test_jobs_that_reach_their_lifetime_are_replaced_and_the_run_gives_the_serial_bits(
        tmp_path, monkeypatch, capsys):
    """Two jobs of a 20 s walltime (workers retired after 9 +- 1 s, once their batch is done)
    computing 12 batches of 2 s: each job is replaced, and the run gives the serial bits."""
    result = _run_slow_on_fake_slurm(tmp_path, monkeypatch, "00:20", 2, 2)
    serial = run("test-slow", "smoke", tmp_path / "serial", progress=False)
    assert result["x"].tobytes() == serial["x"].tobytes()
    err = capsys.readouterr().err
    assert err.count("reached its lifetime; submitting a replacement") >= 2, err
    assert "walltime 00:20 (workers retired after 9 s" in err
    assert "left (stopped" not in err, err  # no job ended other than by its retirement
    assert result.provenance["workers"][0]["batches"] == 12


@slow_slurm
def test_a_batch_longer_than_a_workers_lifetime_stops_the_run_in_one_line(
        tmp_path, monkeypatch):
    """Batches of 10 s on jobs of a 12 s walltime (workers living 1-2 s, retired at the latest
    7 s after they connect): the run stops with one line, where it used to start the batch
    again forever."""
    started = time.monotonic()
    with pytest.raises(dask_engine.WorkerLost,
                       match=r"^the batch test-slow-trials-\d+-\d+ ran \d+ s without "
                             r"finishing, and a worker lives 1-2 s \(jobs of 12 s\): give the "
                             r"jobs a longer walltime \(--slurm-option walltime=\.\.\.\); "
                             r"the finished batches are saved"):
        _run_slow_on_fake_slurm(tmp_path, monkeypatch, "00:12", 10, 1)
    assert time.monotonic() - started < 60


def test_a_run_whose_workers_all_leave_stops_after_the_wait(tmp_path, monkeypatch):
    """The only worker stopped mid-run and none coming: the run stops with one error after
    WORKER_WAIT_S, its finished batches saved, where it used to wait forever."""
    import slow_experiment  # noqa: F401

    monkeypatch.setattr(dask_engine, "WORKER_WAIT_S", 2.0)
    partial = result_paths("test-slow", "smoke", tmp_path)[2]
    with dask_engine._environment_kept(), LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, memory_limit=0,
            dashboard_address=None, silence_logs=logging.ERROR,
            preload=["slow_experiment"]) as local, Client(local, set_as_default=False) as client:
        def stop_after_a_batch() -> None:
            while not (partial.exists() and any(partial.glob("batch-*"))):
                time.sleep(0.05)
            local.scale(0)

        threading.Thread(target=stop_after_a_batch, daemon=True).start()
        started = time.monotonic()
        with pytest.raises(dask_engine.WorkerLost,
                           match=r"no dask worker connected to .* within 2 s \(with --slurm: "
                                 r".*\); the finished batches are saved"):
            run("test-slow", "smoke", tmp_path, progress=False, scheduler=local.scheduler_address)
        assert time.monotonic() - started < 30
    assert any(partial.glob("batch-*"))
