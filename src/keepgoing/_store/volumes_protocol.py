"""The store's volume facet: versioned file trees, committed atomically.

Model
-----
* A **volume** has a name, refs and versions. Creating a volume creates its
  ref ``main`` with no version.
* A **version** (1, 2, 3, ... per volume) is an immutable manifest: path ->
  (content hash, size, updated_at). Versions are deleted only by the
  volume's own retention policy (:meth:`VolumeStore.volume_gc`).
* A run's reads **pin** the versions it read (:meth:`VolumeStore.volume_pin`),
  and a **tag** names a version (:meth:`VolumeStore.volume_tag`): retention
  never drops a tagged version, or one an open run read.
* A **ref** names a head version (or none yet). ``fork`` makes a new ref at
  a version of another. Commits move a ref's head by compare-and-set: the
  change set of a :class:`~keepgoing._store.volume_records.StagedCommit` is applied
  to the head the commit finds, and re-applied if the head moved meanwhile,
  so two writers that commit at once both land and no update is lost.
* Content is stored content-addressed (SHA-256), in content-defined chunks
  shared across versions and volumes: a file that did not change costs
  nothing in a new version.
* :meth:`Store.complete_task` applies a successful attempt's
  ``TaskOutcome.volume_commits`` in the transaction that records the
  completion (after the fence check, before ``TaskCompleted``), appending one
  ``MemoryCommitted`` info event per new version. A refused completion
  applies none of them.

A version is addressed by ``(volume, ref, version)``: ``version=None`` means
the ref's head. Methods are coroutines and may raise
:class:`~keepgoing.errors.StoreError` when storage fails.
"""

from __future__ import annotations

import abc

from keepgoing._store.volume_records import (
    CommitOrigin,
    FileInfo,
    StagedCommit,
    VersionInfo,
    VolumeGc,
)

__all__ = ["VolumeStore"]


class VolumeStore(abc.ABC):
    """Versioned volumes, stored alongside the runs they are written by."""

    @abc.abstractmethod
    async def volume_open(self, name: str, *, create: bool, now: float) -> bool:
        """Make sure volume ``name`` exists; return True if this call created it.

        Raises:
            VolumeNotFoundError: it does not exist and ``create`` is False.
        """

    @abc.abstractmethod
    async def volume_list(self) -> list[str]:
        """The name of every volume, sorted."""

    @abc.abstractmethod
    async def volume_commit(
        self, commit: StagedCommit, *, now: float, origin: CommitOrigin | None = None
    ) -> VersionInfo | None:
        """Apply ``commit`` to its ref's current head as one new version; return it.

        Creates the ref first when ``commit.fork_from`` is set and the ref is
        missing. Returns None (and makes no version) when the commit has no
        changes.

        Raises:
            VolumeNotFoundError: the volume, the ref, or version ``restore`` is missing.
        """

    @abc.abstractmethod
    async def volume_version(
        self, volume: str, ref: str, version: int | None = None
    ) -> VersionInfo | None:
        """Version ``version`` of ``volume``, or with None the head of ``ref`` (None if
        the ref has no version yet).

        Raises:
            VolumeNotFoundError: the volume, the ref, or the version is missing.
        """

    @abc.abstractmethod
    async def volume_versions(self, volume: str, ref: str, limit: int) -> list[VersionInfo]:
        """The newest ``limit`` versions committed on ``ref``, oldest first.

        Raises:
            VolumeNotFoundError: the volume or the ref is missing.
        """

    @abc.abstractmethod
    async def volume_files(
        self, volume: str, ref: str, version: int | None = None
    ) -> list[FileInfo]:
        """Every file of a version (None: the head of ``ref``), sorted by path.

        Raises:
            VolumeNotFoundError: the volume, the ref, or the version is missing.
        """

    @abc.abstractmethod
    async def volume_read(self, volume: str, ref: str, version: int | None, path: str) -> bytes:
        """The content of ``path`` at a version (None: the head of ``ref``).

        Raises:
            VolumeNotFoundError: the volume, the ref, or the version is missing.
            VolumeFileNotFoundError: the version has no file ``path``.
        """

    @abc.abstractmethod
    async def volume_fork(
        self, volume: str, ref: str, new_ref: str, version: int | None, now: float
    ) -> None:
        """Create ``new_ref`` at ``version`` (None: the head of ``ref``), forked from ``ref``.

        Raises:
            VolumeNotFoundError: the volume, the ref, or the version is missing.
            VolumeError: ``new_ref`` already exists.
        """

    @abc.abstractmethod
    async def volume_forks(self, volume: str, ref: str) -> list[str]:
        """The refs forked from ``ref``, sorted.

        Raises:
            VolumeNotFoundError: the volume or the ref is missing.
        """

    @abc.abstractmethod
    async def volume_retain(
        self, volume: str, keep_versions: int | None, keep_for: float | None, now: float
    ) -> None:
        """Record ``volume``'s retention policy (both None: keep every version)."""

    @abc.abstractmethod
    async def volume_gc(self, volume: str | None, now: float, *, dry_run: bool = False) -> VolumeGc:
        """Drop the versions of ``volume`` (None: every volume with a policy) that
        its policy lets go, and every object no remaining version reaches.

        Raises:
            VolumeNotFoundError: ``volume`` does not exist.
        """

    @abc.abstractmethod
    async def volume_pin(
        self, volume: str, ref: str, version: int | None, *, run_id: str, now: float
    ) -> int | None:
        """The id of the version a run's task reads (None: the head of ``ref``), and in
        the same transaction a pin of it for ``run_id``: while that run is open,
        retention never drops the version. None when ``ref`` has no version yet.

        Raises:
            VolumeNotFoundError: the volume, the ref, or the version is missing.
        """

    @abc.abstractmethod
    async def volume_tag(
        self, volume: str, ref: str, name: str, version: int | None, now: float
    ) -> VersionInfo:
        """Tag ``version`` (None: the head of ``ref``) as ``name``, moving the tag if
        it named another version; a tagged version is never dropped.

        Raises:
            VolumeNotFoundError: the volume, the ref, or the version is missing, or
                the ref has no version yet.
        """

    @abc.abstractmethod
    async def volume_untag(self, volume: str, name: str) -> bool:
        """Remove tag ``name``; False when there was none."""

    @abc.abstractmethod
    async def volume_tags(self, volume: str) -> dict[str, int]:
        """Every tag of ``volume`` and the version it names, by tag name.

        Raises:
            VolumeNotFoundError: the volume is missing.
        """
