"""Commits that only take or extend a lease skip the fsync; every other commit keeps it.

A SQLite transaction made only of lease writes (a run's activation claim, a
heartbeat, a released activation) commits with ``synchronous=NORMAL``; one
with any other write commits as the connection is set (FULL by default).
A lease commit still survives the death of the process that made it.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from keepgoing._store.records import StartRequest
from keepgoing._store.sqlite import SqliteStore

NOW = 1_000_000.0
FULL, NORMAL = 2, 1


def _request(i: int) -> StartRequest:
    return StartRequest(
        run_id=f"run-{i}",
        workflow_id=f"wf-{i}",
        workflow_name="wf",
        input=None,
        task_queue="default",
        code_version="v1",
        now=NOW,
    )


def _level(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA synchronous").fetchone()[0])


@pytest.fixture
async def store(tmp_path: Path) -> Any:
    opened = SqliteStore(str(tmp_path / "kg.db"))
    await opened.open()
    yield opened
    await opened.close()


async def test_a_lease_write_commits_without_fsync_and_the_next_durable_write_with_it(
    store: SqliteStore,
) -> None:
    assert await store._write_lease(_level) == NORMAL
    assert await store._write(_level) == FULL
    assert await store._write_lease(_level) == NORMAL
    assert await store._write_lease(_level) == NORMAL
    assert await store._write(_level) == FULL  # set back once the kind of write changes
    assert await store._write(_level) == FULL


async def test_the_level_is_set_only_when_the_kind_of_write_changes(
    store: SqliteStore,
) -> None:
    """Two lease writes in a row set ``synchronous`` once, not around each."""
    seen: list[str] = []
    store._thread._conn.set_trace_callback(seen.append)  # type: ignore[union-attr]
    for write in (store._write_lease, store._write_lease, store._write, store._write):
        await write(_level)
    store._thread._conn.set_trace_callback(None)  # type: ignore[union-attr]
    assert [s for s in seen if s.startswith("PRAGMA synchronous =")] == [
        f"PRAGMA synchronous = {NORMAL}",
        f"PRAGMA synchronous = {FULL}",
    ]


async def _one_batch(store: SqliteStore, calls: list[Any]) -> list[Any]:
    """Run ``calls`` (coroutines of store writes) as one batch on the store thread:
    the thread is held busy until every one of them is queued behind it."""
    started, release = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection) -> None:
        started.set()
        release.wait(30)

    blocker = threading.Thread(
        target=store._thread.call_sync, args=(hold,), kwargs={"write": False}
    )
    blocker.start()
    assert started.wait(30)
    tasks = [asyncio.ensure_future(call) for call in calls]
    deadline = time.monotonic() + 30
    while store._thread._queue.qsize() < len(calls):
        assert time.monotonic() < deadline, "the calls were never queued"
        await asyncio.sleep(0.001)
    release.set()
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        blocker.join()


async def test_a_batch_commits_without_fsync_only_if_every_write_in_it_is_a_lease(
    store: SqliteStore,
) -> None:
    leases = await _one_batch(store, [store._write_lease(_level) for _ in range(10)])
    assert leases == [NORMAL] * 10
    mixed = await _one_batch(
        store,
        [
            *(store._write_lease(_level) for _ in range(5)),
            store._write(_level),
            *(store._write_lease(_level) for _ in range(5)),
        ],
    )
    assert mixed == [FULL] * 11  # they share the durable write's commit, and its fsync
    assert await store._write(_level) == FULL


async def test_a_store_opened_with_synchronous_normal_is_left_as_it_was(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "kg.db"), synchronous="normal")
    await store.open()
    try:
        assert await store._write_lease(_level) == NORMAL
        assert await store._write(_level) == NORMAL
    finally:
        await store.close()


async def test_only_lease_calls_take_the_lease_path(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []
    call = store._thread.call

    async def recording(op: Any, **kwargs: Any) -> Any:
        if kwargs.get("write"):
            seen.append(kwargs.get("durable", True))
        return await call(op, **kwargs)

    monkeypatch.setattr(store._thread, "call", recording)

    async def durability(coro: Any) -> list[bool]:
        seen.clear()
        await coro
        return list(seen)

    assert await durability(store.start_run(_request(1))) == [True]
    claim = dict(worker_id="w1", queues=["default"], workflow_names=["wf"], limit=5, lease_ttl=30.0)
    assert await durability(store.claim_activations(**claim, now=NOW)) == [False]
    assert await durability(store.heartbeat("w1", lease_ttl=30.0, now=NOW)) == [False]
    assert await durability(store.release_activation("run-1", 1)) == [False]
    assert await durability(store.claim_tasks(**_tasks(), now=NOW)) == [True]


async def test_a_heartbeat_that_hands_back_writes_its_history_durably(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contract._builders import claim_one, claim_run, schedule, task  # noqa: PLC0415

    await store.start_run(_request(1))
    claim = await claim_run(store, "run-1")
    await schedule(store, claim, [task(1)])
    await claim_one(store)  # held by w1, which never hears of it (a lost commit answer)
    writes: list[tuple[bool, int]] = []  # (durable, history rows after the write)
    call = store._thread.call

    async def recording(op: Any, **kwargs: Any) -> Any:
        result = await call(op, **kwargs)
        if kwargs.get("write"):
            count = "SELECT COUNT(*) FROM history"
            rows = await call(lambda c: c.execute(count).fetchone()[0], write=False)
            writes.append((kwargs.get("durable", True), rows))
        return result

    before = await store._read(lambda c: c.execute("SELECT COUNT(*) FROM history").fetchone()[0])
    monkeypatch.setattr(store._thread, "call", recording)
    held = await store.heartbeat(
        "w1", lease_ttl=30.0, now=NOW + 1, attempts=set(), runs=set(), known_through=NOW + 0.5
    )
    assert held == set()
    # The lease-only beat adds no history; the hand-back, which does, is a durable write.
    assert writes == [(False, before), (True, before + 1)]
    history = await store.read_history("run-1")
    assert [type(e).__name__ for e in history][-1] == "TaskAttemptFailed"
    writes.clear()
    await store.heartbeat(
        "w1", lease_ttl=30.0, now=NOW + 2, attempts=set(), runs=set(), known_through=NOW + 2
    )
    assert writes == [(False, before + 1)]  # nothing left to hand back: one lease write


def _tasks() -> dict[str, Any]:
    return dict(worker_id="w1", queues=["default"], task_names=["t"], limit=5, lease_ttl=30.0)


CLAIM_AND_DIE = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from keepgoing._store.records import StartRequest
    from keepgoing._store.sqlite import SqliteStore

    async def main():
        store = SqliteStore(sys.argv[1])
        await store.open()
        await store.start_run(StartRequest(
            run_id="run-1", workflow_id="wf-1", workflow_name="wf", input=None,
            task_queue="default", code_version="v1", now=1000.0))
        claims = await store.claim_activations(
            worker_id="w1", queues=["default"], workflow_names=["wf"], limit=1,
            lease_ttl=30.0, now=1000.0)
        assert [c.run.run_id for c in claims] == ["run-1"]
        os.kill(os.getpid(), signal.SIGKILL)  # no close, no checkpoint

    asyncio.run(main())
    """
)


def test_a_lease_commit_survives_a_sigkill_of_its_process(tmp_path: Path) -> None:
    path = tmp_path / "kg.db"
    done = subprocess.run(
        [sys.executable, "-c", CLAIM_AND_DIE, str(path)],
        check=False,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    conn = sqlite3.connect(str(path))
    try:
        row = conn.execute("SELECT lease_owner, fence FROM runs WHERE run_id = 'run-1'").fetchone()
    finally:
        conn.close()
    assert row == ("w1", 1)
