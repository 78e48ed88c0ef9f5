"""Opening a store at start-up, waiting for a database that is not there yet.

A worker or server that starts while its database restarts, fails over or
has not come up yet should wait for it, the way a running process waits out
an outage, instead of exiting and being restarted in a loop. Stores say
which failures waiting can fix by raising :class:`StoreUnavailableError`
(connection refused, "the database system is starting up", a file locked by
a migration in another process); any other :class:`StoreError` (a wrong
password, a database or role that does not exist, a read-only folder) is
raised at once, since retrying cannot fix it.

:class:`Opening` retries with jittered exponential backoff and logs one line
when the waiting starts and one when the store is open (``waiting for the store:
could not connect to PostgreSQL at postgresql://app:***@db:5432/kg: ...; retrying
with backoff``, then ``connected to the store at ... after 4.2s``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from keepgoing._backoff import backoff
from keepgoing._store.protocol import Store
from keepgoing._store.url import redact_url
from keepgoing.errors import StoreError

__all__ = ["Opening", "StoreUnavailableError", "first_line"]

log = logging.getLogger("keepgoing.store")

_BASE = 0.1  # first retry after up to 0.1 s, doubling ...
_CAP = 2.0  # ... up to 2 s: a database that is back is seen within 2 s


class StoreUnavailableError(StoreError):
    """The store cannot be reached now, for a reason that waiting may fix."""


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (or its type's name)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _delay(attempt: int) -> float:
    """From half the delay to all of it: d = min(cap, base * 2**attempt)."""
    return backoff(attempt, base=_BASE, cap=_CAP, jitter=0.5)


class Opening:
    """Opens ``store``, waiting while it is unavailable (up to ``timeout`` seconds; None:
    forever).

    :meth:`try_once` makes one attempt; :meth:`wait` retries until the store is open.
    """

    def __init__(self, store: Store, *, timeout: float | None = None) -> None:
        if timeout is not None and timeout < 0:
            raise ValueError(f"the connect timeout must be 0 or more seconds, not {timeout}")
        self.store = store
        self.timeout = timeout
        self.where = redact_url(store.url) if store.url else type(store).__name__
        self.opened = False
        self.reason: str | None = None  # why the last attempt failed, while waiting
        self._began: float | None = None
        self._attempts = 0

    @property
    def waiting(self) -> bool:
        """An attempt failed and the store is not open yet."""
        return self._began is not None and not self.opened

    async def try_once(self) -> bool:
        """One attempt. True: the store is open. False: unavailable for now (the first
        time, logs that it waits).

        Raises:
            StoreError: a failure that waiting cannot fix, or ``timeout`` has passed.
        """
        if self.opened:
            return True
        try:
            await _open(self.store)
        except StoreUnavailableError as exc:
            self._failed(exc)
            return False
        self.opened = True
        if self._began is not None:
            log.warning(
                "connected to the store at %s after %.1fs",
                self.where,
                time.monotonic() - self._began,
            )
        return True

    async def wait(self, stop: asyncio.Event | None = None) -> bool:
        """Retry until the store is open (True) or ``stop`` is set first (False).

        Raises:
            StoreError: a failure that waiting cannot fix, or ``timeout`` has passed.
        """
        stop = stop or asyncio.Event()
        while not stop.is_set():
            attempt = asyncio.ensure_future(self.try_once())
            try:
                # An attempt already under way is let finish (a connect is bounded by
                # its own timeout), so the store is never closed while it opens.
                if await asyncio.shield(attempt):
                    return True
            except asyncio.CancelledError:
                with contextlib.suppress(Exception):
                    await attempt
                raise
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self._next_delay())
        return False

    def _failed(self, exc: StoreUnavailableError) -> None:
        now = time.monotonic()
        self._attempts += 1
        self.reason = first_line(exc)
        if self._began is None:
            self._began = now
            limit = "" if self.timeout is None else f" for up to {self.timeout:g}s"
            log.warning("waiting for the store: %s; retrying with backoff%s", self.reason, limit)
        if self.timeout is not None and now - self._began >= self.timeout:
            raise StoreError(
                f"gave up waiting for the store after {self.timeout:g}s (--connect-timeout): "
                f"{self.reason}"
            ) from exc

    def _next_delay(self) -> float:
        delay = _delay(self._attempts)
        if self.timeout is not None and self._began is not None:
            left = self._began + self.timeout - time.monotonic()
            delay = max(0.0, min(delay, left))
        return delay


async def _open(store: Store) -> None:
    """One attempt to open ``store``, in a thread where the store can open without an
    event loop, so a slow connect never holds up the loop (the server answers probes
    meanwhile). ``try_open_sync`` makes one attempt where ``open`` would itself wait a
    while for a lock."""
    once = getattr(store, "try_open_sync", None)
    if callable(once):
        await asyncio.get_running_loop().run_in_executor(None, once)
    else:
        await store.open()
