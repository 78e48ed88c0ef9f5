"""A task's volume reads pin the versions it read: while its run is open, gc keeps
them, even a version another run wrote; tags keep a version too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from keepgoing import Client, Volume, task, workflow
from keepgoing._store.protocol import Store
from keepgoing._store.sqlite import SqliteStore
from keepgoing._volumes import access


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    backend: Store = SqliteStore(str(tmp_path / "kg.db"))
    yield backend
    access.call(backend, backend.close())


@task(name="pins.read_old_then_gc")
def read_old_then_gc() -> dict[str, object]:
    shared = Volume("shared")
    old = shared.at_version(1).read_text("notes.md")  # written before the run, by no run
    head = shared.read_text("notes.md")
    dropped = shared.gc()  # the run is open: what it read stays
    return {"old": old, "head": head, "dropped": [v for _, v in dropped.versions]}


@workflow(name="pins.reader")
async def reader() -> dict[str, object]:
    result: dict[str, object] = await read_old_then_gc()
    return result


def test_a_running_tasks_reads_are_pinned_until_its_run_ends(store: Store) -> None:
    shared = Volume("shared", store=store, keep_versions=1)
    for i in range(4):
        shared.put_file("notes.md", f"v{i + 1}")

    with Client(store=store) as client:
        result = client.run_workflow(reader, workflow_id="reader-1")

    assert result == {"old": "v1", "head": "v4", "dropped": [2, 3]}
    assert [v.id for v in shared.versions()] == [1, 4]
    assert [v for _, v in shared.gc().versions] == [1]  # the run ended: its pins keep nothing


def test_tags_name_versions_and_keep_them(store: Store) -> None:
    shared = Volume("shared", store=store, keep_versions=1)
    for i in range(3):
        shared.put_file("notes.md", f"v{i + 1}")

    assert shared.tag("golden", 1).id == 1
    assert shared.at_version(2).tag("second").id == 2
    assert shared.tag("head").id == 3
    assert shared.tags() == {"golden": 1, "head": 3, "second": 2}
    assert shared.gc().versions == ()
    assert shared.untag("second") and not shared.untag("second")
    assert [v for _, v in shared.gc().versions] == [2]
