"""The rules of volumes, written once over a small transaction interface.

Each store runs these functions inside one of its own transactions (SQLite
inside ``BEGIN IMMEDIATE``, PostgreSQL in its own) through a
:class:`VolumeTxn`, which only stores rows and objects. So the backends
share every rule, and a dialect holds only how it stores things.

Objects are addressed by the SHA-256 of their plain bytes. Content is
split into content-defined chunks (:mod:`keepgoing._store.chunking`), one
object each. A version's **manifest** is compact JSON, sorted by path, of
``[path, hash, size, updated_at, [chunk, length, chunk, length, ...]]``; it
is stored like a file: one object when it is one chunk, else its chunks and
a **chunk list** object (``KGL1`` then, per chunk, its 32-byte digest and its
4-byte big-endian length), so a large manifest changes by a chunk, too.

Each new object is offered a *base*: the object at the same place in the
parent version (the old chunk at the same offset, the old chunk list). A
backend may store the object as a delta against it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from keepgoing._history.events import MemoryCommitted
from keepgoing._payload import dumps, loads
from keepgoing._store.chunking import digest, split
from keepgoing._store.content_cache import ContentCache
from keepgoing._store.volume_records import CommitOrigin, FileInfo, StagedCommit, VersionInfo
from keepgoing.errors import (
    StoreError,
    VolumeError,
    VolumeFileNotFoundError,
    VolumeNotFoundError,
)

__all__ = [
    "MAX_COMMIT_TRIES",
    "FileEntry",
    "RefRow",
    "VersionRow",
    "VolumeTxn",
    "clear_caches",
    "commit",
    "commit_task",
    "files",
    "fork",
    "forks",
    "open_volume",
    "read",
    "version_at",
    "version_objects",
    "versions",
]

MAX_COMMIT_TRIES = 100
_LIST_MAGIC = b"KGL1"
_LIST_ITEM = 36


Chunks = tuple[tuple[str, int], ...]  # (key, length) in file order


class FileEntry(NamedTuple):
    """A path's content in one manifest: its hash, size, time and chunks.

    A named tuple rather than a frozen dataclass: a manifest of 10,000 files
    makes 10,000 of them per parse, and a tuple is several times cheaper to make.
    """

    hash: str
    size: int
    updated_at: float
    #: ``(key, length, key, length, ...)``, as the manifest stores it: pairing
    #: them up at parse time cost more than the rest of the parse.
    flat: tuple[str | int, ...] = ()

    @property
    def chunks(self) -> Chunks:
        keys, lengths = self.flat[::2], self.flat[1::2]
        return tuple((str(k), int(n)) for k, n in zip(keys, lengths, strict=True))


Manifest = dict[str, FileEntry]


class RefRow(NamedTuple):
    """A ``volume_refs`` row; its fields are the table's columns."""

    volume: str
    name: str
    head: int | None
    base_ref: str | None
    base_version: int | None
    created_at: float


@dataclass(frozen=True)
class VersionRow:
    """A version and its manifest: the manifest object, or with ``chunked`` the
    key of the chunk list of a manifest of several chunks."""

    info: VersionInfo
    manifest: str
    chunked: bool = False


class VolumeTxn(Protocol):
    """Rows and objects inside one transaction of a backend."""

    def volume_exists(self, name: str) -> bool: ...

    def insert_volume(self, name: str, now: float) -> None: ...

    def volume_names(self) -> list[str]: ...

    def get_ref(self, volume: str, name: str) -> RefRow | None: ...

    def insert_ref(self, ref: RefRow) -> None: ...

    def swap_head(self, volume: str, ref: str, expected: int | None, new: int) -> bool:
        """Compare-and-set: move ``ref`` to ``new`` only if its head is ``expected``."""
        ...

    def refs(self, volume: str) -> list[RefRow]: ...

    def next_version_id(self, volume: str) -> int:
        """Allocate the volume's next version number."""
        ...

    def insert_version(self, row: VersionRow) -> None: ...

    def get_version(self, volume: str, version: int) -> VersionRow | None: ...

    def versions(self, volume: str, ref: str, limit: int) -> list[VersionRow]:
        """The newest ``limit`` versions committed on ``ref``, oldest first."""
        ...

    def get_object(self, key: str) -> bytes | None:
        """The plain bytes of object ``key``, or None."""
        ...

    def has_object(self, key: str) -> bool: ...

    def put_object(self, key: str, plain: bytes, base: str | None) -> None:
        """Store an object that :meth:`has_object` said is missing."""
        ...


