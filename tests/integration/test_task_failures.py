"""Retries, failures and timeouts of tasks, on a real worker process."""

from __future__ import annotations

import pytest

import keepgoing
from keepgoing._history import events as ev

from ._support import Sandbox, Workers, of_type, wait_until

pytestmark = pytest.mark.integration


@pytest.mark.timeout(40)
def test_a_task_that_fails_twice_then_succeeds_completes(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    workers.start(kg.app("failing"))

    result = client.trigger_workflow(
        "run_flaky", {"key": "k"}, workflow_id="flaky-k", wait=True, timeout=30
    )

    assert result == "ok on attempt 3"
    history = client.history("flaky-k")
    failed = of_type(history, ev.TaskAttemptFailed)
    assert [(f.attempt, f.reason, f.error.type) for f in failed] == [
        (1, "error", "ValueError"),
        (2, "error", "ValueError"),
    ]
    assert failed[0].error.message == "flaky attempt 1 failed"
    assert failed[0].retry_at is not None and failed[1].retry_at is not None
    assert failed[0].retry_at < failed[1].retry_at
    # backoff: 0.2 s, then 0.4 s, each +/-20%
    assert failed[0].retry_at - failed[0].at == pytest.approx(0.2, rel=0.25)
    assert failed[1].retry_at - failed[1].at == pytest.approx(0.4, rel=0.25)
    (completed,) = of_type(history, ev.TaskCompleted)
    assert completed.attempt == 3
    assert not of_type(history, ev.TaskFailed)
    assert [e.attempt for e in kg.effects("start", "flaky")] == [1, 2, 3]


@pytest.mark.timeout(40)
def test_a_task_that_always_fails_fails_the_run(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    workers.start(kg.app("failing"))
    handle = client.trigger_workflow("run_always_fails", {"key": "k"})

    with pytest.raises(keepgoing.WorkflowFailedError) as caught:
        client.result(handle, timeout=30)

    assert "RuntimeError" in str(caught.value)
    assert "the disk is on fire" in str(caught.value)
    assert client.get_run(handle.workflow_id).status == "failed"
    history = client.history(handle.workflow_id)
    (gave_up,) = of_type(history, ev.TaskFailed)
    assert gave_up.attempts == 2
    assert (gave_up.error.type, gave_up.error.message) == ("RuntimeError", "the disk is on fire")
    assert [f.reason for f in of_type(history, ev.TaskAttemptFailed)] == ["error", "error"]
    assert not of_type(history, ev.TaskCompleted)
    (wf_failed,) = of_type(history, ev.WorkflowFailed)
    assert "the disk is on fire" in wf_failed.error.message
    assert len(kg.effects("start", "always_fails")) == 2


@pytest.mark.timeout(40)
def test_tasks_that_overrun_their_timeout_fail_and_late_results_are_discarded(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    worker = workers.start(kg.app("failing"))
    slow_async = client.trigger_workflow("run_slow_async", {"key": "async"})
    slow_sync = client.trigger_workflow("run_slow_sync", {"key": "sync", "seconds": 5})

    for handle, name in ((slow_async, "slow_async"), (slow_sync, "slow_sync")):
        with pytest.raises(keepgoing.WorkflowFailedError) as caught:
            client.result(handle, timeout=30)
        assert "TimeoutError" in str(caught.value)
        history = client.history(handle.workflow_id)
        (gave_up,) = of_type(history, ev.TaskFailed)
        assert (gave_up.name, gave_up.reason) == (name, "timeout")
        assert gave_up.error.type == "TimeoutError"
        assert gave_up.attempts == 1
        (attempt,) = of_type(history, ev.TaskAttemptFailed)
        assert (attempt.reason, attempt.retry_at) == ("timeout", None)
        assert attempt.at - attempt.started_at < 4.0  # cut off at the timeout, not at the end
        assert not of_type(history, ev.TaskCompleted)

    # The sync body runs on in its thread; its late result must be dropped.
    wait_until(lambda: kg.effects("done", "slow_sync"), 30, "the overrunning thread to finish")
    assert worker.terminate() == 0  # after exit, nothing more can be written
    history = client.history(slow_sync.workflow_id)
    assert not of_type(history, ev.TaskCompleted)
    assert client.get_run(slow_sync.workflow_id).status == "failed"
    assert not kg.effects("done", "slow_async")
