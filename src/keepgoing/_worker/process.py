"""Which process a worker is, and killing exactly that process.

A ``keepgoing worker`` records :func:`identity` in its registry row
(``info["process"]``): its host name, the machine id and boot id of the machine
it runs on, its pid, its process start time (``/proc/<pid>/stat``, in clock
ticks since boot) and the SHA-256 of its *nonce*.

Everything in a registry row but the nonce can be read by anyone (``/proc``,
``GET /api/v1/workers``), and a row can be written by anyone who can write the
store, so the row alone proves nothing. The nonce is a random value handed to
the worker in its environment at ``exec`` (:data:`NONCE_ENV`): whoever starts a
``keepgoing worker`` sets it (the local group backend, ``keepgoing dev``), and a
worker started without one starts itself again with one
(:func:`ensure_nonce`). The worker takes it out of ``os.environ`` at once, so
its children never inherit it, but the kernel keeps the environment the process
was started with in ``/proc/<pid>/environ``, which only the process's own user
and root can read. :func:`kill` sends ``SIGKILL`` only when the process at the
row's pid (held through a pidfd, so the pid cannot be reused between the check
and the signal) started at the recorded time *and* holds a nonce whose hash is
the row's: a forged row naming another process is refused (``unproven``).
Anything else is refused with a :class:`NotKillable` that says why.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import signal
import socket
import sys
from dataclasses import dataclass
from typing import Any

from keepgoing._procinfo import NONCE_ENV, new_nonce, start_ticks
from keepgoing._procinfo import read_text as _read

__all__ = [
    "KILLABLE",
    "NONCE_ENV",
    "Killed",
    "NotKillable",
    "ensure_nonce",
    "identity",
    "kill",
    "new_nonce",
    "take_nonce",
    "this_machine",
]

#: ``info["process"]["kind"]`` of a worker a kill may end: a plain ``keepgoing worker``.
KILLABLE = "keepgoing worker"
_NONCE = re.compile(r"^[0-9a-f-]{32,128}$")  # hex, or a pod's uid
_nonce: str | None = None


class NotKillable(Exception):
    """The worker cannot be killed from here; the message says why.

    ``reason``: ``no_identity``, ``not_plain``, ``other_host``, ``this_process``,
    ``gone``, ``pid_reused``, ``unproven`` (the process does not hold the row's
    nonce: the row does not describe it) or ``not_permitted``.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Killed:
    pid: int
    host: str


def this_machine() -> dict[str, str | None]:
    """This machine: its host name, machine id and boot id (None where unknown)."""
    return {
        "host": socket.gethostname(),
        "machine_id": _read("/etc/machine-id") or _read("/var/lib/dbus/machine-id"),
        "boot_id": _read("/proc/sys/kernel/random/boot_id"),
    }


def nonce_hash(nonce: str) -> str:
    return hashlib.sha256(nonce.encode("ascii")).hexdigest()


def take_nonce() -> str | None:
    """This process's nonce: taken out of ``os.environ`` (so no child inherits it) the
    first time, remembered after. None when the process was started without one."""
    global _nonce
    given = os.environ.pop(NONCE_ENV, None)
    if _nonce is None and given is not None and _NONCE.match(given):
        _nonce = given
    return _nonce


def ensure_nonce() -> None:
    """Make sure this worker process was started with a nonce: without one, start this
    command line again in this process's place (same pid) with a fresh one in its
    environment. Where there is no ``/proc`` nothing can be proven; nothing is done."""
    if take_nonce() is not None or not os.path.exists(f"/proc/{os.getpid()}/environ"):
        return
    os.environ[NONCE_ENV] = new_nonce()
    os.execv(sys.executable, sys.orig_argv)


def renew_nonce() -> None:
    """Before this process runs its command line again (a new worker, same pid)."""
    os.environ[NONCE_ENV] = new_nonce()


