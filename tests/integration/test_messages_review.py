"""The docs' ``review_account`` on a worker subprocess, messaged from this process."""

from __future__ import annotations

import pytest

import keepgoing
from keepgoing._history import events as ev

from ._messaging_support import count_in_history, waiting_for_message
from ._support import Sandbox, Workers, of_type, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def test_a_message_sent_before_the_workflow_reaches_its_wait_is_kept(
    kg: Sandbox, workers: Workers, client: keepgoing.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEEPGOING_USER", "reviewer-1")
    app = kg.app("messaging")
    workers.start(app)
    handle = client.trigger_workflow("review_after_hold", {"account_id": "acct-1"})

    wait_until(lambda: kg.effects("start", "hold", "acct-1"), 30, "the first step to hold")
    message_id = client.send_workflow_message(
        handle.workflow_id, "review", {"approved": True, "comment": "Verified by phone"}
    )
    assert not waiting_for_message(client, handle.workflow_id, "review")  # no wait yet
    kg.release("release-acct-1")

    assert client.result(handle, timeout=30) == "approved"
    assert [e.key for e in kg.effects("done", "apply")] == ["acct-1:True:reviewer-1"]
    history = client.history(handle.workflow_id)
    (received,) = of_type(history, ev.MessageReceived)
    (wait,) = of_type(history, ev.MessageWaitStarted, name="review")
    assert received.seq < wait.seq  # it arrived before the workflow asked for it
    assert (received.message_id, received.sender_kind, received.sender_id) == (
        message_id,
        "user",
        "reviewer-1",
    )
    (audit,) = client.list_audit(action="message.send", workflow_id=handle.workflow_id)
    assert (audit.actor_kind, audit.actor_id) == ("user", "reviewer-1")


def test_a_message_sent_while_the_workflow_waits_wakes_it(
    kg: Sandbox, workers: Workers, client: keepgoing.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEEPGOING_USER", "reviewer-2")
    app = kg.app("messaging")
    workers.start(app)
    handle = client.trigger_workflow("review_account", {"account_id": "acct-2"})

    wait_until(lambda: waiting_for_message(client, handle.workflow_id, "review"), 30, "the wait")
    client.send_workflow_message(handle.workflow_id, "review", {"approved": False})

    assert client.result(handle, timeout=30) == "rejected"
    assert [e.key for e in kg.effects("done", "apply")] == ["acct-2:False:reviewer-2"]
    assert count_in_history(client, handle.workflow_id, ev.MessageReceived) == 1
    with pytest.raises(keepgoing.WorkflowNotRunningError):
        client.send_workflow_message(handle.workflow_id, "review", {"approved": True})
    assert len(client.list_audit(action="message.send")) == 1
