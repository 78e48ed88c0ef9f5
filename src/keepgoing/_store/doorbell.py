"""Cross-process wake-ups for a store without a notification channel (SQLite).

Every process that waits binds a Unix datagram socket in a folder keyed by
the database path; a writer that makes work runnable sends one byte to each
socket there. Waiters in the ringing process are woken directly. A lost
datagram costs only latency: waiters also poll with a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import socket
import tempfile
import threading
import weakref

__all__ = ["Doorbell", "LocalBell", "WaitKey"]


class WaitKey:
    """One waiter's identity across its waits on ``wait_for_change``.

    The bell remembers, by weak reference, the count each key last saw, so a
    key must be weak-referable (a plain ``object()`` is not) and its memory
    goes when the waiter drops it.
    """

    __slots__ = ("__weakref__",)


class LocalBell:
    """In-process waiters, each on its own event loop, that never miss a ring.

    A counter goes up on every ring. Each waiter key (the caller's object, or
    its asyncio task) remembers the count it last saw, so a ring that came
    between two waits of the same key ends the next wait at once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._version = 0
        self._seen: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    def ring(self) -> None:
        with self._lock:
            self._version += 1
            waiters = list(self._waiters)
        for loop, event in waiters:
            with contextlib.suppress(RuntimeError):  # that loop has closed
                loop.call_soon_threadsafe(event.set)

    async def wait(self, timeout: float, key: object | None = None) -> None:
        owner = key if key is not None else asyncio.current_task()
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        waiter = (loop, event)
        with self._lock:
            if owner is not None and self._seen.get(owner, self._version) != self._version:
                self._seen[owner] = self._version
                return
            self._waiters.append(waiter)
        try:
            async with asyncio.timeout(max(0.0, timeout)):
                await event.wait()
        except TimeoutError:
            pass
        finally:
            with self._lock:
                self._waiters.remove(waiter)
                if owner is not None:
                    self._seen[owner] = self._version


class Doorbell:
    """A :class:`LocalBell` plus Unix datagram sockets for other processes."""

    def __init__(self, key: str) -> None:
        digest = hashlib.sha1(key.encode()).hexdigest()[:16]
        self.folder = os.path.join(tempfile.gettempdir(), f"keepgoing-{os.getuid()}", digest)
        self.local = LocalBell()
        self._lock = threading.Lock()
        self._sender: socket.socket | None = None
        self._receiver: socket.socket | None = None
        self._reader_loop: asyncio.AbstractEventLoop | None = None
        self._path = ""

    def ring(self) -> None:
        """Wake every waiter, here and in other processes. Never raises."""
        self.local.ring()
        try:
            names = os.listdir(self.folder)
        except OSError:
            return
        with self._lock:
            if self._sender is None:
                self._sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                self._sender.setblocking(False)
            for name in names:
                path = os.path.join(self.folder, name)
                if path == self._path:
                    continue
                try:
                    self._sender.sendto(b"!", path)
                except (ConnectionRefusedError, FileNotFoundError):
                    with contextlib.suppress(OSError):
                        os.unlink(path)  # its process is gone
                except OSError:
                    pass  # a full buffer means that waiter is already due to wake

    async def wait(self, timeout: float, key: object | None = None) -> None:
        self._listen(asyncio.get_running_loop())
        await self.local.wait(timeout, key)

    def _listen(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._reader_loop is loop:
            return
        self.close()
        try:
            os.makedirs(self.folder, exist_ok=True)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            path = os.path.join(self.folder, f"{os.getpid()}-{id(self):x}.sock")
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            sock.bind(path)
            sock.setblocking(False)
            loop.add_reader(sock.fileno(), self._on_readable, sock)
        except (OSError, NotImplementedError):
            return  # no sockets here: waiters fall back to their poll timeout
        self._receiver, self._reader_loop, self._path = sock, loop, path

    def _on_readable(self, sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while sock.recv(16):
                pass
        self.local.ring()

    def close(self) -> None:
        sock, loop = self._receiver, self._reader_loop
        self._receiver, self._reader_loop = None, None
        if sock is not None:
            if loop is not None and not loop.is_closed():
                with contextlib.suppress(Exception):
                    loop.remove_reader(sock.fileno())
            sock.close()
            with contextlib.suppress(OSError):
                os.unlink(self._path)
        if self._sender is not None:
            self._sender.close()
            self._sender = None
