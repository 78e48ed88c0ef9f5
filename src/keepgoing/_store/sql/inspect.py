"""The inspection facet's SQL (mixed into ``SqlStore``): run pages, counts, changes, logs.

Pages are keyset pages: newest first by ``(created_at, rowid)``, each page
strictly after the last row of the one before, so page 2,000 costs what page 1
does. The status and workflow-name filters ride the indexes of migration 0011
(``runs_status_created``, ``runs_name_created``); several statuses are one
indexed page per status merged (``UNION ALL``), never a sort of every match.
Rows are read by name (``rows``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple, cast

from keepgoing._store import records as rec
from keepgoing._store.inspect_protocol import (
    AttemptLog,
    InspectStore,
    RunCursor,
    RunFilter,
    RunPage,
    TaskState,
)
from keepgoing._store.sql import admission
from keepgoing._store.sql import runs as ops
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.rows import columns, every, value
from keepgoing._store.trouble import MARKERS, TROUBLE_CONDITIONS

__all__ = ["SqlInspectMixin", "save_attempt_log"]


class _PageRow(NamedTuple):
    """A run as a page reads it: :class:`~keepgoing._store.sql.runs.RunRow`, then its
    insertion order (the tie-break of equal ``created_at``)."""

    run_id: str
    workflow_id: str
    workflow_name: str
    status: rec.RunStatus
    input: str
    task_queue: str
    code_version: str
    created_at: float
    updated_at: float
    result: str | None
    error: str | None
    blocked_reason: str | None
    fence: int
    last_input_seq: int
    runnable: int
    ended_at: float | None
    parent_workflow_id: str | None
    parent_run_id: str | None
    continued_from: str | None
    continued_to: str | None
    code_versions: str
    blocked_versions: str
    retry_blocked_at: float | None
    group_revision: int | None
    worker_losses: int
    retries: int
    rate_limited: int
    reviews_waiting: int
    priority: int
    admitted: int
    flow_key: str | None
    flow_limit: int | None
    row_order: int


class _Count(NamedTuple):
    status: str
    n: int


class _TaskState(NamedTuple):
    run_id: str
    cmd: int
    name: str
    status: str
    attempt: int
    failures: int
    worker_losses: int
    started_at: float | None
    deadline: float | None
    lease_owner: str | None
    available_at: float
    operation_id: str | None


class _LogRow(NamedTuple):
    run_id: str
    cmd: int
    attempt: int
    worker_id: str
    at: float
    text: str
    size: int
    truncated: int


assert _PageRow._fields[:-1] == ops.RunRow._fields, "a page row is a run row plus its order"
_PAGE_COLUMNS = f"{ops.RUN_COLUMNS}, rowid AS row_order"
_ORDER = "ORDER BY created_at DESC, row_order DESC"
#: The most runs a page of a text search reads (see :func:`_text_page`).
TEXT_WINDOW = 10_000


def _like(text: str) -> str:
    """``text`` as a LIKE pattern matching it anywhere (``\\`` escapes ``%`` and ``_``)."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _conditions(
    f: RunFilter, *, statuses: bool = True, text: bool = True
) -> tuple[list[str], list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    if statuses and f.statuses:
        rules = [admission.status_is(s) for s in f.statuses]
        where.append("(" + " OR ".join(sql for sql, _ in rules) + ")")
        params.extend(v for _, values in rules for v in values)
    if f.workflow_name is not None:
        where.append("workflow_name = ?")
        params.append(f.workflow_name)
    if f.since is not None:
        where.append("created_at >= ?")
        params.append(f.since)
    if f.until is not None:
        where.append("created_at < ?")
        params.append(f.until)
    if f.id is not None:
        # A prefix as a range in byte order: the id indexes serve it (on PostgreSQL
        # the byte-order indexes of 0011, whatever the database's collation).
        high = f.id + "\U0010ffff"
        where.append(
            "((workflow_id /*COLLATE C*/ >= ? AND workflow_id /*COLLATE C*/ < ?) "
            "OR (run_id /*COLLATE C*/ >= ? AND run_id /*COLLATE C*/ < ?))"
        )
        params.extend((f.id, high, f.id, high))
    if text and f.text is not None:
        clause, values = _text(f.text)
        where.append(clause)
        params.extend(values)
    if f.needs_patch is not None:
        where.append(
            "status IN ('running', 'blocked') AND NOT EXISTS (SELECT 1 FROM run_patches p "
            "WHERE p.run_id = runs.run_id AND p.change_id = ?)"
        )
        params.append(f.needs_patch)
    if f.revision is not None:
        where.append("group_revision = ?")
        params.append(f.revision)
    where.extend(TROUBLE_CONDITIONS[marker] for marker in f.trouble)
    return where, params


def _text(text: str) -> tuple[str, list[Any]]:
    like = _like(text)
    columns = ("workflow_id", "run_id", "workflow_name", "blocked_reason", "error")
    clause = "(" + " OR ".join(f"LOWER({c}) LIKE ? ESCAPE '\\'" for c in columns) + ")"
    return clause, [like] * len(columns)


def _clause(where: Iterable[str]) -> str:
    parts = list(where)
    return f"WHERE {' AND '.join(parts)}" if parts else ""


def page_runs(
    conn: Connection, f: RunFilter, limit: int, after: RunCursor | None, offset: int = 0
) -> RunPage:
    if f.text is not None:
        return _text_page(conn, f, limit, after, offset)
    where, params = _conditions(f, statuses=False)
    if after is not None:
        # A range on created_at the index serves, then the tie-break on the row.
        where.append("created_at <= ? AND (created_at < ? OR rowid < ?)")
        params.extend((after.created_at, after.created_at, after.row))
    take = limit + 1  # one more tells whether there is a next page
    if len(f.statuses) <= 1:
        if f.statuses:
            clause, values = admission.status_is(f.statuses[0])
            where.insert(0, clause)
            params[:0] = values
        sql = f"SELECT {_PAGE_COLUMNS} FROM runs {_clause(where)} {_ORDER} LIMIT ? OFFSET ?"
        args: list[Any] = [*params, take, offset]
    else:
        parts, args = [], []
        for i, status in enumerate(f.statuses):
            clause, values = admission.status_is(status)
            parts.append(
                f"SELECT * FROM (SELECT {_PAGE_COLUMNS} FROM runs "
                f"{_clause([clause, *where])} {_ORDER} LIMIT ?) AS part{i}"
            )
            args.extend((*values, *params, offset + take))
        sql = f"{' UNION ALL '.join(parts)} {_ORDER} LIMIT ? OFFSET ?"
        args.extend((take, offset))
    rows = every(conn, _PageRow, sql, args)
    more = len(rows) > limit
    rows = rows[:limit]
    runs = [_run(row) for row in rows]
    cursor = None
    if more and rows:
        cursor = RunCursor(float(rows[-1].created_at), int(rows[-1].row_order))
    return RunPage(runs=runs, next_cursor=cursor)


class _Edge(NamedTuple):
    created_at: float
    row_order: int


def _keyset(where: list[str], params: list[Any], after: RunCursor | None) -> None:
    if after is not None:
        # A range on created_at the index serves, then the tie-break on the row.
        where.append("created_at <= ? AND (created_at < ? OR rowid < ?)")
        params.extend((after.created_at, after.created_at, after.row))


def _text_page(
    conn: Connection, f: RunFilter, limit: int, after: RunCursor | None, offset: int
) -> RunPage:
    """A text search reads at most :data:`TEXT_WINDOW` runs per page, newest first: a
    text that matches few runs returns a short (even empty) page whose cursor goes on
    from the last run read, so no page reads the whole table."""
    where, params = _conditions(f, text=False)
    _keyset(where, params, after)
    clause, values = _text(f.text or "")
    if getattr(conn, "dialect", "sqlite") == "postgresql":
        # PostgreSQL reads the window's rows in a subquery and filters them.
        window = f"SELECT {_PAGE_COLUMNS} FROM runs {_clause(where)} {_ORDER} LIMIT ?"
        sql = f"SELECT * FROM ({window}) AS window_rows WHERE {clause} {_ORDER} LIMIT ? OFFSET ?"
    else:
        # SQLite materializes such a subquery; it does better with the window's rowids
        # (read from an index), trying the text newest first until the page is full.
        window = (
            f"SELECT rowid FROM runs {_clause(where)} ORDER BY created_at DESC, rowid DESC LIMIT ?"
        )
        sql = (
            f"SELECT {_PAGE_COLUMNS} FROM runs WHERE rowid IN ({window}) AND {clause} "
            f"{_ORDER} LIMIT ? OFFSET ?"
        )
    rows = every(conn, _PageRow, sql, [*params, TEXT_WINDOW, *values, limit + 1, offset])
    runs = [_run(row) for row in rows[:limit]]
    if len(rows) > limit:
        last = rows[limit - 1]
        return RunPage(runs, RunCursor(float(last.created_at), int(last.row_order)))
    edge = every(
        conn,
        _Edge,
        f"SELECT created_at, rowid AS row_order FROM runs {_clause(where)} {_ORDER} "
        "LIMIT 1 OFFSET ?",
        [*params, TEXT_WINDOW - 1],
    )
    if not edge:  # the window held every run left: this is the last page
        return RunPage(runs, None)
    return RunPage(runs, RunCursor(float(edge[0].created_at), int(edge[0].row_order)))


def _run(row: _PageRow) -> rec.RunRecord:
    return ops.run_record(ops.RunRow._make(row[:-1]))


def count_runs_by_status(conn: Connection, f: RunFilter) -> dict[str, int]:
    where, params = _conditions(f)
    rows = every(
        conn,
        _Count,
        f"SELECT {admission.STATUS_SHOWN} AS status, COUNT(*) AS n FROM runs "
        f"{_clause(where)} GROUP BY {admission.STATUS_SHOWN}",
        params,
    )
    return {row.status: int(row.n) for row in sorted(rows)}


def count_trouble(conn: Connection, f: RunFilter) -> dict[str, int]:
    """One count per marker, each through the marker's partial index."""
    where, params = _conditions(f)
    counts = {}
    for marker in MARKERS:
        clause = _clause([*where, TROUBLE_CONDITIONS[marker]])
        counts[marker] = int(value(conn, f"SELECT COUNT(*) FROM runs {clause}", params) or 0)
    return counts


def runs_changed(conn: Connection, since: float, limit: int) -> list[rec.RunRecord]:
    rows = every(
        conn,
        _PageRow,
        f"SELECT {_PAGE_COLUMNS} FROM runs WHERE updated_at >= ? "
        "ORDER BY updated_at, row_order LIMIT ?",
        (since, limit),
    )
    return [_run(row) for row in rows]


def run_tasks(conn: Connection, run_id: str) -> list[TaskState]:
    rows = every(
        conn,
        _TaskState,
        f"SELECT {columns(_TaskState)} FROM tasks WHERE run_id = ? ORDER BY cmd",
        (run_id,),
    )
    return [TaskState(**row._asdict()) for row in rows]


def uncertain_steps(conn: Connection, limit: int) -> list[TaskState]:
    rows = every(
        conn,
        _TaskState,
        f"SELECT {', '.join('t.' + c for c in _TaskState._fields)} FROM tasks t "
        "JOIN runs r ON r.run_id = t.run_id "
        "WHERE t.status = 'uncertain' AND r.status IN ('running', 'blocked') "
        "ORDER BY r.created_at, t.run_id, t.cmd LIMIT ?",
        (limit,),
    )
    return [TaskState(**row._asdict()) for row in rows]


def attempt_logs(
    conn: Connection, run_id: str, cmd: int | None, attempt: int | None
) -> list[AttemptLog]:
    where, params = ["run_id = ?"], [cast(Any, run_id)]
    if cmd is not None:
        where.append("cmd = ?")
        params.append(cmd)
    if attempt is not None:
        where.append("attempt = ?")
        params.append(attempt)
    rows = every(
        conn,
        _LogRow,
        f"SELECT {columns(_LogRow)} FROM attempt_logs {_clause(where)} ORDER BY cmd, attempt",
        params,
    )
    return [AttemptLog(**{**row._asdict(), "truncated": bool(row.truncated)}) for row in rows]


def save_attempt_log(conn: Connection, log: AttemptLog) -> None:
    """Store an attempt's log inside the transaction that records its outcome."""
    conn.execute(
        "INSERT OR IGNORE INTO attempt_logs (run_id, cmd, attempt, worker_id, at, text, size, "
        "truncated) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            log.run_id,
            log.cmd,
            log.attempt,
            log.worker_id,
            log.at,
            log.text,
            log.size,
            int(log.truncated),
        ),
    )


