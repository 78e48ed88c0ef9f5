"""Durable waits other than tasks and timers: messages, sends, children, events.

Each wait is a command with a sequence number; the input that ends it names
the same number (``MessageDelivered``, ``ChildRunStarted``, ``ChildEnded``,
``EventReceived``), except messages, which arrive by name and in send order:
a ``MessageReceived`` goes to the oldest waiter for its name, or into the
inbox until a wait asks for it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

from keepgoing._history import events as ev
from keepgoing.errors import (
    WorkflowAlreadyRunningError,
    WorkflowFailedError,
    WorkflowNotRunningError,
)

__all__ = ["ContinueAsNew", "Waits"]


class ContinueAsNew(BaseException):
    """Raised by ``continue_as_new``: end this run and start a fresh one with ``inputs``."""

    def __init__(self, inputs: dict[str, Any]) -> None:
        super().__init__("continue_as_new")
        self.inputs = inputs


class Waits:
    """The open waits of one workflow instance, keyed for deterministic delivery."""

    def __init__(self, create_future: Callable[[], asyncio.Future[Any]]) -> None:
        self._future = create_future
        self._inbox: dict[str, deque[ev.MessageReceived]] = {}
        self._waiters: dict[str, deque[asyncio.Future[Any]]] = {}
        self._by_cmd: dict[int, asyncio.Future[Any]] = {}
        self._child_ends: dict[int, asyncio.Future[Any]] = {}

    # -- messages -------------------------------------------------------------
    def wait_message(self, name: str) -> asyncio.Future[Any]:
        future = self._future()
        inbox = self._inbox.get(name)
        if inbox:
            future.set_result(inbox.popleft())
        else:
            self._waiters.setdefault(name, deque()).append(future)
        return future

    def message_received(self, message: ev.MessageReceived) -> None:
        waiters = self._waiters.get(message.name)
        while waiters:
            future = waiters.popleft()
            if not future.done():  # a wait that timed out is skipped
                future.set_result(message)
                return
        self._inbox.setdefault(message.name, deque()).append(message)

    # -- waits keyed by command ---------------------------------------------------
    def expect(self, cmd: int) -> asyncio.Future[Any]:
        future = self._future()
        self._by_cmd[cmd] = future
        return future

    def expect_child(self, cmd: int) -> tuple[asyncio.Future[Any], asyncio.Future[Any]]:
        started = self.expect(cmd)
        ended = self._future()
        self._child_ends[cmd] = ended
        return started, ended

    def deliver(self, event: ev.Event) -> bool:
        """Resolve the wait ``event`` ends; False if ``event`` is not one of ours."""
        if isinstance(event, ev.MessageReceived):
            self.message_received(event)
        elif isinstance(event, ev.MessageDelivered):
            self._settle(
                self._by_cmd.pop(event.cmd, None),
                event.message_id,
                event.error,
                WorkflowNotRunningError,
            )
        elif isinstance(event, ev.ChildRunStarted):
            self._settle(
                self._by_cmd.pop(event.cmd, None),
                event.run_id,
                event.error,
                WorkflowAlreadyRunningError,
            )
        elif isinstance(event, ev.ChildEnded):
            self._child_ended(event)
        elif isinstance(event, ev.EventReceived):
            self._settle(self._by_cmd.pop(event.cmd, None), event, None, RuntimeError)
        else:
            return False
        return True

    def _child_ended(self, event: ev.ChildEnded) -> None:
        future = self._child_ends.pop(event.cmd, None)
        if event.status == "completed":
            self._settle(future, event.result, None, RuntimeError)
            return
        error = event.error or ev.ErrorInfo(type=event.status, message=f"the child {event.status}")
        exc = WorkflowFailedError(event.run_id, error.type, error.message)
        if future is not None and not future.done():
            future.set_exception(exc)

    @staticmethod
    def _settle(
        future: asyncio.Future[Any] | None,
        value: Any,
        error: ev.ErrorInfo | None,
        kind: type[BaseException],
    ) -> None:
        if future is None or future.done():
            return
        if error is None:
            future.set_result(value)
        elif kind is WorkflowAlreadyRunningError:
            future.set_exception(_AlreadyRunning(error.message))
        else:
            future.set_exception(kind(error.message))


class _AlreadyRunning(WorkflowAlreadyRunningError):
    """WorkflowAlreadyRunningError rebuilt from its recorded message."""

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)
        self.workflow_id = ""
        self.run_id = ""