# -- volumes and refs -----------------------------------------------------------------------
def open_volume(txn: VolumeTxn, name: str, create: bool, now: float) -> bool:
    if txn.volume_exists(name):
        return False
    if not create:
        raise VolumeNotFoundError(f"there is no volume named {name!r}")
    txn.insert_volume(name, now)
    txn.insert_ref(RefRow(name, "main", None, None, None, now))
    return True


def fork(
    txn: VolumeTxn, volume: str, ref: str, new_ref: str, version: int | None, now: float
) -> None:
    source = _ref(txn, volume, ref)
    _create_ref(txn, volume, ref, new_ref, source.head if version is None else version, now)


def _create_ref(
    txn: VolumeTxn, volume: str, source: str, new_ref: str, at: int | None, now: float
) -> None:
    """Create ``new_ref`` forked from ``source`` with head ``at`` (None: no version yet)."""
    _ref(txn, volume, source)
    if txn.get_ref(volume, new_ref) is not None:
        raise VolumeError(f"volume {volume!r} already has a ref named {new_ref!r}")
    if at is not None:
        _version(txn, volume, at)
    txn.insert_ref(RefRow(volume, new_ref, at, source, at, now))


def forks(txn: VolumeTxn, volume: str, ref: str) -> list[str]:
    _ref(txn, volume, ref)
    return sorted(r.name for r in txn.refs(volume) if r.base_ref == ref)


def _ref(txn: VolumeTxn, volume: str, ref: str) -> RefRow:
    row = txn.get_ref(volume, ref)
    if row is not None:
        return row
    if not txn.volume_exists(volume):
        raise VolumeNotFoundError(f"there is no volume named {volume!r}")
    raise VolumeNotFoundError(f"volume {volume!r} has no ref named {ref!r}")


def _version(txn: VolumeTxn, volume: str, version: int) -> VersionRow:
    row = txn.get_version(volume, version)
    if row is not None:
        return row
    if not txn.volume_exists(volume):
        raise VolumeNotFoundError(f"there is no volume named {volume!r}")
    raise VolumeNotFoundError(f"volume {volume!r} has no version {version}")


def _selected(txn: VolumeTxn, volume: str, ref: str, version: int | None) -> VersionRow | None:
    if version is not None:
        return _version(txn, volume, version)
    head = _ref(txn, volume, ref).head
    return None if head is None else _version(txn, volume, head)


# -- reading ---------------------------------------------------------------------------------
def version_at(txn: VolumeTxn, volume: str, ref: str, version: int | None) -> VersionInfo | None:
    row = _selected(txn, volume, ref, version)
    return None if row is None else row.info


def versions(txn: VolumeTxn, volume: str, ref: str, limit: int) -> list[VersionInfo]:
    _ref(txn, volume, ref)
    return [row.info for row in txn.versions(volume, ref, max(0, limit))]


def files(txn: VolumeTxn, volume: str, ref: str, version: int | None) -> list[FileInfo]:
    row = _selected(txn, volume, ref, version)
    if row is None:
        return []
    cached = _LISTINGS.get(row.manifest)
    if cached is None:
        manifest = _manifest(txn, row)
        cached = [FileInfo(p, *_info(manifest[p])) for p in sorted(manifest)]
        _LISTINGS.put(row.manifest, cached)
    return list(cached)  # a copy: the caller may change its list


def _info(e: FileEntry) -> tuple[int, float, str]:
    return e.size, e.updated_at, e.hash


def read(txn: VolumeTxn, volume: str, ref: str, version: int | None, path: str) -> bytes:
    row = _selected(txn, volume, ref, version)
    entry = _manifest(txn, row).get(path)
    if entry is None:
        at = "it has no version yet" if row is None else f"at version {row.info.id}"
        raise VolumeFileNotFoundError(f"volume {volume!r} has no file {path!r} ({ref}, {at})")
    data = b"".join(_object(txn, key) for key, _ in entry.chunks)
    if hashlib.sha256(data).hexdigest() != entry.hash:
        raise StoreError(
            f"volume {volume!r}: {path!r} does not match its hash; the store is damaged"
        )
    return data


