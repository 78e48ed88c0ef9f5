"""What ``/proc`` says about a process: read by the worker (its identity), by the
group backends (which worker a replica runs), by the store (whether a stop was asked
for from inside the worker it stops) and by the server (which local process sent a
request), so none of them imports another."""

from __future__ import annotations

import ctypes
import ctypes.util
import ipaddress
import os
import secrets
import sys

__all__ = [
    "NONCE_ENV",
    "in_tree",
    "new_nonce",
    "parent_of",
    "peer_pid",
    "read_text",
    "refuse_inspection",
    "start_ticks",
]

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


def _stat_fields(pid: int) -> list[str] | None:
    stat = read_text(f"/proc/{pid}/stat")
    if stat is None:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ')'.
    return stat[stat.rfind(")") + 2 :].split()


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot; None if it is gone."""
    fields = _stat_fields(pid)
    try:
        return int(fields[19]) if fields is not None else None  # field 22 of the whole line
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


def parent_of(pid: int) -> int | None:
    """The parent of process ``pid``; None if it is gone."""
    fields = _stat_fields(pid)
    try:
        return int(fields[1]) if fields is not None else None  # field 4 of the whole line
    except (IndexError, ValueError):
        return None


def in_tree(pid: int, root: int, root_ticks: int | None = None) -> bool:
    """Whether process ``pid`` is process ``root`` or one of its descendants (``root``
    checked against its start time when given, so a reused pid never matches)."""
    if root_ticks is not None and start_ticks(root) != root_ticks:
        return False
    seen = 0
    current: int | None = pid
    while current is not None and current > 1 and seen < 4096:
        if current == root:
            return True
        current = parent_of(current)
        seen += 1
    return False


def peer_pid(peer: tuple[str, int], local: tuple[str, int]) -> int | None:
    """The process on this machine holding the TCP connection from ``peer`` to
    ``local`` (both ``(host, port)``), or None: not a connection from this machine,
    or its process cannot be read (another user's, without the right to see it).

    Found as the kernel lists it: the socket in ``/proc/net/tcp`` (or ``tcp6``) whose
    local end is ``peer`` and remote end ``local``, then the process with that socket
    among its open files.
    """
    inode = _socket_inode(peer, local)
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    return pid
            except OSError:
                continue
    return None


def _socket_inode(peer: tuple[str, int], local: tuple[str, int]) -> str | None:
    for table, family in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 6)):
        want = (_endpoint(peer, family), _endpoint(local, family))
        if None in want:
            continue
        try:
            with open(table, encoding="ascii") as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and (fields[1].upper(), fields[2].upper()) == want:
                return fields[9]
    return None


def _endpoint(address: tuple[str, int], family: int) -> str | None:
    """``(host, port)`` as ``/proc/net/tcp{,6}`` writes it: the address's bytes in the
    kernel's word order (little-endian words here), a colon, the port in hex."""
    host, port = address
    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(host)
    except ValueError:
        return None
    # A v4 client of a dual-stack server is seen as ::ffff:a.b.c.d; its own socket is v4.
    if family == 4 and isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    elif family == 6 and ip.version == 4:
        ip = ipaddress.IPv6Address(f"::ffff:{ip}")
    if ip.version != family:
        return None
    raw = ip.packed
    words = [raw[i : i + 4][::-1] for i in range(0, len(raw), 4)]
    return "".join(w.hex() for w in words).upper() + f":{port:04X}"
