"""The SQLite store's volume facet (mixed into ``SqliteStore``); tables from 0005.

The rules are in :mod:`keepgoing._store.sql.volumes_core`; this module stores
rows and objects. Objects are zlib-compressed, and a new object that has a
base (the object at the same place in the parent version) is stored as a
delta when that is smaller: zlib with the base's bytes as its preset
dictionary. A one-line change to a large file then costs a few dozen bytes
per changed chunk instead of the chunk. Base chains are cut at
:data:`MAX_DEPTH`, so reading any object decompresses at most
``MAX_DEPTH + 1`` objects.
"""

from __future__ import annotations

import zlib
from typing import Any, NamedTuple

from keepgoing._history.events import MemoryCommitted
from keepgoing._payload import dumps, loads
from keepgoing._store.content_cache import ContentCache
from keepgoing._store.records import TaskOutcome
from keepgoing._store.refused import name_refused
from keepgoing._store.sql import volumes_core as core
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.rows import columns, every, one, value
from keepgoing._store.sql.volumes_core import RefRow, VersionRow
from keepgoing._store.volume_records import CommitOrigin, FileInfo, StagedCommit, VersionInfo
from keepgoing._store.volumes_protocol import VolumeStore
from keepgoing.errors import StoreError

__all__ = ["MAX_DEPTH", "SqlVolumesMixin", "commit_task"]

MAX_DEPTH = 24
_RAW, _ZLIB, _DELTA = 0, 1, 2
_WINDOW = 32 * 1024  # zlib's window: only this much of a preset dictionary is used
_LEVEL = 9  # with a preset dictionary, the longer match search pays for itself


class _Version(NamedTuple):
    """A ``volume_versions`` row; its fields are the table's columns."""

    volume: str
    id: int
    parent_id: int | None
    ref: str
    created_at: float
    message: str
    manifest: bytes
    paths: str
    run_id: str | None
    step: int | None
    attempt: int | None
    chunked: int


class _Stored(NamedTuple):
    """How a volume object is stored."""

    base: bytes | None
    codec: int
    data: bytes


class _Link(NamedTuple):
    """An object's place in its chain of deltas."""

    base: bytes | None
    depth: int


class _Name(NamedTuple):
    name: str


_VERSION_COLUMNS = columns(_Version)
_REF_COLUMNS = columns(RefRow)


#: Recently read plain objects, by key, up to 32 MiB.
_CACHE: ContentCache[bytes] = ContentCache(32 * 1024 * 1024, share=8)


