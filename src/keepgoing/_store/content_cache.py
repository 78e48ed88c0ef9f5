"""A bounded cache of values keyed by the hash of their content.

A content-addressed value never changes under its key, so one cache can be
shared by every store in the process, whatever database or history the key
came from. It is never asked whether a key *exists* (a rolled-back
transaction may have read one that does not), only what its value is.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Sized
from typing import Generic, TypeVar

__all__ = ["ContentCache"]

T = TypeVar("T", bound=Sized)


class ContentCache(Generic[T]):
    """Values by key, up to ``limit`` in total ``len()``, the most recently used kept.

    A value larger than ``limit // share`` is not kept, so one large value
    cannot push out everything else. Callers must not change a value they get.
    """

    def __init__(self, limit: int, *, share: int = 2) -> None:
        self.limit = limit
        self.largest = limit // share
        self.size = 0
        self._items: collections.OrderedDict[str, T] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> T | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.size = 0

    def put(self, key: str, value: T) -> None:
        if len(value) > self.largest:
            return
        with self._lock:
            if key in self._items:
                return
            self._items[key] = value
            self.size += len(value)
            while self.size > self.limit:
                _, dropped = self._items.popitem(last=False)
                self.size -= len(dropped)
