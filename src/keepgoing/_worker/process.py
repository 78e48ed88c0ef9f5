"""Which process a worker is, and killing exactly that process.

A ``keepgoing worker`` records :func:`identity` in its registry row
(``info["process"]``): its host name, the machine id and boot id of the machine
it runs on, its pid and its process start time (``/proc/<pid>/stat``, in clock
ticks since boot). :func:`kill` sends ``SIGKILL`` only when all of them still
hold, so a pid the kernel has since given to another process is never
signalled; on Linux the check and the signal go through one pidfd, so the pid
cannot be reused between them. Anything else is refused with a
:class:`NotKillable` that says why.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from dataclasses import dataclass
from typing import Any

from keepgoing._procinfo import read_text as _read
from keepgoing._procinfo import start_ticks

__all__ = ["KILLABLE", "Killed", "NotKillable", "identity", "kill", "this_machine"]

#: ``info["process"]["kind"]`` of a worker a kill may end: a plain ``keepgoing worker``.
KILLABLE = "keepgoing worker"


class NotKillable(Exception):
    """The worker cannot be killed from here; the message says why.

    ``reason``: ``no_identity``, ``not_plain``, ``other_host``, ``this_process``,
    ``gone``, ``pid_reused`` or ``not_permitted``.
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


def identity(kind: str = KILLABLE) -> dict[str, Any]:
    """What this process records about itself in its registry row."""
    pid = os.getpid()
    return {**this_machine(), "pid": pid, "start_ticks": start_ticks(pid), "kind": kind}


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
    return _signal(pid, int(process["start_ticks"]), host)


def _signal(pid: int, ticks: int, host: str) -> Killed:
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
