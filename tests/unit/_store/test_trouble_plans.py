"""The runs list's trouble filters and counts read the runs table's partial indexes
(migration 0018) and never a history: checked on SQLite's query plans of the very
statements the store sends."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from keepgoing._store.inspect_protocol import RunFilter
from keepgoing._store.sqlite import SqliteStore
from keepgoing._store.trouble import MARKERS

#: The indexes each marker's statements may read (a running run waiting for review is
#: also found through the status index, which SQLite may prefer on a small table).
INDEX = {
    "worker_lost": ("runs_worker_lost",),
    "retried": ("runs_retried",),
    "rate_limited": ("runs_rate_limited",),
    "waiting_for_review": ("runs_waiting_review", "runs_status_created"),
    "blocked": ("runs_status_created",),
}
_TABLE_SCAN = re.compile(r"SCAN runs(?! USING)")
_HISTORY = re.compile(r"\b(FROM|JOIN) history\b")


def _indexed(plan: str, marker: str) -> bool:
    return any(index in plan for index in INDEX[marker]) and not _TABLE_SCAN.search(plan)


async def _statements(store: SqliteStore, work: object) -> list[str]:
    sent: list[str] = []

    def trace(conn: sqlite3.Connection) -> None:
        conn.set_trace_callback(sent.append)

    await store._read(trace)
    try:
        await work  # type: ignore[misc]
    finally:
        await store._read(lambda c: c.set_trace_callback(None))
    return [s for s in sent if s.lstrip().upper().startswith("SELECT")]


def _plan(store: SqliteStore, sql: str) -> list[str]:
    conn = sqlite3.connect(store.path)
    try:
        return [str(row[-1]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
    finally:
        conn.close()


@pytest.mark.parametrize("marker", MARKERS)
async def test_a_trouble_page_reads_its_index_and_no_history(tmp_path: Path, marker: str) -> None:
    store = SqliteStore(str(tmp_path / "kg.db"))
    await store.open()
    try:
        sent = await _statements(store, store.page_runs(RunFilter(trouble=(marker,))))
        (page,) = [s for s in sent if "FROM runs" in s]
        plan = " ".join(_plan(store, page))
        assert _indexed(plan, marker) and not _HISTORY.search(page), plan
        counted = await _statements(store, store.count_trouble(RunFilter()))
        assert len(counted) == len(MARKERS)
        assert not any(_HISTORY.search(s) for s in counted)
        mine = counted[MARKERS.index(marker)]  # one count per marker, in their order
        assert _indexed(" ".join(_plan(store, mine)), marker), mine
    finally:
        await store.close()


async def _traced(store: SqliteStore, work: object) -> list[str]:
    sent: list[str] = []
    await store._write(lambda c: c.set_trace_callback(sent.append))
    try:
        await work  # type: ignore[misc]
    finally:
        await store._write(lambda c: c.set_trace_callback(None))
    return sent


async def test_the_counters_ride_the_update_that_appends_the_event(tmp_path: Path) -> None:
    from contract._builders import claim_one, failure, start_with, task  # noqa: PLC0415

    store = SqliteStore(str(tmp_path / "kg.db"))
    await store.open()
    try:
        await start_with(store, [task(1, retries=2)])
        claim = await claim_one(store)
        sent = await _traced(store, store.complete_task(failure(claim)))
        updates = [s for s in sent if s.lstrip().startswith("UPDATE runs")]
        assert len(updates) == 1, updates  # no statement of its own
        assert "retries = retries + 1" in updates[0]
        assert not [s for s in sent if "review_waits" in s]
    finally:
        await store.close()