class SqlInspectMixin(InspectStore):
    async def _read(self, op: Any) -> Any: ...  # provided by SqlStore

    async def page_runs(
        self,
        filter: RunFilter,
        *,
        limit: int = 50,
        after: RunCursor | None = None,
        offset: int = 0,
    ) -> RunPage:
        f = RunFilter(
            **{
                **filter.__dict__,
                "statuses": self.check_statuses(filter.statuses),
                "trouble": self.check_trouble(filter.trouble),
            }
        )
        page: RunPage = await self._read(
            lambda c: page_runs(c, f, max(1, limit), after, max(0, offset))
        )
        return page

    async def count_runs_by_status(self, filter: RunFilter) -> dict[str, int]:
        self.check_statuses(filter.statuses)
        self.check_trouble(filter.trouble)
        counts: dict[str, int] = await self._read(lambda c: count_runs_by_status(c, filter))
        return counts

    async def count_trouble(self, filter: RunFilter) -> dict[str, int]:
        self.check_statuses(filter.statuses)
        self.check_trouble(filter.trouble)
        counts: dict[str, int] = await self._read(lambda c: count_trouble(c, filter))
        return counts

    async def runs_changed(self, since: float, *, limit: int = 200) -> list[rec.RunRecord]:
        runs: list[rec.RunRecord] = await self._read(
            lambda c: runs_changed(c, since, max(1, limit))
        )
        return runs

    async def run_tasks(self, run_id: str) -> list[TaskState]:
        rows: list[TaskState] = await self._read(lambda c: run_tasks(c, run_id))
        return rows

    async def uncertain_steps(self, *, limit: int = 200) -> list[TaskState]:
        rows: list[TaskState] = await self._read(lambda c: uncertain_steps(c, limit))
        return rows

    async def attempt_logs(
        self, run_id: str, *, cmd: int | None = None, attempt: int | None = None
    ) -> list[AttemptLog]:
        logs: list[AttemptLog] = await self._read(lambda c: attempt_logs(c, run_id, cmd, attempt))
        return logs
