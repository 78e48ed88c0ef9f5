"""Starts over HTTP that know nothing of a workflow's limits still obey the ones its
workers recorded; the body's ``priority`` and ``flow_key``, and a singleton's skip."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from starlette.testclient import TestClient

from keepgoing._run_flow import RunFlow
from keepgoing._server.app import create_app
from keepgoing._store.sqlite import SqliteStore


@contextlib.contextmanager
def _client(flows: dict[str, RunFlow | None]) -> Iterator[TestClient]:
    store = SqliteStore(":memory:")
    app = create_app(store, auth=False, ui=False, groups=False, services=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        client.portal.call(store.record_flows, flows, 0.0)  # type: ignore[union-attr]
        yield client


def _start(client: TestClient, **body: Any) -> dict[str, Any]:
    response = client.post("/api/v1/runs", json=body)
    assert response.status_code in (200, 201), response.text
    found: dict[str, Any] = response.json()
    return found


def test_a_raw_start_obeys_the_recorded_limit_and_says_what_it_waits_for() -> None:
    with _client({"raw_digest": RunFlow(limit=1, key="account", params=("account",))}) as client:
        _start(client, workflow="raw_digest", input={"account": "a"}, workflow_id="d1")
        _start(client, workflow="raw_digest", input={"account": "a"}, workflow_id="d2", priority=4)
        run = client.get("/api/v1/runs/d2").json()

    assert run["status"] == "queued" and run["priority"] == 4
    assert run["waiting_for"] == (
        'queued: waiting for a concurrency slot of raw_digest for "a" (1/1 held)'
    )


def test_a_callable_key_needs_the_flow_key_from_the_code() -> None:
    with _client({"raw_digest": RunFlow(limit=1, callable_key=True)}) as client:
        refused = client.post("/api/v1/runs", json={"workflow": "raw_digest", "input": {}})
        given = _start(client, workflow="raw_digest", input={}, flow_key='"k"')

    assert refused.status_code == 400, refused.text
    assert "only a process with the workflow's code" in refused.json()["message"]
    assert given["created"] is True


def test_a_singleton_skip_answers_with_the_open_run() -> None:
    spec = RunFlow(limit=1, key="account", singleton=True, on_conflict="skip", params=("account",))
    with _client({"raw_sync": spec}) as client:
        first = _start(client, workflow="raw_sync", input={"account": "a"})
        again = _start(client, workflow="raw_sync", input={"account": "a"})

    assert again["existing"] is True and again["created"] is False
    assert again["run_id"] == first["run_id"]


def test_a_bad_priority_is_a_400() -> None:
    with _client({}) as client:
        response = client.post("/api/v1/runs", json={"workflow": "x", "priority": "high"})

    assert response.status_code == 400, response.text


def test_a_batch_says_which_starts_a_singleton_skipped() -> None:
    spec = RunFlow(limit=1, key="account", singleton=True, on_conflict="skip", params=("account",))
    with _client({"raw_sync": spec}) as client:
        first = _start(client, workflow="raw_sync", input={"account": "a"})
        response = client.post(
            "/api/v1/run-batches",
            json={"workflow": "raw_sync", "inputs": [{"account": "a"}, {"account": "b"}]},
        )

    assert response.status_code in (200, 201), response.text
    skipped, started = response.json()["runs"]
    assert skipped["existing"] is True and skipped["run_id"] == first["run_id"]
    assert started["existing"] is False and started["created"] is True
