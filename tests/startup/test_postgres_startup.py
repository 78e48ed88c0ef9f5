"""A worker or server started while its PostgreSQL is down waits for it.

Real ``keepgoing worker`` and ``keepgoing server`` processes on a throwaway
cluster (``_cluster``) that the tests stop and start. Failures that waiting
cannot fix (a wrong password, a database that does not exist) end the
process at once, with the DSN in the message and its password redacted.
"""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest

import keepgoing
from integration._support import WorkerProcess, free_port, wait_until
from keepgoing.errors import WorkflowNotFoundError

from ._cluster import APP_DATABASE, DATABASE, PASSWORD, PASSWORD_ROLE, Cluster
from .conftest import Processes

pytestmark = pytest.mark.timeout(90)

WAITING = "waiting for the store"
CONNECTED = "connected to the store"


def _run_one(url: str, workflow_id: str) -> object:
    """Start a five_steps run (once a worker has recorded the workflow) and wait for it."""
    with keepgoing.Client(store=url) as client:

        def trigger() -> object:
            try:
                return client.trigger_workflow("five_steps", {"run": 7}, workflow_id=workflow_id)
            except WorkflowNotFoundError:  # no worker has served it yet
                return None

        handle = wait_until(trigger, 30, "a worker to record five_steps")
        return client.result(handle, timeout=30)  # type: ignore[arg-type]


def _exited(proc: WorkerProcess, timeout: float = 20) -> int:
    return proc.proc.wait(timeout=timeout)


def test_a_worker_started_while_the_database_is_down_waits_then_serves(
    cluster: Cluster, procs: Processes, app: Path
) -> None:
    cluster.stop()
    worker = procs.start("worker", str(app), "--store", cluster.url(), name="worker")
    wait_until(lambda: WAITING in worker.stderr(), 30, "the worker to say it waits")
    assert worker.alive(), worker.report()

    cluster.start()
    wait_until(lambda: CONNECTED in worker.stderr(), 30, "the worker to say it connected")
    assert _run_one(cluster.url(), "wait-then-serve") == [70, 71, 72, 73, 74]

    assert worker.terminate() == 0
    err = worker.stderr()
    assert err.count(WAITING) == 1 and err.count(CONNECTED) == 1, err  # one line each
    assert "Traceback" not in err, err


def test_a_server_started_while_the_database_is_down_is_not_ready_until_it_is_up(
    cluster: Cluster, procs: Processes
) -> None:
    cluster.stop()
    port = free_port()
    server = procs.start(
        "server", "--no-auth", "--port", str(port), "--store", cluster.url(), name="server"
    )
    base = f"http://127.0.0.1:{port}"

    def answers(path: str) -> int | None:
        try:
            return httpx.get(base + path, timeout=2).status_code
        except httpx.TransportError:
            return None

    wait_until(lambda: answers("/healthz") == 200, 30, "the server to answer /healthz")
    assert answers("/readyz") == 503
    waiting = httpx.get(base + "/api/v1/runs", timeout=2)
    assert waiting.status_code == 503 and waiting.json()["code"] == "store_error"
    assert waiting.headers["retry-after"] == "1"
    assert server.alive() and WAITING in server.stderr(), server.report()

    cluster.start()
    wait_until(lambda: answers("/readyz") == 200, 30, "the server to be ready")
    assert httpx.get(base + "/readyz", timeout=2).json() == {"status": "ready"}
    assert httpx.get(base + "/api/v1/runs", timeout=2).status_code == 200
    assert server.terminate() == 0
    err = server.stderr()
    assert err.count(WAITING) == 1 and err.count(CONNECTED) == 1, err


@pytest.mark.parametrize("command", ["worker", "server"])
def test_a_wrong_password_fails_at_once_naming_the_dsn_without_the_password(
    cluster: Cluster, procs: Processes, app: Path, command: str
) -> None:
    if not cluster.running:
        cluster.start()
    url = cluster.url(user=PASSWORD_ROLE, password="not-the-" + PASSWORD)
    args = [str(app)] if command == "worker" else ["--no-auth", "--port", str(free_port())]
    proc = procs.start(command, *args, "--store", url, name=command)

    assert _exited(proc) == 1  # no --connect-timeout: it did not wait
    err = proc.stderr()
    redacted = f"postgresql://{PASSWORD_ROLE}:***@127.0.0.1:{cluster.port}/{DATABASE}"
    assert redacted in err, err
    assert "password authentication failed" in err, err
    assert PASSWORD not in err, err
    assert WAITING not in err and "Traceback" not in err, err


def test_the_right_password_is_let_in(cluster: Cluster, procs: Processes, app: Path) -> None:
    if not cluster.running:
        cluster.start()
    url = cluster.url(APP_DATABASE, user=PASSWORD_ROLE, password=PASSWORD)
    worker = procs.start("worker", str(app), "--store", url, name="worker")
    assert _run_one(url, "right-password") == [70, 71, 72, 73, 74]
    worker.signal(signal.SIGTERM)
    assert _exited(worker) == 0
    assert PASSWORD not in worker.stderr()


def test_a_database_that_does_not_exist_fails_at_once(
    cluster: Cluster, procs: Processes, app: Path
) -> None:
    if not cluster.running:
        cluster.start()
    worker = procs.start(
        "worker", str(app), "--store", cluster.url(database="no_such_db"), name="worker"
    )
    assert _exited(worker) == 1
    err = worker.stderr()
    assert f"127.0.0.1:{cluster.port}/no_such_db" in err, err
    assert 'database "no_such_db" does not exist' in err, err
    assert "retrying cannot fix this" in err and WAITING not in err, err


@pytest.mark.parametrize("command", ["worker", "server"])
def test_connect_timeout_gives_up_with_a_clear_error(
    procs: Processes, app: Path, command: str
) -> None:
    url = f"postgresql://kg:secret@127.0.0.1:{free_port()}/kg"  # nothing listens there
    args = [str(app)] if command == "worker" else ["--no-auth", "--port", str(free_port())]
    proc = procs.start(command, *args, "--store", url, "--connect-timeout", "1", name=command)

    assert _exited(proc) == 1
    err = proc.stderr()
    assert WAITING in err, err
    assert "gave up waiting for the store after 1s (--connect-timeout)" in err, err
    assert "Connection refused" in err and "kg:***@127.0.0.1" in err, err
    assert "secret" not in err and "Traceback" not in err, err
