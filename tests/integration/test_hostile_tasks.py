"""Tasks that exit, interrupt, kill their process or hold the GIL, on real worker processes."""

from __future__ import annotations

import pytest

import keepgoing
from keepgoing._history import events as ev
from keepgoing._store.records import WorkerRecord

from ._support import Sandbox, Workers, of_type, wait_until

pytestmark = pytest.mark.integration


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("task", "error_type"),
    [
        ("exits_sync", "SystemExit"),
        ("interrupts_async", "KeyboardInterrupt"),
        ("raises_system_exit", "SystemExit"),
    ],
)
def test_a_task_that_exits_or_interrupts_fails_its_attempt_and_the_worker_lives_on(
    kg: Sandbox, workers: Workers, client: keepgoing.Client, task: str, error_type: str
) -> None:
    worker = workers.start(kg.app("hostile"))
    (registered,) = client.list_workers()
    handle = client.trigger_workflow("run_one", {"task": task, "key": "k"})

    with pytest.raises(keepgoing.WorkflowFailedError) as caught:
        client.result(handle, timeout=30)

    assert error_type in str(caught.value)
    history = client.history(handle.workflow_id)
    failed = of_type(history, ev.TaskAttemptFailed)
    assert [(f.attempt, f.reason, f.error.type) for f in failed] == [
        (1, "error", error_type),
        (2, "error", error_type),
    ]  # retries=1: two attempts, counted against retries
    (gave_up,) = of_type(history, ev.TaskFailed)
    assert gave_up.attempts == 2
    assert len(kg.effects("start", task)) == 2
    # The same worker, still serving: a healthy step after it completes.
    assert worker.alive()
    assert [w.worker_id for w in client.list_workers()] == [registered.worker_id]
    after = client.trigger_workflow("run_one", {"task": "healthy", "key": "after"})
    assert client.result(after, timeout=30) == "healthy after"


