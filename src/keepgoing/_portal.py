"""A private event loop on a daemon thread, so sync callers can use the async store."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["Portal"]

T = TypeVar("T")


class Portal:
    def __init__(self, name: str = "keepgoing-client") -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()
        self._closed = False

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the portal's loop and wait for its result."""
        if self._closed:
            coro.close()
            raise RuntimeError("this client is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
