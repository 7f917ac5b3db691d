"""Only a run's own processes connect to its dask cluster: a local cluster (--jobs N) and a
Slurm one (--slurm N) speak TLS with credentials made for the run, and the local one listens
on loopback only; a running scheduler at a tls:// address (--scheduler) is reached with the
credentials of dask's configuration, and one that refuses them is one error line, at once."""

import asyncio
import logging
import os
import socket
import ssl
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import dask
import psutil
import pytest
from distributed import Client, LocalCluster
from distributed.comm import connect
from distributed.security import Security

from dprl.__main__ import main
from dprl.engine import dask_engine
from dprl.experiments import run
from dprl.paths import REPO_ROOT

EXPERIMENT = "primer-policy-evaluation"  # smoke scale: 4 trials in 2 batches, about 2 s


def _credentials_in(folder: Path, security: Security) -> dict[str, str]:
    """``security``'s client certificate and key written to ``folder``, as the settings of
    dask's configuration that name them (``distributed.comm.tls.*``)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cert.pem").write_text(security.tls_client_cert)
    (folder / "key.pem").write_text(security.tls_client_key)
    return {"distributed.comm.tls.ca-file": str(folder / "cert.pem"),
            "distributed.comm.tls.client.cert": str(folder / "cert.pem"),
            "distributed.comm.tls.client.key": str(folder / "key.pem")}


def _first_bytes(address: str, credentials: Security | None) -> bytes:
    """What the dask listener at ``address`` sends first (its handshake: 16 bytes) to a TLS
    client that trusts any server and presents ``credentials``' client certificate (None:
    none); an ssl.SSLError when the listener refuses the client."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    if credentials is not None:
        context = credentials.get_connection_args("client")["ssl_context"]
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    host, port = address.removeprefix("tls://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        with context.wrap_socket(connection) as stream:
            return stream.recv(16)


async def _dask_connection(address: str, security: Security) -> None:
    """Open and close a dask connection to ``address`` with ``security``'s client
    credentials, as a ``Client`` does (a ``Client`` that fails to connect, collected later
    while another one starts its event loop, can deadlock dask); an OSError (TypeError
    without credentials) when refused."""
    comm = await connect(address, timeout="5s", **security.get_connection_args("client"))
    await comm.close()


def test_a_local_cluster_listens_on_loopback_and_admits_only_the_runs_credentials():
    """The cluster of --jobs: every address (scheduler, workers, nannies) and every socket
    its processes listen on is 127.0.0.1's; its scheduler's listener sends its handshake
    only to a client holding the run's certificate, refusing one with none, one with other
    temporary credentials and one that does not speak TLS; dask connections likewise."""
    with dask_engine.dask_client(2, None) as client:
        address = client.scheduler.address
        workers = client.scheduler_info()["workers"]
        assert address.startswith("tls://127.0.0.1:") and len(workers) == 2
        assert all(name.startswith("tls://127.0.0.1:") and info["nanny"].startswith(
            "tls://127.0.0.1:") for name, info in workers.items())
        here = psutil.Process()
        listening = {(connection.laddr.ip, connection.laddr.port)
                     for process in (here, *here.children(recursive=True))
                     for connection in process.net_connections("inet")
                     if connection.status == psutil.CONN_LISTEN}
        ports = {int(name.rsplit(":", 1)[1]) for name in (address, *workers)}
        assert ports <= {port for _, port in listening}
        assert {ip for ip, _ in listening} == {"127.0.0.1"}, listening

        assert len(_first_bytes(address, client.security)) == 16  # the run's own: admitted
        for stranger in (None, Security.temporary()):
            with pytest.raises(ssl.SSLError):
                _first_bytes(address, stranger)
        with pytest.raises(ConnectionError, match="not as a dask scheduler"):  # plain TCP
            dask_engine.probe_scheduler(address.replace("tls://", "tcp://"), timeout=2.0)
        for stranger in (Security(), Security.temporary()):  # as a dask client would
            with pytest.raises((OSError, TypeError)):
                asyncio.run(_dask_connection(address, stranger))
        asyncio.run(_dask_connection(address, client.security))
        with Client(address, security=client.security, set_as_default=False,
                    timeout="5s") as own:
            assert set(own.scheduler_info()["workers"]) == set(workers)


@pytest.fixture(scope="module")
def tls_scheduler(tmp_path_factory):
    """A running TLS scheduler with one worker, as a cluster started by hand with its own
    credentials; ``right`` and ``wrong``: dask settings naming its credentials and other
    temporary ones, written to files."""
    folder = tmp_path_factory.mktemp("tls")
    security = Security.temporary()
    with dask_engine._environment_kept(), LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, memory_limit=0,
            host="127.0.0.1", protocol="tls://", security=security,
            dashboard_address=None, silence_logs=logging.ERROR) as cluster:
        yield SimpleNamespace(address=cluster.scheduler_address,
                              right=_credentials_in(folder / "right", security),
                              wrong=_credentials_in(folder / "wrong", Security.temporary()))