@pytest.mark.timeout(60)
def test_a_task_that_kills_its_process_counts_as_a_lost_worker_found_by_its_token(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    # Leases of 30 s: the loss must be noticed through the dead worker's token.
    app = kg.app("hostile")
    first = workers.start(app, "--lease-ttl", "30", "--heartbeat", "1")
    second = workers.start(app, "--lease-ttl", "30", "--heartbeat", "1")
    handle = client.trigger_workflow("run_one", {"task": "kills_process", "key": "k"})

    with pytest.raises(keepgoing.WorkflowFailedError) as caught:
        client.result(handle, timeout=20)

    assert "max_worker_losses=0" in str(caught.value)
    (lost,) = of_type(client.history(handle.workflow_id), ev.TaskAttemptFailed)
    assert lost.reason == "worker_lost"
    assert lost.error.message.endswith("is gone")
    assert len(kg.effects("start", "kills_process")) == 1
    assert [first.alive(), second.alive()].count(True) == 1


@pytest.mark.timeout(120)
def test_a_task_that_sigkills_its_own_worker_still_fails_after_max_worker_losses(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    # Nobody asked for these deaths: each loss is unexplained and counts, so the
    # default max_worker_losses (3) lets four attempts run, each on its own worker.
    app = kg.app("hostile")
    started = [workers.start(app, "--lease-ttl", "30", "--heartbeat", "1") for _ in range(5)]
    handle = client.trigger_workflow("run_one", {"task": "kills_its_worker", "key": "k"})

    with pytest.raises(keepgoing.WorkflowFailedError) as caught:
        client.result(handle, timeout=90)

    assert "lost 4 times (max_worker_losses=3)" in str(caught.value)
    history = client.history(handle.workflow_id)
    lost = of_type(history, ev.TaskAttemptFailed)
    assert [(f.reason, f.cause) for f in lost] == [("worker_lost", "unexplained")] * 4
    assert len({f.worker for f in lost}) == 4
    (gave_up,) = of_type(history, ev.TaskFailed)
    assert gave_up.attempts == 4 and gave_up.reason == "worker_lost"
    assert len(kg.effects("start", "kills_its_worker")) == 4
    assert [w.alive() for w in started].count(True) == 1


@pytest.mark.timeout(90)
def test_a_task_holding_the_gil_past_its_lease_runs_once(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    app = kg.app("hostile")
    workers.start(app)
    workers.start(app)
    handle = client.trigger_workflow("run_gil", {"key": "k", "seconds": 4.0})

    assert client.result(handle, timeout=60) == "held the GIL for 4.0s"

    history = client.history(handle.workflow_id)
    assert not of_type(history, ev.TaskAttemptFailed)
    assert [e.attempt for e in kg.effects("start", "holds_gil")] == [1]
    (done,) = kg.effects("done", "holds_gil")
    (start,) = kg.effects("start", "holds_gil")
    assert done.at - start.at > 3.0  # it did hold the GIL for longer than a lease (1.5 s)
    wait_until(lambda: len(client.list_workers()) == 2, 10, "both workers to be serving")


def _hung(client: keepgoing.Client) -> int:
    return sum(int(w.info.get("hung_threads", 0)) for w in client.list_workers())


@pytest.mark.timeout(90)
def test_hung_sync_tasks_never_starve_healthy_ones(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    # More hung threads than a pool of concurrency + 4 had: 8 against 2 + 4.
    workers.start(kg.app("hostile"), "--concurrency", "2", "--max-hung-threads", "100")
    hung = [client.trigger_workflow("run_one", {"task": "hangs", "key": f"h{i}"}) for i in range(8)]
    for handle in hung:
        with pytest.raises(keepgoing.WorkflowFailedError, match="TimeoutError"):
            client.result(handle, timeout=30)
    wait_until(lambda: _hung(client) == 8, 10, "the worker to report 8 hung threads")

    healthy = [
        client.trigger_workflow("run_one", {"task": "healthy", "key": f"ok{i}"}) for i in range(4)
    ]

    assert [client.result(h, timeout=30) for h in healthy] == [f"healthy ok{i}" for i in range(4)]
    for handle in healthy:
        assert not of_type(client.history(handle.workflow_id), ev.TaskAttemptFailed)
    assert len(kg.effects("start", "hangs")) == 8


@pytest.mark.timeout(90)
def test_past_its_bound_of_hung_threads_a_worker_restarts_in_a_fresh_process(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    worker = workers.start(kg.app("hostile"), "--max-hung-threads", "2")
    (before,) = client.list_workers()
    for i in range(2):
        handle = client.trigger_workflow("run_one", {"task": "hangs", "key": f"h{i}"})
        with pytest.raises(keepgoing.WorkflowFailedError, match="TimeoutError"):
            client.result(handle, timeout=30)

    def replaced() -> WorkerRecord | None:
        found = [w for w in client.list_workers() if w.worker_id != before.worker_id]
        return found[0] if found and found[0].heartbeat_at > found[0].started_at else None

    after = wait_until(replaced, 30, "a fresh worker in the old one's place")
    assert after is not None
    assert after.pid == before.pid == worker.pid  # the same process, re-executed
    assert after.info["hung_threads"] == 0
    assert [w.worker_id for w in client.list_workers()] == [after.worker_id]
    assert "restarting in a fresh process" in worker.stderr()
    handle = client.trigger_workflow("run_one", {"task": "healthy", "key": "after"})
    assert client.result(handle, timeout=30) == "healthy after"


@pytest.mark.timeout(90)
def test_a_restart_for_hung_threads_hands_back_healthy_attempts_counted_against_nothing(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    worker = workers.start(kg.app("hostile"), "--max-hung-threads", "2", "--shutdown-grace", "0.5")
    bystander = client.trigger_workflow("run_one", {"task": "waits", "key": "w"})
    wait_until(lambda: kg.effects("start", "waits", "w"), 30, "the healthy step to start")
    for i in range(2):
        handle = client.trigger_workflow("run_one", {"task": "hangs", "key": f"h{i}"})
        with pytest.raises(keepgoing.WorkflowFailedError, match="TimeoutError"):
            client.result(handle, timeout=30)
    # The restarted process (same pid, new worker id) runs the handed-back step again.
    wait_until(lambda: len(kg.effects("start", "waits", "w")) == 2, 40, "the step again")
    kg.release("release-w")
    assert client.result(bystander, timeout=30) == "released w"

    handed = of_type(client.history(bystander.workflow_id), ev.TaskAttemptFailed)
    assert [(f.reason, f.cause, f.via) for f in handed] == [("released", "hung_restart", "worker")]
    assert {e.pid for e in kg.effects("start", "waits", "w")} == {worker.pid}


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("task", "error_type", "placeholder"),
    [
        ("unprintable", "hostile._Unprintable", "<str() of the hostile._Unprintable failed"),
        ("not_text", "hostile._NotText", "<str() of the hostile._NotText failed: TypeError>"),
        (
            "exits_when_printed",
            "hostile._ExitsWhenPrinted",
            "<str() of the hostile._ExitsWhenPrinted failed: SystemExit>",
        ),
    ],
)
def test_an_exception_that_cannot_be_described_fails_its_attempt_once(
    kg: Sandbox,
    workers: Workers,
    client: keepgoing.Client,
    task: str,
    error_type: str,
    placeholder: str,
) -> None:
    worker = workers.start(kg.app("hostile"))
    handle = client.trigger_workflow("run_one", {"task": task, "key": "k"})

    with pytest.raises(keepgoing.WorkflowFailedError):
        client.result(handle, timeout=30)

    history = client.history(handle.workflow_id)
    (failed,) = of_type(history, ev.TaskAttemptFailed)  # retries=0: one attempt, no hand-back
    assert (failed.reason, failed.error.type) == ("error", error_type)
    assert failed.error.message.startswith(placeholder)
    assert failed.error.traceback and f"in {task}" in failed.error.traceback
    (gave_up,) = of_type(history, ev.TaskFailed)
    assert (gave_up.attempts, gave_up.reason) == (1, "error")
    assert len(kg.effects("start", task)) == 1
    assert worker.alive()


@pytest.mark.timeout(60)
def test_uncertain_outcome_inside_a_task_group_is_uncertain_and_never_retried(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    workers.start(kg.app("hostile"))
    handle = client.trigger_workflow("run_one", {"task": "uncertain_in_group", "key": "g"})
    op = f"op-{handle.run_id}-1"

    def uncertain() -> keepgoing.Operation | None:
        try:
            found = client.get_operation(op)
        except keepgoing.OperationNotFoundError:  # not scheduled yet
            return None
        return found if found.status == "uncertain" else None

    found = wait_until(uncertain, 30, "the step to wait for review")
    assert found.waiting_for_review and found.attempts == 1
    history = client.history(handle.workflow_id)
    (failed,) = of_type(history, ev.TaskAttemptFailed)
    assert failed.reason == "uncertain" and "ExceptionGroup" in failed.error.type
    assert len(kg.effects("start", "uncertain_in_group")) == 1  # retries=3, and yet once
    client.review_operation(op, "approve", result="applied")
    assert client.result(handle, timeout=30) == "applied"
