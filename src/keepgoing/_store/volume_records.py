"""Plain values of volumes: what the public API returns and what crosses the store boundary.

This module imports nothing from keepgoing, so every layer may use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "CommitOrigin",
    "FileInfo",
    "StagedCommit",
    "VersionInfo",
    "VolumeDiff",
    "VolumeGc",
]


@dataclass(frozen=True)
class VersionInfo:
    """One immutable version of a volume.

    Attributes:
        id: the version number, 1, 2, 3, ... per volume (shared by all its refs).
        parent_id: the version it was made from (``None`` for a ref's first).
        created_at: commit time, UNIX seconds.
        ref: the ref it was committed on (``"main"`` unless forked).
        message: what the commit says it did.
        volume: the volume's name.
        paths: the paths added, changed or removed relative to ``parent_id``.
        run_id: the run whose task made it, or ``None`` for a write outside a task.
        step: that task's step number (its command sequence in the run).
        attempt: the attempt of that step that made it.
    """

    id: int
    parent_id: int | None
    created_at: float
    ref: str
    message: str
    volume: str = ""
    paths: tuple[str, ...] = ()
    run_id: str | None = None
    step: int | None = None
    attempt: int | None = None


@dataclass(frozen=True)
class FileInfo:
    """A file in one version of a volume.

    Attributes:
        path: normalised, relative, ``/``-separated. In a non-recursive
            listing a sub-folder appears once, with a trailing ``/``, its
            total size, its newest ``updated_at`` and an empty ``hash``.
        size: bytes.
        updated_at: commit time of the version that last wrote this content.
        hash: SHA-256 of the content, hex.
    """

    path: str
    size: int
    updated_at: float
    hash: str

    @property
    def is_dir(self) -> bool:
        """Whether this entry is a sub-folder of a non-recursive listing."""
        return self.path.endswith("/")


@dataclass(frozen=True)
class VolumeDiff:
    """What changed from version ``a`` to version ``b`` (``None``: the empty volume).

    Attributes:
        added: paths in ``b`` only, sorted.
        removed: paths in ``a`` only, sorted.
        changed: paths in both whose content differs, sorted.
        unified: a unified diff per path, for text files (UTF-8, at most 1 MiB);
            binary and larger files have none.
    """

    a: int | None
    b: int | None
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unified: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    def text(self) -> str:
        """Every unified diff, in path order, as one text."""
        return "".join(self.unified[path] for path in sorted(self.unified))


@dataclass(frozen=True)
class StagedCommit:
    """A change set for one ref of one volume, applied as one new version.

    The store applies it on the ref's head *at commit time* (never on a stale
    base): start from the head (or from version ``restore`` when given), drop
    ``removes``, then write ``puts``. ``fork_from`` = ``(ref, version)``
    creates ``ref`` at that version (None: at no version, for a fork of a ref
    that had none) first if it does not exist yet.
    """

    volume: str
    ref: str = "main"
    puts: tuple[tuple[str, bytes], ...] = ()
    removes: tuple[str, ...] = ()
    restore: int | None = None
    fork_from: tuple[str, int | None] | None = None
    message: str = ""

    @property
    def has_changes(self) -> bool:
        """Whether applying it makes a new version."""
        return bool(self.puts or self.removes) or self.restore is not None


@dataclass(frozen=True)
class CommitOrigin:
    """The task attempt that made a commit (recorded on its version)."""

    run_id: str
    step: int
    attempt: int


@dataclass(frozen=True)
class VolumeGc:
    """What one volume garbage collection dropped (or, dry, would drop)."""

    volume: str | None
    #: ``(volume, version id)`` of each version dropped, oldest first.
    versions: tuple[tuple[str, int], ...] = ()
    #: Objects (chunks, manifests, chunk lists) no kept version reaches.
    objects: int = 0
    dry_run: bool = False
