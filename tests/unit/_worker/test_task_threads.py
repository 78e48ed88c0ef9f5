"""The sync task threads: a body never waits for a thread, hung ones are counted."""

from __future__ import annotations

import threading

import pytest

from keepgoing._store.transitions import reap_reason
from keepgoing._worker.threads import TaskThreads


def test_every_body_starts_at_once_however_many_are_hung() -> None:
    threads = TaskThreads(keep_idle=2)
    release = threading.Event()
    started = threading.Semaphore(0)

    def hang() -> str:
        started.release()
        release.wait(10)
        return "late"

    hung = [threads.submit(hang) for _ in range(20)]  # far more than keep_idle
    for _ in range(20):
        assert started.acquire(timeout=10), "a body waited for a thread"
    for future in hung:
        threads.abandon(future)
    assert threads.hung == 20
    assert threads.submit(lambda: "healthy").result(timeout=10) == "healthy"

    release.set()
    assert [f.result(timeout=10) for f in hung] == ["late"] * 20
    assert threads.hung == 0
    threads.shutdown()


def test_idle_threads_are_reused_and_errors_reach_the_caller() -> None:
    threads = TaskThreads(keep_idle=4)
    names = set()
    for _ in range(50):
        names.add(threads.submit(lambda: threading.current_thread().name).result(timeout=10))
    assert len(names) <= 2  # one thread (two at a hand-over), not one per call
    assert threads.threads <= 4

    def exits() -> None:
        raise SystemExit(3)

    with pytest.raises(SystemExit):
        threads.submit(exits).result(timeout=10)
    threads.abandon(threads.submit(lambda: None))  # done already, or soon: not hung for long
    threads.shutdown()
    with pytest.raises(RuntimeError, match="after shutdown"):
        threads.submit(lambda: None)


@pytest.mark.parametrize(
    ("expired", "past_deadline", "owner_alive", "reason"),
    [
        (False, False, None, None),  # a live lease, no token: left alone
        (True, False, None, "worker_lost"),  # expired, no token: the lease decides
        (True, True, None, "timeout"),
        (True, False, True, None),  # expired but the owner lives (a GIL holder): kept
        (True, True, True, "timeout"),  # ... until the attempt's deadline
        (False, False, True, None),
        (False, False, False, "worker_lost"),  # the owner is gone: at once, expired or not
        (False, True, False, "timeout"),
        (True, False, False, "worker_lost"),
    ],
)
def test_reap_reason(
    expired: bool, past_deadline: bool, owner_alive: bool | None, reason: str | None
) -> None:
    assert (
        reap_reason(expired=expired, past_deadline=past_deadline, owner_alive=owner_alive) == reason
    )
