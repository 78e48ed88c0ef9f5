"""The PostgreSQL adapter's rewrites of SQLite's SQL, and ``postgresql://`` URLs (no server)."""

from __future__ import annotations

import pytest

from keepgoing._open_store import store_from_url
from keepgoing._store.postgres import parse_postgres_url
from keepgoing._store.postgres.sql import translate
from keepgoing._store.url import redact_url
from keepgoing.errors import InvalidStoreURLError

REWRITES = [
    ("SELECT a FROM t WHERE b = ? AND c IN (?, ?)",
     "SELECT a FROM t WHERE b = %s AND c IN (%s, %s)"),
    ("SELECT 1 FROM r WHERE i = ? /*FOR UPDATE*/", "SELECT 1 FROM r WHERE i = %s FOR UPDATE"),
    ("SELECT x FROM t LIMIT ? /*FOR UPDATE OF t SKIP LOCKED*/", "SELECT x FROM t LIMIT %s "
     "FOR UPDATE OF t SKIP LOCKED"),
    ("UPDATE t SET v = MIN(? + ?, d + ?)", "UPDATE t SET v = LEAST(%s + %s, d + %s)"),
    ("SELECT MIN(x) FROM (SELECT MAX(y, 0) AS x FROM t) AS due",
     "SELECT MIN(x) FROM (SELECT GREATEST(y, 0) AS x FROM t) AS due"),
    ("UPDATE r SET h = ? WHERE h IS ?", "UPDATE r SET h = %s WHERE h IS NOT DISTINCT FROM %s"),
    ("SELECT 'a?b%' FROM t WHERE x = ?", "SELECT 'a?b%%' FROM t WHERE x = %s"),
    ("UPDATE r SET a = ?, f = 1, b = 2, f = 0 WHERE i = ?",
     "UPDATE r SET a = %s, b = 2, f = 0 WHERE i = %s"),
    ("UPDATE r SET s = CASE WHEN f = 1 THEN s ELSE ? END, f = 1, f = 0 WHERE i = ?",
     "UPDATE r SET s = CASE WHEN f = 1 THEN s ELSE %s END, f = 0 WHERE i = %s"),
    ("INSERT OR REPLACE INTO workflow_catalog (name, queue, last_seen) VALUES (?, ?, ?)",
     "INSERT INTO workflow_catalog (name, queue, last_seen) VALUES (%s, %s, %s) "
     "ON CONFLICT (name, queue) DO UPDATE SET last_seen = EXCLUDED.last_seen"),
    ("INSERT OR IGNORE INTO o (k, v) VALUES (?, ?)",
     "INSERT INTO o (k, v) VALUES (%s, %s) ON CONFLICT DO NOTHING"),
]  # fmt: skip


@pytest.mark.parametrize(("sqlite", "postgresql"), REWRITES)
def test_sqlite_sql_is_rewritten_for_postgresql(sqlite: str, postgresql: str) -> None:
    assert translate(sqlite) == postgresql


def test_insert_or_replace_into_a_table_without_a_known_key_is_refused() -> None:
    with pytest.raises(ValueError, match="CONFLICT_KEYS"):
        translate("INSERT OR REPLACE INTO mystery (a) VALUES (?)")


def test_url_options_are_ours_and_the_rest_goes_to_libpq() -> None:
    conninfo, options, where = parse_postgres_url(
        "postgresql://kg:secret@db.example:6543/runs?pool_max=16&pool_min=2&sslmode=require"
    )
    assert (options.pool_min, options.pool_max, options.outage_timeout) == (2, 16, 30.0)
    assert where == "db.example:6543/runs"
    assert "sslmode=require" in conninfo and "pool_max" not in conninfo
    assert "application_name=keepgoing" in conninfo  # a default, as the URL set none
    assert "secret" not in where


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://h/db?pool_max=0",
        "postgresql://h/db?pool_min=5&pool_max=2",
        "postgresql://h/db?outage_timeout=-1",
        "postgresql://h/db?pool_max=many",
        "postgresql://h/db?no_such_libpq_option=1",
    ],
)
def test_bad_urls_are_refused_when_the_store_is_built(url: str) -> None:
    with pytest.raises(InvalidStoreURLError):
        store_from_url(url)


def test_passwords_never_reach_messages() -> None:
    with pytest.raises(InvalidStoreURLError) as caught:
        store_from_url("postgresql://kg:hunter2@h/db?pool_max=0")
    assert "hunter2" not in str(caught.value)
    assert redact_url("postgresql://kg:hunter2@h:5/db") == "postgresql://kg:***@h:5/db"
    assert redact_url("sqlite:///x.db") == "sqlite:///x.db"


def test_every_sqlite_migration_has_a_postgresql_twin() -> None:
    from keepgoing._store.migrate import load_migrations  # noqa: PLC0415

    sqlite = [(m.version, m.name) for m in load_migrations("sqlite")]
    postgresql = [(m.version, m.name) for m in load_migrations("postgresql")]
    assert postgresql == sqlite, "add the same numbered migration under migrations/postgresql/"
