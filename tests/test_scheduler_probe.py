"""The check of a dask scheduler's address before a run connects to it (issue 42, CLI): a
real scheduler passes; an address that is none, a closed port, a server that says nothing and
one that speaks another protocol each give one clear error within the probe's timeout, where
the client used to hang or fail with a 3 EiB MemoryError."""

import socket
import subprocess
import sys
import threading
import time

import pytest

from dprl.engine.dask_engine import probe_scheduler


def _server(answer: bytes | None):
    """A TCP server on 127.0.0.1 that accepts connections and sends ``answer`` (None: nothing)."""
    listener = socket.create_server(("127.0.0.1", 0))
    held = []

    def serve():
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            held.append(connection)
            if answer is not None:
                connection.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    return listener, f"tcp://127.0.0.1:{listener.getsockname()[1]}"


def test_a_running_dask_scheduler_passes():
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster:
        probe_scheduler(cluster.scheduler_address)


@pytest.mark.parametrize("answer", [None, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
                                    b"\xff" * 32])
def test_a_server_that_is_not_a_dask_scheduler_is_named_within_the_timeout(answer):
    listener, address = _server(answer)
    try:
        start = time.monotonic()
        with pytest.raises(ConnectionError, match="not as a dask scheduler"):
            probe_scheduler(address, timeout=2.0)
        assert time.monotonic() - start < 30
    finally:
        listener.close()


def test_a_closed_port_and_an_address_that_is_none_are_refused():
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    with pytest.raises(ConnectionError, match="cannot reach a dask scheduler"):
        probe_scheduler(f"tcp://127.0.0.1:{port}", timeout=2.0)
    with pytest.raises(ValueError, match="dask scheduler's address"):
        probe_scheduler("notanaddress")


def test_the_cli_names_a_bad_scheduler_in_one_line_and_fails_fast():
    """The CLI's path (a server that stays silent is named after the probe's timeout, shown
    above with a shorter one)."""
    listener, address = _server(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    try:
        for value in ("notanaddress", address):
            start = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "dprl", "run", "xie2019-chain",
                                   "--scheduler", value], capture_output=True, text=True,
                                  timeout=300)
            assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
            assert done.stderr.count("\n") == 1 and "scheduler" in done.stderr
            assert time.monotonic() - start < 120
    finally:
        listener.close()