class _Txn:
    """A :class:`~keepgoing._store.sql.volumes_core.VolumeTxn` on a connection, inside
    the transaction the SQLite thread opened for the call.

    ``writing``: a write locks the ref row it reads (``/*FOR UPDATE*/``, which
    SQLite ignores and PostgreSQL honours), so concurrent commits to one ref
    take turns instead of failing their compare-and-set.
    """

    def __init__(self, conn: Connection, *, writing: bool = False) -> None:
        self.conn = conn
        self._lock = " /*FOR UPDATE*/" if writing else ""

    def volume_exists(self, name: str) -> bool:
        row = self.conn.execute("SELECT 1 FROM volumes WHERE name = ?", (name,)).fetchone()
        return row is not None

    def insert_volume(self, name: str, now: float) -> None:
        self.conn.execute("INSERT INTO volumes (name, created_at) VALUES (?, ?)", (name, now))

    def volume_names(self) -> list[str]:
        return [r.name for r in every(self.conn, _Name, "SELECT name FROM volumes ORDER BY name")]

    def get_ref(self, volume: str, name: str) -> RefRow | None:
        return one(
            self.conn,
            RefRow,
            f"SELECT {_REF_COLUMNS} FROM volume_refs WHERE volume = ? AND name = ?{self._lock}",
            (volume, name),
        )

    def insert_ref(self, ref: RefRow) -> None:
        self.conn.execute(
            f"INSERT INTO volume_refs ({_REF_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
            (ref.volume, ref.name, ref.head, ref.base_ref, ref.base_version, ref.created_at),
        )

    def swap_head(self, volume: str, ref: str, expected: int | None, new: int) -> bool:
        moved = self.conn.execute(
            "UPDATE volume_refs SET head = ? WHERE volume = ? AND name = ? AND head IS ?",
            (new, volume, ref, expected),
        )
        return moved.rowcount == 1

    def refs(self, volume: str) -> list[RefRow]:
        return every(
            self.conn,
            RefRow,
            f"SELECT {_REF_COLUMNS} FROM volume_refs WHERE volume = ? ORDER BY name",
            (volume,),
        )

    def next_version_id(self, volume: str) -> int:
        taken = value(
            self.conn,
            "UPDATE volumes SET next_version = next_version + 1 WHERE name = ? "
            "RETURNING next_version - 1",
            (volume,),
        )
        return int(taken)

    def insert_version(self, row: VersionRow) -> None:
        i = row.info
        self.conn.execute(
            f"INSERT INTO volume_versions ({_VERSION_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                i.volume,
                i.id,
                i.parent_id,
                i.ref,
                i.created_at,
                i.message,
                bytes.fromhex(row.manifest),
                dumps(list(i.paths)),
                i.run_id,
                i.step,
                i.attempt,
                int(row.chunked),
            ),
        )

    def get_version(self, volume: str, version: int) -> VersionRow | None:
        row = one(
            self.conn,
            _Version,
            f"SELECT {_VERSION_COLUMNS} FROM volume_versions WHERE volume = ? AND id = ?",
            (volume, version),
        )
        return _version_row(row) if row else None

    def versions(self, volume: str, ref: str, limit: int) -> list[VersionRow]:
        rows = every(
            self.conn,
            _Version,
            f"SELECT {_VERSION_COLUMNS} FROM volume_versions WHERE volume = ? AND ref = ? "
            "ORDER BY id DESC LIMIT ?",
            (volume, ref, limit),
        )
        return [_version_row(row) for row in reversed(rows)]

    def get_object(self, key: str) -> bytes | None:
        cached = _CACHE.get(key)
        if cached is not None:
            return cached
        row = one(
            self.conn,
            _Stored,
            f"SELECT {columns(_Stored)} FROM volume_objects WHERE key = ?",
            (bytes.fromhex(key),),
        )
        if row is None:
            return None
        plain = self._decode(key, row.base, row.codec, row.data)
        _CACHE.put(key, plain)
        return plain

    def _decode(self, key: str, base: bytes | None, codec: int, data: bytes) -> bytes:
        if codec == _RAW:
            return bytes(data)
        if codec == _ZLIB:
            return zlib.decompress(data)
        base_plain = self.get_object(base.hex()) if base is not None else None
        if codec != _DELTA or base_plain is None:
            raise StoreError(f"volume object {key} cannot be decoded; the store is damaged")
        inflate = zlib.decompressobj(zdict=base_plain[:_WINDOW])
        return inflate.decompress(data) + inflate.flush()

    def has_object(self, key: str) -> bool:
        row = self.conn.execute(
            "SELECT 1 FROM volume_objects WHERE key = ?", (bytes.fromhex(key),)
        ).fetchone()
        return row is not None

    def put_object(self, key: str, plain: bytes, base: str | None) -> None:
        codec, data = _ZLIB, zlib.compress(plain, _LEVEL)
        if len(data) >= len(plain):
            codec, data = _RAW, plain
        stored_base, depth = None, 0
        chosen = self._usable_base(base) if base is not None else None
        if chosen is not None:
            delta = _delta(plain, self.get_object(chosen[0]) or b"")
            if len(delta) < len(data):
                codec, data, stored_base, depth = _DELTA, delta, chosen[0], chosen[1] + 1
        self.conn.execute(
            "INSERT INTO volume_objects (key, base, depth, codec, size, data) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING",
            (
                bytes.fromhex(key),
                bytes.fromhex(stored_base) if stored_base else None,
                depth,
                codec,
                len(plain),
                data,
            ),
        )

    def store_alone(self, key: str) -> None:
        """Store object ``key`` without its base, so the base may be deleted."""
        plain = self.get_object(key)
        if plain is None:
            return
        codec, data = _ZLIB, zlib.compress(plain, _LEVEL)
        if len(data) >= len(plain):
            codec, data = _RAW, plain
        self.conn.execute(
            "UPDATE volume_objects SET base = NULL, depth = 0, codec = ?, data = ? WHERE key = ?",
            (codec, data, bytes.fromhex(key)),
        )

    def _usable_base(self, key: str) -> tuple[str, int] | None:
        """``key`` and its depth; at the depth cap, the root of its chain instead.

        Falling back to the root (a standalone object) rather than storing a
        whole new standalone object keeps chains bounded and the cost small:
        the delta holds only what changed since the root.
        """
        link = self._chain_link(key)
        if link is None or link.depth < MAX_DEPTH:
            return None if link is None else (key, link.depth)
        while link is not None and link.base is not None:
            key = link.base
            link = self._chain_link(key)
        return None if link is None else (key, link.depth)

    def _chain_link(self, key: str) -> _ChainLink | None:
        """The object's base (as a key) and its depth."""
        row = one(
            self.conn,
            _Link,
            f"SELECT {columns(_Link)} FROM volume_objects WHERE key = ?",
            (bytes.fromhex(key),),
        )
        if row is None:
            return None
        return _ChainLink(bytes(row.base).hex() if row.base is not None else None, int(row.depth))


