"""Stores in memory are SQLite: ``memory://`` and ``sqlite://`` name the same thing, and
each in-memory store is a fresh, fully migrated database of its own."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from keepgoing._open_store import store_from_url
from keepgoing._store.records import StartRequest
from keepgoing._store.sqlite import SqliteStore

SCHEMA = "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name"


@pytest.mark.parametrize("url", ["memory://", "sqlite://", "sqlite:///:memory:"])
def test_every_in_memory_spelling_is_sqlite_in_memory(url: str) -> None:
    store = store_from_url(url)
    assert isinstance(store, SqliteStore)
    assert (store.path, store.url) == (":memory:", url)


async def test_in_memory_stores_share_nothing_and_have_the_whole_schema(tmp_path: Path) -> None:
    file_store = SqliteStore(str(tmp_path / "kg.db"))
    await file_store.open()
    await file_store.close()
    with sqlite3.connect(tmp_path / "kg.db") as conn:
        expected = conn.execute(SCHEMA).fetchall()
        expected_versions = conn.execute("SELECT version FROM keepgoing_schema").fetchall()
    first, second = store_from_url("memory://"), store_from_url("memory://")
    await first.open()
    await second.open()
    try:
        for store in (first, second):
            assert isinstance(store, SqliteStore)
            assert await store._read(lambda c: c.execute(SCHEMA).fetchall()) == expected
            versions = await store._read(
                lambda c: c.execute("SELECT version FROM keepgoing_schema").fetchall()
            )
            assert versions == expected_versions
            foreign_keys = await store._read(lambda c: c.execute("PRAGMA foreign_keys").fetchone())
            assert foreign_keys == (1,)
        await first.start_run(StartRequest("r1", "w1", "wf", {}, "default", "", 1.0))
        assert (await first.get_run("r1")) is not None
        assert await second.get_run("r1") is None
    finally:
        await first.close()
        await second.close()
    third = store_from_url("memory://")
    await third.open()
    try:
        assert await third.get_run("r1") is None  # a closed store's runs are gone
    finally:
        await third.close()
