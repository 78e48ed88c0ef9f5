"""What ``/proc`` says about a process: read by the worker (its identity) and by the
group backends (which worker a replica runs), so neither imports the other."""

from __future__ import annotations

import ctypes
import ctypes.util
import secrets
import sys

__all__ = ["NONCE_ENV", "new_nonce", "read_text", "refuse_inspection", "start_ticks"]

_PR_SET_DUMPABLE = 4

#: The environment variable a ``keepgoing worker``'s nonce arrives in: whoever starts
#: one sets it to :func:`new_nonce`, and a kill proves the process by it
#: (``_worker/process.py``).
NONCE_ENV = "KEEPGOING_WORKER_NONCE"


def new_nonce() -> str:
    """A fresh nonce for a worker about to be started."""
    return secrets.token_hex(32)


def read_text(path: str) -> str | None:
    """The stripped text of a small file, or None when it is missing or empty."""
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read().strip() or None
    except OSError:
        return None


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot; None if it is gone."""
    stat = read_text(f"/proc/{pid}/stat")
    if stat is None:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        return int(fields[19])  # field 22 of the whole line
    except (IndexError, ValueError):
        return None


def refuse_inspection() -> bool:
    """Mark this process not dumpable (Linux ``PR_SET_DUMPABLE`` 0): processes of the same
    user that are not root can then neither read its ``/proc/<pid>/environ`` (a
    server's provider keys, its store URL, its secret key) nor attach to it. Children
    are dumpable again after ``exec``. Whether it was done."""
    if sys.platform != "linux":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        return int(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False
