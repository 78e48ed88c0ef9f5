"""Client.trigger_many: many starts in one commit, on each store.

Every acknowledged start is durable (a fresh client sees it, a worker started
afterwards runs it); a batch is all or nothing; request ids make a retried
batch start nothing twice; bad input is refused before the store sees it,
naming the item. Each test runs with a store client and with an HTTP client
of a real server on the same store (``POST /api/v1/run-batches``), which must
behave the same.
"""

from __future__ import annotations

import socket
import sys
import uuid
from collections.abc import Iterator

import httpx
import pytest

import keepgoing
from keepgoing import InvalidRequestError, PayloadError, WorkflowAlreadyRunningError

from ._support import Sandbox, WorkerProcess, Workers, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(params=["store", "http"])
def client(request: pytest.FixtureRequest, kg: Sandbox) -> Iterator[keepgoing.Client]:
    """A store client, or an HTTP client of a server (no auth, loopback) on the same store."""
    if request.param == "store":
        with keepgoing.Client(store=kg.url) as c:
            yield c
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    argv = [sys.executable, "-m", "keepgoing.cli", "server", "--store", kg.url]
    server = WorkerProcess("server", [*argv, "--port", str(port), "--no-auth"], kg.root, kg.env())
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _ready(server, url), 30, "the server to be ready")
        with keepgoing.Client(url) as c:
            yield c
    finally:
        server.reap()
        print(server.report())


def _ready(server: WorkerProcess, url: str) -> bool:
    if not server.alive():
        raise AssertionError(f"the server exited:\n{server.stderr()}")
    try:
        return httpx.get(f"{url}/readyz", timeout=1.0).status_code == 200
    except httpx.TransportError:
        return False


def _inputs(n: int, prefix: str = "r") -> list[dict[str, object]]:
    return [{"key": f"{prefix}{i}", "x": i} for i in range(n)]


def _count(client: keepgoing.Client) -> int:
    return len(client.list_runs(workflow="abc", limit=1000))


@pytest.mark.timeout(60)
def test_every_acknowledged_start_is_durable_and_runs(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    handles = client.trigger_many("abc", _inputs(25), workflow_ids=[f"abc-{i}" for i in range(25)])

    assert [h.workflow_id for h in handles] == [f"abc-{i}" for i in range(25)]
    assert len({h.run_id for h in handles}) == 25
    with keepgoing.Client(store=kg.url) as fresh:  # committed: another client reads them all
        for i, handle in enumerate(handles):
            run = fresh.get_run(handle.workflow_id, run_id=handle.run_id)
            assert run.status == "running"
            assert run.input == {"args": [], "kwargs": {"key": f"r{i}", "x": i}}
    workers.start(kg.app("steps"))  # started after the batch: the runs wait for it
    results = [client.result(h, timeout=40) for h in handles]
    assert [r["value"] for r in results] == [(i + 1) * 10 + 1 for i in range(25)]


def test_a_retried_batch_with_request_ids_starts_nothing_twice(
    kg: Sandbox, client: keepgoing.Client
) -> None:
    ids = [uuid.uuid4().hex for _ in range(3)]
    first = client.trigger_many("abc", _inputs(2), request_ids=ids[:2])
    again = client.trigger_many("abc", _inputs(3), request_ids=ids)  # the caller retried, plus one

    assert again[:2] == first
    assert [h.run_id for h in again] == ids
    assert _count(client) == 3
    with pytest.raises(InvalidRequestError, match=r"start #0.*already started run"):
        client.trigger_many("abc", _inputs(1), request_ids=ids[:1], workflow_ids=["elsewhere"])
    assert _count(client) == 3


def test_one_start_that_cannot_be_made_undoes_the_whole_batch(
    kg: Sandbox, client: keepgoing.Client
) -> None:
    client.trigger_workflow("abc", {"key": "k", "x": 0}, workflow_id="taken")

    with pytest.raises(WorkflowAlreadyRunningError, match="'taken'") as caught:
        client.trigger_many("abc", _inputs(3), workflow_ids=["free-0", "free-1", "taken"])

    assert any("start #2" in note for note in getattr(caught.value, "__notes__", []))
    assert _count(client) == 1  # free-0 and free-1 were not started either
    assert [r.workflow_id for r in client.list_runs(workflow="abc")] == ["taken"]


def test_bad_input_is_refused_naming_the_item_and_nothing_starts(
    kg: Sandbox, client: keepgoing.Client
) -> None:
    bad = _inputs(4)
    bad[2] = {"key": "r2", "x": object()}
    with pytest.raises(PayloadError, match="start #2"):
        client.trigger_many("abc", bad)
    with pytest.raises(ValueError, match=r"start #1: request_id 'nope'"):
        client.trigger_many("abc", _inputs(2), request_ids=[uuid.uuid4().hex, "nope"])
    with pytest.raises(ValueError, match=r"start #0: workflow_id ' bad'"):
        client.trigger_many("abc", _inputs(1), workflow_ids=[" bad"])
    with pytest.raises(
        InvalidRequestError, match="start #0 and start #2 have the same workflow_id"
    ):
        client.trigger_many("abc", _inputs(3), workflow_ids=["a", "b", "a"])
    same = uuid.uuid4().hex
    with pytest.raises(InvalidRequestError, match="start #0 and start #1 have the same request_id"):
        client.trigger_many("abc", _inputs(2), request_ids=[same, same])
    with pytest.raises(ValueError, match="3 inputs but 2 workflow_ids"):
        client.trigger_many("abc", _inputs(3), workflow_ids=["a", "b"])
    with pytest.raises(TypeError, match="inputs must be a list"):
        client.trigger_many("abc", {"key": "k", "x": 1})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at most 1000 runs"):
        client.trigger_many("abc", _inputs(1001))
    with pytest.raises(TypeError, match="needs a @workflow or its name"):
        client.trigger_many(42, _inputs(1))  # type: ignore[arg-type]
    assert _count(client) == 0
    assert client.trigger_many("abc", []) == []
