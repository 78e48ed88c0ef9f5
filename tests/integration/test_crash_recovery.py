"""Workers that die or freeze mid-step: the run carries on from the last finished step."""

from __future__ import annotations

import time

import pytest

import keepgoing
from keepgoing._history import events as ev

from ._support import Sandbox, Workers, cmd_of, of_type, pid_of, wait_until

pytestmark = pytest.mark.integration


@pytest.mark.timeout(45)
def test_sigkill_mid_step_resumes_on_another_worker(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    app = kg.app("steps")
    first = workers.start(app)
    handle = client.trigger_workflow("abc", {"key": "k", "x": 1, "hold": True})

    wait_until(lambda: kg.effects("start", "b"), 30, "step b to start on worker 1")
    killed_at = time.time()
    first.kill()
    second = workers.start(app)
    kg.release("release-k")

    result = client.result(handle, timeout=30)

    assert result == {"value": 21, "b": {"value": 20, "attempt": 2, "pid": second.pid}}
    starts = sorted((e.task, e.attempt, e.pid) for e in kg.effects("start"))
    assert starts == [
        ("a", 1, first.pid),
        ("b", 1, first.pid),
        ("b", 2, second.pid),
        ("c", 1, second.pid),
    ]
    done = [(e.task, e.attempt, e.pid) for e in kg.effects("done")]
    assert sorted(done) == [("a", 1, first.pid), ("b", 2, second.pid), ("c", 1, second.pid)]

    history = client.history(handle.workflow_id)
    b = cmd_of(history, "step_b")
    (lost,) = of_type(history, ev.TaskAttemptFailed, cmd=b)
    assert (lost.reason, lost.attempt, pid_of(lost.worker)) == ("worker_lost", 1, first.pid)
    (completed_b,) = of_type(history, ev.TaskCompleted, cmd=b)
    assert (completed_b.attempt, pid_of(completed_b.worker)) == (2, second.pid)
    for name in ("step_a", "step_b", "step_c"):
        assert len(of_type(history, ev.TaskCompleted, cmd=cmd_of(history, name))) == 1
    assert len(of_type(history, ev.WorkflowCompleted)) == 1

    (restart,) = kg.effects("start", "b", "k")[1:]
    print(f"recovery: SIGKILL -> step b attempt 2 started in {restart.at - killed_at:.2f}s")


@pytest.mark.timeout(45)
def test_frozen_worker_loses_its_attempt_at_its_deadline_and_its_late_result_is_rejected(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    # A frozen process still holds its liveness token, like one whose main thread
    # waits for the GIL: its attempt is taken from it at the attempt's deadline
    # (3 s), not when its lease (1 s) expires, and recorded as timed out.
    app = kg.app("steps")
    lease = ("--lease-ttl", "1", "--heartbeat", "0.2")
    frozen = workers.start(app, *lease)
    handle = client.trigger_workflow("abc_short", {"key": "k", "x": 1, "hold": True})

    wait_until(lambda: kg.effects("start", "b"), 30, "step b to start on worker 1")
    frozen.stop()
    stopped_at = time.time()
    healthy = workers.start(app, *lease)
    wait_until(
        lambda: kg.effects("start", "b", "k")[1:], 30, "step b attempt 2 to start on worker 2"
    )
    (takeover,) = kg.effects("start", "b", "k")[1:]
    assert (takeover.attempt, takeover.pid) == (2, healthy.pid)
    (first,) = kg.effects("start", "b", "k")[:1]
    # Not when the 1 s lease expired: the deadline (3 s) counts from the claim, a
    # moment before the body's first effect, so compare with the lease, not the
    # deadline to the millisecond. The history below says it was a timeout.
    assert takeover.at - first.at > 2.0
    print(f"takeover: SIGSTOP -> step b attempt 2 started in {takeover.at - stopped_at:.2f}s")

    # Both attempts may now finish; the frozen one wakes up while the other is
    # recording its result, or just after.
    kg.release("release-k")
    wait_until(lambda: kg.effects("done", "b", "k"), 30, "worker 2's attempt of b to finish")
    frozen.resume()
    result = client.result(handle, timeout=30)
    wait_until(
        lambda: len(kg.effects("done", "b", "k")) == 2, 30, "the frozen attempt of b to finish"
    )
    # Once it has exited, the frozen worker has written (or dropped) its stale result.
    assert frozen.terminate() == 0
    assert healthy.terminate() == 0

    assert result == {"value": 21, "b": {"value": 20, "attempt": 2, "pid": healthy.pid}}
    history = client.history(handle.workflow_id)
    b = cmd_of(history, "step_b_short")
    (completed_b,) = of_type(history, ev.TaskCompleted, cmd=b)
    assert (completed_b.attempt, pid_of(completed_b.worker)) == (2, healthy.pid)
    assert completed_b.result["pid"] == healthy.pid
    (lost,) = of_type(history, ev.TaskAttemptFailed, cmd=b)
    assert (lost.reason, lost.attempt, pid_of(lost.worker)) == ("timeout", 1, frozen.pid)
    assert len(of_type(history, ev.TaskCompleted, cmd=cmd_of(history, "step_c"))) == 1
    assert len(kg.effects("done", "c")) == 1
    assert len(of_type(history, ev.WorkflowCompleted)) == 1


@pytest.mark.timeout(45)
def test_durable_sleep_survives_a_killed_worker(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    app = kg.app("steps")
    first = workers.start(app)
    handle = client.trigger_workflow("nap", {"key": "k", "x": 1, "seconds": 2})

    wait_until(
        lambda: of_type(client.history(handle.workflow_id), ev.TimerStarted),
        30,
        "the durable timer to be recorded",
    )
    first.kill()
    second = workers.start(app)

    result = client.result(handle, timeout=30)

    assert result == {"value": 20, "attempt": 1, "pid": second.pid}
    assert [(e.task, e.pid) for e in kg.effects("start")] == [("a", first.pid), ("b", second.pid)]
    assert [e.task for e in kg.effects("done")] == ["a", "b"]
    history = client.history(handle.workflow_id)
    (timer,) = of_type(history, ev.TimerStarted)
    assert len(of_type(history, ev.TimerFired, cmd=timer.cmd)) == 1
    (completed_b,) = of_type(history, ev.TaskCompleted, cmd=cmd_of(history, "step_b"))
    assert completed_b.at >= timer.fire_at
