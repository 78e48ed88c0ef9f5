"""The SQLite store's volume facet (mixed into ``SqliteStore``); tables from 0005.

The rules are in :mod:`keepgoing._store._volumes_core`; this module stores
rows and objects. Objects are zlib-compressed, and a new object that has a
base (the object at the same place in the parent version) is stored as a
delta when that is smaller: zlib with the base's bytes as its preset
dictionary. A one-line change to a large file then costs a few dozen bytes
per changed chunk instead of the chunk. Base chains are cut at
:data:`MAX_DEPTH`, so reading any object decompresses at most
``MAX_DEPTH + 1`` objects.
"""

from __future__ import annotations

import collections
import sqlite3
import threading
import zlib
from typing import Any

from keepgoing._history.events import MemoryCommitted
from keepgoing._payload import dumps, loads
from keepgoing._store import _volumes_core as core
from keepgoing._store._volumes_core import RefRow, VersionRow
from keepgoing._store.records import TaskOutcome
from keepgoing._store.volumes_protocol import VolumeStore
from keepgoing._volumes.types import CommitOrigin, FileInfo, StagedCommit, VersionInfo
from keepgoing.errors import StoreError

__all__ = ["MAX_DEPTH", "SqliteVolumesMixin", "commit_task"]

MAX_DEPTH = 24
_RAW, _ZLIB, _DELTA = 0, 1, 2
_WINDOW = 32 * 1024  # zlib's window: only this much of a preset dictionary is used
_LEVEL = 9  # with a preset dictionary, the longer match search pays for itself
_VERSION_COLUMNS = (
    "volume, id, parent_id, ref, created_at, message, manifest, paths, run_id, step, attempt, "
    "chunked"
)


