"""The volume endpoints through real HTTP on a real server process.

Volumes are seeded straight in the store (as a worker's tasks would write
them); every endpoint is then read over HTTP: list, files, a file's bytes,
versions, diff and rollback, with the ``volumes.read`` / ``volumes.write``
permissions (403, and nothing changes), 404 for an unknown volume, ref,
version or file, and 400 for a bad name or path.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from keepgoing._store.protocol import Store
from keepgoing._store.volume_records import StagedCommit

from ._support import Stack, run_store
from .test_api import error

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

V = "/api/v1/volumes"
BINARY = bytes(range(256)) * 4 + b"\xff\xfe"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A server on a SQLite store (the volume routes need no worker)."""
    s = Stack(tmp_path_factory.mktemp("volumes"))
    try:
        s.admin = s.token("root", "admin")
        s.start_server()
        yield s
    finally:
        s.cleanup()


def seed(stack: Stack, *commits: dict[str, bytes | None], fork: str | None = None) -> str:
    """A new volume with one version per ``commits`` item (path -> content, None
    removes), and optionally ref ``fork`` forked from version 1. Returns its name."""
    name = f"vol-{uuid.uuid4().hex[:8]}"

    async def work(store: Store) -> None:
        await store.volume_open(name, create=True, now=time.time())
        for change in commits:
            puts = tuple((p, d) for p, d in change.items() if d is not None)
            removes = tuple(p for p, d in change.items() if d is None)
            staged = StagedCommit(name, puts=puts, removes=removes)
            await store.volume_commit(staged, now=time.time())
        if fork is not None:
            await store.volume_fork(name, "main", fork, 1, time.time())

    run_store(stack.store_url, work)
    return name


def standard(stack: Stack) -> str:
    """Version 1: notes.md, data/blob.bin (binary), data/sub/x.txt.
    Version 2: notes.md changed, data/sub/x.txt removed, new.md added. Ref ``exp`` at 1."""
    return seed(
        stack,
        {"notes.md": b"first\nline two\n", "data/blob.bin": BINARY, "data/sub/x.txt": b"x\n"},
        {"notes.md": b"second\nline two\n", "data/sub/x.txt": None, "new.md": b"new\n"},
        fork="exp",
    )


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


# -- list ---------------------------------------------------------------------------------
def test_list_volumes_with_their_refs(stack: Stack, admin: httpx.Client) -> None:
    name = standard(stack)
    empty = seed(stack)
    volumes = {v["name"]: v for v in ok(admin.get(V, params={"limit": 1000}))["volumes"]}
    assert volumes[name]["refs"] == [
        {"name": "main", "head": 2, "forked_from": None},
        {"name": "exp", "head": 1, "forked_from": "main"},
    ]
    assert volumes[empty]["refs"] == [{"name": "main", "head": None, "forked_from": None}]
    first = ok(admin.get(V, params={"limit": 1}))
    assert len(first["volumes"]) == 1 and first["next_offset"] == 1
    assert ok(admin.get(V, params={"limit": 1000}))["next_offset"] is None


# -- files --------------------------------------------------------------------------------
def test_list_files_at_head_version_ref_and_prefix(stack: Stack, admin: httpx.Client) -> None:
    name = standard(stack)
    head = ok(admin.get(f"{V}/{name}/files"))
    assert (head["volume"], head["ref"], head["version"]) == (name, "main", 2)
    assert [f["path"] for f in head["files"]] == ["data/blob.bin", "new.md", "notes.md"]
    blob = head["files"][0]
    assert blob["size"] == len(BINARY) and blob["hash"] == hashlib.sha256(BINARY).hexdigest()
    assert blob["is_dir"] is False

    old = ok(admin.get(f"{V}/{name}/files", params={"version": 1}))
    assert old["version"] == 1
    assert [f["path"] for f in old["files"]] == ["data/blob.bin", "data/sub/x.txt", "notes.md"]
    fork = ok(admin.get(f"{V}/{name}/files", params={"ref": "exp"}))
    assert fork["version"] == 1 and len(fork["files"]) == 3

    under = ok(admin.get(f"{V}/{name}/files", params={"prefix": "data", "version": 1}))
    assert [f["path"] for f in under["files"]] == ["data/blob.bin", "data/sub/x.txt"]
    shallow = ok(admin.get(f"{V}/{name}/files", params={"version": 1, "recursive": False}))
    assert [(f["path"], f["is_dir"]) for f in shallow["files"]] == [
        ("data/", True),
        ("notes.md", False),
    ]
    none_yet = ok(admin.get(f"{V}/{seed(stack)}/files"))
    assert (none_yet["version"], none_yet["files"]) == (None, [])


