"""The run model the UI draws (``_views/run_model.py``) on hand-made histories."""

from __future__ import annotations

from keepgoing._history import events as ev
from keepgoing._store import worker_stops as stops
from keepgoing._views.run_model import build_model, retry_kind


def _start() -> list[ev.Event]:
    return [
        ev.WorkflowStarted(
            seq=1,
            at=10.0,
            workflow_name="w",
            workflow_id="w1",
            run_id="r",
            input={},
            code_version="v",
        ),
        ev.TaskScheduled(seq=2, at=10.0, cmd=1, name="fetch"),
    ]


def _error(type_: str, message: str) -> ev.ErrorInfo:
    return ev.ErrorInfo(type=type_, message=message)


def test_an_open_step_is_drawn_up_to_now_and_an_ended_run_stops_it() -> None:
    model = build_model(_start(), now=30.0)
    (step,) = model["steps"]
    assert step["status"] == "running"
    assert step["current"] == {"start": 10.0, "end": 30.0, "outcome": "running"}
    assert model["last"] == 30.0 and model["first"] == 10.0 and model["eventCount"] == 2
    ended = build_model([*_start(), ev.WorkflowCancelled(seq=3, at=12.0)], now=30.0)
    assert "current" not in ended["steps"][0] and ended["last"] == 12.0


def test_a_rate_limited_retry_is_its_own_kind_and_problem() -> None:
    history = [
        *_start(),
        ev.TaskAttemptFailed(
            seq=3,
            at=11.0,
            cmd=1,
            name="fetch",
            attempt=1,
            error=_error("HTTPError", "429 Too Many Requests"),
            reason="error",
            retry_at=12.0,
        ),
        ev.TaskCompleted(seq=4, at=13.0, cmd=1, result=1, attempt=2, started_at=12.0),
    ]
    model = build_model(history)
    assert [a["kind"] for a in model["steps"][0]["attempts"]] == ["rate_limited", "completed"]
    assert model["steps"][0]["duration"] == 3.0
    (problem,) = model["problems"]
    assert problem["label"] == "fetch #1: rate-limited (429), retried (HTTPError)"
    assert problem["seq"] == 4  # replay shows it resolved after the retry completed
    assert retry_kind("error", {"type": "ValueError", "message": "row 4290"}) == "error"
    assert retry_kind("timeout", {"type": "x", "message": "429"}) == "timeout"


def test_a_lost_worker_is_named_with_the_stores_words_and_its_outputs_reused() -> None:
    history = [
        *_start(),
        ev.TaskCompleted(seq=3, at=11.0, cmd=1, result=1, attempt=1, worker="a"),
        ev.TaskScheduled(seq=4, at=11.0, cmd=2, name="write"),
        ev.TaskAttemptFailed(
            seq=5,
            at=12.0,
            cmd=2,
            name="write",
            attempt=1,
            error=_error("WorkerLost", "gone"),
            reason="worker_lost",
            worker="a",
            retry_at=12.0,
            cause=stops.KILLED_BY_REQUEST,
            actor="alice",
            via="ui",
        ),
        ev.ActivationCompleted(seq=6, at=12.5, saw_upto=5, time=12.5, worker="b"),
    ]
    model = build_model(history)
    fetch, write = model["steps"]
    why = stops.describe("worker_lost", stops.KILLED_BY_REQUEST, "alice", "ui")
    assert write["attempts"][0]["why"] == why == "worker killed from the UI by alice"
    assert fetch["reused"] == {"by": "b", "lost": "a", "at": 12.5}
    assert write["reused"] is None
    (problem,) = model["problems"]
    assert problem["kind"] == "worker_lost" and problem["label"] == f"{why}: write (a)"


def test_a_review_decision_settles_the_uncertain_step_even_when_sent_first() -> None:
    decision = ev.MessageReceived(
        seq=3,
        at=10.5,
        message_id="m1",
        name="review:op-r-1",
        payload={"decision": "approve", "cmd": 1, "result": 5, "reason": "the CRM shows it"},
        sender_kind="user",
        sender_id="alice",
        sent_at=10.5,
    )
    failed = ev.TaskFailed(
        seq=4,
        at=11.0,
        cmd=1,
        name="fetch",
        error=_error("keepgoing.UncertainOutcome", "no answer"),
        attempts=1,
        reason="uncertain",
    )
    for history in ([*_start(), decision, failed], [*_start(), failed, decision]):
        (step,) = build_model(history)["steps"]
        assert step["status"] == "approved" and step["output"] == 5
        assert step["review"]["text"] == "approved by user alice: the CRM shows it"
    waiting = build_model([*_start(), failed])
    assert waiting["steps"][0]["status"] == "uncertain"
    assert [p["label"] for p in waiting["problems"]] == [
        "fetch #1: uncertain outcome, waiting for review"
    ]


def test_waits_messages_and_children_are_folded() -> None:
    history = [
        *_start(),
        ev.TimerStarted(seq=3, at=10.0, cmd=2, fire_at=70.0),
        ev.MessageWaitStarted(seq=4, at=10.0, cmd=3, name="go"),
        ev.MessageReceived(
            seq=5,
            at=11.0,
            message_id="m",
            name="go",
            payload=1,
            sender_kind="client",
            sender_id="c",
            sent_at=11.0,
        ),
        ev.ChildStarted(seq=6, at=11.0, cmd=4, workflow_name="kid", workflow_id="k", input={}),
        ev.ChildEnded(seq=7, at=12.0, cmd=4, workflow_id="k", run_id="kr", status="completed"),
    ]
    model = build_model(history)
    timer, message, child = model["waits"]
    assert timer["label"] == "timer until 00:01:10Z" and timer["openEnd"] == 12.0
    assert message["outcome"] == "received from client c" and message["end"] == 11.0
    assert child["outcome"] == "child completed"
    assert model["children"][0]["status"] == "completed"