def test_a_tls_scheduler_computes_the_serial_bits_with_the_configured_credentials(
        tls_scheduler, tmp_path):
    serial = run(EXPERIMENT, "smoke", tmp_path / "serial", progress=False)
    with dask.config.set(tls_scheduler.right):
        dask_engine.probe_scheduler(tls_scheduler.address, timeout=5.0)
        result = run(EXPERIMENT, "smoke", tmp_path / "tls", progress=False,
                     scheduler=tls_scheduler.address)
    assert result.provenance["workers"][0]["batches"] == 2  # computed on the worker
    for name, array in serial.arrays.items():
        assert result[name].tobytes() == array.tobytes(), name


def test_a_tls_scheduler_without_the_credentials_is_one_error_line(tls_scheduler, tmp_path,
                                                                   capsys):
    """No credentials in dask's configuration, or other ones: exit status 1 and one line
    naming the settings, within seconds; nothing is written."""
    for settings, cause in (({}, "it admits only clients with its credentials, and none are "
                                 "set; give them in dask's distributed.comm.tls.ca-file"),
                            (tls_scheduler.wrong, "failed (CERTIFICATE_VERIFY_FAILED): a "
                                                  "TLS scheduler admits only clients with its "
                                                  "credentials")):
        started = time.monotonic()
        with dask.config.set(settings):
            assert main(["run", EXPERIMENT, "--scheduler", tls_scheduler.address,
                         "--results-dir", str(tmp_path)]) == 1
        assert time.monotonic() - started < 10
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "python -m dprl run: error: " in err, err
        assert cause in err and tls_scheduler.address in err, err
    assert list(tmp_path.iterdir()) == []


def test_the_cli_refuses_other_credentials_from_the_environment_in_one_line(tls_scheduler):
    """python -m dprl with other credentials in DASK_DISTRIBUTED__COMM__TLS__* variables."""
    environment = dict(os.environ, **{
        "DASK_" + name.upper().replace(".", "__").replace("-", "_"): value
        for name, value in tls_scheduler.wrong.items()})
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "dprl", "run", EXPERIMENT, "--scheduler",
                           tls_scheduler.address], cwd=REPO_ROOT, env=environment,
                          capture_output=True, text=True, timeout=120)
    assert time.monotonic() - started < 60
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert f"the TLS handshake with the dask scheduler at {tls_scheduler.address} failed" \
        in done.stderr


def test_slurm_workers_get_the_runs_credentials_in_private_files(tmp_path, monkeypatch):
    """--slurm (the cluster built, no job submitted): the scheduler speaks TLS; the job
    script starts the worker with --protocol tls:// and the run's certificate and key, files
    only this user reads in a folder of the shared directory, removed at the end; a client
    with other credentials is refused, the run's own admitted."""
    dask_jobqueue = pytest.importorskip("dask_jobqueue")
    from dprl.engine import slurm, slurm_options

    monkeypatch.setattr(dask_jobqueue.SLURMCluster, "scale", lambda self, jobs: None)
    with dask.config.set({"jobqueue.slurm.shared-temp-directory": str(tmp_path)}):
        assert slurm_options.credentials_parent() == tmp_path
        with slurm.slurm_cluster(1) as cluster:
            script = cluster.job_script()
            [folder] = tmp_path.iterdir()
            address = cluster.scheduler_address
            assert address.startswith("tls://")
            assert folder.name.startswith(".dprl-tls-")
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700
            assert sorted(path.name for path in folder.iterdir()) == ["cert.pem", "key.pem"]
            assert {stat.S_IMODE(path.stat().st_mode) for path in folder.iterdir()} == {0o600}
            assert "BEGIN CERTIFICATE" in (folder / "cert.pem").read_text()
            assert "PRIVATE KEY" in (folder / "key.pem").read_text()
            worker = next(line for line in script.splitlines() if "dask_worker" in line)
            assert f"dask_worker {address} " in worker and "--protocol tls://" in worker
            assert (f"--tls-ca-file {folder}/cert.pem --tls-cert {folder}/cert.pem "
                    f"--tls-key {folder}/key.pem") in worker
            with pytest.raises(ssl.SSLError):
                _first_bytes(address, Security.temporary())
            with Client(cluster, set_as_default=False, timeout="5s") as own:
                assert own.scheduler.address == address
    assert list(tmp_path.iterdir()) == []
