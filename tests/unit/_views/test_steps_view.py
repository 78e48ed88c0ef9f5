"""The steps view's rules (``_views/steps.py``) on hand-made histories."""

from __future__ import annotations

from keepgoing._history import events as ev
from keepgoing._store.gateway_protocol import UsageRow
from keepgoing._store.inspect_protocol import TaskState
from keepgoing._store.records import AuditEntry
from keepgoing._views.steps import build_steps, page

LOST = ev.ErrorInfo(type="keepgoing.WorkerLost", message="worker w1 stopped")


def _history() -> list[ev.Event]:
    raw: list[ev.Event] = [
        ev.TaskScheduled(cmd=1, name="fetch", args=["a"], kwargs={"k": 1}),
        ev.TaskCompleted(cmd=1, result="page", attempt=1, worker="w1", started_at=10.0),
        ev.ActivationCompleted(saw_upto=2, time=11.0, worker="w1"),
        ev.TaskScheduled(cmd=2, name="score", args=[]),
        ev.MemoryCommitted(volume="notes", version=3, paths=["a.md"], cmd=1, attempt=1),
        ev.TaskAttemptFailed(
            cmd=2,
            name="score",
            attempt=1,
            error=LOST,
            reason="worker_lost",
            worker="w1",
            started_at=12.0,
            retry_at=13.0,
        ),
        ev.ActivationCompleted(saw_upto=6, time=14.0, worker="w2"),
    ]
    return [type(e)(**{**e.__dict__, "seq": n, "at": 10.0 + n}) for n, e in enumerate(raw, start=1)]


def test_attempts_causes_memory_and_reuse() -> None:
    running = TaskState("r", 2, "score", "running", 2, 0, 1, 15.0, 75.0, "w2", 13.0)
    kill = AuditEntry(
        at=12.5,
        actor_kind="user",
        actor_id="alice",
        action="worker.kill",
        detail={"worker_id": "w1"},
    )
    fetch, score = build_steps("r", _history(), [running], [kill])
    assert fetch.status == "completed" and fetch.output == "page"
    assert fetch.as_dict()["inputs"] == {"args": ["a"], "kwargs": {"k": 1}}
    assert fetch.operation_id == "op-r-1"
    assert [(m.volume, m.version) for m in fetch.memory] == [("notes", 3)]
    assert fetch.reused_output and fetch.reused_by == "w2"  # w1 died later; w2 went on
    lost, now = score.attempts
    assert (lost.outcome, lost.cause, lost.killed_by) == (
        "worker_lost",
        "killed_by_request",
        "alice",
    )
    assert lost.duration == lost.ended_at - 12.0  # type: ignore[operator]
    assert (now.outcome, now.worker, now.ended_at) == ("running", "w2", None)
    assert score.status == "running" and not score.reused_output


def test_no_kill_no_reuse_and_paging() -> None:
    steps = build_steps("r", _history()[:4])
    assert steps[0].reused_output is False  # nobody was lost
    assert build_steps("r", _history())[1].attempts[0].cause == "worker_lost"
    first = page(steps, 0, 1)
    assert [s.cmd for s in first.steps] == [1] and first.total == 2 and first.next_offset == 1
    assert page(steps, 1, 5).next_offset is None


def _lost(n: int, reason: str = "worker_lost", **cause: str) -> ev.TaskAttemptFailed:
    return ev.TaskAttemptFailed(
        cmd=1, name="fetch", attempt=n, error=LOST, reason=reason, worker=f"w{n}", **cause
    )


def test_causes_recorded_in_history_win_and_say_whether_they_counted() -> None:
    history: list[ev.Event] = [
        ev.TaskScheduled(cmd=1, name="fetch"),
        _lost(1, cause="killed_by_request", actor="alice", via="ui"),
        _lost(2, cause="unexplained"),
        _lost(3, cause="oom_killed", via="kubernetes"),
        _lost(4, reason="released", cause="scaled_down", via="autoscaler"),
        _lost(5, reason="released"),
        _lost(6),  # recorded before causes were kept; no kill in the audit log
    ]
    (step,) = build_steps("r", history)
    seen = [(a.cause, a.killed_by, a.via, a.cause_text, a.counted) for a in step.attempts]
    assert seen == [
        ("killed_by_request", "alice", "ui", "worker killed from the UI by alice", False),
        ("unexplained", None, None, "worker lost (no known cause)", True),
        ("oom_killed", None, "kubernetes", "worker ran out of memory (OOMKilled)", True),
        ("scaled_down", None, "autoscaler", "worker scaled down", False),
        ("released", None, None, "worker shut down and handed the attempt back", False),
        ("worker_lost", None, None, "worker lost", True),
    ]
    # A cause in history is not overridden by an audit entry naming the same worker.
    kill = AuditEntry(12.0, "user", "bob", "worker.kill", detail={"worker_id": "w2"})
    (again,) = build_steps("r", history, kills=[kill])
    assert again.attempts[1].cause == "unexplained"


def _usage(step: int, attempt: int, calls: int, cost: float, state: str) -> UsageRow:
    return UsageRow(
        workflow="wf",
        run_id="r",
        step=step,
        attempt=attempt,
        model=None,
        key_id=None,
        attempt_state=state,
        calls=calls,
        errors=0,
        refused=0,
        input_tokens=100 * calls,
        output_tokens=10 * calls,
        cost=cost,
        latency_sum=0.5 * calls,
        latency_max=0.5,
        first_at=12.0,
        last_at=13.0,
    )


def test_each_attempt_shows_what_its_model_calls_cost() -> None:
    running = TaskState("r", 2, "score", "running", 2, 0, 1, 15.0, 75.0, "w2", 13.0)
    rows = [_usage(2, 1, 2, 0.02, "lost"), _usage(2, 2, 1, 0.01, "open"), _usage(9, 1, 1, 1, "x")]
    fetch, score = build_steps("r", _history(), [running], usage=rows)
    assert fetch.usage is None and fetch.as_dict()["usage"] is None  # no model call
    lost, now = score.attempts
    assert lost.usage is not None and (lost.usage.calls, lost.usage.tokens) == (2, 220)
    assert lost.usage.cost == 0.02  # the killed attempt's calls were paid for
    assert now.usage is not None and now.usage.calls == 1
    assert score.usage is not None and score.usage.calls == 3
    assert round(score.usage.cost, 6) == 0.03 and score.usage.latency == 1.5
    body = score.as_dict()
    assert body["usage"]["tokens"] == 330
    assert [a["usage"]["cost"] for a in body["attempts"]] == [0.02, 0.01]
