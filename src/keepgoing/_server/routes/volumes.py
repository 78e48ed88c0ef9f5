"""Versioned volumes: list, read, versions, diff and rollback.

The server already holds an open, asynchronous store, so these routes await
its volume facet (:class:`~keepgoing._store.volumes_protocol.VolumeStore`)
directly rather than going through the synchronous :class:`~keepgoing.Volume`
facade (which runs the store on a private loop of its own, and would block
this one while it waits). The rules stay in one place: names and paths are
checked by :mod:`keepgoing._volumes.paths`, listings and diffs are built by
:mod:`keepgoing._volumes.diff`, and every store rule lives in
:mod:`keepgoing._store.sql.volumes_core`. A diff's content comparison runs on a
thread, fetching content back through this loop.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Request, Response

from keepgoing._server.auth import ReadsVolumes, WritesVolumes
from keepgoing._server.context import context
from keepgoing._server.errors import ApiError
from keepgoing._server.routes._common import PREFIX, STRICT, documented
from keepgoing._server.schemas import (
    MAX_VERSION,
    FileList,
    FileView,
    RefView,
    RollbackBody,
    VersionList,
    VersionView,
    VolumeDiffView,
    VolumeList,
    VolumeView,
)
from keepgoing._store.chunking import digest
from keepgoing._store.protocol import Store
from keepgoing._store.records import AuditEntry
from keepgoing._store.volume_records import FileInfo, StagedCommit, VersionInfo
from keepgoing._volumes import diff
from keepgoing._volumes.paths import (
    MAX_PATH_BYTES,
    NAME_PATTERN,
    PATH_PATTERN,
    PREFIX_PATTERN,
    check_name,
    folder_prefix,
    normalise_path,
)

__all__ = ["router"]

router = APIRouter(prefix=PREFIX, tags=["volumes"], dependencies=STRICT)

#: Content larger than this is hashed on a thread rather than on the event loop.
_HASH_INLINE = 256 * 1024
#: The most paths one page of a listing or a diff holds.
MAX_PAGE = 10_000
#: A diff page reads at most this much file content for its unified diffs; when
#: it is spent the page ends early, and `next_cursor` continues from there.
DIFF_READ_BUDGET = 16 * 1024 * 1024

# The patterns are the volume rules' own (keepgoing._volumes.paths), in the spec
# only: the rules check them, so a bad name still gets their 400 `volume_error`.
VolumeName = Annotated[
    str, Path(description="The volume's name.", json_schema_extra={"pattern": NAME_PATTERN})
]
RefQuery = Annotated[
    str,
    Query(description="The ref (line of versions).", json_schema_extra={"pattern": NAME_PATTERN}),
]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE, description="At most this many paths.")]
Cursor = Annotated[
    str | None,
    Query(
        max_length=MAX_PATH_BYTES,
        description="Only paths after this one: the `next_cursor` of the previous page.",
    ),
]
VersionQuery = Annotated[
    int | None,
    Query(ge=1, le=MAX_VERSION, description="A version id (default: the ref's newest)."),
]

_FILE_CONTENT = {
    "description": "The file's bytes; its SHA-256 is the `ETag`.",
    "content": {
        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
        "text/plain": {"schema": {"type": "string"}},
    },
    "headers": {
        "ETag": {"description": "The content's SHA-256, quoted.", "schema": {"type": "string"}},
        "X-Volume-Version": {
            "description": "The version read (absent when the ref has none yet).",
            "schema": {"type": "string"},
        },
    },
}


@router.get("/volumes", response_model=VolumeList, responses=documented(), summary="List volumes")
async def list_volumes(
    request: Request,
    _: ReadsVolumes,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
) -> VolumeList:
    """Every volume, by name, with its refs and each ref's newest version."""
    store = context(request).store
    names = await store.volume_list()
    page = names[offset : offset + limit]
    volumes = [VolumeView(name=name, refs=await _refs(store, name)) for name in page]
    more = len(names) > offset + limit
    return VolumeList(volumes=volumes, next_offset=offset + limit if more else None)


async def _refs(store: Store, volume: str) -> list[RefView]:
    """``main``, then the refs forked from it, breadth first: every ref is forked
    from one that exists, so this reaches them all."""
    found: list[RefView] = []
    todo: list[tuple[str, str | None]] = [("main", None)]
    seen = {"main"}
    while todo:
        ref, parent = todo.pop(0)
        head = await store.volume_version(volume, ref, None)
        found.append(RefView(name=ref, head=head.id if head else None, forked_from=parent))
        for child in await store.volume_forks(volume, ref):
            if child not in seen:
                seen.add(child)
                todo.append((child, ref))
    return found


