"""The volume reads stay linear and bounded: pages with a cursor, a diff that
parses each manifest once, and a diff that stops when its client goes away."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from keepgoing._server.app import create_app
from keepgoing._store.sql import volumes_core
from keepgoing._store.sqlite import SqliteStore
from keepgoing._store.volume_records import StagedCommit

from ._support import Stack
from .test_volumes_api import V, ok, seed

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp("volume-limits"))
    try:
        s.admin = s.token("root", "admin")
        s.start_server()
        yield s
    finally:
        s.cleanup()


@pytest.fixture
def admin(stack: Stack) -> Iterator[httpx.Client]:
    with stack.api(stack.admin) as client:
        yield client


def _many(n: int, tag: str) -> dict[str, bytes | None]:
    return {f"f/{i:04d}.txt": f"{tag} {i}\n".encode() for i in range(n)}


def test_a_diff_comes_in_pages_that_cover_every_path_once(
    stack: Stack, admin: httpx.Client
) -> None:
    first = _many(250, "one")
    second = {**_many(250, "two"), "f/0000.txt": None, "new/a.md": b"a\n"}
    name = seed(stack, first, second)
    pages, cursor = [], None
    while True:
        params: dict[str, Any] = {"a": 1, "b": 2, "limit": 100}
        if cursor is not None:
            params["cursor"] = cursor
        page = ok(admin.get(f"{V}/{name}/diff", params=params))
        pages.append(page)
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(pages) == 3
    changed = [p for page in pages for p in page["changed"]]
    assert changed == [f"f/{i:04d}.txt" for i in range(1, 250)]
    assert [p for page in pages for p in page["removed"]] == ["f/0000.txt"]
    assert [p for page in pages for p in page["added"]] == ["new/a.md"]
    unified = {k: v for page in pages for k, v in page["unified"].items()}
    assert set(unified) == {*changed, "f/0000.txt", "new/a.md"}
    assert "-one 7\n+two 7\n" in unified["f/0007.txt"]


def test_files_come_in_pages(stack: Stack, admin: httpx.Client) -> None:
    name = seed(stack, _many(30, "x"))
    first = ok(admin.get(f"{V}/{name}/files", params={"limit": 20}))
    assert len(first["files"]) == 20 and first["next_cursor"] == "f/0019.txt"
    rest = ok(admin.get(f"{V}/{name}/files", params={"limit": 20, "cursor": "f/0019.txt"}))
    assert [f["path"] for f in rest["files"]] == [f"f/{i:04d}.txt" for i in range(20, 30)]
    assert rest["next_cursor"] is None
    too_many = admin.get(f"{V}/{name}/files", params={"limit": 10_001})
    assert too_many.status_code == 400


def test_a_prefix_longer_than_any_path_lists_nothing(stack: Stack, admin: httpx.Client) -> None:
    name = seed(stack, {"a.md": b"a\n"})
    listed = ok(admin.get(f"{V}/{name}/files", params={"prefix": "é" * 1000}))
    assert listed["files"] == []
    missing = admin.get(f"{V}/{name}/files/{'é' * 1000}")
    assert missing.status_code == 404, missing.text


# -- in process: the work a diff does --------------------------------------------------------
class CountingStore(SqliteStore):
    """A real store (SQLite in memory) that counts file reads and can hold them up."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.reads = 0
        self.first_read = asyncio.Event()

    async def volume_read(self, volume: str, ref: str, version: int | None, path: str) -> bytes:
        self.reads += 1
        self.first_read.set()
        return await super().volume_read(volume, ref, version, path)


async def _seeded(files: int) -> CountingStore:
    store = CountingStore()
    await store.open()
    await store.volume_open("v", create=True, now=time.time())
    for tag in ("one", "two"):
        puts = tuple((f"f/{i:05d}.txt", f"{tag} {i}\n".encode()) for i in range(files))
        await store.volume_commit(StagedCommit("v", puts=puts), now=time.time())
    return store


async def _call(app: Any, path: str, receive: Any) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    path_only, _, query = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path_only,
        "raw_path": path_only.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8711")],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8711),
    }
    await app(scope, receive, send)
    return sent


async def test_a_diff_parses_each_manifest_once(monkeypatch: pytest.MonkeyPatch) -> None:
    store = await _seeded(500)
    parses = 0
    parse = volumes_core._parse_manifest

    def counted(txn: Any, row: Any) -> Any:
        nonlocal parses
        parses += 1
        return parse(txn, row)

    monkeypatch.setattr(volumes_core, "_parse_manifest", counted)
    volumes_core.clear_caches()
    app = create_app(store, auth=False, services=False)

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()  # the client stays
        raise AssertionError

    sent = await _call(app, "/api/v1/volumes/v/diff?a=1&b=2", receive)
    assert sent[0]["status"] == 200
    body = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
    assert len(body["changed"]) == 500 and store.reads == 1000
    assert parses <= 2  # one per version, whatever the number of files read


async def test_a_diff_stops_when_its_client_disconnects() -> None:
    store = await _seeded(1000)
    app = create_app(store, auth=False, services=False)
    messages = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await store.first_read.wait()  # the client leaves once the diff has begun
        return {"type": "http.disconnect"}

    sent = await _call(app, "/api/v1/volumes/v/diff?a=1&b=2&limit=1000", receive)
    assert sent[0]["status"] == 499
    assert 1 <= store.reads < 50  # out of 2,000 the whole page would read
    seen = store.reads
    for _ in range(100):  # the loop runs on; no read of the cancelled diff follows
        await asyncio.sleep(0)
    assert store.reads == seen
