"""Volume read pins and tags: the versions something still reads, so retention keeps them.

A **pin** (``volume_reads``, migration 0028) says that a run read a version:
:func:`pin` resolves the version a task attempt reads (the ref's head, or the
version it names) and records the pin in the same transaction, so no
collection can drop the version between the two. While the run is open its
pins keep their versions (``volume_retention.droppable``); once it ended they
keep nothing, and they go with the run's rows (``retention._RUN_TABLES``).
Lock order (PostgreSQL): a pin takes the version's row ``FOR SHARE``; a
collection takes ``volume_objects``, then the rows of the versions it would
drop ``FOR UPDATE``, and only then decides again, so it sees every pin that
was being written.

A **tag** (``volume_tags``) names one version of a volume; a tagged version
is never dropped. Tagging a name again moves it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from keepgoing._store.refused import name_refused
from keepgoing._store.sql import volumes_core as core
from keepgoing._store.sql.rows import every
from keepgoing._store.sql.volumes import _Txn
from keepgoing._store.volume_records import VersionInfo
from keepgoing.errors import VolumeNotFoundError

__all__ = ["SqlVolumePinsMixin", "kept_by_pins_or_tags"]

_OPEN = "('running', 'blocked')"


class _Tag(NamedTuple):
    name: str
    version: int


def kept_by_pins_or_tags(alias: str) -> str:
    """The SQL condition, over ``volume_versions`` as ``alias``, that a tag or an
    open run's read pin keeps the version."""
    return (
        f"(EXISTS (SELECT 1 FROM volume_tags g WHERE g.volume = {alias}.volume "
        f"AND g.version = {alias}.id) "
        f"OR EXISTS (SELECT 1 FROM volume_reads p JOIN runs pr ON pr.run_id = p.run_id "
        f"WHERE p.volume = {alias}.volume AND p.version = {alias}.id "
        f"AND pr.status IN {_OPEN}))"
    )


def pin(
    conn: Any, volume: str, ref: str, version: int | None, run_id: str, now: float
) -> int | None:
    """The version read (None: the ref has none yet), recorded as ``run_id``'s pin."""
    info = core.version_at(_Txn(conn), volume, ref, version)
    if info is None:
        return None
    # PostgreSQL: a share lock on the version row, so a collection that decided to
    # drop it waits for this pin and decides again (volume_retention.collect).
    held = conn.execute(
        "SELECT id FROM volume_versions WHERE volume = ? AND id = ? /*FOR SHARE*/",
        (volume, info.id),
    ).fetchone()
    if held is None:
        raise VolumeNotFoundError(f"volume {volume!r} has no version {info.id} any more")
    conn.execute(
        "INSERT INTO volume_reads (run_id, volume, version, read_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (run_id, volume, version) DO NOTHING",
        (run_id, volume, info.id, now),
    )
    return info.id


def tag(
    conn: Any, volume: str, ref: str, name: str, version: int | None, now: float
) -> VersionInfo:
    info = core.version_at(_Txn(conn), volume, ref, version)
    if info is None:
        raise VolumeNotFoundError(f"volume {volume!r} ref {ref!r} has no version to tag yet")
    conn.execute(
        "INSERT INTO volume_tags (volume, name, version, created_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (volume, name) DO UPDATE SET version = excluded.version, "
        "created_at = excluded.created_at",
        (volume, name, info.id, now),
    )
    return info


def untag(conn: Any, volume: str, name: str) -> bool:
    gone: int = conn.execute(
        "DELETE FROM volume_tags WHERE volume = ? AND name = ?", (volume, name)
    ).rowcount
    return gone > 0


def tags(conn: Any, volume: str) -> dict[str, int]:
    if not _Txn(conn).volume_exists(volume):
        raise VolumeNotFoundError(f"volume {volume!r} does not exist")
    rows = every(
        conn,
        _Tag,
        "SELECT name, version FROM volume_tags WHERE volume = ? ORDER BY name",
        (volume,),
    )
    return {r.name: int(r.version) for r in rows}


@name_refused
class SqlVolumePinsMixin:
    async def _read(self, op: Any) -> Any: ...  # provided by SqlStore

    async def _write(self, op: Any, notify: Any = False) -> Any: ...  # provided by SqlStore

    async def volume_pin(
        self, volume: str, ref: str, version: int | None, *, run_id: str, now: float
    ) -> int | None:
        found: int | None = await self._write(lambda c: pin(c, volume, ref, version, run_id, now))
        return found

    async def volume_tag(
        self, volume: str, ref: str, name: str, version: int | None, now: float
    ) -> VersionInfo:
        info: VersionInfo = await self._write(lambda c: tag(c, volume, ref, name, version, now))
        return info

    async def volume_untag(self, volume: str, name: str) -> bool:
        gone: bool = await self._write(lambda c: untag(c, volume, name))
        return gone

    async def volume_tags(self, volume: str) -> dict[str, int]:
        found: dict[str, int] = await self._read(lambda c: tags(c, volume))
        return found
