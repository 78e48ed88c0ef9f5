"""Store rows are read by name: a query's columns must be the fields its row type reads."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

import keepgoing._store as store_package
from keepgoing._store.sql.rows import columns, every, one, value


class Pair(NamedTuple):
    name: str
    size: int


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE things (name TEXT, size INTEGER, colour TEXT)")
    db.executemany("INSERT INTO things VALUES (?, ?, ?)", [("a", 1, "red"), ("b", 2, "blue")])
    yield db
    db.close()


def test_rows_come_back_as_the_named_type(conn: sqlite3.Connection) -> None:
    rows = every(conn, Pair, f"SELECT {columns(Pair)} FROM things ORDER BY name")
    assert rows == [Pair("a", 1), Pair("b", 2)]
    assert rows[1].size == 2
    found = one(conn, Pair, f"SELECT {columns(Pair)} FROM things WHERE name = ?", ("b",))
    assert found == Pair("b", 2)
    assert one(conn, Pair, f"SELECT {columns(Pair)} FROM things WHERE name = 'z'") is None
    assert every(conn, Pair, f"SELECT {columns(Pair)} FROM things WHERE size > 5") == []


def test_columns_with_a_table_prefix() -> None:
    assert columns(Pair) == "name, size"
    assert columns(Pair, "t.") == "t.name, t.size"


@pytest.mark.parametrize(
    ("sql", "returned"),
    [
        ("SELECT size, name FROM things", "size, name"),  # same count, wrong order
        ("SELECT name, colour FROM things", "name, colour"),  # another column under a name
        ("SELECT name, size, colour FROM things", "name, size, colour"),  # one too many
        ("SELECT name FROM things", "name"),  # one too few
        ("SELECT name, COUNT(*) FROM things GROUP BY name", "name, COUNT(*)"),  # no alias
    ],
)
def test_a_query_whose_columns_differ_from_the_fields_fails(
    conn: sqlite3.Connection, sql: str, returned: str
) -> None:
    with pytest.raises(AssertionError) as caught:
        every(conn, Pair, sql)
    assert "Pair reads name, size" in str(caught.value)
    assert f"returns {returned}" in str(caught.value)
    with pytest.raises(AssertionError):
        one(conn, Pair, sql)


def test_an_expression_read_by_its_alias(conn: sqlite3.Connection) -> None:
    sql = "SELECT name, SUM(size) AS size FROM things GROUP BY name ORDER BY name"
    assert every(conn, Pair, sql) == [Pair("a", 1), Pair("b", 2)]


def test_a_checked_statement_is_checked_again_for_another_type(conn: sqlite3.Connection) -> None:
    class Other(NamedTuple):
        name: str
        colour: str

    sql = f"SELECT {columns(Pair)} FROM things"
    every(conn, Pair, sql)
    with pytest.raises(AssertionError):
        every(conn, Other, sql)


def test_a_single_value(conn: sqlite3.Connection) -> None:
    assert value(conn, "SELECT COUNT(*) FROM things") == 2
    assert value(conn, "SELECT size FROM things WHERE name = ?", ("z",)) is None
    with pytest.raises(AssertionError, match="2 columns"):
        value(conn, "SELECT name, size FROM things")


_POSITIONAL = [
    re.compile(r"\brow\[\d"),  # row[5]
    re.compile(r"\br\[\d"),
    re.compile(r"fetchone\(\)\[\d"),  # ....fetchone()[0]
    re.compile(r"for \w+, \w+[\w, ]* in (?:conn|c|self\.conn)\.execute\("),  # unpacking rows
]


def test_no_store_code_reads_a_row_by_position() -> None:
    root = Path(store_package.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "rows.py":
            continue  # the helpers themselves
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "_Inserted(int(row[0])" in line:
                continue  # PostgreSQL's lastrowid: the one column it appends as RETURNING
            if any(pattern.search(line) for pattern in _POSITIONAL):
                found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    assert found == []


def test_postgresql_column_names_are_checked_too(postgres_url: str) -> None:
    import psycopg  # noqa: PLC0415

    from keepgoing._store.postgres.sql import PgConnection  # noqa: PLC0415

    with psycopg.connect(postgres_url, autocommit=True) as raw:
        conn = PgConnection(raw)
        assert one(conn, Pair, "SELECT 'a' AS name, 1 AS size") == Pair("a", 1)
        assert every(conn, Pair, "SELECT 'a' AS Name, COUNT(*) AS size") == [Pair("a", 1)]
        with pytest.raises(AssertionError, match=r"returns size, name"):
            one(conn, Pair, "SELECT 1 AS size, 'a' AS name")
        with pytest.raises(AssertionError, match=r"returns name, count"):
            one(conn, Pair, "SELECT 'a' AS name, COUNT(*)")
        with raw.pipeline() as pipeline:
            piped = PgConnection(raw, pipeline)
            assert one(piped, Pair, "SELECT 'b' AS name, 2 AS size") == Pair("b", 2)
