"""Worker stops: every attempt taken from a worker records why it stopped, and only
losses that blame the task count against ``max_worker_losses`` (``_store/worker_stops.py``)."""

from __future__ import annotations

import os
import socket

import pytest

from keepgoing._groups.worker_stops import Termination, record_terminations
from keepgoing._history.events import TaskAttemptFailed, TaskFailed
from keepgoing._runtime.context import TaskContext, task_context
from keepgoing._store.protocol import Store
from keepgoing._store.records import WorkerStop
from keepgoing._store.worker_stops import PENDING_GRACE, engine_stop

from ._builders import NOW, TTL, claim_one, claim_tasks, of_type, start_with, task, worker


def _kill(worker: str = "w1", cause: str = "killed_by_request") -> WorkerStop:
    return WorkerStop(worker, cause, "user", "alice", "ui")


async def _stopped(store: Store, stop: WorkerStop, now: float) -> None:
    stop_id = await store.record_worker_stop(stop, now=now)
    await store.settle_worker_stop(stop_id, signalled=True)


async def _lost(store: Store, run_id: str) -> list[TaskAttemptFailed]:
    return of_type(await store.read_history(run_id), TaskAttemptFailed)


async def test_a_requested_kill_is_recorded_on_the_loss_and_never_fails_the_task(
    store: Store,
) -> None:
    run, _ = await start_with(store, [task(1, retries=0, max_worker_losses=1, retry_delay=2.0)])
    now = NOW
    for n in range(6):  # six kills, each of a new worker process
        claim = await claim_one(store, worker=f"w{n}", now=now, ttl=TTL)
        assert claim.attempt == n + 1
        await _stopped(store, _kill(f"w{n}"), now + 1)
        now += TTL + 2
        assert await store.reap_expired_leases(now=now, limit=10) == 1
        now += 10  # past retry_delay (with its jitter)

    lost = await _lost(store, run.run_id)
    assert [(e.reason, e.cause, e.actor, e.via) for e in lost] == [
        ("worker_lost", "killed_by_request", "alice", "ui")
    ] * 6
    assert all(e.retry_at is not None for e in lost)
    assert lost[0].retry_at is not None and lost[0].retry_at >= lost[0].at + 2.0 * 0.8
    assert of_type(await store.read_history(run.run_id), TaskFailed) == []
    # The task is still due: the seventh attempt starts.
    assert (await claim_one(store, worker="w9", now=now)).attempt == 7


async def test_a_loss_nobody_explains_counts_and_fails_the_task(store: Store) -> None:
    run, _ = await start_with(store, [task(1, retries=5, max_worker_losses=1)])
    now = NOW
    for n in range(2):
        await claim_one(store, worker=f"w{n}", now=now, ttl=TTL)
        now += TTL + 1
        assert await store.reap_expired_leases(now=now, limit=10) == 1

    lost = await _lost(store, run.run_id)
    assert [e.cause for e in lost] == ["unexplained", "unexplained"]
    failed = of_type(await store.read_history(run.run_id), TaskFailed)
    assert len(failed) == 1 and "max_worker_losses=1" in failed[0].error.message


async def test_out_of_memory_counts_like_an_unexplained_loss(store: Store) -> None:
    run, _ = await start_with(store, [task(1, max_worker_losses=0)])
    await claim_one(store, worker="w1", now=NOW, ttl=TTL)
    await _stopped(store, WorkerStop("w1", "oom_killed", via="kubernetes"), NOW + 1)
    assert await store.reap_expired_leases(now=NOW + TTL + 1, limit=10) == 1

    lost = await _lost(store, run.run_id)
    assert [(e.cause, e.via) for e in lost] == [("oom_killed", "kubernetes")]
    assert len(of_type(await store.read_history(run.run_id), TaskFailed)) == 1


async def test_a_pending_stop_holds_the_reaper_until_it_is_settled(store: Store) -> None:
    run, _ = await start_with(store, [task(1, max_worker_losses=0)])
    await claim_one(store, worker="w1", now=NOW, ttl=TTL)
    stop_id = await store.record_worker_stop(_kill(), now=NOW + 1)
    later = NOW + TTL + 1

    assert await store.reap_expired_leases(now=later, limit=10) == 0  # being signalled
    await store.settle_worker_stop(stop_id, signalled=True)
    assert await store.reap_expired_leases(now=later, limit=10) == 1

    assert [e.cause for e in await _lost(store, run.run_id)] == ["killed_by_request"]
    assert of_type(await store.read_history(run.run_id), TaskFailed) == []


