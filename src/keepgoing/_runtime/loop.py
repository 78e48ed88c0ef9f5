"""The deterministic event loop that drives a workflow coroutine.

A subclass of :class:`asyncio.AbstractEventLoop` with no I/O and no clock:
``time()`` is the activation's recorded time, ``call_at``/``call_later``
become durable timer commands, and the ready queue is drained in FIFO order,
so a given history always produces the same interleaving. ``asyncio.sleep``,
``wait_for``, ``timeout``, ``gather`` and ``create_task`` work unchanged.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
from collections import deque
from collections.abc import Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from keepgoing._runtime.instance import WorkflowInstance

__all__ = ["WorkflowLoop", "current_loop"]

_T = TypeVar("_T")

# A workflow that keeps the ready queue busy without ever waiting on history
# (``while True: await asyncio.sleep(0)``) would never settle.
_MAX_STEPS_PER_SETTLE = 1_000_000
#: The tasks a loop keeps before it first drops the done ones.
_PRUNE_FROM = 64


class _TimerOwner(Protocol):
    def start_timer(self, fire_at: float) -> int: ...
    def cancel_timer(self, cmd: int) -> None: ...


class _DurableTimer(asyncio.TimerHandle):
    __slots__ = ("cmd",)
    cmd: int


class WorkflowLoop(asyncio.AbstractEventLoop):
    """One per workflow instance; run only through :meth:`run_until_settled`."""

    def __init__(self, instance: WorkflowInstance) -> None:
        self.instance = instance
        self._ready: deque[asyncio.Handle] = deque()
        self._timers: dict[int, _DurableTimer] = {}
        self._time = 0.0
        self._running = False
        self._closed = False
        self.unhandled: list[dict[str, Any]] = []
        # Every task made on this loop (``create_task``: ``asyncio.create_task``,
        # ``ensure_future``, ``gather``, ``TaskGroup`` and ``wait_for`` all make theirs
        # there), so closing an instance never walks every task of the process.
        # Done ones are dropped as it grows, so it stays within twice the live tasks.
        self._tasks: set[asyncio.Task[Any]] = set()
        self._prune_at = _PRUNE_FROM

    # -- time and scheduling ---------------------------------------------
    def time(self) -> float:
        return self._time

    def set_time(self, value: float) -> None:
        self._time = max(self._time, value)

    def call_soon(  # type: ignore[override]
        self,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        handle = asyncio.Handle(callback, args, self, context)
        self._ready.append(handle)
        return handle

    def call_later(  # type: ignore[override]
        self,
        delay: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        return self.call_at(self._time + delay, callback, *args, context=context)

    def call_at(  # type: ignore[override]
        self,
        when: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        if math.isnan(when):
            raise ValueError("a workflow timer cannot be due at NaN; pass a number of seconds")
        if math.isinf(when) and when > 0:
            # ``asyncio.sleep(math.inf)``: it can never fire, so there is nothing to
            # record (and an infinite deadline is not JSON).
            return asyncio.TimerHandle(when, callback, args, self, context)
        if when <= self._time:
            # Already due: run on the next step. Deterministic, so no command.
            handle = asyncio.TimerHandle(when, callback, args, self, context)
            self._ready.append(handle)
            return handle
        timer = _DurableTimer(when, callback, args, self, context)
        timer.cmd = self.instance.start_timer(when)
        self._timers[timer.cmd] = timer
        return timer

    def _timer_handle_cancelled(self, handle: asyncio.TimerHandle) -> None:
        # asyncio.sleep cancels its handle in a finally even after it fired:
        # only a cancel of a still-pending durable timer is a command.
        if isinstance(handle, _DurableTimer) and self._timers.pop(handle.cmd, None) is not None:
            self.instance.cancel_timer(handle.cmd)

    def fire_timer(self, cmd: int) -> bool:
        """Deliver ``TimerFired(cmd)``; returns False if the timer was cancelled."""
        timer = self._timers.pop(cmd, None)
        if timer is None or timer.cancelled():
            return False
        self._ready.append(timer)
        return True

    def pending_timers(self) -> dict[int, float]:
        return {cmd: t.when() for cmd, t in self._timers.items()}

    # -- futures and tasks -----------------------------------------------
    def create_future(self) -> asyncio.Future[Any]:
        return asyncio.Future(loop=self)

    def create_task(
        self,
        coro: Coroutine[Any, Any, _T] | Generator[Any, None, _T],
        *,
        name: str | None = None,
        context: contextvars.Context | None = None,
    ) -> asyncio.Task[_T]:
        task = asyncio.Task(coro, loop=self, name=name, context=context)
        self._tasks.add(task)
        if len(self._tasks) >= self._prune_at:
            self._tasks = set(self.tasks())
            self._prune_at = max(_PRUNE_FROM, 2 * len(self._tasks))
        return task

    def tasks(self) -> list[asyncio.Task[Any]]:
        """The tasks made on this loop that are not done yet."""
        return [t for t in self._tasks if not t.done()]

    # -- driving -----------------------------------------------------------
    def run_until_settled(self) -> None:
        """Run ready callbacks until none is left: the workflow waits on history."""
        previous = asyncio.events._get_running_loop()
        asyncio.events._set_running_loop(self)
        self._running = True
        try:
            steps = 0
            while self._ready:
                handle = self._ready.popleft()
                if not handle.cancelled():
                    handle._run()
                steps += 1
                if steps > _MAX_STEPS_PER_SETTLE:
                    raise RuntimeError(
                        "the workflow ran a million steps without waiting on a task, timer "
                        "or message; a workflow must not busy-loop"
                    )
        finally:
            self._running = False
            asyncio.events._set_running_loop(previous)

    def get_debug(self) -> bool:
        return False

    def is_running(self) -> bool:
        return self._running

    def is_closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True
        self._ready.clear()
        self._timers.clear()

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        self.unhandled.append(context)

    def default_exception_handler(self, context: dict[str, Any]) -> None:
        self.unhandled.append(context)

    # -- I/O is not allowed in workflow code ----------------------------------
    def run_in_executor(  # type: ignore[override]
        self, executor: Any, func: Callable[..., _T], *args: Any
    ) -> Any:
        raise RuntimeError(
            "workflow code must be deterministic: run blocking or I/O work in a @task, "
            "not with run_in_executor inside the workflow"
        )

    async def getaddrinfo(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("workflow code must not do network I/O; put it in a @task")

    async def create_connection(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("workflow code must not do network I/O; put it in a @task")


def current_loop() -> WorkflowLoop | None:
    """The running workflow loop, or None outside workflow code."""
    loop = asyncio.events._get_running_loop()
    return loop if isinstance(loop, WorkflowLoop) else None
