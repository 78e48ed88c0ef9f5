"""The threads sync task bodies run on: one per running body, never a wait for a free one.

A thread cannot be interrupted, so a sync body that overruns its timeout keeps
its thread after its attempt has ended. With a fixed pool such hung threads
pile up until healthy bodies queue behind them and time out without ever
starting. Here a body always starts at once: on an idle thread if there is
one, else on a new thread. Up to ``keep_idle`` idle threads are kept, so that
a step costs no thread start; one more finishing its call then ends.

:meth:`TaskThreads.start` hands a body to a thread and returns a :class:`Call`
whose ``future`` belongs to the caller's event loop: the thread settles it
with one ``call_soon_threadsafe``, the one hop back a step needs (a
``concurrent.futures.Future`` wrapped for the loop takes a lock, a condition
and two callbacks more, on a path every sync step takes).

:meth:`TaskThreads.abandon` marks a call whose attempt ended while its thread
runs on; :attr:`TaskThreads.hung` counts those until they return. The threads
are daemons, so a hung one never keeps the process from exiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Call", "TaskThreads"]


class Call:
    """One body handed to a thread: its ``future`` on the caller's loop, and whether
    the body has returned (or raised) on its thread."""

    __slots__ = ("fn", "future", "loop", "returned")

    def __init__(
        self, fn: Callable[[], Any], loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any]
    ) -> None:
        self.fn = fn
        self.loop = loop
        self.future = future
        self.returned = False  # set on the thread, under the pool's lock


class TaskThreads:
    def __init__(self, *, keep_idle: int = 16, name: str = "keepgoing-task") -> None:
        self._keep_idle = keep_idle
        self._name = name
        self._lock = threading.Lock()
        self._items: queue.SimpleQueue[Call | None] = queue.SimpleQueue()
        self._idle = 0  # threads waiting for an item, minus items already handed to them
        self._threads = 0
        self._abandoned: set[Call] = set()
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

    def start(self, fn: Callable[[], Any]) -> Call:
        """Run ``fn()`` on a thread at once; its result (or exception) settles the
        returned call's ``future``, on the running event loop."""
        loop = asyncio.get_running_loop()
        call = Call(fn, loop, loop.create_future())
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot run a task body after shutdown")
            self._items.put(call)
            if self._idle > 0:
                self._idle -= 1  # that thread takes this item
                return call
            self._threads += 1
        thread = threading.Thread(target=self._main, name=f"{self._name}-{id(call):x}")
        thread.daemon = True
        thread.start()
        return call

    def abandon(self, call: Call) -> None:
        """The attempt of ``call`` ended (timed out, lost, cancelled) before its body did."""
        with self._lock:
            if not call.returned:
                self._abandoned.add(call)

    def shutdown(self, *, cancel_waiting: bool = False) -> None:
        """Take no more calls; idle threads end. With ``cancel_waiting``, calls not yet
        taken by a thread are cancelled and never run."""
        with self._lock:
            self._closed = True
            idle = self._idle
            self._idle = 0
        if cancel_waiting:
            while True:
                try:
                    item = self._items.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    _hand_back(item, _cancel, None)
        for _ in range(idle):
            self._items.put(None)

    def _main(self) -> None:
        while True:
            item = self._items.get()
            if item is None:
                with self._lock:
                    self._threads -= 1
                return
            self._run(item)
            del item
            with self._lock:
                if self._closed or self._idle >= self._keep_idle:
                    self._threads -= 1
                    return
                self._idle += 1

    def _run(self, call: Call) -> None:
        if call.future.cancelled():  # its attempt ended before a thread took it
            self._returned(call)
            return
        settle: Callable[[asyncio.Future[Any], Any], None]
        try:
            value = call.fn()
        except BaseException as exc:  # handed to the attempt, which decides what it means
            settle, value = _fail, exc
        else:
            settle = _succeed
        self._returned(call)
        _hand_back(call, settle, value)

    def _returned(self, call: Call) -> None:
        """``call``'s body has ended (or never ran): it is hung no longer."""
        with self._lock:
            call.returned = True
            self._abandoned.discard(call)


def _hand_back(call: Call, settle: Callable[[asyncio.Future[Any], Any], None], value: Any) -> None:
    with contextlib.suppress(RuntimeError):  # the caller's loop has closed: nobody waits
        call.loop.call_soon_threadsafe(settle, call.future, value)


def _succeed(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def _cancel(future: asyncio.Future[Any], _: object) -> None:
    future.cancel()