async def test_a_stop_left_pending_by_a_dead_stopper_is_ignored_after_its_grace(
    store: Store,
) -> None:
    run, _ = await start_with(store, [task(1, max_worker_losses=3)])
    await claim_one(store, worker="w1", now=NOW, ttl=TTL)
    await store.record_worker_stop(_kill(), now=NOW + 1)

    assert await store.reap_expired_leases(now=NOW + 1 + PENDING_GRACE + 1, limit=10) == 1
    assert [e.cause for e in await _lost(store, run.run_id)] == ["unexplained"]


async def test_a_kill_that_found_the_process_gone_explains_nothing(store: Store) -> None:
    run, _ = await start_with(store, [task(1, max_worker_losses=3)])
    await claim_one(store, worker="w1", now=NOW, ttl=TTL)
    stop_id = await store.record_worker_stop(_kill(), now=NOW + 1)
    await store.settle_worker_stop(stop_id, signalled=False)

    assert await store.reap_expired_leases(now=NOW + TTL + 1, limit=10) == 1
    assert [e.cause for e in await _lost(store, run.run_id)] == ["unexplained"]


async def test_a_stop_after_the_lease_lapsed_does_not_relabel_the_loss(store: Store) -> None:
    run, _ = await start_with(store, [task(1, max_worker_losses=3)])
    await claim_one(store, worker="w1", now=NOW, ttl=TTL)
    # The worker stopped heartbeating; its lease lapsed at NOW + TTL, and only
    # then was it killed (before a sweep saw the lapse).
    await _stopped(store, _kill(), NOW + TTL + 5)
    assert await store.reap_expired_leases(now=NOW + TTL + 6, limit=10) == 1

    assert [e.cause for e in await _lost(store, run.run_id)] == ["unexplained"]


async def test_a_stop_recorded_after_the_loss_changes_nothing(store: Store) -> None:
    run, _ = await start_with(store, [task(1, max_worker_losses=3)])
    await claim_one(store, worker="w1", now=NOW, ttl=TTL)
    assert await store.reap_expired_leases(now=NOW + TTL + 1, limit=10) == 1
    before = await store.read_history(run.run_id)
    await _stopped(store, _kill(), NOW + TTL + 2)

    assert await store.reap_expired_leases(now=NOW + TTL + 3, limit=10) == 0
    assert await store.read_history(run.run_id) == before


async def test_a_stop_names_one_worker_id_not_its_successor(store: Store) -> None:
    # A restarted process registers a new worker id; the old one's stop is not its.
    run, _ = await start_with(store, [task(1, max_worker_losses=3)])
    await _stopped(store, _kill("w1-old"), NOW)
    await claim_one(store, worker="w1-new", now=NOW + 1, ttl=TTL)
    assert await store.reap_expired_leases(now=NOW + TTL + 2, limit=10) == 1

    assert [e.cause for e in await _lost(store, run.run_id)] == ["unexplained"]


async def test_the_newest_stop_wins_a_drain_that_timed_out(store: Store) -> None:
    run, _ = await start_with(store, [task(1, max_worker_losses=0)])
    await claim_one(store, worker="w1", now=NOW, ttl=TTL)
    await _stopped(store, WorkerStop("w1", "scaled_down", via="autoscaler"), NOW + 1)
    await _stopped(store, WorkerStop("w1", "drain_timeout", via="autoscaler"), NOW + 3)
    assert await store.reap_expired_leases(now=NOW + TTL + 1, limit=10) == 1

    lost = await _lost(store, run.run_id)
    assert [(e.cause, e.actor, e.via) for e in lost] == [("drain_timeout", None, "autoscaler")]
    assert of_type(await store.read_history(run.run_id), TaskFailed) == []


