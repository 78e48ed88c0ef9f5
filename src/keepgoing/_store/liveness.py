"""Liveness tokens: a lock a worker holds for exactly as long as its process lives.

A lease says a worker renewed recently; it cannot tell a dead worker from one
whose main thread waits for the GIL behind a long C call. A token can: the
kernel (or the database) frees it when the process dies, however busy the
process was. The lease reaper reads each lease owner's token (recorded in its
registry row) with :func:`token_state` and applies
:func:`~keepgoing._store.transitions.reap_reason`.

On SQLite the token is an ``fcntl.flock`` on a per-worker file, in a folder
keyed by the database path next to the doorbell's. The file is created under a
temporary name, locked, then renamed into place, so a reader never sees it
unlocked while its owner lives. A reader probes with a non-blocking lock on
its own descriptor: refused means held. The holder puts the file back if
something (a ``/tmp`` cleaner) removed it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import threading

__all__ = ["FileTokens", "file_token_state"]


class FileTokens:
    """The lock files of the workers of one database that run in this process."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._held: dict[str, tuple[str, int]] = {}  # worker id -> (path, fd)

    def path_of(self, worker_id: str) -> str:
        digest = hashlib.sha1(worker_id.encode()).hexdigest()[:20]
        return os.path.join(self.folder, f"{digest}.lock")

    def hold(self, worker_id: str) -> str:
        """Lock ``worker_id``'s file (creating it); returns its path, the token to record."""
        with self._lock:
            if worker_id in self._held:
                return self._held[worker_id][0]
            os.makedirs(self.folder, mode=0o700, exist_ok=True)
            path = self.path_of(worker_id)
            self._held[worker_id] = (path, _create_locked(path))
            return path

    def refresh(self) -> None:
        """Put back any held file that was removed or replaced under its holder."""
        with self._lock:
            for worker_id, (path, fd) in list(self._held.items()):
                try:
                    same = os.stat(path).st_ino == os.fstat(fd).st_ino
                except OSError:
                    same = False
                if not same:
                    os.close(fd)
                    os.makedirs(self.folder, mode=0o700, exist_ok=True)
                    self._held[worker_id] = (path, _create_locked(path))

    def release(self, worker_id: str) -> None:
        with self._lock:
            held = self._held.pop(worker_id, None)
        if held is not None:
            path, fd = held
            with contextlib.suppress(OSError):
                os.unlink(path)
            os.close(fd)

    def release_all(self) -> None:
        for worker_id in list(self._held):
            self.release(worker_id)


def _create_locked(path: str) -> int:
    temporary = f"{path}.{os.getpid()}-{threading.get_ident()}.new"
    fd = os.open(temporary, os.O_RDONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.replace(temporary, path)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return fd


def file_token_state(path: str) -> bool | None:
    """True if another open file holds ``path``'s lock (its owner lives), False if not.

    A missing file is free too: the holder made it before its first lease and
    keeps it while it lives. None (unknown) for a file this process may not
    open, another user's: that owner's leases then expire as they would
    without a token.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)  # also drops the probe's own lock, if it got one
    return False