class _ObjectCache:
    """Recently read plain objects, by key, up to ``limit`` bytes.

    Safe to share across databases and processes' histories: an object's
    bytes are fixed by its key. It is never asked whether an object *exists*
    (a rolled-back transaction may have read one that does not).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self._items: collections.OrderedDict[str, bytes] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.size = 0

    def put(self, key: str, plain: bytes) -> None:
        if len(plain) > self.limit // 8:
            return
        with self._lock:
            if key in self._items:
                return
            self._items[key] = plain
            self.size += len(plain)
            while self.size > self.limit:
                _, dropped = self._items.popitem(last=False)
                self.size -= len(dropped)


_CACHE = _ObjectCache(32 * 1024 * 1024)


class _Txn:
    """A :class:`~keepgoing._store._volumes_core.VolumeTxn` on a connection, inside
    the transaction the SQLite thread opened for the call.

    ``writing``: a write locks the ref row it reads (``/*FOR UPDATE*/``, which
    SQLite ignores and PostgreSQL honours), so concurrent commits to one ref
    take turns instead of failing their compare-and-set.
    """

    def __init__(self, conn: sqlite3.Connection, *, writing: bool = False) -> None:
        self.conn = conn
        self._lock = " /*FOR UPDATE*/" if writing else ""

    def volume_exists(self, name: str) -> bool:
        row = self.conn.execute("SELECT 1 FROM volumes WHERE name = ?", (name,)).fetchone()
        return row is not None

    def insert_volume(self, name: str, now: float) -> None:
        self.conn.execute("INSERT INTO volumes (name, created_at) VALUES (?, ?)", (name, now))

    def volume_names(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT name FROM volumes ORDER BY name")]

    def get_ref(self, volume: str, name: str) -> RefRow | None:
        row = self.conn.execute(
            "SELECT volume, name, head, base_ref, base_version, created_at FROM volume_refs "
            f"WHERE volume = ? AND name = ?{self._lock}",
            (volume, name),
        ).fetchone()
        return RefRow(*row) if row else None

    def insert_ref(self, ref: RefRow) -> None:
        self.conn.execute(
            "INSERT INTO volume_refs (volume, name, head, base_ref, base_version, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (ref.volume, ref.name, ref.head, ref.base_ref, ref.base_version, ref.created_at),
        )

    def swap_head(self, volume: str, ref: str, expected: int | None, new: int) -> bool:
        moved = self.conn.execute(
            "UPDATE volume_refs SET head = ? WHERE volume = ? AND name = ? AND head IS ?",
            (new, volume, ref, expected),
        )
        return moved.rowcount == 1

    def refs(self, volume: str) -> list[RefRow]:
        rows = self.conn.execute(
            "SELECT volume, name, head, base_ref, base_version, created_at FROM volume_refs "
            "WHERE volume = ? ORDER BY name",
            (volume,),
        )
        return [RefRow(*row) for row in rows]

    def next_version_id(self, volume: str) -> int:
        row = self.conn.execute(
            "UPDATE volumes SET next_version = next_version + 1 WHERE name = ? "
            "RETURNING next_version - 1",
            (volume,),
        ).fetchone()
        return int(row[0])

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
        row = self.conn.execute(
            f"SELECT {_VERSION_COLUMNS} FROM volume_versions WHERE volume = ? AND id = ?",
            (volume, version),
        ).fetchone()
        return _version_row(row) if row else None

    def versions(self, volume: str, ref: str, limit: int) -> list[VersionRow]:
        rows = self.conn.execute(
            f"SELECT {_VERSION_COLUMNS} FROM volume_versions WHERE volume = ? AND ref = ? "
            "ORDER BY id DESC LIMIT ?",
            (volume, ref, limit),
        ).fetchall()
        return [_version_row(row) for row in reversed(rows)]

    def get_object(self, key: str) -> bytes | None:
        cached = _CACHE.get(key)
        if cached is not None:
            return cached
        row = self.conn.execute(
            "SELECT base, codec, data FROM volume_objects WHERE key = ?", (bytes.fromhex(key),)
        ).fetchone()
        if row is None:
            return None
        plain = self._decode(key, row[0], row[1], row[2])
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

    def _usable_base(self, key: str) -> tuple[str, int] | None:
        """``key`` and its depth; at the depth cap, the root of its chain instead.

        Falling back to the root (a standalone object) rather than storing a
        whole new standalone object keeps chains bounded and the cost small:
        the delta holds only what changed since the root.
        """
        row = self._chain_link(key)
        if row is None or row[1] < MAX_DEPTH:
            return None if row is None else (key, row[1])
        while row is not None and row[0] is not None:
            key = row[0]
            row = self._chain_link(key)
        return None if row is None else (key, row[1])

    def _chain_link(self, key: str) -> tuple[str | None, int] | None:
        row = self.conn.execute(
            "SELECT base, depth FROM volume_objects WHERE key = ?", (bytes.fromhex(key),)
        ).fetchone()
        if row is None:
            return None
        return (bytes(row[0]).hex() if row[0] is not None else None), int(row[1])


def _delta(plain: bytes, base: bytes) -> bytes:
    deflate = zlib.compressobj(_LEVEL, zdict=base[:_WINDOW])
    return deflate.compress(plain) + deflate.flush()


def _version_row(row: tuple[Any, ...]) -> VersionRow:
    info = VersionInfo(
        id=row[1],
        parent_id=row[2],
        created_at=row[4],
        ref=row[3],
        message=row[5],
        volume=row[0],
        paths=tuple(loads(row[7])),
        run_id=row[8],
        step=row[9],
        attempt=row[10],
    )
    return VersionRow(info, bytes(row[6]).hex(), bool(row[11]))


def commit_task(conn: sqlite3.Connection, outcome: TaskOutcome) -> list[MemoryCommitted]:
    """Apply a successful attempt's staged commits inside ``complete_task``'s transaction."""
    origin = CommitOrigin(outcome.run_id, outcome.cmd, outcome.attempt)
    return core.commit_task(_Txn(conn, writing=True), outcome.volume_commits, origin, outcome.now)


class SqliteVolumesMixin(VolumeStore):
    async def _read(self, op: Any) -> Any: ...  # provided by SqliteStore

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