@router.get(
    "/volumes/{name}/files",
    response_model=FileList,
    responses=documented(404),
    summary="List a volume's files",
)
async def list_files(
    name: VolumeName,
    request: Request,
    _: ReadsVolumes,
    prefix: Annotated[
        str,
        Query(
            max_length=MAX_PATH_BYTES,
            description="Only under this folder.",
            json_schema_extra={"pattern": PREFIX_PATTERN},
        ),
    ] = "",
    version: VersionQuery = None,
    ref: RefQuery = "main",
    recursive: Annotated[
        bool, Query(description="Descend into folders; else each sub-folder shows once, as `x/`.")
    ] = True,
    limit: Limit = 1000,
    cursor: Cursor = None,
) -> FileList:
    """The files of a version (default: the ref's newest), sorted by path, `limit`
    at a time: pass `next_cursor` as `cursor` for the next page."""
    store = context(request).store
    name, ref, folder = (
        check_name(name, "volume name"),
        check_name(ref, "ref"),
        folder_prefix(prefix, check_length=False),  # a longer one just lists nothing
    )
    at = await store.volume_version(name, ref, version)
    files = await store.volume_files(name, ref, at.id) if at is not None else []
    entries = diff.listing(files, folder, recursive)
    start = bisect.bisect_right(entries, cursor, key=lambda f: f.path) if cursor else 0
    page = entries[start : start + limit]
    more = start + limit < len(entries)
    return FileList(
        volume=name,
        ref=ref,
        version=at.id if at is not None else None,
        files=[FileView.of(f) for f in page],
        next_cursor=page[-1].path if more and page else None,
    )


@router.get(
    "/volumes/{name}/files/{path:volpath}",
    response_class=Response,
    responses={
        **documented(404, ok=_FILE_CONTENT),
        304: {"description": "The content still matches the `If-None-Match` ETag."},
    },
    summary="Read a file",
)
async def read_file(
    name: VolumeName,
    path: Annotated[
        str,
        Path(
            description="The file's path in the volume.",
            json_schema_extra={"pattern": PATH_PATTERN},
        ),
    ],
    request: Request,
    _: ReadsVolumes,
    version: VersionQuery = None,
    ref: RefQuery = "main",
    format: Annotated[
        Literal["bytes", "text"],
        Query(description="`text`: the content as UTF-8 `text/plain` (400 if it is not)."),
    ] = "bytes",
) -> Response:
    """A file's content at a version (default: the ref's newest), byte for byte,
    with its SHA-256 as `ETag` (`If-None-Match` gets a 304)."""
    store = context(request).store
    name, ref = check_name(name, "volume name"), check_name(ref, "ref")
    path = normalise_path(path, check_length=False)  # a longer one is just not found
    at = await store.volume_version(name, ref, version)
    data = await store.volume_read(name, ref, at.id if at is not None else None, path)
    hashed = await asyncio.to_thread(digest, data) if len(data) > _HASH_INLINE else digest(data)
    headers = {"ETag": f'"{hashed}"'}
    if at is not None:
        headers["X-Volume-Version"] = str(at.id)
    if _matches(request.headers.get("if-none-match"), hashed):
        return Response(status_code=304, headers=headers)
    if format == "bytes":
        return Response(data, media_type="application/octet-stream", headers=headers)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(
            400,
            "invalid_request",
            f"{path!r} in volume {name!r} is not UTF-8 text; read it without format=text",
        ) from None
    return Response(text, media_type="text/plain; charset=utf-8", headers=headers)


def _matches(header: str | None, hashed: str) -> bool:
    if header is None:
        return False
    tags = {tag.strip().removeprefix("W/").strip('"') for tag in header.split(",")}
    return "*" in tags or hashed in tags


@router.get(
    "/volumes/{name}/versions",
    response_model=VersionList,
    responses=documented(404),
    summary="A volume's versions",
)
async def list_versions(
    name: VolumeName,
    request: Request,
    _: ReadsVolumes,
    ref: RefQuery = "main",
    limit: Annotated[int, Query(ge=1, le=1000, description="The newest this many.")] = 100,
) -> VersionList:
    """The newest `limit` versions committed on the ref, oldest first, each with the
    run, step and attempt that made it."""
    store = context(request).store
    name, ref = check_name(name, "volume name"), check_name(ref, "ref")
    found = await store.volume_versions(name, ref, limit)
    return VersionList(volume=name, ref=ref, versions=[VersionView.of(v) for v in found])


