"""SQLite's SQL, spoken to PostgreSQL: the connection the shared op functions run on.

:class:`PgConnection` offers the DB-API subset the op functions use
(``execute(sql, params)`` returning a cursor with ``fetchone``/``fetchall``/
``rowcount``/iteration, ``executemany``, ``lastrowid``) over a psycopg
connection, and rewrites each statement once (the result is cached):

===============================  ==========================================
SQLite                           PostgreSQL
===============================  ==========================================
``?``                            ``%s`` (and a literal ``%`` becomes ``%%``)
``/*FOR UPDATE ...*/``           ``FOR UPDATE ...`` (see ``sql/dialect.py``)
``MIN(a, b)``, ``MAX(a, b)``     ``LEAST(a, b)``, ``GREATEST(a, b)``
``INSERT OR REPLACE INTO t``     ``INSERT INTO t ... ON CONFLICT (key) DO UPDATE``
``INSERT OR IGNORE INTO t``      ``INSERT INTO t ... ON CONFLICT DO NOTHING``
``x IS ?``                       ``x IS NOT DISTINCT FROM %s``
``UPDATE t SET a = 1, a = 2``    ``UPDATE t SET a = 2`` (SQLite: the rightmost wins)
``cursor.lastrowid``             ``RETURNING id`` on tables in :data:`IDENTITY`
``rowid``                        a ``rowid`` identity column (migrations)
``x /*COLLATE C*/ >= ?``         ``x COLLATE "C" >= %s`` (byte order, as SQLite's)
===============================  ==========================================

A statement the rules do not cover is sent as it is; the contract suite,
which runs every query on both databases, is what keeps the rules complete.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

__all__ = ["CONFLICT_KEYS", "IDENTITY", "PgConnection", "begin", "rollback", "translate"]

#: The key ``INSERT OR REPLACE`` replaces on, per table.
CONFLICT_KEYS: dict[str, tuple[str, ...]] = {
    "workers": ("worker_id",),
    "workflow_catalog": ("name", "queue"),
}
#: Tables whose inserts report ``lastrowid``, and the identity column that holds it.
IDENTITY: dict[str, str] = {"audit_log": "id", "worker_stops": "stop_id"}

_LOCK = re.compile(r"/\*\s*(FOR (?:UPDATE|SHARE|NO KEY UPDATE)[A-Za-z_ ,]*?)\s*\*/")
_UPSERT = re.compile(r"^(\s*)INSERT OR (REPLACE|IGNORE) INTO (\w+) \(([^)]*)\)(.*)$", re.S)
_INSERT = re.compile(r"^\s*INSERT INTO (\w+)\b")
_UPDATE = re.compile(r"^(\s*UPDATE \w+ SET )(.*)$", re.S)
_PAIRWISE = {"MIN": "LEAST", "MAX": "GREATEST"}
_VALUES = re.compile(r"^\s*INSERT INTO \w+ \([^)]*\) VALUES \([?, ]+\)\s*$")
_ROWS_PER_INSERT = 64
_FUNCTION = re.compile(r"\b(MIN|MAX)\(")


@functools.lru_cache(maxsize=2048)
def translate(sql: str) -> str:
    """The PostgreSQL text of a statement written for SQLite (with parameters)."""
    text = _LOCK.sub(r"\1", sql)
    text = text.replace("/*COLLATE C*/", 'COLLATE "C"')
    text = _last_assignment_wins(text)
    text = _upsert(text)
    text = _pairwise(text)
    text = text.replace(" IS ?", " IS NOT DISTINCT FROM ?")
    return _placeholders(text)


def _upsert(sql: str) -> str:
    match = _UPSERT.match(sql)
    if match is None:
        return sql
    lead, verb, table, columns, rest = match.groups()
    head = f"{lead}INSERT INTO {table} ({columns}){rest.rstrip().rstrip(';')}"
    if verb == "IGNORE":
        return f"{head} ON CONFLICT DO NOTHING"
    keys = CONFLICT_KEYS.get(table)
    if keys is None:
        raise ValueError(f"INSERT OR REPLACE INTO {table}: add its key to CONFLICT_KEYS")
    names = [c.strip() for c in columns.split(",")]
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in names if c not in keys)
    action = f"DO UPDATE SET {updates}" if updates else "DO NOTHING"
    return f"{head} ON CONFLICT ({', '.join(keys)}) {action}"


def _last_assignment_wins(sql: str) -> str:
    """Drop the earlier assignments of a column an ``UPDATE`` sets twice."""
    match = _UPDATE.match(sql)
    if match is None:
        return sql
    head, body = match.group(1), match.group(2)
    end = _top_level(body, " WHERE ")
    assignments = _split_top_level(body[:end])
    columns = [a.split("=", 1)[0].strip() for a in assignments]
    if len(set(columns)) == len(columns):
        return sql
    kept = [a for i, a in enumerate(assignments) if columns[i] not in columns[i + 1 :]]
    return f"{head}{', '.join(a.strip() for a in kept)}{body[end:]}"


def _top_level(text: str, needle: str) -> int:
    """Where ``needle`` first occurs outside parentheses and quotes (or the end)."""
    depth, quoted = 0, False
    for i, char in enumerate(text):
        if char == "'":
            quoted = not quoted
        elif not quoted and char in "()":
            depth += 1 if char == "(" else -1
        elif not quoted and depth == 0 and text.startswith(needle, i):
            return i
    return len(text)


def _split_top_level(text: str) -> list[str]:
    parts, start = [], 0
    while True:
        cut = _top_level(text[start:], ",")
        parts.append(text[start : start + cut])
        if start + cut >= len(text):
            return parts
        start += cut + 1


def _pairwise(sql: str) -> str:
    """``MIN(a, b)`` with two or more arguments is SQLite's scalar minimum."""
    out, start = [], 0
    for match in _FUNCTION.finditer(sql):
        if match.start() < start:
            continue
        _, comma = _scan_call(sql, match.end())
        if comma:
            out.append(sql[start : match.start()])
            out.append(_PAIRWISE[match.group(1)] + "(")
            start = match.end()
    out.append(sql[start:])
    return "".join(out)


