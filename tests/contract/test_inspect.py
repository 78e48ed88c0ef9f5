"""The inspection facet (``InspectStore``) on every store: keyset pages, filters,
counts, changes, task rows and attempt logs."""

from __future__ import annotations

import dataclasses

import pytest

from keepgoing._history.events import ErrorInfo, WorkflowCompleted
from keepgoing._store.inspect_protocol import InvalidCursorError, RunCursor, RunFilter
from keepgoing._store.protocol import Store
from keepgoing._store.records import AttemptLog

from ._builders import NOW, claim_one, claim_run, failure, schedule, start, success, task


async def _all_pages(store: Store, f: RunFilter, limit: int) -> list[str]:
    seen: list[str] = []
    after = None
    for _ in range(100):
        page = await store.page_runs(f, limit=limit, after=after)
        seen += [r.workflow_id for r in page.runs]
        if page.next_cursor is None:
            return seen
        after = RunCursor.decode(page.next_cursor.encode())  # through its text form
    raise AssertionError("pages never ended")


async def test_pages_newest_first_with_ties(store: Store) -> None:
    # Three share one created_at: insertion order breaks the tie, and no page
    # boundary loses or repeats one of them.
    for n in range(7):
        await start(store, f"wf-{n}", now=NOW + (n // 3))
    everything = await _all_pages(store, RunFilter(), limit=50)
    assert everything == ["wf-6", "wf-5", "wf-4", "wf-3", "wf-2", "wf-1", "wf-0"]
    for limit in (1, 2, 3, 4):
        assert await _all_pages(store, RunFilter(), limit=limit) == everything


async def test_filters(store: Store) -> None:
    await start(store, "alpha-1", now=NOW)
    await start(store, "beta-1", name="other", now=NOW + 1)
    await start(store, "alpha-2", now=NOW + 2)
    await start(store, "gamma_%", now=NOW + 3)
    claim = await claim_run(store, "run-alpha-1")
    await schedule(store, claim, [WorkflowCompleted(result=1)])

    async def ids(**kw: object) -> list[str]:
        return await _all_pages(store, RunFilter(**kw), limit=2)  # type: ignore[arg-type]

    assert await ids(statuses=("completed",)) == ["alpha-1"]
    assert await ids(statuses=("running", "completed")) == [
        "gamma_%",
        "alpha-2",
        "beta-1",
        "alpha-1",
    ]
    assert await ids(workflow_name="other") == ["beta-1"]
    assert await ids(since=NOW + 1, until=NOW + 3) == ["alpha-2", "beta-1"]
    assert await ids(id="alpha") == ["alpha-2", "alpha-1"]
    assert await ids(id="run-beta") == ["beta-1"]
    assert await ids(id="ALPHA") == []  # ids are exact: case matters
    assert await ids(text="ALPHA") == ["alpha-2", "alpha-1"]  # text does not
    assert await ids(text="_%") == ["gamma_%"]  # LIKE's wildcards are plain text
    assert await ids(text="other") == ["beta-1"]  # the workflow name
    assert await ids(statuses=("running",), workflow_name="wf", text="a-") == ["alpha-2"]
    assert await ids(since=NOW + 5) == []


async def test_text_searches_the_error_and_blocked_reason(store: Store) -> None:
    await start(store, "plain", now=NOW)
    await start(store, "broken", now=NOW + 1)
    claim = await claim_run(store, "run-broken")
    await schedule(store, claim, [task(1)])
    t = await claim_one(store)
    await store.complete_task(
        failure(t, ErrorInfo(type="ValueError", message="Quota Exceeded for key k1"))
    )
    assert await _all_pages(store, RunFilter(text="quota exceeded"), limit=5) == []
    # The run's own error: fail it for good.
    again = await claim_run(store, "run-broken", now=NOW + 2)
    from keepgoing._history.events import WorkflowFailed  # noqa: PLC0415

    await schedule(
        store, again, [WorkflowFailed(error=ErrorInfo(type="ValueError", message="Quota gone"))]
    )
    assert await _all_pages(store, RunFilter(text="quota gone"), limit=5) == ["broken"]


async def test_counts_by_status(store: Store) -> None:
    for n in range(3):
        await start(store, f"wf-{n}", now=NOW + n)
    await start(store, "o", name="other", now=NOW + 5)
    claim = await claim_run(store, "run-wf-0")
    await schedule(store, claim, [WorkflowCompleted(result=1)])
    assert await store.count_runs_by_status(RunFilter()) == {"completed": 1, "running": 3}
    assert await store.count_runs_by_status(RunFilter(workflow_name="wf")) == {
        "completed": 1,
        "running": 2,
    }
    assert await store.count_runs_by_status(RunFilter(statuses=("completed",))) == {"completed": 1}
    assert await store.count_runs_by_status(RunFilter(since=NOW + 10)) == {}


async def test_bad_status_is_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="'nope' is not a run status"):
        await store.page_runs(RunFilter(statuses=("nope",)))
    with pytest.raises(ValueError, match="not a run status"):
        await store.count_runs_by_status(RunFilter(statuses=("running", "x")))


@pytest.mark.parametrize(
    "text", ["", "!!!", "bm90IGpzb24", "WyJhIiwxXQ", "WzEuNSwtMV0", "WzFlOTk5LDFd"]
)
def test_bad_cursors(text: str) -> None:
    with pytest.raises(InvalidCursorError):
        RunCursor.decode(text)


async def test_runs_changed_and_task_rows(store: Store) -> None:
    await start(store, "old", now=NOW)
    await start(store, "new", now=NOW + 10)
    assert [r.workflow_id for r in await store.runs_changed(NOW + 5)] == ["new"]
    claim = await claim_run(store, "run-old", now=NOW + 20)
    await schedule(store, claim, [task(1), task(2)], now=NOW + 20)
    assert [r.workflow_id for r in await store.runs_changed(NOW + 5)] == ["new", "old"]
    t = await claim_one(store, worker="w9", now=NOW + 21)
    rows = await store.run_tasks("run-old")
    assert [(r.cmd, r.status, r.lease_owner, r.attempt) for r in rows] == [
        (1, "running", "w9", 1),
        (2, "pending", None, 0),
    ]
    assert t.cmd == 1
    assert await store.run_tasks("nope") == []


async def test_attempt_logs_are_written_with_the_outcome(store: Store) -> None:
    await start(store, "logs")
    claim = await claim_run(store, "run-logs")
    await schedule(store, claim, [task(1, retries=1)])
    first = await claim_one(store)

    def log(attempt: int, text: str) -> AttemptLog:
        return AttemptLog("run-logs", 1, attempt, "w1", NOW + attempt, text, len(text))

    failed = dataclasses.replace(failure(first), logs=log(1, "first try\n"))
    await store.complete_task(failed)
    second = await claim_one(store, now=NOW + 100)
    stale = dataclasses.replace(failure(first), logs=log(1, "stale"))
    assert not (await store.complete_task(stale)).accepted  # a refused outcome writes no log
    await store.complete_task(dataclasses.replace(success(second), logs=log(2, "ünïcode ✓\n")))
    logs = await store.attempt_logs("run-logs")
    assert [(x.attempt, x.text) for x in logs] == [(1, "first try\n"), (2, "ünïcode ✓\n")]
    assert [x.attempt for x in await store.attempt_logs("run-logs", attempt=2)] == [2]
    assert await store.attempt_logs("run-logs", cmd=5) == []


async def test_a_text_search_reads_a_bounded_window_per_page(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from keepgoing._store.sql import inspect as sql_inspect  # noqa: PLC0415

    monkeypatch.setattr(sql_inspect, "TEXT_WINDOW", 3)
    for n in range(10):
        await start(store, f"{'hit' if n in (1, 2, 8) else 'miss'}-{n}", now=NOW + n)
    pages = []
    after = None
    for _ in range(20):
        page = await store.page_runs(RunFilter(text="HIT"), limit=2, after=after)
        pages.append([r.workflow_id for r in page.runs])
        if page.next_cursor is None:
            break
        after = page.next_cursor
    # Each page read at most 3 runs: some pages are short or empty, none is lost.
    assert [w for p in pages for w in p] == ["hit-8", "hit-2", "hit-1"]
    assert len(pages) >= 3 and all(len(p) <= 2 for p in pages)
