"""Rows read by name: every query's rows come back as a small ``NamedTuple``.

A row type's fields are the query's column names, in order. Where a query
selects plain columns, its column list is built from the fields
(:func:`columns`), so the two cannot drift apart; where it selects
expressions, each has an ``AS`` alias spelled like its field. Either way the
first row a statement returns is checked against the type: the names the
database reports for its columns (``cursor.description``, the same on SQLite
and PostgreSQL) must be the fields, in order. A query that selects a column
the code does not read, or reads a column under another's name, fails on
its first row instead of handing the wrong value on.

The check runs once per statement text and row type, so it costs a set
lookup afterwards. ``conn`` is anything with the DB-API ``execute``: a
``sqlite3.Connection``, the PostgreSQL store's ``PgConnection``, or a psycopg
connection (with its own ``%s`` placeholders).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, TypeVar

__all__ = ["columns", "every", "first", "one", "value"]

R = TypeVar("R", bound=NamedTuple)

_CHECKED: set[tuple[str, type[Any]]] = set()
_CHECKED_MAX = 4096  # statement texts vary with their IN lists; the set stays bounded


def columns(row_type: type[NamedTuple], prefix: str = "") -> str:
    """The column list for ``row_type``: ``"a, b"``, or with ``prefix="t."`` ``"t.a, t.b"``."""
    return ", ".join(prefix + field for field in row_type._fields)


def one(conn: Any, row_type: type[R], sql: str, params: Sequence[Any] = ()) -> R | None:
    """The statement's first row as ``row_type``, or None when it returns none."""
    cursor = conn.execute(sql, params)
    row = cursor.fetchone()
    if row is None:
        return None
    _check(cursor, row_type, sql)
    return row_type._make(row)


def first(cursor: Any, row_type: type[R], sql: str) -> R | None:
    """:func:`one` for a statement already sent (``cursor`` is what ``execute`` of
    ``sql`` returned): PostgreSQL's pipelined writes send statements without waiting,
    so two statements sent before either is read cost one round trip."""
    row = cursor.fetchone()
    if row is None:
        return None
    _check(cursor, row_type, sql)
    return row_type._make(row)


def every(conn: Any, row_type: type[R], sql: str, params: Sequence[Any] = ()) -> list[R]:
    """Every row the statement returns, as ``row_type``."""
    cursor = conn.execute(sql, params)
    rows = cursor.fetchall()
    if not rows:
        return []
    _check(cursor, row_type, sql)
    make = row_type._make
    return [make(row) for row in rows]


def value(conn: Any, sql: str, params: Sequence[Any] = ()) -> Any:
    """The one column of the statement's first row (None when it returns no row).

    For a statement that selects a single value (a count, a maximum, one
    column of one row); a statement returning more than one column is refused.
    """
    cursor = conn.execute(sql, params)
    row = cursor.fetchone()
    if row is None:
        return None
    if len(row) != 1:
        raise AssertionError(f"a single value was read from {len(row)} columns: {sql}")
    return row[0]


def _check(cursor: Any, row_type: type[Any], sql: str) -> None:
    key = (sql, row_type)
    if key in _CHECKED:
        return
    fields: tuple[str, ...] = row_type._fields
    names = tuple(str(column[0]) for column in cursor.description or ())
    if tuple(name.lower() for name in names) != fields:
        raise AssertionError(
            f"{row_type.__name__} reads {', '.join(fields)} but the statement returns "
            f"{', '.join(names)}: {sql}"
        )
    if len(_CHECKED) >= _CHECKED_MAX:
        _CHECKED.clear()
    _CHECKED.add(key)
