"""``Volume``: a versioned folder of files for an agent's memory.

Outside a task every write commits at once as a new version. Inside a task
attempt, writes are staged and commit with the task's completion, in the
same transaction; the task's own reads see them (see ``staging``).
"""

from __future__ import annotations

import contextvars
import weakref
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from keepgoing._clock import system_clock
from keepgoing._durations import parse_duration
from keepgoing._store.protocol import Store
from keepgoing._store.volume_records import (
    FileInfo,
    StagedCommit,
    VersionInfo,
    VolumeDiff,
    VolumeGc,
)
from keepgoing._volumes import access, diff
from keepgoing._volumes.paths import (
    check_name,
    check_size,
    folder_prefix,
    max_file_size,
    normalise_path,
)
from keepgoing._volumes.staging import HEAD, AttemptVolumes, Head, Stage, current_attempt
from keepgoing.errors import VolumeError, VolumeFileNotFoundError, VolumeNotFoundError

__all__ = ["Volume"]

_batches: contextvars.ContextVar[dict[int, Stage] | None] = contextvars.ContextVar(
    "keepgoing_volume_batches", default=None
)
T = TypeVar("T")


class Volume:
    """A named, versioned file tree kept in the run store. Every write makes a new version.

    Args:
        name: the volume's name (letters, digits and ``._-``).
        version_id: open a read-only view of this version instead of the ref's head.
        ref: the line of versions to read and write (``"main"``; others come from :meth:`fork`).
        create_if_missing: create the volume if it does not exist yet.
        store: a store URL or :class:`Store`; default ``KEEPGOING_STORE``, else the local
            SQLite file. Inside a task the worker's store is used (unless this names
            another one).
        max_file_size: the largest file :meth:`put_file` accepts, in bytes (default
            ``KEEPGOING_VOLUME_MAX_FILE_SIZE``, else 64 MiB).

    Raises:
        VolumeNotFoundError: the volume (with ``create_if_missing=False``), the ref or
            ``version_id`` does not exist.
        VolumeError: a name is not valid.

    Example::

        notes = keepgoing.Volume("agent-memory")
        notes.put_file("lessons.md", "Retry the flaky API with a smaller page size.\\n")
        print(notes.read_text("lessons.md"))
        first = notes.versions()[0]
        print(notes.at_version(first.id).listdir())
    """

    def __init__(
        self,
        name: str,
        *,
        version_id: int | None = None,
        ref: str = "main",
        create_if_missing: bool = True,
        store: str | Store | None = None,
        max_file_size: int | None = None,
        keep_versions: int | None = None,
        keep_for: object = None,
    ) -> None:
        self.name = check_name(name, "volume name")
        kept = _keep_versions(keep_versions)
        kept_for = None if keep_for is None else _keep_for(keep_for)
        self.ref = check_name(ref, "ref")
        self._version = _check_version_id(version_id)
        self._limit = _limit(max_file_size)
        self._wanted = store
        attempt = current_attempt()
        if attempt is not None and access.same_store(attempt.store, store):
            self._store = attempt.store
        else:
            self._store = store if isinstance(store, Store) else access.shared_store(store)
        self._opened: weakref.WeakSet[Store] = weakref.WeakSet()
        self._open(self._store, create_if_missing and self._version is None)
        if self._version is not None:
            self._call(self._store, self._store.volume_version(self.name, self.ref, self._version))
        if kept is not None or kept_for is not None:
            now = system_clock.now()
            self._call(self._store, self._store.volume_retain(self.name, kept, kept_for, now))

    def gc(self, *, dry_run: bool = False) -> VolumeGc:
        """Drop the versions this volume's policy lets go and the chunks no version uses.

        A ref's head, a fork's base and a version an open run wrote are never
        dropped. ``dry_run`` reports the same and deletes nothing.
        """
        store = self._store_now()
        now = system_clock.now()
        return self._call(store, store.volume_gc(self.name, now, dry_run=dry_run))

    # -- handles ------------------------------------------------------------------------------
    @property
    def version_id(self) -> int | None:
        """The version this read-only handle shows, or None for a writable handle."""
        return self._version

    @property
    def read_only(self) -> bool:
        """Whether writes are refused (a handle on a fixed version)."""
        return self._version is not None

    def at_version(self, version: int | VersionInfo) -> Volume:
        """A read-only handle on ``version``; its writes raise :class:`VolumeError`.

        Raises:
            VolumeNotFoundError: there is no such version.
        """
        number = _check_version_id(_number(version))
        store = self._store_now()
        self._call(store, store.volume_version(self.name, self.ref, number))
        return self._sibling(self.ref, number)

    def __repr__(self) -> str:
        at = f", version_id={self._version}" if self._version is not None else ""
        return f"Volume({self.name!r}, ref={self.ref!r}{at})"

    # -- reading ------------------------------------------------------------------------------
    def read_file(self, path: str) -> bytes:
        """The content of ``path`` (inside a task, including the task's staged writes).

        Raises:
            VolumeFileNotFoundError: there is no such file.
            VolumeError: ``path`` is not a valid path.
        """
        path = normalise_path(path)
        store, stages = self._layers()
        for stage in reversed(stages):
            if path in stage.files:
                data = stage.files[path]
                if data is None:
                    raise VolumeFileNotFoundError(f"{path!r} was removed from volume {self.name!r}")
                return data
        base = _base(stages, self._version)
        if base is None:  # a fork of a ref that had no version yet
            raise VolumeFileNotFoundError(f"volume {self.name!r} has no file {path!r}")
        version = self._pinned(store, base)
        if version is None:  # inside a task, the ref had no version yet
            raise VolumeFileNotFoundError(f"volume {self.name!r} has no file {path!r}")
        at = None if isinstance(version, Head) else version
        return self._call(store, store.volume_read(self.name, self.ref, at, path))

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """The content of ``path`` decoded as text.

        Raises:
            VolumeFileNotFoundError: there is no such file.
        """
        return self.read_file(path).decode(encoding)

    def listdir(self, prefix: str = "", *, recursive: bool = True) -> list[FileInfo]:
        """The files under folder ``prefix`` ("" for the whole volume), sorted by path.

        Non-recursive listings show each sub-folder once, with a trailing ``/``.
        """
        folder = folder_prefix(prefix)
        store, stages = self._layers()
        base = _base(stages, self._version)
        committed: list[FileInfo] = []
        if base is not None:
            version = self._pinned(store, base)
            if version is not None:
                at = None if isinstance(version, Head) else version
                committed = self._call(store, store.volume_files(self.name, self.ref, at))
        for stage in _applied(stages):
            committed = stage.view(committed)
        return diff.listing(committed, folder, recursive)

    def exists(self, path: str) -> bool:
        """Whether ``path`` is a file of this volume."""
        try:
            self.read_file(path)
        except VolumeFileNotFoundError:
            return False
        return True

    # -- versions -----------------------------------------------------------------------------
    def versions(self, *, limit: int = 100) -> list[VersionInfo]:
        """The newest ``limit`` versions committed on this ref, oldest first.

        Writes staged by a running task are not versions until the task completes.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise VolumeError(f"limit must be a positive int, not {limit!r}")
        store = self._store_now()
        return self._call(store, store.volume_versions(self.name, self.ref, limit))

    def latest_version(self) -> VersionInfo | None:
        """The ref's newest version (a read-only handle's own), or None before any write."""
        store = self._store_now()
        return self._call(store, store.volume_version(self.name, self.ref, self._version))

    def diff(self, a: int | VersionInfo | None, b: int | VersionInfo | None) -> VolumeDiff:
        """What changed from version ``a`` to version ``b`` (None: the empty volume).

        Raises:
            VolumeNotFoundError: either version does not exist.
        """
        first, second = _number(a), _number(b)
        store = self._store_now()

        def files(version: int | None) -> list[FileInfo]:
            if version is None:
                return []
            return self._call(store, store.volume_files(self.name, self.ref, version))

        def read(version: int | None, path: str) -> bytes:
            return self._call(store, store.volume_read(self.name, self.ref, version, path))

        return diff.compare(first, second, files(first), files(second), read)

    # -- writing ------------------------------------------------------------------------------
    def put_file(
        self, path: str, data: bytes | str, *, message: str | None = None
    ) -> VersionInfo | None:
        """Write ``data`` (``str`` is encoded as UTF-8) to ``path``: one new version.

        Returns the new version; inside a task or a batch, None (the write is
        staged and becomes part of the task's or the batch's version).

        Raises:
            VolumeError: a bad path, a file over the size limit (nothing is stored),
                or a read-only handle.
        """
        path = normalise_path(path)
        content = _as_bytes(data)
        check_size(path, len(content), self._limit)
        store, stage = self._writing()
        if stage is not None:
            stage.put(path, content, system_clock.now())
            stage.note(message)
            return None
        staged = StagedCommit(self.name, self.ref, puts=((path, content),), message=message or "")
        return self._commit(store, staged)

    def remove_file(self, path: str, *, message: str | None = None) -> VersionInfo | None:
        """Remove ``path``: one new version (staged inside a task or a batch).

        Raises:
            VolumeFileNotFoundError: there is no such file.
            VolumeError: a read-only handle.
        """
        path = normalise_path(path)
        store, stage = self._writing()
        if not self.exists(path):
            raise VolumeFileNotFoundError(f"volume {self.name!r} has no file {path!r}")
        if stage is not None:
            stage.remove(path)
            stage.note(message)
            return None
        staged = StagedCommit(self.name, self.ref, removes=(path,), message=message or "")
        return self._commit(store, staged)

    def rollback(self, version: int | VersionInfo) -> VersionInfo | None:
        """Make a new version whose content equals ``version``; history is kept.

        Raises:
            VolumeNotFoundError: there is no such version.
            VolumeError: a read-only handle.
        """
        number = _check_version_id(_number(version))
        if number is None:
            raise VolumeError("rollback() needs a version id")
        store, stage = self._writing()
        self._call(store, store.volume_version(self.name, self.ref, number))
        if stage is not None:
            stage.rollback(number)
            return None
        staged = StagedCommit(self.name, self.ref, restore=number)
        return self._commit(store, staged)

    @contextmanager
    def batch_upload(self, *, message: str | None = None) -> Iterator[Volume]:
        """Gather the writes made on this handle inside the block into one version.

        If the block raises, none of its writes is kept. Inside a task the
        batch joins the task's staged writes.

        Example::

            with notes.batch_upload(message="end of run"):
                notes.put_file("report.md", report)
                notes.put_file("lessons.md", lessons)
        """
        store, outer = self._writing()
        batches = dict(_batches.get() or {})
        if id(self) in batches:
            raise VolumeError(f"{self!r} is already inside batch_upload()")
        stage = Stage(self.name, self.ref)
        batches[id(self)] = stage
        token = _batches.set(batches)
        try:
            yield self
        finally:
            _batches.reset(token)
        stage.note(message)
        if outer is not None:
            outer.merge(stage)
        elif not stage.empty:
            self._commit(store, stage.commit(f"batch of {len(stage.files)} change(s)"))

    # -- refs ---------------------------------------------------------------------------------
    def fork(self, name: str) -> Volume:
        """Create ref ``name`` at this handle's version (or its ref's head); return a handle.

        Inside a task the new ref is created when the task completes, at the
        head committed when ``fork`` was called.

        Raises:
            VolumeError: ``name`` exists already, or is not a valid name.
        """
        new_ref = check_name(name, "ref")
        store, attempt = self._where()
        if attempt is None:
            now = system_clock.now()
            self._call(store, store.volume_fork(self.name, self.ref, new_ref, self._version, now))
            return self._sibling(new_ref, None)
        if attempt.peek(self.name, new_ref) is not None or _ref_exists(self, store, new_ref):
            raise VolumeError(f"volume {self.name!r} already has a ref named {new_ref!r}")
        at = self._version
        if at is None:
            head = self._call(store, store.volume_version(self.name, self.ref, None))
            at = head.id if head else None
        stage = attempt.stage(self.name, new_ref)
        stage.fork_from, stage.base = (self.ref, at), at
        return self._sibling(new_ref, None)

    def forks(self) -> list[str]:
        """The refs forked from this ref, sorted."""
        store = self._store_now()
        return self._call(store, store.volume_forks(self.name, self.ref))

    # -- tags -------------------------------------------------------------------------------
    def tag(self, name: str, version: int | VersionInfo | None = None) -> VersionInfo:
        """Name a version ``name`` (default: this handle's version, else the ref's head);
        a tagged version is never dropped by retention. Tagging a name again moves it.

        Raises:
            VolumeNotFoundError: there is no such version, or the ref has none yet.
            VolumeError: ``name`` is not a valid name.
        """
        label = check_name(name, "tag name")
        number = self._version if version is None else _check_version_id(_number(version))
        store = self._store_now()
        now = system_clock.now()
        return self._call(store, store.volume_tag(self.name, self.ref, label, number, now))

    def untag(self, name: str) -> bool:
        """Remove tag ``name`` (its version may then be dropped); False when there was none."""
        store = self._store_now()
        return self._call(store, store.volume_untag(self.name, check_name(name, "tag name")))

    def tags(self) -> dict[str, int]:
        """Every tag of this volume and the version id it names, by tag name."""
        store = self._store_now()
        return self._call(store, store.volume_tags(self.name))

    # -- plumbing -----------------------------------------------------------------------------
    def _pinned(self, store: Store, base: int | Head) -> int | Head | None:
        """The version to read (:data:`HEAD`: the ref's head, None: no version yet).
        Inside a run's task the version is resolved and pinned for the run in one
        transaction, the first time the attempt reads it, so retention keeps it
        while the run is open (and the attempt reads one snapshot of the head)."""
        attempt = current_attempt()
        if attempt is None or store is not attempt.store:
            return base
        version = None if isinstance(base, Head) else base
        key = (self.name, self.ref, version)
        with attempt.lock:
            if key in attempt.pins:
                return attempt.pins[key]
        now = system_clock.now()
        found = self._call(
            store, store.volume_pin(self.name, self.ref, version, run_id=attempt.run_id, now=now)
        )
        with attempt.lock:
            attempt.pins.setdefault(key, found)
            return attempt.pins[key]

    def _call(self, store: Store, coro: Coroutine[Any, Any, T]) -> T:
        return access.call(store, coro)

    def _open(self, store: Store, create: bool = True) -> None:
        if store not in self._opened:
            now = system_clock.now()
            access.call(store, store.volume_open(self.name, create=create, now=now))
            self._opened.add(store)

    def _where(self) -> tuple[Store, AttemptVolumes | None]:
        """The store to use now, and the running attempt when writes are to be staged."""
        attempt = current_attempt()
        if attempt is not None and access.same_store(attempt.store, self._wanted):
            self._open(attempt.store)
            return attempt.store, attempt
        return self._store, None

    def _store_now(self) -> Store:
        return self._where()[0]

    def _layers(self) -> tuple[Store, list[Stage]]:
        """The store, and the stages to read through (oldest first): the task's, the batch's."""
        if self._version is not None:
            return self._store_now(), []
        store, attempt = self._where()
        stages = []
        if attempt is not None:
            staged = attempt.peek(self.name, self.ref)
            if staged is not None:
                stages.append(staged)
        batch = (_batches.get() or {}).get(id(self))
        if batch is not None:
            stages.append(batch)
        return store, stages

    def _writing(self) -> tuple[Store, Stage | None]:
        if self._version is not None:
            raise VolumeError(
                f"{self!r} is a read-only view of version {self._version}; "
                f"write through Volume({self.name!r}) (or rollback() to return to it)"
            )
        store, attempt = self._where()
        batch = (_batches.get() or {}).get(id(self))
        if batch is not None:
            return store, batch
        return store, attempt.stage(self.name, self.ref) if attempt is not None else None

    def _commit(self, store: Store, staged: StagedCommit) -> VersionInfo | None:
        return self._call(store, store.volume_commit(staged, now=system_clock.now()))

    def _sibling(self, ref: str, version: int | None) -> Volume:
        other = object.__new__(Volume)
        other.__dict__.update(self.__dict__)
        other.ref, other._version = ref, version
        other._opened = weakref.WeakSet(self._opened)
        return other


def _base(stages: list[Stage], pinned: int | None) -> int | Head | None:
    """What reads fall through to: a version, None (nothing), or the ref's head."""
    if pinned is not None:
        return pinned
    for stage in reversed(stages):
        if stage.base is not HEAD:
            return stage.base
    return HEAD


def _applied(stages: list[Stage]) -> list[Stage]:
    """The stages whose changes show on top of :func:`_base` (oldest first)."""
    for index in range(len(stages) - 1, -1, -1):
        if stages[index].base is not HEAD:
            return stages[index:]
    return stages


def _ref_exists(volume: Volume, store: Store, ref: str) -> bool:
    try:
        volume._call(store, store.volume_version(volume.name, ref, None))
    except VolumeNotFoundError:
        return False
    return True


def _number(version: int | VersionInfo | None) -> int | None:
    return version.id if isinstance(version, VersionInfo) else version


def _check_version_id(version: object) -> int | None:
    if version is None:
        return None
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise VolumeError(f"a version id is a positive int, not {version!r}")
    return version


def _limit(value: int | None) -> int:
    return max_file_size(value)


def _as_bytes(data: object) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise VolumeError(f"put_file needs bytes or str, not {type(data).__name__}")


def _keep_versions(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise VolumeError(f"keep_versions must be a whole number of at least 1, not {value!r}")
    return value


def _keep_for(value: object) -> float:
    seconds = parse_duration(value, what="keep_for")
    if seconds <= 0:
        raise VolumeError(f"keep_for must be longer than zero, not {value!r}")
    return seconds
