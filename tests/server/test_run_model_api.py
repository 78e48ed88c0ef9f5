"""The run model the UI draws, folded by the server: a stored run's
(``GET /runs/{id}/model``) and a history file's (``POST /histories/fold``, which stores
nothing), with every refusal a hostile upload can provoke."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from ._support import Stack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

FOLD = "/api/v1/histories/fold"


def _finished(admin: httpx.Client) -> tuple[str, list[dict[str, Any]]]:
    workflow_id = f"model-{uuid.uuid4().hex[:8]}"
    started = admin.post(
        "/api/v1/runs",
        json={"workflow": "two_steps", "input": {"key": workflow_id}, "workflow_id": workflow_id},
    )
    assert started.status_code == 201, started.text
    done = admin.get(f"/api/v1/runs/{workflow_id}/result", params={"timeout": 20}).json()
    assert done["done"] and done["run"]["status"] == "completed", done
    events = admin.get(f"/api/v1/runs/{workflow_id}/history").json()["events"]
    return workflow_id, events


def _refused(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == code, body
    message: str = body["message"]
    return message


def test_a_stored_run_and_its_history_file_fold_alike(admin: httpx.Client) -> None:
    workflow_id, events = _finished(admin)
    stored = admin.get(f"/api/v1/runs/{workflow_id}/model")
    assert stored.status_code == 200, stored.text
    model = stored.json()
    steps = admin.get(f"/api/v1/runs/{workflow_id}/steps").json()["steps"]
    assert [(s["cmd"], s["status"]) for s in model["steps"]] == [
        (s["cmd"], s["status"]) for s in steps
    ]
    assert model["run"]["status"] == "completed" and model["eventCount"] == len(events)
    # The flaky step's first attempt fails, then it completes: one problem, resolved.
    assert [p["label"] for p in model["problems"]] == ["flaky #2: error (RuntimeError)"]
    uploaded = admin.post(FOLD, json={"events": events})
    assert uploaded.status_code == 200, uploaded.text
    assert uploaded.json() == model
    # With ``events=true`` the history comes along, read with the fold once.
    both = admin.get(f"/api/v1/runs/{workflow_id}/model", params={"events": "true"}).json()
    assert both.pop("events") == events and both == model


def test_a_prefix_is_the_run_as_it_stood(admin: httpx.Client) -> None:
    workflow_id, events = _finished(admin)
    first_step = next(e for e in events if e["type"] == "TaskScheduled")
    upto = first_step["seq"]
    stored = admin.get(f"/api/v1/runs/{workflow_id}/model", params={"upto": upto}).json()
    uploaded = admin.post(FOLD, json={"events": [e for e in events if e["seq"] <= upto]}).json()
    assert stored == uploaded
    assert [s["status"] for s in stored["steps"]] == ["running"]
    assert admin.get(f"/api/v1/runs/{workflow_id}/model", params={"upto": 0}).json()["steps"] == []


def test_folding_a_file_stores_nothing(admin: httpx.Client) -> None:
    _, events = _finished(admin)
    other = f"never-{uuid.uuid4().hex[:8]}"
    renamed = [{**e, "workflow_id": other} if e["type"] == "WorkflowStarted" else e for e in events]
    assert admin.post(FOLD, json={"events": renamed}).json()["run"]["workflowId"] == other
    assert admin.get(f"/api/v1/runs/{other}").status_code == 404


@pytest.mark.parametrize(
    ("events", "said"),
    [
        ([{"type": "NoSuchEvent", "seq": 1, "at": 1.0}], "event #0 is not a history event"),
        ([{"type": "TimerFired", "at": 1.0, "cmd": 1}], "event #0 needs a whole-number seq"),
        ([{"type": "TimerFired", "seq": True, "at": 1.0, "cmd": 1}], "whole-number seq"),
        ([{"type": "TimerFired", "seq": 1, "at": "soon", "cmd": 1}], "numeric at"),
        ([{"type": "TimerFired", "seq": 1, "at": 1.0, "cmd": 1, "extra": 2}], "event #0"),
        (
            [
                {"type": "TaskScheduled", "seq": 1, "at": 1.0, "cmd": 1, "name": "a"},
                {"type": "TaskCompleted", "seq": 2, "at": 2.0, "cmd": "x", "attempt": 1},
            ],
            "event #1",
        ),
    ],
)
def test_a_history_that_is_not_one_is_refused_by_name(
    admin: httpx.Client, events: list[dict[str, Any]], said: str
) -> None:
    assert said in _refused(admin.post(FOLD, json={"events": events}), 400, "invalid_request")


def test_a_value_no_store_carries_is_refused(admin: httpx.Client) -> None:
    body = '{"events": [{"type": "TaskCompleted", "seq": 1, "at": 1.0, "cmd": 1, ' + (
        '"attempt": 1, "result": NaN}]}'
    )
    response = admin.post(FOLD, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text


def test_the_body_must_be_a_history(admin: httpx.Client) -> None:
    _refused(admin.post(FOLD, json={"events": "all"}), 400, "invalid_request")
    _refused(admin.post(FOLD, json={"events": [], "store": True}), 400, "invalid_request")


def test_a_history_over_the_body_limit_is_413(admin: httpx.Client) -> None:
    event = {"type": "TimerFired", "seq": 1, "at": 1.0, "cmd": 1}
    response = admin.post(FOLD, json={"events": [event] * 40_000})
    assert _refused(response, 413, "payload_too_large")


def test_a_history_of_too_many_events_is_413_naming_the_limit(admin: httpx.Client) -> None:
    response = admin.post(FOLD, json={"events": [{}] * 20_001})
    assert "at most 20,000 events" in _refused(response, 413, "payload_too_large")


def test_folding_needs_runs_read(stack: Stack) -> None:
    with stack.api(stack.token("trigger-only", "workflows.trigger")) as api:
        _refused(api.post(FOLD, json={"events": []}), 403, "permission_denied")
        _refused(api.get("/api/v1/runs/anything/model"), 403, "permission_denied")
    with stack.api() as anonymous:
        _refused(anonymous.post(FOLD, json={"events": []}), 401, "unauthenticated")


def test_no_such_run_has_no_model(admin: httpx.Client) -> None:
    _refused(admin.get("/api/v1/runs/no-such-run/model"), 404, "run_not_found")
