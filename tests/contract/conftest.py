"""The contract suite runs every test against every store users run: SQLite and PostgreSQL."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from keepgoing._store.protocol import Store

FACTORIES: dict[str, Callable[[Path], Store]] = {}

try:
    from keepgoing._store.sqlite import SqliteStore
except ModuleNotFoundError as exc:  # the backend is not there yet; a broken one must fail
    if exc.name != "keepgoing._store.sqlite":
        raise
else:

    def _sqlite(tmp_path: Path) -> Store:
        path = str(tmp_path / "kg.db")
        # The constructor takes either a file path or a ``sqlite:///`` URL.
        first = next(iter(inspect.signature(SqliteStore).parameters))
        return SqliteStore("sqlite:///" + path if first == "url" else path)

    FACTORIES["sqlite"] = _sqlite


def _postgres(request: pytest.FixtureRequest) -> Store:
    """The session's PostgreSQL database, emptied (skipped when there is no server)."""
    from keepgoing._store.postgres import PostgresStore  # noqa: PLC0415
    from postgres_support import migrated, reset  # noqa: PLC0415

    url = migrated(request.getfixturevalue("postgres_url"))
    reset(url)
    return PostgresStore(url)


@pytest.fixture(params=sorted([*FACTORIES, "postgresql"]))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """An opened store of each backend, closed after the test."""
    if request.param == "postgresql":
        backend = _postgres(request)
    else:
        backend = FACTORIES[request.param](tmp_path)
    await backend.open()
    try:
        yield backend
    finally:
        await backend.close()