def _object(txn: VolumeTxn, key: str) -> bytes:
    data = txn.get_object(key)
    if data is None:
        raise StoreError(f"volume object {key} is missing; the store is damaged")
    return data


#: Parsed manifests (or their listings) by manifest key: without it each file read
#: parsed the whole manifest again, and a diff that read every file was quadratic.
_MANIFESTS: ContentCache[Manifest] = ContentCache(400_000)
_LISTINGS: ContentCache[list[FileInfo]] = ContentCache(400_000)


def clear_caches() -> None:
    """Forget every parsed manifest (for measurements of a cold read)."""
    _MANIFESTS.clear()
    _LISTINGS.clear()


def _manifest(txn: VolumeTxn, row: VersionRow | None) -> Manifest:
    if row is None:
        return {}
    cached = _MANIFESTS.get(row.manifest)
    if cached is not None:
        return cached
    manifest = _parse_manifest(txn, row)
    _MANIFESTS.put(row.manifest, manifest)
    return manifest


def _parse_manifest(txn: VolumeTxn, row: VersionRow) -> Manifest:
    if row.chunked:
        plain = b"".join(_object(txn, key) for key, _ in _chunk_list(txn, row.manifest))
    else:
        plain = _object(txn, row.manifest)
    return {
        path: FileEntry(hash_, size, updated_at, tuple(flat))
        for path, hash_, size, updated_at, flat in loads(plain)["files"]
    }


def _manifest_chunks(txn: VolumeTxn, row: VersionRow | None) -> Chunks:
    if row is None:
        return ()
    if row.chunked:
        return _chunk_list(txn, row.manifest)
    return ((row.manifest, 0),)


def version_objects(txn: VolumeTxn, row: VersionRow) -> set[str]:
    """Every object a version reads: its manifest (or chunk list and chunks)
    and each file's chunks; retention keeps these."""
    keys = {key for key, _ in _manifest_chunks(txn, row)}
    keys.add(row.manifest)
    for entry in _parse_manifest(txn, row).values():
        keys.update(str(k) for k in entry.flat[0::2])
    return keys


def _chunk_list(txn: VolumeTxn, key: str) -> Chunks:
    plain = _object(txn, key)
    if not plain.startswith(_LIST_MAGIC):
        raise StoreError(f"volume object {key} is not a chunk list; the store is damaged")
    body = memoryview(plain)[len(_LIST_MAGIC) :]
    return tuple(
        (body[i : i + 32].hex(), int.from_bytes(body[i + 32 : i + _LIST_ITEM], "big"))
        for i in range(0, len(body), _LIST_ITEM)
    )


# -- writing ---------------------------------------------------------------------------------
def commit(
    txn: VolumeTxn, c: StagedCommit, origin: CommitOrigin | None, now: float
) -> VersionInfo | None:
    """Apply ``c`` on its ref's head as one new version (see ``StagedCommit``)."""
    ref = txn.get_ref(c.volume, c.ref)
    if ref is None and c.fork_from is not None and txn.volume_exists(c.volume):
        _create_ref(txn, c.volume, c.fork_from[0], c.ref, c.fork_from[1], now)
        ref = txn.get_ref(c.volume, c.ref)
    if ref is None:
        ref = _ref(txn, c.volume, c.ref)
    if not c.has_changes:
        return None
    restored = _manifest(txn, _version(txn, c.volume, c.restore)) if c.restore is not None else None
    parent = _selected(txn, c.volume, c.ref, None)
    written = _write_files(txn, c.puts, _manifest(txn, parent), restored or {}, now)
    for _ in range(MAX_COMMIT_TRIES):
        old = _manifest(txn, parent)
        new = dict(old if restored is None else restored)
        for path in c.removes:
            new.pop(path, None)
        new.update(written)
        key, chunked = _put_manifest(txn, new, parent)
        number = txn.next_version_id(c.volume)
        if txn.swap_head(c.volume, c.ref, ref.head, number):
            info = VersionInfo(
                id=number,
                parent_id=ref.head,
                created_at=now,
                ref=c.ref,
                message=c.message or _message(c),
                volume=c.volume,
                paths=_changed(old, new),
                run_id=origin.run_id if origin else None,
                step=origin.step if origin else None,
                attempt=origin.attempt if origin else None,
            )
            txn.insert_version(VersionRow(info, key, chunked))
            _MANIFESTS.put(key, new)  # the next read of the head parses nothing
            return info
        # Another writer moved the head: re-apply the same change set on the new head.
        ref = _ref(txn, c.volume, c.ref)
        parent = _selected(txn, c.volume, c.ref, None)
    raise VolumeError(
        f"volume {c.volume!r} ({c.ref}) kept changing under this commit; "
        f"gave up after {MAX_COMMIT_TRIES} tries"
    )


