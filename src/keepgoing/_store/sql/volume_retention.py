"""Volume retention's SQL: which versions a volume's policy drops, and the objects that go.

The one rule (:func:`droppable`), the same on both dialects. A volume with a
policy (``Volume(..., keep_versions=N, keep_for="30d")``, in
``volume_retention``) keeps, on each ref, its newest ``keep_versions``
versions and every version younger than ``keep_for``; with both set, a
version goes only when it is outside both. Whatever the policy, a version is
never dropped when something still reads it:

* it is the head of a ref;
* it is the version a ref was forked at (the fork reads it as its base);
* it was written by a run that is still open (the run may read it back by id);
* a run that is still open read it (a read pin, ``volume_reads``), whoever
  wrote it;
* a tag names it (``Volume.tag``).

Then every object (chunk, manifest, chunk list) that no remaining version of
any volume reads is deleted, so shared chunks stay while one version still
uses them; a kept object stored as a delta against one that goes is first
stored alone. Each collection that drops something writes an audit entry
with its counts. The sweep and
``keepgoing volume gc`` both call :func:`collect`; a dry run reports the same
and deletes nothing. On PostgreSQL the collection locks ``volume_objects``
first, so a commit that found an object already stored cannot lose it.
"""

from __future__ import annotations

import sqlite3
from typing import Any, NamedTuple

from keepgoing._store import records as rec
from keepgoing._store.refused import name_refused
from keepgoing._store.sql import messaging
from keepgoing._store.sql import volumes_core as core
from keepgoing._store.sql.rows import every, one
from keepgoing._store.sql.volume_pins import kept_by_pins_or_tags
from keepgoing._store.sql.volumes import _Txn
from keepgoing._store.volume_records import VolumeGc
from keepgoing.errors import VolumeNotFoundError

__all__ = ["SqlVolumeRetentionMixin", "collect", "droppable"]

_OPEN = "('running', 'blocked')"
_BATCH = 500


class _Policy(NamedTuple):
    volume: str
    keep_versions: int | None
    keep_for: float | None


class _Row(NamedTuple):
    ref: str
    id: int
    created_at: float
    run_id: str | None


class _Pair(NamedTuple):
    key: bytes
    base: bytes | None


class _Key(NamedTuple):
    key: bytes


def retain(
    conn: Any, volume: str, keep_versions: int | None, keep_for: float | None, now: float
) -> None:
    conn.execute(
        "INSERT INTO volume_retention (volume, keep_versions, keep_for, updated_at) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (volume) DO UPDATE SET "
        "keep_versions = excluded.keep_versions, keep_for = excluded.keep_for, "
        "updated_at = excluded.updated_at",
        (volume, keep_versions, keep_for, now),
    )


def droppable(conn: Any, policy: _Policy, now: float) -> list[int]:
    """The versions of ``policy.volume`` its policy drops now, oldest first."""
    if policy.keep_versions is None and policy.keep_for is None:
        return []
    rows = every(
        conn,
        _Row,
        "SELECT v.ref, v.id, v.created_at, v.run_id FROM volume_versions v "
        "WHERE v.volume = ? "
        "AND NOT EXISTS (SELECT 1 FROM volume_refs h WHERE h.volume = v.volume "
        "AND (h.head = v.id OR h.base_version = v.id)) "
        "AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = v.run_id "
        f"AND r.status IN {_OPEN}) AND NOT {kept_by_pins_or_tags('v')} ORDER BY v.id",
        (policy.volume,),
    )
    newest: dict[str, set[int]] = {}
    if policy.keep_versions is not None:
        for ref in {r.ref for r in rows}:
            kept = every(
                conn,
                _Key,
                "SELECT id AS key FROM volume_versions WHERE volume = ? AND ref = ? "
                "ORDER BY id DESC LIMIT ?",
                (policy.volume, ref, policy.keep_versions),
            )
            newest[ref] = {int(k.key) for k in kept}
    out: list[int] = []
    for r in rows:
        young = policy.keep_for is not None and r.created_at > now - policy.keep_for
        recent = policy.keep_versions is not None and r.id in newest.get(r.ref, set())
        if not (young or recent):
            out.append(r.id)
    return out


