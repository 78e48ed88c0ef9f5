"""The connection the shared SQL runs on: what both dialects supply.

Every function in ``keepgoing._store.sql`` takes a :class:`Connection` inside
the caller's transaction. SQLite's ``sqlite3.Connection`` is one as it is;
PostgreSQL's is :class:`~keepgoing._store.postgres.sql.PgConnection`, which
rewrites the few spellings that differ (see :mod:`keepgoing._store.sql.dialect`).
The SQL is SQLite's; nothing here may use what only one of them has.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

__all__ = ["Connection", "Cursor"]


class Cursor(Protocol):
    """What a statement gives back: its rows, and for a write its counts."""

    @property
    def lastrowid(self) -> int | None: ...

    @property
    def rowcount(self) -> int: ...

    @property
    def description(self) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """The DB-API subset the shared SQL uses: ``?`` placeholders, no commit."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor: ...
