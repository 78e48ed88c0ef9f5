"""The threads sync task bodies run on: one per running body, never a wait for a free one.

A thread cannot be interrupted, so a sync body that overruns its timeout keeps
its thread after its attempt has ended. With a fixed pool such hung threads
pile up until healthy bodies queue behind them and time out without ever
starting. Here a body always starts at once: on an idle thread if there is
one, else on a new thread. Up to ``keep_idle`` idle threads are kept, so that
a step costs no thread start; one more finishing its call then ends.

:meth:`TaskThreads.abandon` marks the call of an attempt that ended while its
thread runs on; :attr:`TaskThreads.hung` counts those until they return. The
threads are daemons, so a hung one never keeps the process from exiting.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

__all__ = ["TaskThreads"]

T = TypeVar("T")

_Item = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class TaskThreads(Executor):
    def __init__(self, *, keep_idle: int = 16, name: str = "keepgoing-task") -> None:
        self._keep_idle = keep_idle
        self._name = name
        self._lock = threading.Lock()
        self._items: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._idle = 0  # threads waiting for an item, minus items already handed to them
        self._threads = 0
        self._abandoned: set[Future[Any]] = set()
        self._closed = False

    @property
    def hung(self) -> int:
        """Calls whose attempt has ended while their thread still runs them."""
        with self._lock:
            return len(self._abandoned)

    @property
    def threads(self) -> int:
        with self._lock:
            return self._threads

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot run a task body after shutdown")
            self._items.put((future, fn, args, kwargs))
            if self._idle > 0:
                self._idle -= 1  # that thread takes this item
                return future
            self._threads += 1
        thread = threading.Thread(target=self._main, name=f"{self._name}-{id(future):x}")
        thread.daemon = True
        thread.start()
        return future

    def abandon(self, future: Future[Any]) -> None:
        """The attempt of ``future`` ended (timed out, lost, cancelled) before it did."""
        with self._lock:
            if future.done():
                return
            self._abandoned.add(future)
        future.add_done_callback(self._returned)

    def _returned(self, future: Future[Any]) -> None:
        with self._lock:
            self._abandoned.discard(future)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
            idle = self._idle
            self._idle = 0
        if cancel_futures:
            while True:
                try:
                    item = self._items.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        for _ in range(idle):
            self._items.put(None)

    def _main(self) -> None:
        while True:
            item = self._items.get()
            if item is None:
                with self._lock:
                    self._threads -= 1
                return
            _run(item)
            del item
            with self._lock:
                if self._closed or self._idle >= self._keep_idle:
                    self._threads -= 1
                    return
                self._idle += 1


def _run(item: _Item) -> None:
    future, fn, args, kwargs = item
    if not future.set_running_or_notify_cancel():
        return
    try:
        result = fn(*args, **kwargs)
    except BaseException as exc:  # handed to the attempt, which decides what it means
        future.set_exception(exc)
    else:
        future.set_result(result)
