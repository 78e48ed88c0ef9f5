"""How a synchronous :class:`~keepgoing.Volume` reaches the asynchronous store.

Every store call runs on one private event loop on a daemon thread (a
:class:`~keepgoing._portal.Portal`), whatever thread the caller is on. So
the same code works in a script, in a sync task (a worker thread) and in an
async task (on the worker's loop, which the call blocks briefly but never
needs: the store answers on the portal's loop).

Stores named by URL are opened once per process and kept open. A forked
child process starts afresh: the parent's portal thread and connections do
not exist there.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from keepgoing._open_store import store_from_url
from keepgoing._portal import Portal
from keepgoing._store.protocol import Store
from keepgoing._store.url import resolve_store_url

__all__ = ["call", "shared_store", "same_store"]

T = TypeVar("T")
_lock = threading.Lock()
_portal: Portal | None = None
_stores: dict[str, Store] = {}
_pid = os.getpid()


def call(store: Store, coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` (a method call on ``store``) to completion and return its result."""

    async def on_open_store() -> T:
        await store.open()  # idempotent and cheap once open (a worker's store is)
        return await coro

    return _the_portal().call(on_open_store())


def shared_store(url: str | None) -> Store:
    """The process's store for ``url`` (default: ``KEEPGOING_STORE``, else the local file).

    Raises:
        InvalidStoreURLError: ``url`` is not a store URL.
    """
    resolved = resolve_store_url(url)
    with _lock:
        _forget_if_forked()
        store = _stores.get(resolved)
        if store is None:
            store = _stores[resolved] = store_from_url(resolved)
        return store


def same_store(store: Store, wanted: str | Store | None) -> bool:
    """Whether ``wanted`` (a Volume's ``store=`` argument) names ``store``."""
    if wanted is None or wanted is store:
        return True
    return isinstance(wanted, str) and resolve_store_url(wanted) == store.url


def _the_portal() -> Portal:
    global _portal
    with _lock:
        _forget_if_forked()
        if _portal is None:
            _portal = Portal("keepgoing-volumes")
        return _portal


def _forget_if_forked() -> None:
    global _portal, _pid
    if os.getpid() != _pid:
        _portal, _pid = None, os.getpid()
        _stores.clear()
