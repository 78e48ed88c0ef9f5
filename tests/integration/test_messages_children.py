"""The docs' ``supervisor``/``assistant`` on worker subprocesses, with and without a SIGKILL."""

from __future__ import annotations

from collections import Counter

import pytest

import keepgoing
from keepgoing._history import events as ev

from ._messaging_support import count_in_history
from ._support import Sandbox, Workers, of_type, pid_of, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

QUESTIONS = [f"q{i}" for i in range(1, 7)]
ANSWERS = [f"answer to {q}" for q in QUESTIONS]


def child_of(client: keepgoing.Client, workflow_id: str) -> str:
    (child,) = client.lineage(workflow_id)["children"]
    return str(child.workflow_id)


def check_histories(client: keepgoing.Client, parent_id: str, child_id: str) -> None:
    """Every question asked once, answered once, and each answer received once."""
    parent = client.history(parent_id)
    child = client.history(child_id)
    replies = of_type(parent, ev.MessageReceived, name="answer")
    assert [r.payload["answer"] for r in replies] == ANSWERS
    assert {(r.sender_kind, r.sender_id) for r in replies} == {("workflow", child_id)}
    asks = of_type(child, ev.MessageReceived, name="ask")
    assert [a.payload for a in asks] == [{"question": q} for q in QUESTIONS] + [{"stop": True}]
    assert {(a.sender_kind, a.sender_id) for a in asks} == {("workflow", parent_id)}
    assert len(of_type(child, ev.TaskCompleted)) == len(QUESTIONS)
    assert len(of_type(parent, ev.MessageDelivered)) == len(QUESTIONS) + 1
    assert len(of_type(child, ev.MessageDelivered)) == len(QUESTIONS)


def test_supervisor_and_assistant_on_a_worker_return_the_answers_in_order(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    workers.start(kg.app("messaging"))
    handle = client.trigger_workflow("supervisor", {"questions": QUESTIONS})

    assert client.result(handle, timeout=30) == ANSWERS
    child_id = child_of(client, handle.workflow_id)
    assert child_id.startswith(handle.workflow_id + "/")
    assert client.result(child_id, timeout=10) == len(QUESTIONS)
    assert client.lineage(child_id)["parent"].workflow_id == handle.workflow_id
    check_histories(client, handle.workflow_id, child_id)
    assert Counter(e.key for e in kg.effects("done", "answer")) == Counter(QUESTIONS)


def test_supervisor_survives_a_sigkill_halfway_and_answers_each_question_once(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    app = kg.app("messaging")
    (kg.effects_dir / "hold-q4").touch()  # answer_question("q4") holds until released
    first = workers.start(app)
    handle = client.trigger_workflow("supervisor", {"questions": QUESTIONS})

    wait_until(lambda: kg.effects("start", "answer", "q4"), 30, "the fourth answer to start")
    replies_before = count_in_history(client, handle.workflow_id, ev.MessageReceived)
    assert replies_before == 3  # three answers are in the supervisor's history
    first.kill()
    second = workers.start(app)
    kg.release("release-q4")

    assert client.result(handle, timeout=30) == ANSWERS
    child_id = child_of(client, handle.workflow_id)
    assert client.result(child_id, timeout=10) == len(QUESTIONS)
    check_histories(client, handle.workflow_id, child_id)

    # Side effects: every answer finished exactly once; only the killed one started twice.
    assert Counter(e.key for e in kg.effects("done", "answer")) == Counter(QUESTIONS)
    starts = [(e.key, e.attempt, e.pid) for e in kg.effects("start", "answer")]
    assert starts == [
        ("q1", 1, first.pid),
        ("q2", 1, first.pid),
        ("q3", 1, first.pid),
        ("q4", 1, first.pid),
        ("q4", 2, second.pid),
        ("q5", 1, second.pid),
        ("q6", 1, second.pid),
    ]
    (lost,) = of_type(client.history(child_id), ev.TaskAttemptFailed)
    assert (lost.reason, pid_of(lost.worker)) == ("worker_lost", first.pid)


def test_a_child_started_by_an_unknown_name_fails_inside_the_parent(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    workers.start(kg.app("messaging"))
    with pytest.raises(keepgoing.WorkflowNotFoundError):
        client.trigger_workflow("no_such_workflow", strict=True)
    handle = client.trigger_workflow("starts_unknown_child")
    outcome = client.result(handle, timeout=3)
    assert outcome in ("WorkflowNotFoundError", "WorkflowFailedError")