def test_read_a_file_as_bytes_or_text_with_its_hash_as_etag(
    stack: Stack, admin: httpx.Client
) -> None:
    name = standard(stack)
    response = admin.get(f"{V}/{name}/files/data/blob.bin")
    assert response.status_code == 200, response.text
    assert response.content == BINARY
    assert response.headers["content-type"] == "application/octet-stream"
    etag = f'"{hashlib.sha256(BINARY).hexdigest()}"'
    assert response.headers["etag"] == etag
    assert response.headers["x-volume-version"] == "2"

    again = admin.get(f"{V}/{name}/files/data/blob.bin", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag

    old = admin.get(f"{V}/{name}/files/notes.md", params={"version": 1, "format": "text"})
    assert old.status_code == 200, old.text
    assert old.text == "first\nline two\n"
    assert old.headers["content-type"].startswith("text/plain")
    assert old.headers["x-volume-version"] == "1"
    fork = admin.get(f"{V}/{name}/files/notes.md", params={"ref": "exp"})
    assert fork.content == b"first\nline two\n"
    assert admin.get(f"{V}/{name}/files/./notes.md").content == b"second\nline two\n"

    body = error(
        admin.get(f"{V}/{name}/files/data/blob.bin", params={"format": "text"}),
        400,
        "invalid_request",
    )
    assert "not UTF-8" in body["message"]


# -- versions and diff --------------------------------------------------------------------
def test_versions_oldest_first_with_limit_and_ref(stack: Stack, admin: httpx.Client) -> None:
    name = standard(stack)
    found = ok(admin.get(f"{V}/{name}/versions"))
    assert (found["volume"], found["ref"]) == (name, "main")
    first, second = found["versions"]
    assert (first["id"], first["parent_id"], second["id"], second["parent_id"]) == (1, None, 2, 1)
    assert second["paths"] == ["data/sub/x.txt", "new.md", "notes.md"]
    assert second["run_id"] is None and second["volume"] == name
    newest = ok(admin.get(f"{V}/{name}/versions", params={"limit": 1}))["versions"]
    assert [v["id"] for v in newest] == [2]
    assert ok(admin.get(f"{V}/{name}/versions", params={"ref": "exp"}))["versions"] == []


def test_diff_between_versions(stack: Stack, admin: httpx.Client) -> None:
    name = standard(stack)
    changes = ok(admin.get(f"{V}/{name}/diff", params={"a": 1, "b": 2}))
    assert (changes["a"], changes["b"]) == (1, 2)
    assert changes["added"] == ["new.md"]
    assert changes["removed"] == ["data/sub/x.txt"]
    assert changes["changed"] == ["notes.md"]
    assert "-first\n+second\n" in changes["unified"]["notes.md"]
    assert changes["unified"]["new.md"].startswith("--- /dev/null\n+++ b/new.md\n")

    assert ok(admin.get(f"{V}/{name}/diff", params={"a": 1})) == changes  # b: the head
    from_empty = ok(admin.get(f"{V}/{name}/diff", params={"a": 0, "b": 1}))
    assert from_empty["a"] is None
    assert from_empty["added"] == ["data/blob.bin", "data/sub/x.txt", "notes.md"]
    assert "data/blob.bin" not in from_empty["unified"]  # binary: listed, no text diff
    same = ok(admin.get(f"{V}/{name}/diff", params={"a": 2, "b": 2}))
    assert (same["added"], same["removed"], same["changed"]) == ([], [], [])


# -- rollback -----------------------------------------------------------------------------
def test_rollback_then_read_at_the_old_and_new_versions(stack: Stack) -> None:
    name = standard(stack)
    writer = stack.token("vera", "volumes.write", "volumes.read")
    with stack.api(writer) as client:
        made = ok(client.post(f"{V}/{name}/rollback", json={"version": 1}), 201)
        assert (made["id"], made["parent_id"], made["ref"]) == (3, 2, "main")
        assert made["message"] == "rollback to version 1"
        assert made["paths"] == ["data/sub/x.txt", "new.md", "notes.md"]

        def read(path: str, **params: Any) -> httpx.Response:
            return client.get(f"{V}/{name}/files/{path}", params=params)

        assert read("notes.md").content == b"first\nline two\n"  # the head: version 3
        assert read("notes.md").headers["x-volume-version"] == "3"
        assert read("notes.md", version=2).content == b"second\nline two\n"  # kept
        assert read("notes.md", version=1).content == b"first\nline two\n"
        assert read("data/sub/x.txt").content == b"x\n"
        error(read("new.md"), 404, "volume_file_not_found")
        assert read("new.md", version=2).content == b"new\n"
        versions = ok(client.get(f"{V}/{name}/versions"))["versions"]
        assert [v["id"] for v in versions] == [1, 2, 3]
        assert ok(client.get(f"{V}/{name}/diff", params={"a": 1, "b": 3}))["changed"] == []

        fork = ok(client.post(f"{V}/{name}/rollback", json={"version": 2, "ref": "exp"}), 201)
        assert (fork["id"], fork["parent_id"], fork["ref"]) == (4, 1, "exp")
        assert read("new.md", ref="exp").content == b"new\n"

    with stack.api(stack.admin) as admin:
        audit = ok(admin.get("/api/v1/audit", params={"action": "volume.rollback"}))["entries"]
    mine = [e for e in audit if e["detail"]["volume"] == name]
    assert [(e["actor_kind"], e["actor_id"]) for e in mine] == [("user", "vera")] * 2
    assert mine[-1]["detail"] == {"volume": name, "ref": "main", "version": 1, "new_version": 3}


@pytest.mark.parametrize(
    "body",
    [{}, {"version": "1"}, {"version": 0}, {"version": 1.5}, {"version": True}, {"ref": "main"}],
)
def test_a_bad_rollback_body_is_400(stack: Stack, admin: httpx.Client, body: Any) -> None:
    name = standard(stack)
    error(admin.post(f"{V}/{name}/rollback", json=body), 400, "invalid_request")
    assert len(ok(admin.get(f"{V}/{name}/versions"))["versions"]) == 2


# -- 403 ----------------------------------------------------------------------------------
def test_reads_need_volumes_read(stack: Stack) -> None:
    name = standard(stack)
    for permissions in (("runs.read",), ("volumes.write",)):
        with stack.api(stack.token("no-reader", *permissions)) as client:
            for path in (
                V,
                f"{V}/{name}/files",
                f"{V}/{name}/files/notes.md",
                f"{V}/{name}/versions",
                f"{V}/{name}/diff?a=1",
            ):
                body = error(client.get(path), 403, "permission_denied")
                assert body["details"] == {"permission": "volumes.read"}
    with stack.api(stack.token("reader", "volumes.read")) as client:
        assert client.get(f"{V}/{name}/files/notes.md").content == b"second\nline two\n"


def test_rollback_needs_volumes_write_and_then_nothing_changes(
    stack: Stack, admin: httpx.Client
) -> None:
    name = standard(stack)
    with stack.api(stack.token("reader", "volumes.read", "runs.read")) as client:
        body = error(
            client.post(f"{V}/{name}/rollback", json={"version": 1}), 403, "permission_denied"
        )
    assert body["details"] == {"permission": "volumes.write"}
    assert [v["id"] for v in ok(admin.get(f"{V}/{name}/versions"))["versions"]] == [1, 2]
    assert admin.get(f"{V}/{name}/files/notes.md").content == b"second\nline two\n"
    audit = ok(admin.get("/api/v1/audit", params={"action": "volume.rollback"}))["entries"]
    assert not [e for e in audit if e["detail"].get("volume") == name]


# -- 404 ----------------------------------------------------------------------------------
def test_unknown_volume_ref_version_or_file_is_404(stack: Stack, admin: httpx.Client) -> None:
    name = standard(stack)
    missing = f"{V}/no-such-volume"
    for response in (
        admin.get(f"{missing}/files"),
        admin.get(f"{missing}/files/notes.md"),
        admin.get(f"{missing}/versions"),
        admin.get(f"{missing}/diff", params={"a": 1}),
        admin.post(f"{missing}/rollback", json={"version": 1}),
    ):
        body = error(response, 404, "volume_not_found")
        assert "no volume named 'no-such-volume'" in body["message"]
    for response in (
        admin.get(f"{V}/{name}/files", params={"ref": "nope"}),
        admin.get(f"{V}/{name}/files/notes.md", params={"ref": "nope"}),
        admin.get(f"{V}/{name}/versions", params={"ref": "nope"}),
        admin.get(f"{V}/{name}/diff", params={"a": 1, "ref": "nope"}),
        admin.post(f"{V}/{name}/rollback", json={"version": 1, "ref": "nope"}),
    ):
        assert "no ref named 'nope'" in error(response, 404, "volume_not_found")["message"]
    for response in (
        admin.get(f"{V}/{name}/files", params={"version": 99}),
        admin.get(f"{V}/{name}/files/notes.md", params={"version": 99}),
        admin.get(f"{V}/{name}/diff", params={"a": 1, "b": 99}),
        admin.post(f"{V}/{name}/rollback", json={"version": 99}),
    ):
        assert "no version 99" in error(response, 404, "volume_not_found")["message"]
    error(admin.get(f"{V}/{name}/files/nothing.md"), 404, "volume_file_not_found")
    error(admin.get(f"{V}/{seed(stack)}/files/a.md"), 404, "volume_file_not_found")
    assert [v["id"] for v in ok(admin.get(f"{V}/{name}/versions"))["versions"]] == [1, 2]


# -- 400 ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("%2E%2E/etc/passwd", "contains '..'"),
        ("notes/%2E%2E/%2E%2E/x", "contains '..'"),
        ("/etc/passwd", "is absolute"),
        ("a%00b", "contains a NUL byte"),
        ("a%01b", "contains a control character"),
        ("a%0Ab", "contains a control character"),  # the router once answered 404
        ("notes.md%0A", "contains a control character"),
        ("%0A", "contains a control character"),
        ("", "names no file"),
    ],
)
def test_a_bad_path_is_400_with_the_volume_error(
    stack: Stack, admin: httpx.Client, path: str, problem: str
) -> None:
    name = standard(stack)
    # Built as raw bytes so the client cannot resolve the dot segments itself.
    url = httpx.URL(stack.url).copy_with(raw_path=f"{V}/{name}/files/{path}".encode())
    body = error(admin.get(url), 400, "volume_error")
    assert problem in body["message"]