def _delta(plain: bytes, base: bytes) -> bytes:
    deflate = zlib.compressobj(_LEVEL, zdict=base[:_WINDOW])
    return deflate.compress(plain) + deflate.flush()


class _ChainLink(NamedTuple):
    base: str | None
    depth: int


def _version_row(row: _Version) -> VersionRow:
    info = VersionInfo(
        id=row.id,
        parent_id=row.parent_id,
        created_at=row.created_at,
        ref=row.ref,
        message=row.message,
        volume=row.volume,
        paths=tuple(loads(row.paths)),
        run_id=row.run_id,
        step=row.step,
        attempt=row.attempt,
    )
    return VersionRow(info, bytes(row.manifest).hex(), bool(row.chunked))


def commit_task(conn: Connection, outcome: TaskOutcome) -> list[MemoryCommitted]:
    """Apply a successful attempt's staged commits inside ``complete_task``'s transaction."""
    origin = CommitOrigin(outcome.run_id, outcome.cmd, outcome.attempt)
    return core.commit_task(_Txn(conn, writing=True), outcome.volume_commits, origin, outcome.now)


@name_refused
class SqlVolumesMixin(VolumeStore):
    async def _read(self, op: Any) -> Any: ...  # provided by SqlStore

    async def _write(self, op: Any, notify: Any = False) -> Any: ...

    async def volume_open(self, name: str, *, create: bool, now: float) -> bool:
        # Most opens find the volume: a read then, not a place in the writer's queue.
        exists: bool = await self._read(lambda c: _Txn(c).volume_exists(name))
        if exists:
            return False
        created: bool = await self._write(
            lambda c: core.open_volume(_Txn(c, writing=True), name, create, now)
        )
        return created

    async def volume_list(self) -> list[str]:
        names: list[str] = await self._read(lambda c: _Txn(c).volume_names())
        return names

    async def volume_commit(
        self, commit: StagedCommit, *, now: float, origin: CommitOrigin | None = None
    ) -> VersionInfo | None:
        info: VersionInfo | None = await self._write(
            lambda c: core.commit(_Txn(c, writing=True), commit, origin, now)
        )
        return info

    async def volume_version(
        self, volume: str, ref: str, version: int | None = None
    ) -> VersionInfo | None:
        info: VersionInfo | None = await self._read(
            lambda c: core.version_at(_Txn(c), volume, ref, version)
        )
        return info

    async def volume_versions(self, volume: str, ref: str, limit: int) -> list[VersionInfo]:
        found: list[VersionInfo] = await self._read(
            lambda c: core.versions(_Txn(c), volume, ref, limit)
        )
        return found

    async def volume_files(
        self, volume: str, ref: str, version: int | None = None
    ) -> list[FileInfo]:
        found: list[FileInfo] = await self._read(
            lambda c: core.files(_Txn(c), volume, ref, version)
        )
        return found

    async def volume_read(self, volume: str, ref: str, version: int | None, path: str) -> bytes:
        data: bytes = await self._read(lambda c: core.read(_Txn(c), volume, ref, version, path))
        return data

    async def volume_fork(
        self, volume: str, ref: str, new_ref: str, version: int | None, now: float
    ) -> None:
        await self._write(
            lambda c: core.fork(_Txn(c, writing=True), volume, ref, new_ref, version, now)
        )

    async def volume_forks(self, volume: str, ref: str) -> list[str]:
        names: list[str] = await self._read(lambda c: core.forks(_Txn(c), volume, ref))
        return names
