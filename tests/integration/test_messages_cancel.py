"""Cancellation on worker subprocesses: parent to child, and a running async attempt."""

from __future__ import annotations

import pytest

import keepgoing
from keepgoing._history import events as ev

from ._messaging_support import count_in_history, waiting_for_message
from ._support import Sandbox, Workers, of_type, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def test_cancelling_the_parent_cancels_the_waiting_child_and_both_clean_up(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    workers.start(kg.app("messaging"))
    handle = client.trigger_workflow("cancel_parent")
    parent_id = handle.workflow_id

    def child_waiting() -> str | None:
        children = client.lineage(parent_id)["children"]
        if children and waiting_for_message(client, children[0].workflow_id, "never"):
            return str(children[0].workflow_id)
        return None

    child_id = wait_until(child_waiting, 30, "the child to wait")
    client.cancel_workflow(parent_id, "stop the family")

    with pytest.raises(keepgoing.WorkflowCancelledError):
        client.result(parent_id, timeout=30)
    with pytest.raises(keepgoing.WorkflowCancelledError):
        client.result(child_id, timeout=30)
    assert client.get_run(parent_id).status == "cancelled"
    assert client.get_run(child_id).status == "cancelled"
    # Both finally blocks ran their cleanup task, once each.
    assert sorted(e.key for e in kg.effects("done", "cleanup")) == ["child", "parent"]

    parent_history = client.history(parent_id)
    child_history = client.history(child_id)
    (requested,) = of_type(parent_history, ev.CancelRequested)
    assert requested.reason == "stop the family"
    assert of_type(parent_history, ev.WorkflowCancelled)
    assert of_type(child_history, ev.CancelRequested)
    assert of_type(child_history, ev.WorkflowCancelled)
    audit = client.list_audit()
    assert [(a.action, a.workflow_id) for a in audit] == [("run.cancel", parent_id)]

    # Cancelling again is refused and changes nothing.
    for workflow_id in (parent_id, child_id):
        with pytest.raises(keepgoing.WorkflowNotRunningError):
            client.cancel_workflow(workflow_id, "again")
    assert client.history(parent_id) == parent_history
    assert client.history(child_id) == child_history
    assert client.list_audit() == audit


def test_cancelling_stops_a_running_async_attempt_and_finally_still_runs(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    worker = workers.start(kg.app("messaging"))
    handle = client.trigger_workflow("runs_slow", {"key": "k"})
    wait_until(lambda: kg.effects("start", "slow", "k"), 30, "the slow task to start")

    client.cancel_workflow(handle.workflow_id)

    with pytest.raises(keepgoing.WorkflowCancelledError):
        client.result(handle, timeout=30)
    # The attempt caught CancelledError while its worker kept running.
    wait_until(lambda: kg.effects("cancelled", "slow", "k"), 10, "the attempt to stop")
    assert worker.alive()
    assert kg.effects("done", "slow") == []
    assert [e.key for e in kg.effects("done", "cleanup")] == ["runs_slow-k"]
    history = client.history(handle.workflow_id)
    (slow,) = of_type(history, ev.TaskScheduled, name="slow")
    assert of_type(history, ev.TaskCancelRequested, cmd=slow.cmd)
    assert of_type(history, ev.TaskCompleted, cmd=slow.cmd) == []
    assert count_in_history(client, handle.workflow_id, ev.WorkflowCancelled) == 1
