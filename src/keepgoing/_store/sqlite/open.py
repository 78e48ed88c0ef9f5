"""Opening a SQLite store file: its folder, and what a failure to open it means.

A missing folder is created. Failures are sorted by whether waiting can fix them
(:class:`~keepgoing._store.startup.StoreUnavailableError`): a file locked by
another process (migrating it, say), or a folder that is a link to a place that
does not exist yet (a volume not mounted yet). Everything else is a
:class:`~keepgoing.errors.StoreError` that names the file and the cause: a
read-only folder or file system, no permission, a path that is a folder, a file
that is not a database.

In-memory databases (``sqlite://``, ``memory://``, direct calls) start as a
copy of one migrated once per process (:func:`memory_copy`).
"""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
from collections.abc import Callable

from keepgoing._store.startup import StoreUnavailableError
from keepgoing.errors import StoreError

__all__ = ["make_folder", "memory_copy", "open_error"]

_LOCKED = ("SQLITE_BUSY", "SQLITE_LOCKED")
_template_lock = threading.Lock()
_template: list[sqlite3.Connection] = []  # the migrated in-memory database, once made


def memory_copy(
    migrated: Callable[[], sqlite3.Connection], pragmas: tuple[str, ...]
) -> sqlite3.Connection:
    """A new in-memory database with the schema: a copy of one that ``migrated()``
    opened once per process (migrating costs milliseconds, copying a tenth of one;
    a direct call opens a store per run). ``pragmas`` are run on each copy."""
    with _template_lock:
        if not _template:
            _template.append(migrated())
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        try:
            _template[0].backup(conn)
            for pragma in pragmas:
                conn.execute(pragma)
        except BaseException:
            conn.close()
            raise
    return conn


def make_folder(path: str) -> None:
    """Create the folder of the store file ``path`` if it does not exist.

    Raises:
        StoreUnavailableError: a folder on the way is a link to a place that does not
            exist (yet).
        StoreError: the folder cannot be created (read-only, no permission).
    """
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        dangling = _dangling_link(folder)
        if dangling is not None:
            link, target = dangling
            raise StoreUnavailableError(
                f"the folder of the SQLite store {path} is not there: {link} links to "
                f"{target}, which does not exist (yet)"
            ) from None
        raise StoreError(
            f"cannot create the folder {folder} for the SQLite store {path}: {exc.strerror or exc}"
        ) from None


def open_error(exc: sqlite3.Error, path: str) -> StoreError:
    """The error to raise for ``exc``, raised while opening or migrating ``path``."""
    name = getattr(exc, "sqlite_errorname", "")
    text = str(exc)
    if name in _LOCKED or "locked" in text:
        return StoreUnavailableError(
            f"the SQLite store {path} is locked by another process (migrating it, perhaps): {text}"
        )
    if name == "SQLITE_READONLY" or "readonly" in text:
        return StoreError(
            f"cannot write the SQLite store {path}: the file or its folder is read-only "
            f"(SQLite also writes {os.path.basename(path)}-wal and -shm beside it): {text}"
        )
    if name == "SQLITE_CANTOPEN" or "unable to open" in text:
        return StoreError(f"cannot open the SQLite store {path}: {_why_not(path)}")
    if name == "SQLITE_NOTADB" or "not a database" in text:
        return StoreError(f"{path} is not a SQLite database (or it is encrypted): {text}")
    return StoreError(f"cannot open the SQLite store {path}: {text}")


def _why_not(path: str) -> str:
    """Why SQLite could not open ``path``, asked of the file system."""
    if os.path.isdir(path):
        return "it is a folder"
    existed = os.path.exists(path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        if exc.errno == errno.EROFS:
            return "the file system is read-only"
        if exc.errno in (errno.EACCES, errno.EPERM):
            what = "the file" if existed else f"the folder {os.path.dirname(path) or '.'}"
            return f"{what} is not writable ({exc.strerror})"
        return exc.strerror or str(exc)
    os.close(fd)
    if not existed:
        os.unlink(path)
    return "SQLite could not open it (check its folder's permissions and free space)"


def _dangling_link(folder: str) -> tuple[str, str] | None:
    """The first folder on the way to ``folder`` that is a link to nowhere, and its target."""
    current = os.sep
    for part in folder.strip(os.sep).split(os.sep):
        current = os.path.join(current, part)
        if os.path.islink(current) and not os.path.exists(current):
            return current, os.readlink(current)
        if not os.path.exists(current):
            return None
    return None
