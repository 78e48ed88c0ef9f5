"""Server-sent events against a real server and worker: the runs stream and a run's
history stream, reconnecting with Last-Event-ID, limits and permissions."""

from __future__ import annotations

import contextlib

import httpx
import pytest

from keepgoing._server.context import ServerContext

from ._sse import events
from ._support import Stack
from .test_api import _id, result, start

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

STREAM = httpx.Timeout(30.0, read=20.0)
PER_TOKEN = ServerContext.max_streams_per_token


def test_run_stream_sends_every_event_then_end(admin: httpx.Client) -> None:
    workflow_id = _id("live")
    start(admin, "sleeper", {"seconds": 0.3}, workflow_id=workflow_id)
    seen: list[tuple[str, int]] = []
    ended = None
    with admin.stream("GET", f"/api/v1/runs/{workflow_id}/stream", timeout=STREAM) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for name, event_id, data in events(response):
            if name == "end":
                ended = data
                break
            assert name == "history" and event_id == str(data["seq"])
            seen.append((data["type"], data["seq"]))
    assert ended is not None and ended["status"] == "completed"
    history = admin.get(f"/api/v1/runs/{workflow_id}/history").json()["events"]
    assert seen == [(e["type"], e["seq"]) for e in history]  # all, in order, once
    assert ("TimerFired" in {t for t, _ in seen}) and seen[-1][0] == "WorkflowCompleted"

    # Reconnecting with Last-Event-ID (or ?after=) sends only what came after.
    last = history[-3]["seq"]
    for kwargs in ({"headers": {"Last-Event-ID": str(last)}}, {"params": {"after": last}}):
        with admin.stream(
            "GET", f"/api/v1/runs/{workflow_id}/stream", timeout=STREAM, **kwargs
        ) as response:
            got = [(n, d.get("seq")) for n, _, d in events(response)]
        assert got == [("history", last + 1), ("history", last + 2), ("end", None)]


def test_runs_stream_tells_of_new_runs_and_their_status(admin: httpx.Client) -> None:
    workflow_id = _id("watch")
    changes: list[tuple[str, str]] = []
    with admin.stream("GET", "/api/v1/stream/runs", timeout=STREAM) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        assert next(lines) == "retry: 1000"
        assert next(lines).startswith(":")  # open: the stream is listening from here on
        start(admin, "sum_two", {"a": 1, "b": 2}, workflow_id=workflow_id)
        for name, _, data in events(lines):
            assert name == "run"
            if data["run"]["workflow_id"] == workflow_id:
                changes.append((data["change"], data["run"]["status"]))
                if data["run"]["status"] == "completed":
                    break
    assert changes[0] == ("created", "running")
    assert changes[-1] == ("status", "completed")


def test_streams_end_after_stream_max_and_resume(stack: Stack, admin: httpx.Client) -> None:
    short = stack.start_server("--stream-max", "1", name="short-streams")
    workflow_id = _id("resume")
    headers = {"Authorization": f"Bearer {stack.admin}"}
    with httpx.Client(base_url=short.url, headers=headers, timeout=30) as api:  # type: ignore[attr-defined]
        start(api, "await_review", {"account": "r"}, workflow_id=workflow_id)
        with api.stream("GET", f"/api/v1/runs/{workflow_id}/stream", timeout=STREAM) as r:
            got = list(events(r))  # the stream ends by itself, the run still waiting
        assert got and all(name == "history" for name, _, _ in got)
        with api.stream("GET", "/api/v1/stream/runs", timeout=STREAM) as r:
            list(r.iter_lines())  # ends too
        # The runs stream resumes from an event id: every run changed since then.
        before = admin.get(f"/api/v1/runs/{workflow_id}").json()["created_at"] - 1
        with api.stream(
            "GET",
            "/api/v1/stream/runs",
            timeout=STREAM,
            headers={"Last-Event-ID": str(before)},
        ) as r:
            seen = {d["run"]["workflow_id"]: d["change"] for _, _, d in events(r)}
        assert seen[workflow_id] == "created"
        bad = api.get("/api/v1/stream/runs", headers={"Last-Event-ID": "yesterday"})
        assert bad.status_code == 400
        api.post(f"/api/v1/runs/{workflow_id}/messages", json={"name": "review", "payload": 1})


def test_streams_are_bounded_and_freed(stack: Stack, admin: httpx.Client) -> None:
    workflow_id = _id("bounded")
    start(admin, "await_review", {"account": "a"}, workflow_id=workflow_id)
    # Many clients that open a stream and go away: each frees its slot (the server
    # allows 200 at once), and the server still answers everything else.
    for _ in range(3):
        for _ in range(80):
            with admin.stream(
                "GET", f"/api/v1/runs/{workflow_id}/stream", timeout=STREAM
            ) as response:
                assert response.status_code == 200
                next(response.iter_lines())
    # One slow client holding a stream open does not hold the server.
    with admin.stream("GET", f"/api/v1/runs/{workflow_id}/stream", timeout=STREAM) as held:
        next(held.iter_lines())
        assert admin.get("/api/v1/run-counts").status_code == 200
        admin.post(f"/api/v1/runs/{workflow_id}/messages", json={"name": "review", "payload": 1})
        assert result(admin, workflow_id)["status"] == "completed"


def test_one_token_cannot_hold_every_stream(stack: Stack, admin: httpx.Client) -> None:
    """Streams are capped per token as well as per process: one caller holding its share
    open gets 429 past it, and everyone else still gets a stream."""
    greedy = stack.token("greedy-streams", "runs.read")
    other = stack.token("other-streams", "runs.read")
    with contextlib.ExitStack() as held, stack.api(greedy) as api, stack.api(other) as api2:
        reading = []  # each line iterator kept: a dropped one closes its stream
        for _ in range(PER_TOKEN):
            response = held.enter_context(api.stream("GET", "/api/v1/stream/runs", timeout=STREAM))
            assert response.status_code == 200
            lines = response.iter_lines()
            next(lines)
            reading.append(lines)
        refused = api.get("/api/v1/stream/runs", timeout=STREAM)
        assert refused.status_code == 429 and refused.json()["code"] == "too_many_streams"
        with api2.stream("GET", "/api/v1/stream/runs", timeout=STREAM) as fine:
            assert fine.status_code == 200
    # Closed, the token's slots are free again.
    with (
        stack.api(greedy) as api,
        api.stream("GET", "/api/v1/stream/runs", timeout=STREAM) as again,
    ):
        assert again.status_code == 200


def test_stream_errors(stack: Stack, admin: httpx.Client) -> None:
    assert admin.get("/api/v1/runs/no-such-run/stream").status_code == 404
    bad = admin.get("/api/v1/runs/x/stream", headers={"Last-Event-ID": "abc"})
    assert bad.status_code in (400, 404)
    assert admin.get("/api/v1/runs/x/stream", params={"after": -1}).status_code == 400
    nobody = stack.token("no-read", "messages.send")
    with stack.api(nobody) as api:
        assert api.get("/api/v1/stream/runs").status_code == 403