def _scan_call(sql: str, start: int) -> tuple[int, bool]:
    """From just after ``(``: the index after the matching ``)`` and whether a
    comma separates arguments at the call's own level."""
    depth, comma, i = 1, False, start
    while i < len(sql) and depth:
        char = sql[i]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 1:
            comma = True
        elif char == "'":
            i = sql.index("'", i + 1)
        i += 1
    return i, comma


def _placeholders(sql: str) -> str:
    out, quoted = [], False
    for char in sql:
        if char == "'":
            quoted = not quoted
        if char == "%":
            out.append("%%")
        elif char == "?" and not quoted:
            out.append("%s")
        else:
            out.append(char)
    return "".join(out)


@functools.lru_cache(maxsize=256)
def _multi_row(sql: str, count: int) -> str:
    """``INSERT ... VALUES (?, ?)`` for ``count`` rows: ``VALUES (%s, %s), (%s, %s), ...``."""
    head, _, values = translate(sql).rpartition(" VALUES ")
    return f"{head} VALUES {', '.join([values.strip()] * count)}"


@functools.lru_cache(maxsize=256)
def _identity_of(sql: str) -> str | None:
    match = _INSERT.match(sql)
    if match is None or "RETURNING" in sql.upper():
        return None
    return IDENTITY.get(match.group(1))


class _Inserted:
    """What an ``INSERT`` into a table with an identity returns."""

    def __init__(self, lastrowid: int, rowcount: int) -> None:
        self.lastrowid = lastrowid
        self.rowcount = rowcount

    def fetchone(self) -> None:
        return None

    def fetchall(self) -> list[Any]:
        return []


class _Pipelined:
    """A cursor in pipeline mode: its rows are waited for only when read."""

    __slots__ = ("_cursor", "_pipeline")

    def __init__(self, cursor: psycopg.Cursor[Any], pipeline: psycopg.Pipeline) -> None:
        self._cursor = cursor
        self._pipeline = pipeline

    def fetchone(self) -> Any:
        return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cursor)

    @property
    def description(self) -> Any:
        return self._cursor.description

    @property
    def rowcount(self) -> int:
        self._pipeline.sync()
        return self._cursor.rowcount


class PgConnection:
    """The DB-API subset the shared op functions use, over a psycopg connection
    inside the transaction the caller opened.

    With ``pipeline`` (writes), statements are sent without waiting for their
    answers; a caller waits only when it reads a result (``fetchone``,
    ``rowcount``, ...) or commits. A write transaction of ten statements of
    which one is read costs two round trips, not eleven. Errors surface at the
    next wait and abort the whole transaction, as any error does.
    """

    dialect = "postgresql"

    def __init__(
        self, raw: psycopg.Connection[Any], pipeline: psycopg.Pipeline | None = None
    ) -> None:
        self.raw = raw
        self.pipeline = pipeline

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        query = translate(sql)
        identity = _identity_of(sql)
        if identity is None:
            cursor = self.raw.execute(query, params)
            return cursor if self.pipeline is None else _Pipelined(cursor, self.pipeline)
        cursor = self.raw.execute(f"{query} RETURNING {identity}", params)
        row = cursor.fetchone()
        return _Inserted(int(row[0]) if row else 0, cursor.rowcount)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any:
        batch = list(rows)
        if 0 < len(batch) <= _ROWS_PER_INSERT and _VALUES.match(sql):
            # A few rows (a history append is 1 to 3 events): one multi-row INSERT
            # is one round trip, cheaper than executemany's pipeline.
            flat = [value for row in batch for value in row]
            cursor = self.raw.execute(_multi_row(sql, len(batch)), flat)
            return cursor if self.pipeline is None else _Pipelined(cursor, self.pipeline)
        cursor = self.raw.cursor()
        cursor.executemany(translate(sql), batch)
        return cursor

    def lock_key(self, key: str) -> None:
        """A transaction-scoped advisory lock on ``key`` (see ``sql/dialect.lock_key``)."""
        self.raw.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))

    def try_lock_key(self, key: str) -> bool:
        """:meth:`lock_key` without waiting: False when another transaction holds it."""
        (acquired,) = self.raw.execute(
            "SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0)) AS acquired", (key,)
        ).fetchone() or (False,)
        return bool(acquired)


def begin(raw: psycopg.Connection[Any]) -> None:
    """Open a write's transaction on ``raw``, a connection in autocommit mode inside a
    pipeline: the ``BEGIN`` is queued with the statements after it and answered with
    them. (psycopg's implicit ``BEGIN``, outside autocommit mode, syncs the pipeline
    before the first statement: a round trip of its own.)"""
    raw.execute("BEGIN")


def rollback(raw: psycopg.Connection[Any]) -> None:
    """End whatever transaction ``raw`` still has open after a failed write, if it can."""
    if raw.broken or raw.closed:
        return
    if raw.info.transaction_status != TransactionStatus.IDLE:
        with contextlib.suppress(psycopg.Error):
            raw.rollback()
