"""The sync task threads: a body never waits for a thread, hung ones are counted."""

from __future__ import annotations

import asyncio
import threading

import pytest

from keepgoing._store.transitions import reap_reason
from keepgoing._worker.threads import Call, TaskThreads


async def test_every_body_starts_at_once_however_many_are_hung() -> None:
    threads = TaskThreads(keep_idle=2)
    release = threading.Event()
    started = threading.Semaphore(0)

    def hang() -> str:
        started.release()
        release.wait(10)
        return "late"

    hung = [threads.start(hang) for _ in range(20)]  # far more than keep_idle
    for _ in range(20):
        assert await asyncio.to_thread(started.acquire, timeout=10), "a body waited for a thread"
    for call in hung:
        threads.abandon(call)
    assert threads.hung == 20
    assert await asyncio.wait_for(threads.start(lambda: "healthy").future, 10) == "healthy"

    release.set()
    assert await asyncio.wait_for(asyncio.gather(*(c.future for c in hung)), 10) == ["late"] * 20
    assert threads.hung == 0 and all(c.returned for c in hung)
    threads.shutdown()


async def test_idle_threads_are_reused_and_errors_reach_the_caller() -> None:
    threads = TaskThreads(keep_idle=4)
    names = set()
    for _ in range(50):
        names.add(await threads.start(lambda: threading.current_thread().name).future)
    assert len(names) <= 2  # one thread (two at a hand-over), not one per call
    assert threads.threads <= 4

    def exits() -> None:
        raise SystemExit(3)

    with pytest.raises(SystemExit):
        await threads.start(exits).future
    done = threads.start(lambda: None)
    await done.future
    threads.abandon(done)  # returned already: not hung
    assert threads.hung == 0
    threads.shutdown()
    with pytest.raises(RuntimeError, match="after shutdown"):
        threads.start(lambda: None)


async def test_a_body_whose_attempt_ended_before_a_thread_took_it_never_runs() -> None:
    threads = TaskThreads(keep_idle=1)
    ran: list[str] = []
    loop = asyncio.get_running_loop()
    call = Call(lambda: ran.append("ran"), loop, loop.create_future())
    call.future.cancel()  # its attempt timed out while the call waited for its thread
    threads.abandon(call)
    assert threads.hung == 1

    threads._run(call)  # what the thread does when it takes the call

    assert ran == [] and call.returned and threads.hung == 0
    threads.shutdown()


async def test_shutdown_cancels_the_calls_no_thread_has_taken() -> None:
    threads = TaskThreads(keep_idle=0)
    loop = asyncio.get_running_loop()
    queued = Call(lambda: None, loop, loop.create_future())
    threads._items.put(queued)  # handed over, not yet taken by a thread

    threads.shutdown(cancel_waiting=True)

    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(queued.future, 10)
    with pytest.raises(RuntimeError, match="after shutdown"):
        threads.start(lambda: None)


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