@router.get(
    "/volumes/{name}/diff",
    response_model=VolumeDiffView,
    responses=documented(404),
    summary="Compare two versions",
)
async def diff_versions(
    name: VolumeName,
    request: Request,
    _: ReadsVolumes,
    a: Annotated[
        int, Query(ge=0, le=MAX_VERSION, description="The older version (0: the empty volume).")
    ],
    b: Annotated[
        int | None,
        Query(
            ge=0,
            le=MAX_VERSION,
            description="The newer version (0: the empty volume; default: the ref's newest).",
        ),
    ] = None,
    ref: RefQuery = "main",
    limit: Limit = 1000,
    cursor: Cursor = None,
) -> Response | VolumeDiffView:
    """The paths added, removed and changed from version `a` to version `b`, with a
    unified diff for each text file, `limit` paths at a time in path order (a page
    also ends once it has read 16 MiB of content): pass `next_cursor` as `cursor`
    for the next page. The work stops when the client disconnects."""
    store = context(request).store
    name, ref = check_name(name, "volume name"), check_name(ref, "ref")
    head = await store.volume_version(name, ref, None)  # the volume and the ref exist
    first = a or None
    second = (head.id if head is not None else None) if b is None else (b or None)
    work = asyncio.ensure_future(_diff_page(store, name, ref, (first, second), (limit, cursor)))
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not work.done():
            work.cancel()  # the client went away: stop reading and diffing
            with contextlib.suppress(asyncio.CancelledError):
                await work
    if work.cancelled():
        return Response(status_code=499)  # nginx's "client closed request"; nobody reads it
    return work.result()


async def _disconnected(request: Request) -> None:
    """Returns when the client disconnects (the request has no body left to read)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _diff_page(
    store: Store,
    name: str,
    ref: str,
    versions: tuple[int | None, int | None],
    page: tuple[int, str | None],
) -> VolumeDiffView:
    first, second = versions
    limit, cursor = page
    before = {f.path: f for f in await _files_at(store, name, ref, first)}
    after = {f.path: f for f in await _files_at(store, name, ref, second)}
    added, removed, changed = diff.changes(before, after)
    paths = sorted((*added, *removed, *changed))
    start = bisect.bisect_right(paths, cursor) if cursor else 0
    taken: list[str] = []
    unified: dict[str, str] = {}
    budget = DIFF_READ_BUDGET
    for path in paths[start : start + limit]:
        old, new = before.get(path), after.get(path)
        cost = (old.size if old else 0) + (new.size if new else 0)
        if taken and cost > budget:
            break
        budget -= cost
        taken.append(path)
        await asyncio.sleep(0)  # a turn for the disconnect watch, whatever the store does
        found = await _unified(store, name, ref, versions, path, (old, new))
        if found is not None:
            unified[path] = found
    more = start + len(taken) < len(paths)
    kept = set(taken)
    return VolumeDiffView(
        volume=name,
        a=first,
        b=second,
        added=[p for p in added if p in kept],
        removed=[p for p in removed if p in kept],
        changed=[p for p in changed if p in kept],
        unified=unified,
        next_cursor=taken[-1] if more and taken else None,
    )


async def _unified(
    store: Store,
    name: str,
    ref: str,
    versions: tuple[int | None, int | None],
    path: str,
    sides: tuple[FileInfo | None, FileInfo | None],
) -> str | None:
    """The unified diff of one path, or None when a side is binary or too large."""
    texts: list[str] = []
    for version, f in zip(versions, sides, strict=True):
        if f is None:
            texts.append("")
            continue
        if f.size > diff.TEXT_LIMIT:
            return None
        text = diff.text_of(await store.volume_read(name, ref, version, path))
        if text is None:
            return None
        texts.append(text)
    left, right = texts
    small = len(left) + len(right) <= _HASH_INLINE
    args = (path, left, right, sides[0] is not None, sides[1] is not None)
    return diff.unified(*args) if small else await asyncio.to_thread(diff.unified, *args)


async def _files_at(store: Store, name: str, ref: str, version: int | None) -> list[FileInfo]:
    return [] if version is None else await store.volume_files(name, ref, version)


@router.post(
    "/volumes/{name}/rollback",
    status_code=201,
    response_model=VersionView,
    responses=documented(404, reads=False),
    summary="Roll a ref back to a version",
)
async def rollback(
    name: VolumeName, body: RollbackBody, request: Request, principal: WritesVolumes
) -> VersionView:
    """Make a new version on the ref whose content equals `version`. Nothing is
    deleted: the versions after it stay, and the rollback is in the audit log."""
    ctx = context(request)
    name, ref = check_name(name, "volume name"), check_name(body.ref, "ref")
    made = await ctx.store.volume_commit(
        StagedCommit(name, ref, restore=body.version), now=ctx.clock.now()
    )
    if made is None:  # a restore always makes a version; a store that disagrees is a bug
        raise RuntimeError(f"the store made no version rolling {name!r} back")
    await _audit(ctx.store, ctx.clock.now(), principal.kind, principal.id, made, body.version)
    return VersionView.of(made)


async def _audit(
    store: Store, now: float, actor_kind: str, actor_id: str, made: VersionInfo, restored: int
) -> None:
    await store.append_audit(
        AuditEntry(
            at=now,
            actor_kind=actor_kind,
            actor_id=actor_id,
            action="volume.rollback",
            detail={
                "volume": made.volume,
                "ref": made.ref,
                "version": restored,
                "new_version": made.id,
            },
        )
    )
