"""PostgreSQL for the test suite: one fresh database per test session, emptied per test.

The server is ``KEEPGOING_TEST_POSTGRES_DSN`` (default
``postgresql://postgres@127.0.0.1:5432/postgres``). The session creates a
database with a unique name there and drops it at the end. When no server
answers, PostgreSQL tests are skipped with the reason shown in the summary
(``-ra``), except under ``CI=true``, where they fail: CI must test both stores.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
# Tables a reset keeps: the schema version and the fixed histogram bounds; and
# the metric counters, whose rows exist from the start, which it sets to zero.
_KEPT = ("keepgoing_schema", "metric_step_bounds")
_ZEROED = {
    "metric_step_counts": "hits = 0, total = 0",
    "metric_lease_counts": "count = 0",
}

try:
    import psycopg
except ModuleNotFoundError:  # the postgres extra is not installed
    psycopg = None  # type: ignore[assignment]


def admin_dsn() -> str:
    return os.environ.get("KEEPGOING_TEST_POSTGRES_DSN") or DEFAULT_DSN


def with_database(dsn: str, name: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{name}"))


def _unavailable() -> str | None:
    """Why PostgreSQL tests cannot run here, or None."""
    if psycopg is None:
        return "psycopg is not installed (pip install -e '.[dev]')"
    try:
        with psycopg.connect(admin_dsn(), connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"no PostgreSQL at {admin_dsn()} ({first}); set KEEPGOING_TEST_POSTGRES_DSN"
    return None


def session_database() -> Iterator[str]:
    """Create a database for this session, yield its URL, drop it afterwards."""
    reason = _unavailable()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and the PostgreSQL tests cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    assert psycopg is not None
    name = f"keepgoing_test_{os.getpid()}_{secrets.token_hex(4)}"
    with psycopg.connect(admin_dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_database(admin_dsn(), name)
    finally:
        with psycopg.connect(admin_dsn(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def reset(url: str) -> None:
    """Empty every keepgoing table (the schema stays), so a test starts from nothing."""
    assert psycopg is not None
    with psycopg.connect(url) as conn:  # one transaction; DELETE is far quicker than TRUNCATE
        conn.execute("SET LOCAL lock_timeout = '10s'")
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            )
            if row[0] not in _KEPT
        ]
        for table in tables:
            if table in _ZEROED:
                conn.execute(f'UPDATE "{table}" SET {_ZEROED[table]}')  # type: ignore[arg-type]
            else:
                conn.execute(f'DELETE FROM "{table}"')  # type: ignore[arg-type]


def migrated(url: str) -> str:
    """Make sure the schema exists (the first store to open would do it too)."""
    from keepgoing._store.postgres import migrate, parse_postgres_url  # noqa: PLC0415

    conninfo, _, where = parse_postgres_url(url)
    migrate(conninfo, where)
    return url
