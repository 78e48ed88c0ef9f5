"""``POST /api/v1/run-batches`` and ``Client(url).trigger_many`` on a real server and worker.

A batch is all or none: every bad input is refused with a 4xx naming the
problem and nothing stored; request ids make a retried batch start nothing
twice; a token without ``workflows.trigger`` gets 403 and nothing stored.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import keepgoing
from keepgoing import errors

from ._support import Stack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

BATCH = "/api/v1/run-batches"


def _prefix() -> str:
    return f"b-{uuid.uuid4().hex[:8]}"


def _inputs(n: int) -> list[dict[str, int]]:
    return [{"a": i, "b": 10} for i in range(n)]


def _ids(prefix: str, n: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(n)]


def _deep(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


def _error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == code, body
    return str(body["message"])


def _stored(admin: httpx.Client, prefix: str) -> list[str]:
    runs = admin.get("/api/v1/runs", params={"id": prefix, "limit": 1000}).json()["runs"]
    return sorted(r["workflow_id"] for r in runs)


@pytest.fixture
def client(stack: Stack) -> Iterator[keepgoing.Client]:
    with keepgoing.Client(stack.url, token=stack.admin) as c:
        yield c


# -- the route -------------------------------------------------------------------------------
def test_a_batch_starts_every_run_and_a_worker_runs_them(admin: httpx.Client) -> None:
    prefix = _prefix()
    response = admin.post(
        BATCH, json={"workflow": "sum_two", "inputs": _inputs(5), "workflow_ids": _ids(prefix, 5)}
    )

    assert response.status_code == 201, response.text
    runs = response.json()["runs"]
    assert [r["workflow_id"] for r in runs] == _ids(prefix, 5)
    assert all(r["created"] and r["workflow_name"] == "sum_two" for r in runs)
    assert len({r["run_id"] for r in runs}) == 5
    for i, run in enumerate(runs):
        done = admin.get(f"/api/v1/runs/{run['workflow_id']}/result", params={"timeout": 20})
        assert done.json()["run"]["result"] == i + 10


def test_a_retried_batch_answers_the_same_runs_and_starts_nothing_twice(
    admin: httpx.Client,
) -> None:
    prefix = _prefix()
    body: dict[str, Any] = {
        "workflow": "sleeper",
        "inputs": [{"seconds": 0}] * 3,
        "workflow_ids": _ids(prefix, 3),
        "request_ids": [uuid.uuid4().hex for _ in range(3)],
    }
    first = admin.post(BATCH, json=body)
    again = admin.post(BATCH, json=body)

    assert (first.status_code, again.status_code) == (201, 200)
    assert [r["run_id"] for r in again.json()["runs"]] == body["request_ids"]
    assert [r["run_id"] for r in first.json()["runs"]] == body["request_ids"]
    assert not any(r["created"] for r in again.json()["runs"])
    assert _stored(admin, prefix) == _ids(prefix, 3)
    audit = admin.get("/api/v1/audit", params={"action": "workflow.trigger_many"}).json()
    mine = [e for e in audit["entries"] if e["detail"]["run_ids"] == body["request_ids"]]
    assert len(mine) == 1  # one entry for the batch; the repeat started nothing
    assert mine[0]["detail"]["runs"] == 3 and mine[0]["actor_id"] == "root"


def test_a_request_id_that_started_another_run_is_a_409(admin: httpx.Client) -> None:
    prefix = _prefix()
    rid = uuid.uuid4().hex
    created = admin.post(BATCH, json={"workflow": "sleeper", "inputs": [{"seconds": 0}]})
    assert created.status_code == 201
    admin.post(
        BATCH,
        json={"workflow": "sleeper", "inputs": [{"seconds": 0}], "request_ids": [rid]},
    )
    response = admin.post(
        BATCH,
        json={
            "workflow": "sleeper",
            "inputs": [{"seconds": 0}, {"seconds": 0}],
            "workflow_ids": _ids(prefix, 2),
            "request_ids": [uuid.uuid4().hex, rid],
        },
    )
    assert "start #1" in _error(response, 409, "request_conflict")
    assert _stored(admin, prefix) == []


def test_an_open_workflow_id_is_a_409_naming_the_item_and_nothing_starts(
    admin: httpx.Client,
) -> None:
    prefix = _prefix()
    taken = admin.post("/api/v1/runs", json={"workflow": "sleeper", "input": {"seconds": 30}})
    taken_id = taken.json()["workflow_id"]
    response = admin.post(
        BATCH,
        json={
            "workflow": "sleeper",
            "inputs": [{"seconds": 0}] * 3,
            "workflow_ids": [f"{prefix}-0", f"{prefix}-1", taken_id],
        },
    )
    message = _error(response, 409, "workflow_running")
    assert "start #2" in message
    assert response.json()["details"]["start"] == 2
    assert _stored(admin, prefix) == []
    admin.post(f"/api/v1/runs/{taken_id}/cancel", json={})


@pytest.mark.parametrize(
    ("change", "status", "code", "names"),
    [
        ({"inputs": {"a": 1}}, 400, "invalid_request", "inputs"),
        ({"inputs": "abc"}, 400, "invalid_request", "inputs"),
        ({"inputs": [{"a": 1}] * 1001}, 400, "invalid_request", "inputs"),
        ({"workflow_ids": ["x-0"]}, 400, "invalid_request", "2 inputs but 1 workflow_ids"),
        ({"request_ids": [uuid.uuid4().hex]}, 400, "invalid_request", "2 inputs but 1 request_"),
        ({"workflow_ids": ["ok", " bad"]}, 400, "invalid_request", "workflow_ids.1"),
        ({"request_ids": [uuid.uuid4().hex, "nope"]}, 400, "invalid_request", "request_ids.1"),
        ({"workflow_ids": ["same", "same"]}, 400, "invalid_request", "start #0 and start #1"),
        ({"request_ids": ["a" * 32] * 2}, 400, "invalid_request", "same request_id"),
        ({"inputs": [{"a": 1}, 7]}, 400, "invalid_request", "inputs.1"),
        ({"inputs": [{"a": 1}, {"deep": _deep(120)}]}, 400, "invalid_payload", "start #1"),
        ({"task_queue": "no good"}, 400, "invalid_request", "task_queue"),
        ({"workflow": ""}, 400, "invalid_request", "workflow"),
        ({"workflow": "no_such_workflow", "strict": True}, 404, "workflow_not_found", "no_such"),
        ({"inputs": [{"a": "x" * (700 * 1024)}, {"a": "y" * (500 * 1024)}]}, 413, None, "limit"),
    ],
)
def test_bad_input_is_refused_naming_the_problem_and_nothing_is_stored(
    admin: httpx.Client,
    change: dict[str, Any],
    status: int,
    code: str | None,
    names: str,
) -> None:
    prefix = _prefix()
    body = {"workflow": "sleeper", "inputs": [{"a": 1}, {"a": 2}], **change}
    body.setdefault("workflow_ids", _ids(prefix, 2))
    response = admin.post(BATCH, json=body)

    assert response.status_code == status, response.text
    assert response.json()["code"] == (code or "payload_too_large")
    assert names in response.json()["message"]
    assert _stored(admin, prefix) == []


def test_text_that_is_not_unicode_is_refused_naming_the_item(admin: httpx.Client) -> None:
    prefix = _prefix()
    ids = json.dumps([f"{prefix}-0", f"{prefix}-1"])
    raw = (
        f'{{"workflow": "sleeper", "workflow_ids": {ids}, '
        '"inputs": [{"seconds": 0}, {"t": "\\ud800"}]}'
    )
    response = admin.post(BATCH, content=raw, headers={"content-type": "application/json"})
    assert "inputs[1]" in _error(response, 400, "invalid_payload")
    assert _stored(admin, prefix) == []


def test_a_token_without_the_trigger_permission_gets_403_and_nothing_is_stored(
    stack: Stack, admin: httpx.Client
) -> None:
    prefix = _prefix()
    body = {"workflow": "sleeper", "inputs": [{"seconds": 0}], "workflow_ids": [f"{prefix}-0"]}
    reader = stack.token("batch-reader", "runs.read", "messages.send")
    with stack.api(reader) as api:
        _error(api.post(BATCH, json=body), 403, "permission_denied")
        assert api.post(BATCH, json=body).json()["details"] == {"permission": "workflows.trigger"}
    with (
        keepgoing.Client(stack.url, token=reader) as c,
        pytest.raises(errors.PermissionDeniedError),
    ):
        c.trigger_many("sleeper", [{"seconds": 0}], workflow_ids=[f"{prefix}-1"])
    assert _stored(admin, prefix) == []


def test_an_empty_batch_starts_nothing(admin: httpx.Client) -> None:
    response = admin.post(BATCH, json={"workflow": "sleeper", "inputs": []})
    assert (response.status_code, response.json()) == (
        200,
        {"runs": [], "warning": None, "warning_code": None},
    )


# -- Client(url).trigger_many --------------------------------------------------------------
def test_the_http_client_starts_a_batch_that_the_worker_runs(
    client: keepgoing.Client, stack: Stack
) -> None:
    prefix = _prefix()
    handles = client.trigger_many("sum_two", _inputs(20), workflow_ids=_ids(prefix, 20))

    assert all(isinstance(h, keepgoing.WorkflowRunHandle) for h in handles)
    assert [h.workflow_id for h in handles] == _ids(prefix, 20)
    with keepgoing.Client(store=stack.store_url) as direct:  # committed when it returned
        for i, handle in enumerate(handles):
            run = direct.get_run(handle.workflow_id, run_id=handle.run_id)
            assert run.input == {"args": [], "kwargs": {"a": i, "b": 10}}
    assert [client.result(h, timeout=30) for h in handles] == [i + 10 for i in range(20)]


def test_the_http_client_retries_a_batch_without_starting_anything_twice(
    client: keepgoing.Client, admin: httpx.Client
) -> None:
    prefix = _prefix()
    ids = [uuid.uuid4().hex for _ in range(3)]
    first = client.trigger_many("sleeper", [{"seconds": 0}] * 2, request_ids=ids[:2])
    again = client.trigger_many("sleeper", [{"seconds": 0}] * 3, request_ids=ids)

    assert again[:2] == first
    assert [h.run_id for h in again] == ids
    with pytest.raises(errors.InvalidRequestError, match=r"start #0.*already started run"):
        client.trigger_many("sleeper", [{"seconds": 0}], request_ids=ids[:1], workflow_ids=[prefix])
    assert _stored(admin, prefix) == []


def test_the_http_client_raises_what_the_store_client_raises(
    client: keepgoing.Client, admin: httpx.Client
) -> None:
    prefix = _prefix()
    taken = client.trigger_workflow("sleeper", {"seconds": 30}, workflow_id=f"{prefix}-taken")
    with pytest.raises(errors.WorkflowAlreadyRunningError, match="taken") as caught:
        client.trigger_many(
            "sleeper", [{"seconds": 0}] * 2, workflow_ids=[f"{prefix}-free", f"{prefix}-taken"]
        )
    assert any("start #1" in note for note in getattr(caught.value, "__notes__", []))
    bad = [{"seconds": 0}, {"seconds": object()}]
    with pytest.raises(errors.PayloadError, match="start #1"):
        client.trigger_many("sleeper", bad)
    with pytest.raises(ValueError, match=r"start #1: request_id 'nope'"):
        client.trigger_many("sleeper", [{}, {}], request_ids=[uuid.uuid4().hex, "nope"])
    with pytest.raises(ValueError, match=r"start #0: workflow_id ' bad'"):
        client.trigger_many("sleeper", [{}], workflow_ids=[" bad"])
    with pytest.raises(errors.InvalidRequestError, match="start #0 and start #2 have the same"):
        client.trigger_many("sleeper", [{}] * 3, workflow_ids=["a", "b", "a"])
    with pytest.raises(ValueError, match="3 inputs but 2 workflow_ids"):
        client.trigger_many("sleeper", [{}] * 3, workflow_ids=["a", "b"])
    with pytest.raises(TypeError, match="inputs must be a list"):
        client.trigger_many("sleeper", {"seconds": 1})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at most 1000 runs"):
        client.trigger_many("sleeper", [{}] * 1001)
    with pytest.raises(TypeError, match="needs a @workflow or its name"):
        client.trigger_many(42, [{}])  # type: ignore[arg-type]
    with pytest.raises(errors.WorkflowNotFoundError):
        client.trigger_many("no_such_workflow", [{}], strict=True)
    with pytest.raises(errors.PayloadTooLargeError):
        client.trigger_many("sleeper", [{"pad": "x" * 2048}] * 600)  # over the 1 MiB body
    assert client.trigger_many("sleeper", []) == []
    assert _stored(admin, prefix) == [f"{prefix}-taken"]
    client.cancel_workflow(taken.workflow_id)