def _policies(conn: Any, volume: str | None) -> list[_Policy]:
    if volume is None:
        return every(
            conn,
            _Policy,
            "SELECT volume, keep_versions, keep_for FROM volume_retention ORDER BY volume",
        )
    if one(conn, _Key, "SELECT name AS key FROM volumes WHERE name = ?", (volume,)) is None:
        raise VolumeNotFoundError(f"volume {volume!r} does not exist")
    found = one(
        conn,
        _Policy,
        "SELECT volume, keep_versions, keep_for FROM volume_retention WHERE volume = ?",
        (volume,),
    )
    return [found or _Policy(volume, None, None)]


def _unreached(conn: Any, dropped: set[tuple[str, int]]) -> tuple[list[bytes], list[str]]:
    """The objects no version outside ``dropped`` reads, and the read objects
    stored as a delta against one of them (they are stored alone first)."""
    txn = _Txn(conn)
    reached: set[str] = set()
    for name in txn.volume_names():
        for row in _all_versions(txn, name):
            if (name, row.info.id) not in dropped:
                reached |= core.version_objects(txn, row)
    pairs = every(conn, _Pair, "SELECT key, base FROM volume_objects ORDER BY key")
    gone = [bytes(p.key) for p in pairs if bytes(p.key).hex() not in reached]
    unread = {key.hex() for key in gone}
    rebased = [
        bytes(p.key).hex()
        for p in pairs
        if p.base is not None and bytes(p.key).hex() in reached and bytes(p.base).hex() in unread
    ]
    return gone, rebased


def _all_versions(txn: _Txn, volume: str) -> list[core.VersionRow]:
    rows: list[core.VersionRow] = []
    for ref in txn.refs(volume):
        rows.extend(txn.versions(volume, ref.name, 1 << 62))
    return rows


def _dropped(conn: Any, volume: str | None, now: float) -> list[tuple[str, int]]:
    return [(p.volume, v) for p in _policies(conn, volume) for v in droppable(conn, p, now)]


def collect(conn: Any, volume: str | None, now: float, dry_run: bool) -> VolumeGc:
    """Drop what the policies let go (see the module's docstring); what went."""
    dropped = _dropped(conn, volume, now)
    if not dropped:  # objects lose their last reader only when a version goes
        return VolumeGc(volume, (), 0, dry_run)
    if not dry_run and not isinstance(conn, sqlite3.Connection):
        # Wait for every transaction that read or wrote an object, then decide again.
        conn.execute("LOCK TABLE volume_objects IN ACCESS EXCLUSIVE MODE")
        for name, version in dropped:  # and wait for the read pins being written on them
            conn.execute(
                "SELECT id FROM volume_versions WHERE volume = ? AND id = ? /*FOR UPDATE*/",
                (name, version),
            ).fetchall()
        dropped = _dropped(conn, volume, now)
    gone, rebased = _unreached(conn, set(dropped))
    if not dry_run:
        txn = _Txn(conn)
        for key in rebased:
            txn.store_alone(key)
        for name, version in dropped:
            conn.execute("DELETE FROM volume_versions WHERE volume = ? AND id = ?", (name, version))
        for i in range(0, len(gone), _BATCH):
            batch = gone[i : i + _BATCH]
            marks = ", ".join("?" for _ in batch)
            conn.execute(f"DELETE FROM volume_objects WHERE key IN ({marks})", batch)
        messaging.append_audit(
            conn,
            rec.AuditEntry(
                at=now,
                actor_kind="system",
                actor_id="retention",
                action="retention.volumes",
                detail={"volume": volume, "versions": len(dropped), "objects": len(gone)},
            ),
        )
    return VolumeGc(volume, tuple(dropped), len(gone), dry_run)


@name_refused
class SqlVolumeRetentionMixin:
    async def _read(self, op: Any) -> Any: ...  # provided by SqlStore

    async def _write(self, op: Any, notify: Any = False) -> Any: ...  # provided by SqlStore

    async def volume_retain(
        self, volume: str, keep_versions: int | None, keep_for: float | None, now: float
    ) -> None:
        held: list[_Policy] = await self._read(lambda c: _policies(c, volume))
        if _Policy(volume, keep_versions, keep_for) in held:
            return  # a handle made in every attempt writes once, not every time
        await self._write(lambda c: retain(c, volume, keep_versions, keep_for, now))

    async def volume_gc(self, volume: str | None, now: float, *, dry_run: bool = False) -> VolumeGc:
        op = self._read if dry_run else self._write
        result: VolumeGc = await op(lambda c: collect(c, volume, now, dry_run))
        if result.objects and not dry_run:
            core.clear_caches()
        return result
