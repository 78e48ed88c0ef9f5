"""Staged writes: what a task attempt (or a batch) has written but not committed yet.

Inside a task attempt the worker sets :data:`attempt_volumes` to an
:class:`AttemptVolumes`. Every write a :class:`~keepgoing.Volume` makes there
goes into a :class:`Stage` for its (volume, ref), and reads look at the stage
before the store, so the task sees its own writes. When the attempt returns,
the worker takes :meth:`AttemptVolumes.commits` and hands them to the store
with the completion, which applies them in the same transaction. A failed,
timed-out or killed attempt's stages are simply dropped: nothing of them is
ever stored.

``batch_upload()`` uses the same :class:`Stage` to gather writes into one
commit outside a task.
"""

from __future__ import annotations

import contextvars
import hashlib
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from keepgoing._store.volume_records import FileInfo, StagedCommit
from keepgoing.errors import VolumeError

if TYPE_CHECKING:
    from keepgoing._store.protocol import Store

__all__ = ["HEAD", "AttemptVolumes", "Head", "Stage", "attempt_volumes", "current_attempt"]


class Head:
    """The type of :data:`HEAD`."""

    def __repr__(self) -> str:
        return "HEAD"


HEAD = Head()  # a stage's reads fall through to the ref's head


@dataclass
class Stage:
    """Uncommitted changes to one ref: ``files`` maps a path to its new bytes, or
    to None when it was removed, on top of ``base``: the ref's head, or the
    version a rollback (or a fork made in this attempt) starts from."""

    volume: str
    ref: str
    base: int | Head | None = HEAD
    restore: int | None = None
    fork_from: tuple[str, int | None] | None = None
    files: dict[str, bytes | None] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)

    def put(self, path: str, data: bytes, now: float) -> None:
        self.files[path] = data
        self.times[path] = now

    def remove(self, path: str) -> None:
        self.files[path] = None
        self.times.pop(path, None)

    def rollback(self, version: int) -> None:
        """Start over from ``version``: earlier staged writes are superseded."""
        self.files.clear()
        self.times.clear()
        self.restore = self.base = version

    def merge(self, other: Stage) -> None:
        """Apply ``other``'s changes (a finished batch) on top of this stage."""
        if other.restore is not None:
            self.rollback(other.restore)
        self.files.update(other.files)
        self.times.update(other.times)
        self.messages.extend(other.messages)

    def note(self, message: str | None) -> None:
        if message:
            self.messages.append(message)

    @property
    def empty(self) -> bool:
        return not self.files and self.restore is None and self.fork_from is None

    def view(self, committed: list[FileInfo]) -> list[FileInfo]:
        """``committed`` (the listing of :attr:`base`) with this stage's changes applied."""
        files = {f.path: f for f in committed}
        for path, data in self.files.items():
            if data is None:
                files.pop(path, None)
            else:
                digest = hashlib.sha256(data).hexdigest()
                files[path] = FileInfo(path, len(data), self.times.get(path, 0.0), digest)
        return [files[p] for p in sorted(files)]

    def commit(self, default_message: str) -> StagedCommit:
        puts = tuple((p, d) for p, d in self.files.items() if d is not None)
        removes = tuple(p for p, d in self.files.items() if d is None)
        return StagedCommit(
            volume=self.volume,
            ref=self.ref,
            puts=puts,
            removes=removes,
            restore=self.restore,
            fork_from=self.fork_from,
            message="; ".join(self.messages) or default_message,
        )


class AttemptVolumes:
    """The stages of one task attempt, and the store the worker runs it on.

    Thread-safe: a sync task runs in a worker thread, and its writes are
    read by the worker's loop when the attempt ends.
    """

    def __init__(
        self, store: Store, *, run_id: str, cmd: int, attempt: int, task_name: str
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.cmd = cmd
        self.attempt = attempt
        self.task_name = task_name
        self.lock = threading.RLock()
        self._stages: dict[tuple[str, str], Stage] = {}
        self._closed = False
        #: The version each (volume, ref, version asked) read resolved to, pinned
        #: for the run (a head is resolved once: the attempt reads one snapshot).
        self.pins: dict[tuple[str, str, int | None], int | None] = {}

    def stage(self, volume: str, ref: str) -> Stage:
        """The stage of (``volume``, ``ref``), created empty on first use.

        Raises:
            VolumeError: the attempt has ended (a late write of a timed-out task).
        """
        with self.lock:
            if self._closed:
                raise VolumeError(
                    f"task {self.task_name!r} attempt {self.attempt} has ended; "
                    "its volume writes can no longer be recorded"
                )
            return self._stages.setdefault((volume, ref), Stage(volume, ref))

    def peek(self, volume: str, ref: str) -> Stage | None:
        """The stage of (``volume``, ``ref``) if this attempt wrote to it."""
        with self.lock:
            return self._stages.get((volume, ref))

    def commits(self) -> tuple[StagedCommit, ...]:
        """Close the attempt and return its change sets, in first-write order."""
        with self.lock:
            self._closed = True
            message = f"task {self.task_name} (step {self.cmd}, attempt {self.attempt})"
            return tuple(s.commit(message) for s in self._stages.values() if not s.empty)

    def discard(self) -> None:
        """Close the attempt and drop its stages (it failed)."""
        with self.lock:
            self._closed = True
            self._stages.clear()


attempt_volumes: contextvars.ContextVar[AttemptVolumes | None] = contextvars.ContextVar(
    "keepgoing_attempt_volumes", default=None
)


def current_attempt() -> AttemptVolumes | None:
    """The running task attempt's volumes, or None outside a task."""
    return attempt_volumes.get()