async def test_released_attempts_carry_the_stop_that_asked_for_the_shutdown(
    store: Store,
) -> None:
    run, _ = await start_with(store, [task(1), task(2)])
    await claim_tasks(store, worker="w1", now=NOW)
    await store.record_worker_stop(WorkerStop("w1", "scaled_down", via="autoscaler"), now=NOW)
    # The worker may hand back before its stopper settled the stop: it still counts.
    assert await store.release_tasks("w1", NOW + 1) == 2
    await claim_tasks(store, worker="w2", now=NOW + 1)
    assert await store.release_tasks("w2", NOW + 2) == 2  # no stop: on its own

    released = await _lost(store, run.run_id)
    assert [(e.reason, e.cause) for e in released] == [("released", "scaled_down")] * 2 + [
        ("released", None)
    ] * 2


def test_an_unknown_cause_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown worker stop cause 'bored'"):
        WorkerStop("w1", "bored")


async def test_settling_an_unknown_stop_changes_nothing(store: Store) -> None:
    await store.settle_worker_stop(12345, signalled=True)
    await store.settle_worker_stop(12345, signalled=False)


async def test_a_container_the_cluster_reports_oom_killed_explains_its_workers_losses(
    store: Store,
) -> None:
    # The pod's first container ran w-old and was OOMKilled at NOW + 5; the kubelet
    # restarted it, and w-new runs in the same pod (same host name) since NOW + 6.
    await store.register_worker(worker("w-old", started_at=NOW, host="pod-a"))
    await store.register_worker(worker("w-new", started_at=NOW + 6, host="pod-a"))
    await store.register_worker(worker("w-elsewhere", started_at=NOW, host="pod-b"))
    run, _ = await start_with(store, [task(n, max_worker_losses=0) for n in (1, 2, 3)])
    await claim_tasks(store, worker="w-old", now=NOW, limit=1)
    await claim_tasks(store, worker="w-new", now=NOW + 6, limit=1)
    await claim_tasks(store, worker="w-elsewhere", now=NOW, limit=1)
    ended = [Termination("pod-a", "pod-a", NOW + 5, "oom_killed", "OOMKilled")]
    seen: set[tuple[str, float]] = set()

    assert await record_terminations(store, ended, seen, NOW + 7) == 1
    assert await record_terminations(store, ended, seen, NOW + 8) == 0  # seen once
    assert await store.reap_expired_leases(now=NOW + 6 + TTL + 1, limit=10) == 3

    lost = {e.worker: (e.cause, e.via) for e in await _lost(store, run.run_id)}
    assert lost == {
        "w-old": ("oom_killed", "kubernetes"),
        "w-new": ("unexplained", None),
        "w-elsewhere": ("unexplained", None),
    }
    # Every one of them counts (max_worker_losses=0): out of memory points at the task.
    assert len(of_type(await store.read_history(run.run_id), TaskFailed)) == 3


async def test_a_stop_recorded_from_inside_an_attempt_of_its_worker_is_the_tasks(
    store: Store,
) -> None:
    run, _ = await start_with(store, [task(1, max_worker_losses=0), task(2, max_worker_losses=0)])
    mine = await claim_one(store, worker="w1", now=NOW, ttl=TTL)
    other = await claim_one(store, worker="w1", now=NOW, ttl=TTL)
    ctx = TaskContext(run.run_id, run.workflow_id, mine.cmd, "t", 1, "w1")
    token = task_context.set(ctx)
    try:  # it claims the autoscaler scaled its worker down
        await _stopped(store, WorkerStop("w1", "scaled_down", "user", "ops", "autoscaler"), NOW)
    finally:
        task_context.reset(token)
    assert await store.release_tasks("w1", NOW + 1) == 2

    lost = {e.cmd: e for e in await _lost(store, run.run_id)}
    assert (lost[mine.cmd].cause, lost[mine.cmd].reason) == ("stopped_by_task", "released")
    # The step that asked counts it (max_worker_losses=0: it fails); the other does not.
    assert (lost[other.cmd].cause, lost[other.cmd].actor) == (
        "stopped_by_other_step",
        f"run {run.run_id} step {mine.cmd}",
    )
    failed = of_type(await store.read_history(run.run_id), TaskFailed)
    assert [f.cmd for f in failed] == [mine.cmd]


