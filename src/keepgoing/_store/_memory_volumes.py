"""The memory store's volume facet (mixed into ``MemoryStore``).

The rules are in :mod:`keepgoing._store._volumes_core`; this module keeps the
rows in dicts and objects as plain bytes. Each call runs under the store's
lock through a :class:`_Txn` that buffers its writes and applies them only
when the whole call succeeded, so a refused commit writes nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from keepgoing._history.events import MemoryCommitted
from keepgoing._store import _volumes_core as core
from keepgoing._store._volumes_core import RefRow, VersionRow
from keepgoing._store.records import TaskOutcome
from keepgoing._store.volumes_protocol import VolumeStore
from keepgoing._volumes.types import CommitOrigin, FileInfo, StagedCommit, VersionInfo

__all__ = ["MemoryVolumesMixin", "VolumeState"]

T = TypeVar("T")
RefKey = tuple[str, str]


@dataclass
class VolumeState:
    """Every volume row and object of one memory store."""

    volumes: dict[str, float] = field(default_factory=dict)  # name -> created_at
    next_ids: dict[str, int] = field(default_factory=dict)
    refs: dict[RefKey, RefRow] = field(default_factory=dict)
    versions: dict[tuple[str, int], VersionRow] = field(default_factory=dict)
    by_ref: dict[RefKey, list[int]] = field(default_factory=dict)
    objects: dict[str, bytes] = field(default_factory=dict)


class _Txn:
    """A :class:`~keepgoing._store._volumes_core.VolumeTxn` with a write buffer."""

    def __init__(self, state: VolumeState) -> None:
        self.s = state
        self.new_volumes: dict[str, float] = {}
        self.new_next_ids: dict[str, int] = {}
        self.new_refs: dict[RefKey, RefRow] = {}
        self.new_versions: list[VersionRow] = []
        self.new_objects: dict[str, bytes] = {}

    def flush(self) -> None:
        s = self.s
        s.volumes.update(self.new_volumes)
        s.next_ids.update(self.new_next_ids)
        s.refs.update(self.new_refs)
        s.objects.update(self.new_objects)
        for row in self.new_versions:
            s.versions[(row.info.volume, row.info.id)] = row
            s.by_ref.setdefault((row.info.volume, row.info.ref), []).append(row.info.id)

    def volume_exists(self, name: str) -> bool:
        return name in self.new_volumes or name in self.s.volumes

    def insert_volume(self, name: str, now: float) -> None:
        self.new_volumes[name] = now

    def volume_names(self) -> list[str]:
        return sorted(self.s.volumes.keys() | self.new_volumes.keys())

    def get_ref(self, volume: str, name: str) -> RefRow | None:
        return self.new_refs.get((volume, name)) or self.s.refs.get((volume, name))

    def insert_ref(self, ref: RefRow) -> None:
        self.new_refs[(ref.volume, ref.name)] = ref

    def swap_head(self, volume: str, ref: str, expected: int | None, new: int) -> bool:
        row = self.get_ref(volume, ref)
        if row is None or row.head != expected:
            return False
        self.new_refs[(volume, ref)] = RefRow(
            volume, ref, new, row.base_ref, row.base_version, row.created_at
        )
        return True

    def refs(self, volume: str) -> list[RefRow]:
        merged = {k: r for k, r in self.s.refs.items() if k[0] == volume}
        merged.update({k: r for k, r in self.new_refs.items() if k[0] == volume})
        return list(merged.values())

    def next_version_id(self, volume: str) -> int:
        number = self.new_next_ids.get(volume) or self.s.next_ids.get(volume, 1)
        self.new_next_ids[volume] = number + 1
        return number

    def insert_version(self, row: VersionRow) -> None:
        self.new_versions.append(row)

    def get_version(self, volume: str, version: int) -> VersionRow | None:
        found = self.s.versions.get((volume, version))
        if found is None:
            mine = (r for r in self.new_versions if (r.info.volume, r.info.id) == (volume, version))
            found = next(mine, None)
        return found

    def versions(self, volume: str, ref: str, limit: int) -> list[VersionRow]:
        ids = list(self.s.by_ref.get((volume, ref), []))
        ids += [
            r.info.id for r in self.new_versions if (r.info.volume, r.info.ref) == (volume, ref)
        ]
        chosen = ids[-limit:] if limit else []
        return [row for i in chosen if (row := self.get_version(volume, i)) is not None]

    def get_object(self, key: str) -> bytes | None:
        found = self.new_objects.get(key)
        return self.s.objects.get(key) if found is None else found

    def has_object(self, key: str) -> bool:
        return key in self.new_objects or key in self.s.objects

    def put_object(self, key: str, plain: bytes, base: str | None) -> None:
        self.new_objects[key] = plain


class MemoryVolumesMixin(VolumeStore):
    """Volumes in process memory, under the store's lock."""

    _lock: threading.Lock

    @property
    def _volume_state(self) -> VolumeState:
        # Created on first use: MemoryStore.__init__ belongs to the engine.
        state: VolumeState | None = self.__dict__.get("_kg_volumes")
        if state is None:
            state = self.__dict__["_kg_volumes"] = VolumeState()
        return state

    def _in_txn(self, op: Callable[[_Txn], T]) -> T:
        with self._lock:
            txn = _Txn(self._volume_state)
            result = op(txn)
            txn.flush()
            return result

    def _commit_task_volumes(self, outcome: TaskOutcome) -> list[MemoryCommitted]:
        """Apply a successful attempt's staged commits; the caller holds the lock."""
        if not outcome.volume_commits:
            return []
        txn = _Txn(self._volume_state)
        origin = CommitOrigin(outcome.run_id, outcome.cmd, outcome.attempt)
        events = core.commit_task(txn, outcome.volume_commits, origin, outcome.now)
        txn.flush()
        return events

    async def volume_open(self, name: str, *, create: bool, now: float) -> bool:
        return self._in_txn(lambda t: core.open_volume(t, name, create, now))

    async def volume_list(self) -> list[str]:
        return self._in_txn(lambda t: t.volume_names())

    async def volume_commit(
        self, commit: StagedCommit, *, now: float, origin: CommitOrigin | None = None
    ) -> VersionInfo | None:
        return self._in_txn(lambda t: core.commit(t, commit, origin, now))

    async def volume_version(
        self, volume: str, ref: str, version: int | None = None
    ) -> VersionInfo | None:
        return self._in_txn(lambda t: core.version_at(t, volume, ref, version))

    async def volume_versions(self, volume: str, ref: str, limit: int) -> list[VersionInfo]:
        return self._in_txn(lambda t: core.versions(t, volume, ref, limit))

    async def volume_files(
        self, volume: str, ref: str, version: int | None = None
    ) -> list[FileInfo]:
        return self._in_txn(lambda t: core.files(t, volume, ref, version))

    async def volume_read(self, volume: str, ref: str, version: int | None, path: str) -> bytes:
        return self._in_txn(lambda t: core.read(t, volume, ref, version, path))

    async def volume_fork(
        self, volume: str, ref: str, new_ref: str, version: int | None, now: float
    ) -> None:
        self._in_txn(lambda t: core.fork(t, volume, ref, new_ref, version, now))

    async def volume_forks(self, volume: str, ref: str) -> list[str]:
        return self._in_txn(lambda t: core.forks(t, volume, ref))