def identity(kind: str = KILLABLE) -> dict[str, Any]:
    """What this process records about itself in its registry row."""
    pid = os.getpid()
    nonce = take_nonce()
    return {
        **this_machine(),
        "pid": pid,
        "start_ticks": start_ticks(pid),
        "kind": kind,
        "nonce_sha256": nonce_hash(nonce) if nonce is not None else None,
    }


def kill(info: dict[str, Any], pid: int, host: str) -> Killed:
    """SIGKILL the worker whose registry row has ``info``, ``pid`` and ``host``.

    Raises:
        NotKillable: it is not a plain ``keepgoing worker``, runs on another machine
            (or this very process), is gone, its pid now names another process, or
            this process may not signal it.
    """
    me = this_machine()
    process = info.get("process")
    if not isinstance(process, dict) or process.get("start_ticks") is None:
        raise NotKillable(
            "no_identity",
            "this worker did not register its process identity (it runs inside another "
            "program, or on a platform without /proc), so it cannot be killed safely",
        )
    if process.get("kind") != KILLABLE:
        raise NotKillable(
            "not_plain",
            f"this worker is a {process.get('kind')!r}, not a plain `keepgoing worker`; "
            "only those are killed by pid",
        )
    same = process.get("machine_id") == me["machine_id"] and process.get("boot_id") == me["boot_id"]
    if not same or process.get("host") != me["host"]:
        raise NotKillable(
            "other_host",
            f"this worker runs on host {host!r}, not on this server's host {me['host']!r}; "
            "a worker on another machine cannot be killed from here (a worker group's "
            "instances are killed through the groups backend)",
        )
    if pid == os.getpid() or process.get("pid") != pid:
        raise NotKillable(
            "this_process", "this worker runs inside the server's own process; stop it instead"
        )
    digest = process.get("nonce_sha256")
    if not isinstance(digest, str) or not digest:
        raise NotKillable(
            "no_identity",
            "this worker registered no nonce (it was started by an older keepgoing, or "
            "without /proc), so nothing proves which process it is; it is not killed",
        )
    return _signal(pid, int(process["start_ticks"]), host, digest)


def _holds_nonce(pid: int, digest: str) -> bool:
    """Whether process ``pid`` was started with a nonce whose SHA-256 is ``digest``."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except PermissionError:
        raise NotKillable(
            "not_permitted",
            f"this server's user may not read process {pid} (it belongs to another user)",
        ) from None
    except OSError:
        return False
    prefix = NONCE_ENV.encode() + b"="
    for entry in raw.split(b"\0"):
        if entry.startswith(prefix):
            found = hashlib.sha256(entry[len(prefix) :]).hexdigest()
            return hmac.compare_digest(found, digest)
    return False


def _signal(pid: int, ticks: int, host: str, digest: str) -> Killed:
    fd = None
    with contextlib.suppress(AttributeError, OSError):
        fd = os.pidfd_open(pid)  # Linux: the pid cannot be reused while we hold this
    try:
        now = start_ticks(pid)
        if now is None:
            raise NotKillable("gone", f"process {pid} is gone: the worker has already exited")
        if now != ticks:
            raise NotKillable(
                "pid_reused",
                f"process {pid} is not this worker any more (it started at another time): "
                "the worker exited and its pid was reused, so nothing was signalled",
            )
        if not _holds_nonce(pid, digest):
            raise NotKillable(
                "unproven",
                f"process {pid} does not hold the nonce this worker registered: the row does "
                "not describe that process (a forged or stale row), so nothing was signalled",
            )
        try:
            if fd is not None:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            raise NotKillable("gone", f"process {pid} exited before the signal") from None
        except PermissionError:
            raise NotKillable(
                "not_permitted",
                f"this server's user may not signal process {pid} (it belongs to another user)",
            ) from None
        return Killed(pid=pid, host=host)
    finally:
        if fd is not None:
            os.close(fd)