async def test_a_stop_recorded_from_the_workers_own_process_is_the_tasks(store: Store) -> None:
    # A registered worker that is this very process (as a task's own code would be).
    here = worker("w1", host=socket.gethostname(), pid=os.getpid())
    await store.register_worker(here)
    run, _ = await start_with(store, [task(1, max_worker_losses=0)])
    await claim_one(store, worker="w1", now=NOW, ttl=TTL)
    await _stopped(store, _kill("w1"), NOW + 1)  # a kill, asked for from inside w1
    assert await store.reap_expired_leases(now=NOW + TTL + 2, limit=10) == 1

    (lost,) = await _lost(store, run.run_id)
    assert lost.cause == "stopped_by_task"
    assert len(of_type(await store.read_history(run.run_id), TaskFailed)) == 1


async def test_a_stop_the_worker_engine_records_for_itself_is_not_traced(store: Store) -> None:
    here = worker("w1", host=socket.gethostname(), pid=os.getpid())
    await store.register_worker(here)
    run, _ = await start_with(store, [task(1, max_worker_losses=0)])
    await claim_one(store, worker="w1", now=NOW, ttl=TTL)
    with engine_stop():
        await _stopped(store, WorkerStop("w1", "hung_restart", via="worker"), NOW)
    # Another process asking (origin_pid: a process outside w1's tree) is not traced.
    outside = WorkerStop("w2", "killed_by_request", "user", "bob", "ui", origin_pid=1)
    await store.register_worker(worker("w2", host=socket.gethostname(), pid=os.getpid()))
    await _stopped(store, outside, NOW)
    assert await store.release_tasks("w1", NOW + 1) == 1
    (released,) = await _lost(store, run.run_id)
    assert released.cause == "hung_restart"
    assert of_type(await store.read_history(run.run_id), TaskFailed) == []
    rows = await store._read(lambda c: c.execute("SELECT cause FROM worker_stops").fetchall())  # type: ignore[attr-defined]
    assert sorted(r[0] for r in rows) == ["hung_restart", "killed_by_request"]


async def test_a_hand_back_after_a_signal_the_task_sent_counts(store: Store) -> None:
    run, _ = await start_with(store, [task(1, max_worker_losses=1, retry_delay=1.0)])
    now = NOW
    for n in range(2):
        claim = await claim_one(store, worker=f"w{n}", now=now, ttl=TTL)
        stop = WorkerStop(
            f"w{n}",
            "signalled_by_task",
            "task",
            f"run {run.run_id} step 1",
            "signal",
            blame_run_id=run.run_id,
            blame_cmd=claim.cmd,
        )
        with engine_stop():
            await _stopped(store, stop, now)
        assert await store.release_tasks(f"w{n}", now + 1) == 1
        now += 10
    lost = await _lost(store, run.run_id)
    assert [(e.reason, e.cause) for e in lost] == [("released", "signalled_by_task")] * 2
    assert lost[0].retry_at is not None and lost[0].retry_at > lost[0].at  # after retry_delay
    failed = of_type(await store.read_history(run.run_id), TaskFailed)
    assert len(failed) == 1 and "max_worker_losses=1" in failed[0].error.message


async def test_a_worker_that_shut_down_hands_back_free_and_a_later_death_is_unexplained(
    store: Store,
) -> None:
    run, _ = await start_with(store, [task(1, max_worker_losses=0), task(2, max_worker_losses=1)])
    await claim_one(store, worker="w1", now=NOW, ttl=TTL)
    await claim_one(store, worker="w2", now=NOW, ttl=TTL)
    with engine_stop():
        await _stopped(store, WorkerStop("w1", "shutdown", via="signal"), NOW)
        await _stopped(store, WorkerStop("w2", "shutdown", via="signal"), NOW)
    assert await store.release_tasks("w1", NOW + 1) == 1  # handed back: free
    # w2 died while shutting down, before it handed anything back: nobody said why.
    assert await store.reap_expired_leases(now=NOW + TTL + 2, limit=10) == 1
    lost = {e.cmd: (e.reason, e.cause) for e in await _lost(store, run.run_id)}
    assert lost == {1: ("released", "shutdown"), 2: ("worker_lost", "unexplained")}
    assert of_type(await store.read_history(run.run_id), TaskFailed) == []