def commit_task(
    txn: VolumeTxn, commits: Sequence[StagedCommit], origin: CommitOrigin, now: float
) -> list[MemoryCommitted]:
    """Apply a finished attempt's staged commits; one ``MemoryCommitted`` per new version."""
    events = []
    for staged in commits:
        info = commit(txn, staged, origin, now)
        if info is not None:
            events.append(
                MemoryCommitted(
                    volume=info.volume,
                    version=info.id,
                    paths=list(info.paths),
                    cmd=origin.step,
                    attempt=origin.attempt,
                    ref=info.ref,
                )
            )
    return events


def _message(c: StagedCommit) -> str:
    if c.restore is not None and not c.puts and not c.removes:
        return f"rollback to version {c.restore}"
    if len(c.puts) == 1 and not c.removes and c.restore is None:
        return f"put {c.puts[0][0]}"
    if len(c.removes) == 1 and not c.puts and c.restore is None:
        return f"remove {c.removes[0]}"
    return f"{len(c.puts)} put(s), {len(c.removes)} removal(s)"


def _changed(old: Manifest, new: Manifest) -> tuple[str, ...]:
    paths = {p for p in old.keys() | new.keys() if old.get(p) != new.get(p)}
    return tuple(sorted(paths))


def _write_files(
    txn: VolumeTxn,
    puts: Sequence[tuple[str, bytes]],
    old: Manifest,
    restored: Manifest,
    now: float,
) -> Manifest:
    written: Manifest = {}
    for path, data in puts:
        written[path] = _write_file(txn, data, old.get(path) or restored.get(path), now)
    return written


def _write_file(txn: VolumeTxn, data: bytes, previous: FileEntry | None, now: float) -> FileEntry:
    chunks = _write_chunks(txn, data, previous.chunks if previous else ())
    return FileEntry(digest(data), len(data), now, tuple(x for chunk in chunks for x in chunk))


def _write_chunks(txn: VolumeTxn, data: bytes, old: Chunks) -> Chunks:
    """Store the chunks of ``data``, each offered the old chunk at its offset as base."""
    items, offset = [], 0
    for chunk in split(data):
        key = digest(chunk)
        _put(txn, key, chunk, _base_at(old, offset))
        items.append((key, len(chunk)))
        offset += len(chunk)
    return tuple(items)


def _base_at(old: Chunks, offset: int) -> str | None:
    """The old chunk that covered ``offset``: what a new chunk there most resembles."""
    start = 0
    for key, size in old:
        if start <= offset < start + size:
            return key
        start += size
    return old[-1][0] if old else None


def _put(txn: VolumeTxn, key: str, plain: bytes, base: str | None) -> None:
    if not txn.has_object(key):
        txn.put_object(key, plain, base if base != key else None)


def _put_manifest(
    txn: VolumeTxn, manifest: Manifest, parent: VersionRow | None
) -> tuple[str, bool]:
    rows = [
        [path, e.hash, e.size, e.updated_at, list(e.flat)] for path, e in sorted(manifest.items())
    ]
    plain = dumps({"files": rows}).encode("utf-8")
    chunks = _write_chunks(txn, plain, _manifest_chunks(txn, parent))
    if len(chunks) == 1:
        return chunks[0][0], False
    listing = _LIST_MAGIC + b"".join(bytes.fromhex(k) + n.to_bytes(4, "big") for k, n in chunks)
    key = digest(listing)
    _put(txn, key, listing, parent.manifest if parent is not None and parent.chunked else None)
    return key, True