@pytest.mark.parametrize(
    ("url", "params"),
    [
        ("/files", {"prefix": "../up"}),
        ("/files", {"prefix": "/abs"}),
        ("/files", {"ref": "bad ref"}),
        ("/versions", {"ref": "-x"}),
        ("/diff", {"a": 1, "ref": "a/b"}),
    ],
)
def test_a_bad_prefix_or_ref_is_400(
    stack: Stack, admin: httpx.Client, url: str, params: dict[str, Any]
) -> None:
    name = standard(stack)
    error(admin.get(f"{V}/{name}{url}", params=params), 400, "volume_error")


def test_a_bad_volume_name_is_400(admin: httpx.Client) -> None:
    body = error(admin.get(f"{V}/bad@name/versions"), 400, "volume_error")
    assert "volume name 'bad@name' is not valid" in body["message"]


@pytest.mark.parametrize(
    ("url", "params"),
    [
        ("/files", {"version": 0}),
        ("/files", {"version": 2**63}),
        ("/files/notes.md", {"format": "json"}),
        ("/versions", {"limit": 0}),
        ("/diff", {}),
        ("/diff", {"a": -1}),
        ("/files", {"verison": 1}),
    ],
)
def test_bad_query_parameters_are_400(
    stack: Stack, admin: httpx.Client, url: str, params: dict[str, Any]
) -> None:
    name = standard(stack)
    error(admin.get(f"{V}/{name}{url}", params=params), 400, "invalid_request")
