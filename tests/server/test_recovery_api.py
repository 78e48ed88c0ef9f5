"""The recovery routes on a real server and worker: ``GET /runs/{id}/status`` (with
``runs.read``, a long poll with ``wait``), and ``Client.get_status`` over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import keepgoing

from ._support import Stack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp("recovery"))
    try:
        s.admin = s.token("root", "admin")
        s.start_server()
        s.start_worker("recovery_app")
        yield s
    finally:
        s.cleanup()


@pytest.fixture
def client(stack: Stack) -> Iterator[keepgoing.Client]:
    with keepgoing.Client(stack.url, token=stack.admin) as c:
        yield c


def _fixed(stack: Stack) -> Path:
    return stack.root / "fixed"


def test_published_progress_is_read_over_http_with_runs_read(
    stack: Stack, client: keepgoing.Client
) -> None:
    handle = client.trigger_workflow("three_steps", {"word": "s"}, workflow_id="status-1")
    with pytest.raises(keepgoing.WorkflowFailedError):
        client.result(handle, timeout=30)
    assert client.get_status("status-1", "progress", wait=10) == 1
    assert client.get_status("status-1", "missing") is None
    with pytest.raises(TimeoutError):
        client.get_status("status-1", "missing", wait=0.5)

    reader = stack.token("reader", "runs.read")
    nobody = stack.token("nobody", "messages.send")
    with stack.api(reader) as api:
        body = api.get("/api/v1/runs/status-1/status").json()
        assert body["run_id"] == handle.run_id and body["ended"] is True
        assert body["values"]["progress"]["value"] == 1
        assert api.get("/api/v1/runs/status-1/status", params={"wait": -1}).status_code in (
            400,
            422,
        )
        assert api.get("/api/v1/runs/nope/status").status_code == 404
        assert api.get("/api/v1/runs/status-1/status", params={"key": ""}).status_code == 400
    with stack.api(nobody) as api:
        assert api.get("/api/v1/runs/status-1/status").status_code == 403
    with httpx.Client(base_url=stack.url) as anonymous:
        assert anonymous.get("/api/v1/runs/status-1/status").status_code == 401
